"""The probes' pictures, from a run folder's files.

fma.png   The FMA-chain sweep (fma.chains): GFLOP/s against FLOP/byte as k grows, one line
          per (impl, precision), k written along it. Over each precision: its vector roof
          (the precision's roof where its vector unit is it, else "<p>.vector") as a flat,
          and the bandwidth roof of the level the sweep's bytes cross (its `boundary`) as a
          slope, each with its interval as a band (rule 17) where it has one. Two marks per
          line: the roofline's corner (open diamond: vector roof / bandwidth roof) and the
          measured knee (filled diamond: where the line's own flat, its best GFLOP/s, meets
          its own slope, its best GB/s: knee intensity = best GFLOP/s / best GB/s). A knee
          right of the corner means the sweep reached its roof late (too little in flight at
          middling k); left, the bytes came from a faster level than the one assumed.

The launch floor on the roofline charts (draw_launch_floor): a time floor is not a line in
FLOP/byte, so it is drawn per point: a point of F FLOPs can reach at most F / t_floor
(its kernel taking no time at all), and that ceiling is a short grey dash above each
point within 8x of its floor (the others' dashes are far off the chart). Points within
2x of it (launch-bound, roofs/analysis/launch_floor.py) get a grey square; the chart's footnote gives
the floors.
"""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from bench.results import Run, best_passes, text_column  # noqa: E402
from roofs.analysis.launch_floor import floor_for, is_launch_bound, launch_floors  # noqa: E402
from roofs.analysis.roofline import MEMORY_LEVELS, Roof, Roofline  # noqa: E402
from roofs.charts.ceilings import (
    CHAIN,
    MEASURED,
    band_factors,
    band_handle,
    chain_label,
    draw_band,
    is_chain_line,
)
from roofs.charts.kit import (  # noqa: E402
    DPI,
    PRECISION_COLORS,
    PRECISION_MARKERS,
    LabelPlacer,
    _finish_axes,
    _fmt_rate,
    _impl_name,
    _title,
    draw_runner_flagged,
    level_color,
    runner_handle,
    split_runner,
)

FMA_OP = "fma.chains"
SWEEP_STYLES = {"triton": "-", "torch": "--"}  # the sweeps' line style by impl
CEILING_SPAN = 8.0   # dashes for points within this factor of their launch floor


def vector_roof(model: Roofline, precision: str) -> Roof | None:
    """Return the precision's FMA-chain line: the precision's own roof when its unit is the
    vector one, else "<precision>.vector" or, for torch's chains, "<precision>.elementwise";
    None without any."""
    own = model.compute(precision)
    if own is not None and (own.extra or {}).get("unit") in ("vector", "elementwise"):
        return own
    return model.compute(f"{precision}.vector") or model.compute(f"{precision}.elementwise")


def knee(rows: pd.DataFrame) -> tuple[float, float] | None:
    """Return (intensity, GFLOP/s) where a sweep's own flat (its best GFLOP/s) meets its own
    slope (its best GB/s): intensity = best GFLOP/s / best GB/s; None without both."""
    g, b = rows["gflops"].max(), rows["gbps"].max()
    if not (g > 0 and b > 0):
        return None
    return float(g / b), float(g)


def corner(model: Roofline, precision: str, level: str) -> tuple[float, float] | None:
    """Return (intensity, GFLOP/s) of the roofline's corner: vector roof / the level's bandwidth roof."""
    peak, bw = vector_roof(model, precision), model.bandwidth(level or None)
    if peak is None or bw is None:
        return None
    return peak.value / bw.value, peak.value


def _sweeps(df: pd.DataFrame) -> pd.DataFrame:
    """Return the FMA-chain rows fma.png draws as sweeps, in order of intensity: status ok, with
    GFLOP/s, each point's fastest pass, never a row the runner flagged (runner_flagged)."""
    ok = df[(df["op"] == FMA_OP) & (df["status"] == "ok") & (df["gflops"] > 0)]
    return best_passes(split_runner(ok)[0]).copy().sort_values("intensity")


