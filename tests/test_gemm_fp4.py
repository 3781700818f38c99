"""fp4 GEMM (kernels/gemm_fp4.py, bench/ops/gemm_fp4.py): e2m1 encoding and packing, the
e8m0 and e4m3 group scales, and dequantization on hand-worked bytes; the mxfp4 kernel under
Triton's interpreter against the float64 product of the stored values; the formulas; and
where each format is skipped, with the reason."""
import dataclasses

import pytest
import torch
from conftest import INTERPRETING

from bench.aot.targets import fake_device
from bench.measure.gate import poison
from bench.measure.registry import load_all
from bench.ops import gemm_fp4 as f
from kernels import gemm_fp4 as k

REG = load_all()
# the interpreter checks the kernel where it runs tl.dot_scaled (Triton 3.9's does, 3.6's does not)
INTERPRETED_DOT = INTERPRETING and k.interpreter_dot_scaled()


def NEEDS_DOT(test):  # noqa: N802  (a decorator, spelled as the marks it applies)
    """An interpreter check of a block-scaled kernel: it never runs on a GPU (the gpu tests do)."""
    return pytest.mark.interpreter_only(pytest.mark.skipif(
        not INTERPRETED_DOT, reason="needs a Triton interpreter that runs tl.dot_scaled (3.9's); on a GPU the gpu "
                                    "tests run it")(test))


def test_e2m1_codes_and_packing_hand_worked():
    # 0 -> 0; 0.5 -> 1; -1 -> 8 | 2 = 10; 6 -> 7; 1.25 lies halfway between 1 (code 2) and
    # 1.5 (code 3): the even code; 5 halfway between 4 (6) and 6 (7): 6; 7 clamps to 6 -> 7;
    # -0.2 rounds to 0 (code 0, no negative zero)
    x = torch.tensor([0.0, 0.5, -1.0, 6.0, 1.25, 5.0, 7.0, -0.2])
    codes = k.encode_e2m1(x)
    assert codes.tolist() == [0, 1, 10, 7, 2, 6, 7, 0]
    # element 2i in the low nibble: (0, 1) -> 0x10, (10, 7) -> 0x7a, (2, 6) -> 0x62, (7, 0) -> 0x07
    packed = k.pack(codes)
    assert packed.tolist() == [0x10, 0x7A, 0x62, 0x07]
    assert k.unpack(packed).tolist() == codes.tolist()
    assert k.e2m1_table()[codes.long()].tolist() == [0.0, 0.5, -1.0, 6.0, 1.0, 4.0, 6.0, 0.0]


def test_mxfp4_scale_is_a_power_of_two_per_32():
    # group 0: largest magnitude 3 -> 2**ceil(log2(3 / 6)) = 0.5, byte 126; stored x / 0.5:
    #   3 -> 6 (code 7), -1 -> -2 (8 | 4 = 12), 0.25 -> 0.5 (code 1): bytes 0xc7, 0x01
    # group 1: largest 12 -> 2**1, byte 128: 12 -> 6 (7); 5 -> 2.5, halfway between 2 (code 4)
    #   and 3 (code 5): the even code, 2, so 5 comes back as 4: byte 0x47
    x = torch.zeros(1, 64)
    x[0, 0], x[0, 1], x[0, 2] = 3.0, -1.0, 0.25
    x[0, 32], x[0, 33] = 12.0, 5.0
    packed, scales = k.quantize(x, "mxfp4")
    assert scales.dtype == torch.uint8 and scales.tolist() == [[126, 128]]
    assert packed.shape == (1, 32)
    assert [packed[0, 0].item(), packed[0, 1].item(), packed[0, 16].item()] == [0xC7, 0x01, 0x47]
    back = k.dequantize(packed, scales)
    assert back[0, [0, 1, 2, 32, 33]].tolist() == [3.0, -1.0, 0.25, 12.0, 4.0]
    # nvfp4: an e4m3 scale per 16: largest 3 -> 0.5 (exact in e4m3)
    packed, scales = k.quantize(x[:, :16], "nvfp4")
    assert scales.dtype == torch.float8_e4m3fn and scales.float().tolist() == [[0.5]]


def test_dequantize_hand_worked():
    # byte 0x71: low nibble 1 (0.5), high 7 (6); e8m0 byte 128 = 2.0 -> [1.0, 12.0]
    p = torch.tensor([[0x71] * 16], dtype=torch.uint8)
    assert k.dequantize(p, torch.tensor([[128]], dtype=torch.uint8))[0, :2].tolist() == [1.0, 12.0]
    # nvfp4: e4m3 scale 0.375 per 16 values (two groups: 0.375 and 2.0)
    p = torch.tensor([[0x71] * 16], dtype=torch.uint8)
    s = torch.tensor([[0.375, 2.0]]).to(torch.float8_e4m3fn)
    d = k.dequantize(p, s)
    assert d[0, :2].tolist() == [0.1875, 2.25] and d[0, 16:18].tolist() == [1.0, 12.0]
    # e8m0 byte 127 is 1.0, byte 0 is 2**-127
    assert k.scales_f64(torch.tensor([127, 0], dtype=torch.uint8)).tolist() == [1.0, 2.0**-127]


