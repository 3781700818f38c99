"""Triton decode GEMV kernels: y = x @ W^T with W stored (N, K) as a linear layer stores it,
in 16-bit or quantized weight-only formats, dequantized inside the kernel.

Pure compute: no timing, no files, no printing.

Weight formats (FMT, a constexpr):
    FMT_DENSE  W is fp16/bf16 (N, K)
    FMT_INT8   W is int8 (N, K); w[n, k] = q[n, k] * scale[n]           (per output channel)
    FMT_FP8    W is fp8 e4m3 (N, K); w[n, k] = q[n, k] * scale[n]       (per output channel)
    FMT_INT4   W is uint8 (N, K/2), two values per byte along K: the low nibble holds
               even k, the high nibble odd k, each an unsigned 4-bit u with value u - 8;
               w[n, k] = (u - 8) * scale[n, k // G]                      (group-wise along K)
Shapes: x (B, K) and y (B, N) in fp16 or bf16; scale fp32, (N,) or (N, K // G).

Two kernels, each reading every weight byte exactly once:
    gemv_rows_kernel  batch 1: each program owns BLOCK_N rows and one of SPLIT_K slices of
                      K, multiply-adds in fp32 on CUDA cores; with SPLIT_K > 1 the partial
                      sums meet in an fp32 workspace through atomics.
    gemv_tile_kernel  small batch (B <= 256): a (BLOCK_B x BLOCK_K) activation tile times a
                      dequantized (BLOCK_K x BLOCK_N) weight tile on tensor cores (tl.dot),
                      with all B rows in one tile so no weight is read twice.

Offsets: a weight row's offset n x stride_wn is 64-bit (an LM head of 128,256 x 16,384 has
more than 2**31 weights); the others are bounded far below 2**31 (B <= 256 rows of x and y,
N scale rows of K/128 groups) and stay 32-bit.
"""
import torch
import triton
import triton.language as tl

FMT_DENSE, FMT_INT8, FMT_FP8, FMT_INT4 = 0, 1, 2, 3

# Configurations to tune over on a GPU, best guesses first (a quick run times the first
# three that fit the GPU's shared memory). None spills on sm_80 or sm_90 (Triton 3.6 and
# 3.9; `python -m bench.aot` compiles them all and shows registers and spills).
#
# gemv_rows (BLOCK_N, BLOCK_K, SPLIT_K): batch 1 is memory-bound, so each program streams a
# few rows with wide K steps (8 to 16 KiB of weights per step keeps enough bytes in flight),
# and split-K only where N alone gives too few programs.
ROW_CANDIDATES = ((8, 512, 1), (16, 512, 1), (8, 1024, 2), (4, 1024, 1), (16, 256, 1), (8, 512, 2),
                  (16, 1024, 1), (4, 512, 2), (8, 256, 4), (16, 512, 4), (8, 1024, 1), (4, 1024, 4),
                  (16, 256, 2), (8, 512, 8), (4, 256, 8))
# gemv_tile (BLOCK_N, BLOCK_K), by weight kind and the largest BLOCK_B the list serves. There
# is no split-K, so up to 32 rows (memory-bound) narrow N tiles keep every SM busy (N / BLOCK_N
# programs) and deep K steps keep bytes in flight; 64 rows and more reuse each weight tile
# more, and the activation tile (BLOCK_B x BLOCK_K) sets shared memory and registers. int4
# unpacks into two dots per step, so its tiles are shallower (deeper ones spill).
TILE_CANDIDATES = {
    ("dense", 32): ((16, 256), (32, 128), (16, 128), (64, 128), (64, 64), (32, 64), (16, 64), (128, 128)),
    ("dense", 256): ((64, 64), (32, 128), (32, 64), (16, 128), (16, 256), (16, 64)),
    ("int4", 32): ((32, 128), (16, 128), (64, 64), (32, 64), (64, 128), (16, 64), (128, 64)),
    ("int4", 128): ((32, 64), (16, 64), (64, 64), (16, 128)),
    ("int4", 256): ((32, 64), (16, 64)),
}
# Tried only when none of the above fits the GPU's shared memory (AMD's 64 KiB of LDS at
# batch 256): narrow N and K.
TILE_FALLBACK = ((16, 64), (16, 32), (32, 32))


@triton.jit
def _dequant(w, s, FMT: tl.constexpr):
    """Return the fp32 weights of a loaded tile: w * s for int8/fp8 (s per row), w for dense."""
    if FMT == 1 or FMT == 2:
        return w.to(tl.float32) * s
    return w.to(tl.float32)


