"""From measurement rows to roofs, and from roofs to each row's bound.

Only trustworthy rows set roofs (TRUST_*): rows that converged, or that have at least
TRUST_MIN_SAMPLES samples with a spread (p80 - p20) / median under TRUST_SPREAD, and that
were not measured while the machine was busy. Every roof carries the spread of its row.

Bandwidth roofs (ARCHITECTURE.md, rules 5, 10, 11): a cache's capacity is its measured
plateau edge (roofs/analysis/levels.py), its reported size where the sweep shows no fall. The
off-chip roof (dram/hbm) comes only from working sets of at least 4x the last-level cache
(its edge, and past the edge's reach), filtered before the size envelope, from at least two
sizes; a cache level's roof comes from its plateau, the sizes from twice the next inner
level's reported size to 3/4 of its own or its edge (clear of the transition between two
levels), within 15% of the best (10% off chip), at least two sizes; a plateau within 10% of
the next outer level's is still the roof of that band, labelled indistinct, and one more than
10% below it gives none. The off-chip window counts rows with enough samples whatever their
spread (usable_offchip: a noisy host's spread), at or past its start by size bin. The value is the best median over
every kernel, implementation and dtype on the plateau, named with the row it came from.
Each level with a roof gets direction roofs ("<level>.read", ".write", ".copy") from the
same window, one class of kernels at a time.

Compute roofs (ARCHITECTURE.md, rule 10): one per precision, its own units' best: its own GEMMs
and its own FMA chains (fma.chains, the vector unit), named with the row that set it and
extra["unit"] ("gemm" or "vector"). A wider precision its inputs convert to exactly
(EXACT_IN) that runs faster is a labelled extra line, "fp32 via fp64" (extra "via",
"line_of", "own_gflops"), never the precision's roof; only a precision that points carry
but that no GEMM or FMA chain of its own measured (no unit for it) takes the wider path as
its roof, with extra "via". A precision whose roof is not its vector unit's also gets
"<precision>.vector" from its FMA chains ("<precision>.elementwise" for torch's chains on a CPU,
whose every step is an elementwise pass through the caches: not a unit's roof). Probe roofs (roofs/analysis/launch_floor.py, rule 5): the l1
roof from probe.l1's plateau over its span sizes (the faster of it and a size-window l1
roof), and the launch floors.

Each row's bound (ARCHITECTURE.md, rule 12) from these roofs is roofs/analysis/bounds.py's.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from bench.results import BUSY_PREFIX, JUMP_PREFIX, text_column
from bench.util import fmt_bytes, fmt_num, number, offchip_level
from roofs.analysis.launch_floor import launch_roofs
from roofs.analysis.levels import measured_edge, measured_reach, plateau
from roofs.analysis.roofline import DIRECTIONS, INTEGER_PRECISIONS, OLD_RUN_STREAM_ARRAYS, Roof, direction_of
from roofs.analysis.specs import cpu_missing_units

DRAM_FACTOR = 4      # memory roofs need working sets >= 4x the last-level cache
BAND_FACTOR = 4      # a warm working set up to 4x a level's capacity is bounded by that level
FIT_FRACTION = 0.75  # a cache plateau uses working sets up to 3/4 of the cache (what LRU with real associativity keeps)
CLEAR_FACTOR = 2     # ... and from 2x the next inner level's capacity (clear of the transition)
REL_TOL = 0.10       # plateau: within 10% of its best point; a level within 10% of the next outer is indistinct
CACHE_REL_TOL = 0.15  # a cache plateau may spread 15%: read-only and read-write kernels differ more in a cache than off chip
MIN_SIZES = 2        # every bandwidth roof rests on at least two working-set sizes
TRUST_MIN_SAMPLES = 5
TRUST_SPREAD = 0.10
NOISY_SPREAD = 0.50  # an off-chip row spread this much is broken, not a noisy host (those spread 10-35%)
RUNNER_FLAGS = (BUSY_PREFIX, JUMP_PREFIX)  # rows the runner flagged while measuring set no roof
SUSTAINED_MODE = "sustained"  # rows of the sustained phase (bench/run/sustain_phase.py): roofs/analysis/sustained.py reads them

# Precisions whose inputs convert exactly to wider ones: the wider GEMM does the same math.
EXACT_IN = {
    "fp32": ("fp64",),
    "tf32": ("fp32", "fp64"),
    "fp16": ("fp32", "fp64"),
    "bf16": ("fp32", "fp64"),
    "fp8e4m3": ("fp16", "bf16", "fp32", "fp64"),
    "fp8e5m2": ("fp16", "bf16", "fp32", "fp64"),
}

BINS_PER_OCTAVE = 16


def size_bin(nbytes):
    """Return the nearest 1/16-octave bin of each working set (a Series or an array): kernels
    whose element count was rounded from the same target size (3 arrays do not divide every
    size) share a bin."""
    return np.round(np.log2(nbytes.astype(float)) * BINS_PER_OCTAVE).astype(int)


def row_spread(rows: pd.DataFrame) -> pd.Series:
    """Return (p80 - p20) / median of each row (NaN where the columns are missing)."""
    if not {"p20_ms", "p80_ms", "median_ms"} <= set(rows.columns):
        return pd.Series(np.nan, index=rows.index)
    return (rows["p80_ms"].astype(float) - rows["p20_ms"].astype(float)) / rows["median_ms"].astype(float)


def trusted(rows: pd.DataFrame) -> pd.Series:
    """Return, per row, whether it may set a roof: status ok, converged (or at least
    TRUST_MIN_SAMPLES samples with a spread under TRUST_SPREAD), and not measured while the
    machine was busy or whose time jumped against its sweep. Rows of runs that predate the
    stop column count as converged."""
    ok = rows["status"] == "ok"
    if "stop" in rows.columns:
        samples = rows["samples"].fillna(0).astype(float) if "samples" in rows.columns else 0
        converged = text_column(rows, "stop") == "converged"
        steady = (samples >= TRUST_MIN_SAMPLES) & (row_spread(rows) < TRUST_SPREAD)
        ok = ok & (converged | steady)
    if "flag" in rows.columns:
        ok = ok & ~text_column(rows, "flag").map(is_runner_flag)
    return ok


def usable_offchip(rows: pd.DataFrame) -> pd.Series:
    """Return, per row, whether it may count toward the off-chip roof (ARCHITECTURE.md, rule
    11): a trusted row, or an ok row with at least TRUST_MIN_SAMPLES samples spread under
    NOISY_SPREAD, not flagged by the runner. A neighbour's traffic only ever slows a read, so on a
    noisy host a row's spread is the host's, and the ceiling keeps each size's best row; the
    roof says how many of its sizes rest on such rows (extra "noisy_sizes")."""
    ok = rows["status"] == "ok"
    if "samples" in rows.columns:
        enough = (rows["samples"].fillna(0).astype(float) >= TRUST_MIN_SAMPLES) & ~(row_spread(rows) >= NOISY_SPREAD)
        ok = ok & (enough | trusted(rows))
    if "flag" in rows.columns:
        ok = ok & ~text_column(rows, "flag").map(is_runner_flag)
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
        return None, f"{name}: no plateau of {MIN_SIZES}+ sizes ({len(window)} sizes in its window, {_why_no_plateau(window, hi)})"
    note = f"best median over {plat['impl'].nunique()} impl(s) and {plat['op'].nunique()} op(s) on the plateau"
    return _best_of(name, plat, note, {"capacity_bytes": capacity} if capacity else {}), ""


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


def _ceiling_from(name: str, window: pd.DataFrame, rows: pd.DataFrame, rel_tol: float):
    """Return the off-chip roof of a window whose sizes do not agree within rel_tol (rule 11):
    a neighbour's traffic only ever slows a read, so the ceiling is the best of every size's
    best pass, labelled unsteady with the sizes' range and the passes' range; None with fewer
    than MIN_SIZES sizes."""
    if len(window) < MIN_SIZES:
        return None
    lo, hi = float(window["gbps"].min()), float(window["gbps"].max())
    passes = pass_range(rows)
    label = f"unsteady: sizes {lo:,.3g}-{hi:,.3g} GB/s at their best, no {MIN_SIZES} within {rel_tol:.0%}"
    if passes:
        label += f"; passes {passes[0]:,.3g}-{passes[1]:,.3g} GB/s"
    return _best_of(name, window, f"the best of {len(window)} off-chip sizes' best passes ({label})",
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
    lo, hi = roof.plateau_bytes
    sizes = env[(env["working_set_bytes"] >= lo) & (env["working_set_bytes"] <= hi)]
    noisy = int((~trusted(sizes)).sum()) if not sizes.empty else 0
    if noisy:
        roof = replace(roof, note=roof.note + f"; {noisy} of its {len(sizes)} sizes' best rows spread past "
                                              f"{TRUST_SPREAD:.0%} (a noisy host)", extra={**roof.extra, "noisy_sizes": noisy})
    return roof, ""


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
        env = envelope(mine)
        if env.empty:
            continue
        roof, note = offchip_roof(f"{level}.{d}", mine, rel_tol) if offchip else _roof_from(f"{level}.{d}", env, rel_tol)
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
    window past all but one size."""
    name, size = caches[-1]
    edge = edges.get(name)
    if not edge:
        return int(DRAM_FACTOR * size)
    tail = float(envelope(good).tail(MIN_SIZES)["gbps"].median())
    reach = capped_reach(measured_reach(env_warm, edge, tail, rel_tol), size)
    return int(max(DRAM_FACTOR * edge, reach or 0))


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
    stream, good, warm, env_warm, caches, edges = _stream_levels(rows, caches, rel_tol)
    tol = max(rel_tol, CACHE_REL_TOL)
    roofs, notes = [], []
    if not stream.empty and (stream["status"] == "ok").sum() > len(good):
        notes.append(f"stream rows that set no roof: {untrusted_text(stream)}")
    if not caches:
        notes.append("no cache sizes known: the memory roof uses the largest working sets measured")
        mem_rows = good[good["working_set_bytes"] >= envelope(good).tail(2)["working_set_bytes"].min()] \
            if not good.empty else good
    else:
        usable = stream[usable_offchip(stream)] if not stream.empty else stream
        mem_rows = usable[at_or_past(usable["working_set_bytes"], offchip_start(good, env_warm, caches, edges, rel_tol))] \
            if not usable.empty else usable
    roof, note = offchip_roof(memory_level, mem_rows, rel_tol)
    if roof is None:
        notes.append(f"{note}: the sweep must reach {DRAM_FACTOR}x the last-level cache"
                     f"{' (its measured edge)' if caches and edges[caches[-1][0]] else ''} with {MIN_SIZES}+ sizes")
    else:
        roof = replace(roof, extra={**roof.extra, "from_bytes": int(mem_rows["working_set_bytes"].min())})
        own, why = _direction_roofs(memory_level, mem_rows, rel_tol, {}, offchip=True)
        roofs += [roof] + own
        notes += why
    outer = roof
    for i in range(len(caches) - 1, -1, -1):
        name, size = caches[i]
        inner = caches[i - 1][1] if i > 0 else 0
        hi = min(FIT_FRACTION * size, edges[name]) if edges[name] else FIT_FRACTION * size
        in_window = lambda df: df[(df["working_set_bytes"] >= CLEAR_FACTOR * inner)  # noqa: E731
                                  & (df["working_set_bytes"] <= hi)] if not df.empty else df
        roof, note = _roof_from(name, in_window(env_warm), tol, size)
        if roof is not None and outer is not None:
            roof, note = _distinct_from(roof, outer, rel_tol)
        if roof is None:
            if edges[name]:
                note += f" (its plateau ends at {edges[name] / 2**20:.3g} MiB, reported {size / 2**20:.3g} MiB)"
            notes.append(note)
            continue
        reach = capped_reach(measured_reach(env_warm, edges[name], outer.extra.get("plateau_median", outer.value),
                                            rel_tol), size) if edges[name] and outer is not None else None
        sizes = {"capacity_bytes": size, "edge_bytes": edges[name], "reach_bytes": reach}
        roof = replace(roof, extra={**roof.extra, **sizes})
        own, why = _direction_roofs(name, in_window(warm), tol, {})
        roofs += [roof] + own
        notes += why
        outer = roof
    return roofs, notes


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


