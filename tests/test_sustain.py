"""The sustained phase (ARCHITECTURE.md, rule 14): which rows stand for a roof
(roofs/analysis/confirm.py), how the burst and sustained figures sit beside each roof, and
the phase run end to end into a run folder (structure only: no speed is asserted)."""
import json

import pandas as pd
import pytest
import torch
from helpers import measured_row as row

from bench.hw import detect
from bench.measure.registry import Axis, Impl, Op, Registry
from bench.measure.runner import make_plan
from bench.measure.timing import TimerConfig
from bench.policy import DEFAULT
from bench.results import load_run
from bench.run.session import execute, run_meta
from bench.run.sustain_phase import TRUST_MIN_SAMPLES, candidates, sustained_timer
from roofs.analysis.confirm import candidate_rows, confirm, derive_roofs, pick, targets

MiB = 2**20
GPU = {"kind": "cuda", "caches": [{"name": "l2", "total_bytes": 50 * MiB}]}
CPUDEV = {"kind": "cpu", "caches": [{"name": "l2", "total_bytes": 1 * MiB}, {"name": "l3", "total_bytes": 32 * MiB}]}


def gpu_rows(sustained=True):
    """An H200-like sweep whose rows' rates are their figures exactly (p20 at the median), and
    sustained windows for the HBM, bf16 and fp32 roofs."""
    rows = [row("stream.copy", "torch", "float32", ws * MiB, bw, spread=0.0)
            for ws, bw in ((256, 4000.0), (512, 4100.0), (1024, 4050.0))]
    rows += [row("stream.reread", "triton", "int32", ws * MiB, bw, spread=0.0)
             for ws, bw in ((4, 9000.0), (8, 9400.0), (16, 9300.0))]
    rows += [row("gemm.square", "torch", "bf16", n * MiB, g, kind="gemm", spread=0.0)
             for n, g in ((64, 700e3), (128, 720e3))]
    rows += [row("gemm.square", "torch", "fp32", 64 * MiB, 50e3, kind="gemm", spread=0.0)]
    if sustained:
        rows += [row("stream.copy", "torch", "float32", 512 * MiB, 3900.0, "sustained", clock=1980.0, power=520.0,
                     joules=0.5),
                 row("stream.copy", "torch", "float32", 1024 * MiB, 3950.0, "sustained", clock=1975.0, power=530.0,
                     joules=0.53),
                 row("gemm.square", "torch", "bf16", 128 * MiB, 640e3, "sustained", kind="gemm", clock=1400.0,
                     power=690.0, spread=0.15),
                 row("gemm.square", "torch", "fp32", 64 * MiB, 49e3, "sustained", kind="gemm", flag=(
                     "measured while the machine was busy: other processes used 50% of its 2 cores"))]
    return pd.DataFrame(rows)


def merged(rows, device):
    roofs, notes = derive_roofs(rows, device)
    return {(r.kind, r.name): r for r in roofs}, notes


def test_burst_roofs_ignore_the_sustained_rows_and_carry_both_figures():
    """The burst roofs come from the sweep alone, the roof_rank-th (second) highest measurement
    of the outer half of each plateau: HBM's sizes 256 MiB-1 GiB (4,000, 4,100, 4,050), its
    outer half 512 MiB and 1 GiB, 4,050; L2's 4-16 MiB (9,000, 9,400, 9,300), its outer half
    8 and 16 MiB, 9,300; bf16's two shapes (700, 720 TFLOP/s), 700. Beside each, the best
    sustained window among its candidates."""
    roofs, _ = merged(gpu_rows(), GPU)
    hbm, l2, bf16 = (roofs[k] for k in (("bandwidth", "hbm"), ("bandwidth", "l2"), ("compute", "bf16")))
    assert (hbm.value, l2.value, bf16.value) == (4050.0, 9300.0, 700e3)
    assert hbm.extra["burst"] == 4050.0 and bf16.extra["burst"] == 700e3
    # sustained: the best sustained window on the roof's sizes, with its clock and power
    sus = hbm.extra["sustained"]
    assert sus["value"] == 3950.0 and sus["clock_mhz"] == 1975.0 and sus["power_w"] == 530.0
    assert sus["point_id"].endswith("@sustained") and sus["steady"] is True
    # a window that stepped down halfway is still the sustained figure, marked unsteady
    assert bf16.extra["sustained"]["value"] == 640e3 and bf16.extra["sustained"]["steady"] is False
    # a roof with no window says why
    assert l2.extra["sustained"] is None and l2.extra["sustained_code"] == "no_window"


