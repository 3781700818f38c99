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
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

import pandas as pd
import torch

from bench.hw import detect
from bench.measure.gate import check
from bench.measure.registry import load_all, relative_norm_error
from bench.measure.runner import Runner, Task
from bench.measure.timing import make_flush, stats, time_fn, timer_config
from bench.ops.gemm import PRECISIONS
from bench.results import (COLUMNS, DERIVED, Measurement, append_samples, derived_name, load_run, rewrite_measurements,
                           source_of, start_derived, utc_stamp)
from bench.util import first_line, precision_name, triton_interpreting
from roofs.analysis.bounds import point_bound
from roofs.analysis.derive import bandwidth_roofs, compute_roofs, untrusted_text
from roofs.analysis.roofline import Roof, Roofline
from roofs.reports.finish import finish_run


class APIError(ValueError):
    """Bad input to the API: one sentence, naming what was wrong and what would work."""


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
        level = "hbm" if self.device.startswith("cuda") else "dram"
        return point_bound(Roofline(self.roofs), self.bytes, self.mode, self.intensity, self.precision,
                           list(self.caches), level)

    @property
    def bound_note(self) -> str:
        """Return why this point has no bound among the roofs given ("dram: no measured roof
        for this level, so no bound"), or "" when it has one."""
        return self._bound()[1] if self.roofs else "no roofs given"

    @property
    def pct_of_attainable(self) -> float | None:
        att = self.attainable_gflops
        return 100 * self.gflops / att if att and self.samples_s else None

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
                           error=self.error, precision=self.precision)


def _count(value, shape, what: str, name: str) -> float:
    v = value(shape) if callable(value) else value
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v <= 0:
        raise APIError(f"{what} of kernel '{name}' must be a positive number (got {v!r}); "
                       f"give the compulsory {'traffic in bytes' if what == 'bytes' else 'FLOP count'} of one call.")
    return float(v)


class Roofs(list):
    """A list of Roof, with `missing`: one sentence per roof that could not be set, and why."""

    def __init__(self, roofs=(), missing=()):
        super().__init__(roofs)
        self.missing = list(missing)


class RoofWarning(UserWarning):
    """A roof quick_roofs() could not set (also listed in its result's `missing`)."""


def roofs_from(run_dir) -> Roofs:
    """Return the roofs of a run folder (measured, datasheet and computed); `missing` holds
    roofs.json's notes on the levels and precisions that got none."""
    run = load_run(run_dir)
    path = Path(run_dir) / "roofs.json"
    notes = json.loads(path.read_text()).get("notes", []) if path.exists() else []
    return Roofs([Roof.from_dict(r) for r in run.roofs], notes)


QUICK_PRECISIONS = ("fp32", "bf16")


