"""The device check's steps, each with its predicted seconds and its own limit.

The check is one call of the device tool of at most CALL_S (6 minutes), so that a rerun still
fits in a session's 15 minutes of device time with the machine's start counted; the check
bounds itself at CHECK_S, under the call's limit. Its steps, in order:

    env            nvidia-smi and the versions
    precompile     the quick plan's Triton kernels, compiled in a pool into Triton's cache
                   (bench.aot.precompile --quick), so the gates and the quick run load them
    gates          tests/test_gpu_paths.py: every (kernel, dtype) of the quick plan once through
                   the gate, then the TMA GEMM's and the TMA prefill's every configuration; a
                   verdict per case as it is reached (tests/gate_verdicts.py)
    kernels        the suite's other CUDA-only tests that this check runs (bench/devcheck/cuda_tests.py
                   RUN: the TMA GEMM's ragged edges and C splits, the prefill's edge blocks, the
                   probes, the FMA chains...), under the same plugin into the same file: only in
                   the time the required steps leave (required=False), never in theirs
    roofs-memory   run_bench.py --only MEMORY_ROOFS: L1 from probe.l1, L2 from stream.reread's
                   probe, HBM read from stream.read (full sweeps)
    roofs-compute  run_bench.py --only COMPUTE_ROOFS: fp32 and fp64 vector through the FMA
                   chains, the TMA GEMMs beside cuBLAS (bf16, fp8), the TMA prefill
    quick          run_bench.py --quick over every impl that passed: only in the time the
                   required steps leave (required=False)

The run steps keep only the impls whose gate cases all passed (the kernels step's cases gate
no impl: its verdicts are read, not acted on). A step's predicted seconds
come from the dry run's model (bench.aot.predict, as `run_bench.py --dry-run --device-spec
PART --only ...` prints them for the GPU's datasheet part, main.DEFAULT_PART where it has none;
learned factors where this machine has any) plus what the model
leaves out: a process's start (STEP_START_S) and, for the gates, a start and a time per case;
the kernels step's, from its compiles (bench/devcheck/cuda_tests.py). The required steps'
predictions must leave SLACK of CHECK_S unspent, and an optional step before the last must fit
in what the required steps leave of CHECK_S (tests/test_device_check.py); a step may run to
CAP_FACTOR times its prediction where the deadline leaves room after the later required steps'
predictions (the last optional step: all the time left)."""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from bench.aot import learned, predict
from bench.aot.plan import build_plan
from bench.devcheck import cuda_tests
from bench.measure.memory import run_budget
from bench.measure.registry import load_all
from bench.measure.runner import make_plan
from bench.measure.timing import timer_config
from bench.ops._tune import launched

CALL_S = 360             # the device call's timeout_s: 6 minutes, so that a rerun fits in 15 with the starts
CHECK_S = 340            # the check's own deadline: the call's limit less room for the last archive and exit
SLACK = 0.2              # the required steps' predictions leave this share of CHECK_S unspent
PACK_RESERVE_S = 10      # kept back from every step's limit: the summary and the last archive
CAP_FACTOR = 2.0         # a step may run to this multiple of its prediction when the deadline leaves room
MIN_STEP_S = 10          # a required step left less than this is not started
QUICK_MIN_S = 40         # an optional step (the kernels tests, the quick run) starts only with this much left
RUN_GRACE_S = 20         # after SIGINT a run derives its roofs and writes its report (no charts)
TEST_GRACE_S = 5         # after SIGINT pytest writes its summary
RUN_STALL_S = 90         # a run that writes no row for this long is stopped as hung (its precompile, a
                         # shape's tuning, a sustained window: seconds each)
CASE_S = 45              # a gate case running longer is stopped as hung (the longest, every TMA
                         # configuration of one precision, compiles 8 kernels: about 13 s)
# What the dry run's model leaves out (unmeasured on a GPU: guesses, on the safe side)
STEP_START_S = 15.0      # a run_bench.py process before its first point: interpreter, torch, CUDA context, detection
ENV_S = 5.0              # nvidia-smi and importing torch and triton once
PLAN_S = 8.0             # the precompile's own plan (aot's sweeps on meta tensors) on the GPU host
GATE_START_S = 15.0      # pytest: torch, conftest, the quick aot plan the cases come from (8.5 s on a 2-core VM)
GATE_CASE_S = 0.6        # a gate case with its kernels in the cache: inputs, float64 reference, tuning, check
GATE_ARCH = "sm_90"      # the gate cases' plan (tests/test_gpu_paths.py takes the GPU's own arch)
TMA_PRECISIONS = ("bf16", "fp8e4m3", "int8")   # tests/test_gpu_paths.py's every-configuration TMA GEMM test
PREFILL_HEAD_DIMS = (64, 128)                  # and its TMA prefill test: compiled at their first launch
MEMORY_ROOFS = ("probe.l1", "stream.reread", "stream.read")
MEMORY_DTYPES = ("int32", "float32")
COMPUTE_ROOFS = ("fma.chains", "gemm.square/triton_tma", "gemm.square/torch", "attention.prefill")
COMPUTE_DTYPES = ("fp32", "fp64", "bf16", "fp8e4m3")
GATES_FILE = "tests/test_gpu_paths.py"


