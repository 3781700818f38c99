"""compare.png: several runs' roofs and points on one roofline (roofs/reports/compare.py
writes it beside compare.md). A run is told by its line style and its points' marker; a
memory level by its colour, the same as on every other chart (LEVEL_COLORS): each run's
every level drawn as a slope up to its highest compute roof, each compute roof flat from its
ridge, and one label per roof, runs whose roof is the same (within 1%) sharing it.
"""
from __future__ import annotations

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure  # no pyplot: the process's matplotlib backend is left alone
from matplotlib.lines import Line2D

from roofs.analysis.roofline import MEMORY_LEVELS, Roofline
from roofs.charts.kit import _bandwidth, _compute, _fmt_rate, level_color
from roofs.charts.labels import LabelPlacer

RUN_STYLES = ("-", "--", ":", "-.")
RUN_MARKERS = ("o", "s", "^", "D", "v", "P")
SAME = 0.01   # roofs of several runs within this share of each other get one label


def run_label(run) -> str:
    return f"{run.device.get('name', '?')} @ {run.meta.get('start_utc', '')[:16]}"


def _shared(items):
    """Return [(runs, value, roof name, unit, colour)] with the runs whose roof of one name
    lies within SAME of another's grouped: one label per drawn roof."""
    out = []
    for i, r, color in items:
        for entry in out:
            if entry[2] == r.name and abs(r.value - entry[1]) <= SAME * entry[1]:
                entry[0].append(i)
                break
        else:
            out.append([[i], r.value, r.name, r.unit, color])
    return out


X_SPAN = (1e-2, 1e4)  # the chart's intensities, FLOP/byte


def _draw_run(ax, i: int, run, slopes: list, flats: list) -> tuple[Line2D, bool]:
    """Draw run number i (from 1): its FLOP-counted points, every level's slope in the level's
    colour and its compute flats, in the run's line style; append (i, roof, colour) of each
    to slopes and flats. Return its legend entry and whether it drew anything."""
    lo_x, hi_x = X_SPAN
    ls, marker = RUN_STYLES[(i - 1) % len(RUN_STYLES)], RUN_MARKERS[(i - 1) % len(RUN_MARKERS)]
    model = Roofline(run.roofs)
    bws, computes = _bandwidth(model), [r for r in _compute(model) if "." not in r.name]
    top = max((r.value for r in computes), default=None)
    df = run.measurements
    ok = df[(df["status"] == "ok") & (df["flops"] > 0) & (df["gflops"] > 0)]
    ax.scatter(ok["intensity"], ok["gflops"], s=10, marker=marker, color="0.45", alpha=0.5, zorder=3)
    for r in bws:
        end = min(hi_x, top / r.value) if top else hi_x
        ax.plot([lo_x, end], [r.value * lo_x, r.value * end], color=level_color(r.name), ls=ls,
                lw=2 if r.name in MEMORY_LEVELS else 1.3, zorder=2, gid=f"run{i}:slope:{r.name}")
        slopes.append((i, r, level_color(r.name)))
    fastest = bws[0].value if bws else None
    for r in computes:
        start = max(r.value / fastest, lo_x) if fastest else lo_x
        ax.hlines(r.value, start, hi_x, color="0.15", ls=ls, lw=1.1, zorder=2, gid=f"run{i}:{r.name}")
        flats.append((i, r, "0.15"))
    offchip = any(r.name in MEMORY_LEVELS for r in bws)
    handle = Line2D([], [], color="0.3", ls=ls, marker=marker, ms=5,
                    label=f"run {i}: {run_label(run)}" + ("" if offchip else " (no off-chip roof)"))
    return handle, not ok.empty or bool(bws) or bool(computes)


def _label_roofs(ax, placer: LabelPlacer, slopes: list, flats: list) -> None:
    """One label per drawn roof, runs sharing a value sharing it: slopes' labels along the
    slope, flats' from the right edge leftwards."""
    lo_x, hi_x = X_SPAN
    for runs_of, value, name, unit, color in _shared(slopes):
        places = [(v, value * v) for v in np.geomspace(lo_x * 2, hi_x / 10, 8)]
        placer.add(ax, *places[0], f"{_who(runs_of)}: {name.upper()} {_fmt_rate(value, unit)}", sides=("nw", "se"),
                   leader=True, near=1.5, along=places[1:], color=color)
    for runs_of, value, name, unit, color in _shared(flats):
        places = [(v, value) for v in np.geomspace(hi_x / 1.5, hi_x / 300, 8)]
        placer.add(ax, *places[0], f"{_who(runs_of)}: {name} {_fmt_rate(value, unit)}", sides=("nw", "sw"),
                   leader=True, near=1.5, along=places[1:], color=color)


def _level_handles(slopes: list) -> list[Line2D]:
    """Return a legend entry per memory level drawn, innermost first."""
    order = ("l1", "l2", "l3", *MEMORY_LEVELS)
    levels = {r.name: color for _, r, color in sorted(slopes, key=lambda s: order.index(s[1].name)
                                                      if s[1].name in order else len(order))}
    return [Line2D([], [], color=c, lw=2, label=f"slope: {n.upper()} bandwidth roof") for n, c in levels.items()]


def figure_compare(runs) -> Figure:
    """Return the compare chart: per run (its line style), every level's bandwidth roof as a
    slope in the level's colour up to the run's highest compute roof, its compute roofs flat
    from the ridge with its fastest level, its FLOP-counted points; one label per roof
    ("runs 1, 2: L2 413 GB/s"), placed by the label placer; every run in the legend (one
    without an off-chip roof too)."""
    fig = Figure(figsize=(11, 6.5))
    FigureCanvasAgg(fig)  # its own canvas: the placer measures texts; pyplot's backend is left alone
    ax = fig.subplots()
    placer = LabelPlacer(fig)
    slopes, flats, handles, drawn = [], [], [], False
    for i, run in enumerate(runs, 1):
        handle, some = _draw_run(ax, i, run, slopes, flats)
        handles.append(handle)
        drawn = drawn or some
    handles += _level_handles(slopes)
    _label_roofs(ax, placer, slopes, flats)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(*X_SPAN)
    tops = [r.value for _, r, _ in flats]
    if tops:  # headroom above the highest roof, so its labels sit by it, not pushed below the others
        ax.set_ylim(top=max(max(tops) * 3, ax.get_ylim()[1]))
    if not drawn:  # no roof and no FLOP-counted point in any run: an empty chart that says so
        ax.set_ylim(1, 1e4)
        ax.text(0.5, 0.5, "no roofs or FLOP-counted points in these runs", transform=ax.transAxes,
                ha="center", va="center", color="0.4")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("GFLOP/s")
    ax.set_title("roofbench compare (line style and marker: run; colour: memory level)")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.tight_layout()
    placer.place()
    return fig


def _who(runs_of: list[int]) -> str:
    return f"run {runs_of[0]}" if len(runs_of) == 1 else f"runs {', '.join(map(str, runs_of))}"