def quick_roofs(device: str | None = None, budget_s: float = 0.05) -> Roofs:
    """Measure roofs on the spot: the memory roof from stream copy and read at working sets
    4x and 8x the last-level cache, and the fp32 and bf16 compute roofs from a few square
    GEMMs (torch). Seconds on a GPU; tens of seconds on a 2-core CPU VM.
    A roof it could not set (rows that did not converge on a busy machine, a precision the
    device lacks) is named in the result's `missing`, with why, and warned of (RoofWarning)."""

    info = detect.resolve(device)
    reg = load_all()
    llc = info.llc_bytes
    tasks = [Task(reg.ops[f"stream.{k}"], {"dtype": "float32", "ws_bytes": f * llc}, (reg.impls[f"stream.{k}/torch"],))
             for k in ("copy", "read") for f in (4, 8)]
    sizes = (1024, 2048) if info.kind == "cpu" else (4096, 8192)
    tasks += [Task(reg.ops["gemm.square"], {"dtype": p, "shape": (n, n, n)}, (reg.impls["gemm.square/torch"],))
              for p in ("fp32", "bf16") for n in sizes]
    runner = Runner(info, timer_config(False, budget_s, warmup_s=0.01))
    rows = pd.DataFrame([m.row() for t in tasks for m in runner.run_task(t, ("warm",))])
    roofs, notes = bandwidth_roofs(rows, [(c.name, c.total_bytes) for c in info.caches[-1:]], info.memory_level)
    roofs = [r for r in roofs if r.name == info.memory_level]  # the quick sweep measures no cache plateau
    compute = compute_roofs(rows)
    missing = []
    if not roofs:
        why = next((n for n in notes if n.startswith(f"{info.memory_level}:")), "")
        busy = next((n.split(": ", 1)[1] for n in notes if n.startswith("stream rows that set no roof")), "")
        missing.append(f"{info.memory_level} roof: " + "; ".join(x for x in (why.split(": ", 1)[-1], busy) if x))
    for p in QUICK_PRECISIONS:
        if not any(r.name == p for r in compute):
            g = rows[(rows["family"] == "gemm") & (rows["dtype"] == p)]
            reasons = sorted(set(g.loc[g["status"] != "ok", "reason"].dropna().astype(str)))
            missing.append(f"{p} roof: " + ("; ".join(reasons) if reasons else
                                            f"of its {len(g)} GEMM rows, {untrusted_text(g)}"))
    for m in missing:
        warnings.warn(f"quick_roofs could not set the {m}", RoofWarning, stacklevel=2)
    return Roofs(roofs + compute, missing)


def check_precision(precision: str, roofs=()) -> str:
    """Return precision's short name ("float32" -> "fp32"); raise APIError with one sentence
    for an unknown precision, or for one without a compute roof among roofs (when given)."""
    if not precision:
        return ""
    p = precision_name(precision)
    if p not in PRECISIONS:
        raise APIError(f"unknown precision '{precision}': use one of {', '.join(PRECISIONS)} (or float32, bfloat16, "
                       "float16, float64), or '' for a point bounded by bandwidth only.")
    roofs = list(roofs)
    have = [r.name for r in roofs if isinstance(r, Roof) and r.kind == "compute" and r.source == "measured"]
    if roofs and p not in have:
        raise APIError(f"the roofs given have no measured {p} compute roof (they have {', '.join(have) or 'none'}): "
                       f"measure one (python run_bench.py --only gemm --dtype {p}) or pass precision='' "
                       "to bound the point by bandwidth only.")
    return p


def tolerance_of(precision: str) -> float:
    """Return the gate's tolerance for a precision: the suite's per-precision table (the GEMM
    precisions, bench/ops/gemm.py); "" counts as fp32. Raises APIError for an unknown one."""
    p = PRECISIONS.get(precision or "fp32")
    if p is None:
        raise APIError(f"no tolerance is known for precision '{precision}': use one of {', '.join(PRECISIONS)}, "
                       "or give tolerance=.")
    return p.tolerance


def _error(out, ref, inputs) -> float:
    return relative_norm_error(torch.as_tensor(out), ref, inputs)


