"""A simulated GPU run's opt-in extras: what a real run adds beside its sweeps, so that the
GPU-only branches of roofs/ run on a CPU. simulate() and write_run() without extras never
call this module, and the extras draw from a random stream of their own, so the sweep's rows
and samples are the same with or without them.

    extra_run(machine, noise, seed, sweep, scale, quick, window_s, counters, dram_ratio)
        -> Extras(rows: the Measurements the run writes, in run order; sustain: run.json's
           "sustain"; counters: run.json's "counters"; counter_rows: counters.csv's rows)

Each part as the real runner makes it:
    telemetry   every row carries the board's readings (Machine.board) as bench.hw.telemetry.
                summarize makes them from a sampler's readings: the SM clock, the memory clock,
                power, temperature; the sweeps' rows run at the boost clock and carry no energy
                (energy is measured over sustained windows only); a sustained window carries
                energy when it outlasts the sensor's period (NVML: 1 s), the runner's joules
                per call then being its energy over its window x its median time
    power       static_w + (the bytes each level serves x its pJ per byte + FLOPs x the
                dtype's pJ per FLOP) / the row's time per call, capped at the power limit
                (past which NVML reports sw_power_cap): each reading is that x (1 + N(0, 0.3%))
    transfers   the transfer family's quick plan (bench/ops/transfer.py) timed by the model's
                link (Machine.link), measured after the sweep as the registry orders it
    sustained   each roof's best sweep rows, as bench.run.sustain_phase.candidates picks them
                (roof_candidates; the quick plan's QUICK_PER_ROOF); each runs warm for
                window_s, its samples drawn under the run's noise from a time per call that is
                the burst one with the on-chip share slowed by the sustained clock (max clock /
                sustain clock, the clock dropping with the share of the call the SMs are busy)
                and the off-chip share by offchip_sustain; mode "sustained", stop "window"
    counters    where the board has counters (NVIDIA), the points bench.run.counters_phase.choose
                replays (counted_points), each once: its DRAM bytes are its formula's read and
                write bytes x dram_ratio x (1 + N(0, 0.5%)), its L2 bytes its formula's
                (l2_bytes, else its bytes), its L1 bytes its formula's l1_bytes where it has
                one; tensor-pipe instructions are not modelled (empty). Elsewhere counters.csv
                is not written and run.json's "counters" says why (bench.hw.counters.unavailable)
"""
from __future__ import annotations

import dataclasses
import math
import zlib
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from bench.hw import counters as hw
from bench.hw.telemetry import FROM_COUNTER, FROM_INSTANT, MIN_INSTANT_READINGS, PERIOD_S, THROTTLE_BITS, summarize
from bench.measure.timing import SUSTAIN_WINDOW_S
from bench.policy import DEFAULT
from bench.results import Measurement
from roofs.analysis.confirm import counted_choice, per_roof, phase_candidates
from roofs.analysis.model import SUSTAINED_MODE
from roofs.sim.generate import _measure, as_machine, device_info, device_record, offchip_share, plan
from roofs.sim.machines import Machine, call_seconds, served
from roofs.sim.noise import NOISES, Noise, draw

EXTRA_FAMILIES = ("transfer",)
# the runner's phases live in bench.run, a layer above roofs.sim: their choices are
# roofs.analysis.confirm's, shared; their constants and formula_of are restated here, each held to
# the runner's by tests/test_sim_extras.py
DEFAULT_POINTS = 6            # bench.run.counters_phase's: --counters without a number
IDLE_MIN_S = 0.25             # bench.run.sustain_phase's: the idle reading lasts at least this long
FORMULA_KEYS = ("point_id", "op", "impl", "dtype", "shape", "flops", "bytes", "read_bytes", "write_bytes", "l2_bytes",
                "l1_bytes")
