"""The persistent TMA GEMM (kernels/gemm_tma.py): against float64 at shapes that are not
multiples of its tiles (Triton 3.9's interpreter emulates the tensor descriptors, their
zero-filled edges and clipped stores), every C split, several tiles per program, its skip
reasons, its shared-memory model on hand-worked tiles, and the gate through the registry."""
import pytest
import torch
from conftest import INTERPRETING

from bench.hw import detect
from bench.hw.device import DeviceInfo
from bench.measure import skip
from bench.measure.gate import poison
from bench.measure.registry import load_all
from bench.measure.runner import INTERPRETED_PREFIX, Runner, make_plan
from bench.measure.timing import TimerConfig
from bench.ops import gemm as g
from bench.util import itemsize
from kernels import gemm_tma as kt

REG = load_all()
CPU = detect.resolve("cpu")
SM90_SMEM = 232448


def _gpu(cc: str) -> DeviceInfo:
    return DeviceInfo(kind="cuda", torch_device="cuda", name="test GPU", memory_bytes=None, compute_units=132,
                      compute_unit_kind="SMs", caches=(), compute_capability=cc)


def _check(precision, m, n, k, dev, cfg=kt.INTERPRETER_CONFIG, sms=None):
    x = g.make_inputs({"dtype": precision, "shape": (m, n, k)}, dev)
    ref = g.reference(x)
    poison(x, ["c"])
    out = kt.matmul(x["a"], x["b_nk"], x["c"], cfg, scales=x.get("scales"), sms=sms)
    err = ((out.double() - ref).norm() / ref.norm()).item()
    assert err <= g.PRECISIONS[precision].tolerance, f"{precision} {m}x{n}x{k} {cfg}: {err}"
    if precision == "int8":
        assert err == 0.0
    return err


@pytest.mark.skipif(not hasattr(__import__("triton.language").language, "make_tensor_descriptor"),
                    reason="this Triton has no tensor descriptors")
@pytest.mark.parametrize("precision", ["fp16", "fp8e4m3", "fp8e5m2", "int8"])
def test_tma_gemm_ragged_shapes_match_float64(precision, dev):
    # 100 x 72 x 80 with 64 x 64 x 32 tiles: ragged in M, N and K (the descriptors zero-fill
    # the loads past the edges and clip the stores); 3 programs over 4 tiles
    _check(precision, 100, 72, 80, dev)
    _check(precision, 1, 144, 48, dev)         # M = 1, a GEMV-like row
    _check(precision, 130, 200, 96, dev, sms=2)  # 12 tiles on 2 programs: 6 tiles each, grouped order


@pytest.mark.parametrize("split", [1, 2, 4])
def test_tma_gemm_every_c_split_stores_every_column(split, dev):
    # the split epilogue writes slices of the tile: a slice in the wrong place, or one not
    # written (C is poisoned with NaN), fails
    cfg = kt.TmaConfig(64, 64, 32, 2, 4, 1, split)
    _check("fp16", 70, 136, 64, dev, cfg)
    _check("int8", 70, 136, 64, dev, cfg)


def test_tma_gemm_warp_specialized_config_is_correct(dev):
    # a warp-specialized candidate (the interpreter runs its loop plainly; on a GPU it is
    # the producer/consumer form, checked by the gpu-marked test below)
    _check("fp8e4m3", 100, 72, 80, dev, kt.TmaConfig(64, 64, 32, 8, 4, 2, 1, True))


def test_int8_warp_specialized_128x256_tile_of_the_quick_plan_is_exact(dev):
    # the int8 candidate a quick run tunes over (128 x 256 x 64, 4 stages, C whole), at a
    # ragged shape of 4 tiles on 3 programs: edge tiles zero-filled, the last stores clipped
    cfg = next(c for c in kt.candidates("int8") if c.warp_specialize and c.block_n == 256)
    assert (cfg.block_m, cfg.block_k, cfg.num_stages, cfg.split_c) == (128, 64, 4, 1)
    _check("int8", 130, 260, 208, dev, cfg, sms=3)


def test_tma_reason_names_unaligned_rows():
    a = torch.empty(8, 20, dtype=torch.float16)    # 40-byte rows
    b = torch.empty(16, 20, dtype=torch.float16)
    c = torch.empty(8, 16, dtype=torch.float16)
    assert "16-byte row strides" in kt.tma_reason(a, b, c)
    assert kt.tma_reason(torch.empty(8, 24, dtype=torch.float16), torch.empty(16, 24, dtype=torch.float16), c) is None
    assert "contiguous rows" in kt.tma_reason(torch.empty(24, 8, dtype=torch.float16).t(), b, c)
    with pytest.raises(ValueError, match="16-byte"):
        kt.matmul(a, b, c)


