"""Each Triton stream kernel against the float64 reference, at sizes that are not a
multiple of the block (masked tails), under TRITON_INTERPRET=1 on a CPU."""
import pytest
import torch
from conftest import HAS_CUDA, INTERPRETING

from bench.measure.gate import poison
from bench.measure.registry import load_all
from bench.ops.stream import KINDS as STREAM_KINDS
from bench.ops.stream import arrays as array_count

REG = load_all()
KINDS = [k.name for k in STREAM_KINDS]
ARRAYS = {k.name: array_count(k) for k in STREAM_KINDS}  # n-element arrays each kernel streams


def _check(kind, dtype, ws, device):
    """Run kind's Triton kernel, as the suite launches it (the same table), on poisoned
    outputs; assert it matches float64 within the op's tolerance; return (inputs, output)."""
    from kernels import stream as k
    op = REG.ops[f"stream.{kind}"]
    point = {"dtype": dtype, "ws_bytes": ws}
    x = op.make_inputs(point, device)
    ref = op.reference(x)
    poison(x, op.outputs)
    out = next(kd for kd in STREAM_KINDS if kd.name == kind).triton(k, x)()
    err = op.error(out, ref, x)
    assert err <= op.tolerance(point), f"{kind} {dtype}: error {err}"
    return x, out


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("kind", KINDS)
def test_triton_stream_kernel_matches_float64(kind, dtype, dev):
    # 5001 elements per array round down to 4992: not a multiple of the 4096-element block
    itemsize = 4 if dtype == "float32" else 2
    arrays = ARRAYS[kind]
    x, out = _check(kind, dtype, 5001 * arrays * itemsize, dev)
    assert x["s"] == 3.0
    if kind != "read":
        assert out.numel() == 4992 and torch.isfinite(out).all()  # the masked tail was written


def test_read_kernel_sums_exactly_on_integers(dev):
    from kernels import stream as k
    a = torch.arange(3000, dtype=torch.float32, device=dev)  # exact in fp32: 0 + ... + 2999
    part = k.read_partials(a, block=1024, programs=2)
    assert part.numel() == 2 and part.isnan().all()  # poisoned until a call writes it
    assert k.read(a, part, block=1024).sum().item() == 2999 * 3000 / 2
    assert k.read(a, part, block=1024).sum().item() == 2999 * 3000 / 2  # again: nothing to zero between calls


def test_write_kernel_leaves_memory_past_n_alone(dev):
    from kernels import stream as k
    buf = torch.zeros(3000, device=dev)
    k.write(buf[:2500], 7.0, block=1024)
    assert (buf[:2500] == 7).all() and (buf[2500:] == 0).all()


@pytest.mark.skipif(INTERPRETING, reason="bf16 is silently wrong in Triton's interpreter (triton issue 11584)")
@pytest.mark.gpu
@pytest.mark.parametrize("kind", KINDS)
def test_triton_stream_kernel_bf16_on_gpu(kind):
    arrays = ARRAYS[kind]
    _check(kind, "bfloat16", 1_000_003 * arrays * 2, "cuda")


def test_interpreter_is_on_without_cuda():
    assert HAS_CUDA or INTERPRETING


@pytest.mark.parametrize("dtype", ["int32", "float32"])
def test_reread_torch_impl_matches_its_reference(dtype):
    # the suite's own torch impl, at a real point: 64 KiB read 4096 times (2**28 bytes)
    from bench.measure.registry import LaunchContext
    op = REG.ops["stream.reread"]
    point = {"dtype": dtype, "ws_bytes": 64 * 2**10, "call_bytes": 2**28}
    x = op.make_inputs(point, "cpu")
    ref = op.reference(x)
    poison(x, op.outputs)
    out = REG.impls["stream.reread/torch"].launcher(x, LaunchContext(point))()
    assert op.error(out, ref, x) <= op.tolerance(point)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("kind", ["copy", "scale", "add", "triad", "write"])
