"""A fleet's pictures (roofs/reports/fleet.py computes what they show), each drawn on its own
matplotlib Figure:

    draw_distributions   every roof's values across the fleet, as a percentage of the group's
                         median, one row per roof: the p5-p95 range shaded, the outliers red
                         and labelled with their host and device id
    draw_fleet_roofline  the roofline of the fleet's medians, with the p5-p95 band drawn under
                         every roof (a compute roof a flat band, a bandwidth roof a slanted one,
                         through the charts' one band helper, roofs.charts.ceilings.draw_band)
    figure_compare       compare.png (roofs/reports/compare.py writes it beside compare.md):
                         several runs' roofs and points on one roofline. A run is told by its
                         line style and its points' marker; a memory level by its colour, the
                         same as on every other chart (LEVEL_COLORS): each run's every level
                         drawn as a slope up to its highest compute roof, each compute roof
                         flat from its ridge, each with its interval as a band (rule 17) where
                         it has one, and one label per roof, runs whose roof is the same (within
                         1%) sharing it.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure  # no pyplot: the process's matplotlib backend is left alone
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle

from roofs.analysis.roofline import MEMORY_LEVELS, Roof, Roofline
from roofs.charts.ceilings import band_factors, band_handle, draw_band
from roofs.charts.kit import FLAG_COLOR, _bandwidth, _compute, _fmt_rate, level_color, save_png
from roofs.charts.labels import LabelPlacer

MAX_LABELS = 6  # outlier labels per roof; the rest are in fleet.md


def draw_distributions(rows: pd.DataFrame, roof_stats: dict, outliers: list[dict], title: str, path: Path) -> Path:
    """Draw each roof's values (rows' columns named in roof_stats) as % of its median; return path."""
    names = list(roof_stats)
    fig = Figure(figsize=(9, 1.2 + 0.45 * max(len(names), 1)))
    ax = fig.add_subplot()
    rng = np.random.default_rng(0)  # the jitter only spreads the dots; it is the same on every redraw
    slow = {}
    for o in outliers:
        slow.setdefault(o["roof"], []).append(o)
    for i, col in enumerate(names):
        st = roof_stats[col]
        med = st["median"] or 1.0
        v = 100 * pd.to_numeric(rows[col], errors="coerce").dropna().to_numpy() / med
        ax.add_patch(_band(ax, 100 * st["p5"] / med, 100 * st["p95"] / med, i))
        ax.scatter(v, i + rng.uniform(-0.18, 0.18, len(v)), s=8, color="tab:blue", alpha=0.5, linewidths=0)
        ax.plot([100, 100], [i - 0.3, i + 0.3], color="black", lw=1)
        marks = slow.get(col, [])
        if marks:
            x = [100 * o["value"] / med for o in marks]
            ax.scatter(x, [i] * len(x), s=30, color=FLAG_COLOR, zorder=3)
            for o, xi in sorted(zip(marks, x), key=lambda t: t[1])[:MAX_LABELS]:
                ax.annotate(f"{o['host']} {str(o['id'])[:14]}", (xi, i), xytext=(0, 6), textcoords="offset points",
                            fontsize=6, color=FLAG_COLOR, ha="center")
    ax.set_yticks(range(len(names)), [f"{c} ({roof_stats[c]['unit']})" for c in names], fontsize=7)
    ax.set_ylim(-0.7, len(names) - 0.3)
    ax.invert_yaxis()
    ax.set_xlabel("% of the fleet's median (shaded: p5 to p95; red: outliers)")
    ax.set_title(f"{title}: every roof across the fleet", fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    save_png(fig, path)
    return path


def _band(ax, lo: float, hi: float, i: int):
    return Rectangle((lo, i - 0.3), max(hi - lo, 0.05), 0.6, color="tab:gray", alpha=0.25, lw=0)


def draw_fleet_roofline(roof_stats: dict, title: str, path: Path) -> bool:
    """Draw the medians' roofline with every roof's p5-p95 band; return False (nothing drawn)
    without a compute roof and a bandwidth roof."""
    burst = {c: s for c, s in roof_stats.items() if not c.endswith(".sustained")}
    compute = {c: s for c, s in burst.items() if "FLOP" in s["unit"] or "OP/s" in s["unit"]}
    bandwidth = {c: s for c, s in burst.items() if s["unit"] == "GB/s"}
    if not compute or not bandwidth:
        return False
    top = max(s["p95"] for s in compute.values())
    lo_bw = min(s["p5"] for s in bandwidth.values())
    x = np.logspace(np.log10(top / max(s["p95"] for s in bandwidth.values()) / 100), np.log10(top / lo_bw * 20), 200)
    fig = Figure(figsize=(8, 5.5))
    ax = fig.add_subplot()
    colors = iter(["tab:blue", "tab:green", "tab:purple", "tab:brown", "tab:cyan", "tab:olive", "tab:pink",
                   "tab:gray"] * 8)
    for name, s in bandwidth.items():
        c = next(colors)
        # the fleet's p5-p95 drawn as a band, as a roof's interval is (clipped at the top compute roof)
        draw_band(ax, Roof("bandwidth", name, s["median"], "GB/s", interval=(s["p5"], s["p95"])), x[0], x[-1], c,
                  upto=top)
        ax.plot(x, np.minimum(s["median"] * x, top), color=c, lw=1.2, label=f"{name} {s['median']:,.0f} GB/s")
    for name, s in compute.items():
        c = next(colors)
        draw_band(ax, Roof("compute", name, s["median"], s["unit"], interval=(s["p5"], s["p95"])), x[0], x[-1], c)
        ax.axhline(s["median"], color=c, lw=1.2, ls="--", label=f"{name} {s['median']:,.0f} {s['unit']}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("GFLOP/s")
    ax.set_title(f"{title}: the fleet's roofs (median; shaded p5 to p95)", fontsize=10)
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(which="both", alpha=0.2)
    fig.tight_layout()
    save_png(fig, path)
    return True


# ---- compare.png ---------------------------------------------------------------------------

RUN_STYLES = ("-", "--", ":", "-.")
RUN_MARKERS = ("o", "s", "^", "D", "v", "P")
SAME = 0.01   # roofs of several runs within this share of each other get one label


def run_label(run) -> str:
    return f"{run.device.get('name', '?')} @ {run.meta.get('start_utc', '')[:16]}"


def _shared(items):
    """Return [(runs, value, roof name, unit, colour, band factors)] with the runs whose roof of
    one name lies within SAME of another's grouped: one label per drawn roof, kept clear of the
    bands of the roofs it names (ceilings.band_factors)."""
    out, roofs = [], []
    for i, r, color in items:
        for entry, same in zip(out, roofs):
            if entry[2] == r.name and abs(r.value - entry[1]) <= SAME * entry[1]:
                entry[0].append(i)
                same.append(r)
                break
        else:
            out.append([[i], r.value, r.name, r.unit, color])
            roofs.append([r])
    return [[*entry, band_factors(same, entry[1])] for entry, same in zip(out, roofs)]


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
        draw_band(ax, r, lo_x, hi_x, level_color(r.name), upto=top, gid=f"run{i}:band:{r.name}")
        slopes.append((i, r, level_color(r.name)))
    fastest = bws[0].value if bws else None
    for r in computes:
        start = max(r.value / fastest, lo_x) if fastest else lo_x
        ax.hlines(r.value, start, hi_x, color="0.15", ls=ls, lw=1.1, zorder=2, gid=f"run{i}:{r.name}")
        draw_band(ax, r, start, hi_x, "0.15", gid=f"run{i}:band:{r.name}")
        flats.append((i, r, "0.15"))
    offchip = any(r.name in MEMORY_LEVELS for r in bws)
    handle = Line2D([], [], color="0.3", ls=ls, marker=marker, ms=5,
                    label=f"run {i}: {run_label(run)}" + ("" if offchip else " (no off-chip roof)"))
    return handle, not ok.empty or bool(bws) or bool(computes)


def _label_roofs(ax, placer: LabelPlacer, slopes: list, flats: list) -> None:
    """One label per drawn roof, runs sharing a value sharing it: slopes' labels along the
    slope, flats' from the right edge leftwards."""
    lo_x, hi_x = X_SPAN
    for runs_of, value, name, unit, color, band in _shared(slopes):
        places = [(v, value * v) for v in np.geomspace(lo_x * 2, hi_x / 10, 8)]
        placer.add(ax, *places[0], f"{_who(runs_of)}: {name.upper()} {_fmt_rate(value, unit)}", sides=("nw", "se"),
                   leader=True, near=1.5, along=places[1:], band=band, color=color)
    for runs_of, value, name, unit, color, band in _shared(flats):
        places = [(v, value) for v in np.geomspace(hi_x / 1.5, hi_x / 300, 8)]
        placer.add(ax, *places[0], f"{_who(runs_of)}: {name} {_fmt_rate(value, unit)}", sides=("nw", "sw"),
                   leader=True, near=1.5, along=places[1:], band=band, color=color)


def _level_handles(slopes: list) -> list[Line2D]:
    """Return a legend entry per memory level drawn, innermost first."""
    order = ("l1", "l2", "l3", *MEMORY_LEVELS)
    levels = {r.name: color for _, r, color in sorted(slopes, key=lambda s: order.index(s[1].name)
                                                      if s[1].name in order else len(order))}
    return [Line2D([], [], color=c, lw=2, label=f"slope: {n.upper()} bandwidth roof") for n, c in levels.items()]


def figure_compare(runs) -> Figure:
    """Return the compare chart: per run (its line style), every level's bandwidth roof as a
    slope in the level's colour up to the run's highest compute roof, its compute roofs flat
    from the ridge with its fastest level, each roof's interval as a band under its line
    (rule 17, ceilings.draw_band), its FLOP-counted points; one label per roof
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
    if any(r.interval is not None for _, r, _ in slopes + flats):
        handles.append(band_handle())
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
