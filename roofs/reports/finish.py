"""Finishing a run folder from its files: derive the roofs, annotate every row with its
bound, draw the pictures and write the report. Used at the end of a run, by
`run_bench.py report`, and when points are added to a run through the API."""
from __future__ import annotations

from pathlib import Path

from bench.results import ResultsError, load_run, rewrite_measurements, write_roofs
from roofs.analysis.bounds import annotate
from roofs.analysis.derive import derive
from roofs.analysis.roofline import Roof
from roofs.analysis.sustained import merge_sustained
from roofs.charts.plot import plot_run
from roofs.reports.report import reference_roofs_for, write_report


def finish_run(run_dir) -> list[str]:
    """Derive roofs.json, rewrite measurements.csv with each row's bound, draw, report;
    return the problems met (each one sentence), [] when all went well."""
    run_dir = Path(run_dir)
    try:
        run = load_run(run_dir)
        roofs, notes = derive(run.measurements, run.device)
        roofs, notes = merge_sustained(roofs, notes, run.measurements, run.device)  # burst and sustained (rule 14)
        # a run that measures no stream or GEMM of its own (a model run) carries the roofs it
        # was placed under in run.json; its own derived roofs complete them
        base = [Roof.from_dict(r) for r in run.meta.get("base_roofs", [])]
        have = {(r.kind, r.name) for r in base}
        roofs = base + [r for r in roofs if (r.kind, r.name) not in have]
        if not (run.measurements["family"] == "stream").any():
            # the level notes explain what a stream sweep left without a roof; with no stream
            # points there is no such sweep (a model run has the roofs it was given); the
            # notes on precisions stay
            kept = [n for n in notes if "no compute roof" in n or "(probe.l1)" in n]  # the L1 probe needs no stream sweep
            notes = kept if base or set(run.measurements["family"]) <= {"comm"} else [
                "no stream points in this run, so no bandwidth roof: the stream family measures them"] + kept
        annotated = annotate(run.measurements, roofs, run.device)
        write_roofs(run_dir, [r.to_dict() for r in roofs + reference_roofs_for(run.device, roofs, annotated)], notes)
        rewrite_measurements(run_dir, annotated)
        plot_run(run_dir)
        write_report(run_dir)
    except (ResultsError, ValueError, OSError) as e:
        return [str(e)]
    return []
