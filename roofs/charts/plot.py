"""Pictures of a run. Reads only the run folder's files; never runs a kernel.

Which charts a run gets, in what order, under which titles, and which function draws each:
roofs/charts/registry.py's CHARTS, the one list. This module draws four of them (the family
rooflines are roofs/charts/families.py's, fma.png roofs/charts/fma.py's, energy.png
roofs/charts/energy.py's):

roofline.png            The overview, log-log FLOP/s against FLOP/byte. Roofs: each measured
                        bandwidth roof (the off-chip memory and each cache level) as a slope
                        that runs up to the highest compute roof, so it meets every
                        precision's roof; one flat per measured precision from its ridge with
                        the fastest level (a roof borrowed from a wider precision is that
                        path's line, labelled "fp16 via fp32", never fp16's own roof); datasheet
                        and computed roofs dashed; interconnect and host links dotted. Points:
                        the best point of each (op, impl, precision), labelled; colour = family,
                        marker = precision (a stream point's: its element type); one legend. A
                        precision converted on every call (roofs.json's extra.own_reason) has its
                        points drawn however far under its line, and the footnote says why.
                        It marks the launch floor per point: a grey dash at F / t_floor near
                        the floor, a grey square when launch-bound (within 2x of it).
bandwidth.png           GB/s against working-set size, one panel per dtype: a line per kernel,
                        the cache sizes, the sizes each level's roof is a statistic of shaded in
                        its level's colour (roofs.json's extra.window_bytes, as the derivation
                        recorded them; none where a run recorded none), each roof thick over
                        those sizes on the panel of the dtype whose row set it, and every level's
                        roof thin on every panel, with its interval as a band (rule 17) where it
                        has one. The chart re-derives nothing.
gemm.png                GFLOP/s against size per precision: the square sweep, and the skinny
                        sweep beside its attainable bound min(P, BW x I).
links.png               Interconnect and host-link GB/s against message size.

A memory level has one colour on every chart (kit.LEVEL_COLORS: its slope, its roofs and
size on bandwidth.png, its level points); line styles mean one thing each and a "lines"
legend says which (roofs/charts/ceilings.py): solid a measured roof, thin its burst figure,
dash-dot an FMA chain's elementwise ceiling (no precision's roof), dashed a datasheet or
computed reference, dotted a link; a translucent band in the roof's colour its interval (rule 17),
on every chart that draws the roof (ceilings.draw_band). A user's sweep is drawn on the overview as one marker per
shape joined in the sweep's order.

In every chart a colour means one thing (its legend says which), and red is kept for
points above their attainable bound beyond their spread (the flag column): ringed, and
labelled so on the overview. Rows the runner flagged (a busy machine, a time jump, stolen
cores: bench.results.is_runner_flag) are never a normal point: the rooflines and energy.png
leave them off (the overview's footnote counts them), bandwidth.png, gemm.png and fma.png draw
them hollow, in no line, with the legend entry "flagged by the runner". Rows may carry
`boundary` (the memory level whose roof bounds the point); where it names a cache, GEMV and
attention points are drawn hollow. Runs written before that column draw all the same.

No two texts overprint and no label sits on a line: LabelPlacer (roofs/charts/labels.py) puts
each label by its point or along its roof and moves it (vertically, sideways, or to the
point's other side) until its box, measured in display coordinates after a canvas draw,
meets no other text and no drawn line segment; a moved label gets a leader line.
`figures(run)` returns the charts unsaved, and
`drawn_texts(fig)` lists the texts a draw puts on a figure, so a test can check that.
`plot_run` draws the charts of a run folder in forked worker processes, one per core
(the charts are independent and the measuring is over): the files are the same bytes.
Each worker gets the run it draws as an argument; nothing is passed through module state.
"""
from __future__ import annotations

