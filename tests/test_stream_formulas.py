"""Byte and FLOP formulas of the stream family, on hand-worked cases."""
import pytest

from bench.registry import load_all

REG = load_all()


@pytest.mark.parametrize("op,dtype,ws,n,nbytes,flops", [
    # copy: 2 arrays of fp32 -> n = 24000 // 8 = 3000; bytes = 2 * 3000 * 4; no flops
    ("stream.copy", "float32", 24000, 3000, 24000, 0),
    # scale: 2 arrays of bf16 -> n = 4000 // 4 = 1000; bytes 4000; one multiply each
    ("stream.scale", "bfloat16", 4000, 1000, 4000, 1000),
    # add: 3 arrays of fp32; 100 // 12 = 8 elements -> 96 bytes, 8 adds
    ("stream.add", "float32", 100, 8, 96, 8),
    # triad: 3 arrays of fp16 -> n = 6000 // 6 = 1000; 6000 bytes; a multiply and an add each
    ("stream.triad", "float16", 6000, 1000, 6000, 2000),
    # read: 1 array of bf16 -> n = 500; 1000 bytes read; 500 adds (n - 1 counted as n)
    ("stream.read", "bfloat16", 1000, 500, 1000, 500),
    # write: 1 array of fp32 -> n = 256; 1024 bytes written; no flops
    ("stream.write", "float32", 1024, 256, 1024, 0),
])
def test_stream_counts(op, dtype, ws, n, nbytes, flops):
    o = REG.ops[op]
    p = {"dtype": dtype, "ws_bytes": ws}
    assert o.describe(p) == (n, f"({n},)")
    assert o.bytes(p) == nbytes
    assert o.working_set(p) == nbytes
    assert o.flops(p) == flops


def test_intensities_match_stream_arithmetic():
    # triad in fp32: 2 flops per 12 bytes; scale in fp32: 1 per 8
    p = {"dtype": "float32", "ws_bytes": 12 * 2**20}
    triad, scale = REG.ops["stream.triad"], REG.ops["stream.scale"]
    assert triad.flops(p) / triad.bytes(p) == pytest.approx(2 / 12)
    assert scale.flops(p) / scale.bytes(p) == pytest.approx(1 / 8)


def test_sweep_spans_first_cache_to_four_times_llc():
    from bench.device import CacheLevel, DeviceInfo
    cpu = DeviceInfo("cpu", "cpu", "test", 2**34, 2, "cores",
                     (CacheLevel("l1", 48 * 2**10, 2), CacheLevel("l3", 32 * 2**20, 1)))
    sizes = REG.ops["stream.copy"].axes[1].expand(cpu, quick=True)
    assert sizes[0] == 16 * 2**10 and sizes[-1] >= 4 * 32 * 2**20
    assert all(b == 2 * a for a, b in zip(sizes, sizes[1:]))  # one per octave in quick runs
    full = REG.ops["stream.copy"].axes[1].expand(cpu, quick=False)
    assert len(full) == 2 * (len(sizes) - 1) + 1
    gpu = DeviceInfo("cuda", "cuda:0", "gpu", 2**37, 132, "SMs", (CacheLevel("l2", 50 * 2**20),))
    assert REG.ops["stream.copy"].axes[1].expand(gpu, quick=True)[-1] >= 2**30
