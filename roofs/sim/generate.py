"""Simulated runs of a machine model, in the real schema, and the truth they are measured against.

    plan(key)                    the quick sweep's rows a machine would measure (the registry's own
                                 ops, points and formulas, bench.measure), each with its true time
    simulate(machine, noise, seed, scale=1.0, passes=None)
                                 -> (rows: the measurements.csv frame, device: run.json's "device",
                                     samples: {point_id: [seconds, ...]})
    simulated(machine, noise, seed, ...)
                                 -> the same run as the Measurements a run writes
                                    (roofs.sim.folder.write_run: a run folder on disk)
    truth(machine)               -> {"roofs": {name: value}, "edges": {level: bytes}}

The plan is the registry's quick plan for the model's device (families stream, probe, fma and
gemm; the CPU backends torch and numpy, a GPU's torch and triton), each sweep stopped where its
own rule stops it (the settled off-chip rate, the GEMM search's plateau) on the true rates, and
points whose call would outlast TIME_CUT_S left out, as rule 7 cuts them. A CPU run's sweep is
pass 1; passes 2..P re-measure a declared set: bench.measure.revisit.revisit_selection where it
exists, else the top REVISIT_TOP rows by rate per octave of working set (warm stream rows), per
(dtype, unit) (GEMM and FMA rows) and per probe op, impl and timer. A GPU run has one pass.

The truth is what a perfect measurement of this sweep would read:
    a level       the best rate any stream kernel reads at a swept size inside the level's true
                  range (past the edge before it, up to its own), as if that level served all of
                  it, among the kernels that reach their ceiling there (per-call cost under
                  Policy.target_halfwidth of the call): a copy whose 16 KiB call is mostly
                  overhead reads no ceiling and sets none. Two such sizes make a level; a
                  direction roof "<level>.read/.write/.copy" is the same over its kernels. l1
                  also takes probe.l1's rows (a GPU's L1 is theirs alone)
    an edge       each cache level's true edge (Level.edge)
    a precision   the best swept shape of its own unit (gemm and a GPU's Triton FMA chains: the
                  faster is the precision's roof; the chains are "<p>.vector" beside a faster
                  GEMM); torch's chains are "<p>.elementwise"; a precision the model has no unit
                  for (converted to a wider one) has none
    a launch floor  launch.<backend>.<form>: the empty call, in microseconds
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import zlib
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import pandas as pd

from bench.hw.device import CacheLevel, DeviceInfo
from bench.measure import revisit as revisit_mod
from bench.measure import skip
from bench.measure.registry import load_all
from bench.measure.runner import direction_columns
from bench.policy import DEFAULT, Policy
from bench.results import Measurement
from bench.util import environ_restored
from roofs.analysis.launch_floor import TIMER_FORM
from roofs.sim.machines import (
    GPU_EVENT_S,
    MACHINES,
    Machine,
    call_seconds,
    device_fields,
    kernel_class,
    level_of,
    served,
    unit_of,
)
from roofs.sim.noise import NOISES, Noise, draw, sample_count

FAMILIES = ("stream", "probe", "fma", "gemm")
BACKENDS = {"cpu": ("torch", "numpy"), "cuda": ("torch", "triton")}
LEFT_OUT_IMPLS = ("gemm.square/triton_tma",)   # its skip rule imports Triton; its rows repeat gemm.square/triton
TIME_CUT_S = {"cpu": 0.25, "cuda": 0.5}        # rule 7: a call longer than a point's budget is cut short
REVISIT_TOP = 2
CLASS_DIRECTION = {"reread": "read", "read": "read", "copy": "copy", "triad": "copy", "write": "write"}


@dataclass(frozen=True)
class Planned:
    op: str
    family: str
    impl: str
    backend: str
    point: dict
    mode: str
    size: int
    shape: str
    ws: int
    nbytes: int
    flops: int
    precision: str
    columns: dict
    tolerance: float | None
    seconds: float            # the true time per call at scale 1
    timer: str

    @property
    def point_id(self) -> str:
        axes = ",".join(f"{k}={v}" for k, v in self.point.items())
        return f"{self.impl}[{axes}]@{self.mode}"


def as_machine(machine) -> Machine:
    return machine if isinstance(machine, Machine) else MACHINES[machine]


def device_info(m: Machine, planning: bool = False) -> DeviceInfo:
    """Return m's DeviceInfo. planning: with a torch device that does not exist for a GPU, so an
    impl's rule that probes the device (torch's int8 and fp8 GEMMs) says no here as everywhere."""
    info = DeviceInfo(**device_fields(m), caches=tuple(CacheLevel(n, s, i) for n, s, i in m.caches),
                      software={"python": "sim", "torch": "sim", "triton": "sim"})
    if planning and m.kind != "cpu":
        info = dataclasses.replace(info, torch_device="sim")
    return info


def device_record(m: Machine) -> dict:
    """Return run.json's "device" for machine m."""
    return device_info(m).to_dict()