@dataclass
class Step:
    """One step. kind: "cmd" (argv as is), "gates" (pytest with the verdicts plugin; rerun
    past a hung case) or "run" (`script` with argv, then --only the impls of `only` that
    passed their gates, --no-charts --out; its folder archived as it ends). required=False:
    it runs only in the time the required steps leave."""
    name: str
    kind: str
    argv: list[str]
    predicted_s: float
    grace_s: float
    required: bool = True
    only: tuple[str, ...] = ()
    env: dict = field(default_factory=dict)
    note: str = ""
    script: str = "run_bench.py"   # a run step's program, from the repository root
    case_s: float = 0.0            # a gates step: a case running longer is stopped as hung (CASE_S)
    stall_s: float = 0.0           # a run step: stopped once it writes no row for this long (RUN_STALL_S)

    @property
    def cap_s(self) -> float:
        return CAP_FACTOR * self.predicted_s


def impl_ids(names) -> tuple[str, ...]:
    """Return the registry impl ids --only names selects, in the registry's order."""
    return tuple(i.id for _, impls in load_all().select(list(names)) for i in impls)


def run_prediction(device, only, quick: bool, dtypes=None, precompiled: bool = False) -> float:
    """Return the dry run's predicted wall seconds of `run_bench.py [--quick] --only ONLY
    [--dtype DTYPES]` on device (what `--dry-run` prints), less the compile pool when a
    precompile record hands the kernels over (precompiled)."""
    plan = make_plan(load_all(), device, list(only) or None, quick, list(dtypes) if dtypes else None)
    pred = predict.predict(plan, device, timer_config(quick), quick, budget=run_budget(device),
                           factors=learned.expected(device, quick))
    return pred.total_s - (pred.compile_s if precompiled else 0.0)


def precompile_prediction(device) -> float:
    """Return the predicted seconds of the quick plan's precompile: its plan, then the pool."""
    plan = make_plan(load_all(), device, None, True)
    jobs = predict.aot_compiles(plan, device, True) or []
    return PLAN_S + predict.pool_seconds(jobs, predict.host_workers(device))


def gates_prediction(arch: str = GATE_ARCH) -> float:
    """Return the gates' predicted seconds: pytest's start, each per-point case with its
    kernels precompiled, and the configurations the TMA tests compile at their first launch:
    each TMA GEMM candidate of TMA_PRECISIONS the quick plan does not precompile, and each
    TMA prefill candidate of PREFILL_HEAD_DIMS that fits (at a length no block divides: a
    specialization no run launches)."""
    from kernels import attention as ka  # deferred: kernels/ needs Triton (optional; the check needs it)
    from kernels import gemm_tma as kt  # deferred: as above
    cc = int(arch.split("_")[1])
    ok = [r for r in build_plan(arch, quick=True).rows if r.status == "ok"]
    cases = len({(r.kernel, r.dtype) for r in ok})   # at most one case per (kernel, dtype)
    cached = {(r.dtype, kt.TmaConfig(c["BLOCK_M"], c["BLOCK_N"], c["BLOCK_K"], c["GROUP_M"], o["num_warps"],
                                     o["num_stages"], c["SPLIT_C"], c["WARP_SPECIALIZE"]))
              for r in ok if r.kernel == "tma_matmul_kernel" for c, o in [(r.job["constexprs"], r.job["options"])]}
    tma = sum(1 for p in TMA_PRECISIONS for cfg in kt.candidates(p) if (p, cfg) not in cached)
    prefill = 0
    for d in PREFILL_HEAD_DIMS:
        cands = [c for c in ka.prefill_candidates(d, cc) if c[4]]
        runs, _ = launched(cands, lambda c, d=d: ka.prefill_smem_bytes(c[0], c[1], d, 2, c[3], cc, tma=True),
                           232448, True)
        prefill += len(runs)
    compile_s = predict.COMPILE_S
    return GATE_START_S + cases * GATE_CASE_S + tma * compile_s["gemm"] + prefill * compile_s["attention"]


