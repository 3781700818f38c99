"""The dry run's prediction (bench/aot/predict.py) on hand-worked cases, for a datasheet H200."""
import pytest

from bench.aot import predict as pr
from bench.measure import skip
from bench.measure.registry import load_all
from bench.measure.runner import Plan, Task
from bench.measure.timing import TimerConfig

REG = load_all()
H200 = pr.spec_device("h200")


def test_spec_device_is_the_datasheet_part_and_bad_names_are_one_sentence():
    assert H200.name == "NVIDIA H200 SXM 141GB" and H200.compute_units == 132
    assert H200.compute_capability == "9.0" and H200.llc_bytes == 50 * 2**20
    with pytest.raises(ValueError) as e:
        pr.spec_device("h900")
    # the refusal names the bad name and lists every datasheet part to choose from
    assert e.value.code == "unknown_part" and "'h900'" in str(e.value)
    assert all(part.part in str(e.value) for part in pr.specs.load_parts())


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


def test_loads_and_tuning_are_charged_once_per_variant_and_class_and_rows_sum_to_the_total():
    gemm = REG.ops["gemm.square"]
    triton = REG.impls["gemm.square/triton"]
    # 4096^3 and 5120^3 share octave 12 (log2 5120 = 12.32); 8192^3 is octave 13
    points = [{"dtype": "bf16", "shape": (n, n, n)} for n in (4096, 5120, 8192)]
    plan = Plan([Task(gemm, p, (triton,)) for p in points])
    timer = TimerConfig(budget_s=0.1, warmup_s=0.01)
    rows, counts = pr.row_seconds(plan, H200, timer, quick=True)
    # all sizes multiples of 16: one specialization, 3 quick candidates, each loaded once;
    # two shape classes tuned, 3 candidates each
    assert counts["compiles"] == 3 and counts["load_s"] == pytest.approx(3 * pr.LOAD_S)
    rates = pr.device_rates(H200)
    tune = [pr.tune_seconds(gemm, p, "warm", H200, rates, True) for p in points]
    assert counts["tuning_keys"] == 2 and counts["tune_s"] == pytest.approx(tune[0] + tune[2])
    measure = [pr.point_seconds(gemm, p, "warm", H200, rates, timer) for p in points]
    first, second, third = (sec for _, sec in rows)
    assert first == pytest.approx(measure[0] + 3 * pr.LOAD_S + tune[0])
    assert second == pytest.approx(measure[1])           # same class: the winner, no tuning
    assert third == pytest.approx(measure[2] + tune[2])  # a new class
    # the pool: the AOT plan of gemm.square bf16+others for sm_90 quick, 16 workers
    p = pr.predict(plan, H200, timer, quick=True, exact_compiles=False)
    assert p.tune_s == pytest.approx(tune[0] + tune[2])
    # 3 compiles of 1.6 s in 16 processes: 8 s start + max(1.6, 4.8 / 16) = 9.6 s
    assert p.compiles == 3 and p.workers == 16 and p.compile_s == pytest.approx(8.0 + 1.6)
    # the sustained phase: one roof (bf16), 2 windows (a quick run's per roof) of 0.25 s + 0.3 s, after 1 s idle
    assert p.windows == 2 and p.sustain_s == pytest.approx(1.0 + 2 * 0.55)
    assert p.total_s == pytest.approx(first + second + third + 9.6 + 2.1 + pr.DEFAULT_FINISH_S)
    text = pr.prediction_text(p, H200, True)
    # the text's compile line: the pool's seconds, its 3 compiles and 16 processes; then the loading line
    heads = {line.split()[0]: line.split()[1:] for line in text.splitlines()[2:] if line.startswith("  ")}
    assert float(heads["compile"][0]) == pytest.approx(p.compile_s, abs=0.05)
    assert "(3" in heads["compile"] and "16" in heads["compile"] and "loading" in heads


