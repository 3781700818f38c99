"""The pictures: which charts a run gets, what they draw, and that no two texts overprint.

Drawn from the recorded runs in tests/data, the committed reference run, and a synthetic
GPU-like run (tests/synthetic.py) with every family, the boundary and bound_note columns, a
borrowed compute roof, datasheet roofs and flagged points; the layout and worker tests draw its
banded copy (conftest.py's banded_synthetic), the charts' full set as a rule-17 run has them."""
import dataclasses
import shutil
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from synthetic import L1, L2, PEAK, make_row, make_synthetic_run  # noqa: E402
from test_labels import crossings  # noqa: E402

from bench.results import load_run  # noqa: E402
from roofs.charts import plot  # noqa: E402
from roofs.charts.families import draw_gemv_roofline  # noqa: E402
from roofs.charts.registry import CHARTS, charts_for  # noqa: E402

ROOT = Path(__file__).parent.parent
DATA = Path(__file__).parent / "data"
REFERENCE = ROOT / "results" / "cpu-amd-epyc-20261130T024914Z"   # the committed reference runs
H200 = ROOT / "results" / "nvidia-h200-20261130T010900Z"


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    return make_synthetic_run(tmp_path_factory.mktemp("plot") / "synthetic")


@pytest.fixture(scope="module")
def synthetic_drawn(banded_synthetic, tmp_path_factory):
    """Return (a copy of the banded synthetic run with every chart drawn by plot_run in 2 worker
    processes, the paths it returned): drawn once, for the report test and the serial one."""
    d = Path(shutil.copytree(banded_synthetic, tmp_path_factory.mktemp("drawn") / "run"))
    return d, plot.plot_run(d, workers=2)


def _runs(banded_synthetic):
    return {"run_a": DATA / "run_a", "run_b": DATA / "run_b", "reference": REFERENCE, "h200": H200,
            "synthetic": banded_synthetic}


def _intersecting(fig) -> tuple[int, list[tuple[str, str]]]:
    """Return how many texts a draw of fig puts on it, and every pair of them whose display
    boxes intersect; a text reaching past the figure's edge pairs with "(the figure's edge)"."""
    texts = plot.drawn_texts(fig)
    renderer = fig.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in texts]
    edge = fig.bbox
    out = [(t.get_text(), "(the figure's edge)") for t, b in zip(texts, boxes)
           if b.x0 < edge.x0 - 0.5 or b.y0 < edge.y0 - 0.5 or b.x1 > edge.x1 + 0.5 or b.y1 > edge.y1 + 0.5]
    out += [(texts[i].get_text(), texts[j].get_text())
            for i in range(len(boxes)) for j in range(i + 1, len(boxes))
            if boxes[i].x0 < boxes[j].x1 and boxes[j].x0 < boxes[i].x1
            and boxes[i].y0 < boxes[j].y1 and boxes[j].y0 < boxes[i].y1]
    return len(texts), out


# each run's charts cost seconds of drawing: slow but for run_a, which the quick tier keeps
@pytest.mark.parametrize("name", ["run_a", *(pytest.param(n, marks=pytest.mark.slow)
                                             for n in ("run_b", "reference", "h200", "synthetic"))])
def test_charts_of_a_run_and_no_two_texts_overprint(name, banded_synthetic, run_figures):
    """Every chart the table gives the run is drawn (roofs/charts/registry.py: a family chart only
    for the families the run has; tests/test_chart_table.py the other side); on every chart no two
    drawn texts (labels, titles, ticks, legend entries) intersect, none runs off the figure, and
    no drawn line (leaders aside) passes through a label."""
    folder = _runs(banded_synthetic)[name]
    figs = run_figures(folder)
    assert list(figs) == [c.file for c in charts_for(load_run(folder))]
    for chart, fig in figs.items():
        count, overlaps = _intersecting(fig)
        assert count > 5, chart  # titles, ticks and labels were drawn
        assert overlaps == [], f"{name}/{chart}"
        # no label on a line: roofs, sweeps, size lines and frames pass beside every label
        assert crossings(fig, [t for ax in fig.axes for t in ax.texts]) == [], f"{name}/{chart}"


def _gids(ax) -> dict:
    return {a.get_gid(): a for a in ax.get_children() if a.get_gid()}


