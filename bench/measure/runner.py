"""The runner: expand axes -> skip check -> correctness gate (bench/measure/gate.py) -> time -> Measurement.

Knows nothing of plotting. Every point it plans ends as exactly one row per (impl, mode):
measured ("ok"), skipped with a reason, or failed with its error. An impl that raises
records its error and the run goes on; Ctrl-C (KeyboardInterrupt) propagates after the
rows already measured were written.
"""
from __future__ import annotations

import dataclasses
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from bench.hw import device as devmod
from bench.hw.detect import make_source
from bench.hw.telemetry import LoadProbe, Sampler
from bench.measure import memory, skip
from bench.measure.gate import Snapshot, check, verifier
from bench.measure.progress import Ticker
from bench.measure.registry import Impl, LaunchContext, Op, Registry
from bench.measure.revisit import (
    group_name,
    measured_pass_bests,
    needs_another_pass,
    revisit_picks,
    revisit_stops,
    widest,
)
from bench.measure.timing import TimerConfig, make_flush, time_fn
from bench.policy import DEFAULT, Policy
from bench.results import BUSY_PREFIX, JUMP_PREFIX, STEAL_PREFIX, Measurement
from bench.util import DeviceLost, fmt_bytes, is_fatal, triton_interpreting
from bench.util import first_line as _first_line


def history_key(op: Op, impl: Impl, point: dict, mode: str) -> tuple:
    """Return the key under which a point's time per call predicts the next: the op's cost
    group (its family unless it says otherwise), impl name, dtype and mode, so a slow path
    seen in one sweep (gemm.square fp16) is cut short in the next (gemm.skinny fp16)."""
    return (op.cost_group or op.family, impl.name, point.get("dtype"), mode)


@dataclass(frozen=True)
class Task:
    op: Op
    point: dict
    impls: tuple[Impl, ...]
    modes: tuple[str, ...] | None = None   # None: the plan's modes, else the op's own


@dataclass
class Plan:
    tasks: list[Task]
    modes: tuple[str, ...] | None = None   # None: each op's own modes

    def __len__(self):
        return sum(len(t.impls) * len(self.modes_of(t)) for t in self.tasks)

    def modes_of(self, task: Task) -> tuple[str, ...]:
        return task.modes or self.modes or task.op.modes


def make_plan(registry: Registry, device: devmod.DeviceInfo, only=None, quick=False,
              dtypes=None, modes=None, max_ws_bytes=None) -> Plan:
    """Return the tasks for the selected ops, their points in axis order (small sizes first).

    dtypes keeps points whose dtype is listed; max_ws_bytes drops larger working sets.
    """
    tasks = []
    for op, impls in registry.select(only):
        for point in op.points(device, quick):
            if dtypes and "dtype" in point and point["dtype"] not in dtypes:
                continue
            if max_ws_bytes and op.working_set(point) > max_ws_bytes:
                continue
            tasks.append(Task(op, point, tuple(impls)))
    return Plan(tasks, tuple(modes) if modes else None)


def counted_rows(plan: Plan, device: devmod.DeviceInfo, quick: bool) -> tuple[int, set]:
    """Return (the rows of plan that may run, the (task index, impl id) pairs a static rule
    skips): a row skipped by bench.measure.skip's reasons 1-4 (the op's, the backend's, the
    quick plan's, the impl's) is known before the run, so the progress counter leaves it out."""
    static = {(i, impl.id) for i, task in enumerate(plan.tasks) for impl in task.impls
              if skip.static_reason(task.op, impl, task.point, device, quick)}
    return len(plan) - sum(len(plan.modes_of(plan.tasks[i])) for i, _ in static), static