def _flagged(df: pd.DataFrame) -> pd.DataFrame:
    """Return the FMA-chain rows the runner flagged: fma.png draws them hollow, in no sweep."""
    ok = df[(df["op"] == FMA_OP) & (df["status"] == "ok") & (df["gflops"] > 0)]
    return split_runner(ok)[1]


def draw_fma(run: Run):
    """Return fma.png's figure, or None without FMA-chain rows."""
    pts, flagged = _sweeps(run.measurements), _flagged(run.measurements)
    if pts.empty:
        return None
    model = Roofline(run.roofs)
    level = next((b for b in text_column(pts, "boundary") if b), "")
    fig, ax = plt.subplots(figsize=(11, 7), dpi=DPI)
    placer = LabelPlacer(fig)
    xs = np.concatenate([pts["intensity"].to_numpy(), [1e-1, 1e4]])
    lo_x, hi_x = xs.min() / 2, xs.max() * 2
    lines, drawn = [], set()
    for (impl, dtype), g in pts.groupby(["impl", "dtype"], sort=True):
        color = PRECISION_COLORS.get(dtype, "0.3")
        ax.plot(g["intensity"], g["gflops"], color=color, marker=PRECISION_MARKERS.get(dtype, "o"), ms=5,
                ls=SWEEP_STYLES.get(_impl_name(impl), "--"), lw=1.2, zorder=3, gid=f"sweep:{impl}:{dtype}")
        for r in (g.iloc[[0, len(g) // 2, -1]] if len(g) > 2 else g).itertuples():
            placer.add(ax, r.intensity, r.gflops, f"k={int(r.k)}", sides=("se", "s", "e"), color=color, gap=5)
        kn = knee(g)
        if kn:
            ax.plot(*kn, marker="D", ms=9, color=color, zorder=5, gid=f"knee:{impl}:{dtype}")
        cn = corner(model, dtype, level)
        if cn:
            ax.plot(*cn, marker="D", ms=11, mfc="none", mec=color, mew=1.6, zorder=5, gid=f"corner:{dtype}")
        peak = vector_roof(model, dtype)
        if peak is not None and peak.name not in drawn:
            drawn.add(peak.name)
            chain = is_chain_line(peak)
            ax.hlines(peak.value, lo_x, hi_x, color=color, zorder=2, gid=f"flat:{peak.name}",
                      **(CHAIN if chain else MEASURED))
            draw_band(ax, peak, lo_x, hi_x, color)
            name = chain_label(peak) if chain else f"{peak.name} roof"
            places = [(hi_x / 1.05 / 2 ** i, peak.value) for i in range(6)]
            placer.add(ax, *places[0], f"{name} {_fmt_rate(peak.value, peak.unit)}",
                       sides=("nw", "sw"), leader=True, near=1.5, along=places[1:], color=color,
                       band=band_factors([peak], peak.value))
        lines.append(f"{dtype} {_impl_name(impl)}: knee {kn[0]:.3g} FLOP/B" + (f", corner {cn[0]:.3g}" if cn else "")
                     if kn else f"{dtype} {_impl_name(impl)}")
    for dtype, g in flagged.groupby("dtype"):  # hollow, joined to nothing
        draw_runner_flagged(ax, g["intensity"], g["gflops"], PRECISION_COLORS.get(dtype, "0.3"), f"runner:{dtype}")
    bw = model.bandwidth(level or None)
    ys = pts["gflops"]
    peaks = [r.value for r in (vector_roof(model, d) for d in set(pts["dtype"])) if r is not None]
    lo_y, hi_y = ys.min() / 4, max([ys.max()] + peaks) * 3
    if bw is not None:
        ax.plot([lo_x, hi_x], [bw.value * lo_x, bw.value * hi_x], color=level_color(bw.name),
                lw=2 if bw.name in MEMORY_LEVELS else 1.6, zorder=2, gid=f"slope:{bw.name}")
        draw_band(ax, bw, lo_x, hi_x, level_color(bw.name))
        xa = min(max(lo_x * 1.5, 4 * lo_y / bw.value), hi_x / 2)
        places = [(xa * 1.6 ** i, bw.value * xa * 1.6 ** i) for i in range(6)]
        placer.add(ax, *places[0], f"{bw.name.upper()} {_fmt_rate(bw.value, 'GB/s')} (the level the bytes cross)",
                   sides=("nw", "se"), leader=True, near=1.5, along=places[1:], color=level_color(bw.name),
                   band=band_factors([bw], bw.value))
    _finish_axes(ax, (lo_x, hi_x, lo_y, hi_y))
    ax.set_xlabel("arithmetic intensity (FLOP/byte): 2 k C n / ((2 n + C + 1) w)")
    ax.set_ylabel("GFLOP/s (1e9 FLOP/s), median")
    ax.set_title(_title(run, "Vector units: FMA chains, k swept"))
    handles = [Line2D([], [], marker="D", ls="none", color="0.3", ms=8,
                      label="measured knee (own best GFLOP/s / best GB/s)"),
               Line2D([], [], marker="D", ls="none", mfc="none", mec="0.3", ms=9,
                      label="roofline corner (vector roof / bandwidth roof)")]
    handles += [Line2D([], [], ls=SWEEP_STYLES.get(i, "--"), marker="o", ms=3, color="0.3",
                       label=f"{i} sweep (k grows)")
                for i in sorted({_impl_name(i) for i in pts["impl"]})]
    if bw is not None:
        handles.append(Line2D([], [], color=level_color(bw.name), lw=2,
                              label=f"slope: {bw.name.upper()} bandwidth roof"))
    roofs = [vector_roof(model, d) for d in sorted(set(pts["dtype"]))]
    if any(r is not None and is_chain_line(r) for r in roofs):
        handles.append(Line2D([], [], color="0.3", label="dash-dot: elementwise ceiling (no precision's roof)",
                              **CHAIN))
    if any(r is not None and not is_chain_line(r) for r in roofs):
        handles.append(Line2D([], [], color="0.3", label="solid flat: the vector unit's roof", **MEASURED))
    if any(r is not None and r.interval is not None for r in roofs + [bw]):
        handles.append(band_handle())
    if not flagged.empty:
        handles.append(runner_handle())
    ax.legend(handles=handles, fontsize=8, loc="upper left")
    placer.avoid(ax, pts["intensity"], pts["gflops"])
    text = "Each element loaded once, k FMAs in each of 8 chains, one result stored."
    for i in range(0, len(lines), 3):
        text += "\n" + "; ".join(lines[i:i + 3])
    fig.text(0.01, 0.012, text, fontsize=7, color="dimgray", va="bottom")
    fig.tight_layout(rect=(0, 0.02 + 0.018 * (1 + (len(lines) + 2) // 3), 1, 1))
    placer.place()
    return fig


def draw_launch_floor(ax, pts: pd.DataFrame, roofs) -> str:
    """Draw the launch floor over pts (rows a roofline places: intensity, gflops, flops,
    median_ms, backend, timer): a grey dash at each point's ceiling F / t_floor when its
    time is within CEILING_SPAN x its floor, a grey square on launch-bound points. Return
    the footnote naming the floors ("" when the run has none)."""
    floors = launch_floors(roofs)
    if not floors or pts.empty or "median_ms" not in pts:
        return ""
    xs, ys = [], []
    for r in pts.itertuples():
        hit = floor_for(str(getattr(r, "backend", "")), str(getattr(r, "timer", "")), floors)
        if hit is None or not r.median_ms or 1e3 * r.median_ms > CEILING_SPAN * hit[0]:
            continue
        xs.append(r.intensity)
        ys.append(r.flops / (hit[0] * 1e-6) / 1e9)
    if xs:
        ax.scatter(xs, ys, marker="_", s=120, color="0.45", lw=1.4, zorder=3, gid="launch-ceiling")
    bound = pts[is_launch_bound(pts)]
    if not bound.empty:
        ax.scatter(bound["intensity"], bound["gflops"], marker="s", s=110, facecolors="none", edgecolors="0.45",
                   lw=1.2, zorder=3, gid="launch-bound")
    names = ", ".join(f"{b} {f} {us:.3g} us" for (b, f), us in sorted(floors.items()))
    return (f"Launch floor ({names}): grey dashes are the ceiling F / t_floor of points "
            f"within {CEILING_SPAN:g}x of it; "
            f"grey squares, points within 2x (launch-bound).")
