"""The end-of-run summary a run prints (run_bench.py, bench/run/session.py): row counts, the
roofs with their intervals (ARCHITECTURE.md, rule 17) beside their references with their ridge
points and why a level has none, one line counting the roofs confirmed, disputed and
unconfirmed (naming the disputed), each
kernel's best point, the decode GEMV lines, the flagged points counted, the warnings and
the errors. It reads a loaded run only (bench.results.Run), as report.py does."""
from __future__ import annotations

import pandas as pd

from bench.results import text_column
from bench.util import fmt_bytes, fmt_num, plural
from roofs.analysis.checks import is_above, run_warnings, split_notes
from roofs.analysis.roofline import MEMORY_LEVELS, Roof, Roofline, band_text, is_pass_ceiling, shown_name
from roofs.analysis.specs import implied_clock_mhz, reference_label
from roofs.reports.bands import confirmation_counts, with_ranges
from roofs.reports.report import best_rows, counter_lines


def ridge_text(model: Roofline, roof: Roof) -> str:
    """Return a roof's ridge point for the summary: a compute roof's P / BW against the
    off-chip roof (else the outermost measured level, named); a bandwidth roof's against
    the highest compute roof (named)."""
    bws = [r for r in model.roofs if r.kind == "bandwidth" and r.source == "measured"
           and not r.name.startswith(("link.", "host."))]
    if roof.kind == "compute":
        off = model.bandwidth()
        bw = off or (bws[0] if bws else None)  # bandwidth roofs are derived outermost first
        if bw is None:
            return "no bandwidth roof"
        return f"{fmt_num(roof.value / bw.value, 3)}" + ("" if off else f" (vs {bw.name})")
    peak = model.compute()
    if peak is None or roof.name.startswith(("link.", "host.")):
        return "no compute roof" if peak is None else "-"
    return f"{fmt_num(peak.value / roof.value, 3)} ({peak.name})"


def reference_text(roof: Roof, ref: Roof | None) -> str:
    """Return a measured roof's reference as the summary prints it: its value, source and the
    measured share of it, the clock a computed peak uses (specs.reference_label), and the clock a
    measured roof above it implies (specs.implied_clock_mhz; none below it: a path finding)."""
    if ref is None:
        return ""
    implied = implied_clock_mhz(roof.value, ref)
    clock = f", implies {implied:,.0f} MHz" if implied else ""
    return f"{fmt_num(ref.value)} {reference_label(ref)} ({100 * roof.value / ref.value:.0f}%{clock})"


def roof_rows(model: Roofline) -> tuple[list[dict], list[Roof]]:
    """Return (one summary row per measured roof, its value with its interval where it has one
    (band_text: "372 GFLOP/s, 355-390"), with its datasheet or computed reference beside it and
    its ridge point; the reference roofs no measured roof matches)."""
    refs = [r for r in model.roofs if r.source != "measured" and r.source in ("datasheet", "computed")]
    used, rows = set(), []
    for r in model.roofs:
        if r.source != "measured" or is_pass_ceiling(r):
            continue
        name = "memory" if r.name in MEMORY_LEVELS else r.name
        ref = next((x for x in refs if x.kind == r.kind and (x.name == r.name or x.name == name
                                                             or (name == "memory" and x.name in MEMORY_LEVELS))), None)
        if ref is not None:
            used.add(id(ref))
        where = (f"{fmt_bytes(r.plateau_bytes[0])} .. {fmt_bytes(r.plateau_bytes[1])} "
                 f"({plural(r.plateau_points, 'size')})"
                 if r.plateau_bytes else r.shape)
        rows.append({"roof": shown_name(r), "value": band_text(r.value, r.interval, r.unit),
                     "reference": reference_text(r, ref),
                     "from": f"{r.impl} {r.dtype}" + (f" (via {r.extra['via']})" if (r.extra or {}).get("via") else ""),
                     "plateau or shape": where, "ridge FLOP/B": ridge_text(model, r)})
    return rows, [r for r in refs if id(r) not in used]