import functools
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from bench.policy import DEFAULT  # noqa: E402
from bench.results import Run, best_passes, load_run  # noqa: E402
from bench.util import plural  # noqa: E402
from roofs.analysis.roofline import Roofline  # noqa: E402
from roofs.charts.ceilings import RoofStyle, band_factors, band_handle, draw_band, draw_roofs
from roofs.charts.fma import draw_launch_floor  # noqa: E402
from roofs.charts.kit import (  # noqa: E402
    DPI,
    FAMILY_COLORS,
    FLAG_COLOR,
    IMPL_MARKERS,
    IMPL_STYLES,
    OP_COLORS,
    PRECISION_COLORS,
    PRECISION_MARKERS,
    LabelPlacer,
    _bandwidth,
    _bottom_legend,
    _caches,
    _finish_axes,
    _flag_handle,
    _fmt_bytes,
    _fmt_rate,
    _impl_name,
    _limits,
    _marker_handles,
    _memory_level,
    _order,
    _points,
    _ring_flagged,
    _short,
    _title,
    conversion_note,
    converted,
    draw_runner_flagged,
    drawn_texts,  # noqa: E402,F401  (re-exported: tests draw through roofs.charts.plot)
    far_under_bound,
    fit_legends,
    level_color,
    op_colors,
    roof_windows,
    roofline_points,
    runner_flagged,
    runner_handle,
    save_png,
    split_runner,
)
from roofs.charts.registry import BY_FILE, chart_runs, charts_for  # noqa: E402,F401  (chart_runs re-exported)
from roofs.charts.svg import has_named_points, name_points, point_title, save_svg  # noqa: E402

# a roof's window is drawn half a size bin wider each side: its sizes are bins of the sweep
WINDOW_PAD = 2 ** (0.5 / DEFAULT.bins_per_octave)


def _under_note(under) -> str:
    """Return the overview's footnote for the best points it leaves off (FAR_UNDER_BOUND)."""
    slowest = under.sort_values("gflops").iloc[0]
    return (f"{plural(len(under), 'best point')} at under 0.1% of its bound left off, the slowest "
            f"{_short(slowest.op)}/{_impl_name(slowest.impl)} {slowest.precision or slowest.dtype} at "
            f"{slowest.gflops:.3g} GFLOP/s (report.md lists every point).")


