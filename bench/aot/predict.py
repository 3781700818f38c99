"""Predict how long a run takes, before running it (`run_bench.py --dry-run`).

For every planned (point, impl, mode) the model takes the time of one call from the
device's reference roofs, t = max(FLOPs / (P x EFFICIENCY), bytes / (BW x EFFICIENCY)),
with P the precision's peak and BW the bandwidth of the level the point's bytes cross
(the off-chip memory for cold points and working sets of 4x the last-level cache and up;
an L2-resident warm point reads at L2_FACTOR x the off-chip bandwidth), and adds what the
timer and the runner do around it:

    point = setup + gate + min(budget, warm-up + estimate + capture + samples)
    samples = max(SAMPLES x max(target sample, t), the minimum span)
              (warm; plus a flush per sample when cold)
    setup = making the inputs and the float64 reference (bytes over the rates below)

plus the sustained phase after the sweeps (ARCHITECTURE.md rule 14: each roof's best
PER_ROOF candidates, a window each; sustain_seconds), and the compiles and the tuning
(ARCHITECTURE.md, rule 15). On a GPU every Triton variant
is compiled before the first point in a pool of one process per host core
(bench/aot/precompile.py), so compiling costs the pool's wall time,

    precompile = POOL_START_S + max(longest compile, sum of compiles / workers)

(each compile COMPILE_S, measured with `python -m bench.aot` on a 2-core CPU for sm_90; the
jobs are the AOT plan's, every candidate and integer specialization, where the arch has one;
the workers are the host's cores, HOST_CORES for a datasheet part), and each variant's first
launch then loads it from the cache (LOAD_S). Tuning is once per shape class: the point's
sizes rounded to octaves, its dtype, flags and mode (the launchers' keys, rounded the same
way in bench/ops/_tune.py), each class timing its candidates once (tune_seconds: the same
timer model as a point's, under the tuning timer's settings). Points the
plan's own rules skip (a CPU running Triton, a precision the compute capability lacks, an
impl's own rule such as numpy on a GPU) cost SKIP_S; on a datasheet part, a rule that must
probe the device (does torch's fp8 GEMM work here?) cannot be decided and the row is charged.
The model knows nothing of a busy machine or of a slow library path: it is a floor with
margins, for planning a lease.

A device spec (`--device-spec h200`) plans on a datasheet part with no such device present:
its name, SM count, memory, L2 and compute capability come from roofs/analysis/specs.json.
"""
from __future__ import annotations

import dataclasses
import math
import os
import re
from collections import defaultdict
from dataclasses import dataclass, field

from bench.aot import precompile
from bench.aot.targets import ARCHS
from bench.hw.device import CacheLevel, DeviceInfo
from bench.measure import skip
from bench.measure.timing import default_window
from bench.ops._tune import FULL_CANDIDATES, QUICK_CANDIDATES, TUNE_TIMER, shape_class
from bench.util import Refusal
from roofs.analysis import specs
from roofs.analysis.confirm import per_roof

