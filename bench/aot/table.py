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

The parts: bench/aot/targets.py (the archs), bench/aot/plan.py (the plan: launches -> jobs),
bench/aot/pool.py (the pool and the compiler's resources), this module (the table, the CLI).
"""
from __future__ import annotations

import argparse
import json
import sys

from bench.aot.plan import build_plan
from bench.aot.pool import Outcome, compile_plan, compile_summary
from bench.aot.targets import ARCHS, FAMILIES
from bench.ops._tune import QUICK_CANDIDATES

# ---- the report -----------------------------------------------------------------------------

def _cell(v, fmt="{}"):
    return "-" if v is None else fmt.format(v)


def table(outcome: Outcome) -> str:
    """Return the per-row table and the totals as text."""
    plan = outcome.plan
    head = ("kernel", "dtype", "config", "specs", "smem model", "smem compiler", "regs", "spill B", "occupancy",
            "compile s", "cpu s", "status")
    lines = []
    for r in plan.rows:
        res = r.result or {}
        spill = None if res.get("spill_stores") is None else res["spill_stores"] + res["spill_loads"]
        status = r.status if not r.reason else f"{r.status}: {r.reason}"
        lines.append((r.kernel, r.dtype, r.config, _cell(len(r.specs) or None), _cell(r.model_smem),
                      _cell(res.get("shared")), _cell(res.get("regs")), _cell(spill), _cell(res.get("occupancy")),
                      _cell(res.get("seconds"), "{:.1f}"), _cell(res.get("cpu_seconds"), "{:.1f}"), status))
    widths = [max(len(h), *(len(str(ln[i])) for ln in lines)) if lines else len(h) for i, h in enumerate(head)]
    widths[-1] = 0
    fmt = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    out = [fmt(head), fmt(["-" * w for w in widths[:-1]] + ["------"])] + [fmt(ln) for ln in lines]
    out.append("")
    out.extend(totals(outcome))
    return "\n".join(out)



def totals(outcome: Outcome) -> list:
    s = compile_summary(outcome)
    p = outcome.plan
    a = ARCHS[p.arch]
    out = [f"{p.arch} ({a.example}, {'LDS' if a.amd else 'shared memory'} {a.smem_limit} B per "
           f"{'workgroup' if a.amd else 'block'}), "
           f"{'quick' if p.quick else 'full'} plan: {s['ok']} ok, {s['pruned']} pruned, {s['skipped']} skipped, "
           f"{s['failed']} failed",
           "regs: VGPRs (architected + accumulation); spill B: 4 x spilled VGPRs and SGPRs; occupancy: waves per "
           "SIMD, as the AMD compiler reports them" if a.amd else
           "regs and spill B (stores + loads per thread): ptxas's report; occupancy: not reported by ptxas"]
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
        with open(args.json, "w") as f:
            json.dump(outcome.to_json(), f, indent=1, default=str)
    return 1 if plan.by_status("failed") else 0


if __name__ == "__main__":
    sys.exit(main())