def test_overview_roofs_points_and_legend(synthetic):
    run = load_run(synthetic)
    fig = plot.draw_roofline(run)
    try:
        ax = fig.axes[0]
        gids = _gids(ax)
        top = max(v for p, v in PEAK.items() if p != "fp16") * 0.9
        for level, bw in (("hbm", 4000.0), ("l2", 7000.0), ("l1", 9000.0)):  # every slope reaches the top roof
            xs, ys = gids[f"slope:{level}"].get_data()
            assert max(ys) == pytest.approx(top) and max(xs) == pytest.approx(top / bw)
        assert {"slope:hbm:datasheet", "slope:host.h2d.pinned"} <= set(gids)
        assert {"slope:link.sendrecv.1->2", "slope:link.sendrecv.0->1"} <= set(gids)  # the pairs' fastest, slowest
        assert sum(t.get_text().startswith("link.sendrecv, 3 pairs: 301 GB/s to 312 GB/s") for t in ax.texts) == 1
        assert "flat:bf16:datasheet" in gids and not any(g.endswith("datasheet@clock") for g in gids)
        texts = [t.get_text() for t in ax.texts]
        assert any("fp32, fp16 via fp32" in t for t in texts)  # the borrowed roof shares fp32's line, labelled so
        best = plot.roofline_points(run.measurements)
        assert len(best) == len(best.drop_duplicates(["op", "impl", "precision"]))
        # each best point labelled: by its point, by a number of the key, or by its place in the key
        placeless = [line for t in ax.texts if t.get_gid() == "label:key" for line in t.get_text().split("\n")
                     if line.startswith("-  ")]
        assert len([t for t in ax.texts if t.get_gid() == "label:point"]) + len(placeless) == len(best)
        said = [line.split("  ", 1)[-1] for t in texts for line in t.split("\n")]  # on the chart or in its key
        assert any(t.startswith("prefill/triton fp16") and "above its bound" in t for t in said)
        assert len(gids["flagged"].get_offsets()) == int(best["flagged"].sum()) >= 1
        sweep = gids["sweep:user.double:torch:fp32"]  # a user's sweep: one marker per shape, joined
        assert len(sweep.get_xdata()) == 2 and sweep.get_marker() == "o" and sweep.get_linestyle() == "-"
        from roofs.charts.kit import LEVEL_COLORS
        for level in ("hbm", "l2", "l1"):  # each level in its own colour, as on every chart
            assert matplotlib.colors.same_color(gids[f"slope:{level}"].get_color(), LEVEL_COLORS[level])
        entries = [t.get_text() for t in ax.get_legend().get_texts()]
        assert len(entries) <= 13 and {"stream", "gemm", "gemv", "attention", "user"} <= set(entries)
    finally:
        plt.close(fig)


def test_bandwidth_panels_draw_roofs_json_roofs_on_the_panel_of_their_dtype(synthetic):
    """bandwidth.png reads roofs.json and re-derives nothing: each level roof drawn thick on the
    panel of the dtype whose row set it, over the sizes its statistic is over (extra.window_bytes,
    shaded in its colour on every panel), or over its plateau where the run recorded no window
    (nothing shaded for it); every level's roof thin on every panel; no dtype's own candidate."""
    run = load_run(synthetic)
    roofs = []
    for r in run.roofs:
        r = dict(r)
        if r["source"] == "measured" and r["name"] == "hbm":
            r.update(dtype="float32", extra={**(r.get("extra") or {}), "window_bytes": [256 * 2**20, 2**30]})
        elif r["source"] == "measured" and r["name"] == "l2":
            r.update(dtype="bfloat16")
        roofs.append(r)
    fig = plot.draw_bandwidth(dataclasses.replace(run, roofs=roofs))
    try:
        panels = {ax.get_title().split(":")[0]: ax for ax in fig.axes if ax.get_visible()}
        assert set(panels) == {"float32", "bfloat16"}
        from roofs.charts.kit import LEVEL_COLORS
        for ax in panels.values():
            gids = _gids(ax)
            assert not [g for g in gids if g.startswith("candidate:")]
            assert {g for g in gids if g.startswith("overall:")} == {"overall:hbm", "overall:l2", "overall:l1"}
            for name in ("hbm", "l2", "l1"):  # the level's colour, as on the rooflines
                assert matplotlib.colors.same_color(gids[f"overall:{name}"].get_color(), LEVEL_COLORS[name])
            # the window roofs.json records for hbm, shaded; none for the levels that record none
            span = gids["window:hbm"]
            assert span.get_x() == pytest.approx(256 * 2**20 / plot.WINDOW_PAD)
            assert span.get_x() + span.get_width() == pytest.approx(2**30 * plot.WINDOW_PAD)
            assert {g for g in gids if g.startswith("window:")} == {"window:hbm"}
        f32, bf16 = _gids(panels["float32"]), _gids(panels["bfloat16"])
        assert {g for g in f32 if g.startswith("roof:")} == {"roof:hbm"}
        assert {g for g in bf16 if g.startswith("roof:")} == {"roof:l2"}
        (x0, y0), (x1, _) = f32["roof:hbm"].get_segments()[0]
        assert y0 == 4000.0 and x0 == pytest.approx(256 * 2**20 / plot.WINDOW_PAD)
        (x0, y0), (x1, _) = bf16["roof:l2"].get_segments()[0]  # no window recorded: over its plateau
        assert y0 == 7000.0 and x0 == pytest.approx(L1 / plot.WINDOW_PAD)
        assert x1 == pytest.approx(0.75 * L2 * plot.WINDOW_PAD)
    finally:
        plt.close(fig)


