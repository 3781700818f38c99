"""roofbench as a library: measure your own kernel under this device's roofs.

    from bench import api
    roofs = api.roofs_from("results/nvidia-h200-20261129T170947Z")   # or api.quick_roofs()
    r = api.measure(lambda: my_kernel(x, y), flops=2 * n, bytes=8 * n, name="axpy",
                    precision="fp32", roofs=roofs)
    print(r.gflops, r.intensity, r.pct_of_attainable)

    @api.kernel(flops=lambda n: 2 * n, bytes=lambda n: 12 * n, shapes=[2**20, 2**24],
                make_inputs=lambda n, dev: (torch.randn(n, device=dev), torch.randn(n, device=dev)))
    def axpy(x, y):
        return x * 2 + y
    results = axpy.sweep(roofs=roofs)
    api.add_to_run("results/...", results)     # the points join the run's roofline and report

Timing is the suite's one timer (CUDA events, a CUDA graph for warm back-to-back calls,
perf_counter_ns on a CPU), so asynchronous GPU work is waited for. A callable that is
itself a CUDA graph's replay works the same. Under Triton's interpreter a Triton kernel
(backend="triton") is run once and checked, but never timed.
"""
from __future__ import annotations

import json
import math
import sys
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import torch

from bench.hw import detect
from bench.hw.device import DeviceError
from bench.hw.telemetry import LoadProbe
from bench.measure.gate import check
from bench.measure.registry import relative_norm_error
from bench.measure.runner import busy_flag, steal_flag
from bench.measure.timing import make_flush, stats, time_fn, timer_config
from bench.measure.tolerance import tolerance
from bench.ops.gemm import PRECISIONS
from bench.paths import clause, existing
from bench.results import (
    COLUMNS,
    DERIVED,
    Measurement,
    ResultsError,
    append_samples,
    derived_name,
    load_run,
    measured_home,
    rewrite_measurements,
    source_of,
    start_derived,
    utc_stamp,
)
from bench.run import options as opt
from bench.run import profile as profile_mod
from bench.run import profile_counters
from bench.run.given_roofs import QUICK_ROOF_OPS as QUICK_ROOF_OPS  # the API's names, kept importable from here
from bench.run.given_roofs import ForeignRoofsWarning as ForeignRoofsWarning
from bench.run.given_roofs import Roofs as Roofs
from bench.run.given_roofs import RoofWarning as RoofWarning
from bench.run.given_roofs import foreign_note as foreign_note
from bench.run.given_roofs import quick_roofs, roofs_from
from bench.run.options import Parser, refuse
from bench.util import Reason, Refusal, first_line, offchip_level, precision_name, triton_interpreting
from roofs.analysis.bounds import bound_at, point_bound
from roofs.analysis.roofline import Roof, Roofline
from roofs.reports.finish import finish_run


class APIError(Refusal):
    """Bad input to the API: one sentence, naming what was wrong and what would work, and its code
    (count_raised, bad_count, unknown_direction, bytes_mismatch, no_bytes, roofs_unreadable,
    not_a_roof, unknown_precision, no_compute_roof, kernel_raised, input_raised, bad_steps,
    bad_counters, finish_failed; a profile's refusal keeps bench.run.profile's code)."""