def test_skip_reasons():
    p = lambda dt, shape=(8192, 8192, 8192): {"dtype": dt, "shape": shape}  # noqa: E731
    # before Hopper: the pointer-load GEMM runs instead
    assert g.tma_skip(p("bf16"), _gpu("8.0")).code == g.tma_skip(p("bf16"), _gpu("8.9")).code == "tma_before_hopper"
    assert g.tma_skip(p("bf16"), _gpu("9.0")) is None and g.tma_skip(p("int8"), _gpu("10.0")) is None
    assert g.tma_skip(p("fp8e4m3"), _gpu("9.0")) is None
    # precisions it lacks
    assert g.tma_skip(p("fp32"), _gpu("9.0")).code == "tma_precision"
    assert g.tma_skip(p("tf32"), _gpu("9.0")) and g.tma_skip(p("fp64"), _gpu("9.0"))
    # a GPU run times bf16, fp8e4m3 and int8 on squares of 4096 to 16384 (the device check's budget)
    assert g.tma_skip(p("fp16"), _gpu("9.0")).code == g.tma_skip(p("fp8e5m2"), _gpu("9.0")).code == "tma_same_as"
    assert g.TMA_SAME_AS == {"fp16": "bf16", "fp8e5m2": "fp8e4m3"} and g.TMA_SIZES == (4096, 16384)
    assert g.tma_skip(p("bf16", (2048, 2048, 2048)), _gpu("9.0")).code == "tma_size"
    assert g.tma_skip(p("bf16", (4096, 4096, 4096)), _gpu("9.0")) is None
    assert g.tma_skip(p("int8", (16384, 16384, 16384)), _gpu("9.0")) is None
    # rows TMA cannot address: K = 100 bf16 is 200 bytes; int8 K = 40 is 40 bytes; int32 C of N = 6 is 24
    assert g.tma_skip(p("bf16", (64, 64, 100)), CPU).code == "tma_stride"
    assert g.tma_skip(p("int8", (64, 64, 40)), CPU).code == "tma_stride"
    assert g.tma_skip(p("int8", (64, 6, 64)), CPU).code == "tma_stride"
    assert g.tma_skip(p("int8", (64, 16, 48)), CPU) is None  # K = 48 B and N = 16 x 4 B: both multiples of 16
    # the CPU (the interpreter) checks every precision at any size
    assert g.tma_skip(p("fp16", (100, 72, 80)), CPU) is None and g.tma_skip(p("fp8e5m2", (64, 64, 64)), CPU) is None
    if INTERPRETING:  # the one interpreter bf16 rule (bench/measure/skip.py) covers this impl too
        impl = REG.impls["gemm.square/triton_tma"]
        assert "11584" in skip.static_reason(REG.ops[impl.op], impl, p("bf16"), CPU, quick=False)
    # registered on the square sweep only
    assert [i for i in REG.impls if i.endswith("/triton_tma")] == ["gemm.square/triton_tma"]


def test_smem_model_hand_worked():
    # 3 x (128 + 256) x 64 x 2 = 147,456 B of A and B buffers; one C slice of 128 x 128 x 2 =
    # 32,768 B; 1 KiB of barriers: 181,248 B on sm_90 (the compiler reports 180,248)
    cfg = kt.TmaConfig(128, 256, 64, 8, 8, 3, 2)
    assert kt.smem_bytes(cfg, 2, 2, 90) == 147456 + 32768 + 1024 == 181248
    # Blackwell (and an unknown arch) adds half a slice
    assert kt.smem_bytes(cfg, 2, 2, 100) == kt.smem_bytes(cfg, 2, 2) == 181248 + 16384
    # int8's int32 C, whole (split 1): 3 x 384 x 128 + 128 x 256 x 4 + 1024 = 279,552 > 227 KiB: pruned;
    # int8's own warp-specialized tile takes 64 K per stage, 4 deep: 98,304 + 131,072 + 1024 = 230,400, fits
    assert kt.smem_bytes(kt.TmaConfig(128, 256, 128, 8, 4, 3, 1, True), 1, 4, 90) == 279552
    ws8 = kt.TmaConfig(128, 256, 64, 8, 4, 4, 1, True)
    assert ws8 in kt.candidates("int8") and kt.smem_bytes(ws8, 1, 4, 90) == 4 * 384 * 64 + 131072 + 1024 == 230400
    assert 230400 <= SM90_SMEM
    # every candidate's label says what it is
    assert str(cfg) == "128x256x64/g8/w8/s3/c2" and str(kt.TmaConfig(128, 128, 64, 8, 4, 4, 1, True)).endswith("/ws")


