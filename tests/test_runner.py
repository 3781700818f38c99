"""The runner: correctness gate before timing, errors recorded and the run going on,
skips with reasons, and no Triton timing under the interpreter."""
import dataclasses
import time

import torch
from helpers import toy_registry

from bench.hw import detect
from bench.measure.memory import SKIP_PREFIX
from bench.measure.registry import load_all
from bench.measure.runner import INTERPRETED_PREFIX, Runner, make_plan
from bench.measure.skip import CUT_PREFIX
from bench.measure.timing import TimerConfig
from bench.results import BUSY_PREFIX

CPU = detect.resolve("cpu")
FAST = TimerConfig(budget_s=0.02, warmup_s=0.001, min_samples=3)


def run(reg, **kw):
    seen = []
    ms = Runner(CPU, FAST, sink=seen.append).run(make_plan(reg, CPU, **kw))
    assert ms == seen  # every row reaches the sink as it ends
    return ms


def test_correct_impl_is_timed():
    ms = run(toy_registry())
    assert [m.status for m in ms] == ["ok", "ok"]
    m = ms[0]
    assert m.error == 0.0 and m.samples_s and m.timer == "perf_counter_ns"
    assert m.bytes == 8000 and m.flops == 1000 and m.working_set_bytes == 4000


def test_wrong_result_is_recorded_and_never_timed():
    wrong = lambda x, ctx: (lambda: torch.mul(x["a"], 2.001, out=x["b"]))  # noqa: E731
    lazy = lambda x, ctx: (lambda: x["b"])  # noqa: E731  never writes: the poisoned NaN shows
    ms = run(toy_registry({"torch": wrong, "lazy": lazy}), quick=True)
    assert [m.status for m in ms] == ["error", "error"]
    assert ms[0].samples_s == () and "wrong result" in ms[0].reason and ms[0].error > 1e-6
    assert "wrong result" in ms[1].reason and ms[1].error != ms[1].error  # NaN


def test_impl_that_raises_is_recorded_and_the_run_goes_on():
    def boom(x, ctx):
        raise RuntimeError("kernel exploded\nsecond line")
    ms = run(toy_registry({"boom": boom, "torch": lambda x, ctx: (lambda: torch.mul(x["a"], 2, out=x["b"]))}))
    by = {(m.impl, m.point["n"]): m for m in ms}
    assert by[("toy.double/boom", 1000)].status == "error"
    why = by[("toy.double/boom", 1000)].reason   # the exception's type and first line
    assert why.startswith("RuntimeError") and why.endswith("kernel exploded") and "second" not in why
    assert by[("toy.double/torch", 4000)].status == "ok"


def test_point_that_does_not_fit_is_skipped_before_allocation():
    reg = toy_registry(working_set=lambda p: 2**60)
    ms = run(reg, quick=True)  # the default budget: half the memory available (rule 16)
    assert ms[0].status == "skipped" and ms[0].reason.startswith(SKIP_PREFIX)
    from bench.measure.memory import FREE_PREFIX, Budget
    unlimited = Runner(CPU, FAST, budget=Budget(None)).run(make_plan(reg, CPU, quick=True))
    assert unlimited[0].status == "skipped" and unlimited[0].reason.startswith(FREE_PREFIX)


def test_op_skip_reason_is_recorded():
    ms = run(toy_registry(skip=lambda p, d: "needs fp8" if p["n"] > 2000 else None))
    assert [m.status for m in ms] == ["ok", "skipped"] and ms[1].reason == "needs fp8"


def test_slow_path_is_cut_short_from_its_smaller_point():
    import time

    def slow(x, ctx):
        return lambda: (time.sleep(0.01 * x["a"].numel() / 1000), torch.mul(x["a"], 2, out=x["b"]))[1]
    reg = toy_registry({"slow": slow})
    ms = Runner(CPU, TimerConfig(budget_s=0.03, warmup_s=0.001), sink=lambda m: None).run(make_plan(reg, CPU))
    assert ms[0].status == "ok"
    assert ms[1].status == "skipped" and ms[1].reason.startswith(CUT_PREFIX + ": predicted")