def test_cheap_gate_still_catches_one_wrong_or_unwritten_element(kind, dtype):
    # the gate checks copy and write exactly and the others in fp32: one element off by a
    # unit (or left at its NaN poison) anywhere in a million must still fail it
    from bench.measure.registry import LaunchContext
    op = REG.ops[f"stream.{kind}"]
    point = {"dtype": dtype, "ws_bytes": 2**22}
    x = op.make_inputs(point, "cpu")
    ref = op.reference(x)
    poison(x, op.outputs)
    out = REG.impls[f"stream.{kind}/torch"].launcher(x, LaunchContext(point))()
    assert op.error(out, ref, x) <= op.tolerance(point)
    out[12345] += 64.0
    assert op.error(out, ref, x) > op.tolerance(point)
    out[12345] = float("nan")
    assert not op.error(out, ref, x) <= op.tolerance(point)


def test_stream_inputs_come_from_one_pool_and_outputs_are_fresh():
    from bench.ops.stream import random_pool
    op = REG.ops["stream.add"]
    x = op.make_inputs({"dtype": "float32", "ws_bytes": 3 * 4 * 4096}, "cpu")
    y = op.make_inputs({"dtype": "float32", "ws_bytes": 3 * 4 * 1024}, "cpu")
    pool = random_pool(1, torch.float32, "cpu")
    # inputs are disjoint slices of the pool (not copies); the output is its own buffer
    assert x["a"].data_ptr() == pool.data_ptr() and x["b"].data_ptr() == pool.data_ptr() + 4096 * 4
    assert y["a"].data_ptr() == pool.data_ptr()
    assert x["c"].untyped_storage().data_ptr() != pool.untyped_storage().data_ptr()
    assert float(x["a"].abs().sum()) > 0 and not torch.isclose(x["a"], x["b"]).any()  # other values at every index


@pytest.mark.parametrize("n", [100, 5 * 1024, 5 * 1024 + 17, 12 * 1024 + 1000])
@pytest.mark.parametrize("programs", [1, 2, 3, 7])
def test_read_kernel_sums_every_block_once(n, programs, dev):
    # integers, exact in fp32: every whole block (unmasked) and the partial one (masked,
    # on one program only) counted exactly once, whatever the grid
    from kernels import stream as k
    a = torch.arange(n, dtype=torch.float32, device=dev) % 1000
    part = k.read_partials(a, block=1024, programs=programs)
    assert part.numel() == min(programs, -(-n // 1024))
    assert k.read(a, part, block=1024).double().sum().item() == float(a.double().sum())


def test_read_impl_is_one_launch_and_its_check_adds_the_partials(dev):
    # the timed call launches only the reduction (no zeroing kernel before it); the gate adds
    # the per-program partials, and one slot left at its poison fails it
    import kernels.stream as k
    from bench.measure.gate import check
    from bench.measure.registry import LaunchContext
    op = REG.ops["stream.read"]
    point = {"dtype": "float32", "ws_bytes": 4 * 20000}
    x = op.make_inputs(point, dev)
    ref = op.reference(x)
    launched = []
    real = k.read_kernel
    class Counting:
        def __getitem__(self, grid):
            launched.append(grid)
            return real[grid]
    k.read_kernel = Counting()
    try:
        got = check(lambda: REG.impls["stream.read/triton"].launcher(x, LaunchContext(point)), ref,
                    op.tolerance(point), dev, x, op.outputs, op.error)
    finally:
        k.read_kernel = real
    assert got.passed and len(launched) == 1 and x["out"].numel() == launched[0][0] > 1
    x["out"][0] = float("nan")
    assert not op.error(x["out"], ref, x) <= op.tolerance(point)


def test_read_block_is_the_same_bytes_at_every_width():
    from kernels import stream as k
    assert k.read_block(4) == 8192 and k.read_block(2) == 16384 and k.read_block(4) * 4 == k.READ_BLOCK_BYTES
