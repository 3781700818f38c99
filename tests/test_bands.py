"""Each measured roof's interval and confirmation (ARCHITECTURE.md, rule 17) in the pictures and the
text: every chart draws one band per measured roof with an interval (its vertices against the roof's
figures) and none for a roof without one; the report, the summary, compare, fleet and brief print
band_text; the report's confirmation section and findings on hand-made roofs.json.

The banded runs (tests/synthetic.py's banded) are tests/data's recorded runs and the synthetic GPU
run (conftest.py's banded_synthetic) with an "interval" (LOW to HIGH times each measured roof's
value: one-sided, as a shared host's noise is) and a "confirmation" added to their roofs, one roof
(L3) left without either, as a run derived before rule 17 is."""
import json
import re
import shutil
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.collections import PolyCollection  # noqa: E402
from synthetic import HIGH, LOW, UNBANDED, banded  # noqa: E402
from test_labels import crossings  # noqa: E402

from bench.results import load_run  # noqa: E402
from bench.util import fmt_num  # noqa: E402
from roofs.analysis.roofline import Roof, Roofline, band_text  # noqa: E402
from roofs.charts import plot  # noqa: E402
from roofs.charts.ceilings import BAND_LABEL, draw_roofs  # noqa: E402
from roofs.charts.labels import LabelPlacer  # noqa: E402
from roofs.reports.bands import CHECK_WHAT, confirmation_counts, confirmation_findings, judged  # noqa: E402

DATA = Path(__file__).parent / "data"

# hand-made confirmations of run_a's roofs: each status, and a check of each kind
CAUSE = "one impl's own limit: gemm.square/numpy reaches 61% of gemm.square/torch's figure"
CONFIRMATIONS = {
    "dram": {"status": "confirmed", "finding": "",
             "by": {"kind": "kernel", "what": "another kernel of the same direction", "impl": "stream.triad/torch",
                    "op": "stream.triad", "point_id": "p-triad", "value": 41.2, "interval": [39.0, 42.1],
                    "agrees": True},
             "checks": []},
    "bf16": {"status": "disputed", "by": None,
             "finding": "bf16 (gemm.square/torch): no independent measurement agrees with its band",
             "checks": [{"kind": "impl", "impl": "gemm.square/numpy", "op": "gemm.square", "value": 590.0,
                         "interval": [570.0, 600.0], "agrees": False, "cause": CAUSE}]},
    "fp32": {"status": "unconfirmed", "by": None, "checks": [],
             "finding": "fp32 (gemm.square/numpy): rests on one kernel and impl alone (gemm.square, "
                        "gemm.square/numpy)"},
}


@pytest.fixture(scope="module")
def run_a(tmp_path_factory) -> Path:
    return banded(DATA / "run_a", tmp_path_factory.mktemp("bands") / "run_a", CONFIRMATIONS)


def _bands(ax, prefix: str = "band:") -> dict:
    return {c.get_gid(): c for c in ax.collections if str(c.get_gid()).startswith(prefix)}


def _vertices(band) -> np.ndarray:
    return np.concatenate([p.vertices for p in band.get_paths()])


def _measured(run, kinds=("bandwidth", "compute")) -> dict:
    return {r["name"]: r for r in run.roofs if r.get("source") == "measured" and r["kind"] in kinds}


def test_the_overview_draws_one_band_per_measured_roof_with_an_interval(run_a):
    """A flat band spans low to high from the roof's ridge; a slope's band is BW_low x I to
    BW_high x I, topped at the highest compute roof (where its line ends) and ending where
    BW_low x I meets it; L3 (no interval) and the computed references get none."""
    run = load_run(run_a)
    fig = plot.draw_roofline(run)
    try:
        ax = fig.axes[0]
        bands = _bands(ax)
        roofs = _measured(run)
        assert set(bands) == {f"band:{n}" for n in roofs if n not in UNBANDED}
        assert all(isinstance(b, PolyCollection) for b in bands.values())
        top = max(r["value"] for r in roofs.values() if r["kind"] == "compute")
        lo_x = min(ax.get_xlim())
        for name, r in roofs.items():
            if name in UNBANDED:
                continue
            lo, hi = LOW * r["value"], HIGH * r["value"]
            xy = _vertices(bands[f"band:{name}"])
            if r["kind"] == "compute":   # a flat: low and high only, from its ridge with L1 (the fastest level)
                assert set(np.round(xy[:, 1], 9)) == {round(lo, 9), round(hi, 9)}, name
                assert xy[:, 0].min() == pytest.approx(r["value"] / roofs["l1"]["value"])
                continue
            corners = [(lo_x, lo * lo_x), (lo_x, hi * lo_x), (top / hi, top), (top / lo, top)]
            for x, y in corners:
                assert np.isclose(xy, [x, y], rtol=1e-9).all(axis=1).any(), (name, x, y)
            assert (xy[:, 1] >= lo * xy[:, 0] * (1 - 1e-9)).all() and (xy[:, 1] <= top * (1 + 1e-9)).all()
            assert (xy[:, 1] <= hi * xy[:, 0] * (1 + 1e-9)).all()
        lines = [t.get_text() for leg in ax.artists + [ax.get_legend()] if hasattr(leg, "get_texts")
                 for t in leg.get_texts()]
        assert lines.count(BAND_LABEL) == 1
    finally:
        plt.close(fig)