def steps(device, arch: str | None, scratch: Path, python: str = sys.executable) -> list[Step]:
    """Return the check's steps on device (a DeviceInfo the predictions are made for: the
    datasheet part, bench.aot.predict.spec_device). arch: the precompile's target (None: no
    precompile, a machine without an aot arch); scratch: a folder outside $OUT for the
    precompile record."""
    record = scratch / "precompile.json"
    env_cmd = ("nvidia-smi --query-gpu=name,uuid,memory.total,clocks.max.sm,clocks.max.mem,power.limit,"
               "driver_version,compute_cap --format=csv; "
               f"{python} -c \"import os, torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda,"
               " 'triton', triton.__version__, 'cores', os.cpu_count())\"")
    out = [Step("env", "cmd", ["bash", "-c", env_cmd], ENV_S, 2)]
    if arch:
        out.append(Step("precompile", "cmd", [python, "-m", "bench.aot.precompile", "--arch", arch, "--quick",
                                              "--json", str(record)], precompile_prediction(device), TEST_GRACE_S,
                        note=str(record)))
    pytest = [python, "-m", "pytest", "-p", "tests.gate_verdicts", "-p", "no:cacheprovider", "-q", "-rfE"]
    out.append(Step("gates", "gates", pytest + ["-m", "gpu", GATES_FILE], gates_prediction(), TEST_GRACE_S,
                    case_s=CASE_S))
    out.append(Step("kernels", "gates", pytest + cuda_tests.selectors(), cuda_tests.predicted_s(), TEST_GRACE_S,
                    required=False, case_s=CASE_S))
    memory, compute, every = impl_ids(MEMORY_ROOFS), impl_ids(COMPUTE_ROOFS), impl_ids(())
    out.append(Step("roofs-memory", "run", ["--dtype", ",".join(MEMORY_DTYPES)],
                    STEP_START_S + run_prediction(device, memory, False, MEMORY_DTYPES), RUN_GRACE_S, only=memory,
                    stall_s=RUN_STALL_S))
    out.append(Step("roofs-compute", "run", ["--dtype", ",".join(COMPUTE_DTYPES)],
                    STEP_START_S + run_prediction(device, compute, False, COMPUTE_DTYPES), RUN_GRACE_S,
                    only=compute, stall_s=RUN_STALL_S))
    out.append(Step("quick", "run", ["--quick"], STEP_START_S + run_prediction(device, every, True,
                                                                               precompiled=bool(arch)),
                    RUN_GRACE_S, required=False, only=every, stall_s=RUN_STALL_S,
                    env={"ROOFBENCH_PRECOMPILE": str(record)} if arch else {}))
    return out


def required_s(plan: list[Step]) -> float:
    """Return the required steps' predicted seconds, with the reserve kept for packing."""
    return sum(s.predicted_s for s in plan if s.required) + PACK_RESERVE_S


def optional_s(plan: list[Step]) -> float:
    """Return the predicted seconds of the optional steps before the plan's last step (the last
    takes whatever time is left)."""
    return sum(s.predicted_s for s in plan[:-1] if not s.required)


def fits(plan: list[Step], check_s: float = CHECK_S) -> bool:
    """Whether the plan keeps its budget: the required steps' predictions with the packing leave
    SLACK of check_s unspent, and the optional steps before the last fit in what they leave."""
    need = required_s(plan)
    return need <= (1 - SLACK) * check_s and need + optional_s(plan) <= check_s


def plan_text(plan: list[Step], check_s: float = CHECK_S, part: str = "") -> str:
    """Return the dry mode's table: each step's prediction and cap, and the totals (part: the
    datasheet part the predictions are for)."""
    lines = [f"device check: one call of at most {CALL_S} s, its own deadline {check_s:.0f} s"
             + (f"; predicted for the {part}" if part else ""),
             f"  {'step':<14} {'predicted':>9} {'cap':>6}"]
    for s in plan:
        lines.append(f"  {s.name:<14} {s.predicted_s:8.0f}s {s.cap_s:5.0f}s"
                     + ("" if s.required else "  (only in the time left)"))
    need, extra = required_s(plan), optional_s(plan)
    lines.append(f"  required steps and packing: {need:.0f} s predicted of {(1 - SLACK) * check_s:.0f} s "
                 f"({1 - SLACK:.0%} of {check_s:.0f} s); the optional steps get the {check_s - need:.0f} s left, "
                 f"{extra:.0f} s predicted before the last, which gets the {check_s - need - extra:.0f} s after them")
    return "\n".join(lines)
