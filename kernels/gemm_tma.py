"""Triton persistent GEMM with TMA tensor descriptors, for Hopper (sm_90) and newer:
C = scale * (A @ B^T) with B stored (N, K) row-major, as a linear layer stores weights.

Pure compute: no timing, no files, no printing. The caller picks a configuration
(bench/ops/gemm.py tunes over candidates() with the suite's own timer on a GPU and uses
INTERPRETER_CONFIG under TRITON_INTERPRET=1, where Triton 3.9 emulates descriptors).

Structure, what each part is for:
- Persistent: one program per SM (the grid is min(SMs, tiles)); program p takes tiles
  p, p + G, p + 2G, ... in grouped order (GROUP_M row-blocks down a column of C before
  moving right), so the tiles in flight at once share A rows and B columns in L2.
- TMA: A, B and C are reached through tensor descriptors made on the device
  (tl.make_tensor_descriptor: needs triton.set_allocator for their 128-byte records, which
  the host wrapper provides from one cached buffer per device). The copy engine fetches
  whole tiles into shared memory, zero-filling rows and columns past M, N and K, and
  clips the stores of C at its edges: no masks anywhere.
- Pipeline: the tile loop is flattened with the K loop (tl.range(..., flatten=True)), so
  the software pipeline num_stages deep keeps issuing the next tile's loads while this
  tile's epilogue runs; or, with warp_specialize, a producer warp group issues the loads
  and the MMA warp groups consume them (Triton's automatic warp specialization).
- Epilogue: the accumulator is scaled (fp8: scale_a x scale_b), converted and stored
  through C's descriptor in SPLIT_C column slices, so the staging buffer is a
  1/SPLIT_C of the tile and the stores of one slice overlap the conversion of the next.

TMA needs 16-byte-aligned base addresses and row strides: K x input width and N x output
width multiples of 16 bytes (tma_reason says which is not). Inputs: fp16, bf16 (fp32
accumulation, same out), fp8 e4m3/e5m2 (per-tensor scales, bf16 out), int8 (int32
accumulation and out). Any M, N, K otherwise: edge tiles are handled by the descriptors.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
import triton
import triton.language as tl


@dataclass(frozen=True)
class TmaConfig:
    block_m: int
    block_n: int
    block_k: int
    group_m: int = 8
    num_warps: int = 8
    num_stages: int = 3
    split_c: int = 2                 # C stored in this many column slices (1, 2 or 4)
    warp_specialize: bool = False    # producer/consumer warp groups instead of a flattened pipeline

    def __str__(self):
        ws = "/ws" if self.warp_specialize else ""
        return (f"{self.block_m}x{self.block_n}x{self.block_k}/g{self.group_m}/w{self.num_warps}"
                f"/s{self.num_stages}/c{self.split_c}{ws}")


# Candidates for sm_90 and newer, best guesses first (a quick run tunes over the first three
# that fit the shared memory). 16-bit: the 128x256 tile of the public persistent kernels
# (two consumer warp groups, 64 K per stage) at two pipeline depths, then the
# warp-specialized form, then narrower tiles. 8-bit operands take 128 K per stage (the
# same bytes per stage); int8's int32 C slices are twice fp8's bf16 ones, so its deep
# pipeline stores C in quarters. Warp specialization on Hopper: Triton splits the loop
# into a producer (TMA) warp group and consumers only at num_warps=4 (at 8 it keeps the
# plain pipeline), and Triton 3.6 compiles it only with the C tile stored whole (split 1:
# its partitioner rejects the split epilogue), so those candidates are w4/c1.
CONFIGS_16BIT = (
    TmaConfig(128, 256, 64, 8, 8, 3, 2),
    TmaConfig(128, 256, 64, 8, 8, 4, 2),
    TmaConfig(128, 256, 64, 8, 4, 3, 1, True),
    TmaConfig(128, 128, 64, 8, 4, 4, 2),
    TmaConfig(128, 128, 64, 8, 4, 4, 1, True),
    TmaConfig(128, 128, 128, 8, 8, 3, 2),
    TmaConfig(64, 256, 64, 8, 4, 4, 2),
    TmaConfig(64, 128, 64, 8, 4, 4, 1),
)
CONFIGS_8BIT = (
    TmaConfig(128, 256, 128, 8, 8, 3, 2),
    TmaConfig(128, 256, 128, 8, 8, 4, 4),
    TmaConfig(128, 256, 128, 8, 4, 3, 1, True),
    TmaConfig(128, 128, 128, 8, 4, 4, 1, True),
    TmaConfig(128, 128, 128, 8, 4, 4, 2),
    TmaConfig(64, 256, 128, 8, 4, 4, 2),
    TmaConfig(64, 128, 128, 8, 4, 4, 1),
)
# int8: the int32 C tile is twice fp8's bf16 one, and a warp-specialized tile must store it
# whole on Triton 3.6 (split 1): 128 x 256 x 4 B = 128 KiB of staging, so at 128 K x 3 stages
# (278,528 B) it does not fit sm_90's 232,448 B per block and the quick plan pruned it. Here
# it takes 64 K per stage, 4 stages deep (the same 96 KiB of A and B in flight as 128 K x 2,
# in finer steps): 98,304 + 131,072 + 1,024 = 230,400 B. It is second, so a quick run (the
# first three that fit) tunes over it; the plain pipelines store C in halves or quarters.
# (Its C in halves would free 64 KiB for 6 stages: Triton 3.9 compiles that, 213,784 B, but
# 3.6's warp-specialization pass still fails on the split epilogue, so C stays whole.)
CONFIGS_INT8 = (CONFIGS_8BIT[0], TmaConfig(128, 256, 64, 8, 4, 4, 1, True), CONFIGS_8BIT[1], *CONFIGS_8BIT[3:])
CONFIGS = {"fp16": CONFIGS_16BIT, "bf16": CONFIGS_16BIT,
           "fp8e4m3": CONFIGS_8BIT, "fp8e5m2": CONFIGS_8BIT, "int8": CONFIGS_INT8}
PRECISIONS = tuple(CONFIGS)

INTERPRETER_CONFIG = TmaConfig(64, 64, 32, 4, 4, 1, 2)
INTERPRETER_PROGRAMS = 3  # persistent programs under the interpreter: several tiles each


def candidates(precision: str) -> tuple:
    """Return the TMA GEMM's configurations for a precision ("bf16", "fp8e4m3", "int8", ...), best first."""
    return CONFIGS[precision]