EFFICIENCY = 0.8          # share of a datasheet roof a good kernel reaches
L2_FACTOR = 2.5           # L2 bandwidth / off-chip bandwidth, where no L2 figure is known
SAMPLES = 6               # samples a steady point takes to converge (5 needed)
SKIP_S = 0.002            # a row skipped by a rule
POINT_OVERHEAD_S = {"cuda": 0.03, "cpu": 0.01}   # Python, telemetry thread, progress line, syncs
GEN_BPS = {"cuda": 100e9, "cpu": 0.6e9}          # random inputs made per second
REF_BPS = {"cuda": 50e9, "cpu": 2e9}             # float64 reference and comparison, bytes per second
FP64_EFF = 0.5                                    # share of the fp64 peak a float64 reference matmul reaches
CPU_BW_GUESS = {"dram": 40e9, "cache": 150e9}     # a CPU has no datasheet bandwidth: guesses
# Seconds to compile one variant of a kernel for sm_90: the wall time per compile that
# `python -m bench.aot --arch sm_90 --quick` measured on the 2-core CI-class VM (triton 3.9,
# 2026-11-30: GEMM tiles 1.4 s on average, 1.9 s at most; GEMV 0.5; attention 0.7-1.0;
# stream 0.15), plus about 0.2 s of the JIT's own work (specializing, loading the module)
COMPILE_S = {"gemm": 1.6, "gemm.fp32": 1.6, "gemv": 0.8, "attention": 1.1, "stream": 0.35}
TUNE_OVERHEAD_S = 0.002  # one tuning candidate's Python: its callable, the first call's launch, a sync
HOST_CORES = 16           # compile workers for a datasheet part: the lent H200 host's cores
POOL_START_S = 8.0        # the compile pool's start: each spawned worker imports torch and triton
LOAD_S = 0.05             # a launch that loads a precompiled kernel from the cache (key, read, load)
SUSTAIN_OVERHEAD_S = 0.3  # a sustained candidate's inputs, gate and warm-up around its window
SUSTAIN_IDLE_S = {"cuda": 1.0, "cpu": 0.25}   # the idle power reading before the phase (a sensor period)
MODULE_FAMILY = {"kernels.gemm": "gemm", "kernels.gemv": "gemv", "kernels.attention": "attention",
                 "kernels.stream": "stream"}


def spec_device(name: str) -> DeviceInfo:
    """Return a DeviceInfo for a datasheet part named like name ("h200", "H100 PCIe"), or
    raise a Refusal (a ValueError, code unknown_part) listing the parts."""
    parts = specs.load_parts()
    words = name.lower().split()
    hits = [p for p in parts if all(w in p.part.lower() for w in words)]
    if len(hits) > 1:  # "b200" is in "GB200" too: whole words decide
        whole = [p for p in hits if all(w in re.split(r"[^a-z0-9]+", p.part.lower()) for w in words)]
        hits = whole or hits
    if len(hits) != 1:
        raise Refusal(f"--device-spec '{name}' matches {len(hits)} datasheet parts; "
                      f"choose one of: {', '.join(p.part for p in parts)}.", "unknown_part")
    p = hits[0]
    amd = p.part.startswith("AMD")
    # an AMD part's gfx target from the compute capability ROCm torch reports (9.4: gfx942)
    gfx = next((a.gfx for a in ARCHS.values() if a.gfx and f"{a.cc // 10}.{a.cc % 10}" == p.compute_capability),
               None) if amd else None
    return DeviceInfo(kind="cuda", torch_device="cuda:0", name=p.part, memory_bytes=int(p.memory_gb * 1e9),
                      compute_units=p.sms, compute_unit_kind="CUs" if amd else "SMs",
                      caches=(CacheLevel("l3" if amd else "l2", int(p.llc_mib * 2**20), 1),),
                      max_clock_mhz=p.boost_clock_mhz, compute_capability=p.compute_capability,
                      extra={"spec": p.part, **({"gfx": gfx} if gfx else {})}, vendor="amd" if amd else "nvidia")


@dataclass
class Rates:
    """The roofs a prediction uses: peak FLOP/s per precision and bytes/s per level."""
    peaks: dict
    memory_bps: float
    cache_bps: float
    fp64: float

    def peak(self, precision: str) -> float:
        return self.peaks.get(precision) or self.peaks.get("fp32") or self.peaks.get("fp64") or 1e11


def device_rates(device: DeviceInfo) -> Rates:
    """Return the reference roofs of a device: its datasheet part, or a CPU's computed peaks."""
    if device.kind == "cpu":
        peaks = {k: v * 1e9 for k, v in specs.cpu_peaks_gflops(device.compute_units or 1, device.max_clock_mhz or 2000,
                                                                  device.cpu_flags).items()}
        return Rates(peaks, CPU_BW_GUESS["dram"], CPU_BW_GUESS["cache"], peaks.get("fp64", 1e10))
    part = next((p for p in specs.load_parts() if p.part == (device.extra or {}).get("spec")), None) \
        or specs.match(device.to_dict())
    if part is None:  # an unknown GPU: plan as if it were an H100
        part = next(p for p in specs.load_parts() if "H100 SXM5" in p.part)
    peaks = {k: v * 1e12 for k, v in part.peaks_tflops.items()}
    bw = part.memory_tbps * 1e12
    return Rates(peaks, bw, L2_FACTOR * bw, peaks.get("fp64", peaks.get("fp32", 1e13)))


