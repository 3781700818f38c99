"""Triton tiled GEMM, generic over the input dtype: C = scale * (A @ B).

Pure compute: no timing, no files, no printing. The caller picks a tile configuration
(bench/ops/gemm.py autotunes over CONFIGS with the suite's own timer on a GPU, and uses
INTERPRETER_CONFIG under TRITON_INTERPRET=1).

Shapes: A is (M, K), B is (K, N), C is (M, N); any strides (B may be a transposed view).
Accumulation is fp32 for floating inputs and int32 for int8. fp32 inputs use IEEE fp32
products unless input_precision="tf32". fp8 inputs take per-tensor scales: the product
is multiplied by scale_a * scale_b (fp32 scalars in device memory) before rounding to C.
"""
from dataclasses import dataclass

import torch
import triton
import triton.language as tl


@dataclass(frozen=True)
class TileConfig:
    block_m: int
    block_n: int
    block_k: int
    group_m: int = 8
    num_warps: int = 4
    num_stages: int = 3

    def __str__(self):
        return f"{self.block_m}x{self.block_n}x{self.block_k}/g{self.group_m}/w{self.num_warps}/s{self.num_stages}"


# Candidates for the GPU, best guesses first (a quick run tunes over the first three that
# fit the device's shared memory), one list per operand width: large tiles for the
# compute-bound squares, deep K for 8-bit operands (half the bytes per element), narrow M
# tiles for the skinny shapes. Hopper (sm_90+) feeds its warpgroup MMAs from shared memory;
# Ampere and Ada hold both operands' fragments in registers, where the widest Hopper tiles
# spill (int8 128x256x128 spills 1.5 KB per thread on sm_80), so those GPUs get their own
# lists. fp32 with IEEE products has its own small tiles: it runs on the FMA units, and a
# large tile needs hundreds of registers. None of the lists' tiles spills more than a few
# words on its arch (Triton 3.6 and 3.9; `python -m bench.aot --arch sm_90` shows them all).
CONFIGS_16BIT = (
    TileConfig(128, 256, 64, 8, 8, 3),
    TileConfig(256, 128, 64, 8, 8, 3),
    TileConfig(128, 256, 64, 8, 8, 4),
    TileConfig(128, 128, 64, 8, 4, 4),
    TileConfig(128, 128, 128, 8, 8, 3),
    TileConfig(64, 256, 64, 8, 4, 4),
    TileConfig(64, 128, 64, 8, 4, 4),
    TileConfig(16, 128, 128, 1, 4, 4),
    TileConfig(32, 64, 256, 1, 4, 3),
)
CONFIGS_8BIT = (
    TileConfig(128, 256, 128, 8, 8, 3),
    TileConfig(256, 128, 128, 8, 8, 3),
    TileConfig(128, 128, 128, 8, 4, 4),
    TileConfig(64, 256, 128, 8, 4, 4),
    TileConfig(64, 128, 128, 8, 4, 4),
    TileConfig(16, 128, 256, 1, 4, 4),
    TileConfig(32, 64, 256, 1, 4, 3),
)
CONFIGS_TF32 = (
    TileConfig(128, 128, 32, 8, 8, 3),
    TileConfig(128, 256, 32, 8, 8, 3),
    TileConfig(64, 128, 32, 8, 4, 4),
    TileConfig(128, 64, 32, 8, 4, 4),
    TileConfig(16, 128, 64, 1, 4, 4),
)
# IEEE fp32 on the FMA units: each thread of 128x128x16 on 8 warps accumulates 64 outputs
# (the most FMAs per loaded value that stays under 255 registers), then 64x64 tiles and
# narrow ones for the skinny shapes. Every one compiles in about a second without spilling;
# the 128x256 and 128x128x64 tiles the first lists had need 255 registers and spill.
CONFIGS_FP32 = (
    TileConfig(128, 128, 16, 8, 8, 3),
    TileConfig(64, 64, 32, 8, 4, 3),
    TileConfig(32, 64, 32, 1, 4, 3),
    TileConfig(64, 128, 16, 8, 8, 3),
    TileConfig(128, 64, 16, 8, 8, 3),
    TileConfig(16, 128, 32, 1, 4, 3),
    TileConfig(64, 64, 16, 8, 4, 3),
)
# Ampere and Ada (compute capability 8.x): 8 warps for 128x128 tiles and K no deeper
# than the registers allow.
CONFIGS_16BIT_SM8X = (
    TileConfig(128, 256, 32, 8, 8, 4),
    TileConfig(128, 128, 64, 8, 8, 3),
    TileConfig(128, 128, 32, 8, 4, 4),
    TileConfig(128, 128, 128, 8, 8, 3),
    TileConfig(64, 128, 64, 8, 4, 4),
    TileConfig(64, 256, 32, 8, 4, 4),
    TileConfig(16, 128, 64, 1, 4, 4),
    TileConfig(32, 64, 128, 1, 4, 3),
)
CONFIGS_8BIT_SM8X = (
    TileConfig(128, 128, 128, 8, 8, 3),
    TileConfig(128, 128, 64, 8, 8, 4),
    TileConfig(64, 128, 128, 8, 4, 4),
    TileConfig(128, 64, 128, 8, 4, 4),
    TileConfig(64, 128, 64, 8, 4, 4),
    TileConfig(16, 128, 128, 1, 4, 4),
    TileConfig(32, 64, 256, 1, 4, 3),
)
CONFIGS_TF32_SM8X = (
    TileConfig(128, 128, 32, 8, 8, 3),
    TileConfig(128, 128, 16, 8, 8, 4),
    TileConfig(64, 128, 32, 8, 4, 4),
    TileConfig(128, 64, 32, 8, 4, 4),
    TileConfig(16, 128, 32, 1, 4, 4),
    TileConfig(64, 64, 32, 8, 4, 3),
)
# AMD (modelled as sm_80, bench/ops/_tune.py): fp8's skinny 32x64x256 tile needs 321 VGPRs
# on gfx942 and spills 636 B at occupancy 1; K 128 halves its operand fragments
CONFIGS_FP8_AMD = tuple(TileConfig(32, 64, 128, 1, 4, 3) if (c.block_m, c.block_n, c.block_k) == (32, 64, 256) else c
                        for c in CONFIGS_8BIT_SM8X)
