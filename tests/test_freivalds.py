"""Freivalds' check for large GEMMs (bench/ops/gemm.py): a product of
2 x 512^3 FLOPs and more is checked by projection onto random directions in float64, O(n^2),
and the check still fails a wrong or unwritten output (an error row, never timed)."""
import pytest
import torch

from bench.hw.device import CacheLevel, DeviceInfo
from bench.measure.gate import check
from bench.measure.registry import load_all, relative_norm_error
from bench.ops import gemm as g

REG = load_all()
CPU = DeviceInfo("cpu", "cpu", "cpu", 2**34, 2, "cores", (CacheLevel("l3", 32 * 2**20),))
OP = REG.ops["gemm.square"]


def _inputs(dtype, n):
    return OP.make_inputs({"dtype": dtype, "shape": (n, n, n)}, "cpu")


def test_small_products_keep_the_full_reference_and_large_ones_project():
    small, large = _inputs("fp32", 256), _inputs("fp32", 512)
    assert isinstance(OP.reference(small), torch.Tensor)
    ref = OP.reference(large)
    assert isinstance(ref, g.Projection) and ref.x.shape == (512, g.PROJECTION_VECTORS) and ref.ax.shape == (512, 4)


@pytest.mark.parametrize("dtype", ["fp32", "bf16", "int8"])
def test_the_projection_agrees_with_the_full_check(dtype):
    x = _inputs(dtype, 512)
    a, b = x["a"].double(), x["b"].double()
    out = (a @ b).to(x["c"].dtype)     # the product rounded to the output type, as a kernel writes it
    full = relative_norm_error(out, a @ b, x)
    proj = relative_norm_error(out, OP.reference(x), x)
    if dtype == "int8":
        assert full == 0.0 and proj < 1e-13  # int32 exact: only float64 rounding remains
    else:
        # the projection estimates the same relative error (a chi-square ratio of 4 directions)
        assert 0.3 * full < proj < 3 * full and proj <= OP.tolerance({"dtype": dtype})


def test_a_wrong_tile_or_an_unwritten_output_still_fails_the_gate():
    x = _inputs("fp32", 512)
    ref = OP.reference(x)
    tol = OP.tolerance({"dtype": "fp32"})
    product = x["a"] @ x["b"]

    def launcher(damage):
        def fn():
            x["c"].copy_(product)
            damage(x["c"])
            return x["c"]
        return lambda: fn

    def wrong_tile(c):
        c[64:128, 256:320] *= 1.01   # one 64 x 64 tile 1% off: about 0.1% of the output's norm

    def unwritten(c):
        c[:, :8] = float("nan")      # 8 columns the kernel never wrote keep the gate's poison

    assert check(launcher(lambda c: None), ref, tol, CPU, x, ("c",), OP.error).passed
    bad = check(launcher(wrong_tile), ref, tol, CPU, x, ("c",), OP.error)
    assert not bad.passed and 5e-4 < bad.error < 5e-3
    assert not check(launcher(unwritten), ref, tol, CPU, x, ("c",), OP.error).passed


def test_poisoned_output_fails():
    x = _inputs("fp32", 512)
    x["c"].fill_(float("nan"))
    err = relative_norm_error(x["c"], OP.reference(x), x)
    assert err != err  # NaN: the gate's comparison fails it


def test_a_large_decode_batch_is_checked_by_projection_and_still_fails_a_wrong_row():
    from bench.ops import gemv
    op = REG.ops["gemv.decode"]
    big = op.make_inputs({"layer": "square1024", "dtype": "bf16", "batch": 64}, "cpu")
    ref = op.reference(big)
    assert isinstance(ref, g.Projection)
    right = (big["x"].double() @ big["deq"].double().T).to(big["y"].dtype)
    assert relative_norm_error(right, ref, big) <= op.tolerance({"dtype": "bf16"})
    wrong = right.clone()
    wrong[5] *= 1.5   # one decode row 50% off
    assert relative_norm_error(wrong, ref, big) > op.tolerance({"dtype": "bf16"})
    small = op.make_inputs({"layer": "square1024", "dtype": "bf16", "batch": gemv.PROJECT_FROM_BATCH}, "cpu")
    assert isinstance(op.reference(small), torch.Tensor)   # up to 16 rows: the full float64 rows


def test_the_projection_widens_its_operands_a_block_at_a_time_and_equals_the_whole_product(monkeypatch):
    from bench.measure import registry
    monkeypatch.setattr(registry, "F64_BLOCK_BYTES", 8 * 64 * 40)   # 40 rows of a 64-wide operand a block
    gen = torch.Generator().manual_seed(3)
    w = torch.randn(130, 64, generator=gen).to(torch.bfloat16)
    x = torch.randn(5, 64, generator=gen, dtype=torch.float64)
    # a @ w^T and w^T @ y against the operands widened whole: the same float64 products
    assert torch.allclose(registry.f64_rows_product(x, w), x @ w.double().T, rtol=1e-13, atol=0)
    y = torch.randn(130, 3, generator=gen, dtype=torch.float64)
    assert torch.allclose(registry.f64_weighted_rows(w, y), w.double().T @ y, rtol=1e-13, atol=1e-13)
    # 130 rows in blocks of 40: four blocks, every one in the same float64 buffer (no fresh copy per block)
    blocks = list(registry._row_blocks(w))
    assert [b.stop - b.start for b, _ in blocks] == [40, 40, 40, 10]
    assert len({wide.data_ptr() for _, wide in blocks}) == 1
    # m @ x for a row-major m and for a transposed view (widened along its columns): both the whole product
    z = torch.randn(64, 2, generator=gen, dtype=torch.float64)
    assert torch.allclose(registry.f64_times(w, z), w.double() @ z, rtol=1e-13, atol=1e-13)
    assert torch.allclose(registry.f64_times(w.T, y), w.double().T @ y, rtol=1e-13, atol=1e-13)
    # the GEMM's projection A (B X) equals the operands' float64 product times the same directions
    b = torch.randn(600, 64, generator=gen).to(torch.bfloat16).T   # B as the GEMM holds it: a view of (N, K)
    big = torch.randn(700, 64, generator=gen).to(torch.bfloat16)
    monkeypatch.setattr(g, "FREIVALDS_FLOPS", 1)   # these shapes are below Freivalds' size: project anyway
    ref = g.reference({"a": big, "b": b})
    assert isinstance(ref, g.Projection)
    assert torch.allclose(ref.ax, big.double() @ (b.double() @ ref.x), rtol=1e-12, atol=1e-12)
