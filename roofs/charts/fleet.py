"""A fleet's pictures (roofs/reports/fleet.py computes what they show), each drawn on its own
matplotlib Figure:

    draw_distributions   every roof's values across the fleet, as a percentage of the group's
                         median, one row per roof: the p5-p95 range shaded, the outliers red
                         and labelled with their host and device id
    draw_fleet_roofline  the roofline of the fleet's medians, with the p5-p95 band drawn under
                         every roof (a compute roof a flat band, a bandwidth roof a slanted one)
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from roofs.charts.kit import DPI, FLAG_COLOR

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
    fig.savefig(path, dpi=DPI)
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
        cap = top
        ax.fill_between(x, np.minimum(s["p5"] * x, cap), np.minimum(s["p95"] * x, cap), color=c, alpha=0.2, lw=0)
        ax.plot(x, np.minimum(s["median"] * x, cap), color=c, lw=1.2, label=f"{name} {s['median']:,.0f} GB/s")
    for name, s in compute.items():
        c = next(colors)
        ax.axhspan(s["p5"], s["p95"], color=c, alpha=0.2, lw=0)
        ax.axhline(s["median"], color=c, lw=1.2, ls="--", label=f"{name} {s['median']:,.0f} {s['unit']}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("GFLOP/s")
    ax.set_title(f"{title}: the fleet's roofs (median; shaded p5 to p95)", fontsize=10)
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(which="both", alpha=0.2)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    return True