def test_a_tuning_candidate_is_timed_like_a_point_under_the_tuning_timer():
    # bf16 8192^3 on an H200: t = 2 x 8192^3 / (0.8 x 989e12) = 1.3896 ms. Warm, one call per
    # sample (ceil(0.2 ms / t) = 1): sample = t + 0.2 ms; around = 5 ms warm-up + 2t + 3 us;
    # 6 samples: 7.782 + 9.538 = 17.32 ms, within the 30 ms budget. Per candidate: 2 ms + t +
    # that = 20.71 ms; 6 candidates (full): 124.26 ms
    gemm, rates = REG.ops["gemm.square"], pr.device_rates(H200)
    t = 2 * 8192**3 / (0.8 * 989e12)
    per = 0.002 + t + (0.005 + 2 * t + 3e-6) + 6 * (t + 2e-4)
    got = pr.tune_seconds(gemm, {"dtype": "bf16", "shape": (8192,) * 3}, "warm", H200, rates, quick=False)
    assert got == pytest.approx(6 * per) and 6 * per == pytest.approx(0.12426, abs=1e-5)
    # a 2 us call: 100 calls per 0.2 ms sample; around = 5 ms + 0.4 ms + 0.3 ms of capture
    small = {"dtype": "bf16", "shape": (64, 64, 64)}
    assert pr.call_seconds(gemm, small, "warm", H200, rates) == 2e-6
    per = 0.002 + 2e-6 + (0.005 + 4e-4 + 100 * 3e-6) + 6 * (100 * 2e-6 + 2e-4)
    assert pr.tune_seconds(gemm, small, "warm", H200, rates, quick=True) == pytest.approx(3 * per)


def test_the_sustained_phase_is_a_window_per_candidate_of_each_roof():
    from bench.measure.registry import load_all
    from bench.measure.runner import make_plan
    reg = load_all()
    # GEMMs at bf16 and fp8e4m3, and a stream op: 2 compute roofs + the H200's L2 and HBM =
    # 4 roofs, 3 candidates each: 12 windows of 1 s (full) + 0.3 s each, after 1 s of idle
    plan = make_plan(reg, H200, only=["gemm.square", "stream.copy"], dtypes=["bf16", "fp8e4m3", "float32"])
    assert pr.sustain_seconds(plan, H200, quick=False) == (pytest.approx(1.0 + 12 * 1.3), 12)
    # quick: 2 candidates a roof, 0.25 s windows; --sustain 0: no phase
    assert pr.sustain_seconds(plan, H200, quick=True) == (pytest.approx(1.0 + 8 * 0.55), 8)
    assert pr.sustain_seconds(plan, H200, quick=False, window_s=0) == (0.0, 0)
    # fp64 GEMMs only: no stream, one roof
    plan = make_plan(reg, H200, only=["gemm.square/torch"], dtypes=["fp64"])
    assert pr.sustain_seconds(plan, H200, quick=False) == (pytest.approx(1.0 + 3 * 1.3), 3)


def test_the_pool_is_the_longest_compile_or_the_sum_over_the_workers():
    assert pr.pool_seconds([], 16) == 0.0
    # 40 compiles of 1.6 s on 16 workers: 8 + 64 / 16 = 12 s
    assert pr.pool_seconds([1.6] * 40, 16) == pytest.approx(12.0)
    # one slow compile longer than the share: 8 + 5 = 13 s
    assert pr.pool_seconds([5.0, 0.5, 0.5], 16) == pytest.approx(13.0)
    # one worker: serial, 8 + 6 = 14 s
    assert pr.pool_seconds([5.0, 0.5, 0.5], 1) == pytest.approx(14.0)