@pytest.mark.slow
def test_a_run_without_intervals_draws_no_band_and_no_band_legend(run_figures):
    for name, fig in run_figures(DATA / "run_a").items():
        assert not any(_bands(ax) for ax in fig.axes), name
        texts = [t.get_text() for t in plot.drawn_texts(fig)]
        assert BAND_LABEL not in texts, name


@pytest.mark.slow
def test_every_chart_that_draws_a_roof_draws_its_band(banded_synthetic, run_figures):
    """The family rooflines, fma.png and bandwidth.png draw each roof they draw with its band,
    through the one helper (gid band:<name>), each band the roof's own low and high."""
    run = load_run(banded_synthetic)
    roofs = _measured(run)
    figs = run_figures(banded_synthetic)
    gemm = _bands(figs["roofline-gemm.png"].axes[0])
    assert {"band:hbm", "band:l2", "band:l1", "band:bf16", "band:fp32", "band:fp8e4m3"} <= set(gemm)
    stream = _bands(figs["roofline-stream.png"].axes[0])
    assert set(stream) == {"band:hbm", "band:l2", "band:l1"}  # its slopes only: no flats drawn there
    fma = _bands(figs["fma.png"].axes[0])
    assert set(fma) == {"band:hbm", "band:fp32.vector", "band:bf16.vector"}
    for gid, band in fma.items():
        r = roofs[gid.split(":", 1)[1]]
        ys = _vertices(band)[:, 1]
        if r["kind"] == "compute":
            assert ys.min() == pytest.approx(LOW * r["value"]) and ys.max() == pytest.approx(HIGH * r["value"])
    panels = [ax for ax in figs["bandwidth.png"].axes if ax.get_visible()]
    for ax in panels:  # the run's roof of each level across the panel, a flat band on a GB/s axis
        bands = _bands(ax)
        assert set(bands) == {"band:hbm", "band:l2", "band:l1"}
        for gid, band in bands.items():
            r = roofs[gid.split(":", 1)[1]]
            assert set(np.round(_vertices(band)[:, 1], 6)) == {round(LOW * r["value"], 6),
                                                               round(HIGH * r["value"], 6)}
    gemv = [ax for ax in figs["roofline-gemv.png"].axes if ax.get_visible() and _bands(ax)]
    assert len(gemv) == 5
    for chart, fig in figs.items():  # their layout: test_plot's layout test draws these figures' texts
        assert any(_bands(ax) for ax in fig.axes) or chart in ("gemm.png", "links.png"), chart


@pytest.mark.slow
def test_no_text_of_a_banded_chart_overprints_and_no_label_crosses_a_band(run_a, run_figures):
    """On every chart of a banded run no two texts intersect or run off the figure, and no label
    crosses a line or a band's edge (test_labels.crossings samples the bands' edges too); the
    banded synthetic run's charts are test_plot.py's layout test's."""
    from test_plot import _intersecting
    for chart, fig in run_figures(run_a).items():
        assert any(_bands(ax) for ax in fig.axes) or chart in ("gemm.png", "links.png"), chart
        assert _intersecting(fig)[1] == [], chart
        assert crossings(fig, [t for ax in fig.axes for t in ax.texts]) == [], chart


