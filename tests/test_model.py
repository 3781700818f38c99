"""The one estimator (roofs/analysis/model.py) on hand-worked cases: each rule alone, with the
figure it must give worked out in the test. The estimator against machines whose truth is
known is tests/test_sim.py."""
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bench.policy import DEFAULT, Policy
from roofs.analysis.confirm import derive_roofs
from roofs.analysis.model import (
    KERNEL_LIMIT,
    physical_order,
    plateaus,
    rated,
    segment,
)
from roofs.analysis.roofline import Roof
from roofs.analysis.statistic import ceiling, measurements

KIB, MIB = 2**10, 2**20
CPU = {"kind": "cpu", "caches": [{"name": "l1", "total_bytes": 64 * KIB}, {"name": "l2", "total_bytes": 2 * MIB},
                                 {"name": "l3", "total_bytes": 32 * MIB}]}


def row(op, ws, gbps, n=20, pass_no=1, impl=None, family="stream", gflops=np.nan, dtype="float32", mode="warm",
        flag="", read=None, write=None, **kw):
    rb = ws if read is None else read
    wb = 0 if write is None else write
    pid = f"{op}[{ws}]@{mode}" + (f"#pass{pass_no}" if pass_no > 1 else "")
    return {"point_id": pid, "op": op, "family": family, "impl": impl or f"{op}/torch", "backend": "torch",
            "dtype": dtype, "working_set_bytes": ws, "bytes": rb + wb, "read_bytes": rb, "write_bytes": wb,
            "gbps": gbps, "gflops": gflops, "median_ms": 1.0, "p20_ms": 1.0, "p80_ms": 1.0, "samples": n,
            "status": "ok", "flag": flag, "mode": mode, "pass": pass_no, "shape": str(ws), "precision": "",
            "timer": "perf_counter_ns", **kw}


def test_rate_is_the_low_quantile_of_the_samples():
    """A row read at its median 100 GB/s whose samples' 10% quantile is 0.8 of the median time
    reads 125 GB/s: noise only slows a call, so the fast samples are nearest its own time."""
    rows = pd.DataFrame([row("stream.reread", MIB, 100.0)])
    times = [0.8e-3] * 4 + [1.0e-3] * 14 + [1.5e-3] * 2   # 10% quantile: rank 1.9 of 0..19, 0.8 ms
    out = rated(rows, {rows["point_id"][0]: times})
    assert out["rate"].iloc[0] == pytest.approx(100.0 * 1.0 / 0.8)
    assert out["jitter"].iloc[0] == pytest.approx(math.log(1 / 0.8))


def test_flagged_and_undersampled_rows_set_nothing():
    rows = pd.DataFrame([row("stream.copy", MIB, 50, flag="measured while the machine was busy (x)"),
                         row("stream.copy", 2 * MIB, 50, n=3), row("stream.copy", 4 * MIB, 50)])
    assert list(rated(rows, {})["working_set_bytes"]) == [4 * MIB]


def test_segment_finds_the_steps_of_a_staircase():
    """log rates 5,5,5 | 4,4,4,4 | 2,2: the 3-segment least-squares split is exact."""
    x = [5, 5, 5, 4, 4, 4, 4, 2, 2]
    assert segment(x, 3, 2)[2] == [(0, 3), (3, 7), (7, 9)]
    assert segment(x, 3, 2)[0] == [(0, 9)]


def test_ceiling_is_the_second_best_with_a_one_sided_interval():
    """Measurements 100, 98, 90 (three sizes, one pass): the roof is 98; S is the largest of
    ln(100/98) and the best row's jitter 0.01, so the top is 100 x (100/98) ** interval_reach."""
    meas = pd.DataFrame({"rate": [100.0, 98.0, 90.0], "jitter": [0.01, 0.0, 0.0], "_group": [1, 2, 3],
                         "_pass": [1, 1, 1], "op": "x", "point_id": ["a", "b", "c"]})
    roof, interval, basis, at = ceiling(meas, DEFAULT)
    assert roof == 98.0 and at["point_id"] == "b"
    assert interval == pytest.approx((98.0, 100.0 * (100.0 / 98.0) ** DEFAULT.interval_reach))
    assert basis["spread"]["best_over_roof"] == pytest.approx(math.log(100 / 98))


