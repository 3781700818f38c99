"""GEMV decode: formulas on hand-worked cases (int4 packing and group scales included),
int4 packing round trips, and every Triton GEMV variant against the float64 product of the
dequantized weights under the interpreter."""
import pytest
import torch
from conftest import INTERPRETING

from bench.hw import detect
from bench.measure.registry import load_all
from bench.ops import gemv as v
from kernels import gemv as kv

REG = load_all()


def test_bytes_hand_worked():
    # fp16 4096 x 4096 at batch 1: weights 32 MiB + x 8 KiB + y 8 KiB
    assert v.gemv_bytes(1, 4096, 4096, "fp16") == 4096 * 4096 * 2 + 2 * 4096 + 2 * 4096
    # int8, N=3 K=256, B=2: weights 768 + per-channel fp32 scales 12 + x 1024 + y 12
    assert v.gemv_bytes(2, 3, 256, "int8") == 768 + 12 + 1024 + 12
    # int4, N=3 K=256: half a byte each = 384; groups of 128 -> 2 fp16 scales per row = 12 bytes
    assert v.weight_bytes(3, 256, "int4") == 384 + 12
    assert v.gemv_bytes(1, 3, 256, "int4") == 384 + 12 + 512 + 6
    assert v.gemv_flops(2, 3, 256) == 2 * 2 * 3 * 256


def test_torch_best_int4_counts_its_scale_and_zero_per_group():
    # llama8b.o is 4096 x 4096; at batch 1 the format moves 8 MiB of nibbles, 2 fp16 bytes of
    # scale per group of 128 (4096 x 32 x 2 = 256 KiB), 8 KiB of x and 8 KiB of y; torch's
    # int4 layout reads a bf16 scale AND a bf16 zero per group: 256 KiB more
    point = {"dtype": "int4", "layer": "llama8b.o", "batch": 1}
    op, best = REG.ops["gemv.decode"], REG.impls["gemv.decode/torch_best"]
    fmt = 4096 * 4096 // 2 + 4096 * 32 * 2 + 2 * 4096 + 2 * 4096
    assert op.bytes(point) == fmt
    assert best.bytes(point) == fmt + 4096 * 32 * 2
    assert best.bytes({"dtype": "int8", "layer": "llama8b.o", "batch": 1}) == op.bytes(
        {"dtype": "int8", "layer": "llama8b.o", "batch": 1})


def test_intensity_grows_with_batch_and_quantized_sits_right_of_16bit():
    op = REG.ops["gemv.decode"]
    i = lambda d, b: (op.flops({"dtype": d, "layer": "llama8b.down", "batch": b})  # noqa: E731
                      / op.bytes({"dtype": d, "layer": "llama8b.down", "batch": b}))
    assert i("bf16", 1) == pytest.approx(1.0, rel=1e-3)       # 2NK / 2NK: one FLOP per byte
    assert i("int8", 1) == pytest.approx(2.0, rel=1e-3)
    assert i("int4", 1) == pytest.approx(2 / (0.5 + 2 / 128), rel=2e-3)  # x and y add ~0.1%
    assert i("bf16", 1) < i("bf16", 16) < i("bf16", 256)
    assert i("bf16", 8) < i("int8", 8) < i("int4", 8)


def test_layer_presets_hand_worked():
    assert v.LAYERS["llama8b.qkv"] == (6144, 4096)        # 32 + 2 x 8 heads of 128
    assert v.LAYERS["llama8b.gate_up"] == (28672, 4096)
    assert v.LAYERS["llama8b.down"] == (4096, 14336)
    assert v.LAYERS["llama70b.qkv"] == (10240, 8192)      # 64 + 2 x 8 heads of 128


def test_int4_pack_round_trip_and_nibble_order():
    q = torch.randint(-8, 8, (5, 64), dtype=torch.int8)
    p = kv.pack_int4(q)
    assert p.shape == (5, 32) and p.dtype == torch.uint8
    assert torch.equal(kv.unpack_int4(p), q)
    one = torch.tensor([[-8, 7, 0, -1]], dtype=torch.int8)  # u = 0, 15, 8, 7
    assert kv.pack_int4(one).tolist() == [[0 | (15 << 4), 8 | (7 << 4)]]


def test_int4_group_scales_dequantize_per_group():
    w, scale, deq = v.make_weights(4, 256, "int4", "cpu")
    q = kv.unpack_int4(w).double()
    assert scale.shape == (4, 2) and scale.dtype == torch.float16
    assert torch.equal(deq[:, :128].double(), q[:, :128] * scale[:, :1].double())  # exact in fp32
    assert torch.equal(deq[:, 128:].double(), q[:, 128:] * scale[:, 1:].double())
    assert q.abs().max() <= 8


