"""GEMM: formulas on hand-worked shapes, the Triton kernel under the interpreter at sizes
that are not multiples of its tile, skip reasons, and the compute-roof derivation."""
import pandas as pd
import pytest
import torch
from conftest import INTERPRETING

from bench.hw import detect
from bench.hw.device import DeviceInfo
from bench.measure.gate import poison
from bench.measure.registry import load_all
from bench.measure.runner import Runner, make_plan
from bench.measure.timing import TimerConfig
from bench.ops import gemm as g
from roofs.analysis.model import compute_roofs, rated

REG = load_all()
CPU = detect.resolve("cpu")


def test_flops_and_bytes_hand_worked():
    # 2 x 3 x 4 x 5 = 120 flops
    assert g.gemm_flops(3, 4, 5) == 120
    # bf16: A 3x5 and B 5x4 at 2 bytes = (15 + 20) * 2 = 70; C 3x4 at 2 bytes = 24
    assert g.gemm_bytes(3, 4, 5, "bf16") == 94
    # fp8: inputs 1 byte, C in bf16: 35 + 24
    assert g.gemm_bytes(3, 4, 5, "fp8e4m3") == 59
    # int8 in, int32 out: 35 + 48; fp32 and tf32 both 4 bytes everywhere: (35 + 12) * 4
    assert g.gemm_bytes(3, 4, 5, "int8") == 83
    assert g.gemm_bytes(3, 4, 5, "tf32") == g.gemm_bytes(3, 4, 5, "fp32") == 188
    # square 1024 bf16: intensity = 2 n^3 / (3 n^2 2) = n / 3
    op = REG.ops["gemm.square"]
    p = {"dtype": "bf16", "shape": (1024, 1024, 1024)}
    assert op.flops(p) / op.bytes(p) == pytest.approx(1024 / 3)


def test_skinny_sweep_grows_m_to_n():
    shapes = g.skinny_sweep(CPU, quick=True)
    assert shapes[0] == (1, 1024, 1024) and shapes[-1] == (1024, 1024, 1024)
    assert [m for m, _, _ in shapes] == [1, 4, 16, 64, 256, 1024]
    # intensity grows about linearly with M while M << N: M=1 bf16 is ~1 FLOP/B
    op = REG.ops["gemm.skinny"]
    i1 = op.flops({"dtype": "bf16", "shape": shapes[0]}) / op.bytes({"dtype": "bf16", "shape": shapes[0]})
    assert i1 == pytest.approx(2 * 1024 * 1024 / ((1024 + 1024 * 1024 + 1024) * 2), rel=1e-12)
    assert REG.ops["gemm.skinny"].modes == ("cold",)


def _triton_check(precision, m, n, k, dev):
    from kernels import gemm as kg
    x = g.make_inputs({"dtype": precision, "shape": (m, n, k)}, dev)
    ref = g.reference(x)
    poison(x, ["c"])
    out = kg.matmul(x["a"], x["b"], x["c"], kg.INTERPRETER_CONFIG,
                    input_precision="tf32" if precision == "tf32" else "ieee", scales=x.get("scales"))
    err = ((out.double() - ref).norm() / ref.norm()).item()
    assert err <= g.PRECISIONS[precision].tolerance, f"{precision}: {err}"
    return err


@pytest.mark.parametrize("precision", ["fp32", "fp16", "fp8e4m3", "fp8e5m2", "int8"])
def test_triton_gemm_ragged_shapes_match_float64(precision, dev):
    # 100 x 72 x 80 with 64 x 64 x 32 tiles: ragged in M, N and K
    err = _triton_check(precision, 100, 72, 80, dev)
    if precision == "int8":
        assert err == 0.0
    _triton_check(precision, 1, 130, 65, dev)  # a GEMV-like M = 1
    # K a multiple of the 32-wide K tile: the unmasked EVEN_K loop; M and N still ragged
    err = _triton_check(precision, 70, 90, 96, dev)
    if precision == "int8":
        assert err == 0.0


@pytest.mark.skipif(INTERPRETING, reason="bf16 is silently wrong in Triton's interpreter (triton issue 11584)")
@pytest.mark.gpu
@pytest.mark.parametrize("precision", ["bf16", "tf32"])
def test_triton_gemm_bf16_tf32_on_gpu(precision):
    _triton_check(precision, 1000, 520, 700, "cuda")