def test_a_run_without_the_phase_says_so():
    roofs, _ = merged(gpu_rows(sustained=False), GPU)
    assert roofs[("bandwidth", "hbm")].extra["sustained"] is None
    assert roofs[("bandwidth", "hbm")].extra["sustained_code"] == "no_phase"
    assert "--sustain 0" in roofs[("bandwidth", "hbm")].extra["sustained_why"]


def test_candidates_are_the_best_distinct_points_and_sizes():
    rows = gpu_rows(sustained=False)
    roofs, _ = derive_roofs(rows, GPU)
    hbm = next(r for r in roofs if r.name == "hbm")
    # the same point timed warm and cold counts once; a bandwidth roof's candidates are distinct sizes
    extra = pd.DataFrame([row("stream.copy", "torch", "float32", 512 * MiB, 4090.0, "cold")])
    picked = pick(candidate_rows(pd.concat([rows, extra], ignore_index=True), "bandwidth", "hbm", GPU, hbm),
                  "bandwidth", 2)
    assert list(picked["working_set_bytes"]) == [512 * MiB, 1024 * MiB] and list(picked["mode"]) == ["warm", "warm"]
    bf16 = next(r for r in roofs if r.name == "bf16")
    assert list(pick(candidate_rows(rows, "compute", "bf16", GPU, bf16), "compute", 3)["gflops"]) == [720e3, 700e3]


def test_the_sustained_timer_samples_a_window():
    cfg = sustained_timer(0.25, TimerConfig(target_sample_s=5e-4))
    assert cfg.window_s == 0.25 and cfg.budget_s >= 0.5 and cfg.target_sample_s == 5e-4 and cfg.max_samples >= 1e6
    # enough samples to count (the Policy's min_samples), whatever a call takes, up to
    # LONG_CALL_S beyond the window: 5 calls of 0.9 s still fit a 1 s window's budget
    assert cfg.min_samples == TRUST_MIN_SAMPLES == DEFAULT.min_samples
    assert sustained_timer(1.0).budget_s >= TRUST_MIN_SAMPLES * 0.9


def toy_gemm() -> Registry:
    reg = Registry()
    reg.add_op(Op(
        name="toy.mm", family="gemm", doc="c = a @ b",
        axes=(Axis("dtype", ("fp32",)), Axis("n", (32, 64))),
        make_inputs=lambda p, d: {"a": torch.randn(p["n"], p["n"]), "b": torch.randn(p["n"], p["n"]),
                                  "c": torch.empty(p["n"], p["n"])},
        reference=lambda x: x["a"].double() @ x["b"].double(),
        flops=lambda p: 2 * p["n"] ** 3, bytes=lambda p: 12 * p["n"] ** 2, working_set=lambda p: 12 * p["n"] ** 2,
        describe=lambda p: (p["n"], f"{p['n']}^3"), tolerance=lambda p: 1e-4, outputs=("c",),
        precision=lambda p: "fp32"))
    reg.add_impl(Impl("toy.mm", "torch", "torch", lambda x, ctx: (lambda: torch.matmul(x["a"], x["b"], out=x["c"]))))
    return reg


