"""The per-family rooflines: roofline-stream.png, roofline-gemm.png, roofline-gemv.png and
roofline-attention.png (each row of roofs/charts/registry.py says what it shows and which runs draw it).
Each reads only a run's files.
"""
from __future__ import annotations

import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from bench.results import Run, best_passes  # noqa: E402
from roofs.analysis.roofline import MEMORY_LEVELS, Roofline  # noqa: E402
from roofs.charts.ceilings import RoofStyle, draw_roofs
from roofs.charts.kit import (  # noqa: E402
    DPI,
    ELEMENT_PRECISION,
    IMPL_MARKERS,
    OP_STYLES,
    PRECISION_COLORS,
    PRECISION_MARKERS,
    LabelPlacer,
    _bottom_legend,
    _caches,
    _finish_axes,
    _flag_handle,
    _fmt_bytes,
    _impl_name,
    _limits,
    _marker_handles,
    _memory_level,
    _order,
    _points,
    _ring_flagged,
    _series_colors,
    _short,
    _title,
    conversion_note,
    draw_level_points,
    fit_legends,
    level_color,
    level_handles,
    point_levels,
    with_level_points,
)
from roofs.charts.svg import name_points, point_title  # noqa: E402


def _unique(handles) -> list:
    """Return legend handles without repeats of a label (panels each return their roofs')."""
    seen, out = set(), []
    for h in handles:
        if h.get_label() not in seen:
            seen.add(h.get_label())
            out.append(h)
    return out


def _legends(ax, handles, roof_handles, title: str) -> None:
    """Put the points' legend right of ax at its top, and below it the lines' legend (what each
    level's colour and each line style means); ax.get_legend() is the points' one."""
    lines = ax.legend(handles=roof_handles, fontsize=7, loc="lower left", bbox_to_anchor=(1.01, 0),
                      title="lines", title_fontsize=8, alignment="left")
    ax.add_artist(lines)
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1), title=title,
              title_fontsize=8, alignment="left")


def _family_points(run: Run, family: str):
    """Return (the family's points that do FLOPs, the run's Roofline), or (None, None)
    when the family has none: each per-family chart starts here."""
    pts = best_passes(_points(run.measurements))
    pts = pts[pts["family"] == family]
    return (None, None) if pts.empty else (pts, Roofline(run.roofs))


def draw_stream_roofline(run: Run):
    """Return roofline-stream.png's figure, or None without stream points that do FLOPs."""
    pts, model = _family_points(run, "stream")
    if pts is None:
        return None
    caches, memory = _caches(run), _memory_level(run)
    pts = pts.assign(level=point_levels(run, pts), impl_name=pts["impl"].map(_impl_name))
    fig, ax = plt.subplots(figsize=(11, 7), dpi=DPI)
    placer = LabelPlacer(fig)
    lims = _limits(pts, model, flats=False)
    roof_handles = draw_roofs(ax, placer, model, lims, RoofStyle(flats=False))
    order = [n for n, _ in caches] + [memory]
    for (level, impl), g in pts.groupby(["level", "impl_name"]):
        c = ax.scatter(g["intensity"], g["gflops"], color=level_color(level),
                       marker=IMPL_MARKERS.get(impl, "*"),
                       s=22, alpha=0.8, zorder=3, gid=f"points:{level}:{impl}")
        name_points(c, [point_title(r) for r in g.itertuples()])  # each point named on hover in the SVG
    _ring_flagged(ax, pts, s=70)
    placer.avoid(ax, pts["intensity"], pts["gflops"])
    for (op, dtype), g in pts.groupby(["op", "dtype"]):
        top = g.loc[g["gflops"].idxmax()]
        placer.add(ax, top["intensity"], top["gflops"], f"{_short(op)} {ELEMENT_PRECISION.get(dtype, dtype)}",
                   sides=("n", "e", "w"), color="0.2", gap=5)
    _finish_axes(ax, lims)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("GFLOP/s (1e9 FLOP/s), median")
    ax.set_title(_title(run, "Stream kernels on the roofline"))
    sizes = dict(caches)
    handles = [Patch(color=level_color(lv),
                     label=f"bounded by {lv.upper()} (a cache of {_fmt_bytes(sizes[lv])})" if lv in sizes
                     else f"bounded by {lv.upper()} (beyond the caches' reach)")
               for lv in order if lv in set(pts["level"])]
    handles += [Line2D([], [], ls="none", marker=IMPL_MARKERS.get(i, "*"), color="0.35", label=i)
                for i in sorted(pts["impl_name"].unique())]
    if pts["flagged"].any():
        handles.append(_flag_handle())
    _legends(ax, handles, roof_handles, "colour: the level bounding it\n(its boundary column)\nmarker: impl")
    fig.text(0.01, 0.012, "Every stream point that does FLOPs, one column per op and element type (sizes stacked), "
             "coloured by the level its boundary column names (rule 12).\nSlopes: the measured roof of each level, in "
             "that level's colour. copy and write do no FLOPs: see bandwidth.png.", fontsize=7, color="dimgray",
             va="bottom")
    fig.tight_layout(rect=(0, 0.055, 1, 1))
    fit_legends(fig)
    placer.place()
    return fig


