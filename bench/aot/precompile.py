"""Compile a run's Triton kernels in parallel, into Triton's cache, before measuring
(ARCHITECTURE.md, rule 15).

    python -m bench.aot.precompile [--quick] [--only gemm,gemv] [--workers N] [--arch sm_90] [--cache DIR]

A run on a GPU otherwise compiles each Triton variant the first time a launcher calls it,
one after another, between points: on an H200 plan that was 7 of its 31 minutes. Here the
plan of the ahead-of-time compile (`bench/aot/table.py`: the same sweeps, skips, candidate
tiles and shared-memory pruning as a run, every integer specialization) is built for this
device and compiled in aot's process pool, one process per core, into the cache directory
the run's own JIT launches read (`TRITON_CACHE_DIR`, else Triton's default). Triton keys
that cache by the kernel's source, its signature, constants, alignment attributes, the
target and the compile options, in a form that changes between Triton versions (3.9 lists
an empty attribute for every constexpr, which aot's own compile does not). So each worker
compiles the way the run will: it calls the kernel's own JIT launcher with `warmup=True`
(compile, do not launch) on arguments of the job's specialization (a pointer of the dtype at
an aligned address, an integer of the same width and divisibility, the same constants and
options), against a stand-in driver that names the target GPU and touches no device. The
key is then Triton's own (tests/test_precompile.py replays a run's recorded launches through
the JIT on the CPU and finds every one in the cache; tests/test_gpu.py does it on a GPU).

What it does not cover is never wrong, only slower: a launch whose specialization the plan
missed compiles as before. `jit_counter()` counts, during a run, the launches that hit the
cache and those that compiled (run.json's `precompile.jit`).
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time

from bench.aot import plan as aot_plan
from bench.aot import pool as aot_pool
from bench.aot import targets as aot_targets
from bench.aot.pool import error_line
from bench.aot.targets import TRITON_TYPE
from bench.util import triton_interpreting


def cache_dir() -> str:
    """Return the directory Triton's JIT reads and writes compiled kernels in here."""
    if os.environ.get("TRITON_CACHE_DIR"):
        return os.environ["TRITON_CACHE_DIR"]
    try:
        from triton import knobs  # deferred: Triton is optional (Linux only)
        return str(knobs.cache.dir)
    except Exception:  # an older triton without knobs
        return os.path.join(os.path.expanduser("~"), ".triton", "cache")


def arch_of(device) -> str | None:
    """Return the aot target of a GPU ("sm_90" for compute capability 9.0; an AMD GPU's gfx
    target, "gfx942"), or None when it is not a GPU aot knows."""
    cc = getattr(device, "compute_capability", None)
    if getattr(device, "kind", None) != "cuda" or not cc:
        return None
    if getattr(device, "vendor", None) == "amd":
        gfx = (device.extra or {}).get("gfx")
        return gfx if gfx in aot_targets.ARCHS else None
    major, minor = cc.split(".")[:2]
    arch = f"sm_{major}{minor}"
    return arch if arch in aot_targets.ARCHS else None


def plan_jobs(arch: str, quick: bool, only: list | None = None, device=None) -> tuple[list, dict]:
    """Return (compile jobs, counts) of what a run on a GPU of arch would compile: every
    candidate that fits, of every Triton point the plan holds, in every integer
    specialization the run launches. device (this GPU) sets the sweeps where given (its SM
    count and L2 set the stream and decode sweeps); else aot's example part of the arch."""
    plan = aot_plan.build_plan(arch, quick, only, device)
    jobs = [r.jobs[k] for r in plan.rows if r.status == "ok" for k in r.specs]
    counts = {s: len(plan.by_status(s)) for s in ("ok", "pruned", "skipped")}
    return jobs, counts


class _Pointer:
    """Stands in for a tensor argument: its dtype, at a 16-aligned address (as the suite's
    allocations are), and for ROCm the size of its buffer (ptr_range: within 2 GiB or not,
    as the job recorded); picklable, no memory."""

    def __init__(self, dtype, small: bool = False):
        self.dtype = dtype
        self.small = small

    def data_ptr(self) -> int:
        return 0

    def ptr_range(self) -> int:
        return 2**20 if self.small else 2**32


class _Target:
    """Stands in for Triton's active driver in a compile worker: it names the target GPU
    (a job's target, ("cuda", compute capability x 10, 32) or ("hip", "gfx942", 64); a
    bare cc means CUDA) and never touches a device."""

    def __init__(self, target):
        from triton.backends.compiler import (
            GPUTarget,  # deferred: Triton is optional; loaded in the compile worker only
        )
        self.target = GPUTarget(*(("cuda", target, 32) if isinstance(target, int) else tuple(target)))

    def get_current_target(self):
        return self.target

    def get_current_device(self):
        return 0

    def get_current_stream(self, device=None):
        return 0


