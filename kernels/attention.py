"""Triton fused attention: prefill (a flash-attention forward) and decode (split-KV).

Pure compute: no timing, no files, no printing.

Layouts (last dimension contiguous): q (B, Hq, S_q, D); k, v (B, Hkv, S_k, D); o like q.
Grouped-query attention: query head h reads KV head h // (Hq // Hkv). The softmax scale is
1/sqrt(D). Offsets to a (batch, head) slice are 64-bit; offsets within one slice are 32-bit
(S x stride_s < 2**31 elements). Causal masking is top-left aligned (query i sees keys 0..i), for S_q == S_k.

prefill: each program owns BLOCK_M query rows of one (batch, head) and walks the key
blocks with an online softmax (running max and sum, rescaled as it goes), so the S x S
score matrix is never written to memory. Causal programs stop at their diagonal block, and
run longest first (a head's query blocks in reverse order). On sm_90+ (USE_TMA) Q, K, V and O
move through host-side tensor descriptors (prefill_descriptors, made once by the caller and
passed as arguments: no program builds one on the device). An unmasked key block scales its
scores and subtracts the running max in one FMA (the scale folded into log2(e)).

decode: one query token per sequence. The KV length is cut into SPLITS chunks, one program
per (batch, KV head, chunk), so even batch 1 fills the GPU; each program handles all the
query heads that share its KV head (one tensor-core tile), so K and V are read once. A
second kernel merges the chunks' partial (max, sum, weighted values).
"""
import math

import torch
import triton
import triton.language as tl

from kernels.gemm import LDS_ALL_STAGES  # AMD targets that keep every stage's LDS buffer, padded

LOG2E = 1.4426950408889634

# Configurations to tune over on a GPU, best guesses first (a quick run times the first
# three that fit the GPU's shared memory; `python -m bench.aot` compiles them all).
# prefill (BLOCK_M, BLOCK_N, num_warps, num_stages, tma), by the largest head dim a list
# serves. On sm_90+ the TMA forms come first: 128 query rows over 8 warps (two warp groups
# of the widest Hopper MMA per K/V tile read), Q, K, V and O through host-side descriptors, pipelined
# num_stages deep (ptxas for sm_90: 138-201 registers, no spills). Then the pointer-load
# forms, the only ones before sm_90: 64-row tiles for short sequences and Ampere. 128 rows
# on 4 warps spill at D = 128 (150 to 590 bytes per thread on sm_80 and sm_90), so only
# D <= 64 tries them; so does the pointer-load 128 x 128 tile (120 bytes on sm_80 with the
# edge blocks split out), which Hopper runs through TMA instead.
PREFILL_CANDIDATES = {
    64: ((128, 128, 8, 3, True), (128, 64, 8, 3, True), (128, 64, 4, 3, True),
         (128, 64, 8, 3, False), (128, 128, 8, 3, False), (64, 64, 4, 3, False), (64, 128, 4, 3, False),
         (128, 32, 4, 3, False), (128, 64, 4, 4, False)),
    256: ((128, 128, 8, 2, True), (128, 64, 8, 3, True), (64, 64, 4, 3, True), (128, 128, 8, 3, True),
          (128, 64, 8, 3, False), (64, 64, 4, 3, False), (64, 128, 4, 3, False)),
}
# No warp-specialized form (tl.range(..., warp_specialize=True)): on sm_90 Triton splits a
# 128-row tile on 4 warps between two consumer warp groups (a producer makes 12 warps), and
# the kernel's structure does not survive that on both stacks. The unmasked-then-masked pair
# of key loops fails in both 3.6 and 3.9 (a dominance assertion in the warp-specialization
# pass); with one masked loop, Q and O through pointers, 3.6 compiles it without spills (168
# registers, 65,696-246,048 B of shared memory) but 3.9 rejects the Q pointer load
# ("unsupported load type for producer commit") and a Q descriptor load (its 128-row block
# against the consumers' 64-row halves); 3.9 rejects 64-row tiles on 4 warps too. At 8 warps Triton
# keeps the plain pipeline on Hopper (kernels/gemm_tma.py), so a candidate there adds nothing.
# Tried only when none of the above fits the GPU's shared memory (AMD's 64 KiB of LDS at
# D = 128): 64 query rows, a single K/V buffer.
PREFILL_FALLBACK = ((64, 64, 4, 2, False), (64, 32, 4, 2, False))


