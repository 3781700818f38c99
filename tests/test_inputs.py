"""bench/measure/inputs.py: large operands filled at copy speed, without values a wrong index could hit."""
import torch

from bench.measure import inputs


def test_tiled_values_repeat_only_at_the_period(monkeypatch):
    monkeypatch.setattr(inputs, "PERIOD", 101)  # a small prime: the same rule, cheap to check
    inputs._block.cache_clear()
    try:
        x = inputs.tiled_normal((3, 4, 50), torch.float32, "cpu", seed=5)
        flat = x.flatten()
        assert x.shape == (3, 4, 50) and x.is_contiguous()
        assert torch.equal(flat[101:202], flat[:101])          # one period later: the same values
        assert torch.equal(flat[505:600], flat[:95])           # the tail is the block's start
        # one head (50 elements) or one batch (200) apart: other values everywhere
        assert not torch.isclose(x[:, 1:], x[:, :-1]).any()
        assert not torch.isclose(x[1:], x[:-1]).any()
        y = inputs.tiled_normal((3, 4, 50), torch.float32, "cpu", seed=6)
        assert not torch.isclose(x, y).any()                   # another seed, another block
    finally:
        inputs._block.cache_clear()


def test_tiled_values_are_standard_normal_in_the_dtype():
    x = inputs.tiled_normal((2, inputs.PERIOD // 2 + 7), torch.bfloat16, "cpu", seed=1)
    assert x.dtype == torch.bfloat16
    f = x.float()
    assert abs(f.mean().item()) < 0.01 and abs(f.std().item() - 1) < 0.01
    assert torch.equal(x, inputs.tiled_normal(x.shape, torch.bfloat16, "cpu", seed=1))  # reproducible


def test_tiled_on_the_meta_device_has_shape_only():
    x = inputs.tiled_normal((4, 8), torch.float16, "meta", seed=1)
    assert x.device.type == "meta" and x.shape == (4, 8)


def test_many_periods_sum_within_fp16s_range():
    # a 2 GiB float16 stream.read sums 256 periods: an uncentred block (sum about +-2,000)
    # would pass 65,504 and make the read's result inf
    block = inputs._block(0, torch.float16, "cpu")
    assert abs(block.double().mean().item()) < 1e-4
    assert abs(block.double().sum().item()) * 256 < 65504 / 16
