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

and skips the point with that sum in its reason (starting with SKIP_PREFIX) when it exceeds
the budget, after first letting go of the pools the point does not use.

On a CPU the budget is also at most RAM_SHARE of the machine's memory less what the process
holds when the budget is set (its base: the interpreter, torch and the libraries, a few
hundred MiB), so base + budget stays under half of RAM; and what the process holds beyond its
base at a point counts as held when it exceeds the pools and caches above (freed blocks the C
allocator keeps, buffers of the libraries). The largest sum a point ran at is the run's
predicted peak (Budget.peak, run.json's "memory"), an upper bound of its resident memory
beyond the base.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from bench.hw import device as devmod
from bench.measure.inputs import cached_bytes, making_bytes
from bench.util import Refusal, fmt_bytes

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


def resident_bytes() -> int | None:
    """Return the bytes this process has resident now (/proc/self/status VmRSS), None without /proc."""
    return _status_bytes("VmRSS")


def resident_peak_bytes() -> int | None:
    """Return the most bytes this process has had resident (VmHWM), None without /proc."""
    return _status_bytes("VmHWM")


def _status_bytes(key: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024  # kB
    except (OSError, ValueError, IndexError):
        pass
    return None


def available_bytes(device) -> int | None:
    """Return the memory available to a run on device now (bench.hw.device.free_memory_bytes);
    a datasheet part (a dry run's --device-spec, not here) has all of its memory free."""
    if (device.extra or {}).get("spec"):
        return device.memory_bytes
    return devmod.free_memory_bytes(device)


class BudgetError(Refusal):
    """A --max-memory value that cannot be read: one sentence, and its code (share_unknown,
    share_range, unreadable, not_positive)."""


DEFAULT_SHARE = 0.5   # a run's default budget: half the memory available when it starts
RAM_SHARE = 0.5       # on a CPU, base + budget never exceeds this share of the machine's memory
SKIP_PREFIX = "does not fit the memory budget"  # a row the budget skips: its reason starts so
FREE_PREFIX = "does not fit the free memory"    # and one past 90% of the device's free memory
# what a CPU point may add to the process's resident memory beyond its counted peak: the C
# allocator (glibc) keeps freed blocks of up to its mmap threshold (at most 32 MiB) in its heap and
# returns the heap's top only past its trim threshold (twice that), so a point's temporaries can
# grow the heap by up to 64 MiB where earlier freed blocks do not fit them
ALLOCATOR_SLACK = 64 * 2**20


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
                                  "device does not report: give a size like 8GiB.", "share_unknown")
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
                              "or a size like 8GiB.", "share_range")
        return Limit(share=pct / 100, text=t)
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KMGT]i?B?|B)?", t, re.IGNORECASE)
    if not m:
        raise BudgetError(f"cannot read --max-memory '{text}': write a size like 8GiB or 512MiB, or a share like 50%.",
                          "unreadable")
    unit = (m.group(2) or "B").upper()[0]
    n = int(float(m.group(1)) * {"B": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}[unit])
    if n <= 0:
        raise BudgetError(f"--max-memory must be above zero (got '{text}'): "
                          "write a size like 8GiB or a share like 50%.", "not_positive")
    return Limit(bytes=n, text=t)


def parse_budget(text: str, available: int | None) -> int:
    """Return the budget in bytes of a --max-memory text against `available` (read_limit,
    then Limit.resolve). Raises BudgetError with one sentence."""
    return read_limit(text).resolve(available)


def run_budget(device, limit: Limit | None = None) -> Budget:
    """Return the memory budget of a run on device (ARCHITECTURE.md, rule 16): limit (a
    --max-memory value) against the memory available now; by default DEFAULT_SHARE of it.
    On this machine's CPU the budget's base is the process's resident bytes now, and a share
    (the default too) is at most RAM_SHARE of the machine's memory less that base (ram_cap);
    a size in bytes is the user's own figure and stays as given."""
    limit = limit or Limit(share=DEFAULT_SHARE)
    bytes_ = limit.resolve(available_bytes(device))
    if device.kind != "cpu" or (device.extra or {}).get("spec"):
        return Budget(bytes_, transient=making_bytes())
    base = resident_bytes()
    if limit.bytes is None:
        cap = ram_cap(device.memory_bytes, base)
        bytes_ = cap if bytes_ is None else (bytes_ if cap is None else min(bytes_, cap))
    return Budget(bytes_, base=base, transient=making_bytes() + ALLOCATOR_SLACK)


def ram_cap(total: int | None, base: int | None) -> int | None:
    """Return RAM_SHARE x total - base (at least 0): what a run holding base already may add
    and stay under that share of the machine's memory; None when either is unknown."""
    if total is None or base is None:
        return None
    return max(0, int(RAM_SHARE * total) - base)


@dataclass
class Budget:
    """The bytes a run may hold beyond its base (None: unlimited) and what counts against
    them besides the pools: fixed holdings such as the flush buffer (name -> bytes). base:
    the process's resident bytes when the budget was set (a CPU run; None elsewhere, where
    only the counted holdings are held); transient: what any point may add for a moment beyond
    its own peak (inputs.making_bytes: a random block being made; on a CPU ALLOCATOR_SLACK);
    peak: the largest total a point ran at (note)."""
    limit: int | None
    fixed: dict = field(default_factory=dict)
    base: int | None = None
    transient: int = 0
    peak: int = 0

    def counted(self) -> int:
        """Return the pools, the fixed holdings and the cached random blocks."""
        return sum(held().values()) + sum(self.fixed.values()) + cached_bytes()

    def held(self) -> int:
        """Return what counts as held now: the counted holdings, or with a base, what the
        process holds beyond it when that is more (the allocator's kept blocks, the libraries')."""
        rss = resident_bytes() if self.base is not None else None
        return max(self.counted(), rss - self.base) if rss is not None else self.counted()

    def total(self, need: int, pools: dict, extra: dict | None = None) -> int:
        """Return what the run would hold at a point's peak: held now + the growth of its pools
        (a grown pool replaces the old one) + need (its own peak) + extra (buffers it adds)
        + transient."""
        now = held()
        growth = sum(max(0, b - now.get(k, 0)) for k, b in pools.items())
        return self.held() + growth + need + sum((extra or {}).values()) + self.transient

    def note(self, need: int, pools: dict, extra: dict | None = None) -> None:
        """Record that a point runs (its inputs are made next): peak becomes its total when larger."""
        self.peak = max(self.peak, self.total(need, pools, extra))

    def record(self) -> dict:
        """Return run.json's "memory": the budget, the base, the predicted peak (base + peak)
        and the resident peak measured so far (VmHWM), in bytes (None where unknown)."""
        return {"budget_bytes": self.limit, "base_bytes": self.base,
                "predicted_peak_bytes": (self.base or 0) + self.peak if self.peak else None,
                "measured_peak_bytes": resident_peak_bytes() if self.base is not None else None}

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
            total = self.total(need, pools, extra)
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
        if self.transient:
            parts.append(f"transients {fmt_bytes(self.transient)} (a random block being made"
                         + (", allocator slack)" if self.base is not None else ")"))
        held_b = self.held()
        if held_b:
            parts.append(f"{fmt_bytes(held_b)} already held (pools, flush buffer, random blocks"
                         + (", allocator and libraries beyond the base)" if self.base is not None else ")"))
        return (f"{SKIP_PREFIX}: needs about {fmt_bytes(total)} ({'; '.join(parts)}) "
                f"but --max-memory is {fmt_bytes(self.limit)}")

    def describe(self) -> str:
        return "unlimited" if self.limit is None else fmt_bytes(self.limit)
