"""The sustained phase (ARCHITECTURE.md, rule 14): after the sweeps, each roof's best
candidates run again, back to back, for a sustained window each, with the clock and power
sampled through it.

    info = run_phase(measurements, plan, device, window_s, quick, sink, say, parent)

Which rows are a roof's candidates is roofs.analysis.confirm's rule (candidate_rows, pick, targets:
the sweeps' burst roofs are derived first). Each candidate is re-run through the same runner as the sweeps
(inputs, the correctness gate, the one timer), with a timer whose window_s makes it sample
until its samples span the window, whatever their spread; its row is written with mode
"sustained", so it is in measurements.csv, samples.jsonl and run.json like any other.
Energy is measured over these windows only (bench/hw/telemetry.py); the idle power is read
over one sensor period before the first window, with nothing running.
"""
from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

from bench.hw import device as devmod
from bench.hw.detect import make_source
from bench.hw.telemetry import Sampler
from bench.measure import memory
from bench.measure.runner import Plan, Runner, Task, progress_line
from bench.measure.timing import TimerConfig
from bench.policy import DEFAULT
from bench.results import Measurement
from roofs.analysis.confirm import PER_ROOF, phase_candidates
from roofs.analysis.model import SUSTAINED_MODE

TRUST_MIN_SAMPLES = DEFAULT.min_samples

IDLE_MIN_S = 0.25      # the idle reading lasts the sensor's period, at least this long
LONG_CALL_S = 4.0      # budget beyond the window for TRUST_MIN_SAMPLES samples of a long call


def sustained_timer(window_s: float, base: TimerConfig | None = None) -> TimerConfig:
    """Return the timer of a sustained window: samples back to back until they span
    window_s (TimerConfig.window_s) and number at least TRUST_MIN_SAMPLES (so a call of
    half a second, a large CPU GEMM, still gives a window that can be judged steady), a
    short warm-up (the sweeps and the previous window left the device running), and a
    budget that only stops a window gone wrong (or a call too long for LONG_CALL_S)."""
    base = base or TimerConfig()
    return dataclasses.replace(base, window_s=window_s, warmup_s=min(0.05, window_s / 5), min_samples=TRUST_MIN_SAMPLES,
                               max_samples=10_000_000, budget_s=2 * window_s + 1.0 + LONG_CALL_S, rel_spread=0.0,
                               min_time_s=0.0)


def candidates(measurements: list[Measurement], device: devmod.DeviceInfo,
               per_roof: int = PER_ROOF) -> list[tuple[str, Measurement]]:
    """Return [(the roof it stands for, the sweep's measurement)] in run order: each roof's
    best per_roof candidates, each point once (roofs.analysis.confirm.phase_candidates)."""
    return phase_candidates(measurements, device.to_dict(), per_roof)

def idle_power(source, seconds: float) -> dict:
    """Return {idle_w, idle_window_s, idle_from}: the power drawn with nothing running, read
    over seconds (at least one sensor period) through the same sampler as the windows."""
    sampler = Sampler(source, energy=True).start()
    sampler.window("start")
    time.sleep(seconds)
    sampler.window("stop")
    tel = sampler.stop()
    w = (tel["energy_j"] / tel["window_s"] if tel.get("energy_j") is not None and tel["window_s"] > 0
         else tel.get("power_w"))
    source_of = tel.get("energy_from") or ("mean power" if w is not None else "nothing readable")
    return {"idle_w": w, "idle_window_s": tel["window_s"], "idle_from": source_of}


def run_phase(measurements: list[Measurement], plan: Plan, device: devmod.DeviceInfo, window_s: float,
              quick: bool, sink: Callable[[Measurement], None], say: Callable[[str], None] = print,
              parent: Runner | None = None, per_roof: int = PER_ROOF) -> dict:
    """Run the sustained windows of the sweeps' measurements (module docstring); pass each
    row to sink as it ends; return what run.json records of the phase."""
    info = {"window_s": window_s, "per_roof": per_roof, "candidates": 0}
    cands = candidates(measurements, device, per_roof)
    found = {(op.name, impl.id): (op, impl) for t in plan.tasks for op in (t.op,) for impl in t.impls}
    cands = [(label, m) for label, m in cands if (m.op, m.impl) in found]
    info["candidates"] = len(cands)
    if not cands:
        say("roofbench: sustained phase: no roof has a candidate to confirm")
        return info
    source = make_source(device)
    sampler = Sampler(source, energy=True)
    info.update(power_kind=source.power_kind, power_limit_w=source.power_limit_w(),
                sensor_period_s=source.energy_period_s, **idle_power(source, max(source.energy_period_s, IDLE_MIN_S)))
    say(f"roofbench: sustained phase: {len(cands)} candidates, {window_s:g} s each"
        + (f"; idle power {info['idle_w']:.1f} W" if info.get("idle_w") is not None else ""))
    base = parent.timer if parent is not None else TimerConfig()
    runner = Runner(device, sustained_timer(window_s, base), quick=quick, _sampler=sampler,
                    budget=parent.budget if parent is not None else None)  # the run's memory budget (rule 16)
    try:
        for k, (label, m) in enumerate(cands, 1):
            op, impl = found[(m.op, m.impl)]
            # candidates are not a sweep: an L1 point followed by a DRAM one is not a jump (rule 9)
            runner._last_rate.clear()
            row = runner.run_task(Task(op, dict(m.point), (impl,)), ("warm",))[0]
            detail = "; ".join(filter(None, [f"sustained window for the {label} roof", row.detail]))
            row = dataclasses.replace(row, mode=SUSTAINED_MODE, detail=detail)
            sink(row)
            say(f"[sustained {k}/{len(cands)}] {progress_line(row)}")
    finally:
        memory.release()  # the stream pools its candidates grew (rule 16)
        if parent is not None:
            parent.timed_s += runner.timed_s
            for phase, sec in runner.spent.items():
                parent.spent[phase] = parent.spent.get(phase, 0.0) + sec
    return info