COMPUTE_FAMILIES = ("gemm", "fma")  # GEMMs, and the FMA chains that measure each vector unit


def _own_compute_roofs(ok: pd.DataFrame) -> dict:
    """Return precision -> the row with the best median GFLOP/s among ok."""
    if ok.empty:
        return {}
    return {str(p): g.loc[g["gflops"].idxmax()] for p, g in ok.groupby("dtype", sort=False)}


def _compute_roof(name: str, src, note: str, extra: dict) -> Roof:
    spread = row_spread(pd.DataFrame([src])).iloc[0]
    return Roof(kind="compute", name=name, value=float(src["gflops"]),
                unit="GOP/s" if name.split(" ")[0].split(".")[0] in INTEGER_PRECISIONS else "GFLOP/s",
                source="measured", op=str(src["op"]), impl=str(src["impl"]), dtype=str(src["dtype"]),
                point_id=str(src["point_id"]), shape=str(src["shape"]), working_set_bytes=int(src["working_set_bytes"]),
                spread=number(spread), note=note, extra=extra)


def _unit(row) -> str:
    """Return what a compute row measures: "gemm"; "vector", the FMA pipes, for the FMA chains
    a Triton kernel keeps in registers; "elementwise" for torch's FMA chains (a CPU's), each
    step of which is an elementwise pass of the chains through the caches: a ceiling of
    such passes, not of the FMA units (a CPU run's chains read 34 GFLOP/s beside 332 computed)."""
    if row.get("family") != "fma":
        return "gemm"
    return "vector" if str(row.get("impl", "")).endswith("/triton") else "elementwise"


