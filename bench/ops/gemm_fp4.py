"""fp4 GEMM (op gemm.fp4, family gemm): C = dequant(A) @ dequant(B)^T with block-scaled
e2m1 inputs, bf16 out, fp32 accumulation. Each format is a precision with its own compute
roof (rule 10 takes the best of its own rows; nothing wider is exact for it):

    mxfp4  e2m1 values, one e8m0 scale per 32 (OCP microscaling)
    nvfp4  e2m1 values, one e4m3 scale per 16 (NVIDIA; its per-tensor scale left out)

Counts, for A (M, K), B (N, K) and C (M, N), G the group size:

    flops = 2 M N K
    bytes = (M + N) K / 2 + (M + N) K / G + 2 M N   (values at half a byte, one scale byte
                                                     per group, C in bf16)

Inputs are random normals quantized per group (kernels/gemm_fp4.quantize); the reference is
the float64 product of the stored values, dequantized, so the error measured is the kernel's
(fp32 accumulation, bf16 rounding of C), not the format's.

Where it runs: the Triton kernel (tl.dot_scaled) on GPUs with fp4 matrix units: NVIDIA
compute capability 10.0+ (both formats) and AMD gfx950 (mxfp4). Where the units are absent
Triton 3.9 emulates both formats through bf16 (sm_90; mxfp4 on gfx942, whose compiler
aborts on nvfp4): those points are skipped with the reason, so no fp4 roof is ever an
emulation's. On a CPU the
kernel is checked under Triton's interpreter (rule 8), mxfp4 only: the interpreter reads
every scale as e8m0.

fp6 (op gemm.fp6, family gemm): the same kernel on OCP MXFP6 values, one per byte, one e8m0
scale per 32, each format a precision with its own compute roof:

    fp6e2m3  e2m3 values (largest 7.5)
    fp6e3m2  e3m2 values (largest 28)

    flops = 2 M N K
    bytes = (M + N) K + (M + N) K / 32 + 2 M N     (values in 8-bit containers, as the MMA reads
                                                    them; one scale byte per 32; C in bf16)

It runs on sm_100 only (Blackwell's f8f6f4 MMA): every other GPU skips it with the reason's code
(FP6_ARCH), and a CPU checks it under Triton's interpreter only (FP6_CPU otherwise; rule 8). Where
Triton's tl.dot_scaled takes "e2m3" and "e3m2" (kernels/gemm_fp4.dot_scaled_takes) the codes go to
the MMA as they are; Triton 3.6 to 3.9 refuse both, so there (and under the interpreter) the kernel
decodes them in registers to the e4m3 bytes of the same values for the same MMA, and the row's
detail says so (fp6_decoded).
"""
from __future__ import annotations

import torch

from bench import precisions
from bench.measure.registry import REGISTRY, Axis, Impl, Op
from bench.measure.tolerance import tolerance
from bench.ops._tune import Tuning, run_tuning
from bench.util import triton_interpreting

FORMATS = precisions.names(gemm="gemm.fp4")   # ("mxfp4", "nvfp4"): their rows of bench/precisions.py
TOLERANCE = tolerance("mxfp4")   # each format's row holds bf16's: C's bf16 rounding is what is left
FP6_FORMATS = precisions.names(gemm="gemm.fp6")   # ("fp6e2m3", "fp6e3m2")
# the codes that open gemm.fp6's skip reasons ("code: sentence"; tests compare the code)
FP6_CPU, FP6_ARCH = "fp6_cpu", "fp6_arch"
NO_INTERPRETED_DOT = "interpreter_no_dot_scaled"   # a CPU's Triton interpreter that cannot run tl.dot_scaled
INTERPRETED_E8M0 = "interpreter_e8m0_scales"       # and one that reads nvfp4's e4m3 scales as e8m0
SQUARE = {"cpu": ((128, 256), (128, 256, 512)),
          "cuda": ((2048, 8192), (1024, 2048, 4096, 8192, 16384))}


def group(fmt: str) -> int:
    from kernels.gemm_fp4 import GROUP  # deferred: kernels/ imports Triton, which is optional (Linux only)
    return GROUP[fmt]


def fp4_flops(m: int, n: int, k: int) -> int:
    """Return 2 M N K."""
    return 2 * m * n * k


def fp4_bytes(m: int, n: int, k: int, fmt: str) -> int:
    """Return (M + N) K / 2 + (M + N) K / G + 2 M N; for an fp6 format (M + N) K + (M + N) K / 32 + 2 M N."""
    return (m + n) * k // values_per_byte(fmt) + (m + n) * k // group(fmt) + 2 * m * n


def values_per_byte(fmt: str) -> int:
    """Return 2 for an fp4 format (two e2m1 values a byte), 1 for an fp6 one (8-bit containers)."""
    return 1 if fmt in FP6_FORMATS else 2


