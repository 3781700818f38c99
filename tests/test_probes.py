"""The hierarchy probes (bench/ops/probe.py, kernels/probes.py): hand-worked byte counts, the
kernels against exact sums under TRITON_INTERPRET=1, and the launch floor's op."""
import pytest
import torch
from conftest import HAS_CUDA

from bench.hw.device import CacheLevel, DeviceInfo
from bench.measure.gate import check, poison
from bench.measure.registry import LaunchContext, load_all

REG = load_all()
H200 = DeviceInfo("cuda", "cuda:0", "NVIDIA H200", 2**37, 132, "SMs", (CacheLevel("l2", 60 * 2**20),))
CPU = DeviceInfo("cpu", "cpu", "test", 2**34, 2, "cores", (CacheLevel("l1", 32 * 2**10, 2),))


def test_l1_counts_are_hand_worked():
    from bench.ops.probe import l1_bytes, l1_passes
    op = REG.ops["probe.l1"]
    p = {"dtype": "float32", "span_bytes": 64 * 2**10, "programs": 264, "call_bytes": 2**33}
    # R = ceil(2^33 / (264 x 65536)) = ceil(496.48) = 497; bytes = 497 x 264 x 65536
    assert l1_passes(p) == 497
    assert l1_bytes(p) == op.bytes(p) == 8_598_847_488
    assert op.flops(p) == 8_598_847_488 // 4
    assert op.working_set(p) == 264 * 65536
    assert op.write_bytes(p) == 0   # read only: the scalar result is not counted
    assert op.describe(p) == (264 * 16384, "264x(16384,)x497")


def test_l1_sweep_is_two_programs_per_sm_with_spans_of_tens_of_kib():
    pts = REG.ops["probe.l1"].points(H200, quick=False)
    assert {p["programs"] for p in pts} == {264} and {p["call_bytes"] for p in pts} == {2**33}
    assert [p["span_bytes"] // 1024 for p in pts] == [16, 32, 48, 64, 96, 112]   # fp32 only on a GPU
    quick = REG.ops["probe.l1"].points(H200, quick=True)
    assert [(p["dtype"], p["span_bytes"] // 1024) for p in quick] == [("float32", 32), ("float32", 64)]
    assert {p["dtype"] for p in REG.ops["probe.l1"].points(CPU, quick=True)} == {"int32"}


def test_l1_kernel_reads_each_span_passes_times_and_nothing_else(dev):
    from kernels import probes as k
    programs, span, passes = 3, 8192, 2   # 2 windows of 4096 per program
    a = torch.full((programs * span + 4096,), float("nan"), device=dev)   # a poisoned tail past the spans
    a[:programs * span] = (torch.arange(programs * span, device=dev) % 7).float()  # exact in fp32
    out = k.l2_partials(a, programs)
    got = k.l1_reread(a, out, span, passes, block=4096).sum().item()
    assert got == passes * float((torch.arange(programs * span) % 7).sum())


@pytest.mark.parametrize("dtype", ["int32", "float32"])
def test_l1_op_torch_and_triton_pass_the_gate(dtype, dev):
    op = REG.ops["probe.l1"]
    p = {"dtype": dtype, "span_bytes": 32 * 2**10, "programs": 2, "call_bytes": 2**18}   # R = 4
    x = op.make_inputs(p, dev)
    ref = op.reference(x)
    for name in ("torch", "triton"):
        got = check(lambda name=name: REG.impls[f"probe.l1/{name}"].launcher(x, LaunchContext(p)), ref,
                    op.tolerance(p), dev, x, op.outputs, op.error)
        assert got.passed, (name, got.error)


@pytest.mark.parametrize("programs", [1, 2, 7])
def test_l2_kernel_reads_every_block_repeats_times(programs, dev):
    from bench.ops.stream import wrap_int32
    from kernels import probes as k
    gen = torch.Generator().manual_seed(3)
    a = torch.randint(-1000, 1001, (5000,), dtype=torch.int32, generator=gen).to(dev)  # 5 blocks, the last partial
    out = k.l2_partials(a, programs)
    assert out.numel() == programs and (out == torch.iinfo(torch.int32).max).all()  # poisoned until written
    got = int(k.l2_reread(a, out, 3, block=1024, unroll=4).long().sum())
    assert wrap_int32(got) == wrap_int32(3 * int(a.long().sum()))


def test_l2_programs_deal_the_block_reads():
    from kernels.probes import l2_programs
    # 1 GiB of int32 over a 64 KiB buffer: 16 blocks x 16384 repeats = 262144 block-reads, 65536 steps
    assert l2_programs(132, 16384, 16384) == 4 * 132
    assert l2_programs(132, 2048, 3) == 2       # 2 blocks x 3 = 6 block-reads: 2 steps of 4
    assert l2_programs(None, 10**6, 10) == 4    # off a GPU


def test_reread_triton_is_the_l2_probe_and_passes_the_gate_with_few_passes(dev):
    op = REG.ops["stream.reread"]
    for dtype in ("int32", "float32"):
        p = {"dtype": dtype, "ws_bytes": 20 * 1024, "call_bytes": 3 * 20 * 1024}   # R = 3
        x = op.make_inputs(p, dev)
        ref = op.reference(x)
        fn = REG.impls["stream.reread/triton"].launcher(x, LaunchContext(p, CPU))
        assert ".cg" in fn.detail and "4 programs" in fn.detail
        got = check(lambda fn=fn: fn, ref, op.tolerance(p), dev, x, op.outputs, op.error)
        assert got.passed, (dtype, got.error)
    assert op.bytes(p) == 3 * 20 * 1024


def test_launch_op_forms_and_counts():
    op = REG.ops["probe.launch"]
    assert [p["form"] for p in op.points(H200)] == ["launch", "graph"]
    assert [p["form"] for p in op.points(CPU)] == ["call"]
    p = {"form": "call"}
    assert op.flops(p) == op.bytes(p) == op.working_set(p) == 0


def test_launch_impls_pass_the_gate(dev):
    op = REG.ops["probe.launch"]
    p = {"form": "graph" if dev == "cuda" else "call"}
    for name in ("torch", "triton"):
        x = op.make_inputs(p, dev)
        got = check(lambda name=name, x=x: REG.impls[f"probe.launch/{name}"].launcher(x, LaunchContext(p)),
                    op.reference(x), op.tolerance(p), dev, x, op.outputs, op.error)
        assert got.passed, name
    # a torch call that wrote nothing fails: y keeps its NaN poison
    x = op.make_inputs(p, dev)
    poison(x, op.outputs)
    assert op.error(x["y"], op.reference(x), x) == 1.0


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
def test_launch_form_refuses_graph_capture_so_the_timer_launches_each_call():
    from bench.measure.timing import _capture_graph
    op = REG.ops["probe.launch"]
    for form, capturable in (("launch", False), ("graph", True)):
        x = op.make_inputs({"form": form}, "cuda")
        fn = REG.impls["probe.launch/triton"].launcher(x, LaunchContext({"form": form}))
        assert (_capture_graph(fn, 4, torch.device("cuda")) is not None) == capturable