@dataclass
class Runner:
    device: devmod.DeviceInfo
    timer: TimerConfig = field(default_factory=TimerConfig)
    quick: bool = False                            # launchers tune over fewer candidates
    timed_s: float = 0.0                           # seconds inside timed regions so far (samples x reps)
    spent: dict = field(default_factory=dict)      # seconds per phase: inputs, gate, timer (session.time_spent)
    family_s: dict = field(default_factory=dict)   # wall seconds per family, its skipped rows and releases included
    family_spent: dict = field(default_factory=dict)  # family -> phase -> seconds (the split of `spent`)
    sink: Callable[[Measurement], None] = lambda m: None
    progress: Callable[[str], None] = lambda line: None
    _flush: Callable | None = None
    _history: dict = field(default_factory=dict)   # history_key -> its last two ((flops, bytes), seconds per call)
    _last_rate: dict = field(default_factory=dict)  # sweep_key -> the previous size's rate
    _load: object = None                            # a LoadProbe running since the last point ended
    _sampler: Sampler | None = None
    budget: memory.Budget | None = None             # the memory budget (rule 16); None: half the memory available
    _sweeps: dict = field(default_factory=dict)     # sweep_key -> [(point, rate)] of its measured sizes
    _checked: dict = field(default_factory=dict)    # (impl, point) -> the error its sweep's gate measured
    _family: str = ""                               # the family of the task running now
    revisits: int = 0                               # revisit passes at the planned stops (rule 11; revisit_stops);
                                                    # with any, more at the plan's end while the noise asks
    revisit_s: float = 0.0                          # wall seconds of the revisit passes so far
    policy: Policy = DEFAULT                        # the passes' thresholds (bench/policy.py)
    _pass: int = 1                                  # the pass being measured: 1 the sweep, 2... a revisit
    _stretched: dict = field(default_factory=dict)  # (op, point) -> the budget its predicted calls stretched it to

    def memory_budget(self) -> memory.Budget:
        if self.budget is None:
            self.budget = memory.run_budget(self.device)
        return self.budget

    def sampler(self) -> Sampler:
        if self._sampler is None:
            self._sampler = Sampler(make_source(self.device))
        return self._sampler

    def flush(self):
        if self._flush is None:
            self._flush = make_flush(self.device.torch_device, self.device.llc_bytes)
            self.memory_budget().fixed["flush buffer"] = self.flush_bytes()
        return self._flush

    def flush_bytes(self) -> int:
        """Return what the cold-mode flush holds (bench.measure.timing.make_flush): 2x the last-level
        cache, at least 256 MiB on a GPU, twice over there (the written and the clean buffer)."""
        size = 2 * self.device.llc_bytes
        return size if self.device.kind != "cuda" else 2 * max(size, 256 * 2**20)

    def run(self, plan: Plan, estimates: list[float] | None = None, tail_s: float = 0.0,
            families: list[str] | None = None) -> list[Measurement]:
        """Run every task of plan; return the measurements, each also passed to sink as it
        ends. estimates (predicted seconds per row, in plan order; families: each one's
        family) and tail_s (predicted seconds after the rows: the sustained phase, the
        finishing) turn into a time-left estimate on each progress line, corrected by how the
        run keeps to them; skipped rows are printed grouped at their family's end
        (bench/measure/progress.py)."""
        out: list[Measurement] = []
        total, static = counted_rows(plan, self.device, self.quick)
        done = counted = 0
        ticker = Ticker(total, estimates, self.progress, progress_line, tail_s, families)
        t0 = time.perf_counter()
        stops = revisit_stops(plan, self.revisits)
        later = pools_used_later(plan, self.device.torch_device, stops)
        last = {task.op.name: i for i, task in enumerate(plan.tasks)}
        ops = {t.op.name: t.op for t in plan.tasks}
        impls = {i.id: i for t in plan.tasks for i in t.impls}
        try:
            for i, task in enumerate(plan.tasks):
                t_task, self._family = time.perf_counter(), task.op.family
                for m in self.run_task(task, plan.modes_of(task)):
                    done += 1
                    counted += (i, m.impl) not in static
                    out.append(m)
                    self.sink(m)
                    ticker.row(m, done, time.perf_counter() - t0, counted)
                # a pool or cache no later point uses is let go now, not at the end (rule 16)
                memory.release([k for k in memory.held() if k not in later[i]])
                if last[task.op.name] == i and task.op.release is not None:
                    task.op.release()
                    _free(self.device)
                self.family_s[self._family] = self.family_s.get(self._family, 0.0) + time.perf_counter() - t_task
                passes = 0  # points again, between later families and at the end (rule 11)
                for pass_no in self.passes_after(i, stops, out, t0, i == len(plan.tasks) - 1):
                    passes += 1
                    for m in self.revisit(out, pass_no, ops, impls):
                        out.append(m)
                        self.sink(m)
                if passes:  # the passes' pools are kept from one pass to the next, then let go
                    memory.release([k for k in memory.held() if k not in later[i]])
        finally:
            ticker.close()
            memory.release()
        return out

    def passes_after(self, i: int, stops: dict, rows: list[Measurement], t0: float, last: bool):
        """Yield the revisit pass numbers that run after task i (rule 11): its planned stops
        (revisit_stops), then, after the plan's last task (last), one more pass at a time while
        needs_another_pass says the declared groups' passes still spread wider than the
        Policy's target and their time is under its share of the run (the pass numbers go on
        from the last planned one)."""
        yield from stops.get(i, ())
        if not stops or not last:
            return
        done = sum(len(v) for v in stops.values())
        while True:
            bests = measured_pass_bests(rows, self.policy)
            if not needs_another_pass(bests, self.revisit_s, time.perf_counter() - t0, done, self.quick,
                                      self.policy):
                return
            group, width = widest(bests)
            done += 1
            self.progress(f"[revisit {done + 1}] another pass: {group_name(group)} still spreads +-{width:.1%} "
                          f"over the passes (target +-{self.policy.target_halfwidth:.0%})")
            yield done + 1

    def revisit(self, rows: list[Measurement], pass_no: int, ops: dict, impls: dict) -> list[Measurement]:
        """Return the rows of revisit pass pass_no (ARCHITECTURE.md, rule 11; bench/measure/revisit.py):
        the declared selection of the sweep's rows (revisit_picks: per octave of the stream and
        probe.l1 sweeps, per precision and unit, per launch form its fastest rows), measured
        again in their own mode through the gate and the timer, each pick's time added to its
        family's and to revisit_s; a neighbour's traffic only ever slows a call, so the
        derivation keeps each point's best pass."""
        out = []
        self._pass = pass_no
        t_pass = time.perf_counter()
        try:
            for op, impl, point, mode in revisit_picks(rows, self.device, self.policy):
                t_pick, self._family = time.perf_counter(), ops[op].family
                for m in self.run_task(Task(ops[op], point, (impls[impl],), (mode,)), (mode,)):
                    self.progress(f"[revisit {pass_no}] {progress_line(m)}")
                    out.append(m)
                self.family_s[self._family] = self.family_s.get(self._family, 0.0) + time.perf_counter() - t_pick
        finally:
            self._pass = 1
            self.revisit_s += time.perf_counter() - t_pass
        return out

    def _base(self, op: Op, impl: Impl, point: dict, mode: str, **kw) -> Measurement:
        size, shape = op.describe(point)
        nbytes = (impl.bytes or op.bytes)(point)
        columns = {**(op.columns(point) if op.columns else {}), **direction_columns(op, point, nbytes),
                   **kw.pop("columns", {})}
        return Measurement(op=op.name, family=op.family, impl=impl.id, backend=impl.backend,
                           point=dict(point), size=size, shape=shape,
                           working_set_bytes=op.working_set(point), flops=op.flops(point),
                           bytes=nbytes, mode=mode, precision=op.precision(point),
                           columns=columns, pass_no=self._pass, **kw)

    def memory_skip(self, op: Op, point: dict, modes) -> str | None:
        """Return why point does not fit (skip.memory_reason, rule 16), or None: decided before
        anything is made."""
        extra = self.memory_extra(modes)
        return skip.memory_reason(op.peak_bytes(point), op.pool_bytes(point, self.device.torch_device), extra,
                                  self.memory_budget(), devmod.free_memory_bytes(self.device), memory.held(),
                                  self.device.torch_device)

    def memory_extra(self, modes) -> dict:
        """Return the buffers a point in modes adds besides its own: the flush buffer, made by
        the first cold point."""
        return {"flush buffer": self.flush_bytes()} if "cold" in modes and self._flush is None else {}

    def run_task(self, task: Task, modes) -> list[Measurement]:
        """Return one Measurement per (impl, mode) of task: skipped, failed, or timed after
        passing the correctness gate. Inputs and the float64 reference are made once per point; a
        revisit pass makes no reference (it re-times what its sweep checked, on the same seeded
        inputs, and its rows carry the sweep's error)."""
        op, point = task.op, task.point
        reason = skip.point_reason(op, point, self.device)
        if reason:
            return [self._base(op, i, point, m, status="skipped", reason=reason) for i in task.impls for m in modes]
        # every reason not to run is found before the inputs are made, in bench/measure/skip.py's
        # order: the impl's static reasons, the sweep's end, then memory (the point as a whole), then time
        runnable, results = [], []
        # (a revisit repeats a point its sweep measured: neither the sweep's end nor a predicted
        # time applies to it, its time per call is known)
        first = self._pass == 1
        reasons = {impl.id: (skip.impl_reason(impl, point, self.device, self.quick)
                             or (skip.sweep_reason(op, self._sweeps.get(skip.sweep_key(impl, point, modes[0]), []),
                                                   self.device) if first else None)) for impl in task.impls}
        if any(r is None for r in reasons.values()):
            memory_reason = self.memory_skip(op, point, modes)
            for impl in task.impls:
                if reasons[impl.id] is None:
                    timed = self._predict_skip(impl, op, point, modes[0]) if first else None
                    reasons[impl.id] = memory_reason or timed
        for impl in task.impls:
            if reasons[impl.id]:
                results += [self._base(op, impl, point, m, status="skipped", reason=reasons[impl.id]) for m in modes]
            else:
                runnable.append(impl)
        if not runnable:
            return results
        # what the run holds at this point's peak: the run's predicted peak (rule 16)
        self.memory_budget().note(op.peak_bytes(point), op.pool_bytes(point, self.device.torch_device),
                                  self.memory_extra(modes))
        t0 = time.perf_counter()
        try:
            inputs = op.make_inputs(point, self.device.torch_device)
            # a revisit re-times what its sweep checked, on the same seeded inputs: no reference
            ref = op.reference(inputs) if first else None
        except Exception as e:  # out of memory, unsupported dtype on this device...
            if is_fatal(e):
                raise DeviceLost(f"{_first_line(e)} while making the inputs of {op.name} {point}") from e
            _free(self.device)
            return results + [self._base(op, i, point, m, status="error", reason=f"inputs: {_first_line(e)}")
                              for i in runnable for m in modes]
        finally:
            self._spend("inputs", t0)
        for impl in runnable:
            results += self._run_impl(op, impl, point, inputs, ref, modes)
        del inputs, ref
        _free(self.device)
        return results

    def timer_for(self, op: Op, point: dict | None = None) -> TimerConfig:
        """Return the timer of op's points: the run's, with the budget raised to op.budget_floor,
        and for a point whose predicted calls needed more, to what _predict_skip stretched it to."""
        floor = max(op.budget_floor(self.quick), self._stretched.get((op.name, repr(point)), 0.0))
        if floor > self.timer.budget_s:
            return dataclasses.replace(self.timer, budget_s=floor)
        return self.timer

    def stretched_budget(self, op: Op, predicted_s: float) -> float:
        """Return the budget of a point predicted to take predicted_s a call: its timer's, or
        where the timer allows a stretch (TimerConfig.stretch_s, the model command's cap) and
        its STRETCH_CALLS calls plus the warm-up need more, that need, at most the cap (TimerConfig.stretched)."""
        return self.timer.stretched(self.timer_for(op).budget_s, predicted_s)

    def _predict_skip(self, impl: Impl, op: Op, point: dict, mode: str) -> str | None:
        """Return skip.time_reason for point (rule 7), or None: its time per call extrapolated
        (skip.call_estimate, an estimate below the truth) from the last points the same impl
        and dtype ran, so that only a path slow either way is cut."""
        estimate = skip.call_estimate(self._history.get(history_key(op, impl, point, mode), []),
                                      op.flops(point), op.bytes(point))
        if estimate is None:
            return None
        predicted, sec0 = estimate
        budget = self.stretched_budget(op, predicted)
        if budget > self.timer_for(op).budget_s:
            self._stretched[(op.name, repr(point))] = budget
        return skip.time_reason(predicted, budget, sec0)

    def launch_context(self, point: dict, mode: str, verify: Callable | None = None) -> LaunchContext:
        """Return the context a launcher at point is called in when its first mode is mode: a
        tuner times its candidates in that mode, so a cold one gets the run's flush (its
        timing raises without one), and checks each winner with verify (gate.verifier)."""
        return LaunchContext(point, self.device, mode, self.quick, self.flush() if mode == "cold" else None,
                             verify=verify)

    def _run_impl(self, op, impl, point, inputs, ref, modes) -> list[Measurement]:
        mk = lambda mode, **kw: self._base(op, impl, point, mode, **kw)  # noqa: E731
        tol = op.tolerance(point)
        t0 = time.perf_counter()
        saved = Snapshot(inputs, op.inouts)  # one copy of the in-outs, shared by the tuner's checks and the gate
        ctx = self.launch_context(point, modes[0], verifier(ref, tol, self.device, inputs, op.outputs, op.error, saved))
        try:
            gate = check(lambda: impl.launcher(inputs, ctx), ref, tol, self.device, inputs, op.outputs, op.error,
                         saved)
        except DeviceLost as e:
            raise DeviceLost(f"{e} at {impl.id} {point}") from e
        except Exception as e:
            if is_fatal(e):
                raise DeviceLost(f"{_first_line(e)} at {impl.id} {point}") from e
            _free(self.device)
            return [mk(m, status="error", reason=_first_line(e), tolerance=tol) for m in modes]
        finally:
            saved.release()
            self._spend("gate", t0)
        fn, err = gate.fn, gate.error
        key = (impl.id, repr(point))
        if ref is None:   # a revisit: its row carries the error its sweep's gate measured
            err = self._checked.get(key)
        else:
            self._checked[key] = err
        if not gate.passed:  # also a NaN error: an output that was never written
            return [mk(m, status="error", error=err, tolerance=tol, reason=gate.reason) for m in modes]
        if impl.backend == "triton" and triton_interpreting():
            return [mk(m, status="skipped", error=err, tolerance=tol,
                       reason=f"{INTERPRETED_PREFIX} (error {err:.2g}); "
                              "interpreter timings are never reported")
                    for m in modes]
        results = []
        for mode in modes:
            # the gate's call has just run fn: it counts toward the first mode's warm-up
            m = self._time_point(op, impl, point, fn, mode, mk, err, tol,
                                 gate.call_s if mode == modes[0] else 0.0)
            results.append(m)
        return results

    def _measure(self, fn, mode, warmed_s=0.0, timer: TimerConfig | None = None):
        """Return (Timing, telemetry) of fn in mode, telemetry sampled around it."""
        sampler = self.sampler().start()
        t0 = time.perf_counter()
        try:
            t = time_fn(fn, self.device.torch_device, mode, timer or self.timer,
                        self.flush() if mode == "cold" else None, window=sampler.window, warmed_s=warmed_s)
        finally:  # also on Ctrl-C: the sampling thread must not outlive its point
            tel = sampler.stop()
            self._spend("timer", t0)
        if tel.get("energy_j") is not None and tel["window_s"] > 0:
            # mean power over the timed samples x time per call: the energy of one call
            tel["joules_per_call"] = tel["energy_j"] / tel["window_s"] * t.stats.median_s
        timed = sum(t.samples_s) * t.reps  # the timed regions alone (no flush, no sync)
        self.timed_s += timed
        by = self.family_spent.setdefault(self._family, {})
        by["timed"] = by.get("timed", 0.0) + timed
        if t.dropped_s:  # the first-sample rule's warm-up sample (bench/measure/timing.py), kept with the point
            tel["first_sample_dropped_s"] = t.dropped_s[0]
        if t.floor_s is not None:  # a cold point of a few microseconds: the timer's dispatch floor
            tel["dispatch_floor_s"] = t.floor_s
        tel.update(self._machine_load())
        return t, tel

    def _spend(self, phase: str, since: float) -> None:
        dt = time.perf_counter() - since
        self.spent[phase] = self.spent.get(phase, 0.0) + dt
        by = self.family_spent.setdefault(self._family, {})
        by[phase] = by.get(phase, 0.0) + dt

    def _machine_load(self) -> dict:
        """Return how busy the rest of the machine was since the last point ended (its inputs,
        gate, warm-up and samples): a window long enough for /proc/stat's 10 ms ticks. A window
        still too short keeps accumulating into the next point's, and this point falls back on
        the 1-minute load average against the core count."""
        if self._load is None:
            self._load = LoadProbe().start()
        load = self._load.stop()
        if load["others_cpu"] is not None:
            self._load = LoadProbe().start()
        return load

    def _time_point(self, op, impl, point, fn, mode, mk, err, tol, warmed_s=0.0) -> Measurement:
        """Return the timed Measurement of one (impl, point, mode): measured once, and once
        more when its rate fell more than JUMP_FACTOR below the previous size of its sweep;
        flagged when the machine was busy (a CPU) or when the jump stays."""
        try:
            t, tel = self._measure(fn, mode, warmed_s, self.timer_for(op, point))
            rate = _rate(op, point, impl, t.stats.median_s)
            sweep = skip.sweep_key(impl, point, mode)
            prev = self._last_rate.get(sweep)
            jumped = prev is not None and rate * JUMP_FACTOR < prev
            if jumped:  # measure again: a transient (another process, a clock change) passes
                t, tel = self._measure(fn, mode, timer=self.timer_for(op, point))
                rate = _rate(op, point, impl, t.stats.median_s)
                jumped = rate * JUMP_FACTOR < prev
        except Exception as e:
            if is_fatal(e):
                raise DeviceLost(f"{_first_line(e)} at {impl.id} {point} ({mode})") from e
            _free(self.device)
            return mk(mode, status="error", error=err, tolerance=tol, reason=f"timing: {_first_line(e)}")
        self._history.setdefault(history_key(op, impl, point, mode), deque(maxlen=2)).append(
            ((op.flops(point), op.bytes(point)), t.stats.median_s))
        self._last_rate[sweep] = rate
        if not jumped:
            self._sweeps.setdefault(sweep, []).append((dict(point), rate))
        flags = [busy_flag(tel, self.device), steal_flag(tel, self.device)]
        if jumped:
            flags.append(f"{JUMP_PREFIX}: {prev / rate:.0f}x slower than the previous size of its sweep, "
                         "measured twice")
        flag = "; ".join(f for f in flags if f)
        return mk(mode, status="ok", error=err, tolerance=tol, samples_s=t.samples_s, reps=t.reps, timer=t.method,
                  stop=t.stop, detail=_detail(fn), telemetry=tel, flag=flag,
                  columns=dict(getattr(fn, "level_bytes", None) or {}))


