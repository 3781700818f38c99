"""Compare runs: several devices, or one device before and after a change. Reads only the
runs' files. One chart overlays every run's roofs and points; one table gives each roof's
value per run and its ratio to the first run."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from bench.results import load_run  # noqa: E402
from roofs.model import Roofline  # noqa: E402

COLORS = ("tab:blue", "tab:red", "tab:green", "tab:purple", "tab:orange", "tab:brown")


def label(run) -> str:
    return f"{run.device.get('name', '?')} @ {run.meta.get('start_utc', '')[:16]}"


def ratio_table(runs) -> pd.DataFrame:
    """Return one row per (kind, roof name) measured in any run: its value in each run and
    the ratio of each later run to the first (empty where a run lacks the roof)."""
    keys, values = [], []
    for run in runs:
        vals = {(r["kind"], r["name"]): r["value"] for r in run.roofs if r.get("source", "measured") == "measured"}
        values.append(vals)
        keys += [k for k in vals if k not in keys]
    rows = []
    for kind, name in keys:
        row = {"kind": kind, "roof": name}
        base = values[0].get((kind, name))
        for i, vals in enumerate(values):
            v = vals.get((kind, name))
            row[f"run {i + 1}"] = v
            if i:
                row[f"run {i + 1} / run 1"] = v / base if (v and base) else None
        rows.append(row)
    return pd.DataFrame(rows)


def plot_compare(runs, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(10, 6))
    xs = np.logspace(-2, 4, 300)
    for color, run in zip(COLORS, runs):
        model = Roofline(run.roofs)
        peak = model.compute()
        bw = model.bandwidth()
        if bw:
            ys = bw.value * xs if peak is None else np.minimum(bw.value * xs, peak.value)
            ax.plot(xs, ys, color=color, lw=2, label=f"{label(run)}: {bw.name} {bw.value:,.0f} GB/s")
        for r in model.roofs:
            if r.kind == "compute":
                start = r.value / bw.value if bw else xs[0]
                ax.hlines(r.value, start, xs[-1], color=color, lw=1, alpha=0.7)
                ax.text(xs[-1], r.value, f"{r.name} ", color=color, fontsize=6, ha="right", va="bottom")
        df = run.measurements
        ok = df[(df["status"] == "ok") & (df["flops"] > 0)]
        ax.scatter(ok["intensity"], ok["gflops"], s=8, color=color, alpha=0.5)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("GFLOP/s")
    ax.set_title("roofbench compare")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def compare(run_dirs, out_dir: Path) -> tuple[pd.DataFrame, Path]:
    """Write compare.png and compare.md into out_dir; return (the ratio table, out_dir)."""
    runs = [load_run(d) for d in run_dirs]
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    table = ratio_table(runs)
    plot_compare(runs, out_dir / "compare.png")
    from roofs.report import md_table
    legend = "".join(f"- run {i + 1}: {label(r)} ({r.dir})\n" for i, r in enumerate(runs))
    (out_dir / "compare.md").write_text(f"# roofbench compare\n\n{legend}\n{md_table(table)}\n![compare](compare.png)\n")
    return table, out_dir
