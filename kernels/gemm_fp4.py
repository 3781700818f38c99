"""Block-scaled fp4 and fp6 GEMM through tl.dot_scaled: C = dequant(A) @ dequant(B)^T, bf16 out.

Formats (fp4: e2m1 values, two per byte, the first element of a pair in the low nibble; fp6:
one value per byte, its six bits the low ones, as Blackwell's f8f6f4 MMA takes fp6 in 8-bit
containers):

    mxfp4    OCP microscaling: one e8m0 scale (a power of two, 2**(byte - 127)) per 32 values
    nvfp4    NVIDIA: one e4m3 scale per 16 values (its per-tensor fp32 scale is left out)
    fp6e2m3  OCP MXFP6 E2M3 (largest 7.5): one e8m0 scale per 32 values
    fp6e3m2  OCP MXFP6 E3M2 (largest 28): one e8m0 scale per 32 values

e2m1 holds 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives: bit 3 is the sign, bits 0-2 index
that list. A is stored (M, K/2) and B (N, K/2) (K-major, as a linear layer stores weights),
their scales (M, K/G) and (N, K/G). quantize() and dequantize() are the host-side packing
and its float64 inverse; the tests check them on hand-worked bytes.

Hardware: sm_100 (tcgen05 block-scaled MMA) runs both formats natively; gfx950 (CDNA4)
runs mxfp4; sm_90 emulates both through bf16 and gfx942 mxfp4 (no fp4 roof there; Triton
3.9's gfx942 compiler aborts on nvfp4). Triton's interpreter runs mxfp4 exactly, but reads every scale as e8m0, so
it cannot check nvfp4 (triton 3.9). fp6 runs on sm_100's f8f6f4 MMA only. A Triton whose
tl.dot_scaled takes "e2m3" and "e3m2" (dot_scaled_takes) gets the codes as they are; Triton 3.6
to 3.9 refuse both in their front end ("NYI"), so there the kernel decodes each code in registers
to the e4m3 byte of the same value (DECODE: every fp6 value is one of e4m3's) and the MMA runs
"e4m3" with the same e8m0 scales, which the same f8f6f4 MMA executes at the same rate; the
decode's ALU work is the price. The interpreter runs the decoding path exactly.
"""
from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

from kernels.gemm import TileConfig, grouped_tile

# e2m1 code -> value (codes 8-15 are the negatives of 0-7)
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
E2M1_MAX = 6.0
ROOT = Path(__file__).resolve().parent.parent   # the checkout: dot_scaled_takes' child imports kernels from it
GROUP = {"mxfp4": 32, "nvfp4": 16, "fp6e2m3": 32, "fp6e3m2": 32}
# each format's tl.dot_scaled format string and (exponent bits, mantissa bits, exponent bias)
SCALED_FORMAT = {"mxfp4": "e2m1", "nvfp4": "e2m1", "fp6e2m3": "e2m3", "fp6e3m2": "e3m2"}
FP6_BITS = {"fp6e2m3": (2, 3, 1), "fp6e3m2": (3, 2, 3)}


# ---- host-side packing -----------------------------------------------------------------------

def e2m1_table(dtype=torch.float64, device="cpu") -> torch.Tensor:
    """Return the 16 values of the e2m1 codes (code 8 is -0.0)."""
    pos = torch.tensor(E2M1_VALUES, dtype=dtype, device=device)
    return torch.cat([pos, -pos])


def fp6_table(fmt: str, dtype=torch.float64, device="cpu") -> torch.Tensor:
    """Return the 64 values of an fp6 format's codes, code = sign << 5 | exponent << m | mantissa
    (no infinity, no NaN: OCP MX): a zero exponent is subnormal, mantissa / 2**m x 2**(1 - bias),
    any other (1 + mantissa / 2**m) x 2**(exponent - bias). e2m3's largest is 7.5, e3m2's 28."""
    e, m, bias = FP6_BITS[fmt]
    mag = torch.arange(2 ** (e + m), dtype=torch.float64)
    exp, man = torch.div(mag, 2**m, rounding_mode="floor"), mag % 2**m
    pos = torch.where(exp == 0, man / 2**m * 2.0 ** (1 - bias), (1 + man / 2**m) * torch.exp2(exp - bias))
    return torch.cat([pos, -pos]).to(dtype=dtype, device=device)


def encode_nearest(x: torch.Tensor, pos: torch.Tensor, sign_bit: int) -> torch.Tensor:
    """Return the codes (uint8) nearest to x among the non-negative values pos (ascending, code
    i for pos[i]), x already divided by its scale; a magnitude past the largest clamps to it, a
    tie goes to the even code, and a negative value sets sign_bit unless it rounds to zero."""
    pos = pos.to(torch.float32).to(x.device)
    mag = x.abs().float().clamp(max=pos[-1].item())
    dist = (mag[..., None] - pos).abs()
    # nearest, ties to the even code: subtract a hair from even codes' distance
    dist = dist - (torch.arange(len(pos), device=x.device) % 2 == 0).float() * 1e-6
    code = dist.argmin(-1).to(torch.uint8)
    return torch.where((x < 0) & (code > 0), code | sign_bit, code)