def call_seconds(op, point, mode, device: DeviceInfo, rates: Rates) -> float:
    """Return the predicted seconds of one call: max(FLOPs / P, bytes / BW) at EFFICIENCY."""
    flops, nbytes = op.flops(point), op.bytes(point)
    ws = op.working_set(point)
    off_chip = mode == "cold" or ws >= 4 * device.llc_bytes
    bw = rates.memory_bps if off_chip else rates.cache_bps
    precision = op.precision(point)
    compute = flops / (rates.peak(precision) * EFFICIENCY) if flops else 0.0
    return max(compute, nbytes / (bw * EFFICIENCY), 2e-6)


def point_seconds(op, point, mode, device: DeviceInfo, rates: Rates, timer) -> float:
    """Return the predicted wall seconds of one timed (point, impl, mode), set-up included."""
    kind = device.kind
    t = call_seconds(op, point, mode, device, rates)
    ws = op.working_set(point)
    setup = ws / GEN_BPS[kind] + ws * 4 / REF_BPS[kind]
    if op.family in ("gemm", "model") and op.flops(point):
        setup += op.flops(point) / (rates.fp64 * FP64_EFF)
    gate = t
    return POINT_OVERHEAD_S[kind] + setup + gate + timed_seconds(t, mode, device, timer)


def timed_seconds(t: float, mode: str, device: DeviceInfo, timer) -> float:
    """Return the seconds the timer spends on a call of t seconds in mode: warm-up, the
    per-call estimate and graph capture, then SAMPLES samples (or the minimum span), within
    the budget."""
    kind = device.kind
    if kind == "cuda":
        target = timer.device_target_sample_s
        if mode == "warm":
            reps = max(1, min(timer.device_max_reps, math.ceil(target / t - 1e-9)))
            sample = reps * t + 2e-4
            around = timer.warmup_s + max(4e-4, 2 * t) + reps * 3e-6  # warm-up, estimate, graph capture
        else:
            sample = t + 2e-4 + 0.3e-3  # the flush and clean read of 256 MiB each
            around = timer.warmup_s
    else:
        reps = max(1, math.ceil(timer.target_sample_s / t - 1e-9)) if mode == "warm" else 1
        sample = reps * t + (2 * device.llc_bytes / 10e9 if mode == "cold" else 0.0)
        around = max(timer.warmup_s, t)
    return min(max(timer.budget_s, sample), around + max(SAMPLES * sample, timer.min_time_s))


def tune_seconds(op, point, mode, device: DeviceInfo, rates: Rates, quick: bool) -> float:
    """Return the seconds of tuning one shape class at point: per candidate, TUNE_OVERHEAD_S
    (making its callable, synchronizing), its first call and its timing under the tuning
    timer (bench/ops/_tune.py TUNE_TIMER: 30 ms budget, no minimum span)."""
    t = call_seconds(op, point, mode, device, rates)
    n = QUICK_CANDIDATES if quick else FULL_CANDIDATES
    return n * (TUNE_OVERHEAD_S + t + timed_seconds(t, mode, device, TUNE_TIMER))


def compile_key(op, impl, point) -> tuple | None:
    """Return what identifies one compiled variant of the Triton kernel behind (op, impl,
    point): kernel, dtype and the integer specialization class of its leading size (an
    argument equal to 1, a multiple of 16, or neither, is a separate compile)."""
    if impl.backend != "triton":
        return None
    lead = point.get("batch", point.get("shape", (0,))[0] if isinstance(point.get("shape"), tuple) else 16)
    spec = "one" if lead == 1 else ("x16" if lead % 16 == 0 else "other")
    return (op.family, impl.name, point.get("dtype"), spec)


def compile_seconds(op, point) -> float:
    if op.family in ("gemm", "model") and point.get("dtype") == "fp32":
        return COMPILE_S["gemm.fp32"]
    return COMPILE_S.get(op.family, 2.0)


