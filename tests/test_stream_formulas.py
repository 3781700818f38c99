"""Byte and FLOP formulas of the stream family, on hand-worked cases."""
import pytest

from bench.measure.registry import load_all

REG = load_all()


@pytest.mark.parametrize("op,dtype,ws,n,nbytes,flops", [
    # n is rounded down to a multiple of 64 elements (every array 256-byte aligned on a GPU)
    # copy: 2 arrays of fp32 -> 24000 // 8 = 3000 -> 2944 (46 x 64); bytes = 2 * 2944 * 4; no flops
    ("stream.copy", "float32", 24000, 2944, 23552, 0),
    # scale: 2 arrays of bf16 -> 4000 // 4 = 1000 -> 960; bytes 2 * 960 * 2 = 3840; one multiply each
    ("stream.scale", "bfloat16", 4000, 960, 3840, 960),
    # add: 3 arrays of fp32; 100 // 12 = 8 -> at least one multiple of 64: 64 elements, 768 bytes
    ("stream.add", "float32", 100, 64, 768, 64),
    # triad: 3 arrays of fp16 -> 6000 // 6 = 1000 -> 960; 3 * 960 * 2 = 5760 bytes; 2 flops each
    ("stream.triad", "float16", 6000, 960, 5760, 1920),
    # read: 1 array of bf16 -> 1000 // 2 = 500 -> 448; 896 bytes read; 448 adds (n - 1 counted as n)
    ("stream.read", "bfloat16", 1000, 448, 896, 448),
    # write: 1 array of fp32 -> n = 256 (already a multiple); 1024 bytes written; no flops
    ("stream.write", "float32", 1024, 256, 1024, 0),
])
def test_stream_counts(op, dtype, ws, n, nbytes, flops):
    o = REG.ops[op]
    p = {"dtype": dtype, "ws_bytes": ws}
    assert o.describe(p) == (n, f"({n},)")
    assert o.bytes(p) == nbytes
    assert o.working_set(p) == nbytes
    assert o.flops(p) == flops


@pytest.mark.parametrize("dtype,ws,n", [
    # 3 arrays resident (a, b, c) of fp32: 24000 // 12 = 2000 -> 1984 (31 x 64)
    ("float32", 24000, 1984),
    # of bf16: 6000 // 6 = 1000 -> 960
    ("bfloat16", 6000, 960),
])
def test_nstream_moves_four_arrays_over_three_resident(dtype, ws, n):
    # a += b + s c: reads a, b and c, writes a; 2 flops an element (an add and a multiply-add)
    o, w = REG.ops["stream.nstream"], 4 if dtype == "float32" else 2
    p = {"dtype": dtype, "ws_bytes": ws}
    assert o.describe(p) == (n, f"({n},)")
    assert o.working_set(p) == 3 * n * w and o.bytes(p) == 4 * n * w and o.write_bytes(p) == n * w
    assert o.flops(p) == 2 * n
    assert o.write_bytes(p) / o.bytes(p) == 0.25 and o.flops(p) / o.bytes(p) == 2 / (4 * w)
    assert o.outputs == () and o.inouts == ("a",)


def test_nstream_runs_in_full_runs_only():
    from bench.hw.device import CacheLevel, DeviceInfo
    cpu = DeviceInfo("cpu", "cpu", "test", 2**34, 2, "cores", (CacheLevel("l3", 32 * 2**20, 1),))
    gpu = DeviceInfo("cuda", "cuda:0", "gpu", 2**37, 132, "SMs", (CacheLevel("l2", 50 * 2**20),))
    o = REG.ops["stream.nstream"]
    assert o.points(cpu, quick=True) == [] and o.points(gpu, quick=True) == []
    assert {p["dtype"] for p in o.points(cpu)} == {"float32", "float16", "bfloat16"}
    assert {p["dtype"] for p in o.points(gpu)} == {"float32", "bfloat16"}


def test_nstream_passes_the_gate_on_its_own_inputs_and_leaves_them_for_the_timed_calls():
    import torch

    from bench.measure.gate import check
    from bench.measure.registry import LaunchContext
    o = REG.ops["stream.nstream"]
    p = {"dtype": "float32", "ws_bytes": 3 * 4 * 4096}
    x = o.make_inputs(p, "cpu")
    a0 = x["a"].clone()
    exact = a0.double() + x["b"].double() + 3.0 * x["c"].double()
    ref = o.reference(x)
    assert float((ref.double() - exact).norm() / exact.norm()) < 1e-7
    got = check(lambda: REG.impls["stream.nstream/torch"].launcher(x, LaunchContext(p)), ref, o.tolerance(p),
                _cpu(), x, o.outputs, o.error, o.inouts)
    assert got.passed and got.error < 1e-6 and torch.equal(x["a"], a0)


def test_intensities_match_stream_arithmetic():
    # triad in fp32: 2 flops per 12 bytes; scale in fp32: 1 per 8
    p = {"dtype": "float32", "ws_bytes": 12 * 2**20}
    triad, scale = REG.ops["stream.triad"], REG.ops["stream.scale"]
    assert triad.flops(p) / triad.bytes(p) == pytest.approx(2 / 12)
    assert scale.flops(p) / scale.bytes(p) == pytest.approx(1 / 8)