def test_the_phase_runs_after_the_sweeps_into_the_run_folder(tmp_path, monkeypatch):
    from bench.measure import runner as runner_mod
    monkeypatch.setattr(runner_mod, "busy_flag", lambda tel, device: "")  # a shared host: no row left out
    cpu = detect.resolve("cpu")
    torch.matmul(torch.ones(64, 64), torch.ones(64, 64))  # the first matmul's set-up, outside the run
    # a budget no toy call comes near (none cut short), and the samples a row needs to count
    # (Policy.min_samples): each sweep row sets its roof, whatever the machine's speed or load
    timer = TimerConfig(budget_s=0.5, warmup_s=0.02, min_samples=DEFAULT.min_samples)
    plan = make_plan(toy_gemm(), cpu)
    lines = []
    status, ms = execute(tmp_path / "run", run_meta(cpu, {}, "device", timer), cpu, plan, timer, quick=True,
                         say=lines.append, sustain_s=0.05)
    assert status == "complete"
    sweep, sus = [m for m in ms if m.mode != "sustained"], [m for m in ms if m.mode == "sustained"]
    assert len(sweep) == 2 and len(sus) == 2 and ms[:2] == sweep    # after the sweeps, both points of fp32
    # both windows are the fp32 roof's candidates, each its sweep point run again
    assert [label for label, _ in candidates(sweep, cpu)] == ["fp32", "fp32"]
    for m, s in zip(sus, sweep):
        assert m.status == "ok" and m.stop == "window" and m.point_id.endswith("@sustained")
        assert m.point == s.point and "fp32 roof" in m.detail
    run = load_run(tmp_path / "run")                                  # rows and run.json agree
    assert list(run.measurements["mode"]) == ["warm", "warm", "sustained", "sustained"]
    info = json.loads((tmp_path / "run" / "run.json").read_text())["sustain"]
    assert info["window_s"] == 0.05 and info["candidates"] == 2 and "idle_window_s" in info
    assert any(line.startswith("[sustained 2/2]") for line in lines)
    # sweeps carry no energy; the candidates are recomputed from the rows alone
    assert all(m.telemetry.get("joules_per_call") is None for m in sweep)
    assert [m.point_id for _, m in candidates(sweep, cpu)] == [m.point_id for m in sweep]


def test_sustain_zero_runs_no_phase(tmp_path):
    cpu = detect.resolve("cpu")
    timer = TimerConfig(budget_s=0.03, warmup_s=0.002, min_samples=3)
    _, ms = execute(tmp_path / "run", run_meta(cpu, {}, "device", timer), cpu, make_plan(toy_gemm(), cpu), timer,
                    say=lambda line: None)
    assert [m.mode for m in ms] == ["warm", "warm"]
    assert json.loads((tmp_path / "run" / "run.json").read_text())["sustain"] == {"window_s": 0.0}


def test_charts_draw_the_sustained_roof_solid_and_the_burst_thin():
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from roofs.analysis.roofline import Roof, Roofline
    from roofs.charts.ceilings import draw_roofs
    from roofs.charts.kit import LabelPlacer
    sus = lambda v: {"burst": 1.0, "sustained": {"value": v, "point_id": "x@sustained"}}  # noqa: E731
    model = Roofline([Roof("bandwidth", "hbm", 4669.0, "GB/s", extra=dict(sus(4200.0), burst=4669.0)),
                      Roof("bandwidth", "l2", 7546.0, "GB/s", extra={"burst": 7546.0, "sustained": None}),
                      Roof("compute", "bf16", 797e3, "GFLOP/s", extra=dict(sus(673e3), burst=797e3))])
    fig = Figure()
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    placer = LabelPlacer(fig)
    draw_roofs(ax, placer, model, (1e-2, 1e4, 1.0, 1e7))
    gids = {a.get_gid(): a for a in ax.get_children() if a.get_gid()}
    xs, ys = gids["slope:hbm"].get_data()
    assert ys[0] / xs[0] == pytest.approx(4200.0) and gids["slope:hbm"].get_linewidth() == 2   # sustained: solid
    xs, ys = gids["slope:hbm:burst"].get_data()
    assert ys[0] / xs[0] == pytest.approx(4669.0) and gids["slope:hbm:burst"].get_linewidth() < 1  # burst: thin
    assert "slope:l2:burst" not in gids                          # no sustained figure: one line, as before
    flat = gids["flat:bf16"].get_segments()[0]
    assert flat[0][1] == pytest.approx(673e3)
    assert gids["flat:bf16:burst"].get_segments()[0][0][1] == pytest.approx(797e3)
    texts = {t.get_text().split(" ")[0]: t.get_text() for t in placer.place()}
    # a label with both figures where a roof has both, its one figure where it has one
    assert [texts["bf16"].count(f) for f in ("673 TFLOP/s", "797 TFLOP/s", "sustained", "burst")] == [1, 1, 1, 1]
    assert [texts["HBM"].count(f) for f in ("4,200 GB/s", "4,669 GB/s", "sustained", "burst")] == [1, 1, 1, 1]
    assert texts["L2"] == "L2 7,546 GB/s"