def encode_e2m1(x: torch.Tensor) -> torch.Tensor:
    """Return the e2m1 codes (uint8, 0-15) nearest to x (already divided by its scale and
    within [-6, 6]); a tie goes to the even code, as round-to-nearest-even does."""
    return encode_nearest(x, torch.tensor(E2M1_VALUES), 8)


def pack(codes: torch.Tensor) -> torch.Tensor:
    """Return (..., K/2) uint8 from (..., K) codes: element 2i in the low nibble, 2i+1 in the high."""
    return (codes[..., 0::2] | (codes[..., 1::2] << 4)).to(torch.uint8)


def unpack(packed: torch.Tensor) -> torch.Tensor:
    """Return the (..., K) codes of (..., K/2) packed bytes (the inverse of pack)."""
    out = torch.stack([packed & 15, packed >> 4], dim=-1)
    return out.reshape(*packed.shape[:-1], packed.shape[-1] * 2)


def quantize(x: torch.Tensor, fmt: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (values, scales (R, K/G)) of x (R, K): fp4's packed e2m1 values (R, K/2) or fp6's
    codes (R, K), uint8; each group's scale brings the group's largest magnitude to about the
    format's largest value V (6, or fp6's 7.5 and 28): 2**ceil(log2(amax / V)) as an e8m0 byte
    (mxfp4, fp6), or for nvfp4 amax / 6 to the nearest e4m3, a value past 6 then clamping to 6."""
    g = GROUP[fmt]
    r, k = x.shape
    assert k % g == 0, f"K = {k} must be a multiple of the group size {g}"
    xg = x.float().reshape(r, k // g, g)
    amax = xg.abs().amax(-1).clamp(min=2.0**-100)
    if fmt in FP6_BITS:
        pos = fp6_table(fmt)[: 2 ** (sum(FP6_BITS[fmt][:2]))]
        exp = torch.ceil(torch.log2(amax / pos[-1].item())).clamp(-127, 127)
        codes = encode_nearest(xg / torch.exp2(exp)[..., None], pos, 32).reshape(r, k)
        return codes, (exp + 127).to(torch.uint8)
    if fmt == "mxfp4":
        exp = torch.ceil(torch.log2(amax / E2M1_MAX)).clamp(-127, 127)
        scale_bytes = (exp + 127).to(torch.uint8)
        scale = torch.exp2(exp)
    else:
        s = (amax / E2M1_MAX).to(torch.float8_e4m3fn)  # to the nearest e4m3: a value past 6 clamps to 6
        scale_bytes, scale = s, s.float()
    codes = encode_e2m1(xg / scale[..., None]).reshape(r, k)
    return pack(codes), scale_bytes


def scales_f64(scales: torch.Tensor) -> torch.Tensor:
    """Return float64 scales: e8m0 bytes (uint8) as 2**(byte - 127), e4m3 as their values."""
    if scales.dtype == torch.uint8:
        return torch.exp2(scales.double() - 127)
    return scales.double()


def dequantize(packed: torch.Tensor, scales: torch.Tensor, fmt: str = "mxfp4") -> torch.Tensor:
    """Return the float64 (R, K) values of packed e2m1 (R, K/2), or of fp6 codes (R, K) for an
    fp6 fmt, with scales (R, K/G)."""
    if fmt in FP6_BITS:
        vals = fp6_table(fmt, device=packed.device)[packed.long()]
    else:
        vals = e2m1_table(device=packed.device)[unpack(packed).long()]
    g = vals.shape[-1] // scales.shape[-1]
    return vals * scales_f64(scales).repeat_interleave(g, dim=-1)


# ---- the kernel --------------------------------------------------------------------------

# The pointer GEMM's tile record (kernels/gemm.py); here block_k counts fp4 values, so a
# tile row holds BLOCK_K / 2 bytes.
Fp4Config = TileConfig


# best guesses first: Blackwell's block-scaled MMA takes 128-row tiles and K of 128 or more
# (a 64x128x256 tile, tried, compiled for sm_100 to 144,912 B of shared memory, 204
# registers and an 8 B spill: not that MMA's staging, which holds any tile below at
# (num_stages - 1) buffers)
CANDIDATES = (
    Fp4Config(128, 256, 256, 8, 8, 3),
    Fp4Config(128, 128, 256, 8, 4, 4),
    Fp4Config(256, 128, 256, 8, 8, 3),
    Fp4Config(128, 128, 128, 8, 4, 4),
    Fp4Config(128, 256, 128, 8, 8, 4),
)
INTERPRETER_CONFIG = Fp4Config(32, 32, 64, 4, 4, 1)


EPILOGUE_SLACK = 4096  # what the compilers add beside the pipeline (gfx950: 2,016 to 2,272 B)


def smem_bytes(config: Fp4Config, group: int, pack: int = 2) -> int:
    """Return the shared memory of a tile (conservative: never below the compiler's figure):
    num_stages x (BLOCK_M + BLOCK_N) x (BLOCK_K / pack bytes of values (fp4 2 per byte, fp6 1)
    + BLOCK_K / group bytes of scales) + EPILOGUE_SLACK. gfx950 (triton 3.9) keeps exactly the pipeline plus about
    2 KiB; sm_100 stages its operands differently (104,456 B for mxfp4 at every candidate)."""
    per_row = config.block_k // pack + config.block_k // group
    return config.num_stages * (config.block_m + config.block_n) * per_row + EPILOGUE_SLACK


@triton.jit
def fp6_as_e4m3(x, MANT: tl.constexpr, BIAS: tl.constexpr):
    """Return the e4m3 values of fp6 codes x (uint8, sign << 5 | exponent << MANT | mantissa): a
    normal code's float32 bits built directly, a subnormal's mantissa times 2**(1 - BIAS - MANT),
    then rounded to e4m3, where each is exact (e4m3 holds every e2m3 and e3m2 value)."""
    c = x.to(tl.int32)
    e = (c >> MANT) & ((1 << (5 - MANT)) - 1)
    m = c & ((1 << MANT) - 1)
    normal = (((e - BIAS + 127) << 23) | (m << (23 - MANT))).to(tl.float32, bitcast=True)
    sub = m.to(tl.float32) * (2.0 ** (1 - BIAS - MANT))
    v = tl.where(e == 0, sub, normal)
    return tl.where(((c >> 5) & 1) == 1, -v, v).to(tl.float8e4nv)


@triton.jit
def fp4_matmul_kernel(a_ptr, a_scale_ptr,  # (M, K/PACK) values, (M, K/GROUP) scales
                      b_ptr, b_scale_ptr,  # (N, K/PACK) values, (N, K/GROUP) scales
                      c_ptr,               # (M, N) bf16 output
                      M, N, K,
                      stride_am, stride_bn, stride_asm, stride_bsn, stride_cm,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                      GROUP_M: tl.constexpr, GROUP: tl.constexpr,
                      FMT: tl.constexpr = "e2m1",  # tl.dot_scaled's format: e2m1 (fp4), e2m3 or e3m2 (fp6)
                      PACK: tl.constexpr = 2,      # values per byte: 2 for e2m1, 1 for fp6
                      DECODE: tl.constexpr = False,  # fp6 codes decoded to e4m3 in registers (fp6_as_e4m3)
                      MANT: tl.constexpr = 3, BIAS: tl.constexpr = 1):  # the fp6 format's mantissa bits, bias
    # K % BLOCK_K == 0 (the launcher checks): the K loop needs no mask
    pid_m, pid_n = grouped_tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rows_a = (offs_m % M).to(tl.int64)
    rows_b = (offs_n % N).to(tl.int64)
    offs_kb = tl.arange(0, BLOCK_K // PACK)
    offs_ks = tl.arange(0, BLOCK_K // GROUP)
    a_ptrs = a_ptr + rows_a[:, None] * stride_am + offs_kb[None, :]
    b_ptrs = b_ptr + rows_b[None, :] * stride_bn + offs_kb[:, None]      # (BLOCK_K / PACK, BLOCK_N)
    as_ptrs = a_scale_ptr + rows_a[:, None] * stride_asm + offs_ks[None, :]
    bs_ptrs = b_scale_ptr + rows_b[:, None] * stride_bsn + offs_ks[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for _ in range(0, K // BLOCK_K):
        a = tl.load(a_ptrs)
        b = tl.load(b_ptrs)
        sa = tl.load(as_ptrs)
        sb = tl.load(bs_ptrs)
        if DECODE:
            acc = tl.dot_scaled(fp6_as_e4m3(a, MANT, BIAS), sa, "e4m3", fp6_as_e4m3(b, MANT, BIAS), sb, "e4m3", acc)
        else:
            acc = tl.dot_scaled(a, sa, FMT, b, sb, FMT, acc)
        a_ptrs += BLOCK_K // PACK
        b_ptrs += BLOCK_K // PACK
        as_ptrs += BLOCK_K // GROUP
        bs_ptrs += BLOCK_K // GROUP
    c_ptrs = c_ptr + offs_m[:, None].to(tl.int64) * stride_cm + offs_n[None, :]
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def matmul(a, a_scale, b, b_scale, c, config: Fp4Config = INTERPRETER_CONFIG, fmt: str = "mxfp4",
           decode: bool = False):
    """Return c after c = dequant(a) @ dequant(b)^T: a (M, K/2) and b (N, K/2) packed e2m1 (fp6:
    (M, K) and (N, K) codes), their scales (M, K/G) and (N, K/G) (uint8 e8m0 for mxfp4 and fp6,
    float8_e4m3fn for nvfp4), c (M, N) preallocated (bf16). decode (fp6 only): decode the codes to
    e4m3 in registers, for a Triton whose tl.dot_scaled refuses the format (dot_scaled_takes)."""
    M, K2 = a.shape
    N = b.shape[0]
    pack = 1 if fmt in FP6_BITS else 2
    _, mant, bias = FP6_BITS.get(fmt, (0, 3, 1))   # the kernel's defaults where fmt is no fp6 format
    K = pack * K2
    group = K // a_scale.shape[1]
    assert b.shape[1] == K2 and c.shape == (M, N) and b_scale.shape == (N, K // group), "fp4 GEMM shapes disagree"
    assert K % config.block_k == 0, f"K = {K} must be a multiple of BLOCK_K = {config.block_k}"
    grid = (triton.cdiv(M, config.block_m) * triton.cdiv(N, config.block_n),)
    fp4_matmul_kernel[grid](a, a_scale, b, b_scale, c, M, N, K,
                            a.stride(0), b.stride(0), a_scale.stride(0), b_scale.stride(0), c.stride(0),
                            BLOCK_M=config.block_m, BLOCK_N=config.block_n, BLOCK_K=config.block_k,
                            GROUP_M=config.group_m, GROUP=group, FMT=SCALED_FORMAT[fmt], PACK=pack,
                            DECODE=bool(decode and fmt in FP6_BITS), MANT=mant, BIAS=bias,
                            num_warps=config.num_warps,
                            num_stages=config.num_stages)
    return c


@triton.jit
def _takes_format(a_ptr, s_ptr, c_ptr, FMT: tl.constexpr, PACK: tl.constexpr):
    # a 32 x (32 PACK) dot of one operand with itself, one e8m0 scale per 32 values
    offs = tl.arange(0, 32)
    x = tl.load(a_ptr + offs[:, None] * 32 + offs[None, :])
    s = tl.load(s_ptr + offs[:, None] * PACK + tl.arange(0, PACK)[None, :])
    tl.store(c_ptr + offs[:, None] * 32 + offs[None, :], tl.dot_scaled(x, s, FMT, x, s, FMT))


def interpreter_dot_scaled() -> bool:
    """Whether Triton's interpreter runs tl.dot_scaled (Triton 3.9's builder does; 3.6's has no
    create_dot_scaled, so there the kernel is checked on a GPU only)."""
    from triton.runtime.interpreter import InterpreterBuilder  # deferred: the interpreter's module, for CPU checks
    return hasattr(InterpreterBuilder, "create_dot_scaled")


@functools.cache
def dot_scaled_takes(fmt: str) -> str | None:
    """Return why this Triton's tl.dot_scaled refuses a format for sm_100 (its front end's message,
    "NYI: lhs_format e2m3" in Triton 3.6 to 3.9), or None when a dot of it compiles for sm_100.
    The compile runs in a child process without TRITON_INTERPRET: the interpreter, once on,
    replaces the language's builder in its own process."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    done = subprocess.run([sys.executable, "-c", f"from kernels.gemm_fp4 import _compile_dot; _compile_dot({fmt!r})"],
                          env=env, cwd=ROOT, capture_output=True, text=True)
    if done.returncode == 0:
        return None
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    return lines[-1] if lines else f"exit code {done.returncode}"


def _compile_dot(fmt: str):
    """Compile _takes_format for sm_100 in fmt (dot_scaled_takes' child); a refusal raises."""
    from triton.backends.compiler import GPUTarget  # deferred: only a check for fp6 needs the compiler
    from triton.compiler import ASTSource  # deferred: only a check for fp6 needs the compiler
    sig = {"a_ptr": "*u8", "s_ptr": "*u8", "c_ptr": "*fp32", "FMT": "constexpr", "PACK": "constexpr"}
    consts = {"FMT": SCALED_FORMAT[fmt], "PACK": 1 if fmt in FP6_BITS else 2}
    try:
        triton.compile(ASTSource(_takes_format, sig, consts), target=GPUTarget("cuda", 100, 32))
    except Exception as e:  # CompilationError, its cause an AssertionError of the front end
        lines = [ln for ln in str(e).splitlines() if ln.strip()]
        raise SystemExit(lines[-1] if lines else type(e).__name__) from None