@dataclass(frozen=True)
class Result:
    name: str
    shape: str
    flops: float
    bytes: float
    device: str
    mode: str
    backend: str
    precision: str = ""
    status: str = "ok"                  # "ok", "skipped" (interpreter), "error"
    reason: str = ""
    samples_s: tuple = ()
    reps: int = 0
    timer: str = ""
    error: float | None = None          # relative error against reference, when one was given
    roofs: tuple = field(default=(), repr=False)
    caches: tuple = field(default=(), repr=False)   # ((name, total bytes), ...) of the device, innermost first
    read_bytes: float | None = None     # of bytes, those read and those written (None: not given), rule 12
    write_bytes: float | None = None
    flag: str = ""                      # bench.results.BUSY_PREFIX or STEAL_PREFIX...: the cores were not its own

    @property
    def median_s(self) -> float:
        return stats(self.samples_s).median_s if self.samples_s else math.nan

    @property
    def intensity(self) -> float:
        """Return flops / bytes."""
        return self.flops / self.bytes

    @property
    def gflops(self) -> float:
        return self.flops / self.median_s / 1e9

    @property
    def tflops(self) -> float:
        return self.gflops / 1e3

    @property
    def gbps(self) -> float:
        return self.bytes / self.median_s / 1e9

    @property
    def boundary(self) -> str:
        """Return the memory level whose roof bounds this point (the suite's rule,
        roofs.analysis.bounds.boundary_level), "" when that level has no roof among the roofs given."""
        return self._bound()[0]

    @property
    def attainable_gflops(self) -> float | None:
        """Return min(P_precision, BW_boundary x I) from the roofs given, or None when the
        boundary level has no roof."""
        return self._bound()[2]

    def _bound(self):
        level = offchip_level(torch.device(self.device).type)
        return point_bound(Roofline(self.roofs), self.bytes, self.mode, self.intensity, self.precision,
                           list(self.caches), level, self.read_bytes, self.write_bytes)

    @property
    def bound_note(self) -> str:
        """Return why this point has no bound among the roofs given, or why its bound is not
        its own level's or direction's roof ("dram: no measured roof for this level, so no bound":
        a Reason with its code, roofs.analysis.bounds.point_bound's), or "" when neither."""
        return self._bound()[1] if self.roofs else Reason("no roofs given", "no_roofs")

    @property
    def pct_of_attainable(self) -> float | None:
        att = self.attainable_gflops
        return 100 * self.gflops / att if att and self.samples_s else None

    @property
    def attainable_band(self) -> tuple[float, float] | None:
        """Return (low, high) of the attainable bound at the ends of the roofs' intervals (rule
        17: the same level and direction), or None when the roofs have no interval or no bound."""
        level = self._bound()[0]
        if not level:
            return None
        model = Roofline(self.roofs)
        band = [bound_at(model.at(end), level, self.precision, self.intensity, self.read_bytes, self.write_bytes)
                for end in ("low", "high")]
        return None if None in band or band[0] == band[1] else (band[0][0], band[1][0])

    @property
    def pct_of_attainable_band(self) -> tuple[float, float] | None:
        """Return (low, high) of the % of attainable over its bound's band (rule 17): 100 x
        GFLOP/s over the band's top, then over its bottom; None without a band."""
        band = self.attainable_band
        if band is None or not self.samples_s or not all(band):
            return None
        return 100 * self.gflops / band[1], 100 * self.gflops / band[0]

    @property
    def above_bound(self) -> str:
        """Return the finding when even this point's slow end (its p80 time) beats the top of
        its attainable bound's band (rules 12 and 17: cache residency, a wrong count, or a
        roof measured too low), else ""."""
        att = (self.attainable_band or (None, self.attainable_gflops))[1]
        if not att or not self.samples_s:
            return ""
        slow = self.flops / stats(self.samples_s).p80_s / 1e9
        if slow <= att:
            return ""
        return Reason(f"{slow / att - 1:.0%} above its attainable bound of {att:,.1f} GFLOP/s even at p80: its "
                      "working set may sit in a cache its bound does not credit, a count may be too high, or a roof "
                      "was measured low (on a busy machine: measure the roofs again)", "above_bound")

    @property
    def bound(self) -> str:
        """Return "memory" when the boundary level's bandwidth is the lower bound at this
        intensity, "compute" when the precision's roof is, "unknown" without a bound."""
        _, _, att, bw = self._bound()
        if bw is None:
            return "unknown"
        return "memory" if bw.value * self.intensity <= att * (1 + 1e-12) else "compute"

    def measurement(self) -> Measurement:
        """Return this result as a row of the suite's one results schema (family "user")."""
        return Measurement(op=f"user.{self.name}", family="user", impl=f"user.{self.name}/{self.backend}",
                           backend=self.backend, point={"dtype": self.precision, "shape": self.shape},
                           size=0, shape=self.shape, working_set_bytes=int(self.bytes), flops=int(self.flops),
                           bytes=int(self.bytes), mode=self.mode, status=self.status, reason=self.reason,
                           samples_s=self.samples_s, reps=self.reps, timer=self.timer, stop="",
                           error=self.error, precision=self.precision, flag=self.flag,
                           columns={k: v for k, v in (("read_bytes", self.read_bytes),
                                                      ("write_bytes", self.write_bytes))
                                    if v is not None})


