"""Each roof's interval and the measurement that confirms it (ARCHITECTURE.md, rule 17): the
median's order-statistic interval on hand-worked ranks and its coverage on draws of a known
distribution, a roof's band from synthetic rows with known samples, each confirmation status
with its cause, and the bounds taken at the band's ends."""
import numpy as np
import pandas as pd
import pytest
from helpers import measured_row

from bench.results import BUSY_PREFIX
from roofs.analysis.bounds import annotate
from roofs.analysis.derive import derive
from roofs.analysis.intervals import median_ranks, rate_interval, with_intervals
from roofs.analysis.roofline import Roof
from roofs.analysis.sustained import merge_sustained
from roofs.analysis.trust import trusted, usable_floor

MiB = 2**20
CPU = {"kind": "cpu", "caches": [{"name": "l2", "total_bytes": 1 * MiB}, {"name": "l3", "total_bytes": 32 * MiB}]}
N = 40  # samples per synthetic row


def times(spread: float, n: int = N) -> list:
    """Return n sample times (seconds) spaced evenly over 1 ms x (1 -/+ spread / 2), median 1 ms."""
    return list(1e-3 * (1 + spread * np.linspace(-0.5, 0.5, n)))


def expected_interval(value: float, spread: float, n: int = N) -> tuple:
    """The rate interval of times(spread, n) by hand: ranks j, k of the sorted times."""
    t = sorted(times(spread, n))
    j, k = median_ranks(n)
    return value * 1e-3 / t[k], value * 1e-3 / t[j]


def derived(rows, device=CPU, counters=None, spreads=None):
    """Return {name: roof} of rows derived, merged with their sustained rows and given intervals;
    each row's samples are times(spread) (spreads: point_id -> spread; default 0.02)."""
    df = pd.DataFrame(rows)
    roofs, notes = derive(df, device)
    roofs, _ = merge_sustained(roofs, notes, df, device)
    points = [{"point_id": p, "samples_s": times((spreads or {}).get(p, 0.02))} for p in df["point_id"]]
    return {r.name: r for r in with_intervals(roofs, df, points, device, counters)}


def stream(op, ws_mib, gbps, read_share, impl="torch", mode="warm", dtype="float32"):
    return measured_row(op, impl, dtype, ws_mib * MiB, gbps, mode=mode, samples=N, read_share=read_share)


def dram_rows(triad=(37.0, 38.0)):
    """Copy at 40 and 39 GB/s past 4x the 32 MiB L3, read and write alone, triad at the given rates."""
    rows = [stream("stream.copy", 256, 39.0, 0.5), stream("stream.copy", 512, 40.0, 0.5),
            stream("stream.read", 256, 45.0, 1.0), stream("stream.read", 512, 44.0, 1.0),
            stream("stream.write", 256, 30.0, 0.0), stream("stream.write", 512, 31.0, 0.0)]
    rows += [stream("stream.triad", ws, bw, 2 / 3) for ws, bw in zip((256, 512), triad)]
    return rows


def test_median_ranks_by_hand():
    # n = 100: 1-based ranks floor((100 - 19.6) / 2) = 40 and ceil(1 + 119.6 / 2) = 61
    assert median_ranks(100) == (39, 60)
    # n = 40: floor((40 - 12.396) / 2) = 13, ceil(1 + 52.396 / 2) = 28
    assert median_ranks(40) == (12, 27)
    # under 6 samples the whole range; the ranks never leave the samples
    assert median_ranks(5) == (0, 4) and median_ranks(1) == (0, 0)
    assert median_ranks(6) == (0, 5)


@pytest.mark.parametrize("n", [8, 40, 300])
def test_the_median_interval_covers_the_true_median_95_percent_of_the_time(n):
    # draws of a skewed distribution (a host's noise only slows: lognormal) with a known median
    rng = np.random.default_rng(7)
    j, k = median_ranks(n)
    draws = np.sort(rng.lognormal(0.0, 0.3, size=(4000, n)), axis=1)
    covered = np.mean((draws[:, j] <= 1.0) & (draws[:, k] >= 1.0))  # lognormal(0, s) has median 1
    assert 0.93 <= covered <= 0.995