def test_formulas_hand_worked():
    # 2 x 64 x 32 x 128 flops; bytes: (64 + 32) x 128 / 2 = 6,144 values, (64 + 32) x 128 / 32
    # = 384 e8m0 scales (768 e4m3 for nvfp4's groups of 16), 2 x 64 x 32 = 4,096 of bf16 C
    assert f.fp4_flops(64, 32, 128) == 524288
    assert f.fp4_bytes(64, 32, 128, "mxfp4") == 6144 + 384 + 4096
    assert f.fp4_bytes(64, 32, 128, "nvfp4") == 6144 + 768 + 4096
    op = REG.ops["gemm.fp4"]
    assert op.family == "gemm" and op.precision({"dtype": "mxfp4"}) == "mxfp4"


@NEEDS_DOT
def test_mxfp4_kernel_under_the_interpreter_matches_float64():
    # dot_scaled runs under TRITON_INTERPRET (triton 3.9) and, with fp32 out, is exact here:
    # every product of e2m1 values and power-of-two scales is exact in fp32, and the sums
    # of 128 such terms stay far inside fp32's 24 bits for these magnitudes
    g = torch.Generator().manual_seed(5)
    m, n, kk = 40, 48, 128   # not multiples of the interpreter's 32 x 32 tile
    pa, sa = k.quantize(torch.randn(m, kk, generator=g), "mxfp4")
    pb, sb = k.quantize(torch.randn(n, kk, generator=g), "mxfp4")
    ref = k.dequantize(pa, sa) @ k.dequantize(pb, sb).T
    c = torch.full((m, n), float("nan"))
    k.matmul(pa, sa, pb, sb, c)
    assert ((c.double() - ref).norm() / ref.norm()).item() < 1e-6
    # through the op's inputs and bf16 output, as the gate checks it
    x = f.make_inputs({"dtype": "mxfp4", "shape": (64, 64, 128)}, "cpu")
    ref = f.reference(x)
    poison(x, ["c"])
    k.matmul(x["a"], x["a_scale"], x["b"], x["b_scale"], x["c"])
    assert ((x["c"].double() - ref).norm() / ref.norm()).item() <= f.TOLERANCE


def test_where_each_format_runs_and_why_not():
    point = {"shape": (2048, 2048, 2048)}
    for arch, fmt, why in (("sm_100", "mxfp4", None), ("sm_100", "nvfp4", None),
                           ("sm_90", "mxfp4", "emulates mxfp4 through bf16"),
                           ("sm_90", "nvfp4", "emulates nvfp4 through bf16"),
                           ("gfx950", "mxfp4", None), ("gfx950", "nvfp4", "NVIDIA's format"),
                           ("gfx942", "mxfp4", "needs gfx950"), ("sm_80", "mxfp4", "10.0+")):
        reason = f.fp4_unit(fmt, fake_device(arch))
        assert (reason is None) if why is None else (why in reason), (arch, fmt, reason)
    # the interpreter cannot check nvfp4 (it reads every scale as e8m0)
    from bench.hw.detect import resolve
    reason = f.triton_skip(dict(point, dtype="nvfp4"), resolve("cpu"))
    assert (reason or "").startswith(f.INTERPRETED_E8M0) == INTERPRETED_DOT
    assert (f.triton_skip(dict(point, dtype="mxfp4"), resolve("cpu")) is None) == (INTERPRETED_DOT or not INTERPRETING)


def test_a_cpu_run_checks_mxfp4_and_skips_nvfp4():
    from bench.hw.detect import resolve
    from bench.measure.runner import INTERPRETED_PREFIX, Runner, make_plan
    from bench.measure.timing import TimerConfig
    cpu = resolve("cpu")
    plan = make_plan(REG, cpu, only=["gemm.fp4"], quick=True, max_ws_bytes=100_000)  # 128^3 only
    ms = Runner(cpu, TimerConfig(budget_s=0.02, warmup_s=0.001)).run(plan)
    by = {m.dtype: m for m in ms if m.shape == "128x128x128"}
    assert set(by) == {"mxfp4", "nvfp4"} and all(m.status == "skipped" for m in by.values())
    if INTERPRETED_DOT:  # rule 8: checked, never timed; the skip carries what the check found
        assert by["nvfp4"].reason.startswith(f.INTERPRETED_E8M0)
        assert by["mxfp4"].reason.startswith(INTERPRETED_PREFIX) and by["mxfp4"].error <= f.TOLERANCE
    elif INTERPRETING:   # an interpreter without tl.dot_scaled checks neither
        assert all(m.reason.startswith(f.NO_INTERPRETED_DOT) for m in by.values())


