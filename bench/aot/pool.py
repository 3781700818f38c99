"""Compiling an ahead-of-time plan (bench/aot/table.py) in a pool of spawned processes, each job in
a fresh Triton cache, and reading the compiler's resources (shared memory, registers, spills)."""
from __future__ import annotations

import contextlib
import importlib
import io
import multiprocessing
import os
import re
import subprocess
import tempfile
import time
import warnings
from collections import Counter
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass

from bench.aot.plan import CompilePlan
from bench.aot.targets import ARCHS
from bench.util import cpu_seconds, first_line

# ---- compiling ------------------------------------------------------------------------------

_PTXAS_REGS = re.compile(r"Used (\d+) registers")
_PTXAS_SPILL = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")


def _init_worker(cache_dir: str):
    # before anything imports triton in this process: compile for real, into a fresh cache
    os.environ.pop("TRITON_INTERPRET", None)
    os.environ["TRITON_CACHE_DIR"] = cache_dir
    os.environ["TRITON_DUMP_PTXAS_LOG"] = "1"
    warnings.filterwarnings("ignore")
    # load the compiler now, so the first job's seconds are its compile, not these imports
    import triton.backends.amd.compiler  # noqa: F401
    import triton.backends.nvidia.compiler  # noqa: F401
    import triton.compiler  # noqa: F401,F811


def error_line(e: BaseException) -> str:
    """Return the line of a compile error that says what went wrong."""
    cause = e
    while cause.__cause__ is not None or cause.__context__ is not None:
        cause = cause.__cause__ or cause.__context__
    text = [ln.strip() for ln in str(cause).splitlines() if ln.strip()]
    # Triton's CompilationError starts with "at L:C:" and the source; the message is last
    if text and re.match(r"at \d+:\d+:", text[0]):
        return f"{type(cause).__name__}: {text[-1][:200]}"
    return first_line(cause)


_AMD_FIELDS = {"vgprs": r"\.vgpr_count:\s+(\d+)", "agprs": r"\.agpr_count:\s+(\d+)",
               "vgpr_spills": r"\.vgpr_spill_count:\s+(\d+)", "sgpr_spills": r"\.sgpr_spill_count:\s+(\d+)",
               "scratch": r"; ScratchSize: (\d+)", "occupancy": r"; Occupancy: (\d+)"}


def amd_resources(amdgcn: str) -> dict:
    """Return what the AMD compiler reports of a kernel in its assembly: VGPRs (the vgpr_count
    of the metadata: architected plus accumulation registers on CDNA3), spilled VGPRs and
    SGPRs (counts of 4-byte registers), scratch bytes per work-item, and occupancy (waves per
    SIMD). A field the text lacks is None."""
    out = {}
    for key, pattern in _AMD_FIELDS.items():
        m = re.search(pattern, amdgcn)
        out[key] = int(m.group(1)) if m else None
    return out


def _resources(kernel, log: str) -> tuple:
    """Return (registers, spill store bytes, spill load bytes) from ptxas's report of this
    compile, or from the cubin (registers and local memory) when there is no report."""
    regs, spills = _PTXAS_REGS.findall(log), _PTXAS_SPILL.findall(log)
    if regs:
        st, ld = spills[-1] if spills else (0, 0)
        return int(regs[-1]), int(st), int(ld)
    from triton.backends.nvidia import compiler as nv  # deferred: Triton is optional; loaded in the compile worker only
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(kernel.asm["cubin"])
        f.flush()
        out = subprocess.run([os.path.join(os.path.dirname(nv.__file__), "bin", "cuobjdump"), "-res-usage", f.name],
                             capture_output=True, text=True).stdout
    m = re.search(r"REG:(\d+).*?LOCAL:(\d+)", out)
    return (int(m.group(1)), int(m.group(2)), int(m.group(2))) if m else (None, None, None)