def _timer(m: Machine, op: str, point: dict, seconds: float) -> str:
    if m.kind == "cpu":
        return "perf_counter_ns"
    if op == "probe.launch":
        return "cuda_event" if point["form"] == "launch" else "cuda_graph"
    return "cuda_event" if seconds > GPU_EVENT_S else "cuda_graph"


def _runs(op, impl, point, dev, quick: bool = True) -> bool:
    """Return whether impl runs point on dev by the registry's static rules (the op's, the
    quick plan's, the impl's own), the backend decided by BACKENDS."""
    if impl.backend not in BACKENDS[dev.kind] or impl.id in LEFT_OUT_IMPLS:
        return False
    return not (skip.point_reason(op, point, dev) or skip.quick_reason(impl, point, quick)
                or skip.own_reason(impl, point, dev))


@functools.cache
def plan(key: str, quick: bool = True, families: tuple = FAMILIES) -> tuple[Planned, ...]:
    """Return the rows machine `key` measures in its sweep (pass 1), in run order: the quick
    plan's (the table's), or the full plan's (quick=False) of these families."""
    m = MACHINES[key]
    with environ_restored() as env:   # the plan of a GPU, not of Triton's interpreter on this host
        env.pop("TRITON_INTERPRET", None)
        return tuple(_plan(m, quick, families))


def _plan(m: Machine, quick: bool = True, families: tuple = FAMILIES) -> list[Planned]:
    dev = device_info(m, planning=True)
    registry = load_all()
    out, history = [], defaultdict(list)
    for op, impls in registry.select(list(families)):
        for point in op.points(dev, quick):
            if op.name == "probe.l1" and m.kind == "cpu":
                point = {**point, "programs": m.cores}   # one program per core, not this host's threads
            for impl in impls:
                if not _runs(op, impl, point, dev, quick):
                    continue
                for mode in op.modes:
                    sweep = skip.sweep_key(impl, point, mode)
                    if skip.sweep_reason(op, history[sweep], dev):
                        continue
                    row = _planned(m, op, impl, point, mode)
                    if row.seconds > TIME_CUT_S[m.kind]:
                        continue
                    work = row.flops or row.nbytes
                    history[sweep].append((dict(point), work / row.seconds))
                    out.append(row)
    return out


def _planned(m: Machine, op, impl, point: dict, mode: str) -> Planned:
    size, shape = op.describe(point)
    nbytes = int((impl.bytes or op.bytes)(point))
    ws, flops = int(op.working_set(point)), int(op.flops(point))
    seconds = call_seconds(m, op.name, op.family, impl.id, impl.backend, point, ws, nbytes, flops, mode)
    columns = {**(op.columns(point) if op.columns else {}), **direction_columns(op, point, nbytes)}
    try:
        tol = float(op.tolerance(point))
    except (KeyError, TypeError):
        tol = None
    return Planned(op=op.name, family=op.family, impl=impl.id, backend=impl.backend, point=dict(point), mode=mode,
                   size=int(size), shape=str(shape), ws=ws, nbytes=nbytes, flops=flops,
                   precision=str(op.precision(point) or ""), columns=columns, tolerance=tol, seconds=seconds,
                   timer=_timer(m, op.name, point, seconds))