# The kernels' tl.dot input_precision: exact fp32 products for fp32 inputs (the float64
# gate), and for 16-bit inputs, where the option does not apply, the one value every backend
# accepts (gfx950's compiler rejects "tf32": CDNA4 has no xf32 MMA).
DOT_PRECISION = "ieee"


def prefill_candidates(head_dim, cc=None, amd=False):
    """Return prefill's (BLOCK_M, BLOCK_N, num_warps, num_stages, tma) candidates for a head
    dim on a GPU of compute capability cc x 10 (None: unknown, all of them), best first:
    the TMA forms only from sm_90 on, and only where this Triton has tensor descriptors. On
    AMD (amd) no 128-wide key block: with buffer loads the causal kernel's 128-wide score
    tiles spill on gfx950 (176 B at 128x128 on 8 waves, 352 B at 64x128 on 4)."""
    cands = next(PREFILL_CANDIDATES[d] for d in sorted(PREFILL_CANDIDATES) if head_dim <= d)
    if (cc is not None and cc < 90) or not hasattr(tl, "make_tensor_descriptor"):
        cands = tuple(c for c in cands if not c[4])
    if amd:
        cands = tuple(c for c in cands if c[1] <= 64)
    return cands


# decode (BLOCK_N, num_warps, split factor): the factor multiplies decode_splits' chunk count
# (host-side only: the candidates that differ only in it share one compile). Decode streams
# the KV cache, so 64-key tiles on 4 warps first, then deeper tiles and twice the chunks.
DECODE_CANDIDATES = ((64, 4, 1), (128, 8, 1), (64, 4, 2), (32, 4, 1), (128, 4, 1), (64, 8, 1), (128, 8, 2),
                     (32, 4, 2), (64, 8, 2), (32, 8, 1), (128, 4, 2), (32, 8, 2))