def square_sweep(device, quick):
    return [(n, n, n) for n in SQUARE["cuda" if device.kind == "cuda" else "cpu"][0 if quick else 1]]


def make_inputs(point, device):
    from kernels.gemm_fp4 import quantize  # deferred: kernels/ imports Triton, which is optional (Linux only)
    m, n, k = point["shape"]
    fmt = point["dtype"]
    gen = torch.Generator(device=device).manual_seed(2718)
    a = torch.randn(m, k, device=device, generator=gen)
    b = torch.randn(n, k, device=device, generator=gen)
    if device == "meta":  # the ahead-of-time plan: shapes and dtypes only
        scale = torch.float8_e4m3fn if fmt == "nvfp4" else torch.uint8
        pack = values_per_byte(fmt)
        x = {"a": torch.empty(m, k // pack, dtype=torch.uint8, device=device),
             "b": torch.empty(n, k // pack, dtype=torch.uint8, device=device),
             "a_scale": torch.empty(m, k // group(fmt), dtype=scale, device=device),
             "b_scale": torch.empty(n, k // group(fmt), dtype=scale, device=device)}
    else:
        (pa, sa), (pb, sb) = quantize(a, fmt), quantize(b, fmt)
        x = {"a": pa, "a_scale": sa, "b": pb, "b_scale": sb}
    x["c"] = torch.empty(m, n, dtype=torch.bfloat16, device=device)
    x["fmt"] = fmt
    return x


def reference(x):
    """Return the float64 product of the stored values, dequantized."""
    from kernels.gemm_fp4 import dequantize  # deferred: kernels/ imports Triton, which is optional (Linux only)
    return dequantize(x["a"], x["a_scale"], x["fmt"]) @ dequantize(x["b"], x["b_scale"], x["fmt"]).T


def fp4_unit(fmt: str, device) -> str | None:
    """Return why this device has no matrix unit for fmt, or None when it has one (a CPU:
    None only under Triton's interpreter, which checks the kernel; rule 8)."""
    if device.kind != "cuda":
        return None if triton_interpreting() else (
            "a CPU has no fp4 matrix unit; the Triton kernel is checked under TRITON_INTERPRET=1 only")
    cc = device.compute_capability or "0.0"
    if getattr(device, "vendor", None) == "amd":
        gfx = (device.extra or {}).get("gfx") or ""
        if fmt == "mxfp4" and (gfx.startswith("gfx95") or cc.startswith("9.5")):
            return None
        return (f"{fmt} has no matrix unit on {gfx or 'this AMD GPU'} (mxfp4 needs gfx950; Triton would emulate it "
                "through bf16, which is no fp4 roof)" if fmt == "mxfp4" else
                "nvfp4 (e4m3 scales per 16) is NVIDIA's format: AMD GPUs have no unit for it (Triton 3.9's "
                "compiler aborts on it for gfx942)")
    major = int(cc.split(".")[0])
    if major >= 10:
        return None
    return (f"{fmt} needs compute capability 10.0+ (Blackwell's block-scaled MMA); this GPU is {cc}, "
            f"where Triton emulates {fmt} through bf16 (no fp4 roof)")


def point_skip(point, device):
    """The op's rule: a GPU without a matrix unit for the format (fp4_unit)."""
    return fp4_unit(point["dtype"], device)


def triton_skip(point, device):
    m, n, k = point["shape"]
    if device.kind == "cpu" and triton_interpreting():
        from kernels.gemm_fp4 import interpreter_dot_scaled  # deferred: kernels/ imports Triton, which is optional
        if not interpreter_dot_scaled():
            return (f"{NO_INTERPRETED_DOT}: this Triton's interpreter has no tl.dot_scaled (Triton 3.6's lacks it, "
                    "3.9's has it), so the kernel is checked on a GPU only")
        if point["dtype"] == "nvfp4":
            return (f"{INTERPRETED_E8M0}: Triton's interpreter reads every dot_scaled scale as e8m0, so nvfp4's "
                    "e4m3 scales cannot be checked there")
    if k % 256 and device.kind == "cuda":
        return "the fp4 kernel needs K to be a multiple of 256"
    return None


def fp6_decoded(fmt: str, device_type: str) -> bool:
    """Whether the kernel decodes fmt's codes to e4m3 in registers for tensors on device_type: an
    fp6 format on a CPU (Triton's interpreter decodes no fp6), or, on a GPU and in the ahead-of-time
    plan ("meta"), where this Triton's tl.dot_scaled refuses it for sm_100 (dot_scaled_takes)."""
    if fmt not in FP6_FORMATS:
        return False
    from kernels.gemm_fp4 import dot_scaled_takes  # deferred: kernels/ imports Triton, which is optional
    return device_type == "cpu" or dot_scaled_takes(fmt) is not None


def _call(x, cfg):
    from kernels.gemm_fp4 import matmul  # deferred: kernels/ imports Triton, which is optional (Linux only)
    decode = fp6_decoded(x["fmt"], x["a"].device.type)
    return lambda: matmul(x["a"], x["a_scale"], x["b"], x["b_scale"], x["c"], cfg, x["fmt"], decode)


def _tuning(x, ctx) -> Tuning:
    from kernels import gemm_fp4 as k  # deferred: kernels/ imports Triton, which is optional (Linux only)
    fmt = ctx.point["dtype"]
    return Tuning(("gemm.fp4", fmt, tuple(x["a"].shape), tuple(x["b"].shape)), k.CANDIDATES, k.INTERPRETER_CONFIG,
                  lambda c: _call(x, c), smem=lambda c: k.smem_bytes(c, group(fmt), values_per_byte(fmt)))


def _launcher(x, ctx):
    fn, cfg = run_tuning(x["a"], _tuning(x, ctx), ctx)
    decoded = fp6_decoded(x["fmt"], x["a"].device.type)
    fn.detail = f"tile {cfg}" + ("; fp6 decoded to e4m3 in registers (fp6_decoded)" if decoded else "")
    return fn


def _shape(pt):
    return pt["shape"]


def scaled_op(name: str, doc: str, dtype_axis: Axis, skip, memory_factor: float) -> Op:
    """Return a block-scaled square GEMM op (fp4's or fp6's): its formats on dtype_axis, the
    one byte and FLOP formula, its own skip rule and reference memory factor."""
    return REGISTRY.add_op(Op(
        name=name, family="gemm", doc=doc, axes=(dtype_axis, Axis("shape", sweep=square_sweep, doc="(M, N, K)")),
        make_inputs=make_inputs, reference=reference,
        flops=lambda pt: fp4_flops(*_shape(pt)),
        bytes=lambda pt: fp4_bytes(*_shape(pt), pt["dtype"]),
        working_set=lambda pt: fp4_bytes(*_shape(pt), pt["dtype"]),
        describe=lambda pt: (max(_shape(pt)), "x".join(map(str, _shape(pt)))),
        tolerance=lambda pt: tolerance(pt["dtype"]), outputs=("c",), precision=lambda pt: pt["dtype"], skip=skip,
        memory_factor=memory_factor))


OP = scaled_op(
    "gemm.fp4", "block-scaled fp4 (mxfp4, nvfp4) square GEMMs; flops = 2 M N K, bytes = (M + N) K / 2 + "
    "(M + N) K / G + 2 M N", Axis("dtype", FORMATS, doc="fp4 format: mxfp4 (e8m0 scales per 32), nvfp4 (e4m3 "
                                  "scales per 16)"),
    point_skip, 40.0)   # the float64 dequantized copies: 16 bytes per half-byte value
REGISTRY.add_impl(Impl(OP.name, "triton", "triton", _launcher, skip=triton_skip, tuning=_tuning,
                       doc="kernels/gemm_fp4.py: tl.dot_scaled, tiles autotuned on a GPU"))


def fp6_skip(point, device):
    """gemm.fp6's rule: sm_100 only (FP6_ARCH on any other GPU); a CPU checks it under Triton's
    interpreter only (FP6_CPU otherwise)."""
    if device.kind != "cuda":
        return None if triton_interpreting() else (
            f"{FP6_CPU}: a CPU has no fp6 matrix unit; the Triton kernel is checked under TRITON_INTERPRET=1 only")
    cc = device.compute_capability or "0.0"
    if getattr(device, "vendor", None) == "amd" or not cc.startswith("10."):
        return f"{FP6_ARCH}: {point['dtype']} runs on sm_100's f8f6f4 MMA only; this GPU is {cc}"
    return None


OP6 = scaled_op(
    "gemm.fp6", "block-scaled fp6 (e2m3, e3m2; e8m0 scales per 32) square GEMMs on sm_100; flops = 2 M N K, "
    "bytes = (M + N) K + (M + N) K / 32 + 2 M N",
    Axis("dtype", FP6_FORMATS, doc="fp6 format: fp6e2m3, fp6e3m2 (MXFP6, e8m0 scales per 32)"),
    fp6_skip, 20.0)   # the float64 dequantized copies: 8 bytes per one-byte value, twice
REGISTRY.add_impl(Impl(OP6.name, "triton", "triton", _launcher, skip=triton_skip, tuning=_tuning,
                       doc="kernels/gemm_fp4.py: tl.dot_scaled on e2m3 or e3m2 (decoded to e4m3 in registers where "
                           "Triton refuses them), sm_100 only"))
