"""energy.png: FLOP per joule against arithmetic intensity, the run's points with energy
readings and the energy model fitted over them (roofs/analysis/energy.py's fit_energy, the
fit the report's findings quote), drawn at each intensity's attainable rate. Reads only the
run's rows and roofs; none when the run has no energy model."""
from __future__ import annotations

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from bench.results import Run
from roofs.analysis.energy import fit_energy, flops_per_joule
from roofs.analysis.roofline import Roofline
from roofs.charts.kit import DPI, split_runner


def draw_energy(run: Run) -> Figure | None:
    """Return the energy chart of run (every row, the sustained windows included: the rows
    the report's fit is over), or None when fit_energy finds no model."""
    df = run.measurements
    model, _ = fit_energy(df)
    if not model:
        return None
    d = split_runner(df[(df["status"] == "ok") & df["joules"].notna() & (df["flops"] > 0)])[0]  # flagged: not drawn
    fig = Figure(figsize=(8, 5), dpi=DPI)
    FigureCanvasAgg(fig)  # a canvas of its own (no pyplot state): saving and measuring text need one
    ax = fig.subplots()
    for fam, g in d.groupby("family"):
        ax.scatter(g["intensity"], g["flops"] / g["joules"], s=14, label=fam)
    rl = Roofline(run.roofs)
    xs = np.logspace(-2, 4, 200)
    ax.plot(xs, flops_per_joule(model, xs, [rl.attainable_gflops(x) for x in xs]), color="black",
            label="fit: 1 / (e_flop + e_byte / I + P0 / attainable)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("FLOP per joule")
    ax.set_title(f"Energy roofline: {run.device.get('name', '')}")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
