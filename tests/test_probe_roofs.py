"""Roofs from the probes on synthetic rows with known answers: the launch floors and the
launch-bound note (roofs/analysis/launch_floor.py), the L1 probe's roof (roofs/analysis/model.py:
the Policy.roof_rank-th highest of its spans' measurements, standing for l1 where it is faster
than the stream sweep's l1)."""
import math

import pandas as pd
import pytest

from bench.policy import DEFAULT
from bench.results import PASS_MARK
from roofs.analysis.bounds import annotate
from roofs.analysis.confirm import derive_roofs
from roofs.analysis.launch_floor import LAUNCH_PREFIX, floor_for, launch_floors, launch_note, launch_roofs
from roofs.analysis.roofline import Roof

KiB, MiB = 2**10, 2**20


def launch_rows():
    base = {"op": "probe.launch", "family": "probe", "status": "ok", "mode": "warm", "stop": "converged",
            "samples": 20, "flops": 0, "bytes": 0, "working_set_bytes": 0, "gbps": 0.0, "gflops": 0.0}
    rows = [  # (backend, timer, median ms): the form is the timer's
        ("triton", "cuda_event", 0.0045), ("triton", "cuda_graph", 0.0012),
        ("torch", "cuda_event", 0.0060), ("torch", "cuda_graph", 0.0015), ("torch", "cuda_graph", 0.0014)]
    return pd.DataFrame([dict(base, backend=b, timer=t, impl=f"probe.launch/{b}", point_id=f"{b}-{t}-{i}",
                              median_ms=m, p20_ms=0.98 * m, p80_ms=1.02 * m) for i, (b, t, m) in enumerate(rows)])


def test_launch_roofs_are_the_lowest_call_per_backend_and_form():
    got = {r.name: r for r in launch_roofs(launch_rows())}
    assert sorted(got) == ["launch.torch.graph", "launch.torch.launch", "launch.triton.graph", "launch.triton.launch"]
    assert got["launch.triton.graph"].value == pytest.approx(1.2) and got["launch.triton.graph"].unit == "us"
    assert got["launch.torch.graph"].value == pytest.approx(1.4)      # the lower of 1.5 and 1.4
    assert got["launch.torch.graph"].point_id == "torch-cuda_graph-4"
    assert got["launch.triton.launch"].kind == "latency" and got["launch.triton.launch"].spread == pytest.approx(0.04)
    assert launch_roofs(pd.DataFrame([{"op": "stream.copy"}])) == []  # no probe rows, no columns: nothing


def test_launch_note_uses_the_floor_the_row_pays():
    floors = launch_floors(launch_roofs(launch_rows()))
    assert floors[("triton", "graph")] == pytest.approx(1.2)
    # a Triton point replayed from a graph at 2.3 us: under 2 x 1.2 us
    note = launch_note(0.0023, "triton", "cuda_graph", floors)
    assert note.startswith(LAUNCH_PREFIX) and "2.3 us" in note
    assert launch_note(0.0025, "triton", "cuda_graph", floors) == ""
    # timed by events around launches: the launch floor (4.5 us) applies
    assert launch_note(0.0080, "triton", "cuda_event", floors) != ""
    # a backend with no floor of its own takes the lowest of that form
    assert floor_for("cublas", "cuda_graph", floors) == (pytest.approx(1.2), "launch.triton.graph")
    assert floor_for("torch", "perf_counter_ns", floors) is None
    assert launch_note(0.0001, "triton", "cuda_graph", floors, op="probe.launch") == ""  # the floor itself


def test_annotate_appends_launch_bound_to_bound_note():
    roofs = [Roof("bandwidth", "hbm", 4000.0, "GB/s")] + launch_roofs(launch_rows())
    base = {"status": "ok", "family": "stream", "op": "stream.copy", "mode": "warm", "working_set_bytes": 8 * MiB,
            "flops": 0, "gflops": 0.0, "intensity": 0.0, "precision": "", "backend": "triton", "timer": "cuda_graph"}
    df = pd.DataFrame([dict(base, bytes=8 * MiB, median_ms=0.002, p80_ms=0.0021, gbps=4194.0 / 2),
                       dict(base, bytes=8 * MiB, median_ms=0.004, p80_ms=0.0041, gbps=2097.0)])
    out = annotate(df, roofs, {"kind": "cuda", "caches": []})
    # appended ("; ") to whatever the bound rule said
    last = out["bound_note"][0].split("; ")[-1]
    assert last.startswith(LAUNCH_PREFIX) and "2 us" in last and "1.2 us" in last and "launch.triton.graph" in last
    assert LAUNCH_PREFIX not in out["bound_note"][1]
    assert out["flag"][0] == ""   # launch-bound is a note, not a flag above the bound