# a Triton point that passed its gate under the interpreter, whose timing is never reported: its reason starts so
INTERPRETED_PREFIX = "correct under Triton's interpreter"
JUMP_FACTOR = 10
def pools_used_later(plan: Plan, torch_device: str, stops: dict | None = None) -> list[set]:
    """Return, per task of plan, the pool keys that a later task uses (bench/measure/memory.py): a
    pool missing from task i's set is released once task i ends. A revisit pass still to come
    after task i (stops, from revisit_stops) uses the stream family's pools: they are kept
    until the last pass, which re-reads sizes the sweep already made, at the cost of holding
    them through the families in between (the budget still lets them go for a point that
    needs the room, rule 16)."""
    out, seen = [], set()
    for task in reversed(plan.tasks):
        out.append(set(seen))
        seen |= set(task.op.pool_bytes(task.point, torch_device))
    out.reverse()
    last_stop = max(stops or {}, default=-1)
    stream = {k for t in plan.tasks if t.op.family == "stream" for k in t.op.pool_bytes(t.point, torch_device)}
    return [keys | stream if i < last_stop else keys for i, keys in enumerate(out)]
BUSY_SHARE = 0.2   # other processes using this share of all cores make a CPU point unreliable
BUSY_LOAD = 1.25   # ... or, over a window too short to read, a load average above 1.25x the cores


