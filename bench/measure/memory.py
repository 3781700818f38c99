"""The memory budget (ARCHITECTURE.md, rule 16): a run never holds more than --max-memory.

The budget is a number of bytes, by default half the memory available when the run starts
(MemAvailable on a CPU, the free memory of a GPU). Before a point makes its inputs the
runner adds up what it would hold at once:

    held pools       shared inputs kept across points (the stream family's random pool per
                     dtype, grown to exactly what a point asks, released when no later
                     point of the plan uses it)
    held caches      the cold-mode flush buffer once made, the random blocks of bench/measure/inputs.py
    the point        its inputs, outputs and float64 reference at their peak (Op.memory)
    pool growth      a pool's new size replaces the old (the smaller one is freed first)

and skips the point with that sum in its reason when it exceeds the budget, after first
letting go of the pools the point does not use. The interpreter, torch and the libraries
themselves are not counted (a fixed few hundred MiB: REFERENCE.md, "--max-memory").
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from bench.hw import device as devmod
from bench.measure.inputs import cached_bytes
from bench.util import fmt_bytes

_POOLS: dict = {}  # key -> tensor: shared inputs held across points


def pool(key, n: int, make: Callable[[int], torch.Tensor]) -> torch.Tensor:
    """Return the pool under key with at least n elements: make(n) when there is none or it
    is smaller (the smaller one is released first, so the two never coexist)."""
    t = _POOLS.get(key)
    if t is None or t.numel() < n:
        _POOLS.pop(key, None)
        del t
        t = make(n)
        _POOLS[key] = t
    return t


def held() -> dict:
    """Return key -> bytes of every pool held now."""
    return {k: t.numel() * t.element_size() for k, t in _POOLS.items()}


def release(keys=None) -> None:
    """Release the pools under keys (all when None)."""
    for k in list(_POOLS) if keys is None else list(keys):
        _POOLS.pop(k, None)


def available_bytes(device) -> int | None:
    """Return the memory available to a run on device now (bench.hw.device.free_memory_bytes);
    a datasheet part (a dry run's --device-spec, not here) has all of its memory free."""
    if (device.extra or {}).get("spec"):
        return device.memory_bytes
    return devmod.free_memory_bytes(device)


class BudgetError(ValueError):
    """A --max-memory value that cannot be read."""


DEFAULT_SHARE = 0.5   # a run's default budget: half the memory available when it starts


@dataclass(frozen=True)
class Limit:
    """A --max-memory value, read once: a size in bytes, or a share of the memory available
    when the run starts. The default (no --max-memory) is Limit(share=DEFAULT_SHARE)."""
    bytes: int | None = None
    share: float | None = None
    text: str = ""

    def resolve(self, available: int | None) -> int | None:
        """Return the budget in bytes against `available` (None: the device reports no
        free memory, so the default share is unlimited). Raises BudgetError for a share
        the user gave of memory the device does not report."""
        if self.bytes is not None:
            return self.bytes
        if available is None:
            if self.text:
                raise BudgetError(f"--max-memory '{self.text}' is a share of the available memory, which this "
                                  "device does not report: give a size like 8GiB.")
            return None
        return int(available * self.share)


def read_limit(text: str) -> Limit:
    """Return the Limit of a --max-memory value: '8GiB', '512MiB', '4096' or '50%'.
    Raises BudgetError with one sentence."""
    t = str(text).strip()
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*%", t)
    if m:
        pct = float(m.group(1))
        if not 0 < pct <= 100:
            raise BudgetError(f"--max-memory takes a share of the available memory between 0 and 100% (got '{text}'), "
                              "or a size like 8GiB.")
        return Limit(share=pct / 100, text=t)
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMGT]i?B?|B)?", t, re.IGNORECASE)
    if not m:
        raise BudgetError(f"cannot read --max-memory '{text}': write a size like 8GiB or 512MiB, or a share like 50%.")
    unit = (m.group(2) or "B").upper()[0]
    n = int(float(m.group(1)) * {"B": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}[unit])
    if n <= 0:
        raise BudgetError(f"--max-memory must be above zero (got '{text}'): "
                          "write a size like 8GiB or a share like 50%.")
    return Limit(bytes=n, text=t)


def parse_budget(text: str, available: int | None) -> int:
    """Return the budget in bytes of a --max-memory text against `available` (read_limit,
    then Limit.resolve). Raises BudgetError with one sentence."""
    return read_limit(text).resolve(available)


def run_budget(device, limit: Limit | None = None) -> Budget:
    """Return the memory budget of a run on device (ARCHITECTURE.md, rule 16): limit (a
    --max-memory value) against the memory available now; by default DEFAULT_SHARE of it."""
    return Budget((limit or Limit(share=DEFAULT_SHARE)).resolve(available_bytes(device)))


@dataclass
class Budget:
    """The bytes a run may hold (None: unlimited) and what counts against them besides the
    pools: fixed holdings such as the flush buffer (name -> bytes)."""
    limit: int | None
    fixed: dict = field(default_factory=dict)

    def held(self) -> int:
        return sum(held().values()) + sum(self.fixed.values()) + cached_bytes()

    def shortfall(self, need: int, pools: dict, extra: dict | None = None) -> str | None:
        """Return why a point needing `need` bytes of its own and the pools `pools` (key ->
        bytes, held at that size afterwards) does not fit the budget, or None when it fits.
        Pools the point does not use are released first when that makes it fit."""
        if self.limit is None:
            return None
        for attempt in range(2):
            now = held()
            growth = sum(max(0, b - now.get(k, 0)) for k, b in pools.items())
            extra_b = sum((extra or {}).values())
            total = self.held() + growth + need + extra_b
            if total <= self.limit:
                return None
            others = [k for k in now if k not in pools]
            if attempt == 0 and others:
                release(others)  # made again at copy speed by a later point that needs them
                continue
        parts = [f"inputs and reference {fmt_bytes(need)}"]
        if growth:
            parts.append(f"pool growth {fmt_bytes(growth)}")
        if extra_b:
            parts.append(", ".join(f"{k} {fmt_bytes(v)}" for k, v in (extra or {}).items()))
        held_b = self.held()
        if held_b:
            parts.append(f"{fmt_bytes(held_b)} already held (pools, flush buffer, random blocks)")
        return (f"does not fit the memory budget: needs about {fmt_bytes(total)} ({'; '.join(parts)}) "
                f"but --max-memory is {fmt_bytes(self.limit)}")

    def describe(self) -> str:
        return "unlimited" if self.limit is None else fmt_bytes(self.limit)
