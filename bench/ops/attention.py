"""Attention family: fused prefill and split-KV decode, against SDPA.

attention.prefill  q, k, v of S tokens; causal or not; head dims 64 and 128; grouped-query
                   heads (Hkv <= Hq); the sequence swept from 512 up.
attention.decode   one query token per sequence over a KV cache of L tokens, batch 1 up.

Counts (w = element size; exp and the rest of the softmax are not counted as FLOPs, only
the two matrix products, 2 FLOPs per multiply-add):

    prefill flops = 4 B Hq S_q S_k D, halved when causal: the diagonal's entries count as
                    half, so causal is exactly half the non-causal work (FlashAttention's
                    convention; the S(S+1)/2 entries actually computed differ by 1/S)
    prefill bytes = (B Hq S D [q] + 2 B Hkv S D [k, v] + B Hq S D [o]) w, each read or written once
    decode flops  = 4 B Hq L D
    decode bytes  = (2 B Hkv L D [the KV cache, read once] + 2 B Hq D [q and o]) w
    written       = o: B Hq S D w (prefill), B Hq D w (decode); the rest is read

Every kernel is checked against a float64 reference, computed per KV head and in row chunks
so that it fits beside the largest shapes.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend

from bench.measure.inputs import tiled_normal
from bench.measure.registry import REGISTRY, Axis, Impl, Op
from bench.measure.tolerance import tolerance
from bench.ops._tune import Tuning, amd_gfx, compute_capability, run_tuning
from bench.ops.traffic import decode_level_bytes, prefill_level_bytes
from bench.util import itemsize

DTYPES = ("fp16", "bf16")
TORCH_DTYPE = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}
# softmax's P is rounded to the input type before the second product: one more rounding
# than a GEMM's, and the row sums of exp round too
ATTENTION_FACTOR = 4 / 3
TOLERANCE = {p: tolerance(p, ATTENTION_FACTOR) for p in TORCH_DTYPE}
REF_ROWS = 2048  # query rows per float64 reference chunk

# (B, Hq, Hkv) settings and sweeps per device kind: (quick, full)
PREFILL_HEADS = {"cpu": (((1, 8, 2),), ((1, 8, 2), (2, 8, 8))),
                 "cuda": (((1, 32, 8),), ((1, 32, 8), (4, 32, 8), (8, 16, 16)))}
# A GPU's full sweeps leave out S = 512 (4 GFLOP at batch 1: microseconds, the launch floor)
# and 8192 (between 4096 and 16384 on the tensor-core plateau), L = 1024 (a 4 MiB KV cache:
# the launch floor again) and 65536 (between 32768 and 131072 on the HBM plateau); and fp16,
# which runs at bf16's tensor-core rate and moves its bytes on every GPU here
# (ARCHITECTURE.md rule 15: a full H200 run fits ten minutes).
GPU_DTYPES = ("bf16",)
PREFILL_SEQ = {"cpu": ((512, 1024), (512, 1024, 2048)),
               "cuda": ((1024, 4096, 16384), (1024, 2048, 4096, 16384))}
PREFILL_D = {"cpu": ((128,), (64, 128)), "cuda": ((64, 128), (64, 128))}
DECODE_HEADS = (32, 8, 128)  # Hq, Hkv, D: a Llama-3-8B layer
DECODE_LEN = {"cpu": ((1024, 8192), (1024, 4096, 16384, 32768)),
              "cuda": ((4096, 32768, 131072), (4096, 16384, 32768, 131072))}
DECODE_BATCH = {"cpu": ((1, 8), (1, 4, 16)), "cuda": ((1, 16), (1, 4, 16, 64))}


def _dtypes(device, quick):
    return GPU_DTYPES if device.kind == "cuda" else DTYPES


def _by_device(table):
    return lambda device, quick: table[device.kind][0 if quick else 1]


def prefill_flops(b, hq, s, d, causal) -> int:
    """Return 4 B Hq S^2 D, halved when causal."""
    full = 4 * b * hq * s * s * d
    return full // 2 if causal else full


def prefill_bytes(b, hq, hkv, s, d, dtype) -> int:
    """Return (2 B Hq S D + 2 B Hkv S D) x element size: q and o, k and v."""
    return (2 * b * hq * s * d + 2 * b * hkv * s * d) * itemsize(dtype)


def output_bytes(b, hq, hkv, s, d, dtype) -> int:
    """Return B Hq S D x element size: o, the written part (S = 1 for decode)."""
    return b * hq * s * d * itemsize(dtype)


def decode_flops(b, hq, length, d) -> int:
    """Return 4 B Hq L D."""
    return 4 * b * hq * length * d


def decode_bytes(b, hq, hkv, length, d, dtype) -> int:
    """Return (2 B Hkv L D + 2 B Hq D) x element size: the KV cache, q and o."""
    return (2 * b * hkv * length * d + 2 * b * hq * d) * itemsize(dtype)


def reference(q, k, v, causal=False):
    """Return softmax(q k^T / sqrt(D)) v in float64; q (B, Hq, S_q, D), k and v (B, Hkv,
    S_k, D); causal is top-left aligned. Each KV head's k and v are widened once, for all
    the query heads of its group, whose rows are taken REF_ROWS at a time."""
    B, Hq, S, D = q.shape
    group = Hq // k.shape[1]
    out = torch.empty(q.shape, dtype=torch.float64, device=q.device)
    keys = torch.arange(k.shape[2], device=q.device)[None, :]
    for b in range(B):
        for g in range(k.shape[1]):
            kk, vv = k[b, g].double(), v[b, g].double()
            heads = slice(g * group, (g + 1) * group)
            qs = q[b, heads].reshape(group * S, D)   # the group's rows, head after head
            outs = out[b, heads].view(group * S, D)
            for r0 in range(0, group * S, REF_ROWS):
                s = qs[r0:r0 + REF_ROWS].double() @ kk.T / math.sqrt(D)
                if causal:
                    pos = torch.arange(r0, r0 + s.shape[0], device=q.device)[:, None] % S
                    s = s.masked_fill(keys > pos, float("-inf"))
                outs[r0:r0 + s.shape[0]] = torch.softmax(s, dim=-1) @ vv
    return out


def sdpa_backend(q, k, v, causal) -> str:
    """Return the name of the SDPA backend torch's dispatcher picks for these inputs."""
    try:
        choice = torch._fused_sdp_choice(q, k, v, None, 0.0, causal, enable_gqa=q.shape[1] != k.shape[1])
        return SDPBackend(choice).name.lower()
    except Exception as e:  # a private API: its absence must not stop the measurement
        return f"unknown ({type(e).__name__})"