def test_fp8_inputs_fill_the_format_and_reference_uses_stored_values():
    x = g.make_inputs({"dtype": "fp8e4m3", "shape": (64, 32, 48)}, "cpu")
    assert x["a"].dtype == torch.float8_e4m3fn and x["a"].float().abs().max() == 448
    assert x["scales"].tolist() == [x["scale_a"].item(), x["scale_b"].item()]
    ref = g.reference(x)
    manual = (x["a"].double() * x["scale_a"].double()) @ (x["b"].double() * x["scale_b"].double())
    assert torch.allclose(ref, manual, rtol=1e-12)


def test_skip_reasons_for_missing_precisions():
    assert "CPU has no TF32" in g.point_skip({"dtype": "tf32", "shape": (8, 8, 8)}, CPU)
    a100 = DeviceInfo("cuda", "cuda:0", "NVIDIA A100-SXM4-80GB", 80 * 2**30, 108, "SMs", (), compute_capability="8.0")
    why = g.point_skip({"dtype": "fp8e4m3", "shape": (16, 16, 16)}, a100)
    assert why.code == "below_min_cc" and "8.9" in why
    assert g.point_skip({"dtype": "bf16", "shape": (16, 16, 16)}, a100) is None
    assert g.triton_skip({"dtype": "fp64"}, CPU) and g.numpy_skip({"dtype": "bf16"}, CPU)
    assert g.torch_skip({"dtype": "int8", "shape": (8, 32, 32)}, a100).code == "int_mm_small_m"


def test_probe_turns_a_missing_op_into_a_reason(monkeypatch):
    def missing(*a, **k):
        raise NotImplementedError("no kernel for this backend")
    monkeypatch.setattr(torch, "_scaled_mm", missing)
    g.probe.cache_clear()
    try:
        reason = g.probe("fp8e4m3", "cpu")
        assert reason.code == "torch_fails" and "NotImplementedError" in reason
    finally:
        g.probe.cache_clear()


def test_runner_gates_every_cpu_precision_against_float64():
    plan = make_plan(REG, CPU, only=["gemm.square/torch", "gemm.square/numpy"], max_ws_bytes=400_000)  # 128^3 only
    ms = Runner(CPU, TimerConfig(budget_s=0.02, warmup_s=0.001)).run(plan)
    by = {(m.impl.split("/")[1], m.dtype): m for m in ms if m.shape == "128x128x128"}
    for precision in ("fp64", "fp32", "fp16", "bf16", "int8"):
        m = by[("torch", precision)]
        assert m.status == "ok" and m.error <= m.tolerance and m.gflops > 0, (precision, m.reason)
    assert by[("torch", "tf32")].status == "skipped"
    assert by[("numpy", "fp32")].status == "ok" and by[("numpy", "bf16")].status == "skipped"
    assert by[("torch", "int8")].error == 0.0