def test_a_rate_interval_reads_the_fast_samples_as_its_top():
    # 100 GB/s at a 1 ms median: the top from the fast rank, the bottom from the slow one
    t = times(0.10, 40)
    lo, hi = rate_interval(100.0, 1.0, t)
    j, k = median_ranks(40)
    assert hi == pytest.approx(100.0 / (sorted(t)[j] * 1e3)) and lo == pytest.approx(100.0 / (sorted(t)[k] * 1e3))
    assert lo < 100.0 < hi
    # a latency is proportional to the time: its interval turns round
    lat = rate_interval(2.0, 1.0, t, per_time=True)
    assert lat == pytest.approx((2.0 * sorted(t)[j] * 1e3, 2.0 * sorted(t)[k] * 1e3))
    # no samples: the p20 and p80 times
    assert rate_interval(100.0, 1.0, None, 0.9, 1.25) == pytest.approx((80.0, 100.0 / 0.9))
    assert rate_interval(100.0, None, t) is None


def test_a_dram_roof_reaches_down_to_its_lowest_row_and_its_own_median_interval_up():
    roofs = derived(dram_rows())
    dram = roofs["dram"]
    assert dram.value == 45.0 and dram.op == "stream.read"     # the level's best: the read at 256 MiB
    ci = expected_interval(45.0, 0.02)
    # the top is the 95% interval of its row's median; the bottom the read at 512 MiB (44), below that interval
    assert dram.interval == pytest.approx((44.0, ci[1]))
    sets = {b["end"]: b for b in dram.extra["interval_basis"] if b["sets"]}
    assert sets["low"]["point_id"].startswith("stream.read/torch") and "512" not in dram.point_id
    assert "lowest row of the same kernel" in sets["low"]["what"]
    # the copy roof's band: copy at 40 with 39 beside it; the write roof's: 31 with 30
    assert roofs["dram.copy"].interval == pytest.approx((39.0, expected_interval(40.0, 0.02)[1]))
    assert roofs["dram.write"].interval[0] == pytest.approx(30.0)


def test_a_cache_roofs_band_reaches_down_to_the_noisy_row_its_plateau_rests_on():
    """A reread in L2 (1 MiB) at 256 KiB, 200 GB/s, steady, and at 512 KiB, 190 GB/s, stopped by
    the budget with its samples spread 30%: the plateau (rule 11) holds both, so the band's bottom
    is the noisy row's 190, as the off-chip roof's reaches its lowest usable row."""
    noisy = measured_row("stream.reread", "torch", "int32", MiB // 2, 190.0, samples=N, spread=0.3, stop="budget",
                         read_share=1.0)
    roofs = derived(dram_rows() + [stream("stream.reread", 0.25, 200.0, 1.0, dtype="int32"), noisy],
                    spreads={noisy["point_id"]: 0.3})
    l2 = roofs["l2"]
    assert l2.value == 200.0 and l2.extra["noisy_sizes"] == 1
    assert l2.interval == pytest.approx((190.0, expected_interval(200.0, 0.02)[1]))


def test_a_wide_row_widens_the_band_past_its_next_best():
    # the best copy row spread 40%: its own median interval reaches below the 39 GB/s beside it
    rows = dram_rows()
    best = rows[1]["point_id"]
    roofs = derived(rows, spreads={best: 0.40})
    lo, hi = expected_interval(40.0, 0.40)
    assert lo < 39.0
    assert roofs["dram.copy"].interval == pytest.approx((lo, hi))


def test_confirmed_by_another_kernel_of_the_same_direction():
    roofs = derived(dram_rows(triad=(37.0, 38.0)))
    copy = roofs["dram.copy"].confirmation
    # triad (38 GB/s, its interval widened by rule 11's 10%) meets the copy roof's 39-40.2 band
    assert copy["status"] == "confirmed" and copy["by"]["kind"] == "kernel" and copy["by"]["op"] == "stream.triad"
    assert copy["by"]["value"] == 38.0
    # read and write each rest on one kernel and one impl: unconfirmed, and said so
    for name in ("dram.read", "dram.write"):
        c = roofs[name].confirmation
        assert c["status"] == "unconfirmed" and "rests on one kernel and impl alone" in c["finding"]


