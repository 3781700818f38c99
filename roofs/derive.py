"""From measurement rows to roofs.

Compute roofs (ARCHITECTURE.md, rule 9): one per precision, the best median FLOP/s over every GEMM
implementation and shape measured at that precision, named with both.

Bandwidth roofs (ARCHITECTURE.md, rules 5, 9 and 10): the off-chip roof (dram/hbm) comes only from
working sets at least 4x the last-level cache; a cache level's roof comes from its
plateau, the sizes that fit well inside it (above the next inner level, at most 3/4 of its
capacity), and only when the sweep shows one. The value is the best median over every
kernel, implementation and dtype at those sizes, named with the row it came from.
"""
from __future__ import annotations

import pandas as pd

from roofs.model import INTEGER_PRECISIONS, Roof

DRAM_FACTOR = 4      # memory roofs need working sets >= 4x the last-level cache
FIT_FRACTION = 0.75  # a cache plateau uses working sets up to 3/4 of the cache (what LRU with real associativity keeps)
REL_TOL = 0.10       # plateau: within 10% of its best point; a level must beat the next outer by 10%


BINS_PER_OCTAVE = 16


def size_bin(nbytes) -> "pd.Series":
    """Return the nearest 1/16-octave bin of each working set: kernels whose element count
    was rounded from the same target size (3 arrays do not divide every size) share a bin."""
    import numpy as np
    return np.round(np.log2(nbytes.astype(float)) * BINS_PER_OCTAVE).astype(int)


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


def _roof_from(name: str, window: pd.DataFrame, min_points: int, rel_tol: float):
    """Return (Roof or None, note) for the plateau inside window (an envelope slice)."""
    if window.empty:
        return None, f"{name}: no measured working set in its size window"
    lo, hi = plateau(window["gbps"], rel_tol)
    plat = window.iloc[lo:hi + 1]
    if len(plat) < min_points:
        trend = "still rising (per-call overhead dominates at these sizes)" if hi == len(window) - 1 else "no flat stretch"
        return None, f"{name}: no plateau ({len(window)} sizes in its window, {trend})"
    best = plat.loc[plat["gbps"].idxmax()]
    return Roof(
        kind="bandwidth", name=name, value=float(best["gbps"]), unit="GB/s", source="measured",
        op=str(best["op"]), impl=str(best["impl"]), dtype=str(best["dtype"]), point_id=str(best["point_id"]),
        working_set_bytes=int(best["working_set_bytes"]),
        plateau_bytes=(int(plat["working_set_bytes"].min()), int(plat["working_set_bytes"].max())),
        plateau_points=len(plat),
        plateau_values=(float(plat["gbps"].min()), float(plat["gbps"].max())),
        note=f"best median over {plat['impl'].nunique()} impl(s) and {plat['op'].nunique()} op(s) on the plateau",
    ), ""


def bandwidth_roofs(rows: pd.DataFrame, caches, memory_level: str = "dram",
                    rel_tol: float = REL_TOL) -> tuple[list[Roof], list[str]]:
    """Return (roofs, notes): one roof for the off-chip memory and one per cache level whose
    plateau the sweep shows, outermost first; notes say why a level got no roof.

    caches: [(name, total_bytes), ...] innermost first, as DeviceInfo lists them.
    Cache roofs use warm rows only (a cold row was flushed out of every cache).
    """
    stream = rows[rows["family"] == "stream"] if "family" in rows else rows
    env_all, env_warm = envelope(stream), envelope(stream[stream["mode"] == "warm"])
    roofs, notes = [], []
    caches = [(str(n), int(b)) for n, b in caches]
    llc = caches[-1][1] if caches else None
    if llc is None:
        notes.append("no cache sizes known: the memory roof uses the largest working sets measured")
        mem = env_all.tail(2)
    else:
        mem = env_all[env_all["working_set_bytes"] >= DRAM_FACTOR * llc]
    roof, note = _roof_from(memory_level, mem, 1, rel_tol)
    if roof is None:
        notes.append(f"{note}: the sweep must reach {DRAM_FACTOR}x the last-level cache")
    else:
        roofs.append(roof)
    outer = roof
    for i in range(len(caches) - 1, -1, -1):
        name, size = caches[i]
        inner = caches[i - 1][1] if i > 0 else 0
        window = env_warm[(env_warm["working_set_bytes"] > inner) & (env_warm["working_set_bytes"] <= FIT_FRACTION * size)]
        roof, note = _roof_from(name, window, 2, rel_tol)
        if roof is not None and outer is not None and roof.value < (1 + rel_tol) * outer.value:
            roof, note = None, (f"{name}: its plateau ({roof.value:.1f} GB/s) is not above the "
                                f"{outer.name} roof ({outer.value:.1f} GB/s) by {rel_tol:.0%}")
        if roof is None:
            notes.append(note)
        else:
            roofs.append(roof)
            outer = roof
    return roofs, notes