def test_fp6_values_hand_worked():
    # e2m3 (bias 1): code 1 = 1/8 (subnormal), 8 = 1.0, 28 = 6.0, 31 = (1 + 7/8) x 4 = 7.5; 32 is -0
    e2m3 = k.fp6_table("fp6e2m3")
    assert [e2m3[c].item() for c in (1, 8, 28, 31, 33)] == [0.125, 1.0, 6.0, 7.5, -0.125]
    # e3m2 (bias 3): code 1 = 1/4 x 2**-2 = 1/16, 4 = 0.25, 30 = 1.5 x 16 = 24, 31 = 1.75 x 16 = 28
    e3m2 = k.fp6_table("fp6e3m2")
    assert [e3m2[c].item() for c in (1, 4, 30, 31, 63)] == [0.0625, 0.25, 24.0, 28.0, -28.0]


# the second group is all zeros: its largest magnitude floors at 2**-100, so its scale is
# 2**ceil(-100 - log2(7.5)) = 2**-102 (byte 25) in e2m3 and 2**ceil(-100 - log2(28)) = 2**-104 (byte 23) in e3m2
@pytest.mark.parametrize("fmt, scale_bytes, codes, back", [
    # largest 3: e2m3's scale 2**ceil(log2(3 / 7.5)) = 0.5 (byte 126); 3 -> 6 (code 28), -1 -> -2
    # (32 | 16), 0.3 -> 0.6, nearer 0.625 (code 5) than 0.5, so 0.3125 comes back
    ("fp6e2m3", [126, 25], [28, 48, 5], [3.0, -1.0, 0.3125]),
    # e3m2's 2**ceil(log2(3 / 28)) = 0.125 (byte 124); 3 -> 24 (code 30), -1 -> -8 (32 | 24),
    # 0.3 -> 2.4, nearer 2.5 (code 17) than 2.0
    ("fp6e3m2", [124, 23], [30, 56, 17], [3.0, -1.0, 0.3125]),
])
def test_fp6_quantize_one_value_a_byte_and_an_e8m0_scale_per_32(fmt, scale_bytes, codes, back):
    x = torch.zeros(1, 64)
    x[0, :3] = torch.tensor([3.0, -1.0, 0.3])
    values, scales = k.quantize(x, fmt)
    assert values.shape == (1, 64) and values.dtype == torch.uint8 and scales.tolist() == [scale_bytes]
    assert values[0, :3].tolist() == codes
    assert k.dequantize(values, scales, fmt)[0, :3].tolist() == back


def test_an_interpreter_without_dot_scaled_checks_no_block_scaled_gemm(monkeypatch):
    """Triton 3.6's interpreter has no tl.dot_scaled: on a CPU both ops' points are skipped with
    the code, where 3.9's checks mxfp4 and fp6 (nvfp4 never: its scales read as e8m0); a GPU
    compiles, so the rule is the CPU's alone."""
    code = lambda why: (why or "").split(":")[0]  # noqa: E731
    cpu = dataclasses.replace(fake_device("sm_90"), kind="cpu", torch_device="cpu")
    monkeypatch.setattr(f, "triton_interpreting", lambda: True)
    for runs, want in ((False, f.NO_INTERPRETED_DOT), (True, "")):
        monkeypatch.setattr(k, "interpreter_dot_scaled", lambda runs=runs: runs)
        for fmt in ("mxfp4", "fp6e2m3", "fp6e3m2"):
            assert code(f.triton_skip({"dtype": fmt, "shape": (128, 128, 256)}, cpu)) == want, (runs, fmt)
        nvfp4 = f.triton_skip({"dtype": "nvfp4", "shape": (128, 128, 256)}, cpu)
        assert code(nvfp4) == (f.INTERPRETED_E8M0 if runs else f.NO_INTERPRETED_DOT)
        assert f.triton_skip({"dtype": "mxfp4", "shape": (2048, 2048, 2048)}, fake_device("sm_100")) is None


def test_fp6_bytes_hand_worked():
    # 256^3: (256 + 256) x 256 one-byte values + one scale byte per 32 of them + 2 x 256^2 of bf16 C
    assert f.fp4_bytes(256, 256, 256, "fp6e3m2") == 131072 + 4096 + 131072
    assert f.fp4_bytes(256, 256, 256, "mxfp4") == 65536 + 4096 + 131072


