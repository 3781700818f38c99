"""One screen about a finished run, from its files: each measured roof with its interval
(ARCHITECTURE.md, rule 17) and its % of the datasheet (or computed) roof, each family's best
point, what failed, the counters' DRAM ratios of a --counters run, and how long the run took
against the dry run's prediction when run.json carries one.

    python -m roofs.reports.brief RUN_DIR
"""
from __future__ import annotations

import sys
from datetime import datetime

import pandas as pd

from bench.results import DERIVED, ResultsError, load_run, source_of, text_column
from bench.util import fmt_num, number, plural
from roofs.analysis.checks import split_notes, unbounded
from roofs.analysis.roofline import band_text
from roofs.reports.bands import as_interval
from roofs.reports.report import counter_lines, point_rate, validation


def _duration_s(meta: dict) -> float | None:
    try:
        return (datetime.fromisoformat(meta["end_utc"]) - datetime.fromisoformat(meta["start_utc"])).total_seconds()
    except (KeyError, TypeError, ValueError):
        return None


def brief(run_dir) -> str:
    """Return the one-screen summary of the run folder run_dir."""
    run = load_run(run_dir)
    df, meta = run.measurements, run.meta
    lines = [f"{run.device.get('name')} ({run.device.get('torch_device')}), status {meta.get('status')}"]
    took, predicted = _duration_s(meta), meta.get("predicted_s")
    if took is not None:
        lines.append(f"took {took:.0f} s" + (f"; the dry run predicted {predicted:.0f} s" if predicted else ""))
    by = meta.get("derived_by")
    if by:  # a derived folder: which run, and which method and commit made what follows
        lines.append(f"re-derived from {source_of(run.dir)} by method {by.get('method_version')}, "
                     f"commit {by.get('commit')}")
    derived = (sorted(p.name for p in (run.dir / DERIVED).iterdir() if p.is_dir())
               if (run.dir / DERIVED).is_dir() else [])
    if not by:
        own = run.roofs_by or {}
        lines.append(f"its roofs derived by method {own.get('method_version', '?')}, commit {own.get('commit')}"
                     if own else f"measured by method {meta.get('method_version', 1)}; "
                     "its roofs.json predates derived_by "
                     "and does not say which method derived it")
    if derived:
        lines.append(f"re-derivations beside it (give one to read it): {', '.join(DERIVED + '/' + d for d in derived)}")
    lines = [line for line in lines if line]
    counts = df["status"].value_counts().to_dict()
    lines.append(f"{plural(len(df), 'row')}: " + ", ".join(f"{fmt_num(v)} {k}" for k, v in counts.items()))
    table, origin = validation(run)
    lines.append(f"\nroofs (reference: {origin}):")
    for r in table.to_dict("records"):
        pct = r.get("% of reference")
        figure = band_text(r["measured"], as_interval(r.get("interval")), r["unit"])  # with its interval (rule 17)
        lines.append(f"  {r['ceiling']:<9} {figure:>20}"
                     + (f" {pct:5.0f}% of {fmt_num(r['reference'])}" if pct == pct and pct is not None else "")
                     + (f" (implies {r['clock implied MHz']:,.0f} MHz)" if number(r.get("clock implied MHz")) else "")
                     + f"  by {r['measured by']}")
    missing, about = split_notes(run)
    lines += [f"  no roof: {n}" for n in missing] + [f"  note: {n}" for n in about]
    ok = df[df["status"] == "ok"].copy()
    if not ok.empty:
        ok["rate"] = point_rate(ok)
        lines.append("\nbest point per family and impl:")
        for (_fam, impl), g in ok.groupby(["family", "impl"]):
            b = g.loc[g["rate"].idxmax()]
            unit = "GFLOP/s" if b["flops"] > 0 else "GB/s"
            pct = b.get("pct_of_attainable")
            note = str(b.get("bound_note") or "") if pd.notna(b.get("bound_note")) else ""
            lines.append(f"  {impl:<32} {b['dtype']:<9} {b['shape']:<22} {fmt_num(b['rate']):>12} {unit}"
                         + (f" ({pct:.0f}% of attainable, {b.get('boundary') or 'no'} bound)" if pd.notna(pct) else
                            f" (no bound: {note.split(':')[0]} has no roof)" if note else ""))
    errors = df[df["status"] == "error"]
    if not errors.empty:
        lines.append(f"\n{len(errors)} errors; first ones:")
        lines += [f"  {r.point_id}: {r.reason}" for r in errors.head(8).itertuples()]
    flagged = df[text_column(df, "flag") != ""]
    lines.append(f"\n{fmt_num(len(flagged))} of {plural(len(ok), 'ok point')} flagged "
                 "(above their bound, or measured while busy)")
    missing = unbounded(df)
    if missing:
        lines.append(f"{plural(sum(missing.values()), 'ok point')} have no bound: "
                     + ", ".join(f"{fmt_num(n)} because the {level} roof is missing" for level, n in missing.items()))
    counted = counter_lines(run)
    if counted:
        lines += [""] + counted
    return "\n".join(lines)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m roofs.reports.brief RUN_DIR", file=sys.stderr)
        return 2
    try:
        print(brief(argv[0]))
    except ResultsError as e:
        print(f"roofbench: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