def line_name(precision: str, unit: str) -> str:
    """Return the name of a precision's FMA-chain line beside its roof: "<p>.vector", or
    "<p>.elementwise" for torch's chains."""
    return f"{precision}.{unit}"


def compute_roofs(rows: pd.DataFrame, families=COMPUTE_FAMILIES, no_unit=frozenset()) -> list[Roof]:
    """Return the compute roofs (see the module docstring): per precision its own units'
    best median GFLOP/s among trustworthy GEMM and FMA-chain rows (the dtype column); a
    faster exact wider path as the extra line "<p> via <wider>"; the wider path as the roof
    only for a precision that rows carry (the precision column) but none of its own measured;
    "<p>.vector" where the vector unit is not the precision's roof. A precision in no_unit
    (the device has no unit for it: fp16 on a CPU without AVX512-FP16) is bounded by the
    exact wider path, labelled via, its own best kept beside it."""
    fam = rows[rows["family"].isin(families)] if "family" in rows else rows
    ok = fam[trusted(fam)] if not fam.empty else fam
    ok = ok[ok["gflops"].notna()].reset_index(drop=True) if not ok.empty else ok
    own_all = _own_compute_roofs(ok)
    own = {p: best for p, best in own_all.items() if p not in no_unit}
    vector = _own_compute_roofs(ok[ok["family"] == "fma"]) if "family" in ok else {}
    roofs = []
    for precision, best in own.items():
        shapes = ok[ok["dtype"] == precision]
        roofs.append(_compute_roof(precision, best, f"best median over {shapes['impl'].nunique()} impl(s) and "
                                   f"{shapes['shape'].nunique()} shape(s)", {"unit": _unit(best)}))
        wider = max((w for w in EXACT_IN.get(precision, ()) if w in own and own[w]["gflops"] > best["gflops"]),
                    key=lambda w: own[w]["gflops"], default=None)
        if wider:
            src = own[wider]
            roofs.append(_compute_roof(
                f"{precision} via {wider}", src,
                f"{precision} inputs convert exactly to {wider}, whose {_unit(src)} ({float(src['gflops']):,.4g}) beats "
                f"{precision}'s own best ({float(best['gflops']):,.4g}, {float(best['gflops']) / float(src['gflops']):.2f}x): "
                f"an extra line, not {precision}'s roof",
                {"via": wider, "line_of": precision, "own_gflops": float(best["gflops"]),
                 "own_point_id": str(best["point_id"])}))
        if precision in vector and _unit(best) == "gemm":
            unit = _unit(vector[precision])
            what = ("the vector unit" if unit == "vector" else
                    "torch's elementwise passes through the caches (a ceiling of such passes, not the FMA units')")
            roofs.append(_compute_roof(line_name(precision, unit), vector[precision],
                                       f"{precision} FMA chains: {what}", {"unit": unit, "line_of": precision}))
    # a precision with no steady row of its own (it never ran here, only points carry it, or
    # its own rows were too unsteady to set a roof) is bounded by the fastest exact wider path
    ran = fam[(fam["status"] == "ok") & fam["gflops"].notna()] if not fam.empty else fam
    unsteady = {str(p): g.loc[g["gflops"].idxmax()] for p, g in ran.groupby("dtype", sort=False) if p not in own}
    # ... among the points that ran: a skipped row (tf32 on a CPU) needs no bound
    placed = rows[rows["status"] == "ok"] if "status" in rows else rows
    carried = set(placed["precision"].dropna().astype(str)) - {""} if "precision" in placed else set()
    for precision in sorted((carried | set(unsteady) | (set(own_all) & set(no_unit))) - set(own)):
        wider = max((w for w in EXACT_IN.get(precision, ()) if w in own), key=lambda w: own[w]["gflops"], default=None)
        if wider is None:
            if precision in own_all:  # no unit, but no wider path measured either: its own rows stand
                best = own_all[precision]
                roofs.append(_compute_roof(precision, best, "best of its own rows (no unit and no wider path)",
                                           {"unit": _unit(best)}))
            continue
        mine = own_all.get(precision) if precision in no_unit else unsteady.get(precision)
        extra = {"via": wider} if mine is None else {
            "via": wider, "own_gflops": float(mine["gflops"]), "own_point_id": str(mine["point_id"]),
            **({"no_unit": True} if precision in no_unit else {"own_steady": False})}
        why = (f"the device has no {precision} unit (its own best, {float(mine['gflops']):,.4g}, runs through "
               "conversion)" if precision in no_unit and mine is not None
               else f"its own best ({float(mine['gflops']):,.4g}) is from rows too unsteady to set a roof"
               if mine is not None else "no GEMM or FMA chain of its own measured here")
        roofs.append(_compute_roof(precision, own[wider], f"{precision}: {why}; its inputs convert exactly to {wider}",
                                   extra))
    return sorted(roofs, key=lambda r: -r.value)