def test_disputed_when_the_other_kernel_falls_below_the_band_with_its_cause():
    roofs = derived(dram_rows(triad=(25.0, 26.0)))
    c = roofs["dram.copy"].confirmation
    assert c["status"] == "disputed" and c["by"] is None
    [check] = [k for k in c["checks"] if k["kind"] == "kernel"]
    assert not check["agrees"] and "one kernel's own limit: stream.triad reaches 65%" in check["cause"]
    assert "dram.copy" in c["finding"] and check["cause"] in c["finding"]


def test_a_cache_the_working_set_did_not_leave_is_the_likely_cause():
    # copy's best at 256 MiB, triad's only sizes four times larger reach half its figure
    rows = [stream("stream.copy", 256, 60.0, 0.5), stream("stream.copy", 320, 58.0, 0.5),
            stream("stream.triad", 1024, 30.0, 2 / 3), stream("stream.triad", 2048, 29.0, 2 / 3)]
    c = derived(rows)["dram.copy"].confirmation
    assert c["status"] == "disputed"
    assert "a cache the working set did not leave" in c["checks"][0]["cause"]


def test_another_impl_confirms_a_precision_and_a_sustained_window_confirms_nothing():
    gemm = lambda impl, ws, g, mode="warm": measured_row("gemm.square", impl, "fp32", ws * MiB, g, mode=mode,  # noqa: E731
                                                         kind="gemm", samples=N)
    rows = [gemm("torch", 8, 200.0), gemm("torch", 16, 196.0), gemm("numpy", 8, 185.0), gemm("numpy", 16, 180.0)]
    fp32 = derived(rows)["fp32"]
    assert fp32.confirmation["status"] == "confirmed" and fp32.confirmation["by"]["impl"] == "gemm.square/numpy"
    assert fp32.interval == pytest.approx((196.0, expected_interval(200.0, 0.02)[1]))
    # torch alone, with a sustained window: the window lowers the band and is named, but confirms nothing
    rows = [gemm("torch", 8, 200.0), gemm("torch", 16, 196.0), gemm("torch", 16, 190.0, "sustained")]
    fp32 = derived(rows)["fp32"]
    assert fp32.interval[0] == pytest.approx(190.0)
    assert fp32.confirmation["status"] == "unconfirmed"
    assert [c["kind"] for c in fp32.confirmation["checks"]] == ["sustained"]
    assert "its sustained window (190) agrees" in fp32.confirmation["finding"]


def test_counters_that_disagree_with_the_formula_are_a_wrong_count():
    rows = [stream("stream.copy", 256, 39.0, 0.5), stream("stream.copy", 512, 40.0, 0.5)]
    dram = derived(rows)["dram"]
    counters = pd.DataFrame([{"point_id": dram.point_id, "status": "ok", "dram_ratio": 1.4}])
    c = derived(rows, counters=counters)["dram"].confirmation
    assert c["status"] == "disputed"
    assert c["checks"][0]["kind"] == "counters" and "1.40x the formula's DRAM bytes" in c["checks"][0]["cause"]
    good = pd.DataFrame([{"point_id": dram.point_id, "status": "ok", "dram_ratio": 1.03}])
    c = derived(rows, counters=good)["dram"].confirmation
    assert c["status"] == "confirmed" and c["by"]["kind"] == "counters"


def test_roofs_not_measured_or_without_a_row_keep_no_interval():
    rows = pd.DataFrame(dram_rows())
    sheet = Roof("bandwidth", "dram", 50.0, "GB/s", source="datasheet")
    lost = Roof("bandwidth", "dram", 45.0, "GB/s", point_id="gone")
    out = with_intervals([sheet, lost], rows, [], CPU)
    assert [r.interval for r in out] == [None, None] and [r.confirmation for r in out] == [None, None]


def bound_row(gbps, flops_per_byte, p80_ms=1.0):
    r = measured_row("stream.copy", "torch", "float32", 512 * MiB, gbps, read_share=0.5)
    r.update(flops=flops_per_byte * r["bytes"], intensity=flops_per_byte, precision="fp32" if flops_per_byte else "",
             gflops=gbps * flops_per_byte if flops_per_byte else None, p80_ms=p80_ms)
    return r