def _count(value, shape, what: str, name: str, zero_ok: bool = False) -> float:
    if callable(value):
        try:
            v = value(shape)
        except Exception as e:
            fn = getattr(value, "__name__", type(value).__name__)
            raise APIError(f"the {what} function {fn} of kernel '{name}' raised {first_line(e)} at shape {shape!r}: "
                           f"fix it so that it returns the {what} of one call at that shape.", "count_raised") from None
    else:
        v = value
    if (not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v < 0
            or (v == 0 and not zero_ok)):
        raise APIError(f"{what} of kernel '{name}' must be a {'' if zero_ok else 'positive '}number"
                       f"{' of 0 or more' if zero_ok else ''} (got {v!r})"
                       + (f" at shape {shape!r}" if callable(value) else "") + "; give the compulsory "
                       f"{'traffic in bytes' if 'bytes' in what else 'FLOP count'} of one call.", "bad_count")
    return float(v)


DIRECTIONS = ("read", "write", "copy")


def _split(total: float, read_bytes, write_bytes, direction: str | None, shape, name: str) -> tuple:
    """Return (read bytes, write bytes) of a call moving `total` bytes: as given (either one
    gives the other), or by direction ("read": all read; "write": all written; "copy": half
    each, as stream copy), or (None, None) when neither is given. Raises APIError when they
    do not add up to bytes, or for an unknown direction."""
    if direction is not None and direction not in DIRECTIONS:
        raise APIError(f"unknown direction '{direction}' for kernel '{name}': use read, write or copy, "
                       "or give read_bytes and write_bytes.", "unknown_direction")
    r = None if read_bytes is None else _count(read_bytes, shape, "read_bytes", name, zero_ok=True)
    w = None if write_bytes is None else _count(write_bytes, shape, "write_bytes", name, zero_ok=True)
    if r is None and w is None:
        if direction is None:
            return None, None
        return {"read": (total, 0.0), "write": (0.0, total), "copy": (total / 2, total / 2)}[direction]
    r = total - w if r is None else r
    w = total - r if w is None else w
    if r < 0 or w < 0 or abs(r + w - total) > 1e-9 * total:
        raise APIError(f"read_bytes {r:g} and write_bytes {w:g} of kernel '{name}' do not add up to its bytes "
                       f"{total:g}: "
                       "give the bytes each call reads and writes, which together are its bytes.", "bytes_mismatch")
    return r, w


def _counts(bytes, read_bytes, write_bytes, direction, shape, name: str) -> tuple:
    """Return (bytes, read bytes, write bytes) of one call at shape: bytes as given, split by
    _split; without bytes, read_bytes + write_bytes (both needed: neither gives the other
    without the total). Raises APIError when no byte count is given, or only one part."""
    if bytes is None:
        if read_bytes is None or write_bytes is None:
            given = "read_bytes" if read_bytes is not None else "write_bytes" if write_bytes is not None else ""
            raise APIError(f"kernel '{name}' has no byte count"
                           + (f" (only {given}, which without bytes= does not give the other)" if given else "")
                           + ": give bytes= (the compulsory traffic of one call), or both read_bytes= and "
                           "write_bytes=.", "no_bytes")
        r = _count(read_bytes, shape, "read_bytes", name, zero_ok=True)
        w = _count(write_bytes, shape, "write_bytes", name, zero_ok=True)
        if r + w <= 0:
            raise APIError(f"read_bytes and write_bytes of kernel '{name}' are both 0: give the bytes one call "
                           "reads and writes (together above 0).", "no_bytes")
        return r + w, r, w
    b = _count(bytes, shape, "bytes", name)
    return (b, *_split(b, read_bytes, write_bytes, direction, shape, name))


def _roofs_arg(roofs) -> tuple:
    """Return roofs= as a tuple of Roof: a run folder (a path) is read as roofs_from(it); a
    roofs.json entry (a dict) as its Roof. Raises APIError for anything else."""
    if isinstance(roofs, (str, Path)):
        try:
            return tuple(roofs_from(roofs))
        except ResultsError as e:
            raise APIError(f"roofs={str(roofs)!r} is not a run folder whose roofs can be read ({clause(e)}); give "
                           "api.roofs_from(RUN_DIR), api.quick_roofs() or a list of Roof.",
                           "roofs_unreadable") from None
    out = []
    for r in roofs or ():
        if isinstance(r, dict):
            r = Roof.from_dict(r)
        if not isinstance(r, Roof):
            raise APIError(f"roofs= holds a {type(r).__name__}, not a roof: give a run folder, "
                           "api.roofs_from(RUN_DIR), api.quick_roofs() or a list of Roof.", "not_a_roof")
        out.append(r)
    return tuple(out)