def _rate(op, point, impl, median_s) -> float:
    """Return a point's rate for the jump check: FLOP/s where it does FLOPs, else bytes/s."""
    work = op.flops(point) or (impl.bytes or op.bytes)(point)
    return work / median_s if median_s > 0 else 0.0


def busy_flag(tel: dict, device) -> str:
    """Return the flag of a CPU point measured while other processes used more than
    BUSY_SHARE of the cores ("" otherwise, and always on a GPU, whose kernels the host's load
    does not slow once they are queued)."""
    others, load = tel.get("others_cpu"), tel.get("load1")
    if device.kind != "cpu":
        return ""
    if others is None:  # too short a window to read /proc/stat's ticks: the load average decides
        if load is not None and load > BUSY_LOAD * (device.compute_units or 1):
            return (f"{BUSY_PREFIX}: load average {load:.1f} on "
                    f"{device.compute_units or '?'} cores")
        return ""
    if others <= BUSY_SHARE:
        return ""
    return (f"{BUSY_PREFIX}: other processes used {others:.0%} of its "
            f"{device.compute_units or '?'} cores" + (f" (load average {load:.1f})" if load is not None else ""))


STEAL_SHARE = 0.2  # the hypervisor taking this share of a VM's cores makes a CPU point unreliable


def steal_flag(tel: dict, device) -> str:
    """Return the flag of a CPU point measured while the hypervisor stole more than STEAL_SHARE
    of the cores (/proc/stat's steal, LoadProbe's steal_cpu): no process of this machine, so
    named apart from busy_flag's other processes ("" otherwise, on a GPU, and where unread)."""
    steal = tel.get("steal_cpu")
    if device.kind != "cpu" or steal is None or steal <= STEAL_SHARE:
        return ""
    return f"{STEAL_PREFIX}: the hypervisor took {steal:.0%} of its {device.compute_units or '?'} cores (steal time)"


