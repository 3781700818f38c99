"""Revisit passes (ARCHITECTURE.md, rule 11; bench/measure/revisit.py): what a pass measures
again is declared (per octave of the stream and probe.l1 sweeps, per precision and unit, per
launch form its fastest rows), never derived mid-run; how many passes follows the noise
(needs_another_pass). Hand-made rows with known answers, then a runner's passes."""
import ast
import dataclasses
import time
from pathlib import Path

import pandas as pd
import pytest

from bench.hw import detect
from bench.hw.device import CacheLevel, DeviceInfo
from bench.measure import runner as runner_mod
from bench.measure.registry import load_all
from bench.measure.revisit import (
    group_of,
    halfwidth,
    ladder_rows,
    needs_another_pass,
    pass_bests,
    revisit_groups,
    revisit_passes,
    revisit_picks,
    revisit_selection,
    row_rate,
)
from bench.measure.runner import Plan, Runner, Task
from bench.policy import DEFAULT
from bench.results import Measurement, best_passes, first_pass_id

KiB, MiB = 2**10, 2**20
BUSY = "measured while the machine was busy: other processes used 60% of its 2 cores"
JUMP = "time jumped: 12x slower than the previous size of its sweep, measured twice"


def r(pid, op, ws=0, nbytes=0, flops=0, p20=1.0, mode="warm", dtype="float32", impl=None, timer="perf_counter_ns",
      status="ok", samples=10, flag="", pass_no=1):
    """A CSV row: its rate is nbytes (or flops) over p20 ms."""
    family = op.split(".")[0]
    return {"point_id": pid, "op": op, "family": family, "impl": impl or f"{op}/torch", "dtype": dtype,
            "working_set_bytes": ws, "bytes": nbytes, "flops": flops, "mode": mode, "median_ms": p20 * 1.05,
            "p20_ms": p20, "timer": timer, "status": status, "samples": samples, "flag": flag, "pass": pass_no}


def sweep() -> pd.DataFrame:
    rows = [
        # stream, octave 20 (1 MiB; 1.2 MiB rounds to it): 30, 50, 40 GB/s, a busy 90 left out
        r("s1", "stream.read", 2**20, 30e6), r("s2", "stream.copy", 2**20, 50e6),
        r("s3", "stream.triad", int(1.2 * MiB), 40e6), r("s4", "stream.reread", 2**20, 90e6, flag=BUSY),
        # 1.5 MiB: log2 = 20.58, octave 21, alone
        r("s5", "stream.read", int(1.5 * MiB), 99e6),
        # octave 27 (128 MiB): 40; a jumped 45, a cold 44, an error, a 3-sample 38 left out; 20
        r("s6", "stream.read", 2**27, 40e6), r("s7", "stream.copy", 2**27, 45e6, flag=f"{BUSY}; {JUMP}"),
        r("s8", "stream.triad", 2**27, 44e6, mode="cold"), r("s9", "stream.read", 2**27, 35e6, status="error"),
        r("s10", "stream.copy", 2**27, 38e6, samples=3), r("s11", "stream.triad", 2**27, 20e6),
        r("s12", "stream.read", 2**20, 99e6, pass_no=2),  # a pass's row: never a pick
        # probe.l1: octave 15 (32 KiB) 100, 120, 110; 48 KiB rounds to 16
        r("l1a", "probe.l1", 32 * KiB, 100e6), r("l1b", "probe.l1", 32 * KiB, 120e6),
        r("l1c", "probe.l1", 48 * KiB, 80e6), r("l1d", "probe.l1", 32 * KiB, 110e6),
        # GEMM: fp32 100, 150, 120 (cold) GFLOP/s; bf16 300 alone
        r("g1", "gemm.square", flops=100e6, dtype="fp32"), r("g2", "gemm.search", flops=150e6, dtype="fp32"),
        r("g3", "gemm.skinny", flops=120e6, dtype="fp32", mode="cold"),
        r("g4", "gemm.square", flops=300e6, dtype="bf16"),
        # FMA chains: torch's elementwise 20, 26, 24; Triton's vector 500
        r("f1", "fma.chains", flops=20e6, dtype="fp32"), r("f2", "fma.chains", flops=26e6, dtype="fp32"),
        r("f3", "fma.chains", flops=24e6, dtype="fp32"),
        r("f4", "fma.chains", flops=500e6, dtype="fp32", impl="fma.chains/triton"),
        # the launch probe: per impl and timer the fastest call
        r("la", "probe.launch", p20=0.004), r("lb", "probe.launch", p20=0.003),
        r("lc", "probe.launch", p20=0.010, timer="cuda_graph"),
    ]
    return pd.DataFrame(rows)


