"""What the tables and charts show of a roof (issue 55, items 2, 6 and 7): a precision with no
unit of its own shows its wider path's line as such ("fp8e4m3 via bf16") with its own rows drawn
and the reason code they run below it; each chart shades the sizes roofs.json records each
level's roof came from; rows the runner flagged are never a normal point.

A small CPU-like run folder written here (the derivation's records: tests/test_roof_records.py): its stream sweep holds
31 rows flagged by the runner at ~7,970 us whatever their size (~0 GB/s), and its fp8 GEMMs ran
at 0.01 GFLOP/s under the line "fp8e4m3 via bf16" (846 GFLOP/s)."""
import json
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from synthetic import EXTRA, make_row  # noqa: E402

from bench.results import COLUMNS, RUNNER_FLAGS, load_run  # noqa: E402
from roofs.analysis.model import CONVERTS_EACH_CALL  # noqa: E402
from roofs.analysis.roofline import Roofline  # noqa: E402
from roofs.charts import plot  # noqa: E402
from roofs.charts.fma import _sweeps  # noqa: E402
from roofs.charts.kit import converted, far_under_bound, roof_windows, roofline_points  # noqa: E402
from roofs.reports.precisions import own_rate  # noqa: E402
from roofs.reports.report import validation  # noqa: E402
from roofs.reports.summary import roof_rows  # noqa: E402

KIB, MIB = 2**10, 2**20
SLOW_S = 7.97e-3   # the flagged rows' time, whatever their size
DRAM_WINDOW = [362 * MIB, 512 * MIB]   # the sizes the dram roof came from (the outer half past the L3)
FROM = 128 * MIB                       # its plateau's first size: not where its roof came from


# --- a small CPU-like run folder ---------------------------------------------------------------

def _roof(kind, name, value, **kw):
    unit = "GB/s" if kind == "bandwidth" else "GFLOP/s"
    return {"kind": kind, "name": name, "value": value, "unit": unit, "source": "measured", "op": "", "impl": "",
            "dtype": "", "point_id": "", "shape": "", **kw}


def _rows() -> pd.DataFrame:
    rows = []
    for k in range(0, 22):  # 256 KiB .. 512 MiB, two sizes an octave
        ws = int(2 ** (18 + k / 2))
        gbps = 300.0 if ws <= 2 * MIB else (210.0 if ws <= 32 * MIB else 70.0)
        rows.append(make_row("stream.copy", "torch", "float32", ws, f"({ws // 8},)", ws, 0, ws, ws / gbps / 1e9))
    flags = list(RUNNER_FLAGS)   # every flag the runner sets (busy, time jump and any it adds)
    for i in range(31):          # the runner's flagged rows, 1 KiB-32 MiB: one time whatever their size
        ws = int(2 ** (10 + i / 2))
        flag = f"{flags[i % len(flags)]}: synthetic"
        rows.append(make_row("stream.copy", "torch", "float32", ws, f"({ws // 8},)", ws, 0, ws, SLOW_S, flag=flag,
                             mode="warm") | {"point_id": f"stream.copy/torch[ws={ws}]@warm#flagged"})
    for n in (512, 1024, 2048):
        f = 2 * n ** 3
        rows.append(make_row("gemm.square", "torch", "bf16", n, f"{n}x{n}x{n}", 3 * n * n * 2, f, 3 * n * n * 2,
                             f / 846e9, precision="bf16") | {"attainable_gflops": 846.0})
        rows.append(make_row("gemm.square", "torch", "fp8e4m3", n, f"{n}x{n}x{n}", 3 * n * n, f, 3 * n * n,
                             f / 0.01e9, precision="fp8e4m3") | {"attainable_gflops": 846.0})
        # flagged: a time jump read 512^3 at 2,000 GFLOP/s, faster than any bf16 row; the others slow
        rows.append(make_row("gemm.square", "torch", "bf16", n, f"{n}x{n}x{n}", 3 * n * n * 2, f, 3 * n * n * 2,
                             f / (2000e9 if n == 512 else 1e9), precision="bf16", flag=f"{flags[-1]}: synthetic")
                    | {"point_id": f"gemm.square/torch[bf16,{n}]@warm#flagged"})
    for k in (1, 4, 16):
        n, f = 2**20, 2 * k * 8 * 2**20
        rows.append(make_row("fma.chains", "triton", "fp32", n, f"({n},)x8x{k}", 8 * n, f, 8 * n, f / 30e9,
                             precision="fp32") | {"k": k})
        rows.append(make_row("fma.chains", "triton", "fp32", n, f"({n},)x8x{k}", 8 * n, f, 8 * n, 1.0,
                             precision="fp32", flag=f"{flags[0]}: synthetic")
                    | {"k": k, "point_id": f"fma.chains/triton[{k}]@warm#flagged"})
    df = pd.DataFrame(rows)
    for c in COLUMNS + EXTRA:
        if c not in df:
            df[c] = None
    return df[list(dict.fromkeys(COLUMNS + EXTRA + ["k"]))]