class BusyWarning(UserWarning):
    """A point the API timed while other processes kept the machine's cores busy, or the hypervisor
    took them (steal), its Result's flag."""


def check_precision(precision: str, roofs=()) -> str:
    """Return precision's short name ("float32" -> "fp32"); raise APIError with one sentence
    for an unknown precision, or for one without a compute roof among roofs (when given)."""
    if not precision:
        return ""
    p = precision_name(precision)
    if p not in PRECISIONS:
        raise APIError(f"unknown precision '{precision}': use one of {', '.join(PRECISIONS)} (or float32, bfloat16, "
                       "float16, float64), or '' for a point bounded by bandwidth only.", "unknown_precision")
    roofs = list(roofs)
    have = [r.name for r in roofs if isinstance(r, Roof) and r.kind == "compute" and r.source == "measured"]
    if roofs and p not in have:
        raise APIError(f"the roofs given have no measured {p} compute roof (they have {', '.join(have) or 'none'}): "
                       f"measure one (python run_bench.py --only gemm --dtype {p}) or pass precision='' "
                       "to bound the point by bandwidth only.", "no_compute_roof")
    return p


def tolerance_of(precision: str) -> float:
    """Return the gate's tolerance for a precision: the suite's per-precision table
    (bench/measure/tolerance.py); "" counts as fp32. Raises APIError for an unknown one."""
    try:
        return tolerance(precision or "fp32")
    except KeyError as e:
        raise APIError(f"{e.args[0]}, or give tolerance=.", "unknown_precision") from None


def _error(out, ref, inputs) -> float:
    return relative_norm_error(torch.as_tensor(out), ref, inputs)


def measure(fn: Callable[[], object], *, flops, bytes=None, name: str = "kernel", shape="", device: str | None = None,
            precision: str = "", mode: str = "warm", roofs: Iterable[Roof] = (), reference=None,
            backend: str = "torch", budget_s: float = 0.3, tolerance: float | None = None,
            read_bytes=None, write_bytes=None, direction: str | None = None) -> Result:
    """Return the Result of timing fn() (a zero-argument callable, inputs already allocated)
    with the suite's timer on device (default: the first GPU, else the CPU).

    flops and bytes are the counts of one call: numbers, or functions of shape (bytes may be
    left out when read_bytes and write_bytes are both given: bytes = read + write). reference,
    when given, is the expected output: fn()'s result passes the suite's correctness gate
    first (relative norm error in float64 within the precision's tolerance, or tolerance),
    and a wrong result is an error, never timed. read_bytes and write_bytes (numbers or
    functions of shape; either gives the other), or direction ("read", "write", "copy"),
    split bytes by direction so the point is bounded by its level's direction roof (rule 12),
    as the suite's own kernels are; without them, by the level's best. roofs: a list of Roof
    (api.roofs_from, api.quick_roofs) or a run folder. A point timed while other processes
    kept the cores busy, or while the hypervisor stole them, carries the runner's flag (busy or
    steal) and is warned of (BusyWarning).
    Raises APIError for bad input or a callable that raises (one sentence)."""
    precision = check_precision(precision, roofs := _roofs_arg(roofs))
    info = detect.resolve(device)
    f = _count(flops, shape, "flops", name)
    b, rb, wb = _counts(bytes, read_bytes, write_bytes, direction, shape, name)
    base = dict(name=name, shape=str(shape), flops=f, bytes=b, device=info.torch_device, mode=mode,
                read_bytes=rb, write_bytes=wb,
                caches=tuple((c.name, c.total_bytes) for c in info.caches),
                backend=backend, precision=precision, roofs=tuple(roofs))
    ref = None
    if reference is not None:
        tolerance = tolerance_of(precision) if tolerance is None else tolerance
        ref = torch.as_tensor(reference).double()
    try:
        gate = check(lambda: fn, ref, tolerance, info, error=_error)
    except Exception as e:
        raise APIError(f"kernel '{name}' raised {first_line(e)}; nothing was timed.", "kernel_raised") from None
    if not gate.passed:
        return Result(**base, status="error", error=gate.error, reason=gate.reason)
    if backend == "triton" and triton_interpreting():
        return Result(**base, status="skipped", error=gate.error,
                      reason="checked under Triton's interpreter; interpreter timings are never reported")
    flush = None
    if mode == "cold":
        flush = make_flush(info.torch_device, info.llc_bytes)
    probe = LoadProbe().start()
    t = time_fn(fn, info.torch_device, mode, timer_config(False, budget_s, warmup_s=min(0.05, budget_s / 4)), flush)
    load = probe.stop()  # the runner's rules: a CPU point while others used the cores, or the hypervisor took them
    flag = "; ".join(f for f in (busy_flag(load, info), steal_flag(load, info)) if f)
    if flag:
        warnings.warn(f"kernel '{name}' at shape {shape!r}: {flag}; its figure may be low (run it on a quiet machine)",
                      BusyWarning, stacklevel=2)
    return Result(**base, samples_s=t.samples_s, reps=t.reps, timer=t.method, error=gate.error, flag=flag)