def test_the_pass_reach_holds_its_miss_rate_for_uniform_pass_slowdowns():
    """Policy.pass_reach(n) = pass_miss^(-1/(n-1)) - 1: 1/sqrt(0.015) - 1 = 7.165 for three
    passes, 1/0.015 - 1 = 65.67 for two, none for one. Its meaning, checked by drawing: n passes
    each slowed as a whole by exp(0.25 U) (U uniform, independent), the truth lies past the best
    pass times exp(c x the passes' log spread) in a pass_miss share of runs (200,000 draws: within
    5 standard errors of 0.015). (The simulator's drift, 1 + 0.25 U, misses a little more often:
    1.6-1.9% for two to five passes.)"""
    assert DEFAULT.pass_miss == 0.015
    assert DEFAULT.pass_reach(3) == pytest.approx(7.165, abs=1e-3)
    assert DEFAULT.pass_reach(2) == pytest.approx(65.667, abs=1e-3)
    assert DEFAULT.pass_reach(1) == 0.0
    rng = np.random.default_rng(7)
    for n in (2, 3, 5):
        slowed = 0.25 * rng.random((200_000, n))
        spread = slowed.max(axis=1) - slowed.min(axis=1)
        missed = np.mean(slowed.min(axis=1) > DEFAULT.pass_reach(n) * spread)
        assert abs(missed - DEFAULT.pass_miss) <= 5 * math.sqrt(DEFAULT.pass_miss / 200_000), n


def test_passes_widen_the_interval_by_their_median_spread():
    """One size measured at 100 and 80 over two passes, another at 99 and 90: the roof is 99, the
    passes' spread is the median of ln(100/80) and ln(99/90) (their mean, 0.159), past interval_reach
    x ln(100/99), so the top is 100 x exp(pass_reach x 0.159)."""
    meas = pd.DataFrame({"rate": [100.0, 80.0, 99.0, 90.0], "jitter": 0.0, "_group": [1, 1, 2, 2],
                         "_pass": [1, 2, 1, 2], "op": "x", "point_id": list("abcd")})
    roof, (lo, hi), _, _ = ceiling(meas, DEFAULT)
    s = (math.log(100 / 80) + math.log(99 / 90)) / 2
    assert roof == 99.0 and lo == 99.0 and hi == pytest.approx(100 * math.exp(DEFAULT.pass_reach(2) * s))


def test_a_lone_measurement_is_its_own_roof_with_the_minimum_width():
    meas = pd.DataFrame({"rate": [50.0], "jitter": [0.0], "_group": [1], "_pass": [1], "op": "x", "point_id": ["a"]})
    roof, interval, _, _ = ceiling(meas, Policy(min_halfwidth=0.02))
    assert roof == 50.0 and interval == pytest.approx((50.0, 52.0))


def _stair(levels):
    """Rows of one reread kernel: levels is [(first size, last size, GB/s)], a size per octave."""
    out = []
    for lo, hi, rate in levels:
        ws = lo
        while ws <= hi:
            out.append(row("stream.reread", ws, rate))
            ws *= 2
    return out


def test_levels_end_where_their_plateau_ends_not_at_a_reported_size():
    """A VM reporting a 300 MiB L3 whose speed falls to DRAM's past 64 MiB: l3's edge is 64 MiB."""
    dev = {"kind": "cpu", "caches": [{"name": "l1", "total_bytes": 96 * KIB}, {"name": "l2", "total_bytes": 4 * MIB},
                                     {"name": "l3", "total_bytes": 300 * MIB}]}
    rows = pd.DataFrame(_stair([(16 * KIB, 64 * KIB, 480), (256 * KIB, 2 * MIB, 200), (8 * MIB, 64 * MIB, 45),
                                (256 * MIB, 1024 * MIB, 20)]))
    roofs, _ = derive_roofs(rows, dev)
    got = {r.name: r for r in roofs if r.kind == "bandwidth" and "." not in r.name}
    assert {n: got[n].value for n in got} == {"l1": 480, "l2": 200, "l3": 45, "dram": 20}
    assert got["l3"].extra["edge_bytes"] == 64 * MIB and got["l2"].extra["edge_bytes"] == 2 * MIB


def test_a_size_slower_than_a_larger_one_is_its_kernels_limit():
    """Sizes 16-32 KiB at 20 GB/s (per-call cost) under an L2 plateau at 200: left out with a note."""
    rows = pd.DataFrame(_stair([(16 * KIB, 32 * KIB, 20), (256 * KIB, 1 * MIB, 200), (128 * MIB, 512 * MIB, 30)]))
    roofs, notes = derive_roofs(rows, CPU)
    names = {r.name for r in roofs if r.kind == "bandwidth" and "." not in r.name}
    assert "l1" not in names and {"l2", "dram"} <= names
    assert [getattr(n, "code", None) for n in notes].count(KERNEL_LIMIT) == 1