# ---- a simulated run -----------------------------------------------------------------------------

class _Measured(Measurement):
    """A Measurement whose percentiles come from its sorted samples once (numpy's linear rule,
    as Measurement's own): the same row, without a numpy call per statistic."""

    @functools.cached_property
    def _sorted(self) -> list:
        return sorted(self.samples_s)

    def _stat(self, q):
        vals = self._sorted
        if not vals:
            return math.nan
        pos = q / 100 * (len(vals) - 1)
        i = int(pos)
        return vals[i] if i + 1 >= len(vals) else vals[i] + (vals[i + 1] - vals[i]) * (pos - i)


def _rng(m: Machine, noise: Noise, seed: int, scale: float) -> np.random.Generator:
    return np.random.default_rng([int(seed), zlib.crc32(m.key.encode()), zlib.crc32(noise.name.encode()),
                                  int(round(scale * 1e6))])


def offchip_share(m: Machine, r: Planned) -> float:
    """Return the share of stream row r's true time spent reading and writing off chip (0 for
    the other families)."""
    if r.family != "stream" or r.seconds <= 0:
        return 0.0
    share = dict((lv.name, s) for lv, s in served(m, r.ws)).get(m.offchip.name, 0.0)
    rate = m.class_rate(m.offchip, kernel_class(r.op), r.impl) * 1e9
    return min(1.0, r.nbytes * share / rate / r.seconds)


def _measure(m: Machine, rows: list[Planned], noise: Noise, rng, scale: float, pass_no: list[int],
             cores: int) -> list:
    seconds = np.array([r.seconds for r in rows]) / scale
    counts = sample_count(seconds)
    memory = [offchip_share(m, r) for r in rows] if noise.memory_slow != 1.0 else None
    samples, flags = draw(noise, rng, seconds, counts, pass_no, cores, memory)
    out = []
    for r, s, flag, p, t in zip(rows, samples, flags, pass_no, seconds):
        out.append(_Measured(
            op=r.op, family=r.family, impl=r.impl, backend=r.backend, point=dict(r.point), size=r.size, shape=r.shape,
            working_set_bytes=r.ws, flops=r.flops, bytes=r.nbytes, mode=r.mode, status="ok",
            samples_s=tuple(float(x) for x in s), reps=max(1, min(1000, int(1e-3 / t))), timer=r.timer,
            stop="converged" if len(s) < 40 else "budget", error=0.0, tolerance=r.tolerance,
            precision=r.precision, flag=flag, columns=dict(r.columns), pass_no=int(p)))
    return out


def fallback_selection(rows: pd.DataFrame, top: int = REVISIT_TOP) -> list[str]:
    """Return the point ids a revisit pass re-measures when bench.measure.revisit has no
    revisit_selection: the top rows by rate per octave of working set among the warm stream
    rows, per (dtype, unit) among the GEMM and FMA rows, and per (op, impl, timer) among the
    probes (the launch floor's fastest calls)."""
    ok = rows[rows["status"] == "ok"]
    picks = []
    stream = ok[(ok["family"] == "stream") & (ok["mode"] == "warm")]
    octave = np.floor(np.log2(stream["working_set_bytes"].astype(float)))
    for _, g in stream.groupby(octave.values):
        picks += g.nlargest(top, "gbps")["point_id"].tolist()
    comp = ok[ok["family"].isin(("gemm", "fma"))]
    units = [unit_of(f, i) for f, i in zip(comp["family"], comp["impl"])]
    for _, g in comp.groupby([comp["dtype"].astype(str).values, units]):
        picks += g.nlargest(top, "gflops")["point_id"].tolist()
    probe = ok[ok["family"] == "probe"]
    for (op, _, _), g in probe.groupby(["op", "impl", "timer"]):
        best = g.nsmallest(top, "median_ms") if op == "probe.launch" else g.nlargest(top, "gbps")
        picks += best["point_id"].tolist()
    return list(dict.fromkeys(picks))