TARGET_SAMPLE_S = 5e-4        # a sustained sample's reps span about this (bench.measure.timing's target)
MAX_WINDOW_SAMPLES = 2000     # a window of short calls keeps this many samples at most
POWER_JITTER, COUNTER_JITTER = 0.003, 0.005
SW_POWER_CAP = next(bit for bit, name in THROTTLE_BITS.items() if name == "sw_power_cap")
NO_OTHERS = {"others_cpu": 0.0, "steal_cpu": 0.0, "load1": 0.0}   # the model's host runs nothing else


@dataclass(frozen=True)
class Extras:
    rows: list                 # Measurements after the sweep's: transfers, then sustained windows
    telemetry: dict            # point_id -> the telemetry summary of each of the run's rows
    sustain: dict              # run.json's "sustain"
    counters: dict             # run.json's "counters"
    counter_rows: list         # counters.csv's rows (bench.results.COUNTER_COLUMNS)


def roof_candidates(measurements: list[Measurement], m: Machine, per_roof_n: int) -> list[tuple[str, Measurement]]:
    """Return [(the roofs it stands for, the sweep's row)]: the sustained phase's own choice
    (roofs.analysis.confirm.phase_candidates) on machine m's device record."""
    return phase_candidates(measurements, device_record(m), per_roof_n)


def counted_points(measurements: list[Measurement], m: Machine, most: int = DEFAULT_POINTS) -> list:
    """Return [(why it was chosen, the sweep's row)] the counters phase replays: its own choice
    (roofs.analysis.confirm.counted_choice) on machine m's device record."""
    return counted_choice(measurements, device_record(m), most)


def formula_of(x: Measurement, why: str) -> dict:
    """Return a counters.csv row's counted side: the point's identity and its formulas' FLOPs and
    bytes from its row (bench.run.counters_phase.formula_of)."""
    row = x.row()
    return {**{k: row.get(k) for k in FORMULA_KEYS}, "chosen_as": why}


def extras_rng(m: Machine, noise: Noise, seed: int, scale: float) -> np.random.Generator:
    """Return the extras' own random stream (the sweep's, roofs.sim.generate._rng, is left alone)."""
    return np.random.default_rng([int(seed), zlib.crc32(m.key.encode()), zlib.crc32(noise.name.encode()),
                                  int(round(scale * 1e6)), zlib.crc32(b"extras")])


def _board(m: Machine):
    if m.board is None or m.link is None:
        raise ValueError(f"{m.key} has no board and link model: the extras are a GPU model's (h200, mi300x).")
    return m.board


def busy_share(m: Machine, x: Measurement) -> float:
    """Return the share of a call the SMs are busy (its time not spent off chip): a stream
    row's on-chip share (roofs.sim.generate.offchip_share), all of a GEMM's, FMA chain's or
    probe's, none of a copy's or an empty launch's."""
    if x.family == "transfer" or x.op == "probe.launch":
        return 0.0
    if x.family != "stream":
        return 1.0
    t = call_seconds(m, x.op, x.family, x.impl, x.backend, x.point, x.working_set_bytes, x.bytes, x.flops, "warm")
    row = SimpleNamespace(family=x.family, op=x.op, impl=x.impl, ws=x.working_set_bytes, nbytes=x.bytes, seconds=t)
    return 1.0 - offchip_share(m, row)


def power_w(m: Machine, x: Measurement, seconds: float) -> float:
    """Return the board's power while row x runs at `seconds` per call (module docstring), uncapped."""
    b = _board(m)
    if x.family == "transfer":
        joules = x.bytes * b.e_byte_pj["link"] * 1e-12
    elif x.op == "probe.launch":
        joules = 0.0
    else:
        if x.op == "probe.l1":
            parts = [(next(lv for lv in m.levels if lv.probe_only), 1.0)]
        else:
            parts = served(m, math.inf if x.mode == "cold" else x.working_set_bytes)
        joules = sum(x.bytes * share * b.e_byte_pj[lv.name] for lv, share in parts) * 1e-12
        joules += x.flops * b.e_flop_pj.get(x.dtype, 0.0) * 1e-12
    return b.static_w + joules / seconds