def smem_bytes(config: TmaConfig, element_bytes: int, out_bytes: int, cc: int | None = None) -> int:
    """Return the shared memory of a configuration: num_stages buffers of the A and B tiles
    ((BLOCK_M + BLOCK_N) x BLOCK_K x input width), plus the staging buffer of one C slice
    (BLOCK_M x BLOCK_N / SPLIT_C x output width) that the TMA store reads, plus 1 KiB for
    the pipeline's barriers and the compiler's alignment. Blackwell (cc >= 100, and an
    unknown arch, cc None) may add half a slice more (the accumulator's move out of tensor
    memory is staged for some tiles): counted always. Never below the compiler's own
    figure on sm_90 and sm_100 with Triton 3.6 and 3.9 (tests/test_aot.py checks sm_90)."""
    pipeline = config.num_stages * (config.block_m + config.block_n) * config.block_k * element_bytes
    staged_c = config.block_m * (config.block_n // config.split_c) * out_bytes
    if cc is None or cc >= 100:
        staged_c += staged_c // 2
    return pipeline + staged_c + 1024


def tma_reason(a, b_nk, c) -> str | None:
    """Return why TMA descriptors cannot address these tensors (rows must be contiguous,
    with 16-byte-aligned starts and row strides), or None when they can."""
    for name, t in (("A", a), ("B", b_nk), ("C", c)):
        if t.dim() != 2 or t.stride(1) != 1:
            return f"TMA needs {name} with contiguous rows (stride {tuple(t.stride())})"
        if (t.stride(0) * t.element_size()) % 16:
            return (f"TMA needs 16-byte row strides: {name}'s rows are {t.stride(0) * t.element_size()} bytes "
                    f"(K x input width and N x output width must be multiples of 16)")
        if t.device.type != "meta" and t.data_ptr() % 16:
            return f"TMA needs {name} to start on a 16-byte boundary"
    return None


@triton.jit
def _tile_coords(tile, per_group, grid_m, GROUP_M: tl.constexpr):
    # grouped order: GROUP_M row-blocks down a column of C, then the next column
    first_m = (tile // per_group) * GROUP_M
    rows = tl.minimum(grid_m - first_m, GROUP_M)
    return first_m + (tile % per_group) % rows, (tile % per_group) // rows


@triton.jit
def tma_matmul_kernel(a_ptr,  # (M, K) row-major
                      b_ptr,  # (N, K) row-major: C = A @ B^T
                      c_ptr,  # (M, N) row-major output
                      scale_ptr,  # two fp32 scalars (scale_a, scale_b); read only when HAS_SCALE
                      M, N, K,
                      stride_am, stride_bn, stride_cm,  # row strides in elements (16-byte multiples)
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                      GROUP_M: tl.constexpr,
                      SPLIT_C: tl.constexpr,  # C stored in SPLIT_C column slices (1, 2 or 4)
                      INT_ACC: tl.constexpr,  # int8 inputs: int32 accumulation
                      HAS_SCALE: tl.constexpr,
                      WARP_SPECIALIZE: tl.constexpr):
    start = tl.program_id(0)
    programs = tl.num_programs(0)
    grid_m = tl.cdiv(M, BLOCK_M)
    grid_n = tl.cdiv(N, BLOCK_N)
    tiles = grid_m * grid_n
    k_steps = tl.cdiv(K, BLOCK_K)
    per_group = GROUP_M * grid_n
    SLICE_N: tl.constexpr = BLOCK_N // SPLIT_C
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[stride_am, 1], block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[stride_bn, 1], block_shape=[BLOCK_N, BLOCK_K])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[stride_cm, 1], block_shape=[BLOCK_M, SLICE_N])
    if HAS_SCALE:
        scale = tl.load(scale_ptr) * tl.load(scale_ptr + 1)
    # The epilogue recomputes its tile from a counter of its own: the flattened pipeline
    # then carries no value from the loads' stage into the stores' stage.
    tile_c = start - programs
    # Hopper's warp specialization does not combine with a flattened loop nest
    for tile in tl.range(start, tiles, programs, flatten=not WARP_SPECIALIZE, warp_specialize=WARP_SPECIALIZE):
        pid_m, pid_n = _tile_coords(tile, per_group, grid_m, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        if INT_ACC:
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32)
        else:
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kk in range(k_steps):
            a = a_desc.load([off_m, kk * BLOCK_K])
            b = b_desc.load([off_n, kk * BLOCK_K])
            if INT_ACC:
                acc = tl.dot(a, b.T, acc, out_dtype=tl.int32)
            else:
                acc = tl.dot(a, b.T, acc)
        tile_c += programs
        pid_m, pid_n = _tile_coords(tile_c, per_group, grid_m, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        if HAS_SCALE:
            acc = acc * scale
        out = acc.to(c_ptr.dtype.element_ty)
        if SPLIT_C == 1:
            c_desc.store([off_m, off_n], out)
        elif SPLIT_C == 2:
            lo, hi = tl.split(tl.permute(tl.reshape(out, (BLOCK_M, 2, SLICE_N)), (0, 2, 1)))
            c_desc.store([off_m, off_n], lo)
            c_desc.store([off_m, off_n + SLICE_N], hi)
        else:
            # quarters: halves of the halves (column order 0, 1 | 2, 3)
            h0, h1 = tl.split(tl.permute(tl.reshape(out, (BLOCK_M, 2, 2 * SLICE_N)), (0, 2, 1)))
            q0, q1 = tl.split(tl.permute(tl.reshape(h0, (BLOCK_M, 2, SLICE_N)), (0, 2, 1)))
            c_desc.store([off_m, off_n], q0)
            c_desc.store([off_m, off_n + SLICE_N], q1)
            q2, q3 = tl.split(tl.permute(tl.reshape(h1, (BLOCK_M, 2, SLICE_N)), (0, 2, 1)))
            c_desc.store([off_m, off_n + 2 * SLICE_N], q2)
            c_desc.store([off_m, off_n + 3 * SLICE_N], q3)


# ---- host side ----------------------------------------------------------------------------

_SCRATCH: dict = {}  # device -> one byte buffer for the descriptors' records, grown as needed


def _scratch(size: int, alignment: int, device) -> torch.Tensor:
    key = str(device)
    buf = _SCRATCH.get(key)
    if buf is None or buf.numel() < size + alignment:
        buf = torch.empty(max(size + alignment, 1 << 16), dtype=torch.uint8, device=device)
        _SCRATCH[key] = buf
    skip = (-buf.data_ptr()) % alignment
    return buf[skip:skip + size]


@contextlib.contextmanager
def descriptor_allocator(device):
    """Let kernels launched inside make device-side descriptors: Triton asks an allocator
    for their global scratch at launch. Served from one cached buffer per device (no
    allocation per call, the same address in a CUDA graph's replays); the allocator in
    force before is restored on exit (it is a context variable in Triton 3.6 to 3.9)."""
    from triton.runtime import _allocation  # deferred: Triton is optional, and this API moves between its versions
    var = getattr(_allocation, "_allocator", None)
    alloc = lambda size, alignment, stream: _scratch(size, alignment, device)  # noqa: E731
    if var is not None and hasattr(var, "reset"):
        token = var.set(alloc)
        try:
            yield
        finally:
            var.reset(token)
    else:  # an unknown layout of Triton's internals: set it for good
        triton.set_allocator(alloc)
        yield


def programs(device, tiles: int, sms: int | None = None) -> int:
    """Return the persistent grid: one program per SM (sms, else the device's count; a few
    under the interpreter), never more than the tiles."""
    if sms is None:
        sms = (torch.cuda.get_device_properties(device).multi_processor_count
               if torch.device(device).type == "cuda" else INTERPRETER_PROGRAMS)
    return max(1, min(sms, tiles))


def matmul(a, b_nk, c, config: TmaConfig = INTERPRETER_CONFIG, scales=None, sms: int | None = None):
    """Return c after c = scales[0] * scales[1] * (a @ b_nk^T), or c = a @ b_nk^T when scales is None.

    a: (M, K), b_nk: (N, K), c: (M, N) preallocated in the output dtype; scales: a 2-element
    fp32 tensor (fp8 inputs); sms: the persistent grid size (default: the device's SMs).
    Raises ValueError when TMA cannot address the tensors (tma_reason)."""
    M, K = a.shape
    N, K2 = b_nk.shape
    assert K == K2 and c.shape == (M, N), f"shapes {tuple(a.shape)} @ {tuple(b_nk.shape)}^T -> {tuple(c.shape)}"
    assert config.block_n % config.split_c == 0
    why = tma_reason(a, b_nk, c)
    if why:
        raise ValueError(why)
    tiles = triton.cdiv(M, config.block_m) * triton.cdiv(N, config.block_n)
    grid = (programs(a.device, tiles, sms),)
    with descriptor_allocator(a.device):
        tma_matmul_kernel[grid](
            a, b_nk, c, scales if scales is not None else c, M, N, K, a.stride(0), b_nk.stride(0), c.stride(0),
            BLOCK_M=config.block_m, BLOCK_N=config.block_n, BLOCK_K=config.block_k, GROUP_M=config.group_m,
            SPLIT_C=config.split_c, INT_ACC=a.dtype == torch.int8, HAS_SCALE=scales is not None,
            WARP_SPECIALIZE=config.warp_specialize, num_warps=config.num_warps, num_stages=config.num_stages)
    return c