@triton.jit
def _prefill_blocks(acc, l_i, m_i, q, rows, lo, hi, qk_scale,
                    k_src, v_src, b, hk, sks, svs, S_K,
                    D: tl.constexpr, BLOCK_N: tl.constexpr, MASKED: tl.constexpr, CAUSAL: tl.constexpr,
                    USE_TMA: tl.constexpr, PRECISION: tl.constexpr):
    # The online softmax over key blocks lo, lo + BLOCK_N, ... < hi. MASKED blocks are the
    # edge ones (the diagonal when causal, the partial last block): scores of keys past
    # S_K, or past the query's position when causal, become -inf there; the others take
    # no mask at all. Each block has a key below S_K that the row may see, so no row of
    # a block is all -inf after the first block (its running max stays finite).
    # k_src, v_src: the (batch, KV head) slices' base pointers, or (USE_TMA) host-made 4-D
    # tensor descriptors of all of k and v. qk_scale is the softmax scale times log2(e):
    # the scores are taken in base 2, and an unmasked block scales them and subtracts the
    # running max in one FMA (s x qk_scale - m), as max(s) x qk_scale is max(s x qk_scale).
    dims = tl.arange(0, D)
    for start in tl.range(lo, hi, BLOCK_N):  # pipelined num_stages deep (the launch option)
        cols = start + tl.arange(0, BLOCK_N)
        if USE_TMA:
            # keys past S_K come back as zeros (the descriptor's bounds), then are masked
            k = tl.reshape(k_src.load([b, hk, start, 0]), (BLOCK_N, D))
            s = tl.dot(q, tl.trans(k), input_precision=PRECISION)
        else:
            if MASKED:
                k = tl.load(k_src + cols[None, :] * sks + dims[:, None], mask=cols[None, :] < S_K, other=0.0)
            else:
                k = tl.load(k_src + cols[None, :] * sks + dims[:, None])  # (D, BLOCK_N)
            s = tl.dot(q, k, input_precision=PRECISION)
        if MASKED:
            keep = cols[None, :] < S_K
            if CAUSAL:
                keep = keep & (rows[:, None] >= cols[None, :])
            s = tl.where(keep, s * qk_scale, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1))
            p = tl.math.exp2(s - m_new[:, None])
        else:
            m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
            p = tl.math.exp2(s * qk_scale - m_new[:, None])  # one FMA per score
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        if USE_TMA:
            v = tl.reshape(v_src.load([b, hk, start, 0]), (BLOCK_N, D))
        else:
            if MASKED:
                v = tl.load(v_src + cols[:, None] * svs + dims[None, :], mask=cols[:, None] < S_K, other=0.0)
            else:
                v = tl.load(v_src + cols[:, None] * svs + dims[None, :])
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None], input_precision=PRECISION)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def attn_fwd_kernel(q_ptr, k_ptr, v_ptr, o_ptr,  # (B, H, S, D) tensors (k and v have Hkv heads), or
                    # (USE_TMA) host-made 4-D tensor descriptors of them: q and o in (1, 1, BLOCK_M, D)
                    # blocks, k and v in (1, 1, BLOCK_N, D) blocks
                    qk_scale,  # softmax scale x log2(e): scores are taken in base 2
                    S_Q, S_K, H_Q, GROUP,  # sequence lengths, query heads, query heads per KV head
                    sqb, sqh, sqs,  # q strides (batch, head, sequence); unused with USE_TMA
                    skb, skh, sks,  # k strides
                    svb, svh, svs,  # v strides
                    sob, soh, sos,  # o strides
                    D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    CAUSAL: tl.constexpr, PRECISION: tl.constexpr,
                    USE_TMA: tl.constexpr = False):  # sm_90+: tiles through tensor descriptors
    # Causal programs run longest first: the query blocks of a head are taken in reverse, so
    # the blocks nearest the end (the most key blocks to walk) start first and the short
    # ones fill in behind them, instead of a long block starting last and running alone.
    if CAUSAL:
        pid_m = tl.num_programs(0) - 1 - tl.program_id(0)
    else:
        pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    # 64-bit (batch, head) offsets: b x stride_b passes 2**31 elements in large batches
    # (batch 64 x 8 KV heads x 65,536 keys x 128 dims is 2**32); offsets inside one
    # (batch, head) slice stay 32-bit
    b = (bh // H_Q).to(tl.int64)
    h = (bh % H_Q).to(tl.int64)
    hk = h // GROUP
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, D)
    # (descriptor coordinates are 32-bit: batch and KV head as such)
    b32 = bh // H_Q
    hk32 = (bh % H_Q) // GROUP
    if USE_TMA:
        # 4-D descriptors: a block never crosses into the next head, rows past S read as
        # zeros and stores past S_Q are clipped (no masks)
        q = tl.reshape(q_ptr.load([b32, bh % H_Q, pid_m * BLOCK_M, 0]), (BLOCK_M, D))
        k_src = k_ptr
        v_src = v_ptr
    else:
        k_src = k_ptr + b * skb + hk * skh
        v_src = v_ptr + b * svb + hk * svh
        q = tl.load(q_ptr + b * sqb + h * sqh + rows[:, None] * sqs + dims[None, :], mask=rows[:, None] < S_Q,
                    other=0.0)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    # Two stages: the key blocks every row sees whole, unmasked (all of them but a partial
    # last one; when causal, those left of this tile's diagonal), then the edge blocks,
    # masked (the partial last one; when causal, the diagonal's up to the tile's last row).
    if CAUSAL:
        edge_lo = (pid_m * BLOCK_M) // BLOCK_N * BLOCK_N
        edge_hi = tl.minimum(S_K, (pid_m + 1) * BLOCK_M)
    else:
        edge_lo = S_K // BLOCK_N * BLOCK_N
        edge_hi = S_K
    acc, l_i, m_i = _prefill_blocks(acc, l_i, m_i, q, rows, 0, edge_lo, qk_scale, k_src, v_src,
                                    b32, hk32, sks, svs, S_K, D, BLOCK_N, False, CAUSAL, USE_TMA, PRECISION)
    acc, l_i, m_i = _prefill_blocks(acc, l_i, m_i, q, rows, edge_lo, edge_hi, qk_scale, k_src, v_src,
                                    b32, hk32, sks, svs, S_K, D, BLOCK_N, True, CAUSAL, USE_TMA, PRECISION)
    if USE_TMA:
        out = (acc / l_i[:, None]).to(o_ptr.dtype)
        o_ptr.store([b32, bh % H_Q, pid_m * BLOCK_M, 0], tl.reshape(out, (1, 1, BLOCK_M, D)))
    else:
        out = (acc / l_i[:, None]).to(o_ptr.dtype.element_ty)
        tl.store(o_ptr + b * sob + h * soh + rows[:, None] * sos + dims[None, :], out, mask=rows[:, None] < S_Q)


