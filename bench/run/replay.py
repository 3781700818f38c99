"""One chosen point replayed for the hardware-counter profiler (bench/hw/counters.py): no
timing, nothing written but one line on stderr.

    python -m bench.run.replay --op stream.copy --impl stream.copy/triton \
        --point '{"dtype": "float32", "ws_bytes": 1073741824}' [--device cuda:0] [--quick]

It rebuilds the point's inputs through the op registry and launches its impl as the runner
does (the launcher with a LaunchContext: setup and autotuning happen there, outside any
range), calls the result once (compiles, first touches), synchronizes, then calls it once
more inside the NVTX push/pop range bench.hw.counters.REPLAY_RANGE, and synchronizes again:
ncu profiles that range's kernels only. The point's axis values come as JSON (a tuple axis
as a list); the op's own point with the same values is used where the op plans one. Its last
line on stderr is "roofbench-replay: " and a JSON object with the impl's detail (the tile it
chose, which may differ from the timed row's: the replay tunes in its own process).
Exit code 2, with one sentence, for an unknown op, impl or device.
"""
from __future__ import annotations

import argparse
import json
import sys

import torch

from bench.hw import detect
from bench.hw.counters import REPLAY_RANGE
from bench.hw.device import DeviceError
from bench.measure.gate import sync
from bench.measure.registry import LaunchContext, load_all


def _as_axes(value):
    """Return a JSON value with its lists as tuples (a point's tuple axes: a GEMM shape)."""
    if isinstance(value, list):
        return tuple(_as_axes(v) for v in value)
    if isinstance(value, dict):
        return {k: _as_axes(v) for k, v in value.items()}
    return value


def find_point(op, given: dict, device, quick: bool) -> dict:
    """Return the op's planned point whose values are given's (in a quick or a full plan),
    else given itself."""
    for q in (quick, not quick):
        for point in op.points(device, q):
            if _as_axes(json.loads(json.dumps(point))) == given:
                return point
    return given


def replay(op_name: str, impl_id: str, point: dict, device_name: str | None = None, quick: bool = False) -> dict:
    """Replay one point (module docstring); return what the impl chose."""
    registry = load_all()
    if op_name not in registry.ops or impl_id not in registry.impls:
        raise ValueError(f"unknown op '{op_name}' or impl '{impl_id}': see python run_bench.py --list.")
    op, impl = registry.ops[op_name], registry.impls[impl_id]
    device = detect.resolve(device_name)
    point = find_point(op, point, device, quick)
    inputs = op.make_inputs(point, device.torch_device)
    fn = impl.launcher(inputs, LaunchContext(point, device, "warm", quick))
    fn()
    sync(device)
    torch.cuda.nvtx.range_push(REPLAY_RANGE)
    try:
        fn()
        sync(device)
    finally:
        torch.cuda.nvtx.range_pop()
    return {"op": op_name, "impl": impl_id, "detail": str(getattr(fn, "detail", "") or "")}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.run.replay",
                                 description="replay one point for a counter profiler")
    ap.add_argument("--op", required=True)
    ap.add_argument("--impl", required=True)
    ap.add_argument("--point", required=True, help="the point's axis values as a JSON object")
    ap.add_argument("--device")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    try:
        point = _as_axes(json.loads(args.point))
        if not isinstance(point, dict):
            raise ValueError(f"--point takes a JSON object of axis values, not {args.point!r}.")
        info = replay(args.op, args.impl, point, args.device, args.quick)
    except (ValueError, DeviceError) as e:
        print(f"roofbench-replay: {e}", file=sys.stderr)
        return 2
    print("roofbench-replay: " + json.dumps(info), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
