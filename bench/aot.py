"""Ahead-of-time compile of every Triton kernel the suite launches, for a GPU that is not here.

    python -m bench.aot --arch sm_90 [--quick] [--only gemm,gemv,...] [--workers N] [--every-spec]

The plan is the run's own: the registry's ops, their GPU sweeps (for a device of the
arch: its SM count and L2 size from ARCHS), every Triton impl's skips (decided before
anything compiles, as a run decides them), and each tuned impl's Tuning (its candidates,
pruned by the kernel module's shared-memory model against the arch's limit, at most 3
that fit in a quick run, exactly as bench/ops/_tune.py prunes them). Inputs are made on
torch's "meta" device (shapes, dtypes and strides, no memory), and each candidate's
callable is called with the kernels replaced by recorders, so the launch arguments are
the ones the host wrappers really pass. A launch becomes one compile job: the kernel,
its signature (pointer dtypes, integer widths), its constexprs and its integer
specializations (an integer equal to 1 becomes a constant; one divisible by 16, and every
pointer, is marked 16-aligned), and num_warps / num_stages.

One row per (kernel, dtype, configuration). A configuration can be launched with several
integer specializations (M = 1, M = 4 and M = 4096 are three compiles of one GEMM tile);
the row compiles the one most points use and counts the others (--every-spec compiles them
all). The jobs run in a process pool (spawned, so that Triton's interpreter, which the
tests switch on, stays off in the workers), each in a fresh Triton cache, so the
seconds are real compiles. Per row: the model's and the compiler's shared memory,
registers and spills (ptxas's own report of the compile), and the compile time (wall, and
CPU: the compiler and its ptxas, steadier on a shared machine).

Statuses: ok; pruned (the model says it exceeds the arch's shared memory: never
compiled); skipped (the run skips it before compiling, e.g. fp8 before sm_89); failed
(the compile raised, or its shared memory exceeds the arch's limit, so it would not launch).
"""
from __future__ import annotations

import argparse
import contextlib
import inspect
import os
import re
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from unittest import mock

import torch

from bench.ops._tune import QUICK_CANDIDATES, SMEM_LIMIT, launched
from bench.registry import LaunchContext
from bench.runner import quick_skip

KERNEL_MODULES = ("kernels.stream", "kernels.gemm", "kernels.gemm_tma", "kernels.gemv", "kernels.attention",
                  "kernels.probes", "kernels.fma")
FAMILIES = ("stream", "gemm", "gemv", "attention", "probe", "fma")