CONFIGS = {"fp32": CONFIGS_FP32, "tf32": CONFIGS_TF32, "fp16": CONFIGS_16BIT, "bf16": CONFIGS_16BIT,
           "fp8e4m3": CONFIGS_8BIT, "fp8e5m2": CONFIGS_8BIT, "int8": CONFIGS_8BIT}
CONFIGS_SM8X = dict(CONFIGS, tf32=CONFIGS_TF32_SM8X, fp16=CONFIGS_16BIT_SM8X, bf16=CONFIGS_16BIT_SM8X,
                    fp8e4m3=CONFIGS_8BIT_SM8X, fp8e5m2=CONFIGS_8BIT_SM8X, int8=CONFIGS_8BIT_SM8X)


def candidates(precision: str, quick: bool = False, cc: int | None = None, amd: bool = False) -> tuple:
    """Return the tile candidates for a precision ("fp32", "tf32", "bf16", ...), best first,
    for a GPU of compute capability cc x 10 (80 for sm_80; None: Hopper's lists); amd: an
    AMD GPU (cc is then the model's, 80).
    (The caller prunes those over the device's shared memory, and in quick runs keeps 3.)"""
    if amd and precision in ("fp8e4m3", "fp8e5m2"):
        return CONFIGS_FP8_AMD
    if cc is not None and cc >= 100 and precision in ("int8", "tf32"):
        # Blackwell (triton 3.9): the wide Hopper int8 tiles bring their int32 accumulators
        # back to 254 registers and spill 208-304 B per thread, and tf32 128x256x32 spills
        # 128 B at 254 (182 registers, no spill, on sm_90); Ampere's lists do not spill
        return CONFIGS_SM8X[precision]
    return (CONFIGS_SM8X if cc is not None and cc < 90 else CONFIGS)[precision]


# AMD targets whose Triton pipeliner keeps num_stages LDS buffers (not num_stages - 1) and
# pads them by up to 1/32 (gfx950, triton 3.9: 99,808 B for 3 x 98,304 / 3; fp32 unpadded)
LDS_ALL_STAGES = ("gfx950",)


def smem_bytes(config: TileConfig, element_bytes: int, cc: int | None = None, fma: bool = False,
               out_bytes: int | None = None, gfx: str | None = None) -> int:
    """Return the shared memory of a tile: pipeline buffers x (BLOCK_M + BLOCK_N) x BLOCK_K x
    element size (the A and B tiles of each buffer), or on Hopper's warpgroup MMA the C tile
    (BLOCK_M x BLOCK_N x out_bytes) staged for the store when that is larger. Hopper and later
    (cc >= 90) with BLOCK_M >= 64 keep num_stages buffers; Ampere and Ada (cc < 90), Hopper's
    narrow tiles (the pre-Hopper MMA), and IEEE fp32 on the FMA units (fma) keep
    num_stages - 1 and stage no C tile; Blackwell (cc >= 100) adds 16 bytes of barriers to
    the wide tiles. This equals the compiler's own figure on sm_80, sm_90 and sm_100 with
    Triton 3.9, and on gfx942 modelled as sm_80 (tests/test_aot.py checks it); an unknown
    arch (cc None) gets the larger, Hopper figure. gfx (an AMD target) in LDS_ALL_STAGES
    keeps every stage's buffer, padded: num_stages x the A and B tiles x 33/32, an upper
    bound of the compiler's figure."""
    if gfx in LDS_ALL_STAGES:
        return config.num_stages * (config.block_m + config.block_n) * config.block_k * element_bytes * 33 // 32
    wgmma = cc is None or (cc >= 90 and not fma and config.block_m >= 64)
    buffers = config.num_stages if wgmma else max(1, config.num_stages - 1)
    pipeline = buffers * (config.block_m + config.block_n) * config.block_k * element_bytes
    staged_c = config.block_m * config.block_n * (out_bytes or element_bytes) if wgmma else 0
    barriers = 16 if wgmma and cc is not None and cc >= 100 else 0  # Blackwell's tcgen05 MMA barriers
    return max(pipeline, staged_c) + barriers