def _buffers(num_stages, rows, cc):
    # Hopper (cc >= 90) with at least 64 rows per tile (a warpgroup MMA) keeps num_stages
    # buffers of each pipelined load; Ampere and Ada, and Hopper's narrow tiles, keep
    # num_stages - 1; an unknown arch (cc None) is assumed to keep num_stages
    return num_stages - 1 if cc is not None and (cc < 90 or rows < 64) else num_stages


def prefill_smem_bytes(block_m, block_n, head_dim, element_bytes, num_stages, cc=None, tma=False, gfx=None):
    """Return the shared memory of attn_fwd_kernel (never below the compiler's figure): the
    pipeline buffers of the K and V tiles (BLOCK_N x D each) and the Q tile (BLOCK_M x D),
    plus, off the warpgroup-MMA path when D > BLOCK_M (the second dot then spreads its
    warps along D, so P is reshaped through shared memory), the P tile (BLOCK_M x BLOCK_N).
    The TMA form (sm_90+) keeps num_stages K/V buffers and adds 1 KiB of barriers; its O
    store reuses the Q tile's buffer. An AMD gfx in LDS_ALL_STAGES (gfx950) keeps num_stages
    K/V buffers, the Q tile and a P tile, padded: counted x 17/16, an upper bound of its
    compiler's figures (59,184-134,832 B compiled, 69,632-156,672 modelled; the D128 64x128 tile's
    220,592 B, modelled 243,712, is pruned against 160 KiB)."""
    if gfx in LDS_ALL_STAGES:
        tiles = num_stages * 2 * block_n * head_dim + block_m * head_dim + block_m * block_n
        return tiles * element_bytes * 17 // 16
    if tma:
        return (num_stages * 2 * block_n * head_dim + block_m * head_dim) * element_bytes + 1024
    p = block_m * block_n if _buffers(2, block_m, cc) == 1 and head_dim > block_m else 0
    # Blackwell (cc >= 100, triton 3.9): the tcgen05 MMAs' barriers (32 B) and, on 8 warps, a
    # row-statistics exchange between the two warpgroups (4 B per query row): counted always
    blackwell = 32 + 4 * block_m if cc is not None and cc >= 100 else 0
    tiles = _buffers(num_stages, block_m, cc) * 2 * block_n * head_dim + block_m * head_dim + p
    return tiles * element_bytes + blackwell


DECODE_STAGES = 3  # decode_split_kernel is launched with Triton's default pipeline depth


def decode_smem_bytes(block_h, block_n, head_dim, element_bytes, cc=None, num_stages=DECODE_STAGES):
    """Return the shared memory of decode_split_kernel (never below the compiler's figure):
    the pipeline buffers of the K and V tiles (BLOCK_N x D each), the query heads' tile
    (BLOCK_H x D) and the probabilities (BLOCK_H x BLOCK_N), reshaped for the second dot."""
    return (_buffers(num_stages, block_h, cc) * 2 * block_n * head_dim + block_h * head_dim
            + block_h * block_n) * element_bytes


def combine_smem_bytes(block_s, head_dim, num_warps=4):
    """Return the shared memory of decode_combine_kernel (never below the compiler's
    figure): the cross-warp scratch of its reductions over the chunks, D fp32 per warp."""
    return head_dim * num_warps * 4


def decode_block_h(group):
    """Return BLOCK_H, the query-head rows of decode's tile: a KV head's GROUP query heads,
    at least 16 (the smallest tensor-core tile)."""
    return max(16, triton.next_power_of_2(group))