def compute_notes(rows: pd.DataFrame, roofs, families=COMPUTE_FAMILIES) -> list[str]:
    """Return one line per precision whose GEMMs ran but set no roof (no trustworthy row)."""
    fam = rows[rows["family"].isin(families) & (rows["status"] == "ok")] if "family" in rows else rows.iloc[0:0]
    have = {r.name for r in roofs if r.kind == "compute"}
    return [f"{p}: no compute roof: of its {len(g)} GEMM rows, {untrusted_text(g)}"
            for p, g in fam.groupby("dtype", sort=False) if p not in have]


def untrusted_text(rows: pd.DataFrame) -> str:
    """Return how many ok rows could not set a roof, counted apart by cause, each with its
    remedy: not converged within the budget (a larger --budget), measured while the machine
    was busy or whose time jumped (a quiet machine)."""
    ok = rows[rows["status"] == "ok"]
    flags = text_column(ok, "flag")
    noisy = flags.map(is_runner_flag)
    unsteady = ~trusted(ok.assign(flag="")) if not ok.empty else noisy
    parts = []
    if (unsteady & ~noisy).any():
        parts.append(f"{int((unsteady & ~noisy).sum())} did not converge within the budget (a larger --budget helps)")
    if noisy.any():
        parts.append(f"{int(noisy.sum())} ran while the machine was busy or their time jumped (run on a quiet machine)")
    return "; ".join(parts) or "none is steady"