@pytest.mark.slow
def test_gemv_chart_joins_each_layers_batch_walk(synthetic):
    fig = draw_gemv_roofline(load_run(synthetic))
    try:
        panels = [ax for ax in fig.axes if ax.get_visible() and ax.get_title().endswith("compute)")]
        assert [ax.get_title().split()[0] for ax in panels] == ["fp16", "bf16", "fp8", "int8", "int4"]
        for ax in panels:
            walks = [a for g, a in _gids(ax).items() if g.startswith("walk:")]
            assert len(walks) == 4 * 4  # impls x layers
            for line in walks:
                xs = list(line.get_xdata())
                assert len(xs) == 9 and xs == sorted(xs)  # B = 1 .. 256, intensity rising with B
            # the slopes crowd each panel's corner: unlabelled there, their figures in the shared legend
            assert {"slope:hbm", "slope:l2", "slope:l1"} <= set(_gids(ax))
            assert not [t.get_text() for t in ax.texts
                        if t.get_text().startswith(("HBM ", "L2 ", "L1 ")) and "datasheet" not in t.get_text()]
        entries = [t.get_text() for leg in fig.legends for t in leg.get_texts()]
        for level in ("HBM", "L2", "L1"):
            assert sum(e.startswith(f"slope: {level} ") and "GB/s" in e for e in entries) == 1, entries
    finally:
        plt.close(fig)


def test_triton_points_are_drawn_at_each_level_they_cross(synthetic):
    """Each point with l2_bytes (and l1_bytes) is drawn again at FLOPs / those bytes, at the
    same GFLOP/s, joined to its compulsory-intensity point by a thin line."""
    from roofs.charts.families import draw_gemm_roofline
    run = load_run(synthetic)
    fig = draw_gemm_roofline(run)
    try:
        gids = _gids(fig.axes[0])
        l2, l1 = gids["levels:l2"], gids["levels:l1"]
        df = run.measurements
        tiled = df[(df["family"] == "gemm") & (df["l2_bytes"] > 0)]
        assert len(l2.get_offsets()) == len(l1.get_offsets()) == len(tiled)
        assert sorted(x for x, _ in l2.get_offsets()) == pytest.approx([80.0] * len(tiled))
        assert sorted(x for x, _ in l1.get_offsets()) == pytest.approx([60.0] * len(tiled))
        line = gids["levels:lines"]
        assert sum(1 for x in line.get_xdata() if x != x) == len(tiled)  # one joined segment per point
    finally:
        plt.close(fig)


def test_label_placer_separates_labels_at_one_point():
    fig, ax = plt.subplots(figsize=(6, 4), dpi=plot.DPI)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(0.7, 1000)  # not a decade at the corner: matplotlib's own 10^0 labels would meet there
    ax.set_ylim(0.7, 1000)
    ax.plot([1, 1000], [1, 1000])
    fig.tight_layout()
    placer = plot.LabelPlacer(fig)
    for i in range(25):
        placer.add(ax, 30, 30, f"label number {i}")
    placed = placer.place()
    try:
        assert len(placed) == 25 and _intersecting(fig)[1] == []
        renderer = fig.canvas.get_renderer()
        inside = ax.get_window_extent(renderer)
        assert all(inside.x0 <= t.get_window_extent(renderer).x0 and t.get_window_extent(renderer).y1 <= inside.y1
                   for t in placed)  # there was room inside the axes for all of them
    finally:
        plt.close(fig)