def test_compute_roofs_best_per_precision_over_impls_and_shapes():
    """A precision's roof is the Policy.roof_rank-th (2nd) best measurement of its shapes within
    shape_tol (10%) of its best. bf16: 950 (Triton search) and 800 (torch square); 800 is under
    0.9 x 950 = 855, so the plateau is 950 alone and, with one measurement, 950 is the roof.
    fp32: the error row (9999) sets nothing, so 240 alone. int8: 1500 alone, in GOP/s. The
    stream row has no GFLOP/s figure of a unit and sets no compute roof."""
    rows = pd.DataFrame([
        {"family": "gemm", "op": "gemm.square", "impl": "gemm.square/torch", "dtype": "bf16", "shape": "512x512x512",
         "gflops": 800.0, "status": "ok", "point_id": "a", "working_set_bytes": 1},
        {"family": "gemm", "op": "gemm.search", "impl": "gemm.search/triton", "dtype": "bf16", "shape": "2048x1024x512",
         "gflops": 950.0, "status": "ok", "point_id": "b", "working_set_bytes": 2},
        {"family": "gemm", "op": "gemm.square", "impl": "gemm.square/numpy", "dtype": "fp32", "shape": "1024x1024x1024",
         "gflops": 240.0, "status": "ok", "point_id": "c", "working_set_bytes": 3},
        {"family": "gemm", "op": "gemm.square", "impl": "gemm.square/torch", "dtype": "fp32", "shape": "2048x2048x2048",
         "gflops": 9999.0, "status": "error", "point_id": "d", "working_set_bytes": 4},
        {"family": "gemm", "op": "gemm.square", "impl": "gemm.square/torch", "dtype": "int8", "shape": "64x64x64",
         "gflops": 1500.0, "status": "ok", "point_id": "e", "working_set_bytes": 5},
        {"family": "stream", "op": "stream.triad", "impl": "stream.triad/torch", "dtype": "float32", "shape": "(9,)",
         "gflops": 99999.0, "status": "ok", "point_id": "f", "working_set_bytes": 6},
    ]).assign(gbps=float("nan"), median_ms=1.0, mode="warm")
    found, _ = compute_roofs(rated(rows, {}), rows)
    roofs = {r.name: r for r in found}
    assert set(roofs) == {"bf16", "fp32", "int8"}
    assert (roofs["bf16"].value, roofs["bf16"].impl, roofs["bf16"].shape) == (950.0, "gemm.search/triton",
                                                                              "2048x1024x512")
    assert roofs["fp32"].value == 240.0 and roofs["fp32"].impl == "gemm.square/numpy"  # the error row is ignored
    assert roofs["int8"].unit == "GOP/s" and roofs["bf16"].unit == "GFLOP/s"
    assert roofs["bf16"].extra["unit"] == "gemm" and roofs["bf16"].interval[0] == 950.0


def test_tile_lists_leave_out_the_tiles_that_spill_on_their_target():
    """What the ahead-of-time compiles found (python -m bench.aot --arch A, full plans):
    sm_100 spills Hopper's wide int8 tiles (208-304 B) and tf32 128x256x32 (128 B at 254
    registers), so Blackwell takes Ampere's lists there; gfx942 spills fp8 32x64x256 (636 B
    at 321 VGPRs), so AMD's fp8 skinny tile is K 128; and sm_100's block-scaled fp4 MMA takes
    128-row tiles (a 64-row one staged 144,912 B and spilled). The launcher passes what a
    device is (bench/ops/gemm.py)."""
    from kernels import gemm as k
    from kernels import gemm_fp4 as kf
    shapes = lambda cfgs: {(c.block_m, c.block_n, c.block_k) for c in cfgs}  # noqa: E731
    assert (128, 256, 32) in shapes(k.candidates("tf32", cc=90))
    assert (128, 256, 32) not in shapes(k.candidates("tf32", cc=100))
    assert k.candidates("int8", cc=100) == k.candidates("int8", cc=80)
    assert (32, 64, 256) in shapes(k.candidates("fp8e4m3", cc=80))
    for p in ("fp8e4m3", "fp8e5m2"):
        amd = shapes(k.candidates(p, cc=80, amd=True))
        assert (32, 64, 256) not in amd and (32, 64, 128) in amd and len(amd) == len(k.candidates(p, cc=80))
    assert k.candidates("int8", cc=80, amd=True) == k.candidates("int8", cc=80)
    assert min(c.block_m for c in kf.CANDIDATES) == 128


def test_a_cpus_quick_search_leaves_out_the_precisions_it_has_no_unit_for():
    """Fp16 and fp8 GEMMs on a CPU without their units run through conversion at a
    fraction of the rate; their bound is the exact wider path the search measures anyway."""
    from bench.hw.device import CacheLevel, DeviceInfo
    avx2 = DeviceInfo("cpu", "cpu", "avx2", 2**34, 2, "cores", (CacheLevel("l3", 2**25),),
                      cpu_flags=("avx", "avx2", "fma"))
    zen4 = DeviceInfo("cpu", "cpu", "zen4", 2**34, 2, "cores", (CacheLevel("l3", 2**25),),
                      cpu_flags=("avx2", "avx512f", "avx512_bf16", "avx512_vnni"))
    assert g.search_precisions(avx2, True) == ("fp64", "fp32", "tf32", "int8")
    assert g.search_precisions(zen4, True) == ("fp64", "fp32", "tf32", "bf16", "int8")
    assert g.search_precisions(avx2, False) == tuple(g.PRECISIONS)  # a full run measures every one
