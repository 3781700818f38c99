"""Block-scaled fp4 GEMM through tl.dot_scaled: C = dequant(A) @ dequant(B)^T, bf16 out.

Formats (both e2m1 values, two per byte, the first element of a pair in the low nibble):

    mxfp4  OCP microscaling: one e8m0 scale (a power of two, 2**(byte - 127)) per 32 values
    nvfp4  NVIDIA: one e4m3 scale per 16 values (its per-tensor fp32 scale is left out)

e2m1 holds 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives: bit 3 is the sign, bits 0-2 index
that list. A is stored (M, K/2) and B (N, K/2) (K-major, as a linear layer stores weights),
their scales (M, K/G) and (N, K/G). quantize() and dequantize() are the host-side packing
and its float64 inverse; the tests check them on hand-worked bytes.

Hardware: sm_100 (tcgen05 block-scaled MMA) runs both formats natively; gfx950 (CDNA4)
runs mxfp4; sm_90 emulates both through bf16 and gfx942 mxfp4 (no fp4 roof there; Triton
3.9's gfx942 compiler aborts on nvfp4). Triton's interpreter runs mxfp4 exactly, but reads every scale as e8m0, so
it cannot check nvfp4 (triton 3.9).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.gemm import TileConfig, grouped_tile

# e2m1 code -> value (codes 8-15 are the negatives of 0-7)
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
E2M1_MAX = 6.0
GROUP = {"mxfp4": 32, "nvfp4": 16}


# ---- host-side packing -----------------------------------------------------------------------

def e2m1_table(dtype=torch.float64, device="cpu") -> torch.Tensor:
    """Return the 16 values of the e2m1 codes (code 8 is -0.0)."""
    pos = torch.tensor(E2M1_VALUES, dtype=dtype, device=device)
    return torch.cat([pos, -pos])


def encode_e2m1(x: torch.Tensor) -> torch.Tensor:
    """Return the e2m1 codes (uint8, 0-15) nearest to x (already divided by its scale and
    within [-6, 6]); a tie goes to the even code, as round-to-nearest-even does."""
    pos = torch.tensor(E2M1_VALUES, dtype=torch.float32, device=x.device)
    mag = x.abs().float().clamp(max=E2M1_MAX)
    dist = (mag[..., None] - pos).abs()
    # nearest, ties to the even code: subtract a hair from even codes' distance
    dist = dist - (torch.arange(8, device=x.device) % 2 == 0).float() * 1e-6
    code = dist.argmin(-1).to(torch.uint8)
    return torch.where((x < 0) & (code > 0), code | 8, code)


def pack(codes: torch.Tensor) -> torch.Tensor:
    """Return (..., K/2) uint8 from (..., K) codes: element 2i in the low nibble, 2i+1 in the high."""
    return (codes[..., 0::2] | (codes[..., 1::2] << 4)).to(torch.uint8)


def unpack(packed: torch.Tensor) -> torch.Tensor:
    """Return the (..., K) codes of (..., K/2) packed bytes (the inverse of pack)."""
    out = torch.stack([packed & 15, packed >> 4], dim=-1)
    return out.reshape(*packed.shape[:-1], packed.shape[-1] * 2)


def quantize(x: torch.Tensor, fmt: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (packed e2m1 values (R, K/2) uint8, scales (R, K/G)) of x (R, K): each group's
    scale brings the group's largest magnitude to about 6 (mxfp4: 2**ceil(log2(amax / 6)) as
    an e8m0 byte; nvfp4: amax / 6 to the nearest e4m3, a value past 6 then clamping to 6)."""
    g = GROUP[fmt]
    r, k = x.shape
    assert k % g == 0, f"K = {k} must be a multiple of the group size {g}"
    xg = x.float().reshape(r, k // g, g)
    amax = xg.abs().amax(-1).clamp(min=2.0**-100)
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


def dequantize(packed: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """Return the float64 (R, K) values of packed e2m1 (R, K/2) with scales (R, K/G)."""
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


def smem_bytes(config: Fp4Config, group: int) -> int:
    """Return the shared memory of a tile (conservative: never below the compiler's figure):
    num_stages x (BLOCK_M + BLOCK_N) x (BLOCK_K / 2 bytes of values + BLOCK_K / group bytes
    of scales) + EPILOGUE_SLACK. gfx950 (triton 3.9) keeps exactly the pipeline plus about
    2 KiB; sm_100 stages its operands differently (104,456 B for mxfp4 at every candidate)."""
    per_row = config.block_k // 2 + config.block_k // group
    return config.num_stages * (config.block_m + config.block_n) * per_row + EPILOGUE_SLACK


@triton.jit
def fp4_matmul_kernel(a_ptr, a_scale_ptr,  # (M, K/2) packed e2m1, (M, K/GROUP) scales
                      b_ptr, b_scale_ptr,  # (N, K/2) packed e2m1, (N, K/GROUP) scales
                      c_ptr,               # (M, N) bf16 output
                      M, N, K,
                      stride_am, stride_bn, stride_asm, stride_bsn, stride_cm,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                      GROUP_M: tl.constexpr, GROUP: tl.constexpr):
    # K % BLOCK_K == 0 (the launcher checks): the K loop needs no mask
    pid_m, pid_n = grouped_tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rows_a = (offs_m % M).to(tl.int64)
    rows_b = (offs_n % N).to(tl.int64)
    offs_kb = tl.arange(0, BLOCK_K // 2)
    offs_ks = tl.arange(0, BLOCK_K // GROUP)
    a_ptrs = a_ptr + rows_a[:, None] * stride_am + offs_kb[None, :]
    b_ptrs = b_ptr + rows_b[None, :] * stride_bn + offs_kb[:, None]      # (BLOCK_K / 2, BLOCK_N)
    as_ptrs = a_scale_ptr + rows_a[:, None] * stride_asm + offs_ks[None, :]
    bs_ptrs = b_scale_ptr + rows_b[:, None] * stride_bsn + offs_ks[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for _ in range(0, K // BLOCK_K):
        a = tl.load(a_ptrs)
        b = tl.load(b_ptrs)
        sa = tl.load(as_ptrs)
        sb = tl.load(bs_ptrs)
        acc = tl.dot_scaled(a, sa, "e2m1", b, sb, "e2m1", acc)
        a_ptrs += BLOCK_K // 2
        b_ptrs += BLOCK_K // 2
        as_ptrs += BLOCK_K // GROUP
        bs_ptrs += BLOCK_K // GROUP
    c_ptrs = c_ptr + offs_m[:, None].to(tl.int64) * stride_cm + offs_n[None, :]
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def matmul(a, a_scale, b, b_scale, c, config: Fp4Config = INTERPRETER_CONFIG):
    """Return c after c = dequant(a) @ dequant(b)^T: a (M, K/2) and b (N, K/2) packed e2m1,
    their scales (M, K/G) and (N, K/G) (uint8 e8m0 for mxfp4, float8_e4m3fn for nvfp4),
    c (M, N) preallocated (bf16)."""
    M, K2 = a.shape
    N = b.shape[0]
    K = 2 * K2
    group = K // a_scale.shape[1]
    assert b.shape[1] == K2 and c.shape == (M, N) and b_scale.shape == (N, K // group), "fp4 GEMM shapes disagree"
    assert K % config.block_k == 0, f"K = {K} must be a multiple of BLOCK_K = {config.block_k}"
    grid = (triton.cdiv(M, config.block_m) * triton.cdiv(N, config.block_n),)
    fp4_matmul_kernel[grid](a, a_scale, b, b_scale, c, M, N, K,
                            a.stride(0), b.stride(0), a_scale.stride(0), b_scale.stride(0), c.stride(0),
                            BLOCK_M=config.block_m, BLOCK_N=config.block_n, BLOCK_K=config.block_k,
                            GROUP_M=config.group_m, GROUP=group, num_warps=config.num_warps,
                            num_stages=config.num_stages)
    return c
