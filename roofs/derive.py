"""From measurement rows to roofs, and from roofs to each row's bound.

Only trustworthy rows set roofs (TRUST_*): rows that converged, or that have at least
TRUST_MIN_SAMPLES samples with a spread (p80 - p20) / median under TRUST_SPREAD, and that
were not measured while the machine was busy. Every roof carries the spread of its row.

Bandwidth roofs (ARCHITECTURE.md, rules 5, 10, 11): the off-chip roof (dram/hbm) comes
only from working sets of at least 4x the last-level cache (filtered before the size
envelope), from at least two sizes; a cache level's roof comes from its plateau, the sizes
from twice the next inner level's capacity to 3/4 of its own (clear of the transition
between two levels), within 15% of the best (10% off chip), at least two sizes, and only
when its plateau's median is 10% above the next outer level's. The value is the best median over every kernel, implementation
and dtype on the plateau, named with the row it came from.

Compute roofs (ARCHITECTURE.md, rule 10): one per precision, the fastest exact way the device does that
math: the best of its own GEMMs and of the GEMMs of any wider precision its inputs convert
to exactly (EXACT_IN), named with the row that set it; a borrowed roof says so in extra
("via", "own_gflops").

Each row's bound (ARCHITECTURE.md, rule 12): the memory boundary its bytes cross (boundary_level): a cold
point, or a working set of 4x the last-level cache or more, crosses the off-chip memory;
a warm point is served by the innermost level whose capacity, times 4, exceeds its working
set (the band from a level's capacity up to 4x it belongs to that level). A level with no
measured roof gives no bound: the row's bound stays empty and bound_note says why.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from roofs.model import INTEGER_PRECISIONS, Roof, Roofline

DRAM_FACTOR = 4      # memory roofs need working sets >= 4x the last-level cache
BAND_FACTOR = 4      # a warm working set up to 4x a level's capacity is bounded by that level
FIT_FRACTION = 0.75  # a cache plateau uses working sets up to 3/4 of the cache (what LRU with real associativity keeps)
CLEAR_FACTOR = 2     # ... and from 2x the next inner level's capacity (clear of the transition)
REL_TOL = 0.10       # plateau: within 10% of its best point; a level must beat the next outer by 10%
CACHE_REL_TOL = 0.15  # a cache plateau may spread 15%: read-only and read-write kernels differ more in a cache than off chip
MIN_SIZES = 2        # every bandwidth roof rests on at least two working-set sizes
TRUST_MIN_SAMPLES = 5
TRUST_SPREAD = 0.10
BUSY_PREFIX = "measured while the machine was busy"   # flags the runner sets while measuring:
JUMP_PREFIX = "time jumped"                           # such rows set no roof
RUNNER_FLAGS = (BUSY_PREFIX, JUMP_PREFIX)
SUSTAINED_MODE = "sustained"  # rows of the sustained phase (bench/sustain.py): roofs/sustained.py reads them

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


def size_bin(nbytes) -> "pd.Series":
    """Return the nearest 1/16-octave bin of each working set: kernels whose element count
    was rounded from the same target size (3 arrays do not divide every size) share a bin."""
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
        converged = rows["stop"].fillna("") == "converged"
        steady = (samples >= TRUST_MIN_SAMPLES) & (row_spread(rows) < TRUST_SPREAD)
        ok = ok & (converged | steady)
    if "flag" in rows.columns:
        ok = ok & ~rows["flag"].fillna("").astype(str).map(is_runner_flag)
    return ok


def envelope(rows: pd.DataFrame, value: str = "gbps") -> pd.DataFrame:
    """Return, for each working-set size bin, the row with the highest value (sorted by size)."""
    ok = rows[(rows["status"] == "ok") & rows[value].notna()].reset_index(drop=True)
    if ok.empty:
        return ok
    best = ok.loc[ok.groupby(size_bin(ok["working_set_bytes"]))[value].idxmax()]
    return best.sort_values("working_set_bytes").reset_index(drop=True)


def plateau(values, rel_tol: float = REL_TOL) -> tuple[int, int]:
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


def _roof_from(name: str, window: pd.DataFrame, rel_tol: float, capacity: int | None = None):
    """Return (Roof or None, note) for the plateau inside window (an envelope slice)."""
    if window.empty:
        return None, f"{name}: no trustworthy measured working set in its size window"
    lo, hi = plateau(window["gbps"], rel_tol)
    plat = window.iloc[lo:hi + 1]
    if len(plat) < MIN_SIZES:
        if len(window) == 1:
            trend = "only one working-set size in its window"
        elif hi == len(window) - 1:
            trend = "still rising at the window's edge (per-call overhead dominates at these sizes)"
        else:
            trend = "no flat stretch"
        return None, f"{name}: no plateau of {MIN_SIZES}+ sizes ({len(window)} sizes in its window, {trend})"
    best = plat.loc[plat["gbps"].idxmax()]
    spread = row_spread(plat.loc[[best.name]]).iloc[0]
    return Roof(
        kind="bandwidth", name=name, value=float(best["gbps"]), unit="GB/s", source="measured",
        op=str(best["op"]), impl=str(best["impl"]), dtype=str(best["dtype"]), point_id=str(best["point_id"]),
        working_set_bytes=int(best["working_set_bytes"]),
        plateau_bytes=(int(plat["working_set_bytes"].min()), int(plat["working_set_bytes"].max())),
        plateau_points=len(plat),
        plateau_values=(float(plat["gbps"].min()), float(plat["gbps"].max())),
        spread=None if pd.isna(spread) else float(spread),
        note=f"best median over {plat['impl'].nunique()} impl(s) and {plat['op'].nunique()} op(s) on the plateau",
        extra={"plateau_median": float(plat["gbps"].median()), **({"capacity_bytes": capacity} if capacity else {})},
    ), ""


def bandwidth_roofs(rows: pd.DataFrame, caches, memory_level: str = "dram",
                    rel_tol: float = REL_TOL) -> tuple[list[Roof], list[str]]:
    """Return (roofs, notes): one roof for the off-chip memory and one per cache level whose
    plateau the sweep shows, outermost first; notes say why a level got no roof.

    caches: [(name, total_bytes), ...] innermost first, as DeviceInfo lists them.
    Cache roofs use warm rows only (a cold row was flushed out of every cache); only
    trustworthy rows count (see trusted()).
    """
    stream = rows[rows["family"] == "stream"] if "family" in rows else rows
    good = stream[trusted(stream)] if not stream.empty else stream
    roofs, notes = [], []
    untrusted = int((stream["status"] == "ok").sum() - len(good)) if not stream.empty else 0
    if untrusted:
        notes.append(f"{untrusted} stream rows did not converge (or ran while the machine was busy) and set no roof")
    caches = [(str(n), int(b)) for n, b in caches]
    llc = caches[-1][1] if caches else None
    if llc is None:
        notes.append("no cache sizes known: the memory roof uses the largest working sets measured")
        mem = envelope(good).tail(2)
    else:
        mem = envelope(good[good["working_set_bytes"] >= DRAM_FACTOR * llc])
    roof, note = _roof_from(memory_level, mem, rel_tol)
    if roof is None:
        notes.append(f"{note}: the sweep must reach {DRAM_FACTOR}x the last-level cache with {MIN_SIZES}+ sizes")
    else:
        roofs.append(roof)
    outer = roof
    env_warm = envelope(good[good["mode"] == "warm"])
    for i in range(len(caches) - 1, -1, -1):
        name, size = caches[i]
        inner = caches[i - 1][1] if i > 0 else 0
        window = env_warm[(env_warm["working_set_bytes"] >= CLEAR_FACTOR * inner)
                          & (env_warm["working_set_bytes"] <= FIT_FRACTION * size)] if not env_warm.empty else env_warm
        roof, note = _roof_from(name, window, max(rel_tol, CACHE_REL_TOL), size)
        if roof is not None and outer is not None and \
                roof.extra["plateau_median"] < (1 + rel_tol) * outer.extra.get("plateau_median", outer.value):
            roof, note = None, (f"{name}: its plateau (median {roof.extra['plateau_median']:.1f} GB/s) is not above the "
                                f"{outer.name} roof's (median {outer.extra.get('plateau_median', outer.value):.1f} GB/s) by {rel_tol:.0%}")
        if roof is None:
            notes.append(note)
        else:
            roofs.append(roof)
            outer = roof
    return roofs, notes


def _own_compute_roofs(ok: pd.DataFrame) -> dict:
    """Return precision -> the row with the best median GFLOP/s among ok."""
    if ok.empty:
        return {}
    return {str(p): g.loc[g["gflops"].idxmax()] for p, g in ok.groupby("dtype", sort=False)}


def compute_roofs(rows: pd.DataFrame, family: str = "gemm") -> list[Roof]:
    """Return one compute roof per precision measured: the best median GFLOP/s among the
    family's trustworthy rows of that precision (the dtype column) or of a wider precision
    its inputs convert to exactly (EXACT_IN), whichever is faster."""
    fam = rows[(rows["family"] == family)] if "family" in rows else rows
    ok = fam[trusted(fam)] if not fam.empty else fam
    ok = ok[ok["gflops"].notna()].reset_index(drop=True) if not ok.empty else ok
    own = _own_compute_roofs(ok)
    roofs = []
    for precision, best in own.items():
        via, src = None, best
        for wider in EXACT_IN.get(precision, ()):
            if wider in own and own[wider]["gflops"] > src["gflops"]:
                via, src = wider, own[wider]
        shapes = ok[ok["dtype"] == precision]
        extra = {"via": via, "own_gflops": float(best["gflops"]), "own_point_id": str(best["point_id"])} if via else {}
        note = (f"{precision} inputs convert exactly to {via}, whose GEMM ({float(src['gflops']):,.4g}) beats "
                f"{precision}'s own best ({float(best['gflops']):,.4g}, {float(best['gflops']) / float(src['gflops']):.2f}x)"
                if via else f"best median over {shapes['impl'].nunique()} impl(s) and {shapes['shape'].nunique()} shape(s)")
        spread = row_spread(pd.DataFrame([src])).iloc[0]
        roofs.append(Roof(
            kind="compute", name=precision, value=float(src["gflops"]),
            unit="GOP/s" if precision in INTEGER_PRECISIONS else "GFLOP/s", source="measured",
            op=str(src["op"]), impl=str(src["impl"]), dtype=str(src["dtype"]), point_id=str(src["point_id"]),
            shape=str(src["shape"]), working_set_bytes=int(src["working_set_bytes"]),
            spread=None if pd.isna(spread) else float(spread), note=note, extra=extra))
    return sorted(roofs, key=lambda r: -r.value)


def compute_notes(rows: pd.DataFrame, roofs, family: str = "gemm") -> list[str]:
    """Return one line per precision whose GEMMs ran but set no roof (no trustworthy row)."""
    fam = rows[(rows["family"] == family) & (rows["status"] == "ok")] if "family" in rows else rows.iloc[0:0]
    have = {r.name for r in roofs if r.kind == "compute"}
    return [f"{p}: no compute roof: its {len(g)} GEMM rows did not converge (or ran while the machine was busy)"
            for p, g in fam.groupby("dtype", sort=False) if p not in have]


def link_roofs(rows: pd.DataFrame) -> list[Roof]:
    """Return interconnect and host-link roofs: per collective its best bus bandwidth, per
    send/recv pair its best bandwidth, per host copy direction and memory kind its best GB/s."""
    roofs = []
    comm = rows[(rows["family"] == "comm") & (rows["status"] == "ok")] if "family" in rows else rows.iloc[0:0]
    if not comm.empty:
        pairs = comm["pair"].fillna("") if "pair" in comm else [""] * len(comm)
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
    return caches, ("hbm" if (device or {}).get("kind") == "cuda" else "dram")


def derive(rows: pd.DataFrame, device: dict) -> tuple[list[Roof], list[str]]:
    """Return every roof derivable from a run's rows and its device record, with notes: the
    burst roofs, from the sweeps' rows (the sustained rows are merged in by
    roofs.sustained.merge_sustained)."""
    if "mode" in rows:
        rows = rows[rows["mode"] != SUSTAINED_MODE]
    caches, level = device_levels(device)
    roofs, notes = bandwidth_roofs(rows, caches, level)
    comp = compute_roofs(rows)
    return roofs + comp + link_roofs(rows), notes + compute_notes(rows, comp)


# ---- each row's bound -----------------------------------------------------------------------

def boundary_level(working_set: float, mode: str, caches, memory_level: str) -> str:
    """Return the memory level whose roof bounds a point: the off-chip level for a cold
    point or a working set of at least DRAM_FACTOR x the last-level cache; else the
    innermost level i with working_set < BAND_FACTOR x capacity_i (the band from a level's
    capacity up to 4x it belongs to that level, not to the next)."""
    if mode == "cold" or not caches:
        return memory_level
    for name, capacity in caches:
        if working_set < BAND_FACTOR * capacity:
            return name
    return memory_level


def point_bound(model: Roofline, working_set, mode, intensity, precision, caches, memory_level):
    """Return (boundary, bound_note, attainable GFLOP/s or None, bandwidth roof or None) of
    one point: attainable = Roofline.bound_gflops at the boundary level; no bound at all
    when that level has no measured roof."""
    level = boundary_level(float(working_set or 0), mode, caches, memory_level)
    bw = model.bandwidth(level)
    if bw is None:
        return "", f"{level}: no measured roof for this level, so no bound", None, None
    i = 0.0 if intensity is None or (isinstance(intensity, float) and math.isnan(intensity)) else float(intensity)
    return level, "", model.bound_gflops(i, precision or None, level), bw


def annotate(rows: pd.DataFrame, roofs, device: dict | None = None) -> pd.DataFrame:
    """Return rows with boundary and bound_note (point_bound), attainable_gflops,
    pct_of_bw_roof = 100 x GB/s / BW_boundary, pct_of_attainable = 100 x GFLOP/s /
    attainable (for flop-free rows, the bandwidth percentage), and flag: why a point sits
    above its attainable bound by more than its own spread (even its slow end, the p80
    time, beats the bound)."""
    model = Roofline(roofs)
    caches, level = device_levels(device or {})
    out = rows.copy()
    trust = trusted(out) if not out.empty else pd.Series(dtype=bool)
    cols = {k: [] for k in ("boundary", "bound_note", "attainable_gflops", "pct_of_bw_roof", "pct_of_attainable", "flag")}
    for r, good in zip(out.itertuples(index=False), trust):
        if r.status != "ok":
            for k in cols:
                cols[k].append("" if k in ("boundary", "bound_note", "flag") else None)
            continue
        precision = getattr(r, "precision", "") or ""
        boundary, note, att, bw = point_bound(model, r.working_set_bytes, r.mode, r.intensity, precision, caches, level)
        pct_bw = 100 * r.gbps / bw.value if bw is not None and r.gbps == r.gbps else None
        flops = r.flops if r.flops == r.flops else 0
        pct_att = (100 * r.gflops / att if flops and att else pct_bw)
        cols["boundary"].append(boundary)
        cols["bound_note"].append(note)
        cols["attainable_gflops"].append(att)
        cols["pct_of_bw_roof"].append(pct_bw)
        cols["pct_of_attainable"].append(pct_att)
        cols["flag"].append(existing_flag(r) or above_roof_causes(r, model, bw, att, bool(good), caches))
    for k, v in cols.items():
        out[k] = v
    return out


def is_runner_flag(flag: str) -> bool:
    """Return whether a flag was set by the runner while measuring (a busy machine, a time
    jump, or both joined by "; "): such rows set no roof."""
    return any(part.startswith(RUNNER_FLAGS) for part in flag.split("; "))


def existing_flag(r) -> str:
    """Return a flag the runner set while measuring (a busy machine, a jump), kept through re-annotation."""
    flag = str(getattr(r, "flag", "") or "")
    return flag if is_runner_flag(flag) else ""


def above_roof_causes(r, model: Roofline, bw: Roof | None, attainable, trusted_row: bool, caches=()) -> str:
    """Return "" when the point is under its bound within its spread, else the likely causes.

    A point is judged at its slow end (the p80 time): flop-free points against their
    bandwidth roof, the others against their attainable GFLOP/s."""
    p80 = getattr(r, "p80_ms", None)
    if bw is None or not p80 or p80 != p80:
        return ""
    flops = r.flops if r.flops == r.flops else 0
    if flops:
        slow, bound, unit = flops / (p80 * 1e-3) / 1e9, attainable, "GFLOP/s"
    else:
        slow, bound, unit = getattr(r, "bytes", 0) / (p80 * 1e-3) / 1e9, bw.value, "GB/s"
    if not bound or slow <= bound:
        return ""
    precision = getattr(r, "precision", "") or ""
    peak = model.compute(precision) if precision else None
    bandwidth_side = not flops or peak is None or r.intensity * bw.value < peak.value
    causes = []
    if not trusted_row:
        causes.append("its own samples are not steady (not converged): it could not set the roof it beats")
    if bandwidth_side:
        if r.mode == "cold":
            causes.append(f"timed cold, so its bytes came from {bw.name}: the {bw.name} roof measured too low")
        else:
            capacity = dict(caches).get(bw.name)
            where = (f"a {r.working_set_bytes / 2**20:.3g} MiB working set beside the {capacity / 2**20:.3g} MiB {bw.name}"
                     if capacity else f"a {r.working_set_bytes / 2**20:.3g} MiB working set")
            causes.append(f"timed warm: {where}; the {bw.name} roof measured too low by the kernels that set it")
        if bw.plateau_values and bw.plateau_values[1] > 1.1 * bw.plateau_values[0]:
            causes.append(f"the {bw.name} roof is noisy: its plateau spans "
                          f"{bw.plateau_values[0]:.3g} to {bw.plateau_values[1]:.3g} GB/s")
    else:
        causes.append(f"this kernel beats the GEMMs that set the {peak.name} roof: the roof was measured too low")
        causes.append("a clock above the one the roof was measured at")
    causes.append("a FLOP or byte count that is too high")
    return f"above its attainable {bound:.4g} {unit} even at p80 ({slow:.4g}): " + "; ".join(causes)