def l1_rows(curve, op="probe.l1"):
    """Warm rows of op at [(working set, GB/s)], each rate exact (its p20 is its median)."""
    return pd.DataFrame([{"point_id": f"{op}[{ws}]", "op": op, "family": "probe" if op == "probe.l1" else "stream",
                          "impl": f"{op}/triton", "backend": "triton", "dtype": "float32", "working_set_bytes": ws,
                          "gbps": v, "gflops": float("nan"), "median_ms": 1.0, "p20_ms": 1.0, "p80_ms": 1.0,
                          "samples": 20, "mode": "warm", "status": "ok"} for ws, v in curve])


def test_l1_probe_roof_is_the_second_best_of_its_spans():
    """264 programs x 16 .. 96 KiB spans: near 30 TB/s, falling to 21,000 once two spans
    overflow an SM's L1. The roof is the second highest of 27,000, 29,500, 30,000, 29,800 and
    21,000: 29,800 (the fall sets nothing). Its top: 30,000 x exp(reach x ln(30,000 / 29,800)),
    or the narrowest interval the Policy allows, 29,800 x (1 + 2 x 1%), whichever is higher."""
    gpu = {"kind": "cuda", "caches": [{"name": "l2", "total_bytes": 60 * MiB}]}
    curve = [(264 * s * KiB, v) for s, v in ((16, 27000), (32, 29500), (48, 30000), (64, 29800), (96, 21000))]
    roofs, _ = derive_roofs(l1_rows(curve), gpu)
    l1 = next(r for r in roofs if r.name == "l1")
    assert l1.value == 29800 and l1.working_set_bytes == 264 * 64 * KiB and l1.extra["probe"] is True
    assert l1.note.startswith("probe.l1")
    assert l1.interval[1] == pytest.approx(max(30000 * (30000 / 29800) ** DEFAULT.interval_reach,
                                               29800 * (1 + 2 * DEFAULT.min_halfwidth)))


def test_l1_probe_and_a_size_window_roof_the_faster_stands():
    """A CPU's reread sweep: l1 flat at 400-410 GB/s over 16-48 KiB, l2 at about 200 over
    256 KiB-1 MiB, DRAM about 50 over 4-16 MiB. The sweep's l1 roof is the second highest of
    its outer half (32 and 48 KiB: 405, 410): 405. A probe at 520 and 530 (roof 520) is faster
    and stands for l1; one at 300 and 310 (roof 300) is slower, and the sweep's 405 stands."""
    cpu = {"kind": "cpu", "caches": [{"name": "l1", "total_bytes": 96 * KiB}, {"name": "l2", "total_bytes": 2 * MiB}]}
    stream = l1_rows([(16 * KiB, 400), (32 * KiB, 405), (48 * KiB, 410), (256 * KiB, 200), (512 * KiB, 198),
                      (1 * MiB, 201), (4 * MiB, 50), (8 * MiB, 49), (16 * MiB, 50)], op="stream.reread")
    probe = l1_rows([(16 * KiB, 520), (32 * KiB, 530)])
    roofs, _ = derive_roofs(pd.concat([stream, probe], ignore_index=True), cpu)
    [l1] = [r for r in roofs if r.name == "l1"]
    assert l1.value == 520 and l1.op == "probe.l1"
    slower = l1_rows([(16 * KiB, 300), (32 * KiB, 310)])
    roofs, _ = derive_roofs(pd.concat([stream, slower], ignore_index=True), cpu)
    [l1] = [r for r in roofs if r.name == "l1"]
    assert l1.value == 405 and l1.op == "stream.reread"