def test_a_calls_estimate_on_hand_worked_calls():
    from bench.measure.skip import call_estimate
    assert call_estimate([], 10, 10) is None and call_estimate([((0, 0), 1.0)], 10, 10) is None
    # one call seen: scaled by the smaller growth (FLOPs x8, bytes x4: 4 x 1 ms)
    assert call_estimate([((100, 100), 1e-3)], 800, 400) == (4e-3, 1e-3)
    # a GEMV at batch 1 then 16: 20 ps a FLOP (50 GFLOP/s) on top of 1 ms for its bytes; batch 256
    # grows the FLOPs 16x and the bytes 1.14x: its 8.6 GFLOP take 172 ms (the one-call rule: 13.5 ms)
    f1, b1 = 2 * 4096 * 4096, 2 * 4096 * 4096
    batch1, batch16 = ((f1, b1), 1e-3 + f1 * 2e-11), ((16 * f1, 1.05 * b1), 1.05e-3 + 16 * f1 * 2e-11)
    predicted, basis = call_estimate([batch1, batch16], 256 * f1, 1.2 * b1)
    assert abs(predicted - 256 * f1 * 2e-11) < 1e-9 and basis == batch16[1]
    assert call_estimate([batch16], 256 * f1, 1.2 * b1)[0] < 0.03
    # FLOPs and bytes grown alike (no cost of each can be told apart), or a fit that would need a
    # negative cost: the one-call rule alone
    assert call_estimate([((100, 100), 1e-3), ((200, 200), 2e-3)], 400, 400) == (4e-3, 2e-3)
    assert call_estimate([((100, 100), 1e-3), ((800, 400), 1e-3)], 6400, 1600) == (4e-3, 1e-3)


def test_a_path_slow_in_flops_alone_is_cut_from_its_two_smaller_points():
    # its time grows with the FLOPs (n^2: 10, 40, 160 ms), its bytes with n: the one-call rule predicts
    # 80 ms for n=4000 (bytes x2), inside the 0.1 s budget; the two calls' fit, 160 ms (still 120 ms
    # were every sleep 5 ms late on a busy machine)
    def slow(x, ctx):
        return lambda: (time.sleep(0.01 * (x["a"].numel() / 1000) ** 2), torch.mul(x["a"], 2, out=x["b"]))[1]
    reg = toy_registry({"slow": slow}, flops=lambda p: p["n"] ** 2, sizes=(1000, 2000, 4000))
    ms = Runner(CPU, TimerConfig(budget_s=0.1, warmup_s=0.001), sink=lambda m: None).run(make_plan(reg, CPU))
    assert [m.status for m in ms] == ["ok", "ok", "skipped"] and ms[2].reason.startswith(CUT_PREFIX + ": predicted")


def test_triton_under_interpreter_is_checked_but_never_timed():
    reg = load_all()
    plan = make_plan(reg, CPU, only=["stream.triad/triton", "stream.read/triton"], dtypes=["float32", "bfloat16"],
                     max_ws_bytes=64 * 1024, quick=True)
    ms = Runner(CPU, FAST).run(plan)
    f32 = [m for m in ms if m.dtype == "float32"]
    assert f32 and all(m.status == "skipped" and m.samples_s == () for m in ms)
    assert all(m.reason.startswith(INTERPRETED_PREFIX) and m.error <= m.tolerance for m in f32)
    assert all("11584" in m.reason for m in ms if m.dtype == "bfloat16")


def test_mode_override_and_filters():
    reg = toy_registry()
    plan = make_plan(reg, CPU, modes=["warm", "cold"], max_ws_bytes=16000)  # n=4000: 16000 bytes
    assert len(plan.tasks) == 2 and len(plan) == 4
    ms = Runner(CPU, FAST).run(plan)
    assert [m.mode for m in ms] == ["warm", "cold", "warm", "cold"] and all(m.status == "ok" for m in ms)
    assert len(make_plan(reg, CPU, max_ws_bytes=3999).tasks) == 0


