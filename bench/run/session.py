"""Running a plan into a run folder: what the CLI, the model command and each rank of a
multi-device run (bench/run/distributed.py) share.

    meta = run_meta(device, options, kind, timer)        what run.json records up front
    status, rows = execute(run_dir, meta, device, plan, timer)
                      rows written as they finish; Ctrl-C stops the run and keeps them
    measure_into(run_dir, args, device, plan)             execute, then finish the folder
                      (roofs, pictures, report: roofs/reports/finish.py) and print its summary

Exit codes: 0 complete, 130 interrupted (Ctrl-C), 1 failed (a device whose context died).
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from bench.aot import learned, precompile, predict
from bench.hw import device as devmod
from bench.measure import memory
from bench.measure.registry import load_all
from bench.measure.revisit import revisit_passes
from bench.measure.runner import Plan, Runner, counted_rows, make_plan
from bench.measure.timing import TimerConfig, default_window, timer_config
from bench.results import UNITS, RunWriter, load_run
from bench.run import counters_phase
from bench.run.sustain_phase import run_phase
from bench.util import DeviceLost, first_line
from roofs.analysis.confirm import per_roof
from roofs.reports.finish import finish_run
from roofs.reports.summary import summary

RUN_KINDS = ("device", "comm", "model")  # which charts and report sections a run gets


def options_record(args) -> dict:
    """Return a command's options as run.json records them (paths as text)."""
    return {k: (str(v) if isinstance(v, Path) else v.text if isinstance(v, memory.Limit) else v)
            for k, v in vars(args).items()}


def run_meta(device: devmod.DeviceInfo, options: dict, kind: str = "device", timer: TimerConfig | None = None,
             **extra) -> dict:
    """Return what run.json records before the first point: the device (with its identity:
    host, id, PCI bus id), software, the full command line and options, the measuring
    process's pid, the kind of run (RUN_KINDS), the timer, the units and extra. A CPU's clock is
    measured here, on every core, for the peaks its roofs are validated against (a link run
    has none): bench.hw.device.with_measured_clock.
    (RunWriter adds the schema and method versions, the roofbench commit and the times.)"""
    if kind not in RUN_KINDS:
        raise ValueError(f"unknown run kind '{kind}': use {', '.join(RUN_KINDS)}.")
    if kind != "comm":
        device = devmod.with_measured_clock(device)
    meta = {"device": device.to_dict(), "software": device.software, "command": devmod.command_line(),
            "pid": os.getpid(), "options": options, "run_kind": kind, "units": UNITS}
    if timer is not None:
        meta["timer"] = dataclasses.asdict(timer)
    return {**meta, **extra}


def _say(line: str) -> None:
    print(line, flush=True)


def estimates(plan: Plan, device: devmod.DeviceInfo, timer: TimerConfig, quick: bool,
              budget: memory.Budget | None = None) -> tuple[list[float] | None, list[str], dict]:
    """Return the dry run's predicted seconds per row of plan (bench/aot/predict.py), each
    scaled by what earlier runs on this machine taught (bench/aot/learned.py), or None when
    it cannot predict this device (a prediction never stops a measurement); each row's
    family (the time left scales each family by its own pace); and the model's own seconds
    per family, which the run's measured ones are learned against."""
    try:
        rows = predict.row_seconds(plan, device, timer, quick, budget)[0]
    except Exception:  # noqa: BLE001
        return None, [], {}
    factors = learned.expected(device, quick)
    raw: dict = {}
    for fam, sec in rows:
        raw[fam] = raw.get(fam, 0.0) + sec
    return [sec * factors.get(fam, 1.0) for fam, sec in rows], [fam for fam, _ in rows], raw


