"""On the CPU: the GPU path test's case list (tests/test_gpu_paths.py) covers every (kernel,
dtype) the quick plan compiles for sm_90, and the device check lists it as its first step."""
import os
import subprocess
import sys
from pathlib import Path

from test_gpu_paths import gpu_cases

from bench.aot.plan import build_plan

ROOT = Path(__file__).resolve().parents[1]


def test_the_gpu_cases_cover_every_kernel_and_dtype_of_the_quick_plan():
    planned = {(r.kernel, r.dtype) for r in build_plan("sm_90", quick=True).rows if r.status == "ok"}
    cases = gpu_cases("sm_90")
    covered = {kd for kds in cases.values() for kd in kds}
    assert planned and covered == planned
    # fewer cases than kernels: a point launches several (decode's split and combine)
    assert len(cases) <= len(planned)
    assert {"tma_matmul_kernel"} <= {k for k, _ in covered}
    assert {d for k, d in covered if k == "tma_matmul_kernel"} >= {"bf16", "fp8e4m3", "int8"}


def test_the_device_check_runs_the_path_tests_first():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHON"] = sys.executable  # the script's steps run this interpreter, however pytest was started
    out = subprocess.run(["bash", str(ROOT / ".ci" / "device-check"), "--dry"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    steps = out.stdout.split("steps: ", 1)[1].splitlines()[0]
    # the full mode: the path tests are the first tests, while the pool precompiles
    assert steps.startswith("env; precompile (bench.aot.precompile, background) | "
                            "paths (pytest tests/test_gpu_paths.py, <= 60 s) then pytest -m gpu")
    quick = subprocess.run(["bash", str(ROOT / ".ci" / "device-check"), "--dry"], cwd=ROOT, env=env | {"MODE": "quick"},
                           capture_output=True, text=True, timeout=300)
    assert quick.stdout.split("steps: ", 1)[1].startswith("env; paths (pytest tests/test_gpu_paths.py, <= 60 s); run_bench.py")
