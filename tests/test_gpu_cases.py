"""On the CPU: the GPU path test's case list (tests/test_gpu_paths.py) covers every (kernel,
dtype) the quick plan compiles for sm_90, and the device check runs it before its runs."""
import pytest
from test_gpu_paths import gpu_cases

from bench.aot.plan import build_plan


def test_the_gpu_cases_cover_every_kernel_and_dtype_of_the_quick_plan():
    planned = {(r.kernel, r.dtype) for r in build_plan("sm_90", quick=True).rows if r.status == "ok"}
    cases = gpu_cases("sm_90")
    covered = {kd for kds in cases.values() for kd in kds}
    assert planned and covered == planned
    # fewer cases than kernels: a point launches several (decode's split and combine)
    assert len(cases) <= len(planned)
    assert {"tma_matmul_kernel"} <= {k for k, _ in covered}
    assert {d for k, d in covered if k == "tma_matmul_kernel"} >= {"bf16", "fp8e4m3", "int8"}


@pytest.mark.slow
def test_the_device_check_runs_the_gates_first(device_check_dry):
    out = device_check_dry  # conftest.py: `bash .ci/device-check --dry`, once per session
    assert out.returncode == 0, out.stderr
    steps = [line.split()[0] for line in out.stdout.splitlines()[2:] if line.startswith("  ") and "s " in line]
    # the gates (tests/test_gpu_paths.py) after the precompile, then the other CUDA-only tests
    # (bench/devcheck/cuda_tests.py), before any run step
    assert steps[:6] == ["env", "precompile", "gates", "kernels", "roofs-memory", "roofs-compute"], out.stdout


def test_the_gpu_path_tests_cover_every_tma_configuration_of_the_quick_plan():
    # the TMA GEMM's every-configuration test walks kt.candidates(dtype) (int8's 128 x 256
    # warp-specialized tile among them), and the causal prefill test every TMA candidate a
    # quick run tunes over at head dims 64 and 128: each configuration the sm_90 quick plan
    # compiles is one of them
    from bench.ops._tune import launched
    from kernels import attention as ka
    from kernels import gemm_tma as kt
    ok = build_plan("sm_90", quick=True).by_status("ok")
    gemm = {(r.dtype, kt.TmaConfig(c["BLOCK_M"], c["BLOCK_N"], c["BLOCK_K"], c["GROUP_M"], o["num_warps"],
                                   o["num_stages"], c["SPLIT_C"], c["WARP_SPECIALIZE"]))
            for r in ok if r.kernel == "tma_matmul_kernel"
            for c, o in [(r.job["constexprs"], r.job["options"])]}
    assert gemm and all(cfg in kt.candidates(dtype) for dtype, cfg in gemm)
    assert ("int8", kt.TmaConfig(128, 256, 64, 8, 4, 4, 1, True)) in gemm
    prefill = {(r.job["constexprs"]["D"], (r.job["constexprs"]["BLOCK_M"], r.job["constexprs"]["BLOCK_N"],
                                           r.job["options"]["num_warps"], r.job["options"]["num_stages"], True))
               for r in ok if r.kernel == "attn_fwd_kernel" and r.job["constexprs"]["USE_TMA"]}
    tested = set()
    for d in (64, 128):
        cands = [c for c in ka.prefill_candidates(d, 90) if c[4]]
        runs, _ = launched(cands, lambda c, d=d: ka.prefill_smem_bytes(c[0], c[1], d, 2, c[3], 90, tma=True),
                           232448, True)
        tested |= {(d, c) for c in runs}
    assert prefill and prefill <= tested


def test_every_cold_gpu_case_tunes_with_the_runners_flush():
    # the gate test calls each launcher in the context gate_context builds; on a GPU a cold op's
    # tuner (bench.ops._tune.autotune) times every candidate after that context's flush. Here the
    # same context drives the same autotune on the CPU's timer: without a flush every candidate
    # failed to time and the case failed with no candidate left (gemv's eight, decode's one)
    import torch
    from test_gpu_paths import gate_context

    from bench.hw import detect
    from bench.measure.registry import load_all
    from bench.measure.runner import Runner
    from bench.ops import _tune
    reg, runner = load_all(), Runner(detect.resolve("cpu"), quick=True)
    cold = [(op, point) for op, _, point in gpu_cases("sm_90") if reg.ops[op].modes[0] == "cold"]
    assert {op for op, _ in cold} == {"gemv.decode", "attention.decode"} and len(cold) == 9
    x = torch.ones(1000)
    for i, (name, point) in enumerate(cold):
        ctx = gate_context(runner, reg.ops[name], dict(point), x, x.clone(), 1e-3)
        assert ctx.mode == "cold"
        cfg, seconds, failures = _tune.autotune(("cold-case", i), ["a", "b"], lambda c: lambda: x.sum(),
                                                "cpu", ctx.mode, ctx.flush, None)
        assert cfg in ("a", "b") and seconds > 0 and failures == ""