def summary(run) -> str:
    """Return the end-of-run text: row counts; the roofs with their ridge points, and why a
    level has none; each kernel's best point; the decode GEMV lines; the points above their
    roofs and every error (the first 20 printed, the rest counted and pointed to)."""
    df = run.measurements
    fmt = lambda v: f"{v:,.1f}"  # noqa: E731
    lines = [f"\n{plural(len(df), 'row')}: "
             + ", ".join(f"{fmt_num(v)} {k}" for k, v in df["status"].value_counts().items())]
    model = Roofline(run.roofs)
    rows, refs = roof_rows(model)
    lines.append("\nroofs: measured, each beside its datasheet or computed reference")
    lines.append(pd.DataFrame(rows).to_string(index=False) if rows else "(none derived)")
    passes = [r for r in model.roofs if is_pass_ceiling(r)]
    if passes:
        lines.append("elementwise-pass ceilings (torch's FMA chains, each step a pass through the caches; no unit's "
                     "roof): " + "; ".join(f"{r.name} {band_text(r.value, r.interval, r.unit)}" for r in passes))
    if refs:
        lines.append("references with no measured roof: " + ", ".join(
            f"{r.name} {fmt_num(r.value)} {r.unit} ({r.source})" for r in refs))
    missing, about = split_notes(run)
    lines += [f"no roof: {n}" for n in missing] + [f"note: {n}" for n in about]
    confirmed = confirmation_counts(model)  # after the table and its notes: it counts the table's roofs
    if confirmed:
        lines.append(confirmed)
    ok = df[df["status"] == "ok"]
    stream, counted = ok[ok["family"] == "stream"], ok[(ok["family"] != "stream") & (ok["flops"] > 0)]
    # rows that move bytes and count no FLOPs; a launch probe moves none (its figure is a time, a roof of its own)
    moved = ok[(ok["family"] != "stream") & (ok["flops"] == 0) & (ok["bytes"] > 0)]
    if not stream.empty:
        t = best_rows(stream, ["impl", "dtype", "mode", "gbps", "working_set_bytes"])
        t["working_set_bytes"] = t["working_set_bytes"].map(lambda n: fmt_bytes(float(n)))
        lines += ["\nstream, best point per kernel:", t.rename(columns={
            "gbps": "best GB/s", "working_set_bytes": "at working set"}).to_string(index=False, float_format=fmt)]
    if not counted.empty:
        t = best_rows(counted, ["impl", "dtype", "mode", "shape", "gflops", "gbps", "intensity", "pct_of_attainable"])
        lines += ["\ncompute kernels, best point per impl and precision:", t.rename(columns={
            "gflops": "best GFLOP/s", "gbps": "GB/s", "intensity": "FLOP/B", "pct_of_attainable": "% attainable"}
        ).to_string(index=False, float_format=fmt)]
    if not moved.empty:
        t = best_rows(moved, ["impl", "dtype", "mode", "shape", "gbps"])
        lines += ["\ncopies and links, best point per impl:",
                  t.rename(columns={"gbps": "best GB/s"}).to_string(index=False, float_format=lambda v: f"{v:,.4g}")]
    lines += gemv_summary(df, model)
    flags = text_column(df, "flag")
    up = is_above(flags)
    above, runner = int(up.sum()), int(((flags != "") & ~up).sum())
    if above or runner:
        lines.append(f"\nflagged: {plural(above, 'point')} above their attainable roof, "
                     f"{fmt_num(runner)} more measured while the machine was busy or whose time jumped; "
                     "every one is in report.md (Flagged points) and in measurements.csv, column flag.")
    counted = counter_lines(run)
    if counted:
        lines += [""] + counted
    lines += ["\nwarnings:"] + [f"  {w}" for w in run_warnings(run)]
    errors = df[df["status"] == "error"]
    if not errors.empty:
        lines += [f"\n{plural(len(errors), 'error')}:"]
        lines += [f"  {r.point_id}: {r.reason}" for r in errors.head(20).itertuples()]
        if len(errors) > 20:
            lines.append(f"  and {len(errors) - 20} more, in measurements.csv, column reason.")
    return "\n".join(lines)


def gemv_summary(df: pd.DataFrame, model: Roofline) -> list[str]:
    """Return the decode lines: measured batch-1 points as % of the memory roof (best impl
    per format and layer), and the batch of the sweep at which each format's intensity (a
    formula, so every planned row counts) crosses its ridge point. Reads the batch, n and k
    columns (a run written before they existed gets no decode lines)."""
    g = df[(df["family"] == "gemv") & df["batch"].notna() & df["n"].notna()].drop_duplicates("point_id")
    bw = model.bandwidth()
    if g.empty or bw is None:
        return []
    g = g.assign(layer_nk=[f"{int(n)}x{int(k)}" for n, k in zip(g["n"], g["k"])], batch=g["batch"].astype(int))
    b1 = g[(g["batch"] == 1) & (g["status"] == "ok")]
    lines = []
    if not b1.empty:
        best = with_ranges(b1.loc[b1.groupby(["dtype", "layer_nk"])["gbps"].idxmax()])  # % with its range
        t = best[["dtype", "layer_nk", "impl", "gbps", "pct_of_bw_roof", "pct_of_attainable"]].rename(
            columns={"layer_nk": "layer NxK", "gbps": "GB/s", "pct_of_bw_roof": f"% of {bw.name}",
                     "pct_of_attainable": "% of attainable"})
        lines += [f"\ndecode GEMV at batch 1 against the measured {bw.name} roof ({bw.value:,.1f} GB/s):",
                  t.to_string(index=False, float_format=lambda v: f"{v:,.1f}")]
    rows = []
    for (dtype, layer_nk), sub in g.groupby(["dtype", "layer_nk"]):
        ridge = model.ridge(sub["precision"].iloc[0] or None)
        if ridge is None:
            continue
        sub = sub.sort_values("batch")
        over = sub[sub["intensity"] >= ridge]
        rows.append({"format": dtype, "layer NxK": layer_nk, "ridge FLOP/B": f"{ridge:.3g}",
                     "crosses at batch": int(over["batch"].iloc[0]) if not over.empty else f"> {sub['batch'].max()}",
                     "intensity at batch 1": f"{sub['intensity'].iloc[0]:.3g}"})
    if rows:
        lines += ["\ndecode GEMV: where each format crosses its ridge point (intensity >= P / BW):",
                  pd.DataFrame(rows).to_string(index=False)]
    return lines