def link_roofs(rows: pd.DataFrame) -> list[Roof]:
    """Return interconnect and host-link roofs: per collective its best bus bandwidth, per
    send/recv pair its best bandwidth, per host copy direction and memory kind its best GB/s."""
    roofs = []
    comm = rows[(rows["family"] == "comm") & (rows["status"] == "ok")] if "family" in rows else rows.iloc[0:0]
    if not comm.empty:
        pairs = text_column(comm, "pair")
        comm = comm.assign(key=[op.split(".", 1)[1] + (f".{pair}" if pair else "") for op, pair in zip(comm["op"], pairs)],
                           rate=comm["bus_gbps"].fillna(comm["gbps"]))
        for key, g in comm.groupby("key", sort=False):
            best = g.loc[g["rate"].idxmax()]
            roofs.append(Roof("bandwidth", f"link.{key}", float(best["rate"]), "GB/s", op=str(best["op"]),
                              impl=str(best["impl"]), point_id=str(best["point_id"]), working_set_bytes=int(best["bytes"]),
                              note="bus bandwidth" if key.startswith(("all_", "reduce", "broad")) else "point-to-point bandwidth"))
    host = rows[(rows["family"] == "transfer") & (rows["status"] == "ok")] if "family" in rows else rows.iloc[0:0]
    for (op, memory), g in (host.groupby(["op", "memory"], sort=False) if not host.empty else ()):
        best = g.loc[g["gbps"].idxmax()]
        roofs.append(Roof("bandwidth", f"host.{op.split('.')[1]}.{memory}", float(best["gbps"]), "GB/s", op=op,
                          impl=str(best["impl"]), point_id=str(best["point_id"]), working_set_bytes=int(best["bytes"]),
                          note="host-device copy"))
    return roofs


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
    good = rows[trusted(rows)] if not rows.empty else rows
    return roofs + comp + link_roofs(rows) + launch_roofs(good), notes + compute_notes(rows, comp)