def test_busy_machine_flags_cpu_points_only():
    from bench.measure.runner import busy_flag
    gpu = type(CPU)(**{**CPU.__dict__, "kind": "cuda"})
    assert busy_flag({"others_cpu": 0.1, "load1": 0.5}, CPU) == ""
    flag = busy_flag({"others_cpu": 0.95, "load1": 3.9}, CPU)
    assert flag.startswith(BUSY_PREFIX) and "95%" in flag
    assert "(load average 3.9)" in flag
    assert busy_flag({"others_cpu": 0.95}, gpu) == "" and busy_flag({}, CPU) == ""


def test_a_point_ten_times_slower_than_its_neighbour_is_measured_twice_then_flagged():
    calls = {"n": 0}

    def stalls(x, ctx):  # the 4000-element point is 100x slower than the 1000-element one
        def fn():
            calls["n"] += 1
            if x["a"].numel() == 4000:
                time.sleep(0.002)
            return torch.mul(x["a"], 2, out=x["b"])
        return fn
    reg = toy_registry({"torch": stalls})
    runner = Runner(CPU, TimerConfig(budget_s=0.05, warmup_s=0.001), sink=lambda m: None)
    first, second = runner.run(make_plan(reg, CPU))
    assert first.flag == "" or first.flag.startswith("measured while")
    assert second.status == "ok", second.reason
    # (on a busy machine the busy flag comes first; the jump is named either way)
    assert "time jumped" in second.flag and "measured twice" in second.flag
    # a jumped row sets no roof
    import pandas as pd

    from bench.results import usable
    df = pd.DataFrame([second.row()])
    assert not usable(df).iloc[0]


def test_launchers_leave_global_state_as_they_found_it():
    """No global state changed without being restored (TF32 mode, torch's RNG)."""
    from bench.measure.registry import LaunchContext
    reg = load_all()
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("medium")
    try:
        for precision in ("fp32", "tf32"):
            point = {"dtype": precision, "shape": (32, 32, 32)}
            op = reg.ops["gemm.square"]
            reg.impls["gemm.square/torch"].launcher(op.make_inputs(point, "cpu"), LaunchContext(point))()
            assert torch.get_float32_matmul_precision() == "medium"
    finally:
        torch.set_float32_matmul_precision(before)
    rng = torch.get_rng_state()
    for op in ("transfer.h2d", "transfer.d2h"):
        for memory in ("pinned", "pageable"):
            reg.ops[op].make_inputs({"memory": memory, "bytes": 4096}, "cpu")
    assert torch.equal(torch.get_rng_state(), rng)


def test_the_next_sweep_is_not_a_jump():
    from bench.measure.skip import sweep_key
    reg = load_all()
    impl = reg.impls["gemv.decode/torch"]
    a = sweep_key(impl, {"dtype": "bf16", "layer": "llama8b.down", "batch": 256}, "cold")
    b = sweep_key(impl, {"dtype": "bf16", "layer": "llama8b.lm_head", "batch": 1}, "cold")
    c = sweep_key(impl, {"dtype": "bf16", "layer": "llama8b.lm_head", "batch": 16}, "cold")
    assert a != b and b == c


def test_a_short_point_on_a_loaded_machine_is_judged_by_the_load_average():
    from bench.measure.runner import busy_flag
    # 20 ms is too short for /proc/stat's ticks: the load average against the cores decides
    two = dataclasses.replace(CPU, compute_units=2)  # the verdict is load against cores: fix the cores
    flag = busy_flag({"others_cpu": None, "load1": 4.0, "others_cpu_from_loadavg": True}, two)
    assert flag.startswith(BUSY_PREFIX) and "load average 4.0" in flag
    assert busy_flag({"others_cpu": None, "load1": 1.0, "others_cpu_from_loadavg": False}, two) == ""