def test_plateaus_merge_neighbours_closer_than_the_level_step():
    env = pd.DataFrame({"working_set_bytes": [2**i for i in range(10, 18)],
                        "rate": [100, 100, 100, 95, 95, 95, 20, 20]})
    assert [len(p) for p in plateaus(env, 3, DEFAULT)] == [6, 2]


def test_sizes_from_the_last_caches_size_on_are_one_level_before_any_two_caches_merge():
    """zen4_vm's quick run under busy noise (seed 279, when the quick FMA chains ran k = 256):
    drift slowed every pass, so L2 read 175 GB/s and L3 144, and the sweep split off chip in two
    (32-64 MiB at 41, 128-256 MiB at 33.5). Five plateaus for four levels: the two nearest in
    level merged, L2 with L3 (a log gap of 0.195 against the off-chip pair's 0.202), so DRAM's
    32-64 MiB was named l3. The plateaus that start at or past the largest reported cache's size
    (a set that size evicts itself) are one level, off chip, before any other two merge."""
    caches = [("l1", 64 * KIB), ("l2", 2 * MIB), ("l3", 32 * MIB)]
    sizes = ([16 * KIB, 24 * KIB, 32 * KIB, 48 * KIB] + [64 * KIB * 2**i for i in range(5)]
             + [2 * MIB * 2**i for i in range(4)] + [32 * MIB, 48 * MIB, 64 * MIB, 128 * MIB, 256 * MIB])
    env = pd.DataFrame({"working_set_bytes": sizes,
                        "rate": [260.0] * 4 + [175.0] * 5 + [144.0] * 4 + [41.0] * 3 + [33.5] * 2})
    got = [(int(p["working_set_bytes"].min()), int(p["working_set_bytes"].max()))
           for p in plateaus(env, len(caches) + 1, DEFAULT, caches)]
    assert got == [(16 * KIB, 48 * KIB), (64 * KIB, 1 * MIB), (2 * MIB, 16 * MIB), (32 * MIB, 256 * MIB)]


def test_a_first_plateau_past_four_times_a_caches_size_leaves_that_cache_without_a_level():
    """A 2-core Zen 5 VM's quick run (l1 96 KiB, l2 2 MiB, l3 32 MiB reported): torch's reread
    read L1 and L2 at one speed, so one plateau ran from 24 KiB to 1.4 MiB, and a fast minute of
    its memory split L3 in two (1.5-16 MiB at 237, 23-48 MiB at 204). Four plateaus for four
    levels took l1, l2, l3 and dram in order: L2 was named l1, L3 l2, and its tail l3. A set 15x
    L1's size is never L1's: the caches the first plateau runs past band_factor x their size have
    no level of their own, so three levels remain, L3's halves merge, and the names are right."""
    caches = [{"name": "l1", "total_bytes": 96 * KIB}, {"name": "l2", "total_bytes": 2 * MIB},
              {"name": "l3", "total_bytes": 32 * MIB}]
    sizes = [24 * KIB, 48 * KIB, 96 * KIB, 192 * KIB, 384 * KIB, 768 * KIB, 1448 * KIB,
             2 * MIB, 4 * MIB, 8 * MIB, 16 * MIB, 24 * MIB, 32 * MIB, 48 * MIB, 256 * MIB, 512 * MIB]
    rates = [470.0] * 7 + [237.0] * 4 + [204.0] * 3 + [50.0] * 2
    rows = pd.DataFrame([row("stream.reread", ws, r) for ws, r in zip(sizes, rates)])
    roofs, notes = derive_roofs(rows, {"kind": "cpu", "caches": caches})
    levels = {r.name: r for r in roofs if "." not in r.name}
    assert sorted(levels) == ["dram", "l2", "l3"]
    assert levels["l2"].value == 470.0 and levels["dram"].value == 50.0
    # L3: its sizes from 2x L2's edge on (4-48 MiB), its roof the second best of their outer half (rule 11)
    assert levels["l3"].plateau_bytes == (4 * MIB, 48 * MIB) and levels["l3"].value == 204.0
    assert any(getattr(n, "code", "") == "passed_cache" and n.startswith("l1:") for n in notes)


def test_physical_order_removes_a_level_slower_than_the_next():
    """l1 at 190 under l2's 208 is torch's sum, not the cache: no l1 roof, a note says why."""
    mk = lambda n, v: Roof("bandwidth", n, v, "GB/s", op="stream.reread")  # noqa: E731
    roofs, notes = physical_order([mk("l1", 190), mk("l1.read", 190), mk("l2", 208), mk("dram", 20)],
                                  [("l1", 64 * KIB), ("l2", 2 * MIB)], "dram")
    assert [r.name for r in roofs] == ["l2", "dram"] and notes[0].startswith("l1:")