def test_compare_chart_bands_each_runs_roofs(run_a):
    from roofs.reports.compare import figure_compare
    runs = [load_run(run_a), load_run(DATA / "run_b")]   # run 2 derived before rule 17: lines alone
    fig = figure_compare(runs)
    try:
        ax = fig.axes[0]
        bands = _bands(ax, "run")
        drawn = {g for g in bands if ":band:" in g}
        roofs = _measured(runs[0])
        want = {f"run1:band:{n}" for n, r in roofs.items() if n not in UNBANDED
                and (r["kind"] == "bandwidth" or "." not in n)}
        assert drawn == want
        legend = [t.get_text() for t in ax.get_legend().get_texts()]
        assert legend.count(BAND_LABEL) == 1
    finally:
        plt.close(fig)


def test_fleet_roofline_draws_the_fleets_spread_through_the_band_helper(tmp_path):
    from matplotlib.figure import Figure

    from roofs.charts import fleet as chart
    stats = {"hbm": {"median": 4000.0, "p5": 3800.0, "p95": 4100.0, "unit": "GB/s"},
             "bf16": {"median": 800e3, "p5": 760e3, "p95": 810e3, "unit": "GFLOP/s"}}
    seen = {}
    original = Figure.savefig

    def keep(fig, *a, **k):   # the chart draws and saves its own Figure: read its artists as it saves
        seen["bands"] = {c.get_gid(): _vertices(c) for c in fig.axes[0].collections}
        return original(fig, *a, **k)
    Figure.savefig = keep
    try:
        assert chart.draw_fleet_roofline(stats, "H200", tmp_path / "f.png")
    finally:
        Figure.savefig = original
    bands = seen["bands"]
    assert set(bands) == {"band:hbm", "band:bf16"}
    assert set(np.round(bands["band:bf16"][:, 1])) == {760e3, 810e3}
    xy = bands["band:hbm"]  # 3800 x I to min(4100 x I, the top compute p95)
    assert (xy[:, 1] >= 3800 * xy[:, 0] * (1 - 1e-9)).all() and xy[:, 1].max() == pytest.approx(810e3)


def test_a_label_sits_by_its_roofs_band_as_by_its_line():
    """A flat with a wide band: its label keeps clear of the band (above or below it), within
    the gap of the band's edge, with no leader line."""
    fig, ax = plt.subplots(figsize=(6, 4), dpi=120)
    placer = LabelPlacer(fig)
    lims = (1e-2, 1e3, 1.0, 1e4)
    model = Roofline([Roof("bandwidth", "dram", 80.0, "GB/s", interval=(60.0, 90.0)),
                      Roof("compute", "fp32", 200.0, "GFLOP/s", interval=(150.0, 260.0))])
    draw_roofs(ax, placer, model, lims)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(*lims[:2])
    ax.set_ylim(*lims[2:])
    fig.tight_layout()
    try:
        placed = placer.place()
        renderer = fig.canvas.get_renderer()
        flat = next(t for t in placed if t.get_text().startswith("fp32"))
        b = flat.get_window_extent(renderer)
        lo, hi = (ax.transData.transform((1.0, v))[1] for v in (150.0, 260.0))
        assert b.y0 >= hi or b.y1 <= lo                       # off the band
        assert min(abs(b.y0 - hi), abs(b.y1 - lo)) <= 3.0 + 2.0  # by its edge
        assert not [a for a in ax.lines if a.get_gid() == "leader"]
        assert crossings(fig, placed) == []
    finally:
        plt.close(fig)


# ---- the text ------------------------------------------------------------------------------

def test_summary_prints_each_roof_with_its_interval_and_counts_the_confirmations(run_a):
    from roofs.reports.summary import roof_rows, summary
    run = load_run(run_a)
    rows = {r["roof"]: r["value"] for r in roof_rows(Roofline(run.roofs))[0]}
    for name, r in _measured(run).items():
        iv = None if name in UNBANDED else (LOW * r["value"], HIGH * r["value"])
        assert rows[name] == band_text(r["value"], iv, r["unit"])
    assert rows["l3"] == f"{fmt_num(_measured(run)['l3']['value'])} GB/s"   # the figure alone
    model = Roofline(run.roofs)
    assert {r.name: r.confirmation["status"] for r in judged(model)} == {
        "dram": "confirmed", "bf16": "disputed", "fp32": "unconfirmed"}
    # the summary prints the line counting them: 1 of 3 confirmed, 1 disputed (naming bf16), 1 unconfirmed
    counts = confirmation_counts(model, prefix="")
    assert counts in summary(run) and "(bf16)" in counts
    assert [int(n) for n in re.findall(r"\b\d+\b", counts)] == [1, 3, 1, 1]