def revisit_ids(rows: pd.DataFrame, policy: Policy = DEFAULT, samples: dict | None = None) -> list[str]:
    """Return the point ids passes 2..P re-measure: revisit_selection(rows, policy, samples) where
    bench.measure.revisit has it (samples where it takes them), else fallback_selection."""
    select = getattr(revisit_mod, "revisit_selection", None)
    if select is None:
        return fallback_selection(rows, policy.revisit_top)
    takes_samples = "samples" in inspect.signature(select).parameters
    picked = select(rows, policy, samples=samples) if takes_samples else select(rows, policy)
    return [str(pid) for pid in picked]


def simulate(machine, noise, seed: int, scale: float = 1.0, passes: int | None = None,
             policy: Policy = DEFAULT, quick: bool = True,
             families: tuple = FAMILIES) -> tuple[pd.DataFrame, dict, dict]:
    """Return one simulated run of machine (a Machine or its key) under noise (a Noise or its
    name) for seed: (rows in bench.results.COLUMNS, run.json's device, {point_id: samples in
    seconds}). scale multiplies every true rate (0.85: a truth 15% slower). passes: a CPU
    run's passes, sweep included (default: the sweep and the policy's fewest revisit passes,
    Policy.passes(quick)[0]); a GPU run has one. quick, families: the plan
    (the table's is the quick plan of every family)."""
    measured = simulated(machine, noise, seed, scale, passes, policy, quick, families)
    samples = {x.point_id: list(x.samples_s) for x in measured}
    return pd.DataFrame([x.row() for x in measured]), device_record(as_machine(machine)), samples


def simulated(machine, noise, seed: int, scale: float = 1.0, passes: int | None = None,
              policy: Policy = DEFAULT, quick: bool = True, families: tuple = FAMILIES) -> list[Measurement]:
    """Return simulate()'s run as the Measurements a run writes, in run order (its sweep, then
    its revisit passes)."""
    m, nz = as_machine(machine), (noise if isinstance(noise, Noise) else NOISES[noise])
    rng = _rng(m, nz, seed, scale)
    planned = plan(m.key, quick, tuple(families))
    first = _measure(m, list(planned), nz, rng, scale, [1] * len(planned), m.cores)
    total = (1 + policy.passes(quick)[0] if passes is None else passes) if m.kind == "cpu" else 1
    if total > 1:
        rows = pd.DataFrame([x.row() for x in first])
        ids = set(revisit_ids(rows, policy, {x.point_id: list(x.samples_s) for x in first}))
        again = [r for r in planned if r.point_id in ids]
        if again:
            seq = [r for _ in range(2, total + 1) for r in again]
            nums = [p for p in range(2, total + 1) for _ in again]
            return first + _measure(m, seq, nz, rng, scale, nums, m.cores)
    return first


# ---- the truth -------------------------------------------------------------------------------------

def _pure(m: Machine, r: Planned, level) -> tuple[float, float]:
    """Return (GB/s a perfect measurement of row r reads with level serving all of it, that
    level's ceiling for r's kernel)."""
    t = call_seconds(m, r.op, r.family, r.impl, r.backend, r.point, r.ws, r.nbytes, r.flops, r.mode, only=level)
    return r.nbytes / t / 1e9, m.class_rate(level, kernel_class(r.op), r.impl)