def draw_gemm_roofline(run: Run):
    """Return roofline-gemm.png's figure, or None without GEMM points."""
    pts, model = _family_points(run, "gemm")
    if pts is None:
        return None
    pts = pts.assign(impl_name=pts["impl"].map(_impl_name))
    precisions = set(pts["fmt"])
    fig, ax = plt.subplots(figsize=(12, 7.5), dpi=DPI)
    placer = LabelPlacer(fig)
    lims = _limits(with_level_points(pts), model, precisions, tight=True)
    color = lambda p: PRECISION_COLORS.get(p, "0.4")  # noqa: E731
    roof_handles = draw_roofs(ax, placer, model, lims, RoofStyle(precisions, color))
    lv = draw_level_points(ax, pts)
    for (op, impl, fmt), g in pts.groupby(["op", "impl_name", "fmt"]):
        g = g.sort_values("intensity")
        line, = ax.plot(g["intensity"], g["gflops"], color=color(fmt), ls=OP_STYLES.get(op, ":"), lw=1,
                        marker=IMPL_MARKERS.get(impl, "*"), ms=5, alpha=0.85, zorder=3,
                        gid=f"points:{op}:{impl}:{fmt}")
        name_points(line, [point_title(r) for r in g.itertuples()])
    _ring_flagged(ax, pts, s=80)
    placer.avoid(ax, with_level_points(pts)["intensity"], with_level_points(pts)["gflops"])
    _finish_axes(ax, lims)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("GFLOP/s (1e9 FLOP/s; GOP/s for int8), median")
    ax.set_title(_title(run, "GEMM on the roofline"))
    handles = [Patch(color=color(p), label=p) for p in sorted(precisions, key=_order(PRECISION_COLORS))]
    handles += [Line2D([], [], ls="none", marker=IMPL_MARKERS.get(i, "*"), color="0.35", label=i)
                for i in sorted(pts["impl_name"].unique())]
    handles += [Line2D([], [], ls=OP_STYLES.get(o, ":"), marker="." if OP_STYLES.get(o) == "none" else None,
                       color="0.35", label=_short(o)) for o in sorted(pts["op"].unique())]
    handles += level_handles(lv)
    if pts["flagged"].any():
        handles.append(_flag_handle())
    _legends(ax, handles, roof_handles, "colour: precision (and its roof)\nmarker: impl, line: sweep")
    note = conversion_note(model, precisions)  # why a precision's points sit far under its line
    fig.text(0.01, 0.012, "Every GEMM point; each sweep joined in order of intensity (square: N grows; "
             "skinny: M grows). "
             "Solid flats: measured roofs; dashed: datasheet or computed." + (f"\n{note}" if note else ""),
             fontsize=7, color="dimgray", va="bottom")
    fig.tight_layout(rect=(0, 0.055 if note else 0.04, 1, 1))
    fit_legends(fig)
    placer.place()
    return fig