def execute(run_dir: Path, meta: dict, device: devmod.DeviceInfo, plan: Plan, timer: TimerConfig,
            quick: bool = False, say: Callable[[str], None] = _say, sustain_s: float = 0.0,
            budget: memory.Budget | None = None, counters: int = 0) -> tuple[str, list]:
    """Run plan on device into a new run folder, each row written as it finishes; Ctrl-C
    stops it and keeps them. The progress lines carry the time left (the dry run's
    prediction, corrected as the run goes), and run.json records the prediction, the wall
    time spent measuring and how much of it was timed samples. sustain_s > 0: after the
    sweeps, each roof's best candidates run a sustained window of that many seconds
    (bench/run/sustain_phase.py), recorded in run.json's "sustain". On a GPU the plan's Triton kernels
    are compiled first (bench/aot/precompile.py), recorded in run.json's "precompile" with how
    many launches then loaded them. counters > 0: once the timing is over, that many chosen
    points are replayed under a counter profiler (bench/run/counters_phase.py) into
    counters.csv, recorded in run.json's "counters". Return (status, measurements)."""
    pre = precompile.before_run(device, plan, quick, say)  # rule 15; None off a GPU
    budget = budget or memory.run_budget(device)
    rows, families, raw = estimates(plan, device, timer, quick, budget)
    if sustain_s > 0:
        raw["sustained"] = predict.sustain_seconds(plan, device, quick, sustain_s)[0]
    factors = learned.expected(device, quick)
    sustained_s = raw.get("sustained", 0.0) * factors.get("sustained", 1.0)
    predicted = sum(rows) + sustained_s if rows else None
    meta = dict(meta, predicted_s=predicted, predicted_raw_s=raw, learned_factors=factors,
                memory_budget_bytes=budget.limit,
                **({"precompile": pre} if pre else {}))
    writer = RunWriter(run_dir, meta)
    runs = counted_rows(plan, device, quick)[0]
    say(f"roofbench: {runs} points to run on {device.torch_device} ({device.name})"
        + (f" ({len(plan) - runs} more known to be skipped)" if runs < len(plan) else "") + f" -> {run_dir}"
        + (f"; predicted {predicted / 60:.1f} min" if predicted else "") + f"; memory budget {budget.describe()}")
    runner = Runner(device, timer, quick=quick, sink=writer.add, progress=say, budget=budget,
                    revisits=revisit_passes(device, quick))
    status, sustained = "complete", {"window_s": 0.0}
    t0 = time.perf_counter()
    term = terminate_as_interrupt()
    jit = precompile.JitCounter()
    phases = {}  # wall seconds of the sweeps and of the sustained phase
    try:
        with jit:
            # the time left on each line counts the sustained phase and the finishing after the rows
            runner.run(plan, rows, sustained_s + factors.get("finish_s", predict.DEFAULT_FINISH_S), families)
            phases["sweeps"] = time.perf_counter() - t0
            if sustain_s > 0:  # the sustained phase (ARCHITECTURE.md, rule 14)
                sustained = run_phase(list(writer.measurements), plan, device, sustain_s, quick, writer.add, say,
                                      runner, per_roof(quick))
                phases["sustained"] = time.perf_counter() - t0 - phases["sweeps"]
        if counters:  # after every timed sample: the replays run in processes of their own
            t_counters = time.perf_counter()
            try:
                writer.meta["counters"] = counters_phase.run_phase(list(writer.measurements), device, counters,
                                                                   quick, run_dir, say)
            except Exception as e:  # noqa: BLE001 -- counters check the formulas; they never cost the measurements
                writer.meta["counters"] = {"requested": counters, "why": f"the counters phase failed: {first_line(e)}"}
                say(f"roofbench: counters: {writer.meta['counters']['why']}; the measurements are kept.")
            phases["counters"] = time.perf_counter() - t_counters
    except KeyboardInterrupt:
        status = "interrupted"
        say(f"\nroofbench: interrupted; the {len(writer.measurements)} points measured so far are kept in {run_dir}.")
    except DeviceLost as e:
        status = f"failed: {e}"
        print(f"\nroofbench: the device failed ({e}); its context is unusable, so the run stops here. "
              f"The {len(writer.measurements)} points measured before it are kept in {run_dir}.", file=sys.stderr)
    except BaseException as e:  # anything else: the folder says failed (never complete), and the error goes on
        status = f"failed: {first_line(e)}"
        raise
    finally:
        if term is not None:
            signal.signal(signal.SIGTERM, term)
        wall = time.perf_counter() - t0 - phases.get("counters", 0.0)  # measuring only: counters are not measuring
        if pre is not None and jit.available:  # did the run's launches load what was precompiled?
            writer.meta["precompile"] = dict(pre, jit=jit.record())
        writer.finish(status, timed_s=runner.timed_s, measure_wall_s=wall, time_spent=time_spent(runner, wall),
                      sustain=sustained, time_by_family=time_by_family(runner, phases),
                      memory=budget.record())  # the predicted peak beside the measured one (rule 16)
    say(spent_line(writer.meta["time_spent"]))
    return status, writer.measurements


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def terminate_as_interrupt():
    """Make SIGTERM (a timeout, a scheduler ending a job) stop the measuring as Ctrl-C does, so
    the points measured so far are kept and derived; return the handler it replaced (None off
    the main thread, where Python cannot set one)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, _interrupt)


def time_spent(runner: Runner, wall: float) -> dict:
    """Return where the measuring wall time went, in seconds: timed samples; the timer's
    other work (warm-up, cold flushes, per-call estimates, synchronizes); the correctness
    gate (launch, tuning, the checked call, the comparison); inputs and references; and
    the rest (skipped rows, telemetry, writing rows, freeing memory)."""
    timed, spent = runner.timed_s, runner.spent
    out = {"timed": timed, "timer_other": spent.get("timer", 0.0) - timed, "gate": spent.get("gate", 0.0),
           "inputs": spent.get("inputs", 0.0)}
    out["other"] = wall - sum(out.values())
    return {k: round(v, 3) for k, v in out.items()}


def time_by_family(runner: Runner, phases: dict) -> dict:
    """Return each family's wall seconds in the sweeps with its split (timed samples, the
    timer's other work, gate, inputs), and the sustained phase's wall seconds: what the next
    dry run on this machine learns its per-family rates from (bench/aot/learned.py)."""
    out = {}
    for fam, wall in runner.family_s.items():
        spent = runner.family_spent.get(fam, {})
        out[fam] = {"wall": round(wall, 3), "timed": round(spent.get("timed", 0.0), 3),
                    "timer_other": round(spent.get("timer", 0.0) - spent.get("timed", 0.0), 3),
                    "gate": round(spent.get("gate", 0.0), 3), "inputs": round(spent.get("inputs", 0.0), 3)}
    if "sustained" in phases:
        out["sustained"] = {"wall": round(phases["sustained"], 3)}
    return out


SPENT_NAMES = {"timed": "timed samples", "timer_other": "warm-up and flushes", "gate": "correctness checks",
               "inputs": "inputs and references", "other": "other"}


def spent_line(spent: dict) -> str:
    """Return the summary line of where the measuring time went."""
    wall = sum(spent.values())
    parts = ", ".join(f"{SPENT_NAMES[k]} {v:.0f} s" for k, v in spent.items() if k != "timed")
    return (f"roofbench: {wall:.0f} s measuring, {spent['timed']:.0f} s of it ({spent['timed'] / max(wall, 1e-9):.0%}) "
            f"in timed samples; {parts}")


def exit_code(status: str) -> int:
    return 130 if status == "interrupted" else (1 if status.startswith("failed") else 0)


def mark_failed(run_dir: Path, why: str) -> None:
    """Record in run_dir's run.json that the command failed after measuring (status
    "failed: <why>"), so no folder whose command died says "complete"."""
    path = Path(run_dir) / "run.json"
    try:
        meta = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    meta["status"] = f"failed: {why}"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(meta, indent=1))
    tmp.replace(path)


@contextlib.contextmanager
def failing(run_dir: Path):
    """Mark run_dir failed (mark_failed) when the block raises, then let the error go on."""
    try:
        yield
    except BaseException as e:
        mark_failed(run_dir, "interrupted while finishing" if isinstance(e, KeyboardInterrupt) else first_line(e))
        raise


def learn_from(meta: dict, device: devmod.DeviceInfo, quick: bool, finish_s: float) -> None:
    """Write what a finished run measured, per family and for the sustained phase, against
    the model's seconds for the same rows into this machine's cache (bench/aot/learned.py)."""
    measured = {fam: v.get("wall") for fam, v in (meta.get("time_by_family") or {}).items()}
    learned.learn(device, quick, meta.get("predicted_raw_s") or {}, measured, finish_s)


def finish(run_dir: Path, charts: bool = True) -> list[str]:
    """Derive, annotate, draw (unless charts is False: --no-charts) and report the run folder
    (roofs/reports/finish.py); print and return the problems met."""
    problems = finish_run(run_dir, charts)
    for p in problems:
        print(f"roofbench: {p}", file=sys.stderr)
    return problems


def measure_into(run_dir: Path, args, device: devmod.DeviceInfo, plan: Plan | None = None) -> int:
    """Run plan (by default the one args select: only, dtype, mode, max_ws, quick) on device
    into run_dir, finish the folder and print its summary; return the exit code."""
    if plan is None:
        plan = make_plan(load_all(), device, args.only, args.quick, args.dtype, args.mode, args.max_ws)
    timer = timer_config(args.quick, args.budget, args.min_time)
    sustain = getattr(args, "sustain", None)
    if sustain is None:
        sustain = default_window(args.quick)
    status, _ = execute(run_dir, run_meta(device, options_record(args), "device", timer), device, plan, timer,
                        args.quick, sustain_s=sustain,
                        budget=memory.run_budget(device, getattr(args, "max_memory", None)),
                        counters=getattr(args, "counters", None) or 0)
    t0 = time.perf_counter()
    with failing(run_dir):
        charts = not getattr(args, "no_charts", False)
        problems = finish(run_dir, charts)
        finish_s = time.perf_counter() - t0
        print(f"roofbench: roofs, {'charts ' if charts else ''}and report in {finish_s:.0f} s")
        run = load_run(run_dir)
        print(summary(run))
    if status == "complete" and not problems:  # what the next prediction on this machine starts from
        learn_from(run.meta, device, args.quick, finish_s)
    print(f"\nresults: {run_dir}")
    if problems:
        mark_failed(run_dir, f"finishing the folder: {problems[0]}")
        return 1
    return exit_code(status)