def test_sweep_spans_first_cache_to_four_times_llc():
    from bench.hw.device import CacheLevel, DeviceInfo
    cpu = DeviceInfo("cpu", "cpu", "test", 2**34, 2, "cores",
                     (CacheLevel("l1", 48 * 2**10, 2), CacheLevel("l3", 32 * 2**20, 1)))
    sizes = REG.ops["stream.copy"].axes[1].expand(cpu, quick=True)
    assert sizes[0] == 16 * 2**10 and sizes[-1] >= 4 * 32 * 2**20
    # one per octave in quick runs, plus 0.5x, 0.75x, 1x, 1.5x and 2x of each cache's total
    # (l1: 2 x 48 KiB = 96 KiB -> 48, 72, 96, 144, 192 KiB; l3: 32 MiB -> 16, 24, 32, 48, 64 MiB)
    kib = {s // 2**10 for s in sizes}
    assert {48, 72, 96, 144, 192} <= kib and {16 * 1024, 24 * 1024, 32 * 1024, 48 * 1024, 64 * 1024} <= kib
    octaves = [s for s in sizes if s & (s - 1) == 0]
    assert all(b == 2 * a for a, b in zip(octaves, octaves[1:])) and octaves[-1] == sizes[-1]
    assert {s // 2**10 for s in sizes if s not in octaves} == {48, 72, 96, 144, 192, 24 * 1024, 48 * 1024}
    full = REG.ops["stream.copy"].axes[1].expand(cpu, quick=False)
    assert len([s for s in full if s not in kib]) >= len(full) - len(sizes)
    gpu = DeviceInfo("cuda", "cuda:0", "gpu", 2**37, 132, "SMs", (CacheLevel("l2", 50 * 2**20),))
    assert REG.ops["stream.copy"].axes[1].expand(gpu, quick=True)[-1] >= 2**30


def test_reread_counts_every_pass():
    # 16 KiB of int32: n = 4096, R = 2**30 / 16384 = 65536 passes; bytes R n 4 = 2**30; flops R n
    o = REG.ops["stream.reread"]
    p = {"dtype": "int32", "ws_bytes": 16 * 2**10, "call_bytes": 2**30}
    assert o.describe(p) == (4096, "(4096,)x65536")
    assert o.bytes(p) == 2**30 and o.flops(p) == 65536 * 4096
    assert o.working_set(p) == 16 * 2**10
    # 3 MB of fp32 (not a power of two): n = 786432 -> 786432 (a multiple of 64);
    # R = ceil(2**30 / 3145728) = 342 passes
    p = {"dtype": "float32", "ws_bytes": 3 * 2**20, "call_bytes": 2**30}
    assert o.describe(p) == (786432, "(786432,)x342")
    assert o.bytes(p) == 342 * 3 * 2**20


def test_reread_reference_wraps_like_int32_adds():
    import torch

    from bench.ops.stream import reread_reference, wrap_int32
    a = torch.full((64,), 1000, dtype=torch.int32)
    # 64 x 1000 x 40000 = 2.56e9 wraps past 2**31 to 2.56e9 - 2**32
    ref = reread_reference({"a": a, "repeats": 40000})
    assert ref.item() == 2_560_000_000 - 2**32 == wrap_int32(2_560_000_000)
    assert wrap_int32(-2**31 - 1) == 2**31 - 1


def test_write_is_checked_against_its_constant_element_by_element():
    """Write's reference is one 0-d constant (no n-element array is made); an
    output with one element unwritten (poisoned) or one wrong value fails the gate."""
    import torch

    from bench.measure.gate import check
    from bench.measure.registry import load_all
    reg = load_all()
    op = reg.ops["stream.write"]
    x = op.make_inputs({"dtype": "float32", "ws_bytes": 4 * 4096}, "cpu")
    ref = op.reference(x)
    assert ref.dim() == 0 and op.peak_bytes({"dtype": "float32", "ws_bytes": 4 * 4096}) == 0
    b = x["b"]

    def writes(last_value, upto):
        def launch():
            def fn():
                b[:upto].fill_(x["s"])
                if upto == b.numel():
                    b[-1] = last_value
                return b  # as torch's fill_ does: the output
            return fn
        return launch

    good = check(writes(x["s"], b.numel()), ref, 0.0, _cpu(), x, op.outputs, op.error)
    assert good.passed and good.error == 0.0
    wrong = check(writes(x["s"] + 1, b.numel()), ref, 0.0, _cpu(), x, op.outputs, op.error)
    assert not wrong.passed
    unwritten = check(writes(x["s"], b.numel() - 1), ref, 0.0, _cpu(), x, op.outputs, op.error)
    assert not unwritten.passed and torch.isnan(b[-1])


def _cpu():
    from bench.hw import detect
    return detect.resolve("cpu")


def test_block_sum_is_exact_for_integers_and_float64_for_floats(monkeypatch):
    """The read and reread references sum a block at a time; the result is the
    whole array's sum (integers exactly, past int32's range; floats as math.fsum to 1e-12)."""
    import math

    import torch

    from bench.ops import stream
    monkeypatch.setattr(stream, "SUM_BLOCK", 1000)   # several blocks and a partial last one
    ints = torch.full((2503,), 2**30, dtype=torch.int32)
    assert stream.block_sum(ints).item() == 2503 * 2**30   # past 2**31: no int32 wrap
    floats = torch.linspace(-1.0, 3.0, 2503, dtype=torch.float32)
    exact = math.fsum(float(v) for v in floats.tolist())
    got = stream.block_sum(floats)
    assert got.dtype == torch.float64 and abs(got.item() - exact) <= 1e-12 * abs(exact)
    assert stream.block_sum(floats[:7]).item() == math.fsum(floats[:7].tolist())