def direction_columns(op: Op, point: dict, nbytes: int) -> dict:
    """Return read_bytes and write_bytes of a point ({} when the op does not say): the
    op's written bytes (Op.write_bytes, its outputs), the rest of the impl's bytes read."""
    if op.write_bytes is None:
        return {}
    written = int(op.write_bytes(point))
    return {"read_bytes": int(nbytes) - written, "write_bytes": written}


def _detail(fn) -> str:
    """Return what the implementation chose (fn.detail) and how it was tuned (fn.tuning)."""
    parts = [getattr(fn, "detail", ""), getattr(fn, "tuning", "")]
    return "; ".join(p for p in parts if p)


def _free(device: devmod.DeviceInfo):
    if device.kind == "cuda":
        torch.cuda.empty_cache()


def progress_line(m: Measurement) -> str:
    """Return one progress line for a measurement."""
    head = f"{m.impl} {m.dtype} {m.shape} ws={fmt_bytes(m.working_set_bytes)} {m.mode}"
    if m.status == "ok":
        rate = f"{m.gbps:.1f} GB/s" + (f", {m.gflops:.1f} GFLOP/s" if m.flops else "")
        return f"{head}: {rate} (median {m.median_s * 1e6:.1f} us, n={len(m.samples_s)}, {m.stop})"
    return f"{head}: {m.status.upper()} {m.reason}"
