"""The dry run's prediction (bench/predict.py) on hand-worked cases, for a datasheet H200."""
import pytest

from bench import predict as pr
from bench.registry import load_all
from bench.runner import Plan, Task
from bench.timing import TimerConfig

REG = load_all()
H200 = pr.spec_device("h200")


def test_spec_device_is_the_datasheet_part_and_bad_names_are_one_sentence():
    assert H200.name == "NVIDIA H200 SXM 141GB" and H200.compute_units == 132
    assert H200.compute_capability == "9.0" and H200.llc_bytes == 50 * 2**20
    with pytest.raises(ValueError, match="matches 0 datasheet parts; choose one of"):
        pr.spec_device("h900")


def test_one_call_is_the_larger_of_compute_and_memory_time():
    rates = pr.device_rates(H200)
    gemm = REG.ops["gemm.square"]
    # bf16 8192^3: 2 x 8192^3 FLOP at 80% of 989 TFLOP/s = 1.3896 ms; its 402.7 MB at 80% of
    # 4.8 TB/s (8192^3 x 2 x 2 B = 402.7 MB; >= 4x L2, so HBM) = 0.105 ms: compute wins
    t = pr.call_seconds(gemm, {"dtype": "bf16", "shape": (8192, 8192, 8192)}, "warm", H200, rates)
    assert t == pytest.approx(2 * 8192**3 / (989e12 * 0.8))
    copy = REG.ops["stream.copy"]
    # copy of 1 GiB: no FLOPs; 2**30 bytes at 80% of 4.8 TB/s = 0.2796 ms
    assert pr.call_seconds(copy, {"dtype": "float32", "ws_bytes": 2**30}, "warm", H200, rates) == \
        pytest.approx(2**30 / (4.8e12 * 0.8))
    # 32 MiB warm fits the 50 MiB L2: read at 2.5x HBM; cold, it crosses HBM again
    small = {"dtype": "float32", "ws_bytes": 32 * 2**20}
    assert pr.call_seconds(copy, small, "warm", H200, rates) == pytest.approx(32 * 2**20 / (2.5 * 4.8e12 * 0.8))
    assert pr.call_seconds(copy, small, "cold", H200, rates) == pytest.approx(32 * 2**20 / (4.8e12 * 0.8))
    # no call is predicted under 2 us (a launch)
    assert pr.call_seconds(copy, {"dtype": "float32", "ws_bytes": 2**16}, "warm", H200, rates) == 2e-6


def test_compiles_and_tuning_are_charged_once_and_rows_sum_to_the_total():
    gemm = REG.ops["gemm.square"]
    triton = REG.impls["gemm.square/triton"]
    points = [{"dtype": "bf16", "shape": (n, n, n)} for n in (2048, 4096)]
    plan = Plan([Task(gemm, p, (triton,)) for p in points])
    timer = TimerConfig(budget_s=0.1, warmup_s=0.01)
    rows, counts = pr.row_seconds(plan, H200, timer, quick=True)
    # both sizes are multiples of 16: one specialization, 3 quick candidates compiled once;
    # each size is its own tuning key
    assert counts["compiles"] == 3 and counts["compile_s"] == pytest.approx(3 * pr.COMPILE_S["gemm"])
    assert counts["tuning_keys"] == 2 and counts["tune_s"] == pytest.approx(2 * 3 * pr.TUNE_S)
    first, second = (sec for _, sec in rows)
    measure = [pr.point_seconds(gemm, p, "warm", H200, pr.device_rates(H200), timer) for p in points]
    assert first == pytest.approx(measure[0] + 3 * pr.COMPILE_S["gemm"] + 3 * pr.TUNE_S)
    assert second == pytest.approx(measure[1] + 3 * pr.TUNE_S)
    p = pr.predict(plan, H200, timer, quick=True)
    assert p.total_s == pytest.approx(first + second)
    assert "predicted wall time" in pr.describe(p, H200, True)


def test_a_point_samples_for_the_minimum_span_within_its_budget():
    # warm copy of 1 GiB: t = 2**30 / (0.8 x 4.8 TB/s) = 279.6 us; a 1 ms sample takes
    # ceil(1 ms / t) = 4 calls and 0.2 ms of sync: 1.3184 ms; 6 samples last 7.91 ms
    copy, rates = REG.ops["stream.copy"], pr.device_rates(H200)
    point = {"dtype": "float32", "ws_bytes": 2**30}
    t = 2**30 / (4.8e12 * 0.8)
    sample = 4 * t + 2e-4
    base = TimerConfig(budget_s=0.1, warmup_s=0.01)
    plain = pr.point_seconds(copy, point, "warm", H200, rates, base)
    # a 50 ms minimum span replaces the 7.91 ms of samples
    spanned = pr.point_seconds(copy, point, "warm", H200, rates, TimerConfig(budget_s=0.1, warmup_s=0.01, min_time_s=0.05))
    assert spanned - plain == pytest.approx(0.05 - 6 * sample)
    # a span past the budget: the budget ends the point (0.1 s of timing in all)
    capped = pr.point_seconds(copy, point, "warm", H200, rates, TimerConfig(budget_s=0.1, warmup_s=0.01, min_time_s=1.0))
    around = 0.01 + 2 * t + 4 * 3e-6  # warm-up, the per-call estimate, graph capture
    assert capped - plain == pytest.approx(0.1 - (around + 6 * sample))