def telemetry(m: Machine, x: Measurement, clock_mhz: float, rng, energy: bool) -> dict:
    """Return the telemetry summary of row x as the runner's Sampler writes it (module docstring):
    readings every PERIOD_S over its timed window, summarized by bench.hw.telemetry.summarize."""
    b = _board(m)
    window = float(sum(x.samples_s)) * max(1, x.reps)
    n = max(1, min(int(window / PERIOD_S), 1000))
    true_w = power_w(m, x, x.median_s)
    capped = min(true_w, b.power_limit_w)
    reasons = SW_POWER_CAP if true_w > b.power_limit_w else 0
    watts = capped * (1 + rng.normal(0.0, POWER_JITTER, n))
    readings = [{"clock_mhz": clock_mhz, "mem_clock_mhz": b.mem_clock_mhz, "power_w": float(w),
                 "temp_c": b.temp_c - 4 * (1 - k / n), "reasons": reasons} for k, w in enumerate(watts)]
    e0, e1 = (0.0, capped * window) if b.power_kind != "instant" or n < MIN_INSTANT_READINGS else (None, None)
    out = summarize(readings, window, e0, e1, b.telemetry, "", b.power_kind, b.sensor_period_s)
    if not energy:
        out.update(energy_j=None, energy_from="", energy_note="energy is measured over sustained windows only")
    if out.get("energy_j") is not None and out["window_s"] > 0:
        out["joules_per_call"] = out["energy_j"] / out["window_s"] * x.median_s
    return {**out, **NO_OTHERS}


def transfers(m: Machine, noise: Noise, rng, scale: float, quick: bool) -> list[Measurement]:
    """Return the transfer family's rows, measured under noise (module docstring)."""
    rows = list(plan(m.key, quick, EXTRA_FAMILIES))
    return _measure(m, rows, noise, rng, scale, [1] * len(rows), m.cores) if rows else []


def sustained_clock(m: Machine, busy: float) -> float:
    """Return the SM clock of a window whose SMs are busy this share of each call."""
    b = _board(m)
    return m.clock_mhz - (m.clock_mhz - b.sustain_clock_mhz) * busy


def sustained_seconds(m: Machine, x: Measurement, scale: float) -> float:
    """Return row x's true time per call over a sustained window: its warm burst time, the on-chip
    share at the sustained clock and the off-chip share at offchip_sustain of its rate."""
    t = call_seconds(m, x.op, x.family, x.impl, x.backend, x.point, x.working_set_bytes, x.bytes, x.flops,
                     "warm") / scale
    busy = busy_share(m, x)
    return t * (busy * m.clock_mhz / sustained_clock(m, busy) + (1 - busy) / _board(m).offchip_sustain)


def windows(m: Machine, noise: Noise, rng, scale: float, sweep: list[Measurement], window_s: float,
            quick: bool) -> tuple[list[Measurement], dict]:
    """Return (the sustained windows' rows, run.json's "sustain"), as bench.run.sustain_phase
    runs them: each roof's best candidates, each point once, warm, for window_s."""
    b = _board(m)
    chosen = roof_candidates(sweep, m, per_roof(quick))
    info = {"window_s": window_s, "per_roof": per_roof(quick), "candidates": len(chosen),
            "power_kind": b.power_kind, "power_limit_w": b.power_limit_w, "sensor_period_s": b.sensor_period_s,
            "idle_w": b.idle_w, "idle_window_s": max(b.sensor_period_s, IDLE_MIN_S),
            "idle_from": FROM_INSTANT if b.power_kind == "instant" else FROM_COUNTER}
    if not chosen:
        return [], info
    seconds = np.array([sustained_seconds(m, x, scale) for _, x in chosen])
    # a sample's reps span TARGET_SAMPLE_S, more where the window would need over MAX_WINDOW_SAMPLES;
    # the samples span the window (the window timer's rule), and number at least the policy's minimum
    reps = np.maximum(np.maximum(1, np.round(TARGET_SAMPLE_S / seconds)),
                      np.ceil(window_s / (seconds * MAX_WINDOW_SAMPLES))).astype(int)
    counts = np.maximum(np.ceil(window_s / (seconds * reps)), DEFAULT.min_samples).astype(int)
    samples, _ = draw(noise, rng, seconds, counts, [1] * len(chosen), m.cores)
    out = []
    for (label, x), s, r in zip(chosen, samples, reps):
        row = dataclasses.replace(x, mode=SUSTAINED_MODE, samples_s=tuple(float(v) for v in s), reps=int(r),
                                  stop="window", flag="", telemetry={}, pass_no=1,
                                  detail=f"sustained window for the {label} roof")
        out.append(row)
    return out, info