def _dtypes() -> dict:
    """Return {Triton type name: torch dtype}, the inverse of aot's signature types."""
    return {name: dt for dt, name in TRITON_TYPE.items()}


def launch_args(job: dict) -> dict:
    """Return keyword arguments that the JIT specializes exactly as it does the launch the
    job was made from: per parameter, a pointer of the dtype; an integer of the same type
    (i32 or i64) and divisibility by 16 (16 or 17; 2**32 or 2**32 + 1); the constant (an
    integer equal to 1 is one); a bool; a float; plus num_warps and num_stages."""
    types = _dtypes()
    aligned = set(job["aligned"])
    out = {}
    for name, ty in job["signature"].items():
        if ty == "constexpr":
            out[name] = job["constexprs"][name]
        elif ty.startswith("*"):
            out[name] = _Pointer(types[ty[1:]], name in job.get("ptr32", ()))
        elif ty in ("i32", "i64"):
            base = 16 if ty == "i32" else 2**32
            out[name] = base if name in aligned else base + 1
        elif ty == "i1":
            out[name] = True
        elif ty in ("fp32", "fp64"):
            out[name] = 1.5
        elif ty.startswith("tensordesc<"):
            out[name] = _descriptor(types, ty)
        else:
            raise TypeError(f"{job['kernel']}: no stand-in for a {ty} argument ({name})")
    out.update(job["options"])
    return out