def _with_l1_probe(rows: pd.DataFrame, roofs: list, notes: list) -> tuple[list, list]:
    """Return roofs and notes with probe.l1's roof (rule 5): the plateau over its span sizes
    (each program's span sits in L1 by construction, so no size window applies), the faster
    of it and a size-window l1 roof standing."""
    probe = rows[(rows["op"] == "probe.l1") & (rows["mode"] == "warm")] if "op" in rows else rows.iloc[0:0]
    if probe.empty:
        return roofs, notes
    roof, note = _roof_from("l1", envelope(probe[trusted(probe)]), CACHE_REL_TOL)
    if roof is None:
        return roofs, notes + [f"{note} (probe.l1)"]
    roof = replace(roof, note=f"probe.l1: each program rereads its own span; {roof.note}")
    old = next((r for r in roofs if r.kind == "bandwidth" and r.name == "l1"), None)
    if old is not None and old.value >= roof.value:
        return roofs, notes + [f"l1: probe.l1 ({roof.value:,.1f} GB/s) is below the size-window roof ({old.value:,.1f})"]
    if old is not None:  # the level's measured sizes (capacity, edge, reach) stay the size window's
        sizes = {k: v for k, v in old.extra.items() if k in ("capacity_bytes", "edge_bytes", "reach_bytes")}
        roof = replace(roof, extra={**roof.extra, **sizes})
    return [r for r in roofs if r is not old] + [roof], notes


def is_runner_flag(flag: str) -> bool:
    """Return whether a flag was set by the runner while measuring (a busy machine, a time
    jump, or both joined by "; "): such rows set no roof."""
    return any(part.startswith(RUNNER_FLAGS) for part in flag.split("; "))