def test_fp6_runs_on_sm100_only_and_a_cpu_checks_it_under_the_interpreter(monkeypatch):
    point = {"dtype": "fp6e2m3", "shape": (1024, 1024, 1024)}
    code = lambda why: (why or "").split(":")[0]  # noqa: E731
    cpu = dataclasses.replace(fake_device("sm_90"), kind="cpu", torch_device="cpu")
    for interpreting, want in ((True, ""), (False, f.FP6_CPU)):
        monkeypatch.setattr(f, "triton_interpreting", lambda interpreting=interpreting: interpreting)
        assert code(f.fp6_skip(point, cpu)) == want
    assert code(f.fp6_skip(point, fake_device("sm_90"))) == f.FP6_ARCH
    assert code(f.fp6_skip(point, fake_device("gfx950"))) == f.FP6_ARCH
    assert f.fp6_skip(point, fake_device("sm_100")) is None


FP8_GPU = torch.cuda.is_available() and torch.cuda.get_device_capability() >= (8, 9)


@pytest.mark.skipif(not (INTERPRETING or FP8_GPU), reason="needs Triton's interpreter or a GPU with fp8 (sm_89+)")
@pytest.mark.parametrize("fmt", ["fp6e2m3", "fp6e3m2"])
def test_every_fp6_code_decodes_to_the_e4m3_of_its_value(fmt):
    """The kernel's decoding path (a Triton whose tl.dot_scaled refuses e2m3 and e3m2): each of
    the 64 codes, decoded in registers to e4m3 and read back as fp32, is its table's value (under
    the interpreter on a CPU, on the GPU where there is one)."""
    import triton
    import triton.language as tl

    @triton.jit
    def decode(x_ptr, out_ptr, MANT: tl.constexpr, BIAS: tl.constexpr):
        offs = tl.arange(0, 64)
        tl.store(out_ptr + offs, k.fp6_as_e4m3(tl.load(x_ptr + offs), MANT, BIAS).to(tl.float32))

    _, mant, bias = k.FP6_BITS[fmt]
    device = "cpu" if INTERPRETING else "cuda"
    out = torch.full((64,), float("nan"), device=device)
    decode[(1,)](torch.arange(64, dtype=torch.uint8, device=device), out, MANT=mant, BIAS=bias)
    assert out.double().cpu().tolist() == k.fp6_table(fmt).tolist()


@NEEDS_DOT
@pytest.mark.parametrize("fmt", ["fp6e2m3", "fp6e3m2"])
def test_fp6_kernel_decoding_to_e4m3_matches_float64_under_the_interpreter(fmt):
    # fp32 out: each product of fp6 values and power-of-two scales is exact in fp32, and so are
    # the sums of 128 of them at these magnitudes (at most 2 x 5 + 8 significant bits a product)
    g = torch.Generator().manual_seed(6)
    m, n, kk = 40, 48, 128
    pa, sa = k.quantize(torch.randn(m, kk, generator=g), fmt)
    pb, sb = k.quantize(torch.randn(n, kk, generator=g), fmt)
    ref = k.dequantize(pa, sa, fmt) @ k.dequantize(pb, sb, fmt).T
    c = torch.full((m, n), float("nan"))
    k.matmul(pa, sa, pb, sb, c, fmt=fmt, decode=True)
    assert ((c.double() - ref).norm() / ref.norm()).item() < 1e-6
    assert f.fp6_decoded(fmt, "cpu") and not f.fp6_decoded("mxfp4", "cpu") and not f.fp6_decoded("mxfp4", "cuda")


@pytest.mark.skipif(not INTERPRETING, reason="the interpreter check; on a GPU the gpu tests run it")
def test_a_cpu_run_checks_fp6_through_the_gate():
    from bench.hw.detect import resolve
    from bench.measure.runner import INTERPRETED_PREFIX, Runner, make_plan
    from bench.measure.timing import TimerConfig
    cpu = resolve("cpu")
    plan = make_plan(REG, cpu, only=["gemm.fp6"], quick=True, max_ws_bytes=100_000)  # 128^3 only
    ms = Runner(cpu, TimerConfig(budget_s=0.02, warmup_s=0.001)).run(plan)
    by = {m.dtype: m for m in ms if m.shape == "128x128x128"}
    assert set(by) == set(f.FP6_FORMATS)
    for m in by.values():   # rule 8: checked, never timed (where the interpreter runs tl.dot_scaled)
        assert m.status == "skipped"
        if INTERPRETED_DOT:
            assert m.reason.startswith(INTERPRETED_PREFIX) and m.error <= f.TOLERANCE
        else:
            assert m.reason.startswith(f.NO_INTERPRETED_DOT)
