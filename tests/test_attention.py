"""Attention: FLOP and byte formulas on hand-worked shapes, the Triton prefill and decode
kernels under the interpreter against float64 (causal and not, GQA, ragged lengths), the
reference itself, and the torch impls through the runner's gate."""
import math

import pytest
import torch
from conftest import INTERPRETING

from bench.hw import detect
from bench.measure.registry import load_all
from bench.ops import attention as a
from kernels import attention as ka

REG = load_all()


def test_prefill_counts_hand_worked():
    # B=2, Hq=4, S=8, D=16: two products of 2*S*S*D each per head: 4*2*4*64*16 = 32768
    assert a.prefill_flops(2, 4, 8, 16, False) == 32768
    assert a.prefill_flops(2, 4, 8, 16, True) == 16384           # causal: exactly half
    # bytes in fp16: q and o 2*2*4*8*16 = 2048 elements, k and v with Hkv=2: 2*2*2*8*16 = 1024
    assert a.prefill_bytes(2, 4, 2, 8, 16, "fp16") == (2048 + 1024) * 2
    op = REG.ops["attention.prefill"]
    p = {"dtype": "bf16", "causal": True, "head_dim": 128, "heads": (1, 32, 8), "seq": 4096}
    assert op.flops(p) == 4 * 32 * 4096 * 4096 * 128 // 2
    assert op.bytes(p) == (2 * 32 + 2 * 8) * 4096 * 128 * 2


def test_decode_counts_hand_worked():
    # B=3, Hq=32, Hkv=8, L=1000, D=128: cache 2*3*8*1000*128 elements, q and o 2*3*32*128
    assert a.decode_bytes(3, 32, 8, 1000, 128, "bf16") == (2 * 3 * 8 * 1000 * 128 + 2 * 3 * 32 * 128) * 2
    assert a.decode_flops(3, 32, 1000, 128) == 4 * 3 * 32 * 1000 * 128
    op = REG.ops["attention.decode"]
    p = {"dtype": "fp16", "length": 32768, "batch": 1}
    # intensity: 4 Hq L D / (2 Hkv L D w) = 4*32 / (2*8*2) = 4 FLOP/B, whatever L
    assert op.flops(p) / op.bytes(p) == pytest.approx(4.0, rel=1e-3)


def naive(q, k, v, causal):
    g = q.shape[1] // k.shape[1]
    k, v = k.double().repeat_interleave(g, 1), v.double().repeat_interleave(g, 1)
    s = q.double() @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(s, -1) @ v


