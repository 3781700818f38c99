"""The stream family's working-set sweep: the sizes each stream kernel runs at, from inside
the first cache to past the last level, and the rule that stops the sweep where the off-chip
rate has settled (ARCHITECTURE.md rules 5 and 11). bench/ops/stream.py's kernels and reread
take their sizes from here."""
from __future__ import annotations

import math

from bench.measure.registry import geometric
from bench.policy import DEFAULT, Policy
from bench.util import fmt_bytes

GPU_MIN_WS = 4 * 2**20  # below this a GPU stream call lasts under a microsecond or two: the launch floor
# the largest working set planned (rule 16 may cut it): 4 GiB on a CPU, where 4x a large
# L3 (300 MiB on some VMs) needs two sizes past 1.2 GiB; 2 GiB on a GPU (4x a 128 MiB L2)
STREAM_CAP_BYTES = {"cpu": 4 * 2**30, "cuda": 2 * 2**30}
QUICK_CPU_PAST_FLOOR = DEFAULT.quick_past_floor  # a CPU's quick sweep ends at this x the off-chip floor
                              # (4x: 16x the LLC): three sizes in the off-chip band, enough for its roof where
                              # a VM's noisy DRAM rate does not settle (each larger size costs seconds to fill
                              # and check); the number is the Policy's (bench/policy.py)


CACHE_NEIGHBOURS = (0.5, 0.75, 1.0, 1.5, 2.0)  # sizes placed around every reported cache (rule 11's edges)
NEAR_OCTAVE = 0.15   # an extra size this close (in octaves) to a swept one adds nothing


def around_caches(device, lo: int, hi: int) -> list[int]:
    """Return working sets at CACHE_NEIGHBOURS x each cache's reported total (4 KiB-rounded),
    within [lo, hi]: whatever the sweep's density, a level's measured edge and reach rest on
    points beside its reported size."""
    out = set()
    for c in getattr(device, "caches", ()):
        for f in CACHE_NEIGHBOURS:
            v = int(round(f * c.total_bytes / 4096)) * 4096
            if lo <= v <= hi:
                out.add(v)
    return sorted(out)


def with_sizes(sizes: list[int], extra: list[int]) -> list[int]:
    """Return sizes with extra merged in, sorted, leaving out an extra size within NEAR_OCTAVE
    of one already there (a two-per-octave sweep already stands beside it)."""
    out = list(sizes)
    for v in extra:
        if all(abs(math.log2(v / s)) > NEAR_OCTAVE for s in out):
            out.append(v)
    return sorted(out)


def ws_sweep(device, quick: bool) -> list[int]:
    """Return working sets from 16 KiB (inside any L1; GPU_MIN_WS on a GPU) up to the fixed
    cap STREAM_CAP_BYTES (4 GiB on a CPU, 2 GiB on a GPU; a CPU's quick run stops at
    QUICK_CPU_PAST_FLOOR x the off-chip floor); one size per octave in quick runs,
    two otherwise, except on a GPU's off-chip plateau (4x L2 and up), where one per octave
    shows the same flat line. The sweep does not run to the cap: it stops growing where the
    off-chip rate has settled (offchip_settled, ARCHITECTURE.md rule 5), and the memory budget
    skips what would not fit (rule 16). (On a GPU the caches are measured by stream.reread; a
    stream call under GPU_MIN_WS measures the launch, ARCHITECTURE.md rule 15.)"""
    llc = device.llc_bytes
    lo = GPU_MIN_WS if device.kind == "cuda" else 16 * 2**10
    cap = STREAM_CAP_BYTES.get(device.kind, 4 * 2**30)
    if quick and device.kind == "cpu" and llc:
        cap = min(cap, QUICK_CPU_PAST_FLOOR * offchip_floor(device))
    sizes = geometric(lo, max(cap, 2 * lo), 1 if quick else 2)
    if device.kind == "cuda" and not quick:
        past = [s for s in sizes if s >= 4 * llc]
        sizes = [s for s in sizes if s < 4 * llc] + sorted(set(past[::2] + past[-1:]))
    return with_sizes(sizes, around_caches(device, lo, sizes[-1])) if device.kind != "cuda" else sizes

def offchip_floor(device) -> int:
    """Return the smallest working set that may count as off-chip: the Policy's
    offchip_factor (4) x the last-level cache, the size rule 5 lets set the off-chip roof."""
    return DEFAULT.offchip_factor * device.llc_bytes


def offchip_settled(history, floor: int, policy: Policy = DEFAULT) -> str | None:
    """Return why a stream sweep need grow no further, or None: its tail is already the
    off-chip plateau the derivation will look for (ARCHITECTURE.md rule 5): the last sizes,
    at least Policy.settle_sizes of them spanning Policy.level_min_octaves or more, lie at or
    past floor, their rates agree within Policy.settle_tol (a tail falling by more is a set
    that still partly hits a fading last cache: a transition, or a roof read high), and a
    smaller size of the sweep ran more than a level step faster (the knee is behind them).
    Noise only slows, so two sizes of a falling tail agree whenever the first was slowed; a
    third shows whether it still falls (on one size per octave, a CPU's quick sweep, the
    first stop is its planned end). history: the sweep's measured (ws_bytes, rate) in order of size."""
    tail = []
    for ws, r in reversed(history):
        tail.insert(0, (ws, r))
        if len(tail) >= policy.settle_sizes and math.log2(tail[-1][0] / tail[0][0]) >= policy.level_min_octaves - 1e-9:
            break
    else:
        return None
    before = history[:len(history) - len(tail)]
    rates = [r for _, r in tail]
    if not before or tail[0][0] < floor or min(rates) <= 0:
        return None
    if (max(rates) / min(rates) > 1 + policy.settle_tol
            or max(r for _, r in before) <= max(rates) * (1 + policy.level_step)):
        return None
    return (f"the off-chip rate has settled: the {len(tail)} sizes from {fmt_bytes(tail[0][0])} to "
            f"{fmt_bytes(tail[-1][0])} agree within {policy.settle_tol:.0%}, past the knee (rule 5)")