def test_a_points_bound_at_the_band_ends_and_its_flag_against_the_top():
    roofs = [Roof("bandwidth", "dram", 100.0, "GB/s", interval=(90.0, 105.0), point_id="x"),
             Roof("compute", "fp32", 200.0, "GFLOP/s", interval=(190.0, 210.0), point_id="y")]
    # 50 GFLOP/s at 1 FLOP/B: attainable min(100 x 1, 200) = 100, from 90 to 105
    rows = pd.DataFrame([bound_row(50.0, 1.0), bound_row(20.0, 10.0), bound_row(103.0, 0.0, 0.99),
                         bound_row(108.0, 0.0, 0.99)])
    out = annotate(rows, roofs, CPU)
    mem, comp, under_top, over_top = (out.iloc[i] for i in range(4))
    assert (mem.attainable_gflops, mem.attainable_low, mem.attainable_high) == pytest.approx((100.0, 90.0, 105.0))
    assert (mem.pct_of_attainable_low, mem.pct_of_attainable_high) == pytest.approx((100 * 50 / 105, 100 * 50 / 90))
    # at 10 FLOP/B the compute roof binds: 200, from 190 to 210
    assert (comp.attainable_low, comp.attainable_high) == pytest.approx((190.0, 210.0))
    # a flop-free point: its % of the bandwidth's band; above the value but under the band's top: no flag
    assert (under_top.pct_of_attainable_low, under_top.pct_of_attainable_high) == pytest.approx(
        (100 * 103 / 105, 100 * 103 / 90))
    assert under_top.flag == ""
    assert over_top.flag.startswith("above its attainable 105 GB/s even at p80")
    # roofs without intervals: no band columns, the flag against the value as before
    plain = annotate(rows, [Roof("bandwidth", "dram", 100.0, "GB/s"), Roof("compute", "fp32", 200.0, "GFLOP/s")], CPU)
    assert plain["attainable_low"].isna().all() and plain["pct_of_attainable_high"].isna().all()
    assert plain.iloc[2].flag.startswith("above its attainable 100 GB/s")


def test_the_apis_result_carries_its_bounds_band():
    from bench.api import Result
    roofs = (Roof("bandwidth", "dram", 100.0, "GB/s", interval=(90.0, 105.0)),
             Roof("compute", "fp32", 200.0, "GFLOP/s", interval=(190.0, 210.0)))
    # 5e10 FLOPs and 5e10 bytes in 1 s: 50 GFLOP/s at 1 FLOP/B, bounded at 100 (90 to 105)
    r = Result("k", "", 5e10, 5e10, "cpu", "warm", "torch", precision="fp32", samples_s=(1.0,) * 5, roofs=roofs)
    assert r.attainable_band == pytest.approx((90.0, 105.0))
    assert r.pct_of_attainable == pytest.approx(50.0)
    assert r.pct_of_attainable_band == pytest.approx((100 * 50 / 105, 100 * 50 / 90))
    # 102 GFLOP/s at 1 FLOP/B beats the value 100 but not the band's top 105: no finding; 110 does
    assert Result("k", "", 1.02e11, 1.02e11, "cpu", "warm", "torch", precision="fp32", samples_s=(1.0,) * 5,
                  roofs=roofs).above_bound == ""
    assert "above its attainable bound of 105.0" in Result("k", "", 1.1e11, 1.1e11, "cpu", "warm", "torch",
                                                          precision="fp32", samples_s=(1.0,) * 5,
                                                          roofs=roofs).above_bound
    plain = Result("k", "", 5e10, 5e10, "cpu", "warm", "torch", precision="fp32", samples_s=(1.0,) * 5,
                   roofs=tuple(Roof(r.kind, r.name, r.value, r.unit) for r in roofs))
    assert plain.attainable_band is None and plain.pct_of_attainable_band is None