def test_candidates_fit_hopper_and_warp_specialize_only_at_four_warps():
    for precision in kt.PRECISIONS:
        p = g.PRECISIONS[precision]
        cands = kt.candidates(precision)
        fits = [c for c in cands if kt.smem_bytes(c, itemsize(p.storage), itemsize(p.out), 90) <= SM90_SMEM]
        assert len(fits) >= 3, precision
        # Hopper specializes warps only at 4 warps, and Triton 3.6 only with C stored whole
        assert all(c.num_warps == 4 and c.split_c == 1 for c in cands if c.warp_specialize)
        # a quick run (the first 3 that fit) tries a warp-specialized candidate, a 128 x 256 one
        assert any(c.warp_specialize for c in fits[:3]), precision
        assert any(c.warp_specialize and c.block_n == 256 for c in fits[:3]), precision


@pytest.mark.skipif(not INTERPRETING, reason="the CPU path of this check runs under the interpreter")
def test_runner_gates_the_tma_impl_against_float64():
    plan = make_plan(REG, CPU, only=["gemm.square/triton_tma"], dtypes=["fp8e4m3", "int8", "bf16", "fp32"],
                     max_ws_bytes=400_000)  # 128^3 only
    ms = Runner(CPU, TimerConfig(budget_s=0.02, warmup_s=0.001)).run(plan)
    by = {m.dtype: m for m in ms if m.shape == "128x128x128"}
    # checked, never timed, under the interpreter (rule 8); int8 exactly
    for precision in ("fp8e4m3", "int8"):
        assert by[precision].status == "skipped" and by[precision].reason.startswith(INTERPRETED_PREFIX)
        assert by[precision].error <= by[precision].tolerance
    assert by["int8"].error == 0.0
    assert "11584" in by["bf16"].reason and "covers" in by["fp32"].reason


# The device check runs the gpu-marked tests in a bounded step: each configuration here is a
# compile of a few seconds, so these check the first candidate of each precision a GPU run
# times and the first warp-specialized one, not all of them (tests/test_aot.py compiles all).
@pytest.mark.gpu
@pytest.mark.parametrize("precision", ["bf16", "fp8e4m3", "int8"])
def test_tma_gemm_on_gpu(precision):
    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("TMA descriptors need sm_90+")
    p = g.PRECISIONS[precision]
    limit = torch.cuda.get_device_properties(0).shared_memory_per_block_optin
    major, minor = torch.cuda.get_device_capability()
    fits = [c for c in kt.candidates(precision)
            if kt.smem_bytes(c, itemsize(p.storage), itemsize(p.out), 10 * major + minor) <= limit]
    checked = [fits[0]] + ([next(c for c in fits if c.warp_specialize)] if precision == "bf16" else [])
    for cfg in checked:
        _check(precision, 1000, 528, 720, "cuda", cfg)   # ragged in M, N, K
        _check(precision, 1, 4096, 1024, "cuda", cfg)    # M = 1: one row of 128-row tiles


def test_dry_run_charges_the_tma_compiles_on_hopper_only():
    from dataclasses import replace

    from bench.aot import predict as pr
    from bench.measure.runner import Plan, Task
    h200 = pr.spec_device("h200")
    a100 = replace(h200, compute_capability="8.0")
    op, impl = REG.ops["gemm.square"], REG.impls["gemm.square/triton_tma"]
    plan = Plan([Task(op, {"dtype": dt, "shape": (8192, 8192, 8192)}, (impl,)) for dt in ("bf16", "int8", "fp16")])
    timer = TimerConfig(budget_s=0.1, warmup_s=0.01)
    _, counts = pr.row_seconds(plan, h200, timer, quick=True)
    # bf16 and int8: 3 quick candidates each, one specialization, compiled once; fp16 skipped
    assert counts["compiles"] == 6 and sum(counts["compile_list"]) == pytest.approx(6 * pr.COMPILE_S["gemm"])
    assert counts["skipped"] == 1
    _, counts = pr.row_seconds(plan, a100, timer, quick=True)
    assert counts["compiles"] == 0 and counts["skipped"] == 3   # skipped before sm_90: nothing compiles