def draw_roofline(run: Run):
    """Return the overview roofline figure (see the module docstring)."""
    model = Roofline(run.roofs)
    best = roofline_points(run.measurements)
    fig, ax = plt.subplots(figsize=(12.5, 7.5), dpi=DPI)
    placer = LabelPlacer(fig)
    conv = converted(model)  # a precision converted on every call: its points drawn however far under its line
    far = far_under_bound(best, conv)
    under, best = best[far], best[~far]  # left off, and named in the footnote
    every = _points(run.measurements)
    users = every[(every["family"] == "user") & ~far_under_bound(every, conv)]
    lims = _limits(pd.concat([best, users]), model)
    roof_handles = draw_roofs(ax, placer, model, lims, RoofStyle(links=True))
    for (family, fmt), g in best.groupby(["family", "fmt"]):
        c = ax.scatter(g["intensity"], g["gflops"], color=FAMILY_COLORS.get(family, "tab:gray"),
                       marker=PRECISION_MARKERS.get(fmt, "*"), s=46, edgecolors="white", linewidths=0.5, zorder=4,
                       gid=f"points:{family}:{fmt}")
        name_points(c, [point_title(r) for r in g.itertuples()])  # roofline.svg names each point on hover
    for (op, impl, fmt), g in users.groupby(["op", "impl", "fmt"], sort=False):  # a user's sweep, in its order
        ax.plot(g["intensity"], g["gflops"], color=FAMILY_COLORS["user"], marker=PRECISION_MARKERS.get(fmt, "*"),
                ms=5, lw=1, alpha=0.8, zorder=3.5, gid=f"sweep:{op}:{_impl_name(impl)}:{fmt}")
    placer.avoid(ax, users["intensity"], users["gflops"])
    _ring_flagged(ax, best)
    floor_note = draw_launch_floor(ax, best, model.roofs)
    placer.avoid(ax, best["intensity"], best["gflops"])
    for r in best.sort_values("gflops", ascending=False).itertuples():
        label = f"{_short(r.op)}/{_impl_name(r.impl)}" + (f" {r.shape} {r.mode}" if r.family == "model" else "")
        if r.precision:
            label += f" {r.dtype} weights" if r.family == "gemv" and r.dtype != r.precision else f" {r.precision}"
            label += " (converts each call)" if r.precision in conv and r.family == "gemm" else ""  # its own rows
        placer.add(ax, r.intensity, r.gflops, label + (" (above its bound)" if r.flagged else ""),
                   color=FLAG_COLOR if r.flagged else FAMILY_COLORS.get(r.family, "tab:gray"), gid="label:point", gap=7,
                   key=True)  # in a crowded cluster, a number and a line of the key, not a leader across labels
    _finish_axes(ax, lims)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("GFLOP/s (1e9 FLOP/s; GOP/s for int8), median")
    ax.set_title(_title(run, "Roofline"))
    # a user's sweep: its entry drawn as the sweep is, one marker per shape joined by a line
    handles = [Line2D([], [], color=FAMILY_COLORS["user"], marker="o", ms=4, lw=1, label=f)
               if f == "user" and len(users) else Patch(color=FAMILY_COLORS.get(f, "tab:gray"), label=f)
               for f in sorted(best["family"].unique())]
    handles += _marker_handles(best["fmt"].unique())
    if best["flagged"].any():
        handles.append(_flag_handle())
    if roof_handles:
        ax.add_artist(ax.legend(handles=roof_handles, fontsize=7, loc="lower left", bbox_to_anchor=(1.01, 0),
                                title="lines", title_fontsize=8, alignment="left"))
    if handles:
        ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1), title="colour: family\n"
                  "marker: precision", title_fontsize=8, alignment="left")
    flagged = int(every["flagged"].sum())
    placed = run.measurements[(run.measurements["status"] == "ok") & (run.measurements["flops"] > 0)]
    runner = int(runner_flagged(placed).sum())
    notes = [n for n in (conversion_note(model, best["precision"]),
                         f"{plural(runner, 'row')} flagged by the runner (busy machine, time jump, stolen cores) "
                         "not drawn: they set no roof (report.md lists them)." if runner else "") if n]
    foot = fig.text(
        0.01, 0.012, "Best point of each (op, impl, precision); every stream, GEMM, GEMV and attention point "
        "is in roofline-<family>.png. "
        "Slopes: each level's bandwidth roof in its colour, up to every compute roof; the lines' legend says "
        "what each style means.\ncopy and write do no FLOPs "
        "(see bandwidth.png). "
        + (f"{flagged} points sit above their attainable bound beyond their spread: ringed red here when one "
           "is a best point, and in the family charts." if flagged else "")
        + (f"\n{floor_note}" if floor_note else "")
        + (f"\n{_under_note(under)}" if len(under) else "")
        + "".join(f"\n{n}" for n in notes),
        fontsize=7, color="dimgray", va="bottom")
    fig.tight_layout(rect=(0, max(0.05, 0.02 + 0.0135 * (foot.get_text().count("\n") + 1)), 1, 1))
    fit_legends(fig)
    placer.place()
    return fig



