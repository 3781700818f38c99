"""A stream kernel's arrays by role (bench/ops/stream.py's Kind: in, out, in-out): the working
set counts each array resident once, the traffic an in-out array twice (read, then written),
and the written part is the outs and in-outs, on a hand-worked kernel that is in no table."""
import torch

from bench.hw.device import DeviceInfo
from bench.ops import stream

# a = a + b: one in-out, one in
ACC = stream.Kind("acc", ("b",), (), 1, "a = a + b", inouts=("a",),
                  reference=lambda x: x["a"].float() + x["b"].float(),
                  torch=lambda x: lambda: x["a"].add_(x["b"]), triton=None)
CPU = DeviceInfo("cpu", "cpu", "test", 2**34, 2, "cores", ())
GPU = DeviceInfo("cuda", "cuda:0", "gpu", 2**37, 132, "SMs", ())


def test_working_set_and_traffic_differ_by_the_in_out_array():
    # 2 arrays resident of fp32: 24000 // 8 = 3000 -> 2944 (46 x 64) elements
    p = {"dtype": "float32", "ws_bytes": 24000}
    assert stream.elements(ACC, p) == 2944
    assert stream.stream_working_set(ACC, p) == 2 * 2944 * 4 == 23552
    # a read and written, b read: 3 arrays' bytes, one of them written
    assert stream.stream_bytes(ACC, p) == 3 * 2944 * 4 == 35328
    assert stream.stream_write_bytes(ACC, p) == 2944 * 4
    assert stream.reads(ACC) == ("b", "a") and stream.writes(ACC) == ("a",)


def test_without_an_in_out_the_two_counts_are_one():
    p = {"dtype": "bfloat16", "ws_bytes": 6000}
    for kind in stream.KINDS:
        if not kind.inouts:
            assert stream.stream_working_set(kind, p) == stream.stream_bytes(kind, p)


def test_an_in_out_is_counted_in_both_pools_and_its_gate_copy_in_memory():
    p = {"dtype": "float32", "ws_bytes": 24000}
    pools = stream.stream_pools(ACC, p, "cpu")
    assert pools == {stream.pool_key("float32", "cpu"): 2 * 2944 * 4, stream.out_pool_key("float32", "cpu"): 2944 * 4}
    # the fp32 check's two n-element fp32 temporaries, and the gate's copy of a
    assert stream.stream_memory(ACC, p) == 2 * 4 * 2944 + 2944 * 4


def test_an_in_out_starts_from_random_values_in_the_output_pool():
    p = {"dtype": "float32", "ws_bytes": 2 * 4 * 1024}
    x = stream.make_stream_inputs(ACC, p, "cpu")
    pool = stream.random_pool(2 * 1024, torch.float32, "cpu")
    start = pool[1024:2 * 1024].clone()   # b is the pool's first slice, a's values its second
    assert x["b"].data_ptr() == pool.data_ptr()
    assert x["a"].untyped_storage().data_ptr() != pool.untyped_storage().data_ptr()
    assert torch.equal(x["a"], start) and float(x["a"].abs().sum()) > 0
    ACC.torch(x)()   # the kernel writes a in place: the random pool stays as it was made
    assert torch.equal(pool[1024:2 * 1024], start) and not torch.equal(x["a"], start)


def test_repeats_and_full_run_only_kinds_leave_the_sweeps_they_are_not_needed_in():
    scale = next(k for k in stream.KINDS if k.name == "scale")
    assert stream.GPU_REPEATS["scale"] == "copy" and stream.GPU_REPEATS["add"] == "triad"
    assert stream.dtype_sweep(GPU, False, scale) == () and stream.dtype_sweep(CPU, True, scale) == ()
    assert stream.dtype_sweep(CPU, False, scale) == stream.DTYPES
    full_only = stream.Kind("acc", ("b",), (), 1, "a = a + b", inouts=("a",), reference=None, torch=None,
                            triton=None, quick=False)
    assert stream.dtype_sweep(CPU, True, full_only) == () and stream.dtype_sweep(GPU, True, full_only) == ()
    assert stream.dtype_sweep(CPU, False, full_only) == stream.DTYPES
    assert stream.dtype_sweep(GPU, False, full_only) == stream.GPU_DTYPES