def pool_seconds(compiles: list, workers: int) -> float:
    """Return the wall seconds of compiling these (seconds each) in a pool of workers:
    POOL_START_S + max(the longest, their sum / workers); 0 for none."""
    if not compiles:
        return 0.0
    return POOL_START_S + max(max(compiles), sum(compiles) / max(1, workers))


def lazy_compiles(device: DeviceInfo) -> bool:
    """Return whether a run on device compiles its Triton kernels at their first launch, one
    after another, rather than in the precompile pool: a GPU with no aot target
    (bench/precompile.arch_of: e.g. sm_75, gfx90a)."""
    return device.kind == "cuda" and precompile.arch_of(device) is None


def host_workers(device: DeviceInfo) -> int:
    """Return the compile workers of a run on device: HOST_CORES for a datasheet part (no
    host to ask), else this machine's cores; 1 where the run compiles lazily."""
    if lazy_compiles(device):
        return 1
    return HOST_CORES if (device.extra or {}).get("spec") else (os.cpu_count() or 1)


def aot_compiles(plan, device: DeviceInfo, quick: bool) -> list | None:
    """Return the seconds of each compile the precompile pool runs for plan on device (the
    AOT plan's jobs, COMPILE_S by kernel module), or None where it has no such plan (a CPU,
    an arch aot lacks, no Triton op)."""
    arch = precompile.arch_of(device)
    only = precompile.families_of(plan) if arch else []
    if not only:
        return None
    jobs, _ = precompile.plan_jobs(arch, quick, only, device)
    return [COMPILE_S.get(MODULE_FAMILY.get(j["module"], ""), 2.0) for j in jobs]


def tune_class(op, impl, point, mode) -> tuple:
    """Return the shape class a launcher tunes point in: the point's sizes (its integers,
    tuples of integers and integer columns such as a GEMV layer's N and K) rounded to
    octaves, its dtype and flags, the impl and the mode."""
    sizes = {k: v for k, v in point.items() if not isinstance(v, str) or k == "dtype"}
    if op.columns:
        sizes.update({k: v for k, v in op.columns(point).items() if isinstance(v, int)})
    return (op.family, impl.name, mode) + shape_class(tuple(sorted(sizes.items(), key=lambda kv: kv[0])))


TUNED = {"gemm", "gemv", "attention", "model"}   # families whose Triton launchers autotune


def candidates_of(op, impl, point, quick: bool) -> int:
    """Return how many configurations a Triton launcher compiles: 1 for an untuned kernel,
    else its tuning candidates (quick: at most 3)."""
    if impl.backend != "triton":
        return 0
    if op.family not in TUNED:
        return 1
    return QUICK_CANDIDATES if quick else FULL_CANDIDATES


@dataclass
class Prediction:
    rows: int
    skipped: int
    seconds_by_family: dict
    compile_s: float          # the precompile pool's wall time
    tune_s: float
    compiles: int             # jobs the pool compiles
    tuning_keys: int          # shape classes tuned
    load_s: float = 0.0       # first launches loading precompiled kernels
    workers: int = 1
    sustain_s: float = 0.0    # the sustained phase after the sweeps (bench/run/sustain_phase.py)
    windows: int = 0          # its candidates' windows
    finish_s: float = 0.0     # roofs, charts and report once the measuring ends
    learned: dict = field(default_factory=dict)  # the factors applied (bench/aot/learned.py); {}: the model alone

    @property
    def total_s(self) -> float:
        return (sum(self.seconds_by_family.values()) + self.compile_s + self.load_s + self.tune_s + self.sustain_s
                + self.finish_s)