def test_a_steady_sustained_window_above_the_burst_raises_the_top():
    gemm = lambda ws, g, mode="warm", spread=0.02: measured_row("gemm.square", "torch", "fp32", ws * MiB, g,  # noqa: E731
                                                                mode=mode, kind="gemm", samples=N, spread=spread)
    fp32 = derived([gemm(8, 200.0), gemm(16, 196.0), gemm(16, 215.0, "sustained")])["fp32"]
    assert fp32.value == 200.0 and fp32.interval == pytest.approx((196.0, 215.0))
    assert any(b["end"] == "high" and b["sets"] and "sustained" in b["what"] for b in fp32.extra["interval_basis"])
    # an unsteady window above the burst raises nothing (rule 14 marks it steady: false)
    fp32 = derived([gemm(8, 200.0), gemm(16, 196.0), gemm(16, 215.0, "sustained", spread=0.3)])["fp32"]
    assert fp32.interval == pytest.approx((196.0, expected_interval(200.0, 0.02)[1]))


def test_a_direction_roof_on_its_levels_row_carries_the_levels_sustained_window():
    """The L2 reread at 256 KiB (200 GB/s) sets both l2 and l2.read; its sustained window read 160:
    both bands reach down to 160, so two runs that differ there by 6% overlap on l2.read as on l2.
    The write roof (another row) keeps a band of its own."""
    rows = dram_rows() + [stream("stream.reread", 0.25, 200.0, 1.0, dtype="int32"),
                          stream("stream.reread", 0.5, 195.0, 1.0, dtype="int32"),
                          stream("stream.reread", 0.25, 160.0, 1.0, mode="sustained", dtype="int32"),
                          stream("stream.write", 0.25, 40.0, 0.0), stream("stream.write", 0.5, 41.0, 0.0)]
    roofs = derived(rows)
    assert roofs["l2"].interval[0] == pytest.approx(160.0)
    assert roofs["l2.read"].point_id == roofs["l2"].point_id and roofs["l2.read"].interval[0] == pytest.approx(160.0)
    assert roofs["l2.write"].interval[0] == pytest.approx(40.0)


def test_a_revisit_pass_that_read_low_widens_a_bandwidth_band_to_it():
    # the copy at 512 MiB read 40, then 30 when revisited: the host's noise, which the band holds
    rows = dram_rows()
    again = dict(stream("stream.copy", 512, 30.0, 0.5), point_id=rows[1]["point_id"] + "#pass2")
    again["pass"] = 2
    copy = derived(rows + [again])["dram.copy"]
    assert copy.value == 40.0 and copy.interval[0] == pytest.approx(30.0)
    assert next(b for b in copy.extra["interval_basis"] if b["sets"] and b["end"] == "low")["point_id"].endswith(
        "#pass2")


def test_a_faster_kernel_than_the_roof_disputes_it_as_reading_low():
    # a copy roof of 40 GB/s (its two sizes' plateau) beside a triad that read 60 in the same window
    rows = pd.DataFrame([stream("stream.copy", 256, 40.0, 0.5), stream("stream.copy", 320, 39.5, 0.5),
                         stream("stream.triad", 1024, 60.0, 2 / 3)])
    roof = Roof("bandwidth", "dram.copy", 40.0, "GB/s", op="stream.copy", impl="stream.copy/torch",
                dtype="float32", point_id=rows.iloc[0]["point_id"], plateau_bytes=(256 * MiB, 320 * MiB))
    points = [{"point_id": p, "samples_s": times(0.02)} for p in rows["point_id"]]
    [out] = with_intervals([roof], rows, points, CPU)
    c = out.confirmation
    check = next(k for k in c["checks"] if k["kind"] == "kernel")
    assert c["status"] == "disputed" and not check["agrees"] and check["value"] == 60.0
    assert check["cause"].startswith("a faster measurement than the roof: stream.triad/torch reads 150% of it")
    assert "no independent measurement agrees with its band" in c["finding"]


def _again(row, rate, pass_no, spread=0.02, stop="converged", samples=N):
    """row measured again at revisit pass pass_no (rule 11), at rate (GFLOP/s; for the launch
    probe, microseconds per call), its p20 and p80 spread / 2 either side of its median."""
    out = dict(row, point_id=f"{row['point_id']}#pass{pass_no}", stop=stop, samples=samples)
    out["pass"] = pass_no
    if row["op"] == "probe.launch":
        out["median_ms"] = rate / 1e3
    else:
        out["gflops"] = rate
    out["p20_ms"], out["p80_ms"] = out["median_ms"] * (1 - spread / 2), out["median_ms"] * (1 + spread / 2)
    return out