def test_the_validation_table_gives_both_figures():
    from roofs.analysis.roofline import Roof
    from roofs.reports.report import sustained_columns
    ref = Roof("compute", "bf16", 989e3, "GFLOP/s", source="datasheet")
    m = Roof("compute", "bf16", 797e3, "GFLOP/s", extra={"burst": 797e3, "sustained": {
        "value": 673e3, "clock_mhz": 1399.0, "power_w": 691.0, "point_id": "gemm[8192]@sustained", "steady": True}})
    cols = sustained_columns(m, ref)
    assert cols["sustained"] == 673e3 and cols["sustained clock MHz"] == 1399.0 and cols["sustained W"] == 691.0
    assert cols["% sustained of reference"] == pytest.approx(100 * 673 / 989)
    assert cols["sustained by"] == "gemm[8192]@sustained"
    why = sustained_columns(Roof("bandwidth", "l2", 7546.0, "GB/s", extra={"burst": 7546.0, "sustained": None,
                                                                           "sustained_why": "ran while busy"}), None)
    assert why["sustained"] is None and why["sustained by"] == "ran while busy"


def test_an_extra_line_runs_no_sustained_window_and_never_takes_a_gemms():
    """On a CPU the FMA chains are a line beside the GEMM roof (rule 10): the sustained phase
    re-runs the bf16 GEMM roof only, and confirm leaves the line without a sustained figure,
    though the only window that ran (a GEMM's) is of its precision."""
    from roofs.analysis.model import rated
    from roofs.analysis.roofline import Roof
    line = Roof(kind="compute", name="bf16.vector", value=12.4, unit="GFLOP/s", source="measured",
                op="fma.chains", dtype="bf16", interval=(12.4, 13.0), extra={"unit": "vector", "line_of": "bf16"})
    gemm = Roof(kind="compute", name="bf16", value=430.0, unit="GFLOP/s", source="measured",
                op="gemm.square", dtype="bf16", point_id="gemm.square/torch[dtype=bf16,ws=8388608]@warm",
                interval=(430.0, 440.0))
    rows = pd.DataFrame([row("gemm.square", "torch", "bf16", 8 * MiB, 430.0, kind="gemm"),
                         row("gemm.square", "torch", "bf16", 8 * MiB, 428.0, "sustained", kind="gemm")])
    assert [n for _, n, _ in targets([line, gemm], rows, CPUDEV)] == ["bf16"]
    out, _ = confirm([line, gemm], rows, rated(rows[rows["mode"] != "sustained"], {}), CPUDEV)
    got = {r.name: r.extra for r in out}
    assert "sustained" not in got["bf16.vector"] and got["bf16.vector"]["line_of"] == "bf16"
    assert got["bf16"]["sustained"]["value"] == 428.0 and got["bf16"]["burst"] == 430.0