INTERPRETER_CONFIG = TileConfig(64, 64, 32, 4, 4, 1)


@triton.jit
def grouped_tile(pid, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """Return (pid_m, pid_n), the C tile of program pid in grouped order: GROUP_M row-blocks
    walked down a column of C before moving right, so the programs in flight at once reuse
    the same B columns and A rows from L2."""
    grid_m = tl.cdiv(M, BLOCK_M)
    grid_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * grid_n
    first_m = (pid // per_group) * GROUP_M
    rows = min(grid_m - first_m, GROUP_M)
    return first_m + (pid % per_group) % rows, (pid % per_group) // rows


@triton.jit
def matmul_kernel(a_ptr,  # (M, K) input
                  b_ptr,  # (K, N) input
                  c_ptr,  # (M, N) output: C = scale * (A @ B)
                  scale_ptr,  # two fp32 scalars (scale_a, scale_b); read only when HAS_SCALE
                  M, N, K,  # problem size
                  stride_am, stride_ak,  # A strides in elements
                  stride_bk, stride_bn,  # B strides in elements
                  stride_cm, stride_cn,  # C strides in elements
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  GROUP_M: tl.constexpr,  # row-blocks per group: neighbouring programs share B tiles in L2
                  INT_ACC: tl.constexpr,  # accumulate in int32 (int8 inputs)
                  INPUT_PRECISION: tl.constexpr,  # "ieee" or "tf32" for fp32 inputs
                  HAS_SCALE: tl.constexpr,
                  EVEN_K: tl.constexpr = False):  # K % BLOCK_K == 0: the K loop needs no mask
    pid_m, pid_n = grouped_tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    # Rows and columns past M and N wrap to valid ones (their results are never stored), so
    # the loads need no M/N mask and, with EVEN_K, none at all: the pipeline stays unpredicated.
    rows_a = offs_m % M
    cols_b = offs_n % N
    a_ptrs = a_ptr + rows_a[:, None].to(tl.int64) * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + cols_b[None, :].to(tl.int64) * stride_bn
    if INT_ACC:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32)
    else:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        if EVEN_K:
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)
        else:
            k_left = K - k * BLOCK_K
            a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
            b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        if INT_ACC:
            acc = tl.dot(a, b, acc, out_dtype=tl.int32)
        else:
            acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    if HAS_SCALE:
        acc = acc * (tl.load(scale_ptr) * tl.load(scale_ptr + 1))
    c_ptrs = c_ptr + offs_m[:, None].to(tl.int64) * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def matmul(a, b, c, config: TileConfig = INTERPRETER_CONFIG, input_precision="ieee", scales=None):
    """Return c after c = scales[0] * scales[1] * (a @ b), or c = a @ b when scales is None.

    a: (M, K), b: (K, N), c: (M, N) preallocated in the output dtype; scales: a 2-element
    fp32 tensor on the same device (fp8 inputs). int8 inputs accumulate in int32.
    """
    M, K = a.shape
    K2, N = b.shape
    assert K == K2 and c.shape == (M, N), f"shapes {tuple(a.shape)} @ {tuple(b.shape)} -> {tuple(c.shape)}"
    grid = (triton.cdiv(M, config.block_m) * triton.cdiv(N, config.block_n),)
    matmul_kernel[grid](
        a, b, c, scales if scales is not None else c, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BLOCK_M=config.block_m, BLOCK_N=config.block_n, BLOCK_K=config.block_k, GROUP_M=config.group_m,
        INT_ACC=a.dtype == torch.int8, INPUT_PRECISION=input_precision, HAS_SCALE=scales is not None,
        EVEN_K=K % config.block_k == 0, num_warps=config.num_warps, num_stages=config.num_stages)
    return c