def test_a_stream_rows_group_is_its_octave_and_direction():
    """Each direction roof rests on rows measured again: a copy, a write and a read of one
    octave are three groups (rows without byte counts are reads)."""
    row = {"family": "stream", "op": "stream.copy", "mode": "warm", "working_set_bytes": 2**20}
    assert group_of({**row, "read_bytes": 2**19, "write_bytes": 2**19}) == ("stream", 20, "copy")
    assert group_of({**row, "read_bytes": 0, "write_bytes": 2**20}) == ("stream", 20, "write")
    assert group_of({**row, "read_bytes": 2**20, "write_bytes": 0}) == ("stream", 20, "read")


def test_a_pass_measures_the_declared_rows_again():
    """Each group's two fastest usable rows, and every row the runner flagged (s4 busy, s7 busy
    and jumped): they count for nothing, so their sizes are measured again."""
    assert revisit_selection(sweep()) == ["s2", "s3", "s4", "s5", "s6", "s7", "s11", "l1b", "l1c", "l1d",
                                          "g2", "g3", "g4", "f2", "f3", "f4", "lb", "lc"]
    groups = revisit_groups(sweep())
    assert groups[("stream", 20, "read")] == ["s2", "s3"] and groups[("stream", 27, "read")] == ["s6", "s11"]
    assert groups[("probe.l1", 15)] == ["l1b", "l1d"] and groups[("compute", "fp32", "gemm")] == ["g2", "g3"]
    assert groups[("compute", "fp32", "elementwise")] == ["f2", "f3"]
    assert groups[("launch", "probe.launch/torch", "perf_counter_ns")] == ["lb"]
    assert len(groups) == 11
    # one row per group when the policy says so (the launch probe's groups always one)
    assert revisit_selection(sweep(), dataclasses.replace(DEFAULT, revisit_top=1)) == \
        ["s2", "s4", "s5", "s6", "s7", "l1b", "l1c", "g2", "g4", "f2", "f4", "lb", "lc"]
    assert revisit_selection(pd.DataFrame()) == []


def test_a_kernels_larger_call_read_slower_than_a_smaller_one_is_measured_again():
    """fp32 FMA chains of 10, 40, 160, 2,560 and 10,240 MFLOP per call read 10, 20, 40, 25.6
    and 39.4 GFLOP/s: the 2,560 one is 36% below the 160 one, past Policy.shape_tol (10%), so a
    pass measures it again; 39.4 is within 10% of 40 and stays. bf16's ladder is its own: its
    1,000 MFLOP call reads 50, half its 100 MFLOP call's 100, so it is measured again too. Stream
    rows are no ladder (a larger set may leave a cache)."""
    rows = pd.DataFrame([
        r("c1", "fma.chains", flops=10e6, p20=1.0, dtype="fp32"),
        r("c2", "fma.chains", flops=40e6, p20=2.0, dtype="fp32"),
        r("c3", "fma.chains", flops=160e6, p20=4.0, dtype="fp32"),
        r("c4", "fma.chains", flops=2560e6, p20=100.0, dtype="fp32"),
        r("c5", "fma.chains", flops=10240e6, p20=260.0, dtype="fp32"),
        r("b1", "fma.chains", flops=100e6, p20=1.0, dtype="bf16"),
        r("b2", "fma.chains", flops=1000e6, p20=20.0, dtype="bf16"),
        r("s1", "stream.read", 2**20, 90e6), r("s2", "stream.read", 2**28, 9e6),
    ])
    assert ladder_rows(rows) == ["c4", "b2"]
    assert "c4" in revisit_selection(rows) and "b2" in revisit_selection(rows)
    # a row a pass measured (pass 2) is no pick, and a slower 2,560 within 10% stays
    assert ladder_rows(rows.assign(**{"pass": 2})) == []
    assert ladder_rows(rows.assign(p20_ms=[1.0, 2.0, 4.0, 66.0, 260.0, 1.0, 2.0, 1.0, 1.0])) == []