def row_seconds(plan, device: DeviceInfo, timer, quick: bool, budget=None) -> tuple[list[tuple[str, float]], dict]:
    """Return [(family, predicted seconds)] per row of plan, in the order the runner runs
    them (task by task, impl by impl, mode by mode), with each Triton variant's first load
    and each shape class's tuning charged to the first row that needs it; and counts
    (skipped, variants, their compile seconds, load_s, tuning classes, tune_s). The
    precompile pool runs before the rows: predict() charges it."""
    rates = device_rates(device)
    rows, compiles, keys = [], {}, set()
    counts = {"skipped": 0, "load_s": 0.0, "tune_s": 0.0, "measure_s": defaultdict(float)}
    sweeps: dict = {}  # the runner's sweep_key -> [(point, predicted rate)]: Op.sweep_stop on predicted rates
    for task in plan.tasks:
        op, point = task.op, task.point
        rule = skip.point_reason(op, point, device)
        if not rule and budget is not None:  # rule 16, as the runner decides it before any input
            rule = skip.memory_reason(op.peak_bytes(point), op.pool_bytes(point, device.torch_device), {}, budget,
                                      None, {}, device.torch_device)
        for impl in task.impls:
            own = rule or skip.impl_reason(impl, point, device, quick)
            for mode in plan.modes_of(task):
                history = sweeps.setdefault(skip.sweep_key(impl, point, mode), [])
                call = call_seconds(op, point, mode, device, rates)
                # the runner's own skips before any input (skip.py's order: static, the sweep's end, time)
                # the point's budget as the runner stretches it (rule 7: the model command's --op-cap)
                floor = timer.stretched(max(timer.budget_s, op.budget_floor(quick)), call)
                cut = skip.sweep_reason(op, history, device) or skip.time_reason(call, floor)
                if own or cut:
                    counts["skipped"] += 1
                    rows.append((op.family, SKIP_S))
                    counts["measure_s"][op.family] += SKIP_S
                    continue
                history.append((point, (op.flops(point) or op.bytes(point)) / call))
                op_timer = timer if floor <= timer.budget_s else dataclasses.replace(timer, budget_s=floor)
                measure = point_seconds(op, point, mode, device, rates, op_timer)
                counts["measure_s"][op.family] += measure
                sec = measure
                ck = compile_key(op, impl, point) if device.kind == "cuda" else None
                if ck is not None:
                    for c in range(candidates_of(op, impl, point, quick)):
                        if ck + (c,) not in compiles:
                            compiles[ck + (c,)] = compile_seconds(op, point)
                            counts["load_s"] += LOAD_S
                            sec += LOAD_S
                    key = tune_class(op, impl, point, mode)
                    if op.family in TUNED and key not in keys:
                        keys.add(key)
                        tune = tune_seconds(op, point, mode, device, rates, quick)
                        counts["tune_s"] += tune
                        sec += tune
                rows.append((op.family, sec))
    counts.update(compiles=len(compiles), compile_list=list(compiles.values()), tuning_keys=len(keys))
    return rows, counts


def sustain_seconds(plan, device: DeviceInfo, quick: bool, window_s: float | None = None) -> tuple[float, int]:
    """Return (seconds, windows) of the sustained phase after the sweeps (bench/run/sustain_phase.py):
    PER_ROOF candidates per roof the plan can set (a compute roof per GEMM precision the
    device runs; a bandwidth roof per memory level when it has stream ops), each its window
    (default: a full run's 1 s, a quick run's 0.25 s; 0: no phase) plus SUSTAIN_OVERHEAD_S,
    after one idle reading."""
    window = default_window(quick) if window_s is None else window_s
    if window <= 0:
        return 0.0, 0
    precisions = {t.op.precision(t.point) for t in plan.tasks if t.op.family == "gemm"
                  and not (t.op.skip and t.op.skip(t.point, device))}
    levels = len(device.caches) + 1 if any(t.op.family == "stream" for t in plan.tasks) else 0
    windows = per_roof(quick) * (len(precisions) + levels)
    if not windows:
        return 0.0, 0
    return SUSTAIN_IDLE_S[device.kind] + windows * (window + SUSTAIN_OVERHEAD_S), windows


DEFAULT_FINISH_S = 4.0   # roofs, charts and report of a run folder, before this machine has taught otherwise


def scaled(seconds_by_family: dict, factors: dict) -> dict:
    """Return each family's seconds times its learned factor (1 where none was learned)."""
    return {fam: s * factors.get(fam, 1.0) for fam, s in seconds_by_family.items()}