def test_a_compute_roofs_band_spans_its_points_revisit_passes():
    # fp32 GEMM at 200 (converged); its point read 170 at pass 2 (the machine at another minute)
    # and 230 at pass 3, whose samples spread 30% (too noisy to set the roof, rule 10, but
    # noise never speeds a call: the ceiling lies at least there)
    gemm = lambda ws, g: measured_row("gemm.square", "torch", "fp32", ws * MiB, g, kind="gemm", samples=N)  # noqa: E731
    best, other = gemm(16, 200.0), gemm(8, 150.0)
    fp32 = derived([best, other, _again(best, 170.0, 2), _again(best, 230.0, 3, spread=0.30, stop="budget")])["fp32"]
    assert fp32.value == 200.0
    assert fp32.interval == pytest.approx((150.0, 230.0))  # the next-best shape is still the lowest
    sets = {b["end"]: b for b in fp32.extra["interval_basis"] if b["sets"]}
    assert sets["high"]["point_id"].endswith("#pass3") and "noise never speeds a call" in sets["high"]["what"]
    passes = [b for b in fp32.extra["interval_basis"] if b["point_id"].endswith("#pass2")]
    assert [(b["end"], b["value"]) for b in passes] == [("low", 170.0)]
    # without the other shape the slowest pass is the bottom; its own pass is never "another shape"
    fp32 = derived([best, _again(best, 170.0, 2)])["fp32"]
    assert fp32.interval[0] == pytest.approx(170.0)
    assert not any("another shape" in b["what"] for b in fp32.extra["interval_basis"])
    # a pass past rule 11's noise limit (spread 50% or more) counts for neither end
    fp32 = derived([best, _again(best, 260.0, 2, spread=0.6, stop="budget")])["fp32"]
    assert fp32.interval == pytest.approx(expected_interval(200.0, 0.02))


def test_a_launch_floors_band_reaches_up_to_its_slowest_pass():
    launch = {"point_id": "probe.launch/torch[form=call]@warm", "op": "probe.launch", "family": "probe",
              "impl": "probe.launch/torch", "backend": "torch", "dtype": "", "shape": "(1,)", "working_set_bytes": 0,
              "flops": 0.0, "bytes": 0.0, "mode": "warm", "median_ms": 1.2e-3, "p20_ms": 1.19e-3, "p80_ms": 1.21e-3,
              "samples": 200, "stop": "converged", "status": "ok", "timer": "perf_counter_ns", "gbps": 0.0,
              "gflops": None, "flag": ""}
    df = pd.DataFrame([launch, _again(launch, 1.6, 2), _again(launch, 1.25, 3)])
    roofs, _ = derive(df, CPU)
    points = [{"point_id": p, "samples_s": [ms / 1e3 * t / 1e-3 for t in times(0.02)]}
              for p, ms in zip(df["point_id"], df["median_ms"])]
    floor = next(r for r in with_intervals(roofs, df, points, CPU) if r.name == "launch.torch.call")
    assert floor.value == pytest.approx(1.2)  # the fastest pass is the floor
    assert floor.interval[1] == pytest.approx(1.6)
    top = next(b for b in floor.extra["interval_basis"] if b["sets"] and b["end"] == "high")
    assert top["point_id"].endswith("#pass2") and "slowest revisit pass" in top["what"]