@dataclass
class Kernel:
    """A function with its counts and a shape sweep; calling it calls the function."""
    fn: Callable
    flops: object
    bytes: object
    shapes: tuple
    make_inputs: Callable       # (shape, torch_device) -> tuple of arguments
    precision: str = ""
    name: str = ""
    reference: Callable | None = None   # (*inputs) -> expected output
    backend: str = "torch"
    read_bytes: object = None           # numbers or functions of the shape (measure's)
    write_bytes: object = None
    direction: str | None = None

    def __call__(self, *args, **kw):
        return self.fn(*args, **kw)

    def _call(self, what: str, fn, shape, *args):
        """Return fn(*args), the user's make_inputs or reference at shape; an error in it is
        the caller's mistake, named with the function and the shape (APIError)."""
        try:
            return fn(*args)
        except Exception as e:
            raise APIError(f"the {what} function {getattr(fn, '__name__', what)} of kernel '{self.name}' raised "
                           f"{first_line(e)} at shape {shape!r}; nothing was timed.", "input_raised") from None

    def sweep(self, device: str | None = None, roofs: Iterable[Roof] = (), mode: str = "warm",
              budget_s: float = 0.3) -> list[Result]:
        """Return one Result per shape. A shape whose call raises becomes an error Result and
        the sweep goes on, so nothing already measured is lost."""
        roofs = _roofs_arg(roofs)
        check_precision(self.precision, roofs)  # the caller's mistake: stops the sweep before it starts
        info = detect.resolve(device)
        out = []
        for shape in self.shapes:
            # bad counts are the caller's mistake and stop the sweep; a failing call does not
            _count(self.flops, shape, "flops", self.name)
            _counts(self.bytes, self.read_bytes, self.write_bytes, self.direction, shape, self.name)
            args = self._call("make_inputs", self.make_inputs, shape, shape, info.torch_device)
            ref = self._call("reference", self.reference, shape, *args) if self.reference else None
            try:
                out.append(measure(lambda a=args: self.fn(*a), flops=self.flops, bytes=self.bytes, name=self.name,
                                   shape=shape, device=device, precision=self.precision, mode=mode, roofs=roofs,
                                   reference=ref, backend=self.backend, budget_s=budget_s, read_bytes=self.read_bytes,
                                   write_bytes=self.write_bytes, direction=self.direction))
            except APIError as e:
                out.append(Result(self.name, str(shape), 0.0, 1.0, info.torch_device, mode, self.backend,
                                  self.precision, status="error", reason=str(e)))
        return out


def kernel(*, flops, shapes, make_inputs, bytes=None, precision: str = "", name: str | None = None,
           reference: Callable | None = None, backend: str = "torch", read_bytes=None, write_bytes=None,
           direction: str | None = None):
    """Decorator: attach counts (numbers or functions of the shape; bytes split by
    read_bytes/write_bytes or direction as in measure) and a shape sweep to a function."""
    def wrap(fn):
        return Kernel(fn, flops, bytes, tuple(shapes), make_inputs, precision, name or fn.__name__, reference, backend,
                      read_bytes, write_bytes, direction)
    return wrap