@functools.cache
def _truth(key: str, reach: float, min_sizes: int, quick: bool = True, families: tuple = FAMILIES) -> tuple:
    m = MACHINES[key]
    roofs, edges = {}, {}
    sizes, best = defaultdict(set), defaultdict(float)
    dir_sizes, dir_best = defaultdict(set), defaultdict(float)
    for r in plan(key, quick, families):
        if r.family != "stream" or r.mode != "warm":
            continue
        level = level_of(m, r.ws)
        rate, ceiling = _pure(m, r, level)
        if rate < (1 - reach) * ceiling:
            continue   # per-call cost holds this kernel below its ceiling here
        d = CLASS_DIRECTION[kernel_class(r.op)]
        sizes[level.name].add(r.ws)
        best[level.name] = max(best[level.name], rate)
        dir_sizes[(level.name, d)].add(r.ws)
        dir_best[(level.name, d)] = max(dir_best[(level.name, d)], rate)
    # off chip, a cache that fades over octaves (a victim L3) still serves part of any finite
    # set: the truth is what the sweep's largest working set reads, as a STREAM run's fixed
    # arrays would, not an asymptote no finite sweep reaches
    largest = max((r.ws for r in plan(key, quick, families) if r.family == "stream" and r.mode == "warm"), default=0)
    at_largest = defaultdict(float)
    for r in plan(key, quick, families):
        if r.family == "stream" and r.mode == "warm" and r.ws >= largest / 1.05:
            t = call_seconds(m, r.op, r.family, r.impl, r.backend, r.point, r.ws, r.nbytes, r.flops, r.mode)
            d = CLASS_DIRECTION[kernel_class(r.op)]
            at_largest[d] = max(at_largest[d], r.nbytes / t / 1e9)
    for d, rate in at_largest.items():
        if (m.offchip.name, d) in dir_best:
            dir_best[(m.offchip.name, d)] = rate
    off = [v for (name, _), v in dir_best.items() if name == m.offchip.name]
    if off:
        best[m.offchip.name] = max(off)
    for lv in m.chain:
        if len(sizes[lv.name]) >= min_sizes:
            roofs[lv.name] = best[lv.name]
            if lv is not m.offchip:
                edges[lv.name] = int(lv.edge)
            for d in ("read", "write", "copy"):
                if len(dir_sizes[(lv.name, d)]) >= min_sizes:
                    roofs[f"{lv.name}.{d}"] = dir_best[(lv.name, d)]
    probe_only = next((lv for lv in m.levels if lv.probe_only), None)
    probe = [_pure(m, r, probe_only or level_of(m, r.ws))[0] for r in plan(key, quick, families) if r.op == "probe.l1"]
    if probe:
        roofs["l1"] = max(roofs.get("l1", 0.0), max(probe))
    roofs.update(_compute_truth(m))
    for r in plan(key, quick, families):
        if r.op == "probe.launch":
            name = f"launch.{r.backend}.{TIMER_FORM[r.timer]}"
            roofs[name] = min(roofs.get(name, math.inf), r.seconds * 1e6)
    return tuple(roofs.items()), tuple(edges.items())


def _compute_truth(m: Machine) -> dict:
    best = defaultdict(float)
    for r in plan(m.key):
        if r.family not in ("gemm", "fma"):
            continue
        unit = unit_of(r.family, r.impl)
        if m.unit(str(r.point["dtype"]), unit) is None:
            continue   # no unit of its own: it runs through conversion
        best[(str(r.point["dtype"]), unit)] = max(best[(str(r.point["dtype"]), unit)], r.flops / r.seconds / 1e9)
    out = {}
    for (p, unit), v in best.items():
        if unit == "elementwise":
            out[f"{p}.elementwise"] = v
            continue
        gemm, vec = best.get((p, "gemm")), best.get((p, "vector"))
        out[p] = max(x for x in (gemm, vec) if x is not None)
        if gemm is not None and vec is not None and gemm >= vec:
            out[f"{p}.vector"] = vec
    return out


def truth(machine, policy: Policy = DEFAULT, quick: bool = True, families: tuple = FAMILIES) -> dict:
    """Return machine's truth: {"roofs": {name: value (GB/s, GFLOP/s, GOP/s or us)}, "edges":
    {cache level: its true edge in bytes}} (module docstring), of the plan simulate(quick,
    families) measures."""
    roofs, edges = _truth(as_machine(machine).key, policy.target_halfwidth, policy.min_sizes, quick, tuple(families))
    return {"roofs": dict(roofs), "edges": dict(edges)}