def bandwidth_rows(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Return (the stream rows bandwidth.png draws as curves: status ok, with GB/s, each point's
    fastest pass; the rows the runner flagged, drawn hollow beside them, never as a curve)."""
    ok = df[(df["status"] == "ok") & (df["family"] == "stream") & df["gbps"].notna()]
    drawn, flagged = split_runner(ok)
    return best_passes(drawn), flagged


def draw_bandwidth(run: Run):
    """Return bandwidth.png's figure: one panel per dtype (see the module docstring); None without stream rows."""
    ok, flagged = bandwidth_rows(run.measurements)
    if ok.empty and flagged.empty:
        return None
    dtypes = sorted(set(ok["dtype"]) | set(flagged["dtype"]))
    caches, memory = _caches(run), _memory_level(run)
    model = Roofline(run.roofs)
    overall = {r.name: r for r in _bandwidth(model)}
    windows = roof_windows(model)
    every = pd.concat([ok, flagged])
    ncol = min(3, len(dtypes))
    nrow = -(-len(dtypes) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(6.2 * ncol, 5 * nrow + 1.0), dpi=DPI, sharey=True, squeeze=False)
    placer = LabelPlacer(fig)
    top_y = max([every["gbps"].max() if not every.empty else 1] + [r.value for r in overall.values()]) * 1.3
    lo_b = every["working_set_bytes"].min() / 1.5 if not every.empty else 2**14
    hi_b = every["working_set_bytes"].max() * 1.5 if not every.empty else 2**30
    ops, impls, modes = set(), set(), set()
    colors = op_colors(_short(op) for op in every["op"])
    for ax, dtype in zip(axes.flat, dtypes):
        sub = ok[ok["dtype"] == dtype]
        for (op, impl, mode), g in sub.groupby(["op", "impl", "mode"]):
            g = g.sort_values("working_set_bytes")
            name = _impl_name(impl)
            ops.add(_short(op))
            impls.add(name)
            modes.add(mode)
            ax.plot(g["working_set_bytes"], g["gbps"], color=colors[_short(op)],
                    ls=IMPL_STYLES.get(name, "--"), lw=1.2, marker="o" if mode == "warm" else "x", ms=2.5, zorder=3,
                    gid=f"curve:{op}:{name}:{mode}")
            placer.avoid(ax, g["working_set_bytes"], g["gbps"], size=3)
        for op, g in flagged[flagged["dtype"] == dtype].groupby("op"):  # hollow, joined to nothing
            ops.add(_short(op))
            draw_runner_flagged(ax, g["working_set_bytes"], g["gbps"], colors[_short(op)],
                                f"runner:{op}")
            placer.avoid(ax, g["working_set_bytes"], g["gbps"], size=3)
        ax.set_xscale("log", base=2)
        ax.set_xlim(lo_b, hi_b)
        ax.set_ylim(-0.03 * top_y, top_y)  # the 0 label clear of the x axis's first label
        for name, lo, hi in windows:  # the sizes each roof came from, as roofs.json records them
            ax.axvspan(lo / WINDOW_PAD, hi * WINDOW_PAD, color=level_color(name), alpha=0.1, lw=0, zorder=0,
                       gid=f"window:{name}")
        for name, size in caches:
            ax.axvline(size, color=level_color(name), ls=":", lw=1, zorder=1, gid=f"size:{name}")
            placer.add(ax, size, top_y * 0.9, f"{name.upper()} {_fmt_bytes(size)}", sides=("sw", "se"),
                       leader=False, color=level_color(name))
        for name, r in overall.items():
            ax.axhline(r.value, color=level_color(name), lw=0.8, alpha=0.6, zorder=1, gid=f"overall:{name}")
            draw_band(ax, r, lo_b, hi_b, level_color(name), flat=True)
            places = [(lo_b * (hi_b / lo_b) ** f, r.value) for f in np.linspace(0, 0.9, 10)]
            placer.add(ax, *places[0], f"{name.upper()} {_fmt_rate(r.value, 'GB/s')}",
                       sides=("ne", "se"), leader=False, near=1.5, along=places[1:], color=level_color(name),
                       band=band_factors([r], r.value))
        for name, r in overall.items():  # a roof thick over its sizes on the panel of the dtype that set it
            span = (r.extra or {}).get("window_bytes") or r.plateau_bytes
            if r.dtype != dtype or not span:
                continue
            x0, x1 = span[0] / WINDOW_PAD, span[1] * WINDOW_PAD
            ax.hlines(r.value, x0, x1, color=level_color(name), lw=3, alpha=0.85, zorder=4, gid=f"roof:{name}")
            places = [(x0 * (x1 / x0) ** f, r.value) for f in (0.5, 0.25, 0.75, 0.0, 1.0)]
            placer.add(ax, *places[0], f"{name.upper()} roof {_fmt_rate(r.value, 'GB/s')}",
                       sides=("n", "s", "ne", "nw"), leader=True, near=1.5, along=places[1:],
                       color=level_color(name), fontweight="bold", band=band_factors([r], r.value))
        ax.set_xlabel("working set (bytes, all arrays)")
        ax.set_title(f"{dtype}: rows of {dtype}", fontsize=10)
        ax.grid(True, which="major", alpha=0.25)
    for ax in axes.flat[len(dtypes):]:
        ax.set_visible(False)
    for row in axes:
        row[0].set_ylabel("achieved GB/s (1e9 bytes/s, median)")
    handles = [Line2D([], [], color=colors[o], lw=2, label=o) for o in sorted(ops, key=_order(OP_COLORS))]
    handles += [Line2D([], [], color="0.3", ls=IMPL_STYLES.get(i, "--"), label=i) for i in sorted(impls)]
    if "cold" in modes:
        handles.append(Line2D([], [], color="0.3", marker="x", ls="none", label="cold (caches flushed)"))
    if not flagged.empty:
        handles.append(runner_handle())
    if windows:
        handles.append(Patch(color="0.8", alpha=0.5, lw=0, label="shaded: the sizes each level's roof comes from "
                             "(roofs.json), in its colour"))
    levels = [name for name, _ in caches] + [memory]
    handles += [Line2D([], [], color=level_color(lv), lw=2, label=f"{lv.upper()}: its roofs and size") for lv in levels]
    handles.append(Line2D([], [], color="0.2", lw=3, alpha=0.85,
                          label="thick: the roof, on the panel of the dtype that set it"))
    handles.append(Line2D([], [], color="0.2", lw=0.8, alpha=0.6,
                          label="thin: the run's roof of the level (all dtypes)"))
    handles.append(Line2D([], [], color="0.2", lw=1, ls=":", label="dotted: a cache's size"))
    if any(r.interval is not None for r in overall.values()):
        handles.append(band_handle())
    bottom = _bottom_legend(fig, handles, 6)
    fig.suptitle(_title(run, "Stream bandwidth"))
    fig.tight_layout(rect=(0, bottom, 1, 1))
    placer.place()
    return fig


def gemm_rows(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Return (the GEMM rows gemm.png draws as sweeps: status ok, with GFLOP/s, each point's
    fastest pass; the rows the runner flagged, drawn hollow beside them, never in a sweep)."""
    ok = df[(df["status"] == "ok") & (df["family"] == "gemm") & df["gflops"].notna()]
    drawn, flagged = split_runner(ok)
    return best_passes(drawn), flagged


def draw_gemm(run: Run):
    """Return gemm.png's figure (throughput against size per precision: the square sweep by
    N, the skinny sweep by M with each precision's attainable bound dotted), or None."""
    ok, flagged = gemm_rows(run.measurements)
    if ok.empty and flagged.empty:
        return None
    model = Roofline(run.roofs)
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.4), dpi=DPI)
    for ax, op, axis_name in ((axes[0], "gemm.square", "N (= M = K)"), (axes[1], "gemm.skinny", "M (N = K fixed)")):
        sub = ok[ok["op"] == op]
        for precision, g in flagged[flagged["op"] == op].groupby("dtype"):  # hollow, joined to nothing
            draw_runner_flagged(ax, g["shape"].str.split("x").str[0].astype(int), g["gflops"],
                                PRECISION_COLORS.get(precision, "gray"), f"runner:{op}:{precision}")
        for (precision, impl), g in sub.groupby(["dtype", "impl"]):
            dims = g["shape"].str.split("x", expand=True).astype(int)
            x = dims[0]
            order = np.argsort(x.values)
            name = _impl_name(impl)
            color = PRECISION_COLORS.get(precision, "gray")
            ax.plot(x.values[order], g["gflops"].values[order], marker=IMPL_MARKERS.get(name, "s"), ms=4,
                    color=color, ls="-" if name == "torch" else ":", label=f"{precision} ({name})")
            if op == "gemm.skinny" and name == "torch":
                bound = [model.attainable_gflops(i, precision) for i in g["intensity"].values[order]]
                ax.plot(x.values[order], bound, color=color, ls=":", lw=1, alpha=0.6)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel(axis_name)
        ax.set_title(op + (" (dotted: attainable min(P, BW x I))" if op == "gemm.skinny" else ""), fontsize=9)
        ax.grid(True, which="both", alpha=0.25)
        if not sub.empty or (flagged["op"] == op).any():
            ax.legend(handles=ax.get_legend_handles_labels()[0] + ([runner_handle()] if len(flagged) else []),
                      fontsize=7, ncol=2)
    axes[0].set_ylabel("GFLOP/s (median; GOP/s for int8)")
    fig.suptitle(_title(run, "GEMM throughput"))
    note = conversion_note(model, set(ok["dtype"]))  # why a precision's sweep runs far under its bound
    if note:
        fig.text(0.01, 0.012, note, fontsize=7, color="dimgray", va="bottom")
    fig.tight_layout(rect=(0, 0.04 if note else 0, 1, 1))
    return fig