@pytest.mark.slow
def test_report_embeds_the_family_charts(synthetic_drawn, tmp_path):
    from roofs.reports.report import write_report
    d = Path(shutil.copytree(synthetic_drawn[0], tmp_path / "run"))  # its charts drawn by plot_run
    paths = synthetic_drawn[1]
    # every chart but energy.png: the synthetic run has every family and no energy readings (tests/test_report.py has)
    drawn = {c.file for c in CHARTS} - {"energy.png"}
    assert {p.name for p in paths} == drawn
    md, html = write_report(d)
    text = md.read_text()
    for name in drawn:
        assert f"({name})" in text, name
    page = html.read_text()
    assert "base64" not in page  # linked, not inlined
    for name in drawn:
        assert f'src="{name}"' in page and (d / name).exists(), name


@pytest.mark.slow
def test_charts_drawn_in_worker_processes_equal_those_drawn_here(banded_synthetic, synthetic_drawn, run_figures,
                                                                 tmp_path):
    """plot_run's forked workers (synthetic_drawn) save the bytes that the same charts drawn in
    this process (plot.figures, shared with the layout tests through run_figures) save."""
    here = run_figures(banded_synthetic)
    two = synthetic_drawn[1]  # plot_run(..., workers=2)
    assert sorted(here) == sorted(p.name for p in two) and here
    for path in two:
        mine = plot.save_chart(here[path.name], tmp_path / path.name)
        assert mine.read_bytes() == path.read_bytes(), path.name


def test_a_saved_chart_is_drawn_once_per_file(monkeypatch, tmp_path):
    """Saving draws the figure once per file: no layout pass before the draw that is saved."""
    fig = plot.draw_roofline(load_run(DATA / "run_a"))
    draws = []
    real = Figure.draw
    monkeypatch.setattr(Figure, "draw", lambda self, renderer: draws.append(renderer) or real(self, renderer))
    try:
        plot.save_chart(fig, tmp_path / "roofline.png")
    finally:
        plt.close(fig)
    assert (tmp_path / "roofline.svg").exists() and (tmp_path / "roofline.png").exists()
    assert len(draws) == 2  # the SVG's and the PNG's


def test_compare_chart_has_every_run_in_its_legend_and_no_overprinted_label(nodram):
    """Every run in the legend (one without an off-chip roof too: conftest.py's nodram), and the
    right-edge labels of equal roofs of several runs never overprint."""
    from roofs.reports.compare import figure_compare
    runs = [load_run(DATA / "run_a"), load_run(DATA / "run_b"), load_run(nodram)]
    fig = figure_compare(runs)
    try:
        legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
        for i in (1, 2, 3):
            assert any(t.startswith(f"run {i}: AMD EPYC") for t in legend), legend
        assert any(t.startswith("run 3:") and "no off-chip roof" in t for t in legend)
        count, overlaps = _intersecting(fig)
        assert overlaps == []
        ax = fig.axes[0]
        gids = {a.get_gid() for a in ax.get_children() if a.get_gid()}
        labels = [t.get_text() for t in ax.texts]
        for i, run in enumerate(runs, 1):
            for r in run.roofs:  # every level's slope and every precision's flat of every run
                if r["source"] == "measured" and r["kind"] == "bandwidth" and r["name"] in ("l1", "l2", "l3", "dram"):
                    assert f"run{i}:slope:{r['name']}" in gids, (i, r["name"])
                if r["source"] == "measured" and r["kind"] == "compute" and "." not in r["name"]:
                    assert f"run{i}:{r['name']}" in gids, (i, r["name"])
                    # one label per roof: the runs sharing a value share it
                    assert sum(t.split(": ", 1)[1].startswith(r["name"] + " ") and str(i) in t.split(":")[0]
                               for t in labels) == 1, (i, r["name"], labels)
    finally:
        plt.close(fig)


def test_compare_chart_of_runs_without_any_roof():
    """Runs with no roof and no FLOP-counted point (a busy machine's quick
    stream run) still give a compare chart: nothing to scale, so it says so."""
    from roofs.reports.compare import figure_compare
    run = load_run(DATA / "run_a")
    run.roofs = []
    run.measurements = run.measurements[run.measurements["family"] == "stream"].assign(flops=0)
    fig = figure_compare([run, run])
    try:
        fig.savefig(__import__("io").BytesIO(), format="png")
        # no roof nor point to scale: the empty axes' default span, and one note at their centre
        ax = fig.axes[0]
        centre = [t for t in ax.texts if tuple(t.get_position()) == (0.5, 0.5) and t.get_transform() == ax.transAxes]
        assert ax.get_ylim() == (1, 1e4) and len(centre) == 1 and centre[0] in plot.drawn_texts(fig)
    finally:
        plt.close(fig)