def _layer(shape: str) -> str:
    """'16x4096x14336' (B x N x K) -> '4096x14336' (N x K)."""
    parts = str(shape).split("x")
    return "x".join(parts[1:]) if len(parts) == 3 else str(shape)




def _spaced_ticks(ax, positions, labels, fontsize: float) -> list[tuple[float, str]]:
    """Return the (position, label) pairs, left to right, that a log x axis of ax can print
    without two labels touching (a label is skipped when it would touch the one before)."""
    lo, hi = ax.get_xlim()
    per_decade = ax.get_position().width * ax.figure.bbox.width / np.log10(hi / lo)
    out, edge = [], -np.inf
    for pos, lab in sorted(zip(positions, labels)):
        centre = np.log10(pos / lo) * per_decade
        half = 1.5 * (0.6 * fontsize * ax.figure.dpi / 72 * len(lab) / 2 + 2)  # 1.5: layout may shrink the axes
        if centre - half >= edge:
            out.append((pos, lab))
            edge = centre + half
    return out


def draw_gemv_roofline(run: Run):
    """Return roofline-gemv.png's figure (one panel per weight format, each layer's batch walk
    joined by a line), or None without GEMV points."""
    pts, model = _family_points(run, "gemv")
    if pts is None:
        return None
    memory = _memory_level(run)
    pts = pts.assign(impl_name=pts["impl"].map(_impl_name), layer=pts["shape"].map(_layer),
                     batch=pd.to_numeric(pts["size"], errors="coerce"))
    formats = sorted(pts["dtype"].unique(), key=_order(PRECISION_MARKERS))  # the precisions' table order
    layers = sorted(pts["layer"].unique(), key=lambda s: [int(v) for v in re.findall(r"\d+", s)] or [0])
    layer_color = _series_colors(layers)
    ncol = min(3, len(formats))
    nrow = -(-len(formats) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(5.6 * ncol, 4.6 * nrow + 1.4), dpi=DPI, squeeze=False)
    placer = LabelPlacer(fig)
    lims = _limits(with_level_points(pts), model, set(pts["fmt"]), tight=True)
    drawn, roof_handles = [], []
    for ax, fmt in zip(axes.flat, formats):
        sub = pts[pts["dtype"] == fmt]
        # the panels' slopes crowd their top left corner: their figures in the shared legend instead
        roof_handles += draw_roofs(ax, placer, model, lims, RoofStyle(set(sub["fmt"]), slope_labels=False))
        drawn.append(draw_level_points(ax, sub))
        for (impl, layer), g in sub.groupby(["impl_name", "layer"]):
            g = g.sort_values("batch")
            ax.plot(g["intensity"], g["gflops"], color=layer_color[layer], lw=1, alpha=0.9, zorder=3,
                    gid=f"walk:{fmt}:{impl}:{layer}")
            cache = (g["boundary"] != "") & ~g["boundary"].isin(MEMORY_LEVELS)
            for hollow, h in g.groupby(cache):
                c = ax.scatter(h["intensity"], h["gflops"], marker=IMPL_MARKERS.get(impl, "*"), s=24, zorder=4,
                               color=layer_color[layer], facecolors="white" if hollow else layer_color[layer],
                               gid=f"points:{fmt}:{impl}:{layer}:{int(hollow)}")
                name_points(c, [point_title(r) for r in h.itertuples()])
        _ring_flagged(ax, sub, s=80)
        placer.avoid(ax, with_level_points(sub)["intensity"], with_level_points(sub)["gflops"])
        _finish_axes(ax, lims)
        ax.set_title(f"{fmt} weights ({', '.join(sorted(set(sub['fmt'])))} compute)", fontsize=10)
        ax.set_xlabel("arithmetic intensity (FLOP/byte)")
        bs = sub.groupby("batch")["intensity"].median()
        ticks = _spaced_ticks(ax, list(bs.values), [f"{int(b)}" for b in bs.index], fontsize=7)
        top = ax.secondary_xaxis("top")
        top.set_xticks([t for t, _ in ticks], labels=[lab for _, lab in ticks], minor=False)
        top.set_xticks([], minor=True)
        top.tick_params(labelsize=7)
        top.set_xlabel("batch B (median intensity over layers)", fontsize=8)
    for ax in axes.flat[len(formats):]:
        ax.set_visible(False)
    for row in axes:
        row[0].set_ylabel("GFLOP/s (1e9 FLOP/s), median")
    handles = [Line2D([], [], color=layer_color[lay], lw=1.5, label=f"layer {lay} (N x K)") for lay in layers]
    handles += [Line2D([], [], ls="none", marker=IMPL_MARKERS.get(i, "*"), color="0.35", label=i)
                for i in sorted(pts["impl_name"].unique())]
    if ((pts["boundary"] != "") & ~pts["boundary"].isin(MEMORY_LEVELS)).any():
        handles.append(Line2D([], [], ls="none", marker="o", mfc="white", color="0.35",
                              label=f"hollow: bounded by a cache roof, not {memory.upper()}"))
    handles += level_handles(pd.concat(drawn)) if drawn else []
    if pts["flagged"].any():
        handles.append(_flag_handle())
    bottom = _bottom_legend(fig, handles + _unique(roof_handles), 4)
    fig.suptitle(_title(run, "Decode GEMV on the roofline (each line: one layer's batch walk, B = 1 at the left)"))
    fig.tight_layout(rect=(0, bottom, 1, 1))
    placer.place()
    return fig