def draw_links(run: Run):
    """Return links.png's figure: bus bandwidth of each collective and send/recv pair, and GB/s
    of each host-device copy, against message size; None without such rows."""
    df = run.measurements
    ok = df[(df["status"] == "ok") & df["family"].isin(["comm", "transfer"])]
    if ok.empty:
        return None
    fig, ax = plt.subplots(figsize=(9, 5.5), dpi=DPI)
    for (op, shape), g in ok.groupby(["op", "shape"]):
        g = g.sort_values("bytes")
        rate = g["bus_gbps"].fillna(g["gbps"]) if "bus_gbps" in g else g["gbps"]
        label = f"{_short(op)} {shape}" + (" (bus)" if op.startswith("comm.") and "sendrecv" not in op else "")
        ax.plot(g["bytes"], rate, marker="o", ms=3, label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("GB/s (bus bandwidth for collectives)")
    ax.set_title(_title(run, "Interconnect and host links"))
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=7, ncol=2, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.tight_layout()
    return fig


def draw_chart(name: str, runs: dict):
    """Return chart name's figure (a file of roofs.charts.registry.CHARTS), drawn by its row's
    function from the run the row reads (runs: chart_runs); None when the run has no data for it."""
    chart = BY_FILE[name]
    return chart.drawer()(runs[chart.rows])


def figures(run: Run) -> dict:
    """Return {file name: figure} for every chart the table gives the run (charts_for), unsaved
    and open (close them with plt.close): the figures plot_run saves."""
    runs = chart_runs(run)
    drawn = {c.file: draw_chart(c.file, runs) for c in charts_for(run, runs)}
    return {name: fig for name, fig in drawn.items() if fig is not None}


def save_chart(fig, path: Path) -> Path:
    """Save fig at path and, when it names its points (roofs.charts.svg), beside it as SVG; return path."""
    if has_named_points(fig):
        save_svg(fig, path.with_suffix(".svg"))
    return save_png(fig, path)


def _draw_and_save(name: str, runs: dict, folder: Path) -> Path | None:
    """Draw chart name (draw_chart) into folder; close it; return its path, or None when it has no data."""
    fig = draw_chart(name, runs)
    if fig is None:
        return None
    try:
        return save_chart(fig, folder / name)
    finally:
        plt.close(fig)


def clear_charts(run_dir) -> None:
    """Remove every picture plot_run draws (and its SVG) from run_dir: a folder finished
    without charts shows none an earlier derivation drew from other roofs."""
    for name in BY_FILE:
        for path in (Path(run_dir) / name, (Path(run_dir) / name).with_suffix(".svg")):
            path.unlink(missing_ok=True)


def plot_run(run_dir, workers: int | None = None) -> list[Path]:
    """Draw every picture the run folder run_dir has data for; return their paths. The run
    is read once; the charts are independent, so on Linux they are drawn by up to `workers`
    forked processes (default: one per core, at most 4), which inherit it; one worker, or a
    pool that cannot start, draws them here one after another."""
    run = load_run(run_dir)
    runs = chart_runs(run)
    names = [c.file for c in charts_for(run, runs)]
    draw = functools.partial(_draw_and_save, runs=runs, folder=Path(run.dir))
    workers = min(len(names), 4, os.cpu_count() or 1) if workers is None else workers
    paths = None
    if workers > 1 and "fork" in multiprocessing.get_all_start_methods():
        try:
            with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
                paths = list(pool.map(draw, names))
        except BrokenProcessPool:  # a worker died (out of memory, a signal): draw them here
            paths = None
    if paths is None:
        paths = [draw(name) for name in names]
    return [p for p in paths if p is not None]