def _qkv(b, hq, hkv, s_q, s_k, d, dtype, device):
    """Return q, k and v of normal values (bench/measure/inputs.py: tiled at copy speed, each
    operand its own seed, so no two heads or batches hold the same values)."""
    dt = TORCH_DTYPE[dtype]
    return (tiled_normal((b, hq, s_q, d), dt, device, seed=11),
            tiled_normal((b, hkv, s_k, d), dt, device, seed=12),
            tiled_normal((b, hkv, s_k, d), dt, device, seed=13))


# ---- prefill ----------------------------------------------------------------------------

def _prefill_dims(p):
    b, hq, hkv = p["heads"]
    return b, hq, hkv, p["seq"], p["head_dim"]


def prefill_inputs(p, device):
    b, hq, hkv, s, d = _prefill_dims(p)
    q, k, v = _qkv(b, hq, hkv, s, s, d, p["dtype"], device)
    return {"q": q, "k": k, "v": v, "o": torch.empty_like(q), "causal": p["causal"]}


INTERPRETER_PREFILL = (64, 64, 4, 1, False)


def _prefill_triton_call(x, cfg):
    """Return the call of one configuration; the TMA form's host-side descriptors are made
    here, once, outside the timed call (and passed to every launch)."""
    from kernels.attention import (  # deferred: kernels/ imports Triton, which is optional (Linux only)
        prefill,
        prefill_descriptors,
    )
    bm, bn, warps, stages, tma = cfg
    descs = prefill_descriptors(x["q"], x["k"], x["v"], x["o"], bm, bn) if tma else None
    return lambda: prefill(x["q"], x["k"], x["v"], x["o"], x["causal"], bm, bn, warps, stages, use_tma=tma,
                           descriptors=descs)


def _prefill_tuning(x, ctx=None) -> Tuning:
    from kernels.attention import (  # deferred: kernels/ imports Triton, which is optional (Linux only)
        PREFILL_FALLBACK,
        prefill_candidates,
        prefill_smem_bytes,
    )
    q = x["q"]
    d, w, cc = q.shape[-1], q.element_size(), compute_capability(ctx)
    key = ("prefill", q.dtype, tuple(q.shape), tuple(x["k"].shape), x["causal"])
    return Tuning(key, prefill_candidates(d, cc, amd=amd_gfx(ctx) is not None), INTERPRETER_PREFILL,
                  lambda c: _prefill_triton_call(x, c),
                  smem=lambda c: prefill_smem_bytes(c[0], c[1], d, w, c[3], cc, tma=c[4], gfx=amd_gfx(ctx)),
                  fallback=PREFILL_FALLBACK)