@pytest.mark.parametrize("causal", [False, True])
def test_reference_matches_the_textbook_formula_across_chunks(causal, monkeypatch):
    monkeypatch.setattr(a, "REF_ROWS", 7)  # chunk boundaries inside the sequence
    q, k, v = a._qkv(2, 4, 2, 20, 20, 16, "fp32", "cpu")
    assert torch.allclose(a.reference(q, k, v, causal), naive(q, k, v, causal), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("heads,seq,d", [((1, 2, 2), 128, 64), ((1, 4, 2), 100, 64), ((2, 4, 1), 70, 32)])
# the TMA grid: the plain grid again through host descriptors, seconds of interpreter CPU: slow (the full suite)
@pytest.mark.parametrize("tma", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_triton_prefill_matches_float64(dtype, causal, heads, seq, d, tma, dev):
    # (1, 4, 2) and (2, 4, 1) are grouped-query; 100 and 70 are not multiples of the block:
    # the unmasked main loop stops at the last whole block (causal: left of the diagonal)
    # and the masked edge blocks take the rest. tma: K and V through 4-D descriptors
    # (Triton 3.9's interpreter emulates them; on a GPU, sm_90+ only)
    if tma and (not hasattr(__import__("triton.language").language, "make_tensor_descriptor")
                or (dev == "cuda" and torch.cuda.get_device_capability()[0] < 9)):
        pytest.skip("TMA descriptors need Triton 3.6+ and sm_90+")
    b, hq, hkv = heads
    q, k, v = a._qkv(b, hq, hkv, seq, seq, d, dtype, dev)
    o = torch.full_like(q, float("nan"))
    ka.prefill(q, k, v, o, causal, block_m=32, block_n=32, num_stages=1, use_tma=tma)
    ref = a.reference(q, k, v, causal)
    err = ((o.double() - ref).norm() / ref.norm()).item()
    assert err <= a.TOLERANCE[dtype], err


@pytest.mark.parametrize("dtype", ["fp32", "fp16"])
@pytest.mark.parametrize("splits,length", [(1, 300), (3, 300), (4, 77)])
def test_triton_decode_matches_float64(dtype, splits, length, dev):
    q, k, v = a._qkv(2, 8, 2, 1, length, 64, dtype, dev)
    q = q[:, :, 0].contiguous()
    o = torch.full_like(q, float("nan"))
    ka.decode(q, k, v, o, ka.decode_workspace(q, splits), block_n=32)
    ref = a.reference(q[:, :, None], k, v)[:, :, 0]
    assert ((o.double() - ref).norm() / ref.norm()).item() <= a.TOLERANCE[dtype]


def test_decode_splits_rule():
    assert ka.sm_count(torch.device("cpu")) is None
    assert ka.decode_splits(1, 8, 32768, 64) == 4      # no GPU: 4 chunks
    assert ka.decode_splits(1, 8, 100, 64) == 2        # never more chunks than key blocks
    assert ka.decode_splits(1, 8, 32768, 64, sms=132) == 33   # ceil(2 x 132 / 8): two programs per SM
    assert ka.decode_splits(64, 8, 32768, 64, sms=132) == 1   # the batch alone fills the GPU


@pytest.mark.skipif(INTERPRETING, reason="bf16 is silently wrong in Triton's interpreter (triton issue 11584)")
@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
def test_triton_attention_bf16_on_gpu(causal):
    q, k, v = a._qkv(2, 8, 2, 1000, 1000, 128, "bf16", "cuda")
    o = torch.empty_like(q)
    ka.prefill(q, k, v, o, causal)
    ref = a.reference(q, k, v, causal)
    assert ((o.double() - ref).norm() / ref.norm()).item() <= a.TOLERANCE["bf16"]
    q1 = q[:, :, 0].contiguous()
    o1 = torch.empty_like(q1)
    ka.decode(q1, k, v, o1, ka.decode_workspace(q1, 8))
    ref1 = a.reference(q1[:, :, None], k, v)[:, :, 0]
    assert ((o1.double() - ref1).norm() / ref1.norm()).item() <= a.TOLERANCE["bf16"]


def test_torch_impls_pass_the_gate_and_record_the_sdpa_backend():
    from bench.measure.runner import Runner, Task
    from bench.measure.timing import TimerConfig
    cpu = detect.resolve("cpu")
    r = Runner(cpu, TimerConfig(budget_s=0.02, warmup_s=0.001))
    pre = REG.ops["attention.prefill"]
    ms = r.run_task(Task(pre, {"dtype": "bf16", "causal": True, "head_dim": 64, "heads": (1, 4, 2), "seq": 200},
                          (REG.impls["attention.prefill/sdpa"],)), ("warm",))
    assert ms[0].status == "ok" and ms[0].error <= ms[0].tolerance and ms[0].detail.startswith("sdpa backend ")
    dec = REG.ops["attention.decode"]
    ms = r.run_task(Task(dec, {"dtype": "bf16", "length": 1000, "batch": 2},
                          (REG.impls["attention.decode/sdpa"], REG.impls["attention.decode/torch_math"])), ("cold",))
    assert [m.status for m in ms] == ["ok", "ok"] and all(m.error <= m.tolerance for m in ms)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("bm,bn", [(32, 64), (64, 32)])
def test_prefill_edge_blocks_when_the_key_block_is_wider_or_narrower(causal, bm, bn, dev):
    # BLOCK_N > BLOCK_M: a causal tile's diagonal starts inside a key block (the edge stage
    # starts at the key block holding the tile's first row); BLOCK_N < BLOCK_M: several
    # diagonal blocks, the later ones all -inf for the tile's first rows
    q, k, v = a._qkv(1, 2, 1, 100, 100, 32, "fp32", dev)
    has_descriptors = hasattr(__import__("triton.language").language, "make_tensor_descriptor")
    for tma in (False, True) if has_descriptors and dev == "cpu" else (False,):
        o = torch.full_like(q, float("nan"))
        ka.prefill(q, k, v, o, causal, block_m=bm, block_n=bn, num_stages=1, use_tma=tma)
        ref = a.reference(q, k, v, causal)
        assert ((o.double() - ref).norm() / ref.norm()).item() <= a.TOLERANCE["fp32"], tma


def test_prefill_candidates_by_arch_and_smem_model():
    # TMA forms lead on sm_90 and never appear before it
    on90, on80 = ka.prefill_candidates(128, 90), ka.prefill_candidates(128, 80)
    assert on90[0][4] and not any(c[4] for c in on80) and set(on80) < set(on90)
    assert all(not c[4] for c in ka.prefill_candidates(64, 86))
    # TMA, D = 128, 128 x 128 tiles, 2 stages of K and V, bf16: 2 x 2 x 128 x 128 x 2 + 128 x 128 x 2
    # + 1 KiB = 164,864 B (the compiler's figure for sm_90, Triton 3.6 and 3.9)
    assert ka.prefill_smem_bytes(128, 128, 128, 2, 2, 90, tma=True) == 164864
    # the quick run's first three fit Hopper's 227 KiB
    for d in (64, 128):
        assert all(ka.prefill_smem_bytes(c[0], c[1], d, 2, c[3], 90, tma=c[4]) <= 232448
                   for c in ka.prefill_candidates(d, 90)[:3])


def test_prefill_tma_refuses_unaligned_strides():
    q = torch.empty(1, 2, 10, 24, dtype=torch.float16)[..., :20]   # 40-byte rows in 48-byte strides: last dim ok
    assert ka.tma_ready(torch.empty(1, 2, 10, 32, dtype=torch.float16))
    assert not ka.tma_ready(torch.empty(1, 2, 10, 36, dtype=torch.float16)[..., :32])   # 72-byte row stride
    assert not ka.tma_ready(torch.empty(1, 2, 10, 32, dtype=torch.float16).transpose(-1, -2))
    assert ka.tma_ready(q)  # strides (480, 240, 24, 1) x 2 bytes are 16-byte multiples


@pytest.mark.skipif(INTERPRETING, reason="bf16 is silently wrong in Triton's interpreter (triton issue 11584)")
@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d", [64, 128])
def test_first_prefill_candidate_on_gpu(causal, d):
    # the first candidate for this GPU (on sm_90+ the TMA form); one compile each, as the
    # device check's GPU-test step is bounded (tests/test_aot.py compiles every candidate)
    major, minor = torch.cuda.get_device_capability()
    q, k, v = a._qkv(2, 8, 2, 1000, 1000, d, "bf16", "cuda")   # 1000: not a multiple of any block
    ref = a.reference(q, k, v, causal)
    bm, bn, w, st, tma = ka.prefill_candidates(d, 10 * major + minor)[0]
    o = torch.full_like(q, float("nan"))
    ka.prefill(q, k, v, o, causal, bm, bn, w, st, use_tma=tma)
    assert ((o.double() - ref).norm() / ref.norm()).item() <= a.TOLERANCE["bf16"], (bm, bn, w, st, tma)


@pytest.mark.skipif(not hasattr(__import__("triton.language").language, "make_tensor_descriptor"),
                    reason="TMA descriptors need Triton 3.6+")
@pytest.mark.parametrize("causal", [False, True])
def test_tma_prefill_descriptors_made_once_serve_every_call(causal, dev):
    # the impl's TMA call: host-side descriptors made in its setup, passed to each launch; a
    # causal grid runs its query blocks in reverse (longest first) and still covers every one
    if dev == "cuda" and torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("TMA descriptors need sm_90+")
    q, k, v = a._qkv(1, 4, 2, 100, 100, 32, "fp32", dev)
    x = {"q": q, "k": k, "v": v, "o": torch.empty_like(q), "causal": causal}
    fn = a._prefill_triton_call(x, (32, 32, 4, 1, True))
    ref = a.reference(q, k, v, causal)
    for _ in range(2):
        x["o"].fill_(float("nan"))
        out = fn()
        assert ((out.double() - ref).norm() / ref.norm()).item() <= a.TOLERANCE["fp32"]
    descs = ka.prefill_descriptors(q, k, v, x["o"], 32, 32)
    assert [d.block_shape for d in descs] == [[1, 1, 32, 32]] * 4 and descs[0].base is q
