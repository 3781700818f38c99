"""Finishing a run folder from its files: derive the roofs, annotate every row with its
bound, draw the pictures and write the report. Used at the end of a run (in its own
folder, once), and by `run_bench.py report` and the API's add_to_run, which write a derived
folder beside the run (rederive) and never over what was measured."""
from __future__ import annotations

from pathlib import Path

from bench.results import (
    DERIVED,
    ResultsError,
    derived_name,
    load_counters,
    load_run,
    measured_home,
    rewrite_measurements,
    start_derived,
    write_roofs,
)
from roofs.analysis.bounds import annotate
from roofs.analysis.confirm import derive_roofs
from roofs.analysis.roofline import Roof
from roofs.charts.plot import clear_charts, plot_run
from roofs.reports.report import reference_roofs_for, write_report


def finish_run(run_dir, charts: bool = True) -> list[str]:
    """Derive roofs.json, rewrite measurements.csv with each row's bound, draw, report;
    return the problems met (each one sentence), [] when all went well. charts=False draws
    no picture (and removes those an earlier derivation drew there); the report says so."""
    run_dir = Path(run_dir)
    try:
        run = load_run(run_dir)
        samples = {str(p.get("point_id")): p.get("samples_s") or [] for p in (run.points or [])}
        roofs, notes = derive_roofs(run.measurements, run.device, samples, load_counters(run_dir))
        # a run that measures no stream or GEMM of its own (a model run) carries the roofs it
        # was placed under in run.json; its own derived roofs complete them
        base = [Roof.from_dict(r) for r in run.meta.get("base_roofs", [])]
        have = {(r.kind, r.name) for r in base}
        roofs = base + [r for r in roofs if (r.kind, r.name) not in have]
        if not (run.measurements["family"] == "stream").any():
            # the level notes explain what a stream sweep left without a roof; with no stream
            # points there is no such sweep (a model run has the roofs it was given); the
            # notes on precisions stay
            # the L1 probe needs no stream sweep
            kept = [n for n in notes if "no compute roof" in n or "(probe.l1)" in n]
            notes = kept if base or set(run.measurements["family"]) <= {"comm"} else [
                "no stream points in this run, so no bandwidth roof: the stream family measures them"] + kept
        annotated = annotate(run.measurements, roofs, run.device)
        write_roofs(run_dir, [r.to_dict() for r in roofs + reference_roofs_for(run.device, roofs, annotated)], notes)
        rewrite_measurements(run_dir, annotated)
        if charts:
            plot_run(run_dir)
        else:
            clear_charts(run_dir)
        write_report(run_dir, drawn=charts)
    except (ResultsError, ValueError, OSError) as e:
        return [str(e)]
    return []


def derived_dir(run_dir) -> Path:
    """Return where `report` re-derives run_dir by default: <run>/derived/<derived_name()>
    (a derived folder given for run_dir stands for the folder holding its samples: its
    source run, or itself once add_to_run gave it points of its own)."""
    return measured_home(run_dir) / DERIVED / derived_name()


def rederive(run_dir, out=None, in_place: bool = False, charts: bool = True) -> tuple[Path, list[str]]:
    """Re-derive run_dir's roofs, bounds, pictures and report by this code's method: into
    `out`, by default derived_dir(run_dir), beside the run's own files, which stay as the
    run wrote them; with in_place, over the run's own derived files (its measurements'
    roof columns, roofs.json, pictures, report), only when asked. Return the folder
    written and the problems met. charts: as finish_run's."""
    try:
        load_run(run_dir)  # refuses a folder whose files are cut or disagree, before anything is written
        target = Path(run_dir) if in_place else start_derived(run_dir, out or derived_dir(run_dir))
    except (ResultsError, OSError) as e:
        return Path(out or run_dir), [str(e) if isinstance(e, ResultsError) else
                                      f"cannot write the derived folder {out or derived_dir(run_dir)}: {e.strerror}."]
    return target, finish_run(target, charts)