def test_l1_probe_counts_its_noisy_spans_and_a_revisit_widens_the_top():
    """A quick CPU run's probe.l1 (2 programs, spans of 24, 32 and 48 KiB, the budget stopping
    them): 125 and 128 GB/s at their median with p20 at 0.92 and 0.94 of it (a noisy host, which
    only slows a read), 130 with p20 at 0.985; a revisit pass measures 48 KiB again at 150. A
    row's rate is its figure at its p20: 135.9, 136.2, 132.0 and 152.3; each span keeps its best
    pass (48 KiB: 152.3). The noisy spans count: the roof is the second highest of 135.9, 136.2
    and 152.3, the 32 KiB span's 128 / 0.94. Its top is 152.3 x exp(reach x S), S the largest of
    ln(152.3 / 136.2), the 48 KiB passes' ln(150 / 130) and the best row's ln(1 / 0.985):
    ln(150 / 130). Its own point (32 KiB) was not measured again, so the run's reach, as far as
    one pass may read low, does not apply: its passes are its own."""
    cpu = {"kind": "cpu", "caches": [{"name": "l1", "total_bytes": 64 * KiB}]}
    sweep = l1_rows([(24 * KiB, 125.0), (32 * KiB, 128.0), (48 * KiB, 130.0)]).assign(
        stop="budget", samples=[24, 24, 32], median_ms=1.0, p20_ms=[0.92, 0.94, 0.985], p80_ms=[1.08, 1.06, 1.015],
        **{"pass": 1})
    again = sweep.iloc[[2]].assign(gbps=150.0, point_id=lambda d: d["point_id"] + f"{PASS_MARK}2", **{"pass": 2})
    l1 = next(r for r in derive_roofs(pd.concat([sweep, again], ignore_index=True), cpu)[0] if r.name == "l1")
    assert l1.value == pytest.approx(128 / 0.94) and l1.point_id == sweep["point_id"].iloc[1]
    assert l1.extra["pass_count"] == 2 and "run_reach" not in l1.extra
    assert l1.interval == pytest.approx((128 / 0.94, 150 / 0.985 * math.exp(DEFAULT.pass_reach(2)
                                                                          * math.log(150 / 130))))


def test_fma_knee_and_corner_hand_worked():
    from roofs.analysis.roofline import Roofline
    from roofs.charts.fma import corner, knee, vector_roof
    # a sweep: 4,000 GB/s at I = 2 (8,000 GFLOP/s), flat at 60,000 GFLOP/s from I = 32
    rows = pd.DataFrame({"gflops": [8000.0, 30000.0, 60000.0, 60000.0], "gbps": [4000.0, 3750.0, 1875.0, 117.0]})
    assert knee(rows) == (15.0, 60000.0)                 # 60,000 / 4,000
    model = Roofline([Roof("bandwidth", "hbm", 4800.0, "GB/s"),
                      Roof("compute", "fp32", 64000.0, "GFLOP/s", extra={"unit": "vector"}),
                      Roof("compute", "bf16", 700000.0, "GFLOP/s", extra={"unit": "gemm"}),
                      Roof("compute", "bf16.vector", 120000.0, "GFLOP/s", extra={"unit": "vector"})])
    assert corner(model, "fp32", "hbm") == (pytest.approx(64000 / 4800), 64000.0)
    assert vector_roof(model, "bf16").name == "bf16.vector"   # bf16's own roof is its tensor GEMM
    assert vector_roof(model, "fp64") is None and corner(model, "fp64", "hbm") is None


def test_sustained_candidates_of_a_vector_roof_are_fma_chains():
    from roofs.analysis.confirm import candidate_rows
    rows = pd.DataFrame([{"family": f, "op": op, "dtype": "fp32", "status": "ok", "gflops": g, "point_id": op}
                         for f, op, g in (("gemm", "gemm.square", 50.0), ("fma", "fma.chains", 60.0))])
    vector = Roof("compute", "fp32", 60.0, "GFLOP/s", op="fma.chains", dtype="fp32", extra={"unit": "vector"})
    gemm = Roof("compute", "fp32", 50.0, "GFLOP/s", op="gemm.square", dtype="fp32")
    assert list(candidate_rows(rows, "compute", "fp32", {}, vector)["op"]) == ["fma.chains"]
    assert list(candidate_rows(rows, "compute", "fp32", {}, gemm)["op"]) == ["gemm.square"]
