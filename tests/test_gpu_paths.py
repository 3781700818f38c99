"""The device check's gates: every Triton path once on the GPU, through the gate, so a broken
kernel is named, and left out of the check's runs, before they start (.ci/device-check,
`gates`; a verdict per case as it is reached, tests/gate_verdicts.py).

- every (kernel, dtype) the quick plan compiles (bench.aot.plan, status ok), each at the first
  point of the quick plan that launches it, tuned over its candidates in the op's first mode
  (a cold op's with the runner's own flush: Runner.launch_context) with every winner checked
  (the launch context's verify), then checked by the gate: one test per point;
- the persistent TMA GEMM with more tiles than programs (64 tiles on 4 programs: the pipeline
  across tiles, the epilogue counter, a warp-specialized producer running ahead), every
  candidate configuration of every precision it runs, warp-specialized ones included (int8's
  128 x 256 one among them);
- the causal TMA prefill (host-side descriptors, query blocks longest first) at a length no
  block divides, every candidate a quick run tunes over at both head dims (the tuning test
  above checks only each point's winner).

Marked `gpu`: skipped without CUDA (conftest.py). tests/test_gpu_cases.py checks on the CPU
that the case list covers the quick plan."""
import pytest
import torch

from bench.aot.plan import build_plan
from bench.measure.gate import check, verifier
from bench.measure.registry import LaunchContext, load_all
from bench.measure.runner import Runner

pytestmark = pytest.mark.gpu
TMA_PRECISIONS = ("bf16", "fp8e4m3", "int8")
MANY_TILES = (1024, 4)    # M = N = K, programs: 64 tiles of 128 x 128 on 4 programs
# the impl each test without op and impl parameters gates (tests/gate_verdicts.py): a case
# of it that does not pass leaves that impl out of the device check's runs
IMPL_OF = {"test_persistent_tma_gemm_with_more_tiles_than_programs_every_configuration": "gemm.square/triton_tma",
           "test_causal_tma_prefill_every_quick_candidate": "attention.prefill/triton"}


_CASES: dict = {}


def gpu_cases(arch: str = "sm_90") -> dict:
    """Return {(op, impl, point as a sorted tuple): [(kernel, dtype), ...]}: the cases the GPU
    path test runs, one per point that first launches some (kernel, dtype) of the quick plan."""
    if arch not in _CASES:
        cases: dict = {}
        seen = set()
        for r in build_plan(arch, quick=True).rows:   # a row per configuration: each (kernel, dtype) once
            if r.status == "ok" and r.source and (r.kernel, r.dtype) not in seen:
                seen.add((r.kernel, r.dtype))
                op, impl, point = r.source
                cases.setdefault((op, impl, tuple(sorted(point.items()))), []).append((r.kernel, r.dtype))
        _CASES[arch] = cases
    return {k: list(v) for k, v in _CASES[arch].items()}


def _arch() -> str:
    """Return the aot arch whose quick plan the cases come from: this GPU's, sm_90 without one
    (collection on a CPU, where conftest.py skips every case)."""
    if not torch.cuda.is_available():
        return "sm_90"
    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}" if f"{major}{minor}" in ("80", "90", "100") else "sm_90"


def case_params(arch: str) -> list:
    """Return the gate test's cases as pytest params, one test each: a cut run keeps every
    verdict already reached (.ci/device-check writes them per case)."""
    return [pytest.param(op, impl, dict(point), kernels,
                         id=f"{op}/{impl}-" + ",".join(f"{k}={v}" for k, v in point).replace(" ", ""))
            for (op, impl, point), kernels in gpu_cases(arch).items()]


def gate_context(runner: Runner, op, point: dict, x, ref, tol) -> LaunchContext:
    """Return the context the runner calls op's launcher in at point (its first mode: a cold
    op's tuner gets the runner's flush), with the gate's verifier."""
    return runner.launch_context(point, op.modes[0], verifier(ref, tol, runner.device, x, op.outputs, op.error))


def _through_the_gate(runner: Runner, reg, op_name, impl_name, point) -> str | None:
    op, impl = reg.ops[op_name], reg.impls[f"{op_name}/{impl_name}"]
    info = runner.device
    x = op.make_inputs(point, info.torch_device)
    ref, tol = op.reference(x), op.tolerance(point)
    ctx = gate_context(runner, op, point, x, ref, tol)
    try:
        gate = check(lambda: impl.launcher(x, ctx), ref, tol, info, x, op.outputs, op.error)
    except Exception as e:  # noqa: BLE001  named as the case's failure
        return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    return None if gate.passed else gate.reason


@pytest.fixture(scope="module")
def cuda_runner():
    """One quick Runner on the GPU for every case: its cold flush buffer is made once."""
    from bench.hw import detect
    return Runner(detect.resolve("cuda"), quick=True)


@pytest.mark.parametrize("op,impl,point,kernels", case_params(_arch()))
def test_every_kernel_and_dtype_of_the_quick_plan_passes_the_gate(cuda_runner, op, impl, point, kernels):
    try:
        why = _through_the_gate(cuda_runner, load_all(), op, impl, point)
    finally:
        torch.cuda.empty_cache()
    assert why is None, f"{op}/{impl} {point} ({', '.join(f'{k} {d}' for k, d in kernels)}): {why}"


@pytest.mark.parametrize("precision", TMA_PRECISIONS)
def test_persistent_tma_gemm_with_more_tiles_than_programs_every_configuration(precision):
    from bench.hw import detect
    from bench.ops.gemm import _tma_call
    from kernels import gemm_tma as kt
    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("the TMA GEMM needs sm_90 or later")
    info, reg = detect.resolve("cuda"), load_all()
    op = reg.ops["gemm.square"]
    n, programs = MANY_TILES
    point = {"dtype": precision, "m": n, "n": n, "k": n}
    point = next((p for p in op.points(info, False) if p["dtype"] == precision), point) | {"m": n, "n": n, "k": n}
    x = op.make_inputs(point, info.torch_device)
    ref, tol = op.reference(x), op.tolerance(point)
    verify = verifier(ref, tol, info, x, op.outputs, op.error)
    failed = []
    for cfg in kt.candidates(precision):
        try:
            why = verify(_tma_call(x, precision, cfg, programs))
        except Exception as e:  # noqa: BLE001  out of resources on this part: named
            why = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        if why:
            failed.append(f"{cfg}: {why}")
    assert not failed, "\n".join(failed)


@pytest.mark.parametrize("d", [64, 128])
def test_causal_tma_prefill_every_quick_candidate(d):
    from bench.hw import detect
    from bench.ops import attention as a
    from bench.ops._tune import launched, smem_limit
    from kernels import attention as ka
    major, minor = torch.cuda.get_device_capability()
    if major < 9:
        pytest.skip("the TMA prefill needs sm_90 or later")
    info = detect.resolve("cuda")
    point = {"dtype": "bf16", "causal": True, "head_dim": d, "heads": (1, 8, 2), "seq": 1000}
    op = load_all().ops["attention.prefill"]
    x = op.make_inputs(point, info.torch_device)
    ref, tol = op.reference(x), op.tolerance(point)
    verify = verifier(ref, tol, info, x, op.outputs, op.error)
    cands = [c for c in ka.prefill_candidates(d, 10 * major + minor) if c[4]]
    runs, _ = launched(cands, lambda c: ka.prefill_smem_bytes(c[0], c[1], d, 2, c[3], 10 * major + minor, tma=True),
                       smem_limit(info.torch_device), True)
    assert runs
    failed = [f"{c}: {why}" for c in runs if (why := verify(a._prefill_triton_call(x, c)))]
    assert not failed, "\n".join(failed)