def test_a_rows_rate_is_its_work_over_a_low_quantile_of_its_samples():
    rows = sweep()
    # s1's samples, 10 of them at 0.5 ms and one slow: its low quantile 0.5 ms, 60 GB/s, past s2's 50
    samples = {"s1": [0.5e-3] * 10 + [5e-3]}
    assert row_rate(rows.iloc[0], samples["s1"]) == pytest.approx(60e9)
    assert row_rate(rows.iloc[0]) == pytest.approx(30e9)  # no samples: its p20_ms
    assert revisit_selection(rows, samples=samples)[:4] == ["s1", "s2", "s4", "s5"]
    # the launch probe's rate is calls per second: the fastest call highest
    assert row_rate(rows[rows.point_id == "lb"].iloc[0]) == pytest.approx(1 / 3e-6)
    assert group_of({"family": "stream", "op": "stream.read", "mode": "warm", "working_set_bytes": 0}) is None
    assert group_of({"family": "attention", "op": "attention.prefill", "mode": "warm"}) is None
    # a tie goes to the row that ran first
    tie = pd.DataFrame([r("a", "stream.read", 2**20, 10e6), r("b", "stream.copy", 2**20, 40e6),
                        r("c", "stream.triad", 2**20, 40e6)])
    assert revisit_selection(tie, dataclasses.replace(DEFAULT, revisit_top=1)) == ["b"]


def test_each_groups_best_in_each_pass():
    rows = pd.concat([sweep(), pd.DataFrame([
        r("s6#pass2", "stream.read", 2**27, 40e6, p20=0.8, pass_no=2),     # 50 GB/s
        r("s11#pass2", "stream.triad", 2**27, 20e6, pass_no=2),
        r("s6#pass3", "stream.read", 2**27, 40e6, p20=0.5, pass_no=3, flag=BUSY),  # busy: counts nowhere
        r("s1#pass2", "stream.read", 2**20, 30e6, p20=0.1, pass_no=2),     # 300 GB/s, but s1 is no pick
        r("g2#pass2", "gemm.search", flops=150e6, p20=1.2, dtype="fp32", pass_no=2),  # 125 GFLOP/s
    ])], ignore_index=True)
    bests = pass_bests(rows)
    assert bests[("stream", 27, "read")] == pytest.approx([40e9, 50e9])
    assert bests[("stream", 20, "read")] == pytest.approx([50e9])
    assert bests[("compute", "fp32", "gemm")] == pytest.approx([150e9, 125e9])
    assert halfwidth(bests[("stream", 27, "read")]) == pytest.approx(0.125)       # (50 / 40 - 1) / 2
    assert halfwidth(bests[("compute", "fp32", "gemm")]) == pytest.approx(0.1)  # (150 / 125 - 1) / 2
    assert halfwidth(bests[("stream", 20, "read")]) == 0.0                         # one pass says nothing
    assert pass_bests(pd.DataFrame()) == {}


def test_passes_follow_the_noise_within_the_policys_bounds():
    wide = {("stream", 27, "read"): [40.0, 45.0], ("compute", "fp32", "gemm"): [100.0, 101.0]}  # 6.25%: past 5%
    narrow = {("stream", 27, "read"): [40.0, 43.0], ("launch", "probe.launch/torch", "t"): [1.0]}  # 3.75%; one pass
    assert halfwidth([40, 45]) == pytest.approx(0.0625) and halfwidth([100, 80, 90]) == pytest.approx(0.125)
    # a full run (2 to 4 passes): the fewest always, whatever the noise or the time
    assert needs_another_pass(narrow, 90.0, 100.0, 1, False)
    # at 2: another while a group is wide and the passes took under 30% of the run
    assert needs_another_pass(wide, 10.0, 100.0, 2, False)
    assert needs_another_pass(wide, 29.9, 100.0, 3, False)
    assert not needs_another_pass(wide, 30.0, 100.0, 2, False)   # their share is spent
    assert not needs_another_pass(narrow, 10.0, 100.0, 2, False)  # every group within +-5%
    assert not needs_another_pass(wide, 10.0, 100.0, 4, False)   # the most
    assert not needs_another_pass({}, 10.0, 100.0, 2, False)
    # a quick run: 2, whatever the noise (two passes reach 66 spreads past the best, three 7.2)
    assert needs_another_pass(narrow, 0.0, 100.0, 0, True) and needs_another_pass(narrow, 90.0, 100.0, 1, True)
    assert not needs_another_pass(wide, 10.0, 100.0, 2, True)
    # a quick policy of 1 to 2: another while wide
    one_two = dataclasses.replace(DEFAULT, quick_min_passes=1)
    assert needs_another_pass(wide, 10.0, 100.0, 1, True, one_two)
    assert not needs_another_pass(narrow, 10.0, 100.0, 1, True, one_two)
    # the policy's target and share
    loose = dataclasses.replace(DEFAULT, target_halfwidth=0.10, pass_time_share=0.05)
    assert not needs_another_pass(wide, 1.0, 100.0, 2, False, loose)
    assert needs_another_pass({("stream", 27, "read"): [40.0, 50.0]}, 1.0, 100.0, 2, False, loose)
    assert not needs_another_pass({("stream", 27, "read"): [40.0, 50.0]}, 5.0, 100.0, 2, False, loose)