def compute_roofs(rows: pd.DataFrame, family: str = "gemm") -> list[Roof]:
    """Return one compute roof per precision: the row with the best median GFLOP/s among
    the family's successful rows of that precision (the dtype column)."""
    ok = rows[(rows["family"] == family) & (rows["status"] == "ok")]
    ok = ok[ok["gflops"].notna()].reset_index(drop=True) if not ok.empty else ok
    roofs = []
    for precision, g in ok.groupby("dtype", sort=False):
        best = g.loc[g["gflops"].idxmax()]
        roofs.append(Roof(
            kind="compute", name=str(precision), value=float(best["gflops"]),
            unit="GOP/s" if precision in INTEGER_PRECISIONS else "GFLOP/s", source="measured",
            op=str(best["op"]), impl=str(best["impl"]), dtype=str(precision), point_id=str(best["point_id"]),
            shape=str(best["shape"]), working_set_bytes=int(best["working_set_bytes"]),
            note=f"best median over {g['impl'].nunique()} impl(s) and {g['shape'].nunique()} shape(s)"))
    return sorted(roofs, key=lambda r: -r.value)


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


def derive(rows: pd.DataFrame, device: dict) -> tuple[list[Roof], list[str]]:
    """Return every roof derivable from a run's rows and its device record, with notes."""
    caches = [(c["name"], c["total_bytes"]) for c in device.get("caches", [])]
    level = "hbm" if device.get("kind") == "cuda" else "dram"
    roofs, notes = bandwidth_roofs(rows, caches, level)
    return roofs + compute_roofs(rows) + link_roofs(rows), notes


def annotate(rows: pd.DataFrame, roofs, device: dict | None = None) -> pd.DataFrame:
    """Return rows with attainable_gflops = min(P_precision, BW_memory x I) (BW x I for rows
    without a precision), pct_of_bw_roof = 100 x GB/s / BW_memory, pct_of_attainable =
    100 x GFLOP/s / attainable (for flop-free rows, the bandwidth percentage), and flag:
    why a point sits above its attainable bound by more than its own spread (even its
    slow end, the p80 time, beats the bound)."""
    from roofs.model import Roofline
    model = Roofline(roofs)
    out = rows.copy()
    bw = model.bandwidth()
    if bw is None:
        return out
    ok = out["status"] == "ok"
    att = [model.bound_gflops(i, p) for i, p in zip(out["intensity"].fillna(0.0), out["precision"].fillna(""))]
    out["attainable_gflops"] = [a if o else None for a, o in zip(att, ok)]
    out["pct_of_bw_roof"] = (100 * out["gbps"] / bw.value).where(ok)
    pct_att = 100 * out["gflops"] / out["attainable_gflops"].astype(float)
    out["pct_of_attainable"] = pct_att.where(ok & (out["flops"] > 0), out["pct_of_bw_roof"])
    llc = max((c.get("total_bytes", 0) for c in (device or {}).get("caches", [])), default=0)
    out["flag"] = [above_roof_causes(r, model, bw, llc) if o else "" for r, o in zip(out.itertuples(), ok)]
    return out


def above_roof_causes(r, model, bw, llc: int) -> str:
    """Return "" when the point is under its bound within its spread, else the likely causes.

    The stream family sets the bandwidth roofs and the GEMMs the compute roofs, so only the
    kernels placed under them (and a stream point on the memory plateau) are judged."""
    if r.family == "stream" or not r.flops or not r.attainable_gflops or not r.p80_ms:
        return ""
    slow_gflops = r.flops / (r.p80_ms * 1e-3) / 1e9
    if r.family == "gemm" or slow_gflops <= r.attainable_gflops:
        return ""
    peak = model.compute(r.precision or None)
    bandwidth_side = peak is None or r.intensity * bw.value < peak.value
    causes = []
    if bandwidth_side:
        if llc and r.working_set_bytes <= 2 * llc:
            causes.append(f"cache-resident working set ({r.working_set_bytes / 2**20:.3g} MiB beside a "
                          f"{llc / 2**20:.3g} MiB last-level cache{', timed warm' if r.mode == 'warm' else ''})")
        if bw.plateau_values and bw.plateau_values[1] > 1.1 * bw.plateau_values[0]:
            causes.append(f"the {bw.name} roof is noisy: its plateau spans "
                          f"{bw.plateau_values[0]:.3g} to {bw.plateau_values[1]:.3g} GB/s")
        causes.append(f"the {bw.name} roof measured too low by the stream kernels")
    else:
        causes.append(f"this kernel beats the GEMMs that set the {peak.name} roof: the roof was measured too low")
        causes.append("a clock above the one the roof was measured at")
    causes.append("a FLOP or byte count that is too high")
    return (f"above its attainable {r.attainable_gflops:.4g} GFLOP/s even at p80 ({slow_gflops:.4g}): "
            + "; ".join(causes))
