"""Bytes a Triton kernel moves at each level of the memory hierarchy, from its tiles.

A point's `bytes` is its compulsory traffic (ARCHITECTURE.md, rule 1): what crosses the
off-chip memory when every input is read once and every output written once. A tiled
kernel moves more than that through the levels inside: each program loads its own tiles
through L2, and the matrix units read their operands out of shared memory (L1) once per
warpgroup that uses them. These formulas give those bytes from the tile configuration the
impl chose, for the hierarchical roofline (each point drawn at each level's intensity,
FLOPs / level bytes, as Nsight Compute draws it; ARCHITECTURE.md, rule 12). They return the
measurements.csv columns (bench.results.TRAFFIC_COLUMNS) by name; an impl attaches them to
its callable as `fn.level_bytes`, and the runner writes them with the point.

w = input element size, w_o = output element size, ceil(x/y) written cdiv(x, y).

GEMM, C (M, N) = A (M, K) B (K, N), tiles BLOCK_M x BLOCK_N walking K:
    l2 = (M K cdiv(N, BLOCK_N) + N K cdiv(M, BLOCK_M)) w + M N w_o
         every program loads its BLOCK_M rows of A and BLOCK_N columns of B over all of K
         (masked edge tiles load only the rows that exist), and writes its tile of C once:
         about M N K (1/BLOCK_N + 1/BLOCK_M) w, the issue's formula, plus C
    l1 = (M K cdiv(N, BLOCK_N) + G N K cdiv(M, BLOCK_M)) w,  G = max(1, num_warps / 4)
         the operand reads from shared memory: the warps split a tile along M in warpgroups
         of 4 (Hopper's warpgroup MMA), each reading its own rows of A and all of the tile's
         B; the copies into shared memory are not counted

Attention prefill, per (batch, query head): programs of BLOCK_M query rows walk key blocks
of BLOCK_N; program i reads keys_i = min(S_k, cdiv(end_i, BLOCK_N) BLOCK_N) keys of K and
of V, end_i = S_k (non-causal) or min(S_k, (i + 1) BLOCK_M) (causal: it stops at its
diagonal block):
    l2 = B Hq (2 D sum_i keys_i + 2 S D) w        (K and V per program; q read, o written once)
    l1 = B Hq (2 D G sum_i keys_i + S D) w,  G = max(1, num_warps / 4)
         (the K and V tiles read from shared memory by each warpgroup; q once)
Non-causal with S_q = S_k = S: l2 ~ 2 B Hq S D w (S / BLOCK_M + 1), so 4 B Hq S^2 D FLOPs
over it is about 2 BLOCK_M / w FLOP per byte (64 for 64-row bf16 tiles).

Attention decode (split-KV): each program reads its chunk of the KV cache once (every
query head of its KV head in one tile), the query heads once per split, and writes fp32
partials (max, sum, D values) that the combine kernel reads back:
    l2 = (2 B Hkv L D + B Hq D SPLITS + B Hq D) w + 2 x 4 B Hq SPLITS (D + 2)
No shared-memory re-read: l1 is not given.

GEMV, y (B, N) = x (B, K) W^T, weights W_bytes at their stored width (with scales):
    tile kernel (whole batch in one tile, programs over BLOCK_N rows of W):
        l2 = W_bytes + 2 B K cdiv(N, BLOCK_N) + 2 B N
    row kernel (batch 1, BLOCK_N rows, SPLIT_K slices of K):
        l2 = W_bytes + 2 K cdiv(N, BLOCK_N) + 2 N                          (SPLIT_K = 1)
        l2 = W_bytes + 2 K cdiv(N, BLOCK_N) + 4 N (1 + SPLIT_K + 1) + 2 N  (SPLIT_K > 1: the fp32
             workspace zeroed, SPLIT_K atomic adds into it, read back and written as y)
No shared-memory re-read: l1 is not given.
"""
from __future__ import annotations

import math


def cdiv(a: int, b: int) -> int:
    return -(-int(a) // int(b))


def warpgroups(num_warps: int) -> int:
    """Return G = max(1, num_warps // 4): the warpgroups that each read a shared B (or K/V) tile."""
    return max(1, int(num_warps) // 4)


def gemm_level_bytes(m: int, n: int, k: int, w: int, w_out: int, block_m: int, block_n: int,
                     num_warps: int = 4) -> dict:
    """Return {"l2_bytes", "l1_bytes"} of a tiled GEMM (formulas in the module docstring)."""
    a_loads = m * k * cdiv(n, block_n)
    b_loads = n * k * cdiv(m, block_m)
    return {"l2_bytes": (a_loads + b_loads) * w + m * n * w_out,
            "l1_bytes": (a_loads + warpgroups(num_warps) * b_loads) * w}


def prefill_keys(s_q: int, s_k: int, block_m: int, block_n: int, causal: bool) -> int:
    """Return sum over a head's programs of the keys each loads (module docstring)."""
    total = 0
    for i in range(cdiv(s_q, block_m)):
        end = min(s_k, (i + 1) * block_m) if causal else s_k
        total += min(s_k, cdiv(end, block_n) * block_n)
    return total


def prefill_level_bytes(b: int, hq: int, s: int, d: int, w: int, block_m: int, block_n: int,
                        num_warps: int, causal: bool) -> dict:
    """Return {"l2_bytes", "l1_bytes"} of the prefill kernel, S_q = S_k = s."""
    keys = prefill_keys(s, s, block_m, block_n, causal)
    return {"l2_bytes": b * hq * (2 * d * keys + 2 * s * d) * w,
            "l1_bytes": b * hq * (2 * d * warpgroups(num_warps) * keys + s * d) * w}


def decode_level_bytes(b: int, hq: int, hkv: int, length: int, d: int, w: int, splits: int) -> dict:
    """Return {"l2_bytes"} of split-KV decode and its combine (module docstring)."""
    return {"l2_bytes": (2 * b * hkv * length * d + b * hq * d * splits + b * hq * d) * w
            + 2 * 4 * b * hq * splits * (d + 2)}


def gemv_tile_level_bytes(weight_bytes: int, b: int, n: int, k: int, block_n: int) -> dict:
    """Return {"l2_bytes"} of the GEMV tile kernel (16-bit activations and outputs)."""
    return {"l2_bytes": weight_bytes + 2 * b * k * cdiv(n, block_n) + 2 * b * n}


def gemv_rows_level_bytes(weight_bytes: int, n: int, k: int, block_n: int, split_k: int) -> dict:
    """Return {"l2_bytes"} of the batch-1 GEMV row kernel (with its split-K workspace)."""
    workspace = 4 * n * (split_k + 2) if split_k > 1 else 0
    return {"l2_bytes": weight_bytes + 2 * k * cdiv(n, block_n) + workspace + 2 * n}


def intensity(flops: float, nbytes) -> float:
    """Return flops / nbytes, NaN when the bytes are unknown or zero."""
    try:
        nb = float(nbytes)
    except (TypeError, ValueError):
        return math.nan
    return flops / nb if nb > 0 and nb == nb else math.nan