def measure(fn: Callable[[], object], *, flops, bytes, name: str = "kernel", shape="", device: str | None = None,
            precision: str = "", mode: str = "warm", roofs: Iterable[Roof] = (), reference=None,
            backend: str = "torch", budget_s: float = 0.3, tolerance: float | None = None) -> Result:
    """Return the Result of timing fn() (a zero-argument callable, inputs already allocated)
    with the suite's timer on device (default: the first GPU, else the CPU).

    flops and bytes are the counts of one call: numbers, or functions of shape. reference,
    when given, is the expected output: fn()'s result passes the suite's correctness gate
    first (relative norm error in float64 within the precision's tolerance, or tolerance),
    and a wrong result is an error, never timed. Raises APIError for bad input or a
    callable that raises (one sentence)."""
    precision = check_precision(precision, roofs := tuple(roofs))
    info = detect.resolve(device)
    f, b = _count(flops, shape, "flops", name), _count(bytes, shape, "bytes", name)
    base = dict(name=name, shape=str(shape), flops=f, bytes=b, device=info.torch_device, mode=mode,
                caches=tuple((c.name, c.total_bytes) for c in info.caches),
                backend=backend, precision=precision, roofs=tuple(roofs))
    ref = None
    if reference is not None:
        tolerance = tolerance_of(precision) if tolerance is None else tolerance
        ref = torch.as_tensor(reference).double()
    try:
        gate = check(lambda: fn, ref, tolerance, info, error=_error)
    except Exception as e:
        raise APIError(f"kernel '{name}' raised {first_line(e)}; nothing was timed.") from None
    if not gate.passed:
        return Result(**base, status="error", error=gate.error, reason=gate.reason)
    if backend == "triton" and triton_interpreting():
        return Result(**base, status="skipped", error=gate.error,
                      reason="checked under Triton's interpreter; interpreter timings are never reported")
    flush = None
    if mode == "cold":
        flush = make_flush(info.torch_device, info.llc_bytes)
    t = time_fn(fn, info.torch_device, mode, timer_config(False, budget_s, warmup_s=min(0.05, budget_s / 4)), flush)
    return Result(**base, samples_s=t.samples_s, reps=t.reps, timer=t.method, error=gate.error)


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

    def __call__(self, *args, **kw):
        return self.fn(*args, **kw)

    def sweep(self, device: str | None = None, roofs: Iterable[Roof] = (), mode: str = "warm",
              budget_s: float = 0.3) -> list[Result]:
        """Return one Result per shape. A shape whose call raises becomes an error Result and
        the sweep goes on, so nothing already measured is lost."""
        roofs = tuple(roofs)
        check_precision(self.precision, roofs)  # the caller's mistake: stops the sweep before it starts
        info = detect.resolve(device)
        out = []
        for shape in self.shapes:
            # bad counts are the caller's mistake and stop the sweep; a failing call does not
            _count(self.flops, shape, "flops", self.name), _count(self.bytes, shape, "bytes", self.name)
            args = self.make_inputs(shape, info.torch_device)
            ref = self.reference(*args) if self.reference else None
            try:
                out.append(measure(lambda a=args: self.fn(*a), flops=self.flops, bytes=self.bytes, name=self.name,
                                   shape=shape, device=device, precision=self.precision, mode=mode, roofs=roofs,
                                   reference=ref, backend=self.backend, budget_s=budget_s))
            except APIError as e:
                out.append(Result(self.name, str(shape), 0.0, 1.0, info.torch_device, mode, self.backend,
                                  self.precision, status="error", reason=str(e)))
        return out


def kernel(*, flops, bytes, shapes, make_inputs, precision: str = "", name: str | None = None,
           reference: Callable | None = None, backend: str = "torch"):
    """Decorator: attach counts (numbers or functions of the shape) and a shape sweep to a function."""
    def wrap(fn):
        return Kernel(fn, flops, bytes, tuple(shapes), make_inputs, precision, name or fn.__name__, reference, backend)
    return wrap


def add_to_run(run_dir, results: Iterable[Result], out=None, in_place: bool = False) -> Path:
    """Add results (family "user") to a run: into a derived folder beside it, by default
    RUN/derived/<method>-<commit>-user-<UTC timestamp>/ (or `out`), holding the run's rows
    and these, their samples, and the roofs, pictures and report re-derived from them; the
    run's own files stay as it wrote them. in_place=True writes into the run's own folder
    instead (your own run only). Returns the folder written."""

    run_dir = Path(run_dir)
    run = load_run(run_dir)
    ms = [r.measurement() for r in results]
    if in_place:
        target = run_dir
    else:
        src = source_of(run_dir) or run_dir
        target = start_derived(run_dir, out or src / DERIVED / f"{derived_name()}-user-{utc_stamp()}")
    df = pd.concat([run.measurements, pd.DataFrame([m.row() for m in ms], columns=COLUMNS)], ignore_index=True)
    append_samples(target, ms)  # the target's own samples file (the run's and these) and its point count
    rewrite_measurements(target, df)
    problems = finish_run(target)
    if problems:
        raise APIError(problems[0])
    return target