def test_exact_compiles_are_the_aot_plans_jobs():
    # stream.copy quick on an H200: its AOT plan is one BLOCK 4096 tile per dtype (float32,
    # bfloat16), every size a 16-divisible i32: 2 jobs of 0.35 s: 8 + max(0.35, 0.7 / 16)
    op, impl = REG.ops["stream.copy"], REG.impls["stream.copy/triton"]
    plan = Plan([Task(op, {"dtype": "float32", "ws_bytes": 2**26}, (impl,))])
    p = pr.predict(plan, H200, TimerConfig(budget_s=0.1, warmup_s=0.01), quick=True)
    assert p.compiles == 2 and p.compile_s == pytest.approx(8.0 + 0.35)


def test_rows_an_impl_skips_cost_a_skip_and_probes_of_an_absent_device_count_as_run():
    gemm = REG.ops["gemm.square"]
    numpy_impl, torch_impl = REG.impls["gemm.square/numpy"], REG.impls["gemm.square/torch"]
    timer = TimerConfig(budget_s=0.1, warmup_s=0.01)
    # numpy on a GPU is a static rule: skipped
    plan = Plan([Task(gemm, {"dtype": "fp32", "shape": (1024, 1024, 1024)}, (numpy_impl,))])
    rows, counts = pr.row_seconds(plan, H200, timer, quick=False)
    assert counts["skipped"] == 1 and rows == [("gemm", pr.SKIP_S)]
    # torch's int8 GEMM is probed on the device; an H200 that is not here cannot be probed,
    # so the row is charged
    point = {"dtype": "int8", "shape": (1024, 1024, 1024)}
    assert skip.own_reason(torch_impl, point, H200) is None
    # M <= 16 is a static rule of torch._int_mm on CUDA: skipped
    assert skip.own_reason(torch_impl, {"dtype": "int8", "shape": (16, 1024, 1024)}, H200).startswith("torch._int_mm")


def test_the_tuning_class_of_a_point_rounds_its_sizes_to_octaves():
    gemv, tile = REG.ops["gemv.decode"], REG.impls["gemv.decode/triton_tile"]
    # llama8b.o (4096 x 4096) and llama8b.qkv (6144 x 4096): N in octaves 12 and 13
    o = pr.tune_class(gemv, tile, {"layer": "llama8b.o", "dtype": "int4", "batch": 16}, "cold")
    qkv = pr.tune_class(gemv, tile, {"layer": "llama8b.qkv", "dtype": "int4", "batch": 16}, "cold")
    assert o != qkv and o == ("gemv", "triton_tile", "cold", ("batch", ("oct", 4)), ("dtype", "int4"),
                              ("k", ("oct", 12)), ("n", ("oct", 12)))
    sq = REG.ops["gemm.square"]
    t = REG.impls["gemm.square/triton"]
    assert pr.tune_class(sq, t, {"dtype": "bf16", "shape": (4096,) * 3}, "warm") == \
        pr.tune_class(sq, t, {"dtype": "bf16", "shape": (5120,) * 3}, "warm")


def test_the_full_h200_plan_fits_nine_minutes_and_the_quick_two():
    from bench.measure.registry import load_all
    from bench.measure.runner import make_plan
    from bench.measure.timing import timer_config
    for quick, limit in ((False, 9 * 60), (True, 2 * 60)):
        plan = make_plan(load_all(), H200, quick=quick)
        p = pr.predict(plan, H200, timer_config(quick), quick)
        assert p.total_s <= limit, pr.prediction_text(p, H200, quick)


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
    spanned = pr.point_seconds(copy, point, "warm", H200, rates,
                               TimerConfig(budget_s=0.1, warmup_s=0.01, min_time_s=0.05))
    assert spanned - plain == pytest.approx(0.05 - 6 * sample)
    # a span past the budget: the budget ends the point (0.1 s of timing in all)
    capped = pr.point_seconds(copy, point, "warm", H200, rates,
                              TimerConfig(budget_s=0.1, warmup_s=0.01, min_time_s=1.0))
    around = 0.01 + 2 * t + 4 * 3e-6  # warm-up, the per-call estimate, graph capture
    assert capped - plain == pytest.approx(0.1 - (around + 6 * sample))