def test_report_lists_each_roofs_confirmation_and_each_disputed_one_as_a_finding(run_a):
    from roofs.reports.report import sections
    run = load_run(run_a)
    parts = dict(sections(run))
    conf = next(v for k, v in parts.items() if k.startswith("Confirmation"))
    # a line per judged roof: its name, its status, and the check that confirms it or the finding and causes
    lines = {line.split(":")[0]: line for line in conf[1:-1]}
    assert {name: next(s for s in ("unconfirmed", "disputed", "confirmed") if s in line)
            for name, line in lines.items()} == {"dram": "confirmed", "bf16": "disputed", "fp32": "unconfirmed"}
    by = CONFIRMATIONS["dram"]["by"]
    assert by["impl"] in lines["dram"] and CHECK_WHAT[by["kind"]] in lines["dram"]
    assert band_text(by["value"], tuple(by["interval"]), "GB/s") in lines["dram"]
    assert CAUSE in lines["bf16"]
    assert CONFIRMATIONS["fp32"]["finding"].split(": ", 1)[1] in lines["fp32"]
    assert conf[-1].startswith("Not judged") and "l3" in conf[-1] and "l1" in conf[-1]
    # one finding per disputed roof, with its impl and the cause of its failing check
    found = parts["Findings"]
    [disputed] = [f for f in found if "disputed" in f]
    assert confirmation_findings(Roofline(run.roofs)) == [disputed]
    assert disputed.split()[:2] == ["bf16", "(gemm.square/torch)"] and CAUSE in disputed
    dram = _measured(run)["dram"]
    figure = band_text(dram["value"], (LOW * dram["value"], HIGH * dram["value"]), "GB/s")
    assert found[0].startswith(f"DRAM bandwidth: {figure} by")
    table = next(v for k, v in sections(run) if k == "" and isinstance(v, pd.DataFrame) and "ceiling" in v)
    assert "interval" not in table
    row = table.set_index("ceiling")
    assert row.loc["dram", "measured"] == band_text(dram["value"], (LOW * dram["value"], HIGH * dram["value"]))
    assert row.loc["l3", "measured"] == fmt_num(_measured(run)["l3"]["value"])


@pytest.mark.renders
def test_a_run_derived_before_rule_17_says_so_once_and_counts_nothing():
    from roofs.reports.report import sections
    run = load_run(DATA / "run_a")
    parts = dict(sections(run))
    conf = next(v for k, v in parts.items() if k.startswith("Confirmation"))
    assert len(conf) == 1 and conf[0].startswith("No roof of this run carries a confirmation")
    assert confirmation_counts(Roofline(run.roofs)) == ""
    assert not any("disputed" in f for f in parts["Findings"])


def test_pct_of_attainable_carries_its_range_where_the_run_has_the_columns(run_a, tmp_path):
    from roofs.reports.report import best_rows
    plain = load_run(DATA / "run_a").measurements
    before = best_rows(plain)
    assert pd.api.types.is_float_dtype(before["pct_of_attainable"])  # older runs: the single figure
    d = Path(shutil.copytree(run_a, tmp_path / "run"))
    df = pd.read_csv(d / "measurements.csv")
    df["pct_of_attainable_low"] = df["pct_of_attainable"] * 0.9
    df["pct_of_attainable_high"] = df["pct_of_attainable"] * 1.05
    df["attainable_low"], df["attainable_high"] = df["attainable_gflops"] * 0.95, df["attainable_gflops"] * 1.1
    df.to_csv(d / "measurements.csv", index=False)
    after = best_rows(load_run(d).measurements)
    merged = before.assign(shown=after["pct_of_attainable"])
    for r in merged.itertuples():
        if pd.isna(r.pct_of_attainable):
            assert r.shown is None
        else:
            assert r.shown == band_text(r.pct_of_attainable, (0.9 * r.pct_of_attainable, 1.05 * r.pct_of_attainable))
    assert merged["shown"].notna().sum() >= 3


def test_compare_prints_each_runs_roof_with_its_interval(run_a, tmp_path):
    from roofs.reports.compare import compare
    text, out = compare([run_a, DATA / "run_b"], tmp_path / "cmp")
    dram = _measured(load_run(run_a))["dram"]["value"]
    assert band_text(dram, (LOW * dram, HIGH * dram)) in text     # run 1 with its interval
    b = _measured(load_run(DATA / "run_b"))["dram"]["value"]
    assert f"{fmt_num(b)} " in text or text.rstrip().endswith(fmt_num(b))  # run 2's figure alone
    assert band_text(dram, (LOW * dram, HIGH * dram)) in (out / "compare.md").read_text()


