"""Compare runs: several devices, or one device before and after a change. Reads only the
runs' files (never rewrites them). One chart overlays every run's roofs and points; one
table gives each roof's value per run and its ratio to the first run, under a legend that
says which run is which, and warnings where the runs cannot be compared like for like:
a different measuring method (METHOD_VERSION, ARCHITECTURE.md rule 13), quick or
--max-ws options, roofbench commit, or CPUs with different SIMD units."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure  # no pyplot: the process's matplotlib backend is left alone

from bench.results import load_run
from bench.util import fmt_bytes
from roofs.analysis.roofline import Roofline
from roofs.charts.kit import LabelPlacer
from roofs.reports.report import _fmt, md_table

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


def comparison_warnings(runs) -> list[str]:
    """Return why the runs may differ for reasons other than the device or change compared:
    measuring methods of different versions, a quick run against a full one, different
    --max-ws limits, different roofbench commits, CPUs whose SIMD flags differ."""
    out = []
    versions = [r.meta.get("method_version", 1) for r in runs]  # runs before version 2 did not record it
    if len(set(versions)) > 1:
        out.append("the runs were measured with different methods (" + ", ".join(
            f"run {i + 1}: method version {v}" for i, v in enumerate(versions))
            + "): the rules that make points and roofs changed between them (ARCHITECTURE.md), "
            "so part of a difference may be the method's.")
    def option(run, key):
        return (run.meta.get("options") or {}).get(key)
    for what, get, show in (
            ("--quick", lambda r: bool(option(r, "quick")), lambda v: "quick" if v else "full"),
            ("--max-ws", lambda r: option(r, "max_ws"), lambda v: f"--max-ws {fmt_bytes(v)}" if v else "no --max-ws"),
            ("commit", lambda r: r.meta.get("roofbench_commit", "not recorded"), lambda v: f"commit {v}")):
        values = [get(r) for r in runs]
        if len(set(map(str, values))) > 1:
            out.append(f"the runs differ in {what} (" + ", ".join(f"run {i + 1}: {show(v)}" for i, v in enumerate(values))
                       + ("): a roof the option cut or changed differs for that reason, not the device's"
                          if what != "commit" else "): the code that measured them differs"))
    derived = [r.roofs_by for r in runs]
    if len({str(d) for d in derived}) > 1:
        out.append("the runs' roofs were derived by different code (" + ", ".join(
            f"run {i + 1}: " + (f"method {d.get('method_version')}, commit {d.get('commit')}" if d else "not recorded")
            for i, d in enumerate(derived)) + "): give each run's derived folder (report RUN_DIR) to compare "
            "roofs derived by one method.")
    cpus = [(i, set(r.device.get("cpu_flags") or ())) for i, r in enumerate(runs) if r.device.get("kind") == "cpu"]
    for (i, a), (j, b) in zip(cpus, cpus[1:]):
        if a != b:
            out.append(f"the CPUs differ in SIMD flags: run {i + 1} has {', '.join(sorted(a - b)) or 'none more'}, "
                       f"run {j + 1} has {', '.join(sorted(b - a)) or 'none more'} that the other lacks; "
                       "compute roofs follow the vector units (AVX-512, bf16, VNNI), so they may differ many-fold.")
    return out


def text_table(table: pd.DataFrame) -> str:
    """Return the ratio table for a terminal: significant digits with thousands separators,
    blank where a run lacks a roof."""
    return table.apply(lambda col: col.map(_fmt)).to_string(index=False) if not table.empty else "(no measured roofs)"


def figure_compare(runs) -> Figure:
    """Return the compare chart: each run's off-chip roof as a slope up to its highest
    compute roof, its compute roofs flat, its points; every run in the legend (a run without
    an off-chip roof too), each compute roof labelled "run N <precision>" by the label
    placer, so no two labels overprint."""
    fig = Figure(figsize=(10, 6))
    FigureCanvasAgg(fig)  # its own canvas: the placer measures texts; pyplot's backend is left alone
    ax = fig.subplots()
    xs = np.logspace(-2, 4, 300)
    placer = LabelPlacer(fig)
    drawn = False
    # labels go along the flat part every run shares: right of every ridge point and of the
    # legend (upper left), so that each one's place is on its line whichever run it is
    ridges = [r.value / b.value for run in runs for b in [Roofline(run.roofs).bandwidth()] if b
              for r in Roofline(run.roofs).roofs if r.kind == "compute" and r.source == "measured"]
    lo = max([10.0] + [1.5 * x for x in ridges])
    for i, (color, run) in enumerate(zip(COLORS * (1 + len(runs) // len(COLORS)), runs)):
        model = Roofline(run.roofs)
        peak = model.compute()
        bw = model.bandwidth()
        df = run.measurements
        ok = df[(df["status"] == "ok") & (df["flops"] > 0) & (df["gflops"] > 0)]
        drawn = drawn or not ok.empty or bw is not None or peak is not None
        ax.scatter(ok["intensity"], ok["gflops"], s=8, color=color, alpha=0.5,
                   label=f"run {i + 1}: {label(run)}" + ("" if bw else " (no off-chip roof)"))
        if bw:
            ys = bw.value * xs if peak is None else np.minimum(bw.value * xs, peak.value)
            ax.plot(xs, ys, color=color, lw=2, label=f"run {i + 1}: {bw.name} {bw.value:,.0f} GB/s")
        flat = [r for r in model.roofs if r.kind == "compute" and r.source == "measured"]
        for j, r in enumerate(flat):
            start = r.value / bw.value if bw else xs[0]
            ax.hlines(r.value, start, xs[-1], color=color, lw=1, alpha=0.7, gid=f"run{i + 1}:{r.name}")
            # each label on its own line, at its own place along it (runs and roofs staggered), so
            # that labels of nearby roofs do not pile into one column away from their lines
            at = (i + len(runs) * j + 0.5) / (len(runs) * max(1, len(flat)))
            x = float(np.exp(np.log(lo) + at * (np.log(xs[-1] / 1.5) - np.log(lo))))
            placer.add(ax, x, r.value, f"run {i + 1} {r.name}", sides=("n", "s"), leader=True, near=1.0,
                       gap=1.0, color=color)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(xs[0] / 2, xs[-1] * 2)
    tops = [r.value for run in runs for r in Roofline(run.roofs).roofs if r.kind == "compute" and r.source == "measured"]
    if tops:  # headroom above the highest roof, so its labels sit by it, not pushed below the others
        ax.set_ylim(top=max(max(tops) * 3, ax.get_ylim()[1]))
    if not drawn:  # no roof and no FLOP-counted point in any run: an empty chart that says so
        ax.set_ylim(1, 1e4)
        ax.text(0.5, 0.5, "no roofs or FLOP-counted points in these runs", transform=ax.transAxes,
                ha="center", va="center", color="0.4")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("GFLOP/s")
    ax.set_title("roofbench compare")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    placer.place()
    return fig


def plot_compare(runs, path: Path) -> Path:
    figure_compare(runs).savefig(path, dpi=110)
    return path


def compare(run_dirs, out_dir: Path) -> tuple[str, Path]:
    """Write compare.png and compare.md into out_dir; return (the comparison as terminal
    text: legend, warnings and ratio table; out_dir)."""
    runs = [load_run(d) for d in run_dirs]
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    table = ratio_table(runs)
    plot_compare(runs, out_dir / "compare.png")
    legend = [f"run {i + 1}: {label(r)} ({r.dir})" for i, r in enumerate(runs)]
    warned = [f"warning: {w}" for w in comparison_warnings(runs)]
    (out_dir / "compare.md").write_text("# roofbench compare\n\n" + "".join(f"- {line}\n" for line in legend + warned)
                                        + f"\n{md_table(table)}\n![compare](compare.png)\n")
    return "\n".join(legend + warned + ["", text_table(table)]), out_dir