def compile_job(job: dict) -> dict:
    """Compile one job for its target (no GPU needed) and return status, seconds, the
    compiler's shared memory, registers, spills, and the IR named in job["keep"]."""
    import triton  # deferred: Triton is optional (Linux only)
    from triton.backends.compiler import GPUTarget  # deferred: Triton is optional; loaded in the compile worker only
    from triton.compiler import ASTSource  # deferred: Triton is optional; loaded in the compile worker only
    fn = getattr(importlib.import_module(job["module"]), job["kernel"])
    names = list(fn.arg_names)
    constexprs = {(names.index(k),): v for k, v in job["constexprs"].items()}
    attrs = {(names.index(k),): [["tt.divisibility", 16]] for k in job["aligned"]}
    for k in job.get("ptr32", ()):  # ROCm: a buffer within 2 GiB, as the JIT specializes it
        attrs.setdefault((names.index(k),), []).append(["tt.pointer_range", 32])
    out = io.StringIO()
    t0, c0 = time.perf_counter(), cpu_seconds()
    try:
        src = ASTSource(fn, dict(job["signature"]), constexprs, attrs)
        with contextlib.redirect_stdout(out):
            k = triton.compile(src, target=GPUTarget(*job.get("target", ("cuda", job["cc"], 32))),
                               options=dict(job["options"]))
    except Exception as e:
        return {"status": "failed", "error": error_line(e), "seconds": time.perf_counter() - t0,
                "cpu_seconds": cpu_seconds() - c0}
    seconds, cpu = time.perf_counter() - t0, cpu_seconds() - c0
    res = {"status": "ok", "seconds": seconds, "cpu_seconds": cpu, "shared": int(k.metadata.shared),
           "ir": {key: k.asm[key] for key in job.get("keep", ())}}
    if "amdgcn" in k.asm:  # AMD: registers and spills as counts of 4-byte registers; spill B = 4 x spilled
        amd = amd_resources(k.asm["amdgcn"])
        spilled = (amd["vgpr_spills"] or 0) + (amd["sgpr_spills"] or 0)
        res.update(regs=amd["vgprs"], spill_stores=4 * spilled, spill_loads=0, scratch=amd["scratch"],
                   occupancy=amd["occupancy"])
    else:
        regs, spill_st, spill_ld = _resources(k, out.getvalue())
        res.update(regs=regs, spill_stores=spill_st, spill_loads=spill_ld)
    return res


def compile_jobs(jobs: list, workers: int | None = None, progress=None,
                 cache_dir: str | None = None, work=None) -> tuple[list, float]:
    """Return (results in job order, wall seconds): the jobs compiled in a pool of spawned
    processes by work (default compile_job), into a fresh Triton cache, or into cache_dir
    (bench/aot/precompile.py: the cache a run's launches read, its own work function)."""
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
                results[i] = {"status": "failed", "error": error_line(e), "seconds": 0.0}
            if progress:
                progress(done, len(jobs), jobs[i], results[i])
    return results, time.perf_counter() - t0


@dataclass
class Outcome:
    plan: CompilePlan
    wall_s: float
    workers: int

    def to_json(self) -> dict:
        """Return the plan, every row and the totals as JSON-ready data."""
        rows = [{"kernel": r.kernel, "dtype": r.dtype, "config": r.config, "status": r.status, "reason": r.reason,
                 "smem_model": r.model_smem, "specializations": len(r.specs),
                 "constexprs": {k: v for k, v in (r.job or {}).get("constexprs", {}).items()},
                 "options": (r.job or {}).get("options"),
                 "compiled": {k: v for k, v in (r.result or {}).items() if k != "ir"}} for r in self.plan.rows]
        return {"arch": self.plan.arch, "quick": self.plan.quick, "rows": rows, "totals": compile_summary(self)}


def compile_plans(plans: list, workers: int | None = None, every_spec: bool = False, progress=None) -> list:
    """Compile the rows of several plans in one pool (the representative specialization of
    each row; every one with every_spec) and set each row's status: ok, or failed with the
    first line of the error, or failed because the compiled kernel needs more shared memory
    than its arch has. Return one Outcome per plan (the wall time is the pool's, shared)."""
    todo = [(p, r, k) for p in plans for r in p.rows if r.status == "ok"
            for k in (r.specs if every_spec else [r.specs.most_common(1)[0][0]])]
    # longest first (GEMM tiles, then attention and the GEMV tile), so that the pool does
    # not end on one slow compile
    weight = {"matmul_kernel": 0, "tma_matmul_kernel": 0, "fp4_matmul_kernel": 0, "attn_fwd_kernel": 1,
              "gemv_tile_kernel": 2}
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
                r.status, r.reason = "failed", (f"compiled shared memory {over[0]['shared']} B > {limit} B: "
                                                "it would not launch")
    n = max(1, min(workers or os.cpu_count() or 1, len(todo) or 1))
    return [Outcome(p, wall, n) for p in plans]


def compile_plan(plan: CompilePlan, workers: int | None = None, every_spec: bool = False, progress=None) -> Outcome:
    """Compile one plan's rows (see compile_plans)."""
    return compile_plans([plan], workers, every_spec, progress)[0]

def compile_summary(outcome: Outcome) -> dict:
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