@dataclass(frozen=True)
class Arch:
    """A compile target and the device facts its sweeps depend on."""
    cc: int                 # compute capability x 10: 90 for sm_90
    sms: int                # SM count of the example part (sets decode's split count)
    l2_bytes: int           # L2 of the example part (sets the stream sweep)
    example: str

    @property
    def smem_limit(self) -> int:
        return SMEM_LIMIT[(self.cc // 10, self.cc % 10)]


ARCHS = {
    "sm_80": Arch(80, 108, 40 * 2**20, "A100"),
    "sm_86": Arch(86, 84, 6 * 2**20, "RTX 3090"),
    "sm_89": Arch(89, 142, 96 * 2**20, "L40S"),
    "sm_90": Arch(90, 132, 50 * 2**20, "H100 SXM / H200"),
    "sm_100": Arch(100, 148, 126 * 2**20, "B200"),
}

# Torch dtypes as Triton names them in a signature.
TRITON_TYPE = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32", torch.float64: "fp64",
               torch.int8: "i8", torch.uint8: "u8", torch.int16: "i16", torch.int32: "i32", torch.int64: "i64",
               torch.float8_e4m3fn: "fp8e4nv", torch.float8_e5m2: "fp8e5", torch.bool: "i1"}
# Constexprs that follow from the dtype, not the tile: left out of the configuration label.
DTYPE_CONSTEXPRS = {"FMT", "GROUP", "INT_ACC", "INPUT_PRECISION", "HAS_SCALE", "PRECISION"}


def fake_device(arch: str):
    """Return a DeviceInfo of a GPU of this arch, for the sweeps and the skips."""
    from bench.device import CacheLevel, DeviceInfo
    a = ARCHS[arch]
    return DeviceInfo(kind="cuda", torch_device="meta", name=f"{a.example} ({arch}, ahead of time)",
                      memory_bytes=None, compute_units=a.sms, compute_unit_kind="SMs",
                      caches=(CacheLevel("l2", a.l2_bytes),),
                      compute_capability=f"{a.cc // 10}.{a.cc % 10}")


# ---- launches -> compile jobs -----------------------------------------------------------------

def int_spec(v: int) -> tuple[str, bool]:
    """Return (Triton type, 16-divisible) for an integer argument the way Triton's launcher
    specializes it: 1 is a constant, |v| >= 2**31 is i64, else i32; divisible by 16 is marked."""
    if v == 1:
        return "constexpr", False
    return ("i64" if not -2**31 <= v < 2**31 else "i32"), v % 16 == 0


def constexpr_names(kernel) -> set:
    """Return the names of a kernel's tl.constexpr parameters (JIT or interpreted)."""
    fn = getattr(kernel, "fn", kernel)
    out = set()
    for name, p in inspect.signature(fn).parameters.items():
        ann = p.annotation
        if ann is not inspect.Parameter.empty and "constexpr" in str(getattr(ann, "__name__", ann)):
            out.add(name)
    return out


@dataclass
class Launch:
    module: str
    kernel: str
    args: tuple
    kwargs: dict


class _Recorder:
    """Stands in for a kernel: kernel[grid](*args, **kwargs) records the call, launches nothing."""

    def __init__(self, module, name, log):
        self.module, self.name, self.log = module, name, log

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.log.append(Launch(self.module, self.name, args, kwargs))


def _kernels():
    """Return {(module, name): kernel object} of every Triton kernel in KERNEL_MODULES."""
    import importlib
    out = {}
    for modname in KERNEL_MODULES:
        mod = importlib.import_module(modname)
        for name, obj in vars(mod).items():
            if hasattr(obj, "arg_names") and hasattr(obj, "run") and name.endswith("_kernel"):
                out[(modname, name)] = obj
    return out


@contextlib.contextmanager
def recording(log: list):
    """Replace every suite kernel by a recorder that appends its launches to log."""
    import importlib
    with contextlib.ExitStack() as stack:
        for (modname, name) in _kernels():
            stack.enter_context(mock.patch.object(importlib.import_module(modname), name,
                                                  _Recorder(modname, name, log)))
        yield


@contextlib.contextmanager
def meta_inputs():
    """Let the ops' make_inputs build their tensors on the meta device: torch's random
    functions there take no generator (the values are never needed, only shapes, dtypes
    and strides)."""
    real_randn, real_randint = torch.randn, torch.randint

    class _Generator:
        def __init__(self, device=None):
            pass

        def manual_seed(self, seed):
            return self

    def randn(*a, generator=None, **kw):
        return real_randn(*a, **kw)

    def randint(*a, generator=None, **kw):
        return real_randint(*a, **kw)

    with mock.patch.object(torch, "Generator", _Generator), mock.patch.object(torch, "randn", randn), \
            mock.patch.object(torch, "randint", randint):
        yield


def job_of(launch: Launch, kernel, cc: int) -> dict:
    """Return the compile job of a recorded launch: signature, constexprs, 16-aligned
    arguments and options, all by argument name (picklable, version-neutral)."""
    names = list(kernel.arg_names)
    declared = constexpr_names(kernel)
    kwargs = dict(launch.kwargs)
    options = {k: kwargs.pop(k) for k in ("num_warps", "num_stages") if k in kwargs}
    values = dict(zip(names, launch.args))
    values.update(kwargs)
    missing = [n for n in names if n not in values]
    if missing:
        params = inspect.signature(getattr(kernel, "fn", kernel)).parameters
        for n in missing:
            values[n] = params[n].default
    signature, constexprs, aligned, specialized = {}, {}, [], []
    for n in names:
        v = values[n]
        if n in declared:
            signature[n], constexprs[n] = "constexpr", v
        elif isinstance(v, torch.Tensor):
            signature[n] = "*" + TRITON_TYPE[v.dtype]
            aligned.append(n)  # allocations are 256-byte aligned; the suite passes no offset views
        elif isinstance(v, bool):
            signature[n] = "i1"
        elif isinstance(v, int):
            t, div16 = int_spec(v)
            signature[n] = t
            if t == "constexpr":
                constexprs[n] = v
                specialized.append(n)
            elif div16:
                aligned.append(n)
        elif isinstance(v, float):
            signature[n] = "fp32"
        else:
            raise TypeError(f"{launch.kernel}: argument {n} is a {type(v).__name__}, which the AOT compile cannot type")
    return {"module": launch.module, "kernel": launch.kernel, "signature": signature, "constexprs": constexprs,
            "aligned": aligned, "specialized": specialized, "options": options, "cc": cc}


def config_label(job: dict) -> str:
    """Return the configuration of a job: its tile constexprs (BLOCK_ prefixes dropped), warps, stages."""
    parts = [f"{k.replace('BLOCK_', '')}{'' if isinstance(v, int) else '='}{v}"
             for k, v in job["constexprs"].items()
             if k not in DTYPE_CONSTEXPRS and k not in job["specialized"]]
    o = job["options"]
    parts.append(f"w{o.get('num_warps', 4)}")
    if "num_stages" in o:
        parts.append(f"s{o['num_stages']}")
    return " ".join(parts)


def spec_key(job: dict) -> tuple:
    """Return what makes two jobs of one configuration separate compiles."""
    return (tuple(sorted(job["signature"].items())), tuple(sorted(job["aligned"])),
            tuple(sorted((k, repr(v)) for k, v in job["constexprs"].items())))


# ---- the plan --------------------------------------------------------------------------------

@dataclass
class Row:
    kernel: str
    dtype: str
    config: str
    status: str                     # ok, pruned, skipped, failed (after compiling: ok or failed)
    reason: str = ""
    model_smem: int | None = None
    specs: Counter = field(default_factory=Counter)   # spec_key -> launches (points x candidates)
    jobs: dict = field(default_factory=dict)          # spec_key -> job
    results: dict = field(default_factory=dict)       # spec_key -> compile result
    order: int = 0

    @property
    def job(self) -> dict | None:
        """Return the job of the specialization most launches use."""
        return self.jobs[self.specs.most_common(1)[0][0]] if self.specs else None

    @property
    def result(self) -> dict | None:
        """Return the compile result of the representative specialization, if compiled."""
        return self.results.get(self.specs.most_common(1)[0][0]) if self.specs else None


@dataclass
class Plan:
    arch: str
    quick: bool
    rows: list

    def by_status(self, status: str) -> list:
        return [r for r in self.rows if r.status == status]


def build_plan(arch: str, quick: bool = False, only: list | None = None) -> Plan:
    """Return the rows a run on a GPU of this arch would compile (quick: as --quick would),
    with what it prunes and skips; nothing is compiled here."""
    from bench.registry import load_all
    if arch not in ARCHS:
        raise ValueError(f"unknown arch '{arch}': choose from {', '.join(ARCHS)}")
    a = ARCHS[arch]
    device = fake_device(arch)
    kernels = _kernels()
    reg = load_all()
    rows: dict = {}

    def row(kernel, dtype, config, status, reason=""):
        key = (kernel, dtype, config, status, reason)
        if key not in rows:
            rows[key] = Row(kernel, dtype, config, status, reason, order=len(rows))
        return rows[key]

    def record(fn):
        log = []
        with recording(log):
            fn()
        return log

    # Plan as a GPU run would: the interpreter switch (set by the tests) means nothing here.
    with mock.patch.dict(os.environ), meta_inputs():
        os.environ.pop("TRITON_INTERPRET", None)
        for op, impls in reg.select(only or list(FAMILIES)):
            for impl in impls:
                if impl.backend != "triton":
                    continue
                for point in op.points(device, quick):
                    dtype = str(point.get("dtype", ""))
                    reason = (op.skip(point, device) if op.skip else None) or quick_skip(impl, point, quick) or (
                        impl.skip(point, device) if impl.skip else None)
                    if reason:
                        row(f"{op.family}/{impl.name}", dtype, "*", "skipped", reason)
                        continue
                    x = op.make_inputs(point, "meta")
                    ctx = LaunchContext(point, device, op.modes[0], quick)
                    if impl.tuning is None:
                        plan = [(None, None, False)]
                    else:
                        t = impl.tuning(x, ctx)
                        runs, _ = launched(t.candidates, t.smem, a.smem_limit, quick)
                        plan = [(c, t.smem(c) if t.smem else None, c not in runs) for c in t.candidates
                                if c in runs or (t.smem and t.smem(c) > a.smem_limit)]
                    for cfg, model, pruned in plan:
                        fn = impl.launcher(x, ctx) if cfg is None else t.make_fn(cfg)
                        for i, launch in enumerate(record(fn)):
                            job = job_of(launch, kernels[(launch.module, launch.kernel)], a.cc)
                            m = model if i == 0 else secondary_smem(job)
                            if pruned:
                                if i == 0:
                                    row(launch.kernel, dtype, config_label(job), "pruned",
                                        f"model {m} B > {a.smem_limit} B").model_smem = m
                                continue
                            r = row(launch.kernel, dtype, config_label(job), "ok")
                            r.model_smem = m
                            k = spec_key(job)
                            r.specs[k] += 1
                            r.jobs.setdefault(k, job)
    return Plan(arch, quick, sorted(rows.values(), key=lambda r: r.order))


def secondary_smem(job: dict) -> int | None:
    """Return the shared-memory model of a kernel launched beside the tuned one (decode's
    combine), or None where there is none."""
    if job["kernel"] == "decode_combine_kernel":
        from kernels.attention import combine_smem_bytes
        c = job["constexprs"]
        return combine_smem_bytes(c["BLOCK_S"], c["D"], job["options"].get("num_warps", 4))
    return None


# ---- compiling ------------------------------------------------------------------------------

_PTXAS_REGS = re.compile(r"Used (\d+) registers")
_PTXAS_SPILL = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")


def _init_worker(cache_dir: str):
    # before anything imports triton in this process: compile for real, into a fresh cache
    os.environ.pop("TRITON_INTERPRET", None)
    os.environ["TRITON_CACHE_DIR"] = cache_dir
    os.environ["TRITON_DUMP_PTXAS_LOG"] = "1"
    import warnings
    warnings.filterwarnings("ignore")
    # load the compiler now, so the first job's seconds are its compile, not these imports
    import triton.backends.nvidia.compiler  # noqa: F401
    import triton.compiler  # noqa: F401


def _error_line(e: BaseException) -> str:
    """Return the line of a compile error that says what went wrong."""
    from bench.util import first_line
    cause = e
    while cause.__cause__ is not None or cause.__context__ is not None:
        cause = cause.__cause__ or cause.__context__
    text = [ln.strip() for ln in str(cause).splitlines() if ln.strip()]
    # Triton's CompilationError starts with "at L:C:" and the source; the message is last
    if text and re.match(r"at \d+:\d+:", text[0]):
        return f"{type(cause).__name__}: {text[-1][:200]}"
    return first_line(cause)


def _resources(kernel, log: str) -> tuple:
    """Return (registers, spill store bytes, spill load bytes) from ptxas's report of this
    compile, or from the cubin (registers and local memory) when there is no report."""
    regs, spills = _PTXAS_REGS.findall(log), _PTXAS_SPILL.findall(log)
    if regs:
        st, ld = spills[-1] if spills else (0, 0)
        return int(regs[-1]), int(st), int(ld)
    import subprocess
    from triton.backends.nvidia import compiler as nv
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(kernel.asm["cubin"])
        f.flush()
        out = subprocess.run([os.path.join(os.path.dirname(nv.__file__), "bin", "cuobjdump"), "-res-usage", f.name],
                             capture_output=True, text=True).stdout
    m = re.search(r"REG:(\d+).*?LOCAL:(\d+)", out)
    return (int(m.group(1)), int(m.group(2)), int(m.group(2))) if m else (None, None, None)


def _cpu_seconds() -> float:
    """Return this process's CPU time plus its finished children's (ptxas)."""
    import resource
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def compile_job(job: dict) -> dict:
    """Compile one job for its target (no GPU needed) and return status, seconds, the
    compiler's shared memory, registers, spills, and the IR named in job["keep"]."""
    import importlib
    import io
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    fn = getattr(importlib.import_module(job["module"]), job["kernel"])
    names = list(fn.arg_names)
    constexprs = {(names.index(k),): v for k, v in job["constexprs"].items()}
    attrs = {(names.index(k),): [["tt.divisibility", 16]] for k in job["aligned"]}
    out = io.StringIO()
    t0, c0 = time.perf_counter(), _cpu_seconds()
    try:
        src = ASTSource(fn, dict(job["signature"]), constexprs, attrs)
        with contextlib.redirect_stdout(out):
            k = triton.compile(src, target=GPUTarget("cuda", job["cc"], 32), options=dict(job["options"]))
    except Exception as e:
        return {"status": "failed", "error": _error_line(e), "seconds": time.perf_counter() - t0,
                "cpu_seconds": _cpu_seconds() - c0}
    seconds, cpu = time.perf_counter() - t0, _cpu_seconds() - c0
    regs, spill_st, spill_ld = _resources(k, out.getvalue())
    return {"status": "ok", "seconds": seconds, "cpu_seconds": cpu, "shared": int(k.metadata.shared), "regs": regs,
            "spill_stores": spill_st, "spill_loads": spill_ld,
            "ir": {key: k.asm[key] for key in job.get("keep", ())}}


def compile_jobs(jobs: list, workers: int | None = None, progress=None,
                 cache_dir: str | None = None, work=None) -> tuple[list, float]:
    """Return (results in job order, wall seconds): the jobs compiled in a pool of spawned
    processes by work (default compile_job), into a fresh Triton cache, or into cache_dir
    (bench/precompile.py: the cache a run's launches read, its own work function)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed
    workers = max(1, min(workers or os.cpu_count() or 1, len(jobs) or 1))
    results = [None] * len(jobs)
    t0 = time.perf_counter()
    fresh = contextlib.nullcontext(cache_dir) if cache_dir else tempfile.TemporaryDirectory(prefix="roofbench-aot-")
    with fresh as cache, \
            ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                initializer=_init_worker, initargs=(cache,)) as pool:
        futures = {pool.submit(work or compile_job, job): i for i, job in enumerate(jobs)}
        for done, fut in enumerate(as_completed(futures), 1):
            i = futures[fut]
            try:
                results[i] = fut.result()
            except Exception as e:  # a worker that died (out of memory, a crash in the compiler)
                results[i] = {"status": "failed", "error": _error_line(e), "seconds": 0.0}
            if progress:
                progress(done, len(jobs), jobs[i], results[i])
    return results, time.perf_counter() - t0


@dataclass
class Outcome:
    plan: Plan
    wall_s: float
    workers: int

    def to_json(self) -> dict:
        """Return the plan, every row and the totals as JSON-ready data."""
        rows = [{"kernel": r.kernel, "dtype": r.dtype, "config": r.config, "status": r.status, "reason": r.reason,
                 "smem_model": r.model_smem, "specializations": len(r.specs),
                 "constexprs": {k: v for k, v in (r.job or {}).get("constexprs", {}).items()},
                 "options": (r.job or {}).get("options"),
                 "compiled": {k: v for k, v in (r.result or {}).items() if k != "ir"}} for r in self.plan.rows]
        return {"arch": self.plan.arch, "quick": self.plan.quick, "rows": rows, "totals": summary(self)}


def compile_plans(plans: list, workers: int | None = None, every_spec: bool = False, progress=None) -> list:
    """Compile the rows of several plans in one pool (the representative specialization of
    each row; every one with every_spec) and set each row's status: ok, or failed with the
    first line of the error, or failed because the compiled kernel needs more shared memory
    than its arch has. Return one Outcome per plan (the wall time is the pool's, shared)."""
    todo = [(p, r, k) for p in plans for r in p.rows if r.status == "ok"
            for k in (r.specs if every_spec else [r.specs.most_common(1)[0][0]])]
    # longest first (GEMM tiles, then attention and the GEMV tile), so that the pool does
    # not end on one slow compile
    weight = {"matmul_kernel": 0, "tma_matmul_kernel": 0, "attn_fwd_kernel": 1, "gemv_tile_kernel": 2}
    todo.sort(key=lambda prk: weight.get(prk[1].kernel, 3))
    results, wall = compile_jobs([r.jobs[k] for _, r, k in todo], workers, progress)
    for (_, r, k), res in zip(todo, results):
        r.results[k] = res
    for p in plans:
        limit = ARCHS[p.arch].smem_limit
        for r in p.rows:
            if r.status != "ok":
                continue
            bad = [res for res in r.results.values() if res["status"] != "ok"]
            over = [res for res in r.results.values() if res["status"] == "ok" and res["shared"] > limit]
            if bad:
                r.status, r.reason = "failed", bad[0]["error"]
            elif over:
                r.status, r.reason = "failed", f"compiled shared memory {over[0]['shared']} B > {limit} B: it would not launch"
    n = max(1, min(workers or os.cpu_count() or 1, len(todo) or 1))
    return [Outcome(p, wall, n) for p in plans]


def compile_plan(plan: Plan, workers: int | None = None, every_spec: bool = False, progress=None) -> Outcome:
    """Compile one plan's rows (see compile_plans)."""
    return compile_plans([plan], workers, every_spec, progress)[0]


# ---- the report -----------------------------------------------------------------------------

def _cell(v, fmt="{}"):
    return "-" if v is None else fmt.format(v)


def table(outcome: Outcome) -> str:
    """Return the per-row table and the totals as text."""
    plan = outcome.plan
    head = ("kernel", "dtype", "config", "specs", "smem model", "smem compiler", "regs", "spill B", "compile s",
            "cpu s", "status")
    lines = []
    for r in plan.rows:
        res = r.result or {}
        spill = None if res.get("spill_stores") is None else res["spill_stores"] + res["spill_loads"]
        status = r.status if not r.reason else f"{r.status}: {r.reason}"
        lines.append((r.kernel, r.dtype, r.config, _cell(len(r.specs) or None), _cell(r.model_smem),
                      _cell(res.get("shared")), _cell(res.get("regs")), _cell(spill),
                      _cell(res.get("seconds"), "{:.1f}"), _cell(res.get("cpu_seconds"), "{:.1f}"), status))
    widths = [max(len(h), *(len(str(ln[i])) for ln in lines)) if lines else len(h) for i, h in enumerate(head)]
    widths[-1] = 0
    fmt = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    out = [fmt(head), fmt(["-" * w for w in widths[:-1]] + ["------"])] + [fmt(ln) for ln in lines]
    out.append("")
    out.extend(totals(outcome))
    return "\n".join(out)


def summary(outcome: Outcome) -> dict:
    """Return the totals: rows per status; the slowest compile; compile seconds summed over
    the representative compiles (wall, and CPU: the compiler's process and its ptxas, which
    a busy or shared machine does not inflate); every_spec: the CPU seconds a run spends,
    each row's times its specializations; the pool's wall time and workers."""
    rows = outcome.plan.rows
    counts = Counter(r.status for r in rows)
    done = [(res, r) for r in rows for res in r.results.values()]
    slow = max(((res.get("cpu_seconds", res["seconds"]), res["seconds"], r) for res, r in done
                if res["status"] == "ok"), key=lambda t: t[0], default=None)
    return {"ok": counts["ok"], "pruned": counts["pruned"], "skipped": counts["skipped"], "failed": counts["failed"],
            "compiles": len(done), "wall_sum_s": sum(res["seconds"] for res, _ in done),
            "cpu_sum_s": sum(res.get("cpu_seconds", 0.0) for res, _ in done),
            "every_spec_cpu_s": sum((r.result or {}).get("cpu_seconds", 0.0) * len(r.specs) for r in rows if r.results),
            "specializations": sum(len(r.specs) for r in rows if r.status in ("ok", "failed")),
            "wall_s": outcome.wall_s, "workers": outcome.workers,
            "slowest": (slow[0], slow[1], slow[2].kernel, slow[2].dtype, slow[2].config) if slow else None}


def totals(outcome: Outcome) -> list:
    s = summary(outcome)
    p = outcome.plan
    out = [f"{p.arch} ({ARCHS[p.arch].example}, shared memory {ARCHS[p.arch].smem_limit} B per block), "
           f"{'quick' if p.quick else 'full'} plan: {s['ok']} ok, {s['pruned']} pruned, {s['skipped']} skipped, "
           f"{s['failed']} failed"]
    if s["slowest"]:
        cpu, wall, kernel, dtype, cfg = s["slowest"]
        out.append(f"slowest compile: {cpu:.1f} s CPU, {wall:.1f} s wall ({kernel} {dtype} {cfg})")
    out.append(f"compile time: {s['cpu_sum_s']:.1f} s CPU ({s['wall_sum_s']:.1f} s wall) summed over "
               f"{s['compiles']} compiles; {s['wall_s']:.1f} s wall with a pool of {s['workers']}")
    out.append(f"a run compiles {s['specializations']} kernels (rows x integer specializations): about "
               f"{s['every_spec_cpu_s']:.0f} s CPU one after another, as a run tunes; about "
               f"{s['every_spec_cpu_s'] / s['workers']:.0f} s over a pool of {s['workers']}")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.aot", description=__doc__.split("\n\n")[0])
    ap.add_argument("--arch", default="sm_90", help="target: " + ", ".join(ARCHS))
    ap.add_argument("--quick", action="store_true", help=f"the configurations a --quick run launches (the first "
                                                         f"{QUICK_CANDIDATES} that fit, the quick sweeps)")
    ap.add_argument("--only", default="", help="families or ops: " + ",".join(FAMILIES))
    ap.add_argument("--workers", type=int, default=None, help="compile processes (default: one per CPU)")
    ap.add_argument("--every-spec", action="store_true", help="compile every integer specialization, not one per row")
    ap.add_argument("--json", default=None, help="also write every row and the totals to this JSON file")
    args = ap.parse_args(argv)
    if args.arch not in ARCHS:
        print(f"unknown arch '{args.arch}': choose from {', '.join(ARCHS)}", file=sys.stderr)
        return 2
    only = [s.strip() for s in args.only.split(",") if s.strip()] or None
    try:
        plan = build_plan(args.arch, args.quick, only)
    except Exception as e:  # an unknown --only name
        print(str(e), file=sys.stderr)
        return 2

    def progress(done, total, job, res):
        print(f"\r[{done}/{total}] {job['kernel']} {res['status']} {res['seconds']:.1f} s", end="",
              file=sys.stderr, flush=True)

    outcome = compile_plan(plan, args.workers, args.every_spec, progress if sys.stderr.isatty() else None)
    if sys.stderr.isatty():
        print(file=sys.stderr)
    print(table(outcome))
    if args.json:
        import json
        with open(args.json, "w") as f:
            json.dump(outcome.to_json(), f, indent=1, default=str)
    return 1 if plan.by_status("failed") else 0


if __name__ == "__main__":
    sys.exit(main())
