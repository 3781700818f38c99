"""Where each memory level really ends (ARCHITECTURE.md, rules 11 and 12).

A cache's reported size is not where the hardware stops serving from it: an H200 reports a
60 MiB L2 whose reread plateau ends near 23 MiB (its two partitions), and a CPU VM may
report its host's 300 MiB L3 and reach DRAM speed from 64 MiB. So each level gets two
measured sizes from the warm stream sweep (an envelope: the best GB/s at each working set):

    edge   the largest working set still on the level's plateau, when the sweep shows the
           fall after it (the knee where bandwidth drops toward the next level); None when
           the plateau has no measured end at or below the reported size
    reach  the smallest working set past the edge that already runs at the next outer
           level's speed (within REL_TOL of that level's plateau median); None when the
           sweep never gets there or the outer level has no roof

A level's capacity is its edge (its reported size when there is none); a warm point is
served by a level up to its reach (BAND_FACTOR x capacity when there is none). These
functions read an envelope only, so a sweep can call them on the rows it has so far
(measured_levels, below).
"""
from __future__ import annotations

import pandas as pd


def plateau(values, rel_tol: float = 0.10) -> tuple[int, int]:
    """Return (first, last) index of the contiguous run around the maximum whose every
    value is at least (1 - rel_tol) x the maximum."""
    vals = list(values)
    top = max(range(len(vals)), key=vals.__getitem__)
    floor = (1 - rel_tol) * vals[top]
    lo = hi = top
    while lo > 0 and vals[lo - 1] >= floor:
        lo -= 1
    while hi < len(vals) - 1 and vals[hi + 1] >= floor:
        hi += 1
    return lo, hi


def measured_edge(env: pd.DataFrame, lo: float, fit_hi: float, size: float, rel_tol: float,
                  min_sizes: int = 2) -> int | None:
    """Return a level's measured edge from env (an envelope sorted by working set, with
    working_set_bytes and gbps): its plateau is found in the window [lo, fit_hi] (within
    rel_tol of the window's best, min_sizes sizes or more) and followed past the window
    while the bandwidth stays on it; the edge is the plateau's last size when a size after it,
    at or below the reported size, falls below the plateau. None when there is no plateau or
    no fall is measured by the reported size (the level may hold all it reports)."""
    if env.empty:
        return None
    ws, gbps = env["working_set_bytes"].astype(float), env["gbps"].astype(float)
    window = env[(ws >= lo) & (ws <= fit_hi)]
    if len(window) < min_sizes:
        return None
    a, b = plateau(window["gbps"], rel_tol)
    if b - a + 1 < min_sizes:
        return None
    floor = (1 - rel_tol) * float(window["gbps"].iloc[a:b + 1].max())
    edge = int(window["working_set_bytes"].iloc[b])
    for w, g in zip(ws[ws > edge], gbps[ws > edge]):
        if w > size:
            return None
        if g < floor:
            return edge
        edge = int(w)
    return None


def measured_reach(env: pd.DataFrame, edge: float, outer_median: float, rel_tol: float) -> int | None:
    """Return the smallest working set past edge whose bandwidth is within rel_tol of the
    next outer level's plateau median (at most (1 + rel_tol) x it), or None."""
    if env.empty or not outer_median:
        return None
    past = env[env["working_set_bytes"].astype(float) > edge]
    hits = past[past["gbps"].astype(float) <= (1 + rel_tol) * outer_median]
    return int(hits["working_set_bytes"].iloc[0]) if not hits.empty else None


def level_sizes(roofs, caches) -> list[tuple[str, int, int | None]]:
    """Return [(cache name, capacity, reach or None)] innermost first: the capacity is the
    level roof's measured edge (extra "edge_bytes") or the reported size, the reach its
    extra "reach_bytes". roofs: Roof records (or dicts) as derived; caches: [(name, bytes)]."""
    by_name = {}
    for r in roofs or ():
        get = r.get if isinstance(r, dict) else lambda k, default=None, r=r: getattr(r, k, default)
        if get("kind") == "bandwidth" and get("source", "measured") == "measured":
            by_name.setdefault(get("name"), get("extra") or {})
    out = []
    for name, size in caches:
        extra = by_name.get(name, {})
        out.append((name, int(extra.get("edge_bytes") or size), extra.get("reach_bytes")))
    return out
