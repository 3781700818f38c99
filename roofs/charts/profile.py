"""A profiled program's ops on the roofline (roofline.svg and roofline.png in its profile folder), from the
folder's files only (ops.csv placed by roofs.reports.profile, profile.json's roofs).

Left: each op with FLOPs (a registered formula) at its intensity and GFLOP/s under the measured roofs drawn as
the suite's charts draw them (roofs.charts.ceilings: each roof's interval a band, rule 17); marker area
proportional to its share of the step, colour and marker by precision. Right: the ops with no FLOP formula
(Inductor's kernels among them), bandwidth points: GB/s against working set, under each level's measured
bandwidth and its band, its label above the band. Every point names itself in the SVG (roofs.charts.svg).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from roofs.analysis.program import read_ops
from roofs.analysis.roofline import Roof, Roofline
from roofs.charts.ceilings import RoofStyle, band_handle, draw_band, draw_roofs
from roofs.charts.kit import (
    DPI,
    PRECISION_COLORS,
    PRECISION_MARKERS,
    _finish_axes,
    _limits,
    level_color,
    save_png,
)
from roofs.charts.labels import LabelPlacer
from roofs.charts.svg import name_points, save_svg

MAX_AREA = 900.0  # points^2 of an op taking the whole step


def op_title(r) -> str:
    """Return an op's one-line name: "aten::mm [fp32, 64x32, 32x16] in Tiny.layers.0.mlp: 31% of the step"."""
    what = ", ".join(x for x in (r.precision or r.dtype, r.shapes) if x)
    pct = f", {r.pct_of_attainable:.3g}% of its attainable" if pd.notna(r.pct_of_attainable) else ""
    return f"{r.op} [{what}] in {r.module}: {100 * r.share:.3g}% of the step{pct}"


def _area(share) -> np.ndarray:
    return np.maximum(MAX_AREA * np.asarray(share, dtype=float), 6.0)


def draw_profile(folder):
    """Return the figure (see the module docstring) of a profile folder."""
    folder = Path(folder)
    ops = read_ops(folder / "ops.csv")
    meta = json.loads((folder / "profile.json").read_text())
    model = Roofline([Roof.from_dict(r) for r in meta["roofs"]])
    flop = ops[(ops["flops"].fillna(0) > 0) & ((ops["read_bytes"] + ops["write_bytes"]) > 0)]
    flop = flop.assign(fmt=flop["precision"].replace("", "other"))
    rest = ops[ops["flops"].fillna(0) <= 0]
    fig = Figure(figsize=(14, 6.5), dpi=DPI)
    FigureCanvasAgg(fig)  # a canvas of its own (no pyplot state): saving and measuring text need one
    ax, bx = fig.subplots(1, 2, gridspec_kw={"width_ratios": (3, 2)})
    placer = LabelPlacer(fig)
    lims = _limits(flop, model, precisions=set(flop["precision"].dropna()) or None, tight=True)
    draw_roofs(ax, placer, model, lims, RoofStyle(precisions=set(flop["precision"]) or None))
    for fmt, g in flop.groupby("fmt"):
        c = ax.scatter(g["intensity"], g["gflops"], s=_area(g["share"]), color=PRECISION_COLORS.get(fmt, "tab:gray"),
                       marker=PRECISION_MARKERS.get(fmt, "o"), alpha=0.7, edgecolors="black", linewidths=0.4,
                       zorder=4, gid=f"ops:{fmt}", label=fmt)
        name_points(c, [op_title(r) for r in g.itertuples()])
    placer.avoid(ax, flop["intensity"], flop["gflops"])
    for r in flop.sort_values("share", ascending=False).head(6).itertuples():
        placer.add(ax, r.intensity, r.gflops, f"{r.op.split('::')[-1]} {100 * r.share:.2g}%", gap=7,
                   color=PRECISION_COLORS.get(r.fmt, "tab:gray"))
    _finish_axes(ax, lims)
    ax.set_xlabel("arithmetic intensity (FLOP/byte: FLOPs over bytes read and written)")
    ax.set_ylabel("GFLOP/s (1e9 FLOP/s), mean over the captured steps")
    ax.set_title(f"ops with a FLOP formula ({len(flop)}): marker area = share of the step")
    if len(flop):
        handles, _ = ax.get_legend_handles_labels()
        banded = any(r.interval is not None for r in model.roofs if r.source == "measured")
        ax.legend(handles=handles + ([band_handle()] if banded else []), fontsize=8, loc="upper left",
                  title="precision", title_fontsize=8, markerscale=0.5)
    _draw_bandwidth_panel(bx, rest, model, placer)
    step_ms = 1e3 * meta["step_s"]
    fig.suptitle(f"{meta.get('program', 'program')}: step {step_ms:.4g} ms on {meta['device'].get('name', '?')}",
                 fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    placer.place()
    return fig


def _draw_bandwidth_panel(ax, rest: pd.DataFrame, model: Roofline, placer: LabelPlacer) -> None:
    """Draw the ops without FLOPs: GB/s against working set, each level's measured bandwidth as a line."""
    ws = rest["read_bytes"] + rest["write_bytes"]
    ok = (ws > 0) & (rest["gbps"] > 0)
    rest, ws = rest[ok], ws[ok]
    bws = [r for r in model.roofs if r.kind == "bandwidth" and r.source == "measured"
           and "." not in r.name]  # each level's best; the direction roofs would print over each other
    if len(rest):
        c = ax.scatter(ws, rest["gbps"], s=_area(rest["share"]), color="tab:gray", alpha=0.6, edgecolors="black",
                       linewidths=0.4, zorder=4, gid="ops:bandwidth")
        name_points(c, [op_title(r) for r in rest.itertuples()])
        placer.avoid(ax, ws, rest["gbps"])
        for r, w in sorted(zip(rest.itertuples(), ws), key=lambda p: -p[0].share)[:6]:
            placer.add(ax, w, r.gbps, f"{r.op.split('::')[-1][:28]} {100 * r.share:.2g}%", gap=7, color="0.3")
    for r in bws:
        ax.axhline(r.value, color=level_color(r.name), lw=1, zorder=2)
        top = max(r.interval) if r.interval is not None else r.value  # the label sits above its band
        ax.annotate(f"{r.name} {r.value:.4g} GB/s", (1.0, top), xycoords=("axes fraction", "data"),
                    ha="right", va="bottom", fontsize=7, color="0.3")
    ax.set_xscale("log")
    ax.set_yscale("log")
    x0, x1 = ax.get_xlim()  # the points' span: the bands run across it, as the lines do, and move no limit
    for r in bws:
        draw_band(ax, r, x0, x1, level_color(r.name), flat=True)
    ax.set_xlim(x0, x1)
    if len(rest) or bws:
        ys = list(rest["gbps"]) + [r.value for r in bws]
        ax.set_ylim(min(ys) / 3, max(ys) * 3)
    ax.grid(True, which="major", alpha=0.25)
    ax.set_xlabel("working set (bytes read + written)")
    ax.set_ylabel("GB/s (1e9 bytes/s)")
    ax.set_title(f"ops with no FLOP formula ({len(rest)}): bandwidth points")


def plot_profile(folder) -> list[Path]:
    """Draw roofline.svg (points named on hover) and roofline.png into a profile folder; return both paths."""
    folder = Path(folder)
    fig = draw_profile(folder)
    svg = save_svg(fig, folder / "roofline.svg")
    save_png(fig, folder / "roofline.png")
    return [svg, folder / "roofline.png"]