def test_direction_roofs_come_from_their_own_rows():
    rows = []
    for ws in (128 * MIB, 256 * MIB, 512 * MIB):
        rows += [row("stream.read", ws, 40), row("stream.write", ws, 25, read=0, write=ws),
                 row("stream.copy", ws, 35, read=ws // 2, write=ws // 2)]
    roofs, _ = derive_roofs(pd.DataFrame(rows), {"kind": "cpu", "caches": [{"name": "l3", "total_bytes": 32 * MIB}]})
    got = {r.name: r.value for r in roofs}
    assert got["dram"] == 40 and got["dram.read"] == 40 and got["dram.write"] == 25 and got["dram.copy"] == 35


def _gemm(dtype, n, gflops, impl="gemm.square/torch", pass_no=1, family="gemm", op="gemm.square"):
    r = row(op, 3 * n * n * 4, np.nan, family=family, gflops=gflops, dtype=dtype, impl=impl, pass_no=pass_no)
    r["point_id"] = f"{impl}[{dtype},{n}]@warm" + (f"#pass{pass_no}" if pass_no > 1 else "")
    return r


def test_a_precision_is_its_own_shapes_within_tolerance_and_a_faster_wider_path_is_a_line():
    """fp32 shapes at 200, 195, 120: plateau {200, 195}, roof 195. fp16 at 50 runs below fp32's
    200, so 'fp16 via fp32' is a line beside fp16's own roof of 50 (second best of 50, 49)."""
    rows = pd.DataFrame([_gemm("fp32", 2048, 200), _gemm("fp32", 1024, 195), _gemm("fp32", 256, 120),
                         _gemm("fp16", 2048, 50), _gemm("fp16", 1024, 49)])
    roofs, _ = derive_roofs(rows, {"kind": "cpu", "caches": [], "cpu_flags": ["avx512_fp16", "avx512f", "avx512_bf16"]})
    got = {r.name: r for r in roofs}
    assert got["fp32"].value == 195 and got["fp16"].value == 49
    assert got["fp16 via fp32"].value == 195 and got["fp16 via fp32"].extra["line_of"] == "fp16"


def test_no_unit_takes_the_wider_path_labelled_via():
    """A CPU without AVX512-FP16 runs fp16 GEMMs through conversion: fp16's bound is fp32's, via."""
    rows = pd.DataFrame([_gemm("fp32", 2048, 200), _gemm("fp32", 1024, 199), _gemm("fp16", 2048, 5),
                         _gemm("fp16", 1024, 4)])
    roofs, _ = derive_roofs(rows, {"kind": "cpu", "caches": [], "cpu_flags": ["avx2", "fma"]})
    fp16 = next(r for r in roofs if r.name == "fp16")
    assert fp16.value == 199 and fp16.extra["via"] == "fp32" and fp16.extra["no_unit"]


def test_torch_chains_set_only_their_elementwise_line():
    rows = pd.DataFrame([_gemm("fp32", 64, 30, impl="fma.chains/torch", family="fma", op="fma.chains"),
                         _gemm("fp32", 128, 31, impl="fma.chains/torch", family="fma", op="fma.chains")])
    roofs, notes = derive_roofs(rows, {"kind": "cpu", "caches": []})
    assert [r.name for r in roofs] == ["fp32.elementwise"] and "no compute roof" in notes[0]


def test_a_gpu_l1_probe_never_stands_in_for_l2():
    """An H200 reports only its L2: probe.l1 rows at 4-29 MiB set l1 alone, and L2's plateau and
    band come from the stream rows (the probe's 30 TB/s never reach L2's 10)."""
    dev = {"kind": "cuda", "caches": [{"name": "l2", "total_bytes": 60 * MIB}]}
    rows = _stair([(1 * MIB, 16 * MIB, 10_000), (64 * MIB, 1024 * MIB, 4_300)])
    rows += [row("probe.l1", ws, 30_000, impl="probe.l1/triton", family="probe") for ws in (4 * MIB, 8 * MIB, 29 * MIB)]
    roofs, _ = derive_roofs(pd.DataFrame(rows), dev)
    got = {r.name: r for r in roofs}
    assert got["l2"].value == 10_000 and got["l2"].interval[1] < 11_000
    assert got["l1"].value == 30_000 and got["hbm"].value == 4_300


def test_measurements_keep_each_size_and_pass_best():
    rows = pd.DataFrame([row("stream.copy", MIB, 10), row("stream.read", MIB, 12),
                         row("stream.read", MIB, 11, pass_no=2)])
    rows["rate"] = rows["gbps"]
    m = measurements(rows, pd.Series(0, index=rows.index))
    assert sorted(m["rate"]) == [11, 12]


def test_a_sweep_that_stops_inside_the_reported_caches_names_no_off_chip_level():
    """A sweep capped at 16 MiB under a reported 32 MiB L3 never left the caches: its last
    plateau is a cache's, and dram gets a note, no roof."""
    rows = pd.DataFrame(_stair([(16 * KIB, 32 * KIB, 300), (256 * KIB, 1 * MIB, 200), (4 * MIB, 16 * MIB, 150)]))
    roofs, notes = derive_roofs(rows, CPU)
    names = {r.name for r in roofs if r.kind == "bandwidth" and "." not in r.name}
    assert names == {"l1", "l2", "l3"} and any(n.startswith("dram:") for n in notes)


def test_without_reported_caches_the_last_plateau_is_off_chip():
    rows = pd.DataFrame(_stair([(1 * MIB, 8 * MIB, 150), (256 * MIB, 1024 * MIB, 30)]))
    roofs, _ = derive_roofs(rows, {"kind": "cpu", "caches": []})
    assert {r.name: r.value for r in roofs if r.kind == "bandwidth" and "." not in r.name} == {"dram": 30}


def test_a_sustained_window_faster_than_the_interval_raises_its_top():
    """dram at 40 and 41 GB/s in the sweep (top 41 x (41/40) ** reach); its sustained window, the
    same kernel a minute later, reads 60: noise never speeds a call, so the top reaches 60, while
    the roof stays the sweep's (burst) 40."""
    rows = [row("stream.read", ws, v) for ws, v in ((256 * MIB, 41.0), (512 * MIB, 40.0))]
    rows.append(row("stream.read", 512 * MIB, 60.0, mode="sustained"))
    device = {"kind": "cpu", "caches": [{"name": "l3", "total_bytes": 32 * MIB}]}
    roofs, notes = derive_roofs(pd.DataFrame(rows), device)
    dram = next(r for r in roofs if r.name == "dram")
    assert dram.value == 40.0 and dram.interval == pytest.approx((40.0, 60.0))
    assert dram.extra["sustained"]["value"] == 60.0 and dram.extra["burst"] == 40.0
    assert any(getattr(n, "code", "") == "sustained_above" and n.startswith("dram:") for n in notes)


def test_plateaus_past_every_reported_cache_are_one_off_chip_level():
    """A full run on a 2-core Zen 5 VM (32 MiB L3) whose L1 and L2 read within a level step of
    each other: its memory read 78-74 GB/s at 256-512 MiB and 48 GB/s at 724 MiB, a slower
    minute. The segmentation gave four plateaus, and the three inner ones took the caches'
    names in order: the L3 plateau was named l2 and the memory's first minute l3. Every plateau
    that starts past the largest reported cache is off chip: one level, dram, whose roof is the
    second best of its outer half (512 MiB at 76, 724 MiB at 48): 48, a floor of the ceiling."""
    rows = pd.DataFrame(_stair([(16 * KIB, 1 * MIB, 480), (4 * MIB, 32 * MIB, 240), (256 * MIB, 512 * MIB, 76)])
                        + [row("stream.reread", 724 * MIB, 48)])
    roofs, _ = derive_roofs(rows, CPU)
    got = {r.name: r.value for r in roofs if r.kind == "bandwidth" and "." not in r.name}
    assert got == {"l2": 480, "l3": 240, "dram": 48}


def test_the_pass_reach_figures_the_docs_quote_are_the_policys():
    """ARCHITECTURE.md and the policy's comments (REFERENCE.md's thresholds table) quote the reach
    of three and two passes: each figure is Policy.pass_reach's, as rounded there."""
    root = Path(__file__).resolve().parent.parent
    for text in ((root / "ARCHITECTURE.md").read_text(), (root / "bench" / "policy.py").read_text()):
        three = re.findall(r"(\d+(?:\.\d+)?) for three", text)
        two = re.findall(r"(\d+) for two", text)
        assert three and two
        assert {float(x) for x in three} == {round(DEFAULT.pass_reach(3), 1)}
        assert {int(x) for x in two} == {round(DEFAULT.pass_reach(2))}
