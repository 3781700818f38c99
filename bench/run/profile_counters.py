"""--counters for a profiled program (bench/run/profile.py): the top ops' DRAM bytes read by Nsight Compute,
beside the bytes each op's formula counts (ARCHITECTURE.md, rule 1: the formulas count; the counters check).

    info = attach(capture, n, device, target)    the top n ops' counter columns added to capture.rows
    target = script_target(path, argv)           the replay of a script, or call_target(fn, args, kwargs)
    python -m bench.run.profile_counters --device D --script PATH [-- ARGS]   one step replayed for ncu
    python -m bench.run.profile_counters --device D --call DIR                (api.profile's callable)

Every part of ncu's side is bench/hw/counters.py's, the main run's --counters: finding ncu, its command line,
its raw CSV, the sums over kernels, the ratios, the 10% flag and each failure's one sentence.
- Which ops: the n rows of ops.csv with the largest time share among those whose calls launched a kernel in
  the first captured step (Capture.launches: each kernel with the op that launched it).
- The replay: after the capture, the program runs once more in a process of its own under ncu: a script as
  profile runs it (bench.run.profile.script_step), or api.profile's callable with its arguments sent through
  torch.save (a module-level function; one defined in the caller's __main__ is found as multiprocessing's
  spawn finds it, by running that file under the name __mp_main__). It warms up as the capture did
  (bench.run.profile.warm_up), then runs one step inside the NVTX push/pop range
  bench.hw.counters.REPLAY_RANGE, so ncu_command's --nvtx-include profiles that step alone (the capture's
  record_function ranges reach NVTX only under torch.autograd.profiler.emit_nvtx, so the replay pushes its
  own range). ncu profiles only the kernels whose function name (ncu's --kernel-name-base function: no
  return type, namespace, template arguments or parameters; kernel_base here) is one the chosen ops launched.
- Attribution: the first captured step's kernels, kept to those names, are the sequence ncu profiles, in
  order. Each of ncu's kernels, in the order it profiled them, goes to the next captured kernel of its name
  (attribute), so a name two ops launch is told apart by where it falls in the step; a kernel of the replay
  that matches none is counted and said (the program's kernels changed between the capture and the replay).
  A chosen op's counters are the sum over its kernels (bench.hw.counters.sum_kernels).
- Per chosen op (COLUMNS): hw_dram_read_bytes, hw_dram_write_bytes and hw_dram_bytes over one step (ops.csv's
  bytes are per step), dram_ratio = hw_dram_bytes / (read_bytes + write_bytes), read_ratio, write_ratio,
  dram_flag beyond bench.hw.counters.FLAG_FRACTION (bench.hw.counters.counter_row), hw_kernels and
  kernel_names. ncu flushes the caches before each kernel (--cache-control all): the DRAM bytes are a cold
  call's, the compulsory traffic the formulas count, while the timed steps ran warm.
Where counters cannot be read (bench.hw.counters.unavailable: a CPU, no ncu; ncu's own failure, its classify
sentence: counters refused, a profiler that cannot load; a callable that cannot be sent to another process),
info["why"] says so in one sentence, the rows get no counter columns and the profile is complete.
"""
from __future__ import annotations

import argparse
import json
import re
import runpy
import sys
import tempfile
import time
import types
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import torch

from bench.hw import counters as hw
from bench.run.counters_phase import replay_env
from bench.run.profile import ProfileError, one_step, script_step, warm_up
from bench.util import Reason, first_line

DEFAULT_OPS = 5           # --counters without a number
REPLAY_TIMEOUT_S = 600.0  # the program's replay under ncu: its start, warm-up and one step's kernel replays
KEY = ("op", "module", "shapes", "dtype", "kind")  # an ops.csv row (bench.run.profile.row_key)
COLUMNS = ["hw_dram_read_bytes", "hw_dram_write_bytes", "hw_dram_bytes", "dram_ratio", "read_ratio",
           "write_ratio", "dram_flag", "hw_kernels", "kernel_names"]
REPLAY = "bench.run.profile_counters"