def predict(plan, device: DeviceInfo, timer, quick: bool, exact_compiles: bool = True,
            sustain_s: float | None = None, budget=None, factors: dict | None = None) -> Prediction:
    """Return the predicted duration of plan on device (see the module docstring). The
    precompile pool's jobs are the AOT plan's (exact_compiles, where the device has an aot
    arch: seconds of planning), else the variants row_seconds counts. sustain_s: the
    sustained window (None: the default; 0: no phase). budget: the run's memory budget
    (memory.Budget), whose skips the runner would make. factors: what this machine's runs
    taught (bench/aot/learned.py factors): each family's seconds, the sustained phase's and
    the finishing's scaled or replaced by them."""
    factors = factors or {}
    rows, c = row_seconds(plan, device, timer, quick, budget)
    jobs = (aot_compiles(plan, device, quick) if exact_compiles else None) if device.kind == "cuda" else None
    if jobs is None:
        jobs = c["compile_list"]
    workers = host_workers(device)
    sustained, windows = sustain_seconds(plan, device, quick, sustain_s)
    lazy = lazy_compiles(device)  # a lazy compile is the first launch: nothing then loads from a cache
    compile_s = sum(jobs) if lazy else pool_seconds(jobs, workers)
    return Prediction(len(rows), c["skipped"], scaled(dict(c["measure_s"]), factors), compile_s, c["tune_s"],
                      len(jobs), c["tuning_keys"], 0.0 if lazy else c["load_s"], workers,
                      sustained * factors.get("sustained", 1.0), windows, factors.get("finish_s", DEFAULT_FINISH_S),
                      factors)


def prediction_text(pred: Prediction, device: DeviceInfo, quick: bool) -> str:
    """Return the dry run's text: rows and predicted seconds per family, compile and tuning, total."""
    lines = [f"dry run: {'quick' if quick else 'full'} plan on {device.name} ({device.kind}"
             + (", from its datasheet" if (device.extra or {}).get("spec") else "") + ")",
             f"{pred.rows} rows planned, {pred.skipped} skipped by rules before running"]
    for fam, s in sorted(pred.seconds_by_family.items(), key=lambda kv: -kv[1]):
        lines.append(f"  {fam:<10} {s:8.1f} s")
    if pred.compiles and lazy_compiles(device):
        lines.append(f"  compile    {pred.compile_s:8.1f} s  ({pred.compiles} Triton compiles, "
                     "each at its first launch, one after another: no precompile for this GPU's arch)")
    elif pred.compiles:
        lines.append(f"  compile    {pred.compile_s:8.1f} s  ({pred.compiles} Triton compiles before measuring, "
                     f"{pred.workers} processes)")
        lines.append(f"  loading    {pred.load_s:8.1f} s  (first launches, from the cache)")
        lines.append(f"  tuning     {pred.tune_s:8.1f} s  ({pred.tuning_keys} shape classes)")
    if pred.windows:
        lines.append(f"  sustained  {pred.sustain_s:8.1f} s  ({pred.windows} windows after the sweeps)")
    lines.append(f"  finishing  {pred.finish_s:8.1f} s  (roofs, charts, report)")
    prior = list(pred.learned.get("prior") or [])
    learned = sorted(k for k in pred.learned if k not in ("finish_s", "prior") and k not in prior)
    how = [f"scaled by what earlier runs on this machine measured ({', '.join(learned)})"] if learned else []
    if prior:
        how.append(f"by the model's measured error on CPU VMs ({', '.join(prior)}; bench.aot.learned.CPU_PRIOR)")
    lines.append(f"predicted wall time: {pred.total_s:.0f} s ({pred.total_s / 60:.1f} min); "
                 + ("; ".join(how) if how else "from the model alone (no earlier run on this machine)"))
    return "\n".join(lines)


COUNTER_REPLAY_S = 30.0   # one replay under ncu (--counters): the interpreter, torch, inputs, tuning, the
                          # kernel replays of its metrics (unmeasured on a GPU: a guess, on the safe side)