@triton.jit
def gemv_rows_kernel(x_ptr,  # (K,) activations, fp16/bf16
                     w_ptr,  # (N, K) weights, or (N, K/2) packed int4
                     s_ptr,  # scales: (N,) for int8/fp8, (N, K/G) for int4; unused for dense
                     y_ptr,  # (N,) output in x's dtype (SPLIT_K == 1) or fp32 workspace (SPLIT_K > 1)
                     N, K,  # problem size
                     stride_wn,  # elements (bytes for int4) between weight rows
                     stride_sn,  # scale elements between rows (int4: K/G)
                     FMT: tl.constexpr, GROUP: tl.constexpr,  # weight format; int4 group size along K
                     BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr):
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    rows = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok = rows < N
    w_rows = w_ptr + rows[:, None].to(tl.int64) * stride_wn
    k_per_split = tl.cdiv(tl.cdiv(K, SPLIT_K), BLOCK_K) * BLOCK_K
    k_begin = pid_k * k_per_split
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    if FMT == 3:
        HALF: tl.constexpr = BLOCK_K // 2
        for k0 in range(k_begin, tl.minimum(k_begin + k_per_split, K), BLOCK_K):
            j = k0 // 2 + tl.arange(0, HALF)  # byte index along the packed row
            ok = 2 * j < K
            packed = tl.load(w_rows + j[None, :], mask=row_ok[:, None] & ok[None, :], other=0).to(tl.int32)
            s = tl.load(s_ptr + rows[:, None] * stride_sn + (2 * j[None, :]) // GROUP,
                        mask=row_ok[:, None] & ok[None, :], other=0.0)
            x_even = tl.load(x_ptr + 2 * j, mask=ok, other=0.0).to(tl.float32)
            x_odd = tl.load(x_ptr + 2 * j + 1, mask=2 * j + 1 < K, other=0.0).to(tl.float32)
            lo = ((packed & 0xF) - 8).to(tl.float32) * s
            hi = ((packed >> 4) - 8).to(tl.float32) * s
            acc += tl.sum(lo * x_even[None, :] + hi * x_odd[None, :], axis=1)
    else:
        if FMT == 1 or FMT == 2:
            s = tl.load(s_ptr + rows, mask=row_ok, other=0.0)[:, None]
        else:
            s = 1.0
        for k0 in range(k_begin, tl.minimum(k_begin + k_per_split, K), BLOCK_K):
            ks = k0 + tl.arange(0, BLOCK_K)
            ok = ks < K
            w = tl.load(w_rows + ks[None, :], mask=row_ok[:, None] & ok[None, :], other=0.0)
            x = tl.load(x_ptr + ks, mask=ok, other=0.0).to(tl.float32)
            acc += tl.sum(_dequant(w, s, FMT) * x[None, :], axis=1)
    if SPLIT_K == 1:
        tl.store(y_ptr + rows, acc.to(y_ptr.dtype.element_ty), mask=row_ok)
    else:
        tl.atomic_add(y_ptr + rows, acc, mask=row_ok)


