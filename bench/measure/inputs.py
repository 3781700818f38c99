"""Input values for large operands, made at copy speed.

A random generator makes 250-300 million values a second on one CPU core, so drawing a
multi-GiB KV cache for every point of a sweep costs more than timing it. tiled_normal()
draws one block of PERIOD normal values per (seed, dtype, device), once, and fills a
tensor of any size by repeating it: a copy, 40x faster than drawing on a CPU. The block is
centred (its mean subtracted), so a sum over many periods stays near 0.

PERIOD is a prime, so a value repeats only at offsets that are multiples of it. Every
stride of a tensor here is a product of small factors (powers of two, head counts, 3 x
1024, ...), so two elements one head, batch or row apart never hold the same value unless
the offset between them is a multiple of PERIOD (4.2 million elements): a kernel that
reads the wrong head or the wrong batch gets other values and fails the correctness gate,
and no hardware compresses the data (it is random at every granule). Operands that must
differ (q, k and v) take different seeds.
"""
from __future__ import annotations

import functools
import math

import torch

PERIOD = 4_194_301  # a prime near 2**22


@functools.lru_cache(maxsize=16)
def _block(seed: int, dtype: torch.dtype, device: str) -> torch.Tensor:
    gen = torch.Generator(device=device).manual_seed(seed)
    block = torch.randn(PERIOD, device=device, generator=gen)
    # centred: a tensor of many periods sums to about 0 rather than to periods x the block's
    # sum (about +-2,000), which passed fp16's 65,504 from 256 MiB up and turned a 16-bit
    # stream.read's sum into inf
    return (block - block.double().mean().float()).to(dtype)


def tiled_normal(shape, dtype: torch.dtype, device, seed: int) -> torch.Tensor:
    """Return a contiguous tensor of shape and dtype on device holding standard normal
    values: the seed's block of PERIOD values, repeated (see the module docstring)."""
    n = math.prod(shape)
    out = torch.empty(n, dtype=dtype, device=device)
    if out.device.type == "meta":  # shapes without data (bench/aot/table.py plans on the meta device)
        return out.view(shape)
    block = _block(seed, dtype, str(out.device))
    whole, rest = divmod(n, PERIOD)
    if whole:
        out[:whole * PERIOD].view(whole, PERIOD).copy_(block)  # broadcast: one copy per period
    if rest:
        out[whole * PERIOD:].copy_(block[:rest])
    return out.view(shape)


def making_bytes() -> int:
    """Return the most _block holds while it makes a block: its fp32 draw and that draw's
    float64 copy, 12 bytes a value (48 MiB), before the block is cached (cached_bytes)."""
    return 12 * PERIOD


def cached_bytes() -> int:
    """Return about how many bytes the cached random blocks hold (each PERIOD values of at
    most 4 bytes): counted by the memory budget (bench/measure/memory.py)."""
    return _block.cache_info().currsize * PERIOD * 4