def add_to_run(run_dir, results: Iterable[Result], out=None, in_place: bool = False, charts: bool = True) -> Path:
    """Add results (family "user") to a run: into a derived folder beside it, by default
    RUN/derived/<method>-<commit>-user-<UTC timestamp>/ (or `out`), holding the run's rows
    and these, their samples, and the roofs, pictures and report re-derived from them; the
    run's own files stay as it wrote them. An `out` that an earlier add_to_run wrote (a
    derived folder holding its own samples) gets these appended to its points, so one sweep
    after another stays in one folder. in_place=True writes into the run's own folder
    instead (your own run only). charts=False writes the roofs and report without pictures
    (seconds of CPU less). Returns the folder written."""
    run_dir = existing(run_dir)
    ms = [r.measurement() for r in results]
    earlier = out is not None and source_of(out) is not None and measured_home(out) == Path(out).resolve()
    if in_place or earlier:
        target = run_dir if in_place else Path(out)
    else:
        target = start_derived(run_dir,
                               out or measured_home(run_dir) / DERIVED / f"{derived_name()}-user-{utc_stamp()}")
    run = load_run(run_dir if in_place or not earlier else target)
    df = pd.concat([run.measurements, pd.DataFrame([m.row() for m in ms], columns=COLUMNS)], ignore_index=True)
    append_samples(target, ms)  # the target's own samples file (the run's and these) and its point count
    rewrite_measurements(target, df)
    problems = finish_run(target, charts)
    if problems:
        raise APIError(problems[0], "finish_failed")
    return target


@dataclass(frozen=True)
class Profile:
    """A profiled program (bench.run.profile): its folder (ops.csv, profile.json, roofline.svg/.png,
    profile.md/.html) and the ranked text printed for it; `ops` reads its placed ops."""
    folder: Path
    text: str

    @property
    def ops(self) -> pd.DataFrame:
        return pd.read_csv(self.folder / "ops.csv")

    @property
    def record(self) -> dict:
        return json.loads((self.folder / "profile.json").read_text())


def _say(line: str) -> None:
    """Print a progress line of the profile's counters to stderr (the ranked text is the result)."""
    print(line, file=sys.stderr)


def _profile_roofs(roofs, info) -> tuple[list, str, Path | None, list]:
    """Return (the roofs a profile places its ops under, where they came from, the run folder or None, notes):
    a run folder (path) through roofs_from (another machine's roofs warned of and noted), a list of Roof as
    given, None measured now (quick_roofs; the roofs it could not set noted)."""
    if roofs is None:
        measured = quick_roofs(info.torch_device)
        return (list(measured), "measured on the spot before the capture (api.quick_roofs)", None,
                [f"quick_roofs set no {m}" for m in measured.missing])
    if isinstance(roofs, (str, Path)):
        try:
            found = roofs_from(roofs, info.torch_device)
        except ResultsError as e:
            raise APIError(f"roofs {str(roofs)!r} is not a run folder ({clause(e)}): give a folder a run of "
                           "python run_bench.py wrote, or no roofs to measure them now.", "roofs_unreadable") from None
        return list(found), f"of the run {roofs}", existing(roofs), [found.foreign] if found.foreign else []
    return list(_roofs_arg(roofs)), "given to api.profile", None, []


def profile(fn: Callable, *args, roofs=None, steps: int = 5, out=None, device: str | None = None,
            name: str | None = None, counters: int | None = None, **kwargs) -> Profile:
    """Return the Profile of fn(*args, **kwargs) as one step: warmed up, `steps` steps captured with
    torch.profiler, each op counted (FlopCounterMode's formulas, bytes read and written) and placed under
    roofs (a run folder, a list of Roof, or None: api.quick_roofs now), into out (default
    results/profile-<name>-<UTC timestamp>/, never inside the roofs' run folder). counters=N: the top N ops'
    DRAM bytes read under Nsight Compute over one more step, replayed in a process of its own
    (bench/run/profile_counters.py: fn must be a module-level function with arguments torch.save can write),
    or one sentence in the text saying why none could be read. Raises APIError with one sentence for bad
    input, a step that raises or one that runs no op."""
    program = name or getattr(fn, "__name__", "program")
    target = profile_counters.call_target(fn, args, kwargs, program)
    return _profile(lambda: fn(*args, **kwargs), program, roofs, steps, out, device, {}, counters, target)