def _roofs() -> list[dict]:
    via = {"unit": "gemm", "via": "bf16", "no_unit": True, "own_gflops": 0.01, "own_reason": CONVERTS_EACH_CALL}
    return [_roof("bandwidth", "l2", 300.0, dtype="float32", plateau_bytes=[256 * KIB, 2 * MIB],
                  extra={"window_bytes": [256 * KIB, 2 * MIB]}),
            _roof("bandwidth", "l3", 210.0, dtype="float32", plateau_bytes=[4 * MIB, 32 * MIB],
                  extra={"window_bytes": [8 * MIB, 32 * MIB]}),
            _roof("bandwidth", "dram", 70.0, dtype="float32", plateau_bytes=[FROM, 512 * MIB],
                  extra={"from_bytes": FROM, "window_bytes": DRAM_WINDOW}),
            _roof("compute", "bf16", 846.0, dtype="bf16", extra={"unit": "gemm"}),
            _roof("compute", "fp8e4m3", 846.0, dtype="bf16", extra=via),
            _roof("compute", "fp32", 200.0, dtype="fp32", extra={"unit": "gemm"})]


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("shown") / "run"
    d.mkdir()
    meta = {"schema_version": 1, "status": "complete", "start_utc": "2026-12-01T00:00:00+00:00",
            "device": {"kind": "cpu", "name": "Synthetic CPU", "torch_device": "cpu", "memory_bytes": 2**34,
                       "compute_units": 2, "compute_unit_kind": "cores",
                       "caches": [{"name": "l2", "total_bytes": 2 * MIB}, {"name": "l3", "total_bytes": 32 * MIB}]}}
    (d / "run.json").write_text(json.dumps(meta))
    _rows().to_csv(d / "measurements.csv", index=False)
    (d / "roofs.json").write_text(json.dumps({"schema_version": 1, "roofs": _roofs(), "notes": []}))
    return load_run(d)


def _gids(ax) -> dict:
    return {a.get_gid(): a for a in ax.get_children() if a.get_gid()}


def _xspan(span) -> tuple[float, float]:
    """Return an axvspan's (left, right) in data units (a Rectangle)."""
    return span.get_x(), span.get_x() + span.get_width()


# --- item 2: a roof nothing measured is shown as the line it is ---------------------------------

def test_the_tables_name_a_borrowed_roof_as_the_line_it_is(cpu_run):
    table, _ = validation(cpu_run)
    assert "fp8e4m3" not in set(table["ceiling"]) and "fp8e4m3 via bf16" in set(table["ceiling"])
    fp8 = table[table["ceiling"] == "fp8e4m3 via bf16"].iloc[0]
    assert fp8["own best"] == pytest.approx(0.01) and fp8["own rows below it"] == CONVERTS_EACH_CALL
    bf16 = table[table["ceiling"] == "bf16"].iloc[0]
    assert bf16["own rows below it"] == "" and math.isnan(float(bf16["own best"] or math.nan))
    rows, _ = roof_rows(Roofline(cpu_run.roofs))
    assert {"fp8e4m3 via bf16", "bf16"} <= {r["roof"] for r in rows} and "fp8e4m3" not in {r["roof"] for r in rows}
    # a ratio of precisions compares their own rows: fp8's 0.01, never the bf16 line's 846
    model = Roofline(cpu_run.roofs)
    assert own_rate(model, "fp8e4m3") == pytest.approx(0.01) and own_rate(model, "bf16") == 846.0


