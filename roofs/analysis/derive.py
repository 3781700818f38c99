"""From measurement rows to roofs: derive() gathers every roof of a run.

Only trustworthy rows set roofs (roofs/analysis/trust.py). Every roof carries the spread of its row.

Bandwidth roofs (ARCHITECTURE.md, rules 5, 10, 11): a cache's capacity is its measured
plateau edge (roofs/analysis/levels.py), its reported size where the sweep shows no fall. The
off-chip roof (dram/hbm) comes only from working sets of at least 4x the last-level cache
(its edge, and past the edge's reach; never under 4x a reported size the sweep does not
contradict), filtered before the size envelope, from at least two sizes, a direction far above
the others or its own passes at one size left out unless a second size sides with it
(consistent_offchip); a cache level's roof comes from its plateau, the sizes from twice the next inner
level's reported size to 3/4 of its own or its edge (clear of the transition between two
levels), within 15% of the best (10% off chip), at least two sizes, found among the sweep's
rows (else the fastest kernel's own plateau) and valued over every pass (cache_plateau); a
plateau within 10% of the next outer level's is still the roof of that band, labelled indistinct, and one more than
10% below it gives none. The off-chip window counts rows with enough samples whatever their
spread (usable_offchip: a noisy host's spread), at or past its start by size bin. The value
is the best median over every kernel, implementation and dtype on the plateau, named with the
row it came from. Each level with a roof gets direction roofs ("<level>.read", ".write",
".copy") from the same window, one class of kernels at a time.

Compute roofs (rule 10) are roofs/analysis/compute.py's. Probe roofs
(roofs/analysis/launch_floor.py, rule 5): the l1 roof from probe.l1's plateau over its span
sizes (the faster of it and a size-window l1 roof), and the launch floors. Each row's bound
(rule 12) from these roofs is roofs/analysis/bounds.py's.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from bench.util import fmt_bytes, fmt_num, number, offchip_level
from roofs.analysis.compute import compute_notes, compute_roofs
from roofs.analysis.launch_floor import launch_roofs
from roofs.analysis.levels import measured_edge, measured_reach, plateau
from roofs.analysis.links import link_roofs
from roofs.analysis.roofline import DIRECTIONS, OLD_RUN_STREAM_ARRAYS, Roof, direction_of
from roofs.analysis.specs import cpu_missing_units
from roofs.analysis.trust import (
    TRUST_SPREAD,
    row_spread,
    trusted,
    untrusted_text,
    usable_floor,
)

DRAM_FACTOR = 4      # memory roofs need working sets >= 4x the last-level cache
BAND_FACTOR = 4      # a warm working set up to 4x a level's capacity is bounded by that level
FIT_FRACTION = 0.75  # a cache plateau uses working sets up to 3/4 of the cache (what LRU with real associativity keeps)
CLEAR_FACTOR = 2     # ... and from 2x the next inner level's capacity (clear of the transition)
REL_TOL = 0.10       # plateau: within 10% of its best point; a level within 10% of the next outer is indistinct
CACHE_REL_TOL = 0.15  # a cache plateau may spread 15%: read-only and read-write kernels differ more there
MIN_SIZES = 2        # every bandwidth roof rests on at least two working-set sizes
CONSISTENT_MARGIN = 0.75  # an off-chip direction's best at a size past 1.75x the others there needs a second size
NOISY_SPREAD = 0.50  # an off-chip row spread this much is broken, not a noisy host (those spread 10-35%)
SUSTAINED_MODE = "sustained"  # rows of the sustained phase (bench/run/sustain_phase.py), read by sustained.py

BINS_PER_OCTAVE = 16


def size_bin(nbytes):
    """Return the nearest 1/16-octave bin of each working set (a Series or an array): kernels
    whose element count was rounded from the same target size (3 arrays do not divide every
    size) share a bin."""
    return np.round(np.log2(nbytes.astype(float)) * BINS_PER_OCTAVE).astype(int)


def usable_offchip(rows: pd.DataFrame) -> pd.Series:
    """Return, per row, whether it may count toward the off-chip roof (ARCHITECTURE.md, rule
    11): a trusted row, or an ok row with at least TRUST_MIN_SAMPLES samples spread under
    NOISY_SPREAD, not flagged by the runner. A neighbour's traffic only ever slows a read, so on a
    noisy host a row's spread is the host's, and the ceiling keeps each size's best row; the
    roof says how many of its sizes rest on such rows (extra "noisy_sizes")."""
    ok = usable_floor(rows)  # enough samples (or trusted), no runner flag; a spread limit besides
    if "samples" in rows.columns:
        ok = ok & (trusted(rows) | ~(row_spread(rows) >= NOISY_SPREAD))
    return ok


def at_or_past(nbytes, start: float):
    """Return whether each working set (a Series, an array or one number) lies at or past
    start by size bin (size_bin's 1/16 octave): a kernel whose element count was rounded
    just under start (a triad of 3 arrays at 127.9995 MiB for 128 MiB) is at start, as its
    sweep meant it."""
    sizes = np.asarray(nbytes, dtype=float)
    if start <= 0:
        return sizes >= 0
    with np.errstate(divide="ignore", invalid="ignore"):  # a 0-byte working set is before any start
        return size_bin(sizes) >= size_bin(np.asarray(float(start)))


def envelope(rows: pd.DataFrame, value: str = "gbps") -> pd.DataFrame:
    """Return, for each working-set size bin, the row with the highest value (sorted by size)."""
    ok = rows[(rows["status"] == "ok") & rows[value].notna()].reset_index(drop=True)
    if ok.empty:
        return ok
    best = ok.loc[ok.groupby(size_bin(ok["working_set_bytes"]))[value].idxmax()]
    return best.sort_values("working_set_bytes").reset_index(drop=True)


OVERHEAD_CALL_S = 50e-6  # calls shorter than this can be dominated by the per-call launch and loop overhead


def _why_no_plateau(window: pd.DataFrame, hi: int) -> str:
    """Return what the data shows in a window without a plateau: one size only; rates still
    rising at the window's edge, blamed on per-call overhead only when the calls there are
    short (under OVERHEAD_CALL_S); else the rates disagree, given with their sizes."""
    if len(window) == 1:
        return "only one working-set size in its window"
    ws, gbps = window["working_set_bytes"].astype(float), window["gbps"].astype(float)
    moved = window["bytes"].astype(float) if "bytes" in window else ws
    call_s = float((moved / (gbps * 1e9)).max())
    rates = (f"{fmt_num(gbps.min())} to {fmt_num(gbps.max())} GB/s over {fmt_bytes(ws.min())} .. {fmt_bytes(ws.max())}")
    if hi == len(window) - 1:
        if call_s < OVERHEAD_CALL_S:
            return (f"still rising at the window's edge, {rates}, with calls of {call_s * 1e6:.3g} us: "
                    "per-call overhead dominates at these sizes")
        return f"still rising at the window's edge: the rates disagree, {rates}"
    return f"no flat stretch: the rates disagree, {rates}"


def _roof_from(name: str, window: pd.DataFrame, rel_tol: float, capacity: int | None = None):
    """Return (Roof or None, note) for the plateau inside window (an envelope slice)."""
    if window.empty:
        return None, f"{name}: no trustworthy measured working set in its size window"
    lo, hi = plateau(window["gbps"], rel_tol)
    plat = window.iloc[lo:hi + 1]
    if len(plat) < MIN_SIZES:
        why = _why_no_plateau(window, hi)
        return None, f"{name}: no plateau of {MIN_SIZES}+ sizes ({len(window)} sizes in its window, {why})"
    note = f"best median over {plat['impl'].nunique()} impl(s) and {plat['op'].nunique()} op(s) on the plateau"
    return _best_of(name, plat, note, {"capacity_bytes": capacity} if capacity else {}), ""


KERNEL = ["op", "impl", "dtype"]  # one kernel: a cache plateau of its own where the envelope has none


def sweep_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """Return rows of pass 1, the sweep (every row where the run has no "pass" column)."""
    if rows.empty or "pass" not in rows:
        return rows
    return rows[rows["pass"].fillna(1).astype(int) == 1]


def _plateau_bins(env: pd.DataFrame, rel_tol: float):
    """Return the size bins of env's plateau (levels.plateau), or None under MIN_SIZES sizes."""
    if env.empty:
        return None
    lo, hi = plateau(env["gbps"], rel_tol)
    return set(size_bin(env["working_set_bytes"].iloc[lo:hi + 1])) if hi - lo + 1 >= MIN_SIZES else None


def _usable_at(rows: pd.DataFrame, bins: set | None = None) -> pd.DataFrame:
    """Return the envelope of rows' usable rows (usable_offchip) over every pass, at bins (size
    bins) or all: a plateau's sizes are the sweep's, and a broken revisit at one of them leaves
    the size its usable rows' best."""
    env = envelope(rows[usable_offchip(rows)]) if not rows.empty else rows
    return env[size_bin(env["working_set_bytes"]).isin(bins)] if bins is not None and not env.empty else env


def _kernel_plateau(rows: pd.DataFrame, rel_tol: float):
    """Return (kernel, its plateau's rows) of the fastest of the kernels' own plateaus in a
    window (KERNEL: each kernel's sweep sizes alone, valued over every pass), or None when
    none reaches the window's fastest usable row (a row of the window would sit above it)."""
    found = []
    for key, mine in rows.groupby(KERNEL, sort=False):
        bins = _plateau_bins(usable_envelope(sweep_rows(mine)), rel_tol)
        if bins is not None:
            plat = _usable_at(mine, bins)
            found.append((float(plat["gbps"].max()), key, plat))
    if not found:
        return None
    best, key, plat = max(found, key=lambda f: f[0])
    return (key, plat) if best >= float(_usable_at(rows)["gbps"].max()) else None


def cache_plateau(name: str, rows: pd.DataFrame, rel_tol: float, capacity: int | None = None):
    """Return (Roof or None, note) of a cache level or direction from the rows of its window
    (ARCHITECTURE.md, rule 11): the plateau is found among the sweep's rows (sweep_rows: every
    size measured under the same conditions; a revisit pass that caught the host faster at
    the one size it measures again would stand that size above its neighbours and break the
    plateau), over their usable envelope (usable_envelope), and valued by the best usable row
    at its sizes over every pass (noise only slows a read); else the fastest of the kernels'
    own plateaus (_kernel_plateau: kernels swept at different sizes interleave, and a slower
    kernel's sizes between another's are no dip in its plateau), where it reaches the
    window's fastest row; else, with MIN_SIZES sizes or more whose rates are not still rising
    at the window's edge (a kernel's own per-call limit, not the cache's), the window's best
    row labelled unsteady (_ceiling_from: a noisy host's shared cache, as off chip)."""
    env = usable_envelope(sweep_rows(rows))
    bins = _plateau_bins(env, rel_tol)
    extra = {"capacity_bytes": capacity} if capacity else {}
    if bins is not None:
        plat = _usable_at(rows, bins)
        note = f"best median over {plat['impl'].nunique()} impl(s) and {plat['op'].nunique()} op(s) on the plateau"
        return with_noisy_sizes(_best_of(name, plat, note, extra), plat), ""
    found = _kernel_plateau(rows, rel_tol) if not env.empty else None
    if found is None and len(env) >= MIN_SIZES and int(env["gbps"].to_numpy().argmax()) < len(env) - 1:
        return _ceiling_from(name, _usable_at(rows), rows, rel_tol, "cache"), ""   # not still rising: unsteady
    if found is None:
        return _roof_from(name, env, rel_tol, capacity)
    key, plat = found
    note = f"{key[1]}'s own plateau (the sizes' envelope, other kernels' sizes between its own, has none)"
    return with_noisy_sizes(_best_of(name, plat, note, extra), plat), ""


def _best_of(name: str, sizes: pd.DataFrame, note: str, extra: dict) -> Roof:
    """Return the bandwidth roof of the fastest row among sizes (envelope rows), with the
    sizes' range and median, and that row's spread."""
    best = sizes.loc[sizes["gbps"].idxmax()]
    spread = row_spread(sizes.loc[[best.name]]).iloc[0]
    return Roof(
        kind="bandwidth", name=name, value=float(best["gbps"]), unit="GB/s", source="measured",
        op=str(best["op"]), impl=str(best["impl"]), dtype=str(best["dtype"]), point_id=str(best["point_id"]),
        working_set_bytes=int(best["working_set_bytes"]),
        plateau_bytes=(int(sizes["working_set_bytes"].min()), int(sizes["working_set_bytes"].max())),
        plateau_points=len(sizes),
        plateau_values=(float(sizes["gbps"].min()), float(sizes["gbps"].max())),
        spread=number(spread),
        note=note, extra={"plateau_median": float(sizes["gbps"].median()), **extra},
    )


def pass_range(rows: pd.DataFrame) -> tuple[float, float] | None:
    """Return the (lowest, highest) of the per-pass bests in rows: for each pass (the sweep is
    pass 1, each revisit one more; the "pass" column, 1 where absent) the best GB/s over its
    rows, or None when rows hold a single pass."""
    if rows.empty:
        return None
    passes = rows["pass"].fillna(1).astype(int) if "pass" in rows else pd.Series(1, index=rows.index)
    if passes.nunique() < 2:
        return None
    best = rows.groupby(passes)["gbps"].max()
    return float(best.min()), float(best.max())


def _ceiling_from(name: str, window: pd.DataFrame, rows: pd.DataFrame, rel_tol: float, what: str = "off-chip"):
    """Return the roof of an off-chip (what) or cache window whose sizes do not agree within
    rel_tol (rule 11): a neighbour's traffic only ever slows a read, so the ceiling is the best
    of every size's best pass, labelled unsteady with the sizes' range and the passes' range;
    None with fewer than MIN_SIZES sizes."""
    if len(window) < MIN_SIZES:
        return None
    lo, hi = float(window["gbps"].min()), float(window["gbps"].max())
    passes = pass_range(rows)
    label = f"unsteady: sizes {lo:,.3g}-{hi:,.3g} GB/s at their best, no {MIN_SIZES} within {rel_tol:.0%}"
    if passes:
        label += f"; passes {passes[0]:,.3g}-{passes[1]:,.3g} GB/s"
    return _best_of(name, window, f"the best of {len(window)} {what} sizes' best passes ({label})",
                    {"steady": False, "unsteady": label, **({"passes": list(passes)} if passes else {})})


def offchip_roof(name: str, rows: pd.DataFrame, rel_tol: float):
    """Return (Roof or None, note) of the off-chip level or one of its directions from its
    window's rows (ARCHITECTURE.md, rule 11): each size's best pass (the envelope); its
    plateau where two or more sizes agree within rel_tol (steady), else the ceiling of
    _ceiling_from, so two or more measured sizes always give a roof. extra "passes" gives
    the range of the per-pass bests where the run revisited the sizes."""
    env = envelope(rows)
    roof, note = _roof_from(name, env, rel_tol)
    if roof is not None:
        passes = pass_range(rows)
        roof = replace(roof, extra={**roof.extra, "steady": True, **({"passes": list(passes)} if passes else {})})
    else:
        roof = _ceiling_from(name, env, rows, rel_tol)
    if roof is None:
        return None, note
    return with_noisy_sizes(roof, env), ""


def with_noisy_sizes(roof: Roof, env: pd.DataFrame) -> Roof:
    """Return roof with the count of its plateau's sizes (env: the envelope it came from) whose
    best rows spread past TRUST_SPREAD in extra "noisy_sizes" and its note (rule 11), as it is
    when none did."""
    lo, hi = roof.plateau_bytes
    sizes = env[(env["working_set_bytes"] >= lo) & (env["working_set_bytes"] <= hi)]
    noisy = int((~trusted(sizes)).sum()) if not sizes.empty else 0
    if not noisy:
        return roof
    note = f"{roof.note}; {noisy} of its {len(sizes)} sizes' best rows spread past {TRUST_SPREAD:.0%} (a noisy host)"
    return replace(roof, note=note, extra={**roof.extra, "noisy_sizes": noisy})


def stream_direction(rows: pd.DataFrame) -> pd.Series:
    """Return each stream row's direction class (roofline.direction_of): from read_bytes and
    write_bytes where the run has them, else from the op's arrays (OLD_RUN_STREAM_ARRAYS)."""
    rb = rows["read_bytes"] if "read_bytes" in rows else pd.Series(None, index=rows.index, dtype=float)
    wb = rows["write_bytes"] if "write_bytes" in rows else pd.Series(None, index=rows.index, dtype=float)
    out = []
    for op, r, w in zip(rows["op"], rb, wb):
        out.append(direction_of(r, w) or direction_of(*OLD_RUN_STREAM_ARRAYS.get(str(op), (None, None))))
    return pd.Series(out, index=rows.index, dtype=object)


def _direction_roofs(level: str, window_rows: pd.DataFrame, rel_tol: float, extra: dict,
                     offchip: bool = False) -> tuple[list[Roof], list[str]]:
    """Return the level's direction roofs (ARCHITECTURE.md, rule 11): for read, write and
    copy, the plateau of that class's rows alone in the level's window, named "<level>.<direction>"
    (offchip: the off-chip rule of offchip_roof)."""
    roofs, notes = [], []
    if window_rows.empty:
        return roofs, notes
    kinds = stream_direction(window_rows)
    for d in DIRECTIONS:
        mine = window_rows[kinds == d]
        if envelope(mine).empty:
            continue
        if offchip:
            roof, note = offchip_roof(f"{level}.{d}", mine, rel_tol)
        else:  # a cache's: the level's own rule (usable_envelope)
            roof, note = cache_plateau(f"{level}.{d}", mine, rel_tol)
        if roof is None:
            notes.append(note + f": {level}'s {d} points are bounded by the level's best")
        else:
            roofs.append(replace(roof, extra={**roof.extra, **extra, "level": level, "direction": d}))
    return roofs, notes


def cache_edges(env_warm: pd.DataFrame, caches, tol: float) -> dict:
    """Return {cache name: measured edge in bytes, or None}: each cache's window starts clear
    of the inner level's reported size (the inner level's transition lies between its edge
    and there) and ends at its own edge (roofs.analysis.levels.measured_edge)."""
    return {name: measured_edge(env_warm, CLEAR_FACTOR * (caches[i - 1][1] if i else 0), FIT_FRACTION * size,
                                size, tol, MIN_SIZES) for i, (name, size) in enumerate(caches)}


def _stream_levels(rows: pd.DataFrame, caches, rel_tol: float):
    """Return what bandwidth_roofs and offchip_window derive from: (the stream rows, the
    trustworthy ones, their warm ones, the warm rows' size envelope, caches as [(name,
    bytes)], each cache's measured edge)."""
    stream = rows[rows["family"] == "stream"] if "family" in rows else rows
    good = stream[trusted(stream)] if not stream.empty else stream
    warm = good[good["mode"] == "warm"] if not good.empty else good
    env_warm = envelope(warm)
    caches = [(str(n), int(b)) for n, b in caches]
    return stream, good, warm, env_warm, caches, cache_edges(env_warm, caches, max(rel_tol, CACHE_REL_TOL))


def offchip_window(rows: pd.DataFrame, caches, rel_tol: float = REL_TOL) -> tuple[int, int | None]:
    """Return (start, llc_edge) for a run's stream rows: the smallest working set that may set
    the off-chip roof (offchip_start) and the last-level cache's measured edge (None when the
    sweep shows none), as bandwidth_roofs computes them."""
    stream, good, _, env_warm, caches, edges = _stream_levels(rows, caches, rel_tol)
    if stream.empty:
        return int(DRAM_FACTOR * caches[-1][1]), None
    return offchip_start(good, env_warm, caches, edges, rel_tol), edges[caches[-1][0]]


def offchip_start(good: pd.DataFrame, env_warm: pd.DataFrame, caches, edges: dict, rel_tol: float = REL_TOL) -> int:
    """Return the smallest working set that may set the off-chip roof (ARCHITECTURE.md, rule
    11): DRAM_FACTOR x the last-level cache's reported size when no edge was measured; with a
    measured edge, the larger of DRAM_FACTOR x the edge and the LLC's reach against the
    sweep's tail (the median of its largest MIN_SIZES sizes), so no size still in the
    transition after the edge sets it. A reach never lies past DRAM_FACTOR x the reported
    size (capped_reach): no cache serves a working set that large, and a VM's memory that
    slows as the working set grows (364 MiB at 0.6x of 128 MiB) would otherwise push the
    window past all but one size. Where the reported size is plausible (the sweep reaches
    off-chip speed only past it: the reach lies beyond the reported size, or was not
    measured), the start is at least DRAM_FACTOR x the reported size: no cache serves that
    far, where a victim L3 (AMD's) still serves part of a set twice its size, so 4x a
    measured edge of half the L3 (64 MiB of a 32 MiB L3) read 74 GB/s against DRAM's 36-40.
    Where the sweep runs at off-chip speed inside the reported size, short of it (a VM that reports its
    host's 300 MiB L3, at DRAM speed from 64 MiB; H200's two-partition 60 MiB L2, at HBM speed
    from 45 MiB), the measured knee alone decides."""
    name, size = caches[-1]
    edge = edges.get(name)
    if not edge:
        return int(DRAM_FACTOR * size)
    tail = float(envelope(good).tail(MIN_SIZES)["gbps"].median())
    reach = capped_reach(measured_reach(env_warm, edge, tail, rel_tol), size)
    knee = int(max(DRAM_FACTOR * edge, reach or 0))
    # off-chip speed inside the reported size: not this cache's size. At exactly the size it is
    # no evidence: a set the cache's own size cannot all stay in it
    if reach is not None and reach < size:
        return knee
    return max(knee, int(DRAM_FACTOR * size))


def capped_reach(reach: int | None, reported: int) -> int | None:
    """Return a cache's measured reach, at most BAND_FACTOR x its reported size (None stays None)."""
    return None if reach is None else int(min(reach, BAND_FACTOR * reported))


def bandwidth_roofs(rows: pd.DataFrame, caches, memory_level: str = "dram",
                    rel_tol: float = REL_TOL) -> tuple[list[Roof], list[str]]:
    """Return (roofs, notes): one roof for the off-chip memory and one per cache level whose
    plateau the sweep shows, outermost first, each followed by its direction roofs
    ("<level>.read", ".write", ".copy"); notes say why a level got no roof.

    caches: [(name, total_bytes), ...] innermost first, as DeviceInfo lists them (the
    reported sizes). Each cache's capacity is its measured edge (roofs.analysis.levels) where the
    sweep shows one: a cache roof's extra records "capacity_bytes" (reported), "edge_bytes"
    and "reach_bytes" (measured, or None). Cache roofs use warm rows only (a cold row was
    flushed out of every cache); only trustworthy rows count (see trusted()).
    """
    stream, good, _, env_warm, caches, edges = _stream_levels(rows, caches, rel_tol)
    stream_warm = stream[stream["mode"] == "warm"] if not stream.empty else stream
    notes = []
    if not stream.empty and (stream["status"] == "ok").sum() > len(good):
        notes.append(f"stream rows that set no roof: {untrusted_text(stream)}")
    mem_rows, why = _offchip_rows(stream, good, env_warm, caches, edges, rel_tol)
    roofs, outer, level_notes = _offchip_level(memory_level, mem_rows, caches, edges, rel_tol)
    notes += why + level_notes
    for i in range(len(caches) - 1, -1, -1):
        name, size = caches[i]
        window = (CLEAR_FACTOR * (caches[i - 1][1] if i > 0 else 0),
                  min(FIT_FRACTION * size, edges[name]) if edges[name] else FIT_FRACTION * size)
        own, roof, level_notes = _cache_level(name, size, edges[name], window, env_warm, stream_warm, outer, rel_tol)
        roofs += own
        notes += level_notes
        outer = roof or outer
    return roofs, notes


def _offchip_rows(stream: pd.DataFrame, good: pd.DataFrame, env_warm: pd.DataFrame, caches, edges: dict,
                  rel_tol: float) -> tuple[pd.DataFrame, list[str]]:
    """Return (the rows in the off-chip window, notes): with no cache sizes known, the trusted
    rows at the largest two sizes measured; else the rows usable_offchip keeps at or past
    offchip_start."""
    if not caches:
        note = "no cache sizes known: the memory roof uses the largest working sets measured"
        if good.empty:
            return good, [note]
        return good[good["working_set_bytes"] >= envelope(good).tail(2)["working_set_bytes"].min()], [note]
    usable = stream[usable_offchip(stream)] if not stream.empty else stream
    if usable.empty:
        return usable, []
    return usable[at_or_past(usable["working_set_bytes"], offchip_start(good, env_warm, caches, edges, rel_tol))], []


def _offchip_level(memory_level: str, mem_rows: pd.DataFrame, caches, edges: dict,
                   rel_tol: float) -> tuple[list[Roof], Roof | None, list[str]]:
    """Return (the off-chip roof and its direction roofs, the off-chip roof or None, notes)
    from the rows of its window (offchip_roof; extra "from_bytes": the window's smallest size)."""
    mem_rows, untrusted = consistent_offchip(mem_rows, rel_tol)
    roof, note = offchip_roof(memory_level, mem_rows, rel_tol)
    if roof is None:
        edge = " (its measured edge)" if caches and edges[caches[-1][0]] else ""
        why = f"{note}: the sweep must reach {DRAM_FACTOR}x the last-level cache{edge} with {MIN_SIZES}+ sizes"
        return [], None, [*untrusted, why]
    roof = replace(roof, extra={**roof.extra, "from_bytes": int(mem_rows["working_set_bytes"].min())})
    own, why = _direction_roofs(memory_level, mem_rows, rel_tol, {}, offchip=True)
    return [roof] + own, roof, untrusted + why


def consistent_offchip(rows: pd.DataFrame, rel_tol: float = REL_TOL) -> tuple[pd.DataFrame, list[str]]:
    """Return (the off-chip window's rows without those the consistency rule does not trust,
    one note per row left out) (ARCHITECTURE.md, rule 11): a direction's best row at a size
    (its bin) more than CONSISTENT_MARGIN above the other directions' best there, or above
    its own direction's other passes there, is left out unless a second size of that
    direction sides with it (its best at least the geometric mean of the rate and the
    highest reading it outran: nearer the rate than the reading); the rule is applied again
    to what is left until every best row stands."""
    notes, rows = [], rows.reset_index(drop=True)  # a row is left out by its label: make the labels unique
    while True:
        found = _inconsistent_row(rows, rel_tol)
        if found is None:
            return rows, notes
        rows, notes = rows.drop(index=found[0]), notes + [found[1]]


def _inconsistent_row(rows: pd.DataFrame, rel_tol: float):
    """Return (index, note) of the first best row that consistent_offchip leaves out, or None."""
    if rows.empty or "gbps" not in rows:
        return None
    ok = rows[(rows["status"] == "ok") & rows["gbps"].notna()]
    kinds, bins = stream_direction(ok), size_bin(ok["working_set_bytes"])
    passes = ok["pass"].fillna(1).astype(int) if "pass" in ok else pd.Series(1, index=ok.index)
    for d in DIRECTIONS:
        mine = ok[kinds == d]
        best_per_bin = mine.groupby(bins[kinds == d])["gbps"].idxmax() if not mine.empty else {}
        for b, idx in dict(best_per_bin).items():
            rate = float(ok.at[idx, "gbps"])
            here = bins == b
            others = ok.loc[here & (kinds != d), "gbps"].max()
            revisits = ok.loc[here & (kinds == d) & (passes != passes[idx]), "gbps"].max()
            outran = [(ref, what) for ref, what in ((others, "the other directions' best at that size"),
                                                    (revisits, "its own other passes there"))
                      if not pd.isna(ref) and rate > (1 + CONSISTENT_MARGIN) * ref]
            if not outran:
                continue
            sides = (rate * max(ref for ref, _ in outran)) ** 0.5
            if (mine.loc[bins[kinds == d] != b, "gbps"] >= sides).any():
                continue
            why = " and ".join(f"{rate / ref:.2f}x {what} ({ref:,.3g})" for ref, what in outran)
            where = f"{ok.at[idx, 'op']} at {fmt_bytes(ok.at[idx, 'working_set_bytes'])}"
            return idx, (f"{d}: {rate:,.3g} GB/s from {where} is {why}, and no second size reaches {sides:,.3g} "
                         "(their geometric mean): not trusted, left out of the off-chip window")
    return None


def usable_envelope(rows: pd.DataFrame) -> pd.DataFrame:
    """Return the size envelope of rows' ok rows with every size whose fastest row is not
    usable_offchip left out: a noisy host only ever slows a read, so a kernel's row spread up
    to NOISY_SPREAD is the host's and its median stays a floor of the kernel's speed there;
    where the fastest kernel's row is broken past that, a slower kernel's row does not stand
    for the size (a quick CPU run's write at 18 GB/s stood in the L1 window for a reread
    at 285 and broke its plateau)."""
    env = envelope(rows)
    return env[usable_offchip(env)].reset_index(drop=True) if not env.empty else env


def _in_window(rows: pd.DataFrame, lo: float, hi: float) -> pd.DataFrame:
    """Return the rows whose working set lies in [lo, hi]."""
    if rows.empty:
        return rows
    return rows[(rows["working_set_bytes"] >= lo) & (rows["working_set_bytes"] <= hi)]


def _cache_level(name: str, size: int, edge: int | None, window: tuple, env_warm: pd.DataFrame,
                 stream_warm: pd.DataFrame, outer: Roof | None, rel_tol: float
                 ) -> tuple[list[Roof], Roof | None, list[str]]:
    """Return (the cache's roof and its direction roofs, its roof or None, notes): the plateau
    of the warm stream rows (stream_warm) in its window (cache_plateau, CACHE_REL_TOL), judged
    against the next outer level's roof (_distinct_from), with its reported size, measured edge
    and reach (capped_reach, on the trusted rows' envelope env_warm) in extra, and
    "noisy_sizes" where plateau sizes rest on rows spread past TRUST_SPREAD, as the off-chip
    roof's do (rule 11); its direction roofs from the same rows."""
    tol = max(rel_tol, CACHE_REL_TOL)
    in_window = _in_window(stream_warm, *window)
    roof, note = cache_plateau(name, in_window, tol, size)
    if roof is not None and outer is not None:
        roof, note = _distinct_from(roof, outer, rel_tol)
    if roof is None:
        if edge:
            note += f" (its plateau ends at {edge / 2**20:.3g} MiB, reported {size / 2**20:.3g} MiB)"
        return [], None, [note]
    reach = None
    if edge and outer is not None:
        outer_median = outer.extra.get("plateau_median", outer.value)
        reach = capped_reach(measured_reach(env_warm, edge, outer_median, rel_tol), size)
    roof = replace(roof, extra={**roof.extra, "capacity_bytes": size, "edge_bytes": edge, "reach_bytes": reach})
    usable = in_window[usable_offchip(in_window)] if not in_window.empty else in_window
    own, why = _direction_roofs(name, usable, tol, {})
    return [roof] + own, roof, why


def _distinct_from(roof: Roof, outer: Roof, rel_tol: float) -> tuple[Roof | None, str]:
    """Return (roof or None, note) for a cache plateau against the next outer level's (rule
    11): 10% or more above it, the cache's roof; within 10% of it, still the roof of the
    working sets that fit the cache (what its points ran at: without it they would have no
    bound), labelled indistinct (extra "indistinct_from"), as when the kernels that read the
    cache are held near the outer level's speed by their own work (torch's sum adds as it
    reads); more than 10% below it, no roof: the window did not measure a cache."""
    mine, theirs = roof.extra["plateau_median"], outer.extra.get("plateau_median", outer.value)
    if mine >= (1 + rel_tol) * theirs:
        return roof, ""
    if mine < (1 - rel_tol) * theirs:
        return None, (f"{roof.name}: its plateau (median {mine:.1f} GB/s) is below the {outer.name} roof's "
                      f"(median {theirs:.1f} GB/s) by more than {rel_tol:.0%}: its window measured no cache")
    label = (f"indistinct: its plateau (median {mine:.1f} GB/s) is within {rel_tol:.0%} of {outer.name}'s "
             f"({theirs:.1f}): the kernels that read it here run near {outer.name}'s speed")
    return replace(roof, note=f"{roof.note}; {label}", extra={**roof.extra, "indistinct_from": outer.name}), ""


def measured_levels(rows: pd.DataFrame, caches, memory_level: str = "dram") -> dict:
    """Return {cache name: {"reported_bytes", "edge_bytes", "reach_bytes"}} from a run's
    rows so far (bandwidth_roofs' rule; None where not measured). The last-level cache's
    reach is where the sweep reaches off-chip speed: a sweep may end a few sizes past it."""
    roofs, _ = bandwidth_roofs(rows, caches, memory_level)
    by_name = {r.name: r.extra for r in roofs}
    return {str(n): {"reported_bytes": int(b), "edge_bytes": by_name.get(str(n), {}).get("edge_bytes"),
                     "reach_bytes": by_name.get(str(n), {}).get("reach_bytes")} for n, b in caches}


def device_levels(device: dict) -> tuple[list[tuple[str, int]], str]:
    """Return ([(cache name, total bytes)] innermost first, the off-chip level's name) of a
    device record (run.json's "device")."""
    caches = [(c["name"], int(c["total_bytes"])) for c in (device or {}).get("caches", [])]
    return caches, offchip_level((device or {}).get("kind", ""))


def derive(rows: pd.DataFrame, device: dict) -> tuple[list[Roof], list[str]]:
    """Return every roof derivable from a run's rows and its device record, with notes: the
    burst roofs, from the sweeps' rows (the sustained rows are merged in by
    roofs.analysis.sustained.merge_sustained)."""
    if "mode" in rows:
        rows = rows[rows["mode"] != SUSTAINED_MODE]
    caches, level = device_levels(device)
    roofs, notes = bandwidth_roofs(rows, caches, level)
    roofs, notes = _with_l1_probe(rows, roofs, notes)
    comp = compute_roofs(rows, no_unit=cpu_missing_units(device))
    floors = rows[usable_floor(rows)] if not rows.empty else rows
    return roofs + comp + link_roofs(rows) + launch_roofs(floors), notes + compute_notes(rows, comp)


def _with_l1_probe(rows: pd.DataFrame, roofs: list, notes: list) -> tuple[list, list]:
    """Return roofs and notes with probe.l1's roof (rule 5): the plateau over its span sizes
    (each program's span sits in L1 by construction, so no size window applies), the faster
    of it and a size-window l1 roof standing."""
    probe = rows[(rows["op"] == "probe.l1") & (rows["mode"] == "warm")] if "op" in rows else rows.iloc[0:0]
    if probe.empty:
        return roofs, notes
    roof, note = cache_plateau("l1", probe, CACHE_REL_TOL)
    if roof is None:
        return roofs, notes + [f"{note} (probe.l1)"]
    roof = replace(roof, note=f"probe.l1: each program rereads its own span; {roof.note}")
    old = next((r for r in roofs if r.kind == "bandwidth" and r.name == "l1"), None)
    if old is not None and old.value >= roof.value:
        why = f"l1: probe.l1 ({roof.value:,.1f} GB/s) is below the size-window roof ({old.value:,.1f})"
        return roofs, [*notes, why]
    if old is not None:  # the level's measured sizes (capacity, edge, reach) stay the size window's
        sizes = {k: v for k, v in old.extra.items() if k in ("capacity_bytes", "edge_bytes", "reach_bytes")}
        roof = replace(roof, extra={**roof.extra, **sizes})
    return [r for r in roofs if r is not old] + [roof], notes