def test_a_bimodal_launch_floor_rests_on_its_fast_pass_whatever_its_spread():
    # a quick run on a 2-core VM (q1 of this rule's example, rule 10): the empty call at 1.43
    # (p20 1.22, p80 2.49: both modes), 2.336 (converged, wholly the slow mode) and 1.228 us
    # (p20 1.219, p80 1.849: spread 51%, past rule 11's 50%); noise only adds time to a call
    launch = {"point_id": "probe.launch/torch[form=call]@warm", "op": "probe.launch", "family": "probe",
              "impl": "probe.launch/torch", "backend": "torch", "dtype": "", "shape": "(1,)", "working_set_bytes": 0,
              "flops": 0.0, "bytes": 0.0, "mode": "warm", "median_ms": 1.430e-3, "p20_ms": 1.221e-3,
              "p80_ms": 2.492e-3, "samples": 200, "stop": "max_samples", "status": "ok", "timer": "perf_counter_ns",
              "gbps": 0.0, "gflops": None, "flag": ""}
    slow = dict(_again(launch, 2.336, 2), p20_ms=2.321e-3, p80_ms=2.383e-3)
    fast = dict(_again(launch, 1.228, 3, stop="max_samples", samples=200), p20_ms=1.219e-3, p80_ms=1.849e-3)
    busy = dict(_again(launch, 1.0, 4), flag=f"{BUSY_PREFIX} (other processes kept 1.2 of 2 cores busy)")
    few = dict(_again(launch, 0.9, 5, stop="budget", samples=4), p20_ms=0.85e-3, p80_ms=1.5e-3)
    df = pd.DataFrame([launch, slow, fast, busy, few])
    points = [{"point_id": p, "samples_s": [ms / 1e3 * t / 1e-3 for t in times(0.02)]}
              for p, ms in zip(df["point_id"], df["median_ms"])]
    roofs, _ = derive(df, CPU)
    floor = next(r for r in with_intervals(roofs, df, points, CPU) if r.name == "launch.torch.call")
    # the fastest median of the rows that may set a floor: not the busy pass (rule 9), nor 4 samples
    assert floor.value == pytest.approx(1.228) and floor.point_id.endswith("#pass3")
    assert floor.interval[1] == pytest.approx(2.336)  # its slowest pass, the 1.43 pass within
    assert floor.extra["passes"] == pytest.approx([1.228, 2.336])
    # by rule 10's steady rows alone it would have been the slow mode
    assert df[trusted(df)]["median_ms"].min() == pytest.approx(2.336e-3)
    assert usable_floor(df).tolist() == [True, True, True, False, False]


def test_a_compute_roof_records_its_points_passes():
    gemm = measured_row("gemm.square", "torch", "fp32", 16 * MiB, 200.0, kind="gemm", samples=N)
    fp32 = derived([gemm, _again(gemm, 170.0, 2), _again(gemm, 190.0, 3)])["fp32"]
    assert fp32.extra["passes"] == pytest.approx([170.0, 200.0])
    assert "passes" not in derived([gemm])["fp32"].extra  # one pass: nothing to span


def test_a_cache_roofs_row_measured_again_spans_its_passes():
    # L2's rereads at 256 and 512 KiB read 200 and 198 GB/s; the 256 KiB one read 170 at pass 2
    # (rule 11 revisits the row a cache roof rests on): the band reaches down to it
    reread = lambda ws, g: stream("stream.reread", ws, g, 1.0)  # noqa: E731
    best = reread(0.25, 200.0)
    again = dict(best, point_id=best["point_id"] + "#pass2", gbps=170.0, bytes=170.0e6, median_ms=1.0)
    again["pass"] = 2
    l2 = derived([best, reread(0.5, 198.0), again] + dram_rows())["l2"]
    assert l2.value == 200.0 and l2.point_id == best["point_id"]
    assert l2.interval[0] == pytest.approx(170.0) and l2.extra["passes"] == pytest.approx([170.0, 200.0])
    assert "passes" not in derived([best, reread(0.5, 198.0)] + dram_rows())["l2"].extra


def test_a_chain_lines_next_best_shape_is_a_long_chain_not_the_sweeps_slope():
    # torch's fp32 chains: k=1024 at 24 sets the elementwise line; k=256 (22) is within 8x its
    # FLOPs per byte, k=16 (15, a point on the sweep's slope) is not
    def chain(k, g):
        r = measured_row("fma.chains", "torch", "fp32", 128 * 2**10, g, kind="gemm", samples=N)
        return dict(r, point_id=f"fma.chains/torch[dtype=fp32,k={k}]@warm", family="fma", intensity=2.0 * k)
    line = derived([chain(16, 15.0), chain(256, 22.0), chain(1024, 24.0)])["fp32.elementwise"]
    assert line.value == 24.0 and line.interval[0] == pytest.approx(22.0)
    line = derived([chain(16, 15.0), chain(1024, 24.0)])["fp32.elementwise"]
    assert line.interval == pytest.approx(expected_interval(24.0, 0.02))