def _prefill_triton(x, ctx=None):
    fn, cfg = run_tuning(x["q"], _prefill_tuning(x, ctx), ctx)
    fn.detail = "blocks {}x{} warps {} stages {}".format(*cfg[:4]) + (", TMA" if cfg[4] else "")
    b, hq, s, d = x["q"].shape
    fn.level_bytes = prefill_level_bytes(b, hq, s, d, x["q"].element_size(), cfg[0], cfg[1], cfg[2], x["causal"])
    return fn


def _prefill_sdpa(x, ctx=None):
    q, k, v, causal = x["q"], x["k"], x["v"], x["causal"]
    gqa = q.shape[1] != k.shape[1]
    fn = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)  # noqa: E731
    fn.detail = "sdpa backend " + sdpa_backend(q, k, v, causal)
    return fn


REGISTRY.add_op(Op(
    name="attention.prefill", family="attention",
    doc="o = softmax(q k^T / sqrt(D)) v; flops = 4 B Hq S^2 D (halved causal), bytes = q + k + v + o",
    axes=(Axis("dtype", sweep=_dtypes, doc="fp16 or bf16 (a GPU: bf16)"),
          Axis("causal", (False, True)),
          Axis("head_dim", sweep=_by_device(PREFILL_D), doc="D"),
          Axis("heads", sweep=_by_device(PREFILL_HEADS), doc="(B, Hq, Hkv): batch, query heads, KV heads"),
          Axis("seq", sweep=_by_device(PREFILL_SEQ), doc="S = S_q = S_k")),
    make_inputs=prefill_inputs,
    reference=lambda x: reference(x["q"], x["k"], x["v"], x["causal"]),
    flops=lambda p: prefill_flops(*_prefill_dims(p)[:2], p["seq"], p["head_dim"], p["causal"]),
    bytes=lambda p: prefill_bytes(*_prefill_dims(p), p["dtype"]),
    write_bytes=lambda p: output_bytes(*_prefill_dims(p), p["dtype"]),
    working_set=lambda p: prefill_bytes(*_prefill_dims(p), p["dtype"]),
    describe=lambda p: (p["seq"], "B{}xH{}/{}xS{}xD{}".format(*_prefill_dims(p)) + ("-causal" if p["causal"] else "")),
    tolerance=lambda p: TOLERANCE[p["dtype"]],
    outputs=("o",), precision=lambda p: p["dtype"],
    memory_factor=3.0,  # the float64 output beside 16-bit q, k, v, o
    columns=lambda p: dict(zip(("batch", "heads_q", "heads_kv"), p["heads"])),
))
REGISTRY.add_impl(Impl("attention.prefill", "sdpa", "torch", _prefill_sdpa,
                       doc="torch scaled_dot_product_attention; the backend it picked is in the detail column"))
REGISTRY.add_impl(Impl("attention.prefill", "triton", "triton", _prefill_triton, tuning=_prefill_tuning,
                       doc="kernels/attention.py prefill: online softmax, unmasked main loop and masked edge "
                           "blocks, pipelined; Q, K, V and O through host-side TMA descriptors on sm_90+; "
                           "causal blocks longest first; blocks autotuned on a GPU"))


# ---- decode -----------------------------------------------------------------------------

def _decode_dims(p):
    hq, hkv, d = p.get("heads", DECODE_HEADS)  # a model's own heads, else a Llama-3-8B layer's
    return p["batch"], hq, hkv, p["length"], d


def decode_inputs(p, device):
    b, hq, hkv, length, d = _decode_dims(p)
    q, k, v = _qkv(b, hq, hkv, 1, length, d, p["dtype"], device)
    q = q[:, :, 0].contiguous()
    return {"q": q, "k": k, "v": v, "o": torch.empty_like(q)}


def decode_reference(x):
    return reference(x["q"][:, :, None], x["k"], x["v"])[:, :, 0]


INTERPRETER_DECODE = (64, 4, 1)


def _sms(x, ctx):
    """Return the SM count of the GPU the point runs on (the run's device, else the
    tensors'), or None on a CPU."""
    from kernels.attention import sm_count  # deferred: kernels/ imports Triton, which is optional (Linux only)
    device = getattr(ctx, "device", None)
    if getattr(device, "kind", None) == "cuda" and device.compute_units:
        return device.compute_units
    return sm_count(x["q"].device)


def _decode_triton_call(x, cfg, ctx=None):
    from kernels.attention import (  # deferred: kernels/ imports Triton, which is optional (Linux only)
        decode,
        decode_splits,
        decode_workspace,
    )
    bn, warps, factor = cfg
    b, _, _ = x["q"].shape
    splits = decode_splits(b, x["k"].shape[1], x["k"].shape[2], bn, _sms(x, ctx)) * factor
    ws = decode_workspace(x["q"], splits)
    fn = lambda: decode(x["q"], x["k"], x["v"], x["o"], ws, bn, warps)  # noqa: E731
    fn.splits = splits
    return fn


