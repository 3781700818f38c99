"""The FMA-chain probe (bench/ops/fma.py, kernels/fma.py): hand-worked FLOP and byte counts,
the closed-form float64 reference against the explicit recurrence, and the kernels against
it (Triton under the interpreter at small k)."""
import pytest
import torch

from bench.hw.device import CacheLevel, DeviceInfo
from bench.measure.gate import check
from bench.measure.registry import LaunchContext, load_all

REG = load_all()
OP = REG.ops["fma.chains"]


def test_counts_are_hand_worked():
    # n = 8192 / (2 x 4) = 1024 fp32 elements, k = 3, C = 8
    p = {"dtype": "fp32", "k": 3, "ws_bytes": 8192}
    assert OP.flops(p) == 2 * 3 * 8 * 1024 == 49_152
    assert OP.bytes(p) == (2 * 1024 + 8 + 1) * 4 == 8_228
    assert OP.working_set(p) == 8192
    assert OP.write_bytes(p) == 1024 * 4      # y only: the rest of the bytes are read
    # the H200's sweep end: fp64 at k = 1024 over 256 MiB, n = 2^24
    p = {"dtype": "fp64", "k": 1024, "ws_bytes": 2**28}
    assert OP.flops(p) == 2**38 == 274_877_906_944
    assert OP.bytes(p) == (2**25 + 9) * 8 == 268_435_528
    assert OP.precision(p) == "fp64"


def test_sweep_and_working_set():
    from bench.ops.fma import fma_ws
    h200 = DeviceInfo("cuda", "cuda:0", "H200", 2**37, 132, "SMs", (CacheLevel("l2", 60 * 2**20),))
    b200 = DeviceInfo("cuda", "cuda:0", "B200", 2**37, 148, "SMs", (CacheLevel("l2", 126 * 2**20),))
    cpu = DeviceInfo("cpu", "cpu", "x", 2**34, 2, "cores", ())
    assert fma_ws(h200, False) == (2**28,)          # max(256 MiB, 4 x 60 MiB -> 256 MiB)
    assert fma_ws(b200, False) == (2**29,)          # 4 x 126 MiB -> 512 MiB
    assert fma_ws(cpu, True) == (2**17,)
    ks = sorted({p["k"] for p in OP.points(h200)})
    assert ks == [2**i for i in range(11)]
    assert sorted({p["k"] for p in OP.points(h200, quick=True)}) == [1, 4, 16, 512, 1024]
    assert {p["dtype"] for p in OP.points(h200)} == {"fp64", "fp32", "fp16", "bf16"}


@pytest.mark.parametrize("k", [1, 2, 3, 7, 20])
def test_closed_form_is_the_recurrence(k):
    from bench.ops.fma import B, closed_form, multipliers, recurrence
    x = torch.randn(257, dtype=torch.float64, generator=torch.Generator().manual_seed(k))
    a = multipliers()
    assert torch.allclose(closed_form(x, a, B, k), recurrence(x, a, B, k), rtol=1e-13, atol=1e-13)
    if k == 1:  # no step: y = b + sum_c a_c x, 16 FLOPs per element
        assert torch.allclose(closed_form(x, a, B, 1), B + sum(a) * x)


def test_multipliers_are_exact_in_every_precision():
    from bench.ops.fma import multipliers
    for dt in (torch.float16, torch.bfloat16, torch.float32):
        t = torch.tensor(multipliers(), dtype=torch.float64)
        assert torch.equal(t.to(dt).double(), t)


@pytest.mark.parametrize("dtype", ["fp64", "fp32", "fp16"])
@pytest.mark.parametrize("k", [1, 2, 5, 16])
def test_triton_kernel_matches_float64(dtype, k, dev):
    p = {"dtype": dtype, "k": k, "ws_bytes": 4 * 3000}   # n not a multiple of the block: a masked tail
    x = OP.make_inputs(p, dev)
    got = check(lambda: REG.impls["fma.chains/triton"].launcher(x, LaunchContext(p)), OP.reference(x),
                OP.tolerance(p), dev, x, OP.outputs, OP.error)
    assert got.passed, got.error
    assert torch.isfinite(x["y"]).all()   # the tail was written (the gate poisoned it)


@pytest.mark.parametrize("dtype", ["fp64", "fp32", "fp16", "bf16"])
@pytest.mark.parametrize("k", [1, 4])
def test_torch_chains_match_float64(dtype, k):
    p = {"dtype": dtype, "k": k, "ws_bytes": 8192}
    x = OP.make_inputs(p, "cpu")
    got = check(lambda: REG.impls["fma.chains/torch"].launcher(x, LaunchContext(p)), OP.reference(x),
                OP.tolerance(p), "cpu", x, OP.outputs, OP.error)
    assert got.passed, got.error


def test_kernel_refuses_bad_arguments():
    from kernels.fma import fma_chains
    x = torch.zeros(64)
    with pytest.raises(ValueError, match="multipliers"):
        fma_chains(x, torch.zeros(8), torch.zeros(64), 2)
    with pytest.raises(ValueError, match="at least one"):
        fma_chains(x, torch.zeros(9), torch.zeros(64), 0)