def profile_script(path, argv=(), roofs=None, steps: int = 5, out=None, device: str | None = None,
                   counters: int | None = None) -> Profile:
    """Return the Profile of the script at path run as __main__ with argv, the whole script one step
    (profile's rules; counters=N replays the script once more under Nsight Compute)."""
    try:  # a relative path missing here is the checkout's (bench.paths.existing)
        step = profile_mod.script_step((path := existing(path)), list(argv))
    except profile_mod.ProfileError as e:
        raise APIError(str(e), e.code) from None
    return _profile(step, Path(path).name, roofs, steps, out, device, {"script": str(path), "argv": list(argv)},
                    counters, profile_counters.script_target(path, list(argv)))


def _profile(step, program, roofs, steps, out, device, meta, counters=None, target=None) -> Profile:
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        raise APIError(f"steps={steps!r} captures nothing: give 1 or more steps.", "bad_steps")
    if counters is not None and (not isinstance(counters, int) or isinstance(counters, bool) or counters < 1):
        raise APIError(f"counters={counters!r} reads no op's counters: give a whole number of 1 or more ops, or "
                       "leave counters out.", "bad_counters")
    info = detect.resolve(device)
    roofs, given, run_dir, notes = _profile_roofs(roofs, info)
    slug = "".join(c if c.isalnum() else "-" for c in Path(program).stem.lower()).strip("-") or "program"
    folder = Path(out) if out else Path(__file__).resolve().parent.parent / "results" / f"profile-{slug}-{utc_stamp()}"
    try:
        profile_mod.outside_run(folder, run_dir)
        hook = (lambda cap: profile_counters.attach(cap, counters, info, target, _say, program)) if counters else None
        folder, text = profile_mod.profile_into(step, folder, roofs, info, given, steps, program,
                                                {**meta, "roof_notes": notes}, hook)
    except profile_mod.ProfileError as e:
        raise APIError(str(e), e.code) from None
    return Profile(folder, text)


def profile_main(argv) -> int:
    """python run_bench.py profile SCRIPT.py [ARGS ...] [--roofs RUN_DIR] [--steps N] [--out DIR] [--counters [N]]
    [-- ARGS]: the command over profile_script, its Profile's text printed."""
    p = Parser(prog="run_bench.py profile", description="run SCRIPT.py as __main__, capture its ops with "
               "torch.profiler and place each under the roofs (bench/run/profile.py); arguments it does not know "
               "go to the script, and everything after -- does")
    p.add_argument("script", type=existing)
    p.add_argument("--roofs", type=existing, help="a run folder whose roofs to use (default: measure them now, quick)")
    p.add_argument("--steps", type=int, default=5, help="steps captured after the warm-up (default 5)")
    p.add_argument("--out", type=Path, help="the profile folder (default results/profile-<script>-<UTC timestamp>)")
    p.add_argument("--device")
    p.add_argument("--counters", nargs="?", type=opt.whole_number, const=profile_counters.DEFAULT_OPS, metavar="N",
                   help=f"after the capture, the top N ops' (default {profile_counters.DEFAULT_OPS}) DRAM bytes read "
                   "under a hardware-counter profiler (NVIDIA's ncu) over one more step, beside their counted bytes")
    split = argv.index("--") if "--" in argv else len(argv)
    args, rest = p.parse_known_args(argv[:split])
    try:
        if args.out:
            opt.writable_folder(args.out, "--out")
        if args.counters:  # the run's up-front note where counters cannot be read: the profile still runs
            note = opt.counters_note(args, detect.resolve(args.device), "the profile runs as usual")
            if note:
                print(f"roofbench: {note}", file=sys.stderr)
        with warnings.catch_warnings():  # another machine's roofs, a roof quick_roofs missed: in the printed text
            warnings.simplefilter("ignore", ForeignRoofsWarning)
            warnings.simplefilter("ignore", RoofWarning)
            result = profile_script(args.script, rest + argv[split + 1:], args.roofs, args.steps, args.out,
                                    args.device, args.counters)
    except (APIError, opt.OptionError, DeviceError) as e:
        return refuse(e)
    print(result.text)
    print(f"\nprofile: {result.folder / 'profile.md'} and profile.html, roofline.svg")
    return 0
