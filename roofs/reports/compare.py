"""Compare runs: several devices, or one device before and after a change. Reads only the
runs' files (never rewrites them). One chart overlays every run's roofs and points; one
table gives each roof's value per run (with its interval where the run has one,
ARCHITECTURE.md rule 17: "41.2, 39-42.1") and its ratio to the first run, under a legend that
says which run is which, and warnings where the runs cannot be compared like for like:
a different measuring method (METHOD_VERSION, ARCHITECTURE.md rule 13), quick or
--max-ws options, roofbench commit, or CPUs with different SIMD units."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from bench.results import load_run
from bench.util import fmt_bytes, missing
from roofs.analysis.roofline import band_text
from roofs.charts.fleet import figure_compare
from roofs.charts.fleet import run_label as label
from roofs.charts.kit import save_png
from roofs.reports.bands import as_interval
from roofs.reports.report import _fmt, md_table


def ratio_table(runs) -> pd.DataFrame:
    """Return one row per (kind, roof name) measured in any run: its value in each run, its
    interval there ("run N interval": (low, high), or None for a roof without one, rule 17; the
    printed tables fold it into the value, shown_table) and the ratio of each later run to the
    first (empty where a run lacks the roof)."""
    keys, values, intervals = [], [], []
    for run in runs:
        measured = [r for r in run.roofs if r.get("source", "measured") == "measured"]
        vals = {(r["kind"], r["name"]): r["value"] for r in measured}
        values.append(vals)
        intervals.append({(r["kind"], r["name"]): as_interval(r.get("interval")) for r in measured})
        keys += [k for k in vals if k not in keys]
    rows = []
    for kind, name in keys:
        row = {"kind": kind, "roof": name}
        base = values[0].get((kind, name))
        for i, vals in enumerate(values):
            v = vals.get((kind, name))
            row[f"run {i + 1}"] = v
            row[f"run {i + 1} interval"] = intervals[i].get((kind, name))
            if i:
                row[f"run {i + 1} / run 1"] = v / base if (v and base) else None
        rows.append(row)
    return pd.DataFrame(rows)


def shown_table(table: pd.DataFrame) -> pd.DataFrame:
    """Return the ratio table as it is printed: each run's value with its interval (band_text:
    "41.2, 39-42.1"; the figure alone for a roof without one), the interval columns folded in."""
    out = table.copy()
    for col in [c for c in table.columns if c.endswith(" interval")]:
        value = col[:-len(" interval")]
        out[value] = [None if missing(v) else band_text(v, as_interval(i))
                      for v, i in zip(table[value], table[col])]
        out = out.drop(columns=col)
    return out


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
            out.append(f"the runs differ in {what} ("
                       + ", ".join(f"run {i + 1}: {show(v)}" for i, v in enumerate(values))
                       + ("): a roof the option cut or changed differs for that reason, not the device's"
                          if what != "commit" else "): the code that measured them differs"))
    derived = [r.roofs_by for r in runs]
    if len({str(d) for d in derived}) > 1:
        out.append("the runs' roofs were derived by different code (" + ", ".join(
            f"run {i + 1}: " + (f"method {d.get('method_version')}, commit {d.get('commit')}" if d else "not recorded")
            for i, d in enumerate(derived)) + "): give each run's derived folder (report RUN_DIR) to compare "
            "roofs derived by one method.")
    for i, a, j, b in simd_differences(runs):
        out.append(f"the CPUs differ in SIMD flags: run {i} has {', '.join(a) or 'none more'}, "
                   f"run {j} has {', '.join(b) or 'none more'} that the other lacks; "
                   "compute roofs follow the vector units (AVX-512, bf16, VNNI), so they may differ many-fold.")
    return out


def simd_differences(runs) -> list[tuple[int, list[str], int, list[str]]]:
    """Return, for each two CPU runs in a row whose flags differ, (run i, the flags only it
    has, run j, the flags only that one has), runs numbered from 1 and flags sorted."""
    cpus = [(i + 1, set(r.device.get("cpu_flags") or ())) for i, r in enumerate(runs)
            if r.device.get("kind") == "cpu"]
    return [(i, sorted(a - b), j, sorted(b - a)) for (i, a), (j, b) in zip(cpus, cpus[1:]) if a != b]


def text_table(table: pd.DataFrame) -> str:
    """Return the ratio table for a terminal: significant digits with thousands separators,
    blank where a run lacks a roof."""
    return shown_table(table).apply(lambda col: col.map(_fmt)).to_string(index=False) if not table.empty \
        else "(no measured roofs)"


def plot_compare(runs, path: Path) -> Path:
    return save_png(figure_compare(runs), path, dpi=110)


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
                                        + f"\n{md_table(shown_table(table))}\n![compare](compare.png)\n")
    return "\n".join(legend + warned + ["", text_table(table)]), out_dir