def test_the_overview_draws_a_converted_precisions_points_and_its_line_as_such(cpu_run):
    model = Roofline(cpu_run.roofs)
    assert converted(model) == {"fp8e4m3": CONVERTS_EACH_CALL}
    best = roofline_points(cpu_run.measurements)
    fp8 = best["precision"] == "fp8e4m3"
    assert fp8.sum() == 1 and best.loc[fp8, "gflops"].iloc[0] == pytest.approx(0.01)
    # 0.01 of 846 is under FAR_UNDER_BOUND: another precision's point would be left off; this one is drawn
    assert far_under_bound(best)[fp8].all() and not far_under_bound(best, converted(model))[fp8].any()
    fig = plot.draw_roofline(cpu_run)
    try:
        ax = fig.axes[0]
        gids = _gids(ax)
        assert len(gids["points:gemm:fp8e4m3"].get_offsets()) == 1
        texts = [t.get_text() for t in ax.texts]
        # the flat at 846 names fp8e4m3 only as the bf16 line it is
        assert any("fp8e4m3 via bf16" in t for t in texts)
        assert not [t for t in texts if t.startswith("fp8e4m3 ") and "via" not in t.split("(")[0]]
    finally:
        plt.close(fig)


# --- item 7: the windows shaded are the ones roofs.json records ---------------------------------

def test_each_chart_shades_the_windows_the_derivation_recorded(cpu_run):
    model = Roofline(cpu_run.roofs)
    assert roof_windows(model) == [("l2", 256 * KIB, 2 * MIB), ("l3", 8 * MIB, 32 * MIB),
                                   ("dram", *DRAM_WINDOW)]
    fig = plot.draw_bandwidth(cpu_run)
    try:
        ax = fig.axes[0]
        gids = _gids(ax)
        for name, lo, hi in roof_windows(model):
            x0, x1 = _xspan(gids[f"window:{name}"])
            assert x0 == pytest.approx(lo / plot.WINDOW_PAD) and x1 == pytest.approx(hi * plot.WINDOW_PAD)
        # nothing shaded from the plateau's first size (from_bytes) or from a multiple of a cache
        spans = [_xspan(a)[0] for g, a in gids.items() if g.startswith("window:")]
        assert not any(x == pytest.approx(FROM, rel=0.05) or x == pytest.approx(4 * 32 * MIB, rel=0.05)
                       for x in spans)
        # the dram roof drawn thick over its window, at its value
        (x0, y0), (x1, _) = gids["roof:dram"].get_segments()[0]
        assert y0 == 70.0 and x0 == pytest.approx(DRAM_WINDOW[0] / plot.WINDOW_PAD)
        assert x1 == pytest.approx(DRAM_WINDOW[1] * plot.WINDOW_PAD)
    finally:
        plt.close(fig)


# --- item 6: rows the runner flagged are never a normal point ------------------------------------

def test_the_charts_select_rows_the_runner_flagged_apart(cpu_run):
    df = cpu_run.measurements
    flagged_ids = set(df.loc[df["point_id"].str.endswith("#flagged"), "point_id"])
    assert len(flagged_ids) == 31 + 3 + 3
    drawn, hollow = plot.bandwidth_rows(df)
    assert len(hollow) == 31 and set(hollow["point_id"]) <= flagged_ids
    assert not set(drawn["point_id"]) & flagged_ids and len(drawn) == 22
    # the curve's slowest point is the dram plateau's 70 GB/s, not the flagged rows' ~0
    assert drawn["gbps"].min() == pytest.approx(70.0)
    assert hollow["gbps"].to_numpy() == pytest.approx(hollow["working_set_bytes"].to_numpy() / SLOW_S / 1e9)
    assert hollow["gbps"].max() == pytest.approx(32 * MIB / SLOW_S / 1e9)   # 4.2 GB/s: under every curve's point
    gemm, gemm_hollow = plot.gemm_rows(df)
    assert len(gemm_hollow) == 3 and not set(gemm["point_id"]) & flagged_ids
    best = roofline_points(df)
    assert not set(best["point_id"]) & flagged_ids
    assert best.loc[best["precision"] == "bf16", "gflops"].iloc[0] == pytest.approx(846.0)   # not the 2,000
    assert not set(_sweeps(df)["point_id"]) & flagged_ids and len(_sweeps(df)) == 3


def test_the_bandwidth_chart_draws_flagged_rows_hollow_and_apart(cpu_run):
    fig = plot.draw_bandwidth(cpu_run)
    try:
        gids = _gids(fig.axes[0])
        curve = gids["curve:stream.copy:torch:warm"]
        assert len(curve.get_xdata()) == 22 and min(curve.get_ydata()) == pytest.approx(70.0)
        hollow = gids["runner:stream.copy"]
        assert len(hollow.get_offsets()) == 31
        assert np.all(hollow.get_facecolors()[:, 3] == 0)   # hollow: no fill
        entries = [t.get_text() for leg in fig.legends for t in leg.get_texts()]
        assert plot.runner_handle().get_label() in entries
    finally:
        plt.close(fig)