def draw_attention_roofline(run: Run):
    """Return roofline-attention.png's figure, or None without attention points."""
    pts, model = _family_points(run, "attention")
    if pts is None:
        return None
    pts = pts.assign(series=pts["op"].map(_short) + "/" + pts["impl"].map(_impl_name))
    series = sorted(pts["series"].unique())
    series_color = _series_colors(series)
    fig, ax = plt.subplots(figsize=(11.5, 7), dpi=DPI)
    placer = LabelPlacer(fig)
    lims = _limits(with_level_points(pts), model, set(pts["fmt"]), tight=True)
    roof_handles = draw_roofs(ax, placer, model, lims, RoofStyle(set(pts["fmt"])))
    lv = draw_level_points(ax, pts)
    for (s, fmt), g in pts.groupby(["series", "fmt"]):
        cache = (g["boundary"] != "") & ~g["boundary"].isin(MEMORY_LEVELS)
        for hollow, h in g.groupby(cache):
            c = ax.scatter(h["intensity"], h["gflops"], marker=PRECISION_MARKERS.get(fmt, "*"), s=30, zorder=4,
                           color=series_color[s], facecolors="white" if hollow else series_color[s], alpha=0.85,
                           gid=f"points:{s}:{fmt}:{int(hollow)}")
            name_points(c, [point_title(r) for r in h.itertuples()])
    _ring_flagged(ax, pts, s=90)
    placer.avoid(ax, with_level_points(pts)["intensity"], with_level_points(pts)["gflops"])
    _finish_axes(ax, lims)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("GFLOP/s (1e9 FLOP/s), median")
    ax.set_title(_title(run, "Attention on the roofline"))
    handles = [Patch(color=series_color[s], label=s) for s in series] + _marker_handles(pts["fmt"].unique())
    if ((pts["boundary"] != "") & ~pts["boundary"].isin(MEMORY_LEVELS)).any():
        handles.append(Line2D([], [], ls="none", marker="o", mfc="white", color="0.35",
                              label="hollow: bounded by a cache roof"))
    handles += level_handles(lv)
    if pts["flagged"].any():
        handles.append(_flag_handle())
    _legends(ax, handles, roof_handles, "colour: op/impl\nmarker: precision")
    fig.text(0.01, 0.012, "Every attention point (prefill: sequence lengths and head shapes; decode: KV lengths and "
             "batches).", fontsize=7, color="dimgray", va="bottom")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    fit_legends(fig)
    placer.place()
    return fig