def _device(src: Path, dest: Path, host: str, start: str, scale: float = 1.0) -> Path:
    """Return a copy of run folder src at dest as a run of another machine (host) at start, its
    DRAM roof and interval scaled by scale."""
    d = Path(shutil.copytree(src, dest))
    meta = json.loads((d / "run.json").read_text())
    meta["device"]["host"], meta["start_utc"] = host, start
    (d / "run.json").write_text(json.dumps(meta))
    doc = json.loads((d / "roofs.json").read_text())
    for r in doc["roofs"]:
        if r["name"] == "dram" and r["source"] == "measured":
            r["value"], r["interval"] = r["value"] * scale, [v * scale for v in r["interval"]]
    (d / "roofs.json").write_text(json.dumps(doc))
    return d


def test_fleet_csv_holds_each_roofs_interval_and_fleet_md_prints_it(run_a, tmp_path):
    """Four machines, one of them measured twice and one with a DRAM roof 20% down: fleet.csv has
    "<roof>.low" and "<roof>.high" beside each roof (empty for L3, which has no interval); fleet.md's
    outlier line and its twice-measured device's table print the roof with its interval, and each
    group's table the median of its devices' interval ends."""
    from roofs.reports import fleet as fl
    runs = tmp_path / "runs"
    for i in range(4):
        _device(run_a, runs / f"n{i}", f"node{i}", f"2026-12-0{i + 1}T00:00:00+00:00", 0.8 if i == 3 else 1.0)
    _device(run_a, runs / "n0-again", "node0", "2026-12-09T00:00:00+00:00")
    md, result = fl.write_fleet(fl.gather([runs]), tmp_path / "out")
    table = pd.read_csv(tmp_path / "out" / "fleet.csv").set_index("run")
    cols = list(table.columns)
    assert cols.index("dram.low") == cols.index("dram") + 1 and cols.index("dram.high") == cols.index("dram") + 2
    dram = _measured(load_run(run_a))["dram"]["value"]
    slow = table.loc[str(runs / "n3")]
    assert slow["dram"] == pytest.approx(0.8 * dram)
    assert slow["dram.low"] == pytest.approx(0.8 * LOW * dram) and slow["dram.high"] == pytest.approx(0.8 * HIGH * dram)
    assert table["l3.low"].isna().all() and table["l3.high"].isna().all() and table["l3"].notna().all()
    stats = next(iter(result["groups"].values()))["roofs"]
    assert stats["dram"]["interval_median"] == pytest.approx([LOW * dram, HIGH * dram])
    assert "interval_median" not in stats["l3"]
    text = md.read_text()
    assert f"| {fmt_num(LOW * dram)}-{fmt_num(HIGH * dram)} |" in text  # the group table's column
    v = 0.8 * dram
    assert f"dram {band_text(v, (LOW * v, HIGH * v))} (20.0% below " in text  # the outlier, with its interval
    twice = text.split("## Devices measured more than once")[1].split("## Left out")[0]
    assert f"| {band_text(dram, (LOW * dram, HIGH * dram))} |" in twice


@pytest.mark.slow
def test_a_profiles_chart_bands_the_roofs_it_was_given(tmp_path):
    """A profile's roofline (left) and its bandwidth panel (right) band each roof with an interval
    (profile.json keeps the roofs as given), and only those."""
    from bench import api
    from bench.examples import profile_transformer as tf
    from roofs.charts.profile import draw_profile
    roofs = [Roof("bandwidth", "dram", 50.0, "GB/s", interval=(45.0, 52.0)), Roof("bandwidth", "l1", 300.0, "GB/s"),
             Roof("compute", "fp32", 200.0, "GFLOP/s", interval=(180.0, 210.0))]
    _, prefill, _ = tf.build(64, 1, 16, 256)
    p = api.profile(prefill, roofs=roofs, steps=1, out=tmp_path / "p", device="cpu")
    fig = draw_profile(p.folder)
    try:
        left, right = fig.axes[:2]
        assert set(_bands(left)) == {"band:dram", "band:fp32"}
        assert set(np.round(_vertices(_bands(left)["band:fp32"])[:, 1], 9)) == {180.0, 210.0}
        assert set(_bands(right)) == {"band:dram"}
        assert set(np.round(_vertices(_bands(right)["band:dram"])[:, 1], 9)) == {45.0, 52.0}
        assert BAND_LABEL in [t.get_text() for t in left.get_legend().get_texts()]
    finally:
        plt.close(fig)