def tma_ready(*tensors) -> bool:
    """Return True when TMA descriptors can address these (B, H, S, D) tensors: last
    dimension contiguous, other strides and starts 16-byte aligned."""
    for t in tensors:
        if t.stride(-1) != 1 or any((st * t.element_size()) % 16 for st in t.stride()[:-1]):
            return False
        if t.device.type != "meta" and t.data_ptr() % 16:
            return False
    return True


def prefill_descriptors(q, k, v, o, block_m, block_n):
    """Return host-side tensor descriptors of q, k, v and o for the TMA prefill: 4-D, q and o
    in (1, 1, block_m, D) blocks, k and v in (1, 1, block_n, D) blocks (ValueError when their
    strides do not allow it). Made once, outside the timed region: the kernel gets them as
    arguments, so no program builds a descriptor on the device."""
    from triton.tools.tensor_descriptor import TensorDescriptor  # deferred: Triton 3.4+ only (the TMA path)
    if not tma_ready(q, k, v, o):
        raise ValueError("TMA needs q, k, v and o with a contiguous last dimension and 16-byte-aligned strides")
    D = q.shape[-1]
    return tuple(TensorDescriptor(t, list(t.shape), list(t.stride()), [1, 1, rows, D])
                 for t, rows in ((q, block_m), (k, block_n), (v, block_n), (o, block_m)))


def prefill(q, k, v, o, causal=False, block_m=64, block_n=64, num_warps=4, num_stages=2, use_tma=False,
            descriptors=None):
    """Return o after o = softmax(q k^T / sqrt(D)) v (causal: query i sees keys 0..i).
    use_tma (sm_90+, or Triton 3.9's interpreter): Q, K, V and O move through host-side tensor
    descriptors, descriptors (from prefill_descriptors with the same blocks) or made here
    (ValueError when their strides do not allow it)."""
    B, Hq, S, D = q.shape
    Hkv, S_k = k.shape[1], k.shape[2]
    assert Hq % Hkv == 0 and D in (16, 32, 64, 128, 256)
    grid = (triton.cdiv(S, block_m), B * Hq)
    tensors = (q, k, v, o)
    if use_tma:
        tensors = descriptors or prefill_descriptors(q, k, v, o, block_m, block_n)
    attn_fwd_kernel[grid](*tensors, LOG2E / math.sqrt(D), S, S_k, Hq, Hq // Hkv,
                          q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
                          v.stride(0), v.stride(1), v.stride(2), o.stride(0), o.stride(1), o.stride(2),
                          D=D, BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=causal, PRECISION=DOT_PRECISION,
                          USE_TMA=use_tma, num_warps=num_warps, num_stages=num_stages)
    return o