def test_a_cpu_run_has_the_policys_fewest_passes_a_gpu_none():
    cpu = DeviceInfo("cpu", "cpu", "cpu", 2**34, 2, "cores", (CacheLevel("l3", 32 * MiB),))
    gpu = DeviceInfo("cuda", "cuda:0", "gpu", 2**37, 132, "SMs", (CacheLevel("l2", 50 * MiB),))
    assert (revisit_passes(cpu, False), revisit_passes(cpu, True)) == (DEFAULT.min_passes, DEFAULT.quick_min_passes)
    assert (revisit_passes(gpu, False), revisit_passes(gpu, True)) == (0, 0)


def _measured(op, ws, gbps, mode="warm", pass_no=1):
    return Measurement(op=op, family="stream", impl=f"{op}/torch", backend="torch",
                       point={"dtype": "float32", "ws_bytes": ws}, size=ws // 4, shape="", working_set_bytes=ws,
                       flops=0, bytes=ws, mode=mode, status="ok", samples_s=(ws / (gbps * 1e9),) * 5,
                       stop="converged", pass_no=pass_no)


def test_the_runners_picks_are_the_selection_of_its_measurements():
    rows = [_measured("stream.read", 128 * MiB, 40), _measured("stream.copy", 128 * MiB, 45),
            _measured("stream.triad", 128 * MiB, 41), _measured("stream.read", 16 * MiB, 180),
            _measured("stream.copy", 16 * MiB, 150, mode="cold"), _measured("stream.read", 128 * MiB, 90, pass_no=2)]
    picks = revisit_picks(rows, detect.resolve("cpu"))
    assert [(op, p["ws_bytes"] // MiB, mode) for op, _, p, mode in picks] == \
        [("stream.copy", 128, "warm"), ("stream.triad", 128, "warm"), ("stream.read", 16, "warm")]
    assert revisit_picks([], None) == []


def test_nothing_that_measures_imports_roofs():
    root = Path(__file__).resolve().parents[1] / "bench"
    for path in [*(root / "measure").glob("*.py"), *(root / "ops").glob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any(n == "roofs" or n.startswith("roofs.") for n in names), path


def _plan(reg):
    copy, launch, square = reg.ops["stream.copy"], reg.ops["probe.launch"], reg.ops["gemm.square"]
    torch_of = lambda op: (reg.impls[f"{op.name}/torch"],)  # noqa: E731
    return Plan([Task(copy, {"dtype": "float32", "ws_bytes": 64 * 2**10}, torch_of(copy), ("warm",)),
                 Task(launch, {"form": "call"}, torch_of(launch)),
                 Task(square, {"dtype": "fp32", "shape": (32, 32, 32)}, torch_of(square))])


def test_a_runners_pass_measures_the_picks_again_uncut_by_a_predicted_time(monkeypatch):
    monkeypatch.setattr(runner_mod, "busy_flag", lambda tel, device: "")  # a shared host: no row left out
    one = dataclasses.replace(DEFAULT, quick_min_passes=1, quick_max_passes=1)
    runner = Runner(detect.resolve("cpu"), quick=True, revisits=1, policy=one)
    asked = []  # a pass repeats a point whose time is known: the predicted-time rule (rule 7) is not asked
    runner._predict_skip = lambda impl, op, point, mode: asked.append((op.name, runner._pass))
    out = runner.run(_plan(load_all()))
    again = [m for m in out if m.pass_no == 2]
    assert sorted((m.op, m.mode, m.status) for m in again) == [("gemm.square", "warm", "ok"),
                                                              ("probe.launch", "warm", "ok"),
                                                              ("stream.copy", "warm", "ok")]
    assert all(m.point_id.endswith("#pass2") and first_pass_id(m.point_id) + "#pass2" == m.point_id for m in again)
    assert {first_pass_id(m.point_id) for m in again} <= {m.point_id for m in out if m.pass_no == 1}
    assert {p for _, p in asked} == {1} and len(asked) == 3
    assert max(m.pass_no for m in out) == 2 and runner.revisit_s > 0


def test_a_revisit_makes_no_reference_and_carries_its_sweeps_error(monkeypatch):
    """A revisit re-times a point its sweep checked, on the same seeded inputs: each point's
    float64 reference is made once, in the sweep, and the revisit's row carries its error."""
    monkeypatch.setattr(runner_mod, "busy_flag", lambda tel, device: "")
    reg = load_all()
    made = []
    for name in ("stream.copy", "gemm.square"):
        op = reg.ops[name]
        reg.ops[name] = dataclasses.replace(op, reference=lambda x, ref=op.reference, name=name: (made.append(name),
                                                                                                   ref(x))[1])
    one = dataclasses.replace(DEFAULT, quick_min_passes=1, quick_max_passes=1)
    out = Runner(detect.resolve("cpu"), quick=True, revisits=1, policy=one).run(_plan(reg))
    assert sorted(made) == ["gemm.square", "stream.copy"]   # one reference each, for two passes
    for name in ("stream.copy", "gemm.square"):
        sweep, again = ([m for m in out if m.op == name and m.pass_no == p] for p in (1, 2))
        assert len(sweep) == len(again) == 1 and again[0].status == "ok"
        assert sweep[0].error is not None and again[0].error == sweep[0].error


def test_the_plans_end_adds_passes_while_a_group_is_wide_up_to_the_most(monkeypatch):
    monkeypatch.setattr(runner_mod, "busy_flag", lambda tel, device: "")
    cpu, plan = detect.resolve("cpu"), _plan(load_all())
    always = dataclasses.replace(DEFAULT, target_halfwidth=-1.0, pass_time_share=1.0,  # every group wide
                                 quick_min_passes=1)
    lines = []
    out = Runner(cpu, quick=True, revisits=1, policy=always, progress=lines.append).run(plan)
    assert sorted({m.pass_no for m in out}) == [1, 2, 3]  # quick: at most 2 passes
    assert sum(1 for m in out if m.pass_no == 3) == 3
    assert any(ln.startswith("[revisit 3]") and "another pass" in ln for ln in lines)
    never = dataclasses.replace(DEFAULT, target_halfwidth=10.0, quick_min_passes=1)
    assert sorted({m.pass_no for m in Runner(cpu, quick=True, revisits=1, policy=never).run(plan)}) == [1, 2]


def test_the_extra_passes_follow_the_planned_ones_only_at_the_plans_end():
    wide = [_measured("stream.read", 128 * MiB, 40), _measured("stream.read", 128 * MiB, 50, pass_no=2)]
    runner = Runner(detect.resolve("cpu"), quick=False, revisits=2)
    t0 = time.perf_counter() - 100.0  # a run 100 s in
    assert list(runner.passes_after(5, {3: [2], 5: [3]}, wide, t0, True)) == [3, 4, 5]  # up to 4 passes
    assert list(runner.passes_after(3, {3: [2], 5: [3]}, wide, t0, False)) == [2]
    narrow = [_measured("stream.read", 128 * MiB, 40), _measured("stream.read", 128 * MiB, 41, pass_no=2)]
    assert list(runner.passes_after(5, {3: [2], 5: [3]}, narrow, t0, True)) == [3]
    runner.revisit_s = 40.0  # past 30% of the run
    assert list(runner.passes_after(5, {3: [2], 5: [3]}, wide, t0, True)) == [3]
    assert list(runner.passes_after(0, {}, wide, t0, True)) == []  # no planned passes: a GPU, none


def test_a_chart_draws_each_points_fastest_pass():
    rows = pd.DataFrame({"point_id": ["a@warm", "b@warm", "a@warm#pass2", "a@warm#pass3"],
                         "median_ms": [2.0, 1.0, 1.5, 3.0]})
    assert best_passes(rows)["point_id"].tolist() == ["b@warm", "a@warm#pass2"]
    assert best_passes(rows.iloc[:2]).equals(rows.iloc[:2])
    assert first_pass_id("a@warm#pass12") == "a@warm" and first_pass_id("a@warm") == "a@warm"
