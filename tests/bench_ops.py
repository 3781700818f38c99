"""The suite's ops as pytest-benchmark benchmarks, for a history of runs and regression checks:

    python -m pytest tests/bench_ops.py --benchmark-enable --benchmark-autosave      # record
    python -m pytest tests/bench_ops.py --benchmark-enable --benchmark-compare        # compare with the last saved
    python -m pytest tests/bench_ops.py --benchmark-enable -k "gemm and bf16"         # a subset

One benchmark per op and impl, at the largest point of the op's quick sweep under a size
cap (64 MiB on a CPU, 1 GiB on a GPU). Every benchmark first passes the suite's correctness
gate (bench/measure/gate.py) against float64. Each timed call ends with a device synchronize, so asynchronous GPU
work is inside the measurement; extra_info records the point, its FLOPs and bytes, its
intensity, and GB/s and TFLOP/s from the median. (For the suite's own numbers, with CUDA
events and CUDA graphs, use run_bench.py; these are for tracking changes over time.)
"""
import time

import pytest

from bench.hw import detect
from bench.measure.gate import Snapshot, check, sync, verifier
from bench.measure.registry import load_all
from bench.measure.runner import Runner
from bench.measure.skip import static_reason

INFO = detect.resolve(None)
REG = load_all()
RUNNER = Runner(INFO)
CAP = 2**30 if INFO.kind == "cuda" else 64 * 2**20


def _cases():
    out = []
    for op in REG.ordered():
        fits = [p for p in op.points(INFO, quick=True) if op.working_set(p) <= CAP]
        by_dtype = {}
        for p in fits:  # the largest point per dtype
            by_dtype[p.get("dtype")] = p
        for p in by_dtype.values():
            for impl in REG.impls_of(op.name):
                ident = f"{impl.id}-" + "-".join(str(v).replace(" ", "") for v in p.values())
                out.append(pytest.param(op.name, impl.id, p, id=ident))
    return out


@pytest.mark.parametrize("op_name,impl_id,point", _cases())
def test_op(benchmark, op_name, impl_id, point):
    op, impl = REG.ops[op_name], REG.impls[impl_id]
    reason = static_reason(op, impl, point, INFO, quick=False)
    if reason:
        pytest.skip(reason)
    inputs = op.make_inputs(point, INFO.torch_device)
    ref, tol = op.reference(inputs), op.tolerance(point)
    # the runner's context: a cold op's tuner (gemv, decode, skinny GEMMs on a GPU) times after its flush
    saved = Snapshot(inputs, op.inouts)  # an in-out array's values, restored before and after each checked call
    ctx = RUNNER.launch_context(point, op.modes[0], verifier(ref, tol, INFO, inputs, op.outputs, op.error, saved))
    gate = check(lambda: impl.launcher(inputs, ctx), ref, tol, INFO, inputs, op.outputs, op.error, saved)
    saved.release()
    assert gate.passed, gate.reason
    fn = gate.fn
    t0 = time.perf_counter()
    fn()
    sync(INFO)
    once = time.perf_counter() - t0

    def call():
        fn()
        sync(INFO)
    benchmark.pedantic(call, rounds=max(3, min(200, int(0.3 / max(once, 1e-6)))), warmup_rounds=2, iterations=1)
    flops, nbytes = op.flops(point), op.bytes(point)
    info = {"op": op_name, "impl": impl_id, "point": {k: str(v) for k, v in point.items()}, "device": INFO.name,
            "flops": flops, "bytes": nbytes, "intensity": flops / nbytes if nbytes else None, "error": gate.error}
    stats = getattr(benchmark, "stats", None)
    if stats is not None:  # None when benchmarks are disabled (a plain pytest run)
        median = stats.stats.median
        info.update(median_s=median, gbps=nbytes / median / 1e9, tflops=flops / median / 1e12)
    benchmark.extra_info.update(info)