def kernel_base(name: str) -> str:
    """Return a kernel's function name as ncu's --kernel-name-base function has it: its demangled name without
    the return type, the parameter list, template arguments and namespaces ("void at::native::
    vectorized_elementwise_kernel<4, F>(int, T2, T3)" -> "vectorized_elementwise_kernel"); a plain name as is."""
    s = name.strip()
    if s.endswith(")"):  # the parameter list: from the "(" that the final ")" closes
        depth = 0
        for i in range(len(s) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(s[i], 0)
            if depth == 0:
                s = s[:i]
                break
    kept, depth = [], 0
    for ch in s:  # template arguments, nested ones too
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(depth - 1, 0)
        elif depth == 0:
            kept.append(ch)
    words = "".join(kept).rsplit("::", 1)[-1].split()
    return words[-1] if words else name


def choose(rows: pd.DataFrame, launches: list, n: int) -> list[tuple]:
    """Return the KEYs of the n rows with the largest time_s (so time share) among those that launched a kernel
    in launches ([(row key or None, kernel name)]), largest first (ties in the rows' order)."""
    launched = {key for key, _ in launches if key is not None}
    keyed = [(tuple(r[c] for c in KEY), float(r["time_s"])) for _, r in rows.iterrows()]
    ranked = sorted((kt for kt in keyed if kt[0] in launched), key=lambda kt: -kt[1])
    return [key for key, _ in ranked[:n]]


def kernel_names(launches: list, chosen: list[tuple]) -> list[str]:
    """Return the sorted kernel_base names the chosen ops launched (what ncu is told to profile)."""
    keys = set(chosen)
    return sorted({kernel_base(k) for key, k in launches if key in keys})


def kernel_regex(names: list[str]) -> str:
    """Return the regular expression that matches exactly these kernel names: ^(a|b)$."""
    return "^(" + "|".join(re.escape(n) for n in names) + ")$"


def command(ncu: str, program: list[str], device, names: list[str]) -> list[str]:
    """Return the ncu command line over the replay program: bench.hw.counters.ncu_command, its kernels kept to
    these function names (--kernel-name-base function)."""
    return hw.ncu_command(ncu, program, getattr(device, "compute_capability", None), kernel_regex=kernel_regex(names),
                          name_base="function")


def attribute(profiled: list[dict], launches: list, names) -> tuple[dict, int, int]:
    """Return ({row key: [ncu's kernel dicts]}, how many captured kernels ncu should have seen, how many of
    ncu's matched none): launches kept to the kernel_base names in names are the sequence ncu profiles; each
    of ncu's kernels (bench.hw.counters.parse_raw_csv), in its order, goes to the next captured kernel of its
    name (the module docstring's rule); a kernel launched between ops (key None) is matched and dropped."""
    names = set(names)
    expected = [(key, kernel_base(k)) for key, k in launches if kernel_base(k) in names]
    out: dict = {}
    pos = lost = 0
    for k in profiled:
        base = kernel_base(k["kernel"])
        j = next((j for j in range(pos, len(expected)) if expected[j][1] == base), None)
        if j is None:
            lost += 1
            continue
        if expected[j][0] is not None:
            out.setdefault(expected[j][0], []).append(k)
        pos = j + 1
    return out, len(expected), lost


def add_columns(rows: pd.DataFrame, chosen: list[tuple], assigned: dict) -> pd.DataFrame:
    """Return rows with COLUMNS: each chosen row's counters over its assigned kernels beside its counted bytes
    (bench.hw.counters.counter_row: bytes = read_bytes + write_bytes), empty for every other row."""
    out = rows.copy()
    for c in COLUMNS:
        out[c] = pd.Series([None] * len(out), index=out.index, dtype=object)
    keys = set(chosen)
    for i, r in out.iterrows():
        key = tuple(r[c] for c in KEY)
        if key not in keys:
            continue
        ks = assigned.get(key, [])
        formula = {"flops": r["flops"], "bytes": float(r["read_bytes"] + r["write_bytes"]),
                   "read_bytes": float(r["read_bytes"]), "write_bytes": float(r["write_bytes"])}
        got = hw.counter_row(formula, hw.sum_kernels(ks), ks)
        for c in COLUMNS:
            out.at[i, c] = {"dram_flag": got["flag"], "hw_kernels": got["kernels"]}.get(c, got.get(c))
    return out


def script_target(path, argv=()) -> Callable:
    """Return the replay of a script: target(folder, device) -> the replay's command line (this interpreter,
    python -m bench.run.profile_counters --script PATH -- ARGS)."""
    path = str(Path(path).resolve())

    def target(folder: Path, device) -> list[str]:
        return [sys.executable, "-m", REPLAY, "--device", device.torch_device, "--script", path, "--", *argv]
    return target


def call_target(fn, args=(), kwargs=None, name: str = "the step") -> Callable:
    """Return the replay of fn(*args, **kwargs): target(folder, device) writes call.pt (torch.save of fn, args,
    kwargs) and call.json (this sys.path and, for a function of __main__, its file) into folder and returns
    the replay's command line (--call folder). Raises bench.hw.counters.CounterError, one sentence, when fn or
    its arguments cannot be sent to another process."""
    def target(folder: Path, device) -> list[str]:
        record = {"sys_path": [p for p in sys.path if p], "main": None}
        how = "a module-level function with arguments torch.save can write, or profile a script"
        if getattr(fn, "__module__", None) == "__main__":
            main = getattr(sys.modules.get("__main__"), "__file__", None)
            if not main:
                raise hw.CounterError(f"counters replay {name} in a process of its own, and it is defined in an "
                                      f"interactive session, which that process cannot load: profile {how}",
                                      "interactive_main")
            record["main"] = str(Path(main).resolve())
        try:
            torch.save({"fn": fn, "args": tuple(args), "kwargs": dict(kwargs or {})}, folder / "call.pt")
        except Exception as e:  # noqa: BLE001 -- pickle raises several kinds (PicklingError, AttributeError, TypeError)
            raise hw.CounterError(f"counters replay {name} in a process of its own, and it cannot be sent there "
                                  f"({first_line(e)}): profile {how}", "not_sendable") from None
        (folder / "call.json").write_text(json.dumps(record))
        return [sys.executable, "-m", REPLAY, "--device", device.torch_device, "--call", str(folder)]
    return target


def received_call(folder: Path) -> Callable:
    """Return the zero-argument step call_target sent into folder: its sys.path added, its __main__ file (if
    any) run under the name __mp_main__ and made __main__ (multiprocessing's spawn does the same), then fn,
    args and kwargs loaded. Raises ProfileError, one sentence, when they cannot be loaded."""
    try:
        record = json.loads((folder / "call.json").read_text())
        sys.path[:0] = [p for p in record["sys_path"] if p not in sys.path]
        if record["main"]:
            main = types.ModuleType("__mp_main__")
            main.__file__ = record["main"]
            sys.modules["__mp_main__"] = main
            main.__dict__.update(runpy.run_path(record["main"], run_name="__mp_main__"))
            sys.modules["__main__"] = main
        got = torch.load(folder / "call.pt", weights_only=False)
    except Exception as e:  # noqa: BLE001 -- any failure to load the sent call is the replay's one sentence
        raise ProfileError(f"the step sent to the replay could not be loaded: {first_line(e)}",
                           "replay_unloadable") from None
    return lambda: got["fn"](*got["args"], **got["kwargs"])


def replay_step(step, device: str, what: str = "the step") -> int:
    """Warm step() up as the capture did (bench.run.profile.warm_up), then call it once inside the NVTX range
    bench.hw.counters.REPLAY_RANGE on a GPU (NVTX needs CUDA; a CPU has no kernel for ncu); return the
    warm-up's calls. Raises ProfileError (a step that raises)."""
    n = warm_up(step, device, what)
    nvtx = device.startswith("cuda")
    if nvtx:
        torch.cuda.nvtx.range_push(hw.REPLAY_RANGE)
    try:
        one_step(step, device, what)
    finally:
        if nvtx:
            torch.cuda.nvtx.range_pop()
    return n


def attach(cap, n: int, device, target: Callable, say: Callable[[str], None] = print,
           program: str = "the program") -> dict:
    """Read the top n ops' DRAM bytes under ncu over one replayed step (the module docstring) and set cap.rows
    to add_columns' rows; return profile.json's "counters": requested, tool, ops, flagged, kernels (ncu
    profiled), expected (the capture's kernels of those names), unmatched, seconds, and why ("" when counters
    were read; else one sentence, and cap.rows is unchanged)."""
    t0 = time.perf_counter()
    info = {"requested": n, "tool": None, "ops": 0, "flagged": 0, "why": ""}
    why = hw.unavailable(device) or ("" if cap.launches else Reason("no op of the captured step launched a kernel "
                                                                    "for ncu to profile", "no_kernel"))
    if why:
        info["why"] = why
        return info
    ncu = hw.find_ncu()
    info["tool"] = ncu
    chosen = choose(cap.rows, cap.launches, n)
    names = kernel_names(cap.launches, chosen)
    with tempfile.TemporaryDirectory(prefix="roofbench-counters-") as tmp:
        try:
            cmd = command(ncu, target(Path(tmp), device), device, names)
            say(f"roofbench: counters: replaying one step of {program} under {ncu} for the DRAM bytes of its top "
                f"{len(chosen)} ops ({len(names)} kernel names)")
            got = hw.run_profiler(cmd, REPLAY_TIMEOUT_S, replay_env())
        except hw.CounterError as e:
            info["why"] = e.reason
            return info
    assigned, expected, lost = attribute(got.kernels, cap.launches, names)
    cap.rows = add_columns(cap.rows, chosen, assigned)
    flags = cap.rows["dram_flag"].fillna("").astype(str)
    info.update(ops=len(chosen), flagged=int((flags != "").sum()), kernels=len(got.kernels), expected=expected,
                unmatched=lost, seconds=round(time.perf_counter() - t0, 1))
    return info


def main(argv=None) -> int:
    """python -m bench.run.profile_counters --device D (--script PATH [-- ARGS] | --call DIR): one step replayed
    (replay_step); its last stderr line "roofbench-replay: " and a JSON object, or, exit 2, one sentence."""
    argv = list(sys.argv[1:] if argv is None else argv)
    split = argv.index("--") if "--" in argv else len(argv)
    ap = argparse.ArgumentParser(prog=f"python -m {REPLAY}", description="replay one step of a profiled program "
                                 "for a counter profiler")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--script")
    ap.add_argument("--call", type=Path)
    args = ap.parse_args(argv[:split])
    try:
        if (args.script is None) == (args.call is None):
            raise ProfileError("give --script PATH or --call DIR: the program whose step to replay.", "no_program")
        step = script_step(args.script, argv[split + 1:]) if args.script else received_call(args.call)
        calls = replay_step(step, args.device, f"script {args.script}" if args.script else "the step")
    except ProfileError as e:
        print(f"roofbench-replay: {e}", file=sys.stderr)
        return 2
    print("roofbench-replay: " + json.dumps({"warm_up_calls": calls, "device": args.device}), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