@triton.jit
def decode_split_kernel(q_ptr,  # (B, Hq, D): one query token per sequence
                        k_ptr, v_ptr,  # (B, Hkv, L, D) KV cache
                        m_ptr, l_ptr,  # (B, Hq, SPLITS) fp32: running max (base 2) and sum per chunk
                        acc_ptr,  # (B, Hq, SPLITS, D) fp32: unnormalized weighted values per chunk
                        qk_scale, L, H_KV, GROUP, SPLITS, CHUNK,  # CHUNK: keys per split, a multiple of BLOCK_N
                        sqb, sqh, skb, skh, skl, svb, svh, svl,
                        D: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr, PRECISION: tl.constexpr):
    bhk = tl.program_id(0)
    split = tl.program_id(1)
    b = (bhk // H_KV).to(tl.int64)  # 64-bit (batch, head) offsets, as in attn_fwd_kernel
    hk = (bhk % H_KV).to(tl.int64)
    hs = tl.arange(0, BLOCK_H)
    h_ok = hs < GROUP
    heads = hk * GROUP + hs
    dims = tl.arange(0, D)
    q = tl.load(q_ptr + b * sqb + heads[:, None] * sqh + dims[None, :], mask=h_ok[:, None], other=0.0)
    k_base = k_ptr + b * skb + hk * skh
    v_base = v_ptr + b * svb + hk * svh
    m_i = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_H], tl.float32)
    acc = tl.zeros([BLOCK_H, D], tl.float32)
    lo = split * CHUNK
    hi = tl.minimum(L, lo + CHUNK)
    for start in range(lo, hi, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        ok = cols < hi
        k = tl.load(k_base + cols[None, :] * skl + dims[:, None], mask=ok[None, :], other=0.0)
        s = tl.dot(q, k, input_precision=PRECISION) * qk_scale
        s = tl.where(ok[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.math.exp2(s - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_base + cols[:, None] * svl + dims[None, :], mask=ok[:, None], other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None], input_precision=PRECISION)
        m_i = m_new
    part = (b * H_KV * GROUP + heads) * SPLITS + split
    tl.store(m_ptr + part, m_i, mask=h_ok)
    tl.store(l_ptr + part, l_i, mask=h_ok)
    tl.store(acc_ptr + part[:, None] * D + dims[None, :], acc, mask=h_ok[:, None])


@triton.jit
def decode_combine_kernel(m_ptr, l_ptr, acc_ptr,  # partials as written by decode_split_kernel
                          o_ptr,  # (B, Hq, D) output
                          SPLITS, soh,  # chunks per head; elements between output heads
                          D: tl.constexpr, BLOCK_S: tl.constexpr):
    bh = tl.program_id(0).to(tl.int64)  # flattened (batch, query head)
    ss = tl.arange(0, BLOCK_S)
    ok = ss < SPLITS
    dims = tl.arange(0, D)
    m = tl.load(m_ptr + bh * SPLITS + ss, mask=ok, other=float("-inf"))
    l_s = tl.load(l_ptr + bh * SPLITS + ss, mask=ok, other=0.0)  # each chunk's softmax row sum
    acc = tl.load(acc_ptr + (bh * SPLITS + ss[:, None]) * D + dims[None, :], mask=ok[:, None], other=0.0)
    w = tl.where(ok & (l_s > 0), tl.math.exp2(m - tl.max(m, 0)), 0.0)
    out = tl.sum(acc * w[:, None], 0) / tl.sum(l_s * w, 0)
    tl.store(o_ptr + bh * soh + dims, out.to(o_ptr.dtype.element_ty))


def sm_count(device):
    """Return the SM count of a CUDA device, or None for any other device."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return None


def decode_splits(batch, kv_heads, length, block_n, sms=None):
    """Return how many chunks to cut the KV length into: enough programs for about two per
    SM on a GPU of sms SMs (4 per (batch, KV head) without one, sms None), never more
    chunks than key blocks."""
    want = math.ceil(2 * sms / (batch * kv_heads)) if sms else 4
    return max(1, min(want, triton.cdiv(length, block_n)))


def decode_workspace(q, splits):
    """Return the fp32 partial buffers (m, l, acc) for decode with this many chunks."""
    B, Hq, D = q.shape
    return (torch.empty(B, Hq, splits, device=q.device), torch.empty(B, Hq, splits, device=q.device),
            torch.empty(B, Hq, splits, D, device=q.device))


def decode(q, k, v, o, workspace, block_n=64, num_warps=4):
    """Return o (B, Hq, D) after one-token attention of q (B, Hq, D) over the KV cache k, v
    (B, Hkv, L, D); workspace from decode_workspace fixes the number of chunks."""
    B, Hq, D = q.shape
    Hkv, L = k.shape[1], k.shape[2]
    group = Hq // Hkv
    m, l_s, acc = workspace
    splits = m.shape[-1]
    chunk = triton.cdiv(triton.cdiv(L, splits), block_n) * block_n
    decode_split_kernel[(B * Hkv, splits)](
        q, k, v, m, l_s, acc, LOG2E / math.sqrt(D), L, Hkv, group, splits, chunk,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), k.stride(2), v.stride(0), v.stride(1), v.stride(2),
        D=D, BLOCK_H=decode_block_h(group), BLOCK_N=block_n, PRECISION=DOT_PRECISION, num_warps=num_warps)
    decode_combine_kernel[(B * Hq,)](m, l_s, acc, o, splits, o.stride(1), D=D,
                                     BLOCK_S=max(2, triton.next_power_of_2(splits)))
    return o