@pytest.mark.parametrize("fmt", ["fp16", "int8", "fp8", "int4"])
@pytest.mark.parametrize("kernel", ["rows", "rows_split", "tile"])
def test_triton_gemv_matches_float64_of_dequantized(fmt, kernel, dev):
    # N = 100 rows (not a multiple of the row block), K = 384 (three int4 groups)
    n, k = 100, 384
    w, scale, deq = v.make_weights(n, k, fmt, dev)
    b = 1 if kernel.startswith("rows") else 5
    x = torch.randn(b, k, dtype=torch.float16, device=dev)
    y = torch.full((b, n), float("nan"), dtype=torch.float16, device=dev)
    if kernel == "tile":
        kv.gemv_tile(x, w, scale, y, group=128, block_n=32, block_k=128)
    else:
        ws = torch.empty(n, device=dev)
        kv.gemv_rows(x, w, scale, y, group=128, block_n=16, block_k=128,
                     split_k=3 if kernel == "rows_split" else 1, workspace=ws)
    ref = x.double() @ deq.double().T  # the kernels are checked against float64 here
    err = ((y.double() - ref).norm() / ref.norm()).item()
    assert err < 2e-3, err


@pytest.mark.skipif(INTERPRETING, reason="bf16 is silently wrong in Triton's interpreter (triton issue 11584)")
@pytest.mark.gpu
@pytest.mark.parametrize("fmt", ["bf16", "int8", "fp8", "int4"])
def test_triton_gemv_bf16_activations_on_gpu(fmt):
    x = v.build_inputs(8, 4096, 4096, fmt, "cuda")
    ref = v.reference(x)
    for call, cfg in ((v._tile_call, v.INTERPRETER_TILE),):
        y = call(x, cfg)()
        assert ((y.double() - ref).norm() / ref.norm()).item() < v.FORMATS[fmt].tolerance
    x1 = v.build_inputs(1, 4096, 4096, fmt, "cuda")
    y = v._rows_call(x1, v.INTERPRETER_ROW)()
    assert ((y.double() - v.reference(x1)).norm() / v.reference(x1).norm()).item() < v.FORMATS[fmt].tolerance


def test_torch_impls_pass_the_gate_on_cpu():
    from bench.measure.runner import Runner, Task
    from bench.measure.timing import TimerConfig
    cpu = detect.resolve("cpu")
    op = REG.ops["gemv.decode"]
    impls = (REG.impls["gemv.decode/torch"], REG.impls["gemv.decode/torch_best"])
    r = Runner(cpu, TimerConfig(budget_s=0.02, warmup_s=0.001))
    for fmt in ("bf16", "int8", "int4", "fp8"):
        for m in r.run_task(Task(op, {"dtype": fmt, "layer": "square1024", "batch": 2}, impls), ("warm",)):
            if m.status != "skipped":
                assert m.status == "ok" and m.error <= m.tolerance, (fmt, m.impl, m.reason)
        assert v.best_skip({"dtype": "fp8"}, cpu).code == "no_fp8_weight_only"


def test_row_kernel_is_batch_one_only():
    cpu = detect.resolve("cpu")
    assert v.rows_skip({"batch": 1, "dtype": "bf16"}, cpu) is None
    assert "batch 1" in v.rows_skip({"batch": 2, "dtype": "bf16"}, cpu)


def test_fp8_weights_skip_triton_before_sm89_before_compiling():
    from dataclasses import replace
    cpu = detect.resolve("cpu")
    gpu = lambda cc: replace(cpu, kind="cuda", compute_capability=cc)  # noqa: E731
    for skip in (v.triton_skip, v.rows_skip):
        assert "8.9" in skip({"batch": 1, "dtype": "fp8"}, gpu("8.0"))
        assert skip({"batch": 1, "dtype": "fp8"}, gpu("8.9")) is None
        assert skip({"batch": 1, "dtype": "int8"}, gpu("8.0")) is None
        assert skip({"batch": 1, "dtype": "fp8"}, cpu) is None  # the interpreter has e4m3
    assert REG.impls["gemv.decode/triton_tile"].skip is v.triton_skip


def test_reference_rows_are_shared_across_a_batch_sweep_and_exact():
    # a sweep's batches are prefixes of one activation matrix: each batch's reference is the
    # first B rows of one float64 product, equal to the product computed on its own
    n, k = 48, 256
    for fmt in ("int4", "bf16"):
        refs = {}
        for b in (1, 16, 4, 12):  # growing, then smaller, then growing again (a batch over 16 is projected)
            x = v.build_inputs(b, n, k, fmt, "cpu")
            assert x["x"].data_ptr() == x["rows"].data_ptr()
            refs[b] = v.reference(x)
            assert refs[b].dtype == torch.float64 and refs[b].shape == (b, n)
            assert torch.equal(refs[b], x["x"].double() @ x["deq"].double().T)
        assert torch.equal(refs[16][:12], refs[12])
        assert refs[4].data_ptr() == refs[16].data_ptr()  # batch 4 after 16: rows already there
    # a batch past the shared rows gets its own activations, checked by projection
    x = v.build_inputs(v.MAX_BATCH + 1, n, k, "bf16", "cpu")
    assert x["rows"] is None
    ref = v.reference(x)
    assert torch.allclose(ref.ax, x["x"].double() @ (x["deq"].double().T @ ref.x))