def _descriptor(types: dict, ty: str):
    """Return a host-side tensor descriptor the JIT specializes as ty ("tensordesc<bf16[1, 1,
    128, 64]>"): a stand-in pointer of the dtype, the block shape, a row-major shape of one
    block (its last dimension at least 16 bytes, so every stride is 16-byte aligned)."""
    from triton.tools.tensor_descriptor import (
        TensorDescriptor,  # deferred: Triton is optional; loaded in the compile worker only
    )
    dtype, block = ty[len("tensordesc<"):].split("[", 1)
    block = [int(b) for b in block.split("]", 1)[0].split(",")]
    base = _Pointer(types[dtype])
    shape = block[:-1] + [max(block[-1], 16 // base.dtype.itemsize)]
    strides = [1]
    for extent in reversed(shape[1:]):
        strides.insert(0, strides[0] * extent)
    return TensorDescriptor(base, shape, strides, block)


_DRIVER: dict = {}


def compile_launch(job: dict) -> dict:
    """Compile one job through its kernel's JIT launcher (warm-up: compile, do not launch)
    into this process's Triton cache; return status and seconds (a pool worker's job)."""
    from triton.runtime import driver  # deferred: Triton is optional, and this API moves between its versions
    os.environ.pop("TRITON_DUMP_PTXAS_LOG", None)  # aot's workers print ptxas's report; a run needs none
    t0 = time.perf_counter()
    try:
        target = tuple(job.get("target") or ("cuda", job["cc"], 32))
        if _DRIVER.get("target") != target:
            driver.set_active(_Target(target))
            _DRIVER["target"] = target
        kernel = getattr(importlib.import_module(job["module"]), job["kernel"])
        kernel.run(grid=(1,), warmup=True, **launch_args(job))
    except Exception as e:  # noqa: BLE001
        return {"status": "failed", "error": error_line(e), "seconds": time.perf_counter() - t0}
    return {"status": "ok", "seconds": time.perf_counter() - t0}


def families_of(plan) -> list[str]:
    """Return the names of a runner plan's ops that have Triton kernels aot can plan."""
    return sorted({t.op.name for t in plan.tasks if t.op.family in aot_targets.FAMILIES
                   and any(i.backend == "triton" for i in t.impls)})


def default_workers() -> int:
    """Return one process per core, shared among the ranks of a multi-GPU run on this host
    (torchrun's LOCAL_WORLD_SIZE), which precompile at the same time."""
    return max(1, (os.cpu_count() or 1) // max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1)))


def precompile(arch: str, quick: bool, only: list | None = None, device=None, workers: int | None = None,
               cache: str | None = None, progress=None) -> dict:
    """Compile the plan's jobs in aot's pool into cache (default: Triton's cache here);
    return what run.json records: jobs, ok, failed (and the first error), the pool's wall
    seconds, the jobs' seconds summed, workers, the plan's seconds and the cache directory."""
    t0 = time.perf_counter()
    jobs, counts = plan_jobs(arch, quick, only, device)
    planned = time.perf_counter() - t0
    cache = cache or cache_dir()
    os.makedirs(cache, exist_ok=True)
    workers = max(1, min(workers or default_workers(), len(jobs) or 1))
    results, wall = (aot_pool.compile_jobs(jobs, workers, progress, cache_dir=cache, work=compile_launch)
                     if jobs else ([], 0.0))
    failed = [r for r in results if r["status"] != "ok"]
    return {"arch": arch, "jobs": len(jobs), "ok": len(results) - len(failed), "failed": len(failed),
            "first_failure": failed[0].get("error", "") if failed else "",
            "pruned": counts["pruned"], "wall_s": round(wall, 2), "plan_s": round(planned, 2),
            "compile_sum_s": round(sum(r.get("seconds", 0.0) for r in results), 1), "workers": workers,
            "cache_dir": cache}


class JitCounter:
    """Counts Triton's compile calls while it is active: cache hits (a launch that loaded a
    kernel compiled before) and compiles (a launch that compiled). Uses Triton's compilation
    listener where this Triton has one; else it counts nothing (available False)."""

    def __init__(self):
        self.hits = self.compiles = 0
        self.available = False
        self._knobs, self._before = None, None

    def _listen(self, *, src=None, metadata=None, metadata_group=None, times=None, cache_hit=False, **_):
        if cache_hit:
            self.hits += 1
        else:
            self.compiles += 1
        if self._before:
            self._before(src=src, metadata=metadata, metadata_group=metadata_group, times=times, cache_hit=cache_hit)

    def __enter__(self):
        try:
            from triton import knobs  # deferred: Triton is optional (Linux only)
            self._knobs = knobs.compilation
            self._before = self._knobs.listener
            self._knobs.listener = self._listen
            self.available = True
        except Exception:  # noqa: BLE001  (no triton, or one without a listener)
            self.available = False
        return self

    def __exit__(self, *exc):
        if self.available:
            self._knobs.listener = self._before
        return False

    def record(self) -> dict:
        return {"cache_hits": self.hits, "compiles": self.compiles} if self.available else {}


def setting() -> str:
    """Return ROOFBENCH_PRECOMPILE: "1" (default: runs precompile), "0" (off), or the path of
    a JSON record `python -m bench.aot.precompile --json` wrote (done before the run: the device
    check precompiles while the GPU tests run)."""
    return os.environ.get("ROOFBENCH_PRECOMPILE", "1")


def before_run(device, plan, quick: bool, say=print) -> dict | None:
    """Precompile a runner plan's Triton kernels for this GPU and return the record, or None
    where there is nothing to do (a CPU, Triton's interpreter, no Triton op in the plan).
    ROOFBENCH_PRECOMPILE (setting()) switches it off or hands over a record made before. A
    failure here never stops the run: the launches then compile as they go."""
    arch = arch_of(device)
    if arch is None or triton_interpreting():
        return None
    only = families_of(plan)
    if not only:
        return None
    how = setting()
    if how == "0":
        return {"arch": arch, "skipped": "ROOFBENCH_PRECOMPILE=0"}
    if how != "1":
        try:
            with open(how) as f:
                rec = json.load(f)
        except (OSError, ValueError) as e:
            say(f"roofbench: ROOFBENCH_PRECOMPILE={how} is not a precompile record ({e}); precompiling now")
        else:
            return dict(rec, done_before=how)
    try:
        rec = precompile(arch, quick, only, device)
    except Exception as e:  # noqa: BLE001
        say(f"roofbench: precompiling failed ({type(e).__name__}: {e}); kernels compile as the run launches them")
        return {"arch": arch, "error": f"{type(e).__name__}: {e}"}
    say(f"roofbench: precompiled {rec['ok']} of {rec['jobs']} Triton kernels for {arch} in {rec['wall_s']:.0f} s "
        f"({rec['workers']} processes)"
        + (f"; {rec['failed']} failed: {rec['first_failure']}" if rec["failed"] else ""))
    return rec


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.aot.precompile", description=__doc__.split("\n\n")[0])
    ap.add_argument("--arch", default="sm_90", help="target: " + ", ".join(aot_targets.ARCHS))
    ap.add_argument("--quick", action="store_true", help="what a --quick run launches")
    ap.add_argument("--only", default="", help="families or ops: " + ",".join(aot_targets.FAMILIES))
    ap.add_argument("--workers", type=int, default=None, help="compile processes (default: one per CPU)")
    ap.add_argument("--cache", default=None, help="Triton cache directory (default: the one Triton uses here)")
    ap.add_argument("--json", default=None, help="also write the record to this file (ROOFBENCH_PRECOMPILE=FILE "
                                                 "then gives it to a run instead of compiling again)")
    args = ap.parse_args(argv)
    if args.arch not in aot_targets.ARCHS:
        print(f"unknown arch '{args.arch}': choose from {', '.join(aot_targets.ARCHS)}.", file=sys.stderr)
        return 2
    only = [s.strip() for s in args.only.split(",") if s.strip()] or None
    try:
        rec = precompile(args.arch, args.quick, only, workers=args.workers, cache=args.cache)
    except ValueError as e:  # an unknown --only name
        print(str(e), file=sys.stderr)
        return 2
    print(", ".join(f"{k} {v}" for k, v in rec.items()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rec, f, indent=1)
    return 1 if rec["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