def test_overview_leaves_off_and_names_a_best_point_far_under_its_bound(synthetic, tmp_path):
    # an fp8 GEMM on a slow path at 1e-3 GFLOP/s (bound 400,000) would stretch the y axis over decades
    d = Path(shutil.copytree(synthetic, tmp_path / "run"))
    df = pd.read_csv(d / "measurements.csv")
    slow = make_row("gemm.square", "torch_best", "float8_e4m3fn", 64, "64x64x64", 3 * 64 * 64, 2 * 64**3, 3 * 64 * 64,
                    2 * 64**3 / 1e6, precision="fp8e4m3")
    near = dict(slow, impl="gemm.square/triton_best", point_id=slow["point_id"].replace("torch_best", "triton_best"),
                median_ms=slow["median_ms"] / 500, gflops=0.5)  # 0.125% of the same bound: drawn
    assert slow["gflops"] == pytest.approx(1e-3)
    rows = pd.DataFrame([slow, near]).assign(attainable_gflops=400.0)
    pd.concat([df, rows], ignore_index=True).to_csv(d / "measurements.csv", index=False)
    fig = plot.draw_roofline(load_run(d))
    try:
        ax = fig.axes[0]
        labels = [t.get_text() for t in ax.texts if t.get_gid() == "label:point"]
        assert not any(t.startswith("square/torch_best") for t in labels)
        assert any(t.startswith("square/triton_best") for t in labels)
        assert ax.get_ylim()[0] > 1e-3  # the axis was not stretched down to the slow point
        # the one best point it leaves off, and the footnote names it (and not the one it draws)
        from roofs.analysis.roofline import Roofline
        from roofs.charts.kit import converted, far_under_bound, roofline_points
        run = load_run(d)
        best = roofline_points(run.measurements)
        under = best[far_under_bound(best, converted(Roofline(run.roofs)))]
        assert list(under["impl"]) == ["gemm.square/torch_best"] and under["gflops"].iloc[0] == pytest.approx(1e-3)
        notes = [t.get_text() for t in fig.texts if "left off" in t.get_text()]
        assert len(notes) == 1 and "square/torch_best" in notes[0] and "square/triton_best" not in notes[0]
    finally:
        plt.close(fig)


def test_a_busy_point_is_not_drawn_as_above_its_bound():
    # red rings mean "above its attainable bound"; a row the runner flagged (busy, a time jump) is
    # no point at all on a roofline, above its bound or not: its time says nothing of the kernel
    from roofs.charts.kit import _points
    df = pd.DataFrame({"status": ["ok"] * 4, "flops": [1e9] * 4, "gflops": [10.0, 11.0, 12.0, 13.0],
                       "intensity": [1.0] * 4, "dtype": ["float32"] * 4, "precision": ["fp32"] * 4,
                       "flag": ["measured while the machine was busy: load 3", "",
                                "measured while the machine was busy: "
                                "load 3; above its attainable 9 GFLOP/s even at p80 (9.5): a test",
                                "above its attainable 9 GFLOP/s even at p80 (9.5): a test"]})
    pts = _points(df)
    assert list(pts["gflops"]) == [11.0, 13.0] and list(pts["flagged"]) == [False, True]


def test_a_model_runs_layer_ops_are_each_a_point():
    """Three layer GEMMs of one model op and impl, and two stream rows: three points for
    the model (one per shape), one for the stream kernel (its best)."""
    def row(op, family, shape, gflops, precision="bf16"):
        return {"op": op, "family": family, "impl": f"{op}/torch", "shape": shape, "mode": "warm", "status": "ok",
                "flops": 1e9, "gflops": gflops, "intensity": 10.0, "precision": precision, "dtype": "bfloat16",
                "flag": "", "boundary": ""}
    df = pd.DataFrame([row("model.gemm", "model", "2048x6144x4096", 400.0),
                       row("model.gemm", "model", "2048x4096x4096", 380.0),
                       row("model.gemm", "model", "2048x28672x4096", 420.0),
                       row("stream.triad", "stream", "64 MiB", 5.0, ""),
                       row("stream.triad", "stream", "1 GiB", 6.0, "")])
    best = plot.roofline_points(df)
    assert sorted(best[best["family"] == "model"]["gflops"]) == [380.0, 400.0, 420.0]
    assert list(best[best["family"] == "stream"]["gflops"]) == [6.0]