def _decode_tuning(x, ctx=None) -> Tuning:
    from kernels.attention import (  # deferred: kernels/ imports Triton, which is optional (Linux only)
        DECODE_CANDIDATES,
        decode_block_h,
        decode_smem_bytes,
    )
    q = x["q"]
    b, hq, d = q.shape
    block_h, w, cc = decode_block_h(hq // x["k"].shape[1]), q.element_size(), compute_capability(ctx)
    key = ("decode", q.dtype, tuple(q.shape), tuple(x["k"].shape))
    return Tuning(key, DECODE_CANDIDATES, INTERPRETER_DECODE, lambda c: _decode_triton_call(x, c, ctx),
                  smem=lambda c: decode_smem_bytes(block_h, c[0], d, w, cc))


def _decode_triton(x, ctx=None):
    fn, cfg = run_tuning(x["q"], _decode_tuning(x, ctx), ctx)
    fn.detail = f"block_n {cfg[0]} warps {cfg[1]} splits {fn.splits}"
    (b, hq, d), (_, hkv, length, _) = x["q"].shape, x["k"].shape
    fn.level_bytes = decode_level_bytes(b, hq, hkv, length, d, x["q"].element_size(), fn.splits)
    return fn


def _decode_sdpa(x, ctx=None):
    q, k, v = x["q"][:, :, None], x["k"], x["v"]
    fn = lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True)[:, :, 0]  # noqa: E731
    fn.detail = "sdpa backend " + sdpa_backend(q, k, v, False)
    return fn


def _decode_math(x, ctx=None):
    """Two batched matmuls around a softmax, the query heads of one KV head stacked as rows:
    K and V are read once, with no GQA copies (the obvious torch program, and on CPUs
    often faster than SDPA for a single query token)."""
    q, k, v, o = x["q"], x["k"], x["v"], x["o"]
    b, hq, d = q.shape
    hkv = k.shape[1]
    qg = q.view(b, hkv, hq // hkv, d)
    scale = 1 / math.sqrt(d)

    def fn():
        s = torch.matmul(qg, k.transpose(-1, -2)).float() * scale
        p = torch.softmax(s, dim=-1).to(q.dtype)
        return torch.matmul(p, v, out=o.view(b, hkv, hq // hkv, d)).view(b, hq, d)
    return fn


def _decode_columns(p):
    _, hq, hkv, _, d = _decode_dims(p)
    return {"heads_q": hq, "heads_kv": hkv, "head_dim": d}


REGISTRY.add_op(Op(
    name="attention.decode", family="attention",
    doc=f"one query token over an L-token KV cache, (Hq, Hkv, D) = {DECODE_HEADS}; "
        "flops = 4 B Hq L D, bytes = KV cache + q + o",
    axes=(Axis("dtype", sweep=_dtypes, doc="fp16 or bf16 (a GPU: bf16)"),
          Axis("length", sweep=_by_device(DECODE_LEN), doc="L, the KV cache length"),
          Axis("batch", sweep=_by_device(DECODE_BATCH), doc="B, sequences decoded at once")),
    make_inputs=decode_inputs, reference=decode_reference,
    flops=lambda p: decode_flops(*_decode_dims(p)[:2], p["length"], _decode_dims(p)[4]),
    bytes=lambda p: decode_bytes(*_decode_dims(p), p["dtype"]),
    write_bytes=lambda p: output_bytes(*_decode_dims(p)[:3], 1, _decode_dims(p)[4], p["dtype"]),
    working_set=lambda p: decode_bytes(*_decode_dims(p), p["dtype"]),
    describe=lambda p: (p["length"], "B{}xH{}/{}xL{}xD{}".format(*_decode_dims(p))),
    tolerance=lambda p: TOLERANCE[p["dtype"]],
    outputs=("o",), precision=lambda p: p["dtype"], modes=("cold",),
    columns=_decode_columns,
    memory_factor=1.5,  # the reference converts one head's cache at a time
))
REGISTRY.add_impl(Impl("attention.decode", "sdpa", "torch", _decode_sdpa,
                       doc="torch scaled_dot_product_attention with a length-1 query"))
REGISTRY.add_impl(Impl("attention.decode", "torch_math", "torch", _decode_math,
                       doc="matmul, softmax, matmul with the query heads of a KV head stacked"))
REGISTRY.add_impl(Impl("attention.decode", "triton", "triton", _decode_triton, tuning=_decode_tuning,
                       doc="kernels/attention.py decode: split-KV chunks, GQA heads in one tile, then a merge"))