def counter_rows(m: Machine, sweep: list[Measurement], rng, most: int, dram_ratio: float) -> tuple[list, dict]:
    """Return (counters.csv's rows, run.json's "counters") of the chosen points (module docstring)."""
    dev = device_info(m)
    info = {"requested": most, "tool": None, "points": 0, "flagged": 0, "why": ""}
    if not _board(m).counters:
        info["why"] = hw.unavailable(dev) or f"{m.name}'s counters are not readable"
        return [], info
    info["tool"] = "ncu (simulated)"
    rows = []
    for label, x in counted_points(sweep, m, most):
        formula = formula_of(x, label)
        read = formula.get("read_bytes")
        read, write = (x.bytes, 0) if read is None or read != read else (read, formula.get("write_bytes") or 0)
        noise = 1 + rng.normal(0.0, COUNTER_JITTER, 2)
        kernel = {"kernel": f"{x.impl.split('/')[-1]}_{x.op.replace('.', '_')}_kernel",
                  "dram__bytes_read.sum": float(read) * dram_ratio * noise[0],
                  "dram__bytes_write.sum": float(write) * dram_ratio * noise[1],
                  "lts__t_bytes.sum": float(formula.get("l2_bytes") or x.bytes)}
        if formula.get("l1_bytes"):
            kernel["l1tex__t_bytes.sum"] = float(formula["l1_bytes"])
        row = hw.counter_row(formula, hw.sum_kernels([kernel]), [kernel])
        row.update(tool="ncu", replay_detail="")
        rows.append(row)
    info.update(points=len(rows), flagged=sum(bool(r["flag"]) for r in rows), seconds=0.0)
    return rows, info


def extra_run(machine, noise, seed: int, sweep: list[Measurement], scale: float = 1.0, quick: bool = True,
              window_s: float = SUSTAIN_WINDOW_S, counters: int = DEFAULT_POINTS,
              dram_ratio: float = 1.0) -> Extras:
    """Return the extras of one simulated GPU run whose sweep is `sweep` (simulated()'s rows):
    transfers, sustained windows of window_s, telemetry for every row, and `counters` points'
    counters (0: no counters phase) whose DRAM bytes are dram_ratio x the formula's."""
    m, nz = as_machine(machine), (noise if isinstance(noise, Noise) else NOISES[noise])
    _board(m)
    rng = extras_rng(m, nz, seed, scale)
    copies = transfers(m, nz, rng, scale, quick)
    measured = list(sweep) + copies
    sus, sustain = windows(m, nz, rng, scale, measured, window_s, quick)
    tel = {x.point_id: telemetry(m, x, m.clock_mhz, rng, energy=False) for x in measured}
    for x in sus:
        tel[x.point_id] = telemetry(m, x, sustained_clock(m, busy_share(m, x)), rng, energy=True)
    rows, cinfo = counter_rows(m, measured, rng, counters, dram_ratio) if counters else ([], {})
    return Extras(rows=copies + sus, telemetry=tel, sustain=sustain, counters=cinfo, counter_rows=rows)


def with_telemetry(rows: list[Measurement], extras: Extras) -> list[Measurement]:
    """Return rows, each with its telemetry from extras (a row it has none for unchanged)."""
    return [dataclasses.replace(x, telemetry=extras.telemetry[x.point_id]) if x.point_id in extras.telemetry else x
            for x in rows]
