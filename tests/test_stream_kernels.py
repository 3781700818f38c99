"""Each Triton stream kernel against the float64 reference, at sizes that are not a
multiple of the block (masked tails), under TRITON_INTERPRET=1 on a CPU."""
import pytest
import torch

from bench.registry import load_all
from bench.runner import poison
from conftest import HAS_CUDA, INTERPRETING

REG = load_all()
KINDS = ["copy", "scale", "add", "triad", "read", "write"]


def _check(kind, dtype, ws, device, block):
    from kernels import stream as k
    op = REG.ops[f"stream.{kind}"]
    point = {"dtype": dtype, "ws_bytes": ws}
    x = op.make_inputs(point, device)
    ref = op.reference(x)
    poison(x, op.outputs)
    s = x["s"]
    out = {
        "copy": lambda: k.copy(x["a"], x["b"], block=block),
        "scale": lambda: k.scale(x["a"], x["b"], s, block=block),
        "add": lambda: k.add(x["a"], x["b"], x["c"], block=block),
        "triad": lambda: k.triad(x["b"], x["c"], x["a"], s, block=block),
        "read": lambda: k.read(x["a"], x["out"], block=block, programs=3),
        "write": lambda: k.write(x["b"], s, block=block),
    }[kind]()
    err = op.error(out, ref, x)
    assert err <= op.tolerance(point), f"{kind} {dtype}: error {err}"
    return x, out


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("kind", KINDS)
def test_triton_stream_kernel_matches_float64(kind, dtype, dev):
    # 3 arrays x 5001 fp32 elements: n is not a multiple of the 1024-element block
    itemsize = 4 if dtype == "float32" else 2
    arrays = {"copy": 2, "scale": 2, "add": 3, "triad": 3, "read": 1, "write": 1}[kind]
    x, out = _check(kind, dtype, 5001 * arrays * itemsize, dev, block=1024)
    assert x["s"] == 3.0
    if kind != "read":
        assert out.numel() == 5001 and torch.isfinite(out).all()  # the masked tail was written


def test_read_kernel_sums_exactly_on_integers(dev):
    from kernels import stream as k
    a = torch.arange(3000, dtype=torch.float32, device=dev)  # exact in fp32: 0 + ... + 2999
    out = torch.empty((), dtype=torch.float32, device=dev)
    assert k.read(a, out, block=1024, programs=2).item() == 2999 * 3000 / 2


def test_write_kernel_leaves_memory_past_n_alone(dev):
    from kernels import stream as k
    buf = torch.zeros(3000, device=dev)
    k.write(buf[:2500], 7.0, block=1024)
    assert (buf[:2500] == 7).all() and (buf[2500:] == 0).all()


@pytest.mark.skipif(INTERPRETING, reason="bf16 is silently wrong in Triton's interpreter (triton issue 11584)")
@pytest.mark.gpu
@pytest.mark.parametrize("kind", KINDS)
def test_triton_stream_kernel_bf16_on_gpu(kind):
    arrays = {"copy": 2, "scale": 2, "add": 3, "triad": 3, "read": 1, "write": 1}[kind]
    _check(kind, "bfloat16", 1_000_003 * arrays * 2, "cuda", block=4096)


def test_interpreter_is_on_without_cuda():
    assert HAS_CUDA or INTERPRETING