@triton.jit
def gemv_tile_kernel(x_ptr,  # (B, K) activations, fp16/bf16
                     w_ptr,  # (N, K) weights, or (N, K/2) packed int4
                     s_ptr,  # scales as in gemv_rows_kernel
                     y_ptr,  # (B, N) output in x's dtype
                     B, N, K,  # problem size
                     stride_xb, stride_yb,  # elements between activation / output rows
                     stride_wn, stride_sn,  # as in gemv_rows_kernel
                     FMT: tl.constexpr, GROUP: tl.constexpr,
                     BLOCK_B: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_n = tl.program_id(0)
    bs = tl.arange(0, BLOCK_B)
    b_ok = bs < B
    rows = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok = rows < N
    w_rows = w_ptr + rows[None, :].to(tl.int64) * stride_wn  # a (1, BLOCK_N) row of pointers: W^T tiles
    x_rows = x_ptr + bs[:, None] * stride_xb
    acc = tl.zeros((BLOCK_B, BLOCK_N), dtype=tl.float32)
    cdt = x_ptr.dtype.element_ty
    if FMT == 3:
        HALF: tl.constexpr = BLOCK_K // 2
        for k0 in range(0, K, BLOCK_K):
            j = k0 // 2 + tl.arange(0, HALF)
            ok = 2 * j < K
            packed = tl.load(w_rows + j[:, None], mask=ok[:, None] & row_ok[None, :], other=0).to(tl.int32)
            s = tl.load(s_ptr + rows[None, :] * stride_sn + (2 * j[:, None]) // GROUP,
                        mask=ok[:, None] & row_ok[None, :], other=0.0)
            lo = (((packed & 0xF) - 8).to(tl.float32) * s).to(cdt)
            hi = (((packed >> 4) - 8).to(tl.float32) * s).to(cdt)
            x_even = tl.load(x_rows + 2 * j[None, :], mask=b_ok[:, None] & ok[None, :], other=0.0)
            x_odd = tl.load(x_rows + 2 * j[None, :] + 1, mask=b_ok[:, None] & (2 * j[None, :] + 1 < K), other=0.0)
            acc = tl.dot(x_even, lo, acc)
            acc = tl.dot(x_odd, hi, acc)
    else:
        for k0 in range(0, K, BLOCK_K):
            ks = k0 + tl.arange(0, BLOCK_K)
            ok = ks < K
            w = tl.load(w_rows + ks[:, None], mask=ok[:, None] & row_ok[None, :], other=0.0)
            x = tl.load(x_rows + ks[None, :], mask=b_ok[:, None] & ok[None, :], other=0.0)
            acc = tl.dot(x, w.to(cdt), acc)  # int8 and e4m3 are exact in fp16: scale after the sum
        if FMT == 1 or FMT == 2:
            acc = acc * tl.load(s_ptr + rows, mask=row_ok, other=0.0)[None, :]
    tl.store(y_ptr + bs[:, None] * stride_yb + rows[None, :], acc.to(y_ptr.dtype.element_ty),
             mask=b_ok[:, None] & row_ok[None, :])


def tile_smem_bytes(block_b, block_n, block_k, weight_bits, cc=None, num_stages=3):
    """Return the shared memory of gemv_tile_kernel (conservative: never below the
    compiler's figure): pipeline buffers of the activation tile (BLOCK_B x BLOCK_K, 16-bit)
    and the stored weight tile (BLOCK_K x BLOCK_N at weight_bits), plus one dequantized
    16-bit weight tile (the dot's operand). Hopper (cc >= 90) with BLOCK_B >= 64 (a
    warpgroup MMA) keeps num_stages buffers; Ampere and Ada, and Hopper's narrow tiles, keep
    num_stages - 1; cc None (unknown) assumes num_stages."""
    buffers = num_stages - 1 if cc is not None and (cc < 90 or block_b < 64) else num_stages
    stage = block_b * block_k * 2 + block_k * block_n * weight_bits // 8
    return max(1, buffers) * stage + block_k * block_n * 2


def tile_candidates(batch, weight_bits):
    """Return the (BLOCK_N, BLOCK_K) candidates of gemv_tile for a batch and weight width,
    best first."""
    block_b, _ = tile_config(batch)
    kind = "int4" if weight_bits == 4 else "dense"
    return next(TILE_CANDIDATES[(k, rows)] for (k, rows) in sorted(TILE_CANDIDATES)
                if k == kind and block_b <= rows)


def tile_config(batch):
    """Return (BLOCK_B, num_warps) of gemv_tile for a batch: every row in one tile of at
    least 16 (the smallest tensor-core tile), 8 warps past 64 rows."""
    block_b = max(16, triton.next_power_of_2(batch))
    return block_b, 4 if block_b <= 64 else 8


def _fmt_of(w, scale):
    if w.dtype == torch.uint8:
        return FMT_INT4
    if w.dtype == torch.int8:
        return FMT_INT8
    if w.dtype.is_floating_point and w.element_size() == 1:
        return FMT_FP8
    return FMT_DENSE


def gemv_rows(x, w, scale, y, group=128, block_n=8, block_k=512, split_k=1, workspace=None):
    """Return y (1, N) = x (1, K) @ dequant(w)^T with the batch-1 row kernel.

    split_k > 1 needs an fp32 workspace of N elements; it is zeroed here, the partial sums
    are added into it, and the result is cast into y.
    """
    N = w.shape[0]
    K = x.shape[-1]
    fmt = _fmt_of(w, scale)
    s = scale if scale is not None else y
    target = y if split_k == 1 else workspace
    if split_k > 1:
        workspace.zero_()
    grid = (triton.cdiv(N, block_n), split_k)
    gemv_rows_kernel[grid](x, w, s, target, N, K, w.stride(0), s.stride(0) if s.dim() == 2 else 1,
                           FMT=fmt, GROUP=group, BLOCK_N=block_n, BLOCK_K=block_k, SPLIT_K=split_k,
                           num_warps=4)
    if split_k > 1:
        y.copy_(workspace.view_as(y))
    return y


def gemv_tile(x, w, scale, y, group=128, block_n=64, block_k=64):
    """Return y (B, N) = x (B, K) @ dequant(w)^T with every batch row in one tile (B <= 256)."""
    B, K = x.shape
    N = w.shape[0]
    block_b, warps = tile_config(B)
    assert block_b <= 256, "gemv_tile holds the whole batch in one tile: B <= 256"
    fmt = _fmt_of(w, scale)
    s = scale if scale is not None else y
    grid = (triton.cdiv(N, block_n),)
    gemv_tile_kernel[grid](x, w, s, y, B, N, K, x.stride(0), y.stride(0), w.stride(0),
                           s.stride(0) if s.dim() == 2 else 1,
                           FMT=fmt, GROUP=group, BLOCK_B=block_b, BLOCK_N=block_n, BLOCK_K=block_k,
                           num_warps=warps)
    return y


def pack_int4(q):
    """Return (N, K/2) uint8 holding signed values q in [-8, 7] ((N, K) integers, K even):
    u = q + 8, the low nibble for even k, the high nibble for odd k."""
    u = (q.to(torch.int16) + 8).to(torch.uint8)
    return (u[:, 0::2] | (u[:, 1::2] << 4)).contiguous()


def unpack_int4(packed):
    """Return the (N, K) int8 values in [-8, 7] that pack_int4 packed."""
    lo = (packed & 0xF).to(torch.int8) - 8
    hi = (packed >> 4).to(torch.int8) - 8
    return torch.stack([lo, hi], dim=-1).reshape(packed.shape[0], -1)
