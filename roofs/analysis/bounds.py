"""Each measured row's bound (ARCHITECTURE.md, rule 12), from the roofs roofs.analysis.model sets:
boundary_level (the memory level a point's bytes cross), faster_level and slower_level (the
neighbouring level whose roof explains a point's speed), point_bound (min(P, BW x I) with BW
the level's roof in the point's direction, Roofline.point_bandwidth), and annotate (every
row's bound, bound_note, its percentage of the bound and, for a point above it beyond its
spread, a flag naming the likely causes)."""
from __future__ import annotations

from dataclasses import replace

import pandas as pd

from bench.policy import DEFAULT
from bench.results import BAND_COLUMNS, is_runner_flag, usable
from bench.util import Reason, missing, number
from roofs.analysis.launch_floor import with_launch_notes
from roofs.analysis.model import device_levels, level_sizes
from roofs.analysis.roofline import OLD_RUN_STREAM_ARRAYS, Roof, Roofline


def boundary_level(working_set: float, mode: str, caches, memory_level: str, reach: dict | None = None) -> str:
    """Return the memory level whose roof bounds a point (ARCHITECTURE.md, rule 12): the
    off-chip level for a cold point; else the innermost cache whose reach exceeds the
    working set, a cache's reach being where the sweep measured the next level's speed
    (reach[name]) or, unmeasured, DEFAULT.band_factor x its capacity (the band from a level's
    capacity up to 4x it belongs to that level, not to the next); past every cache's reach,
    the off-chip level. caches: [(name, capacity)] innermost first, each capacity its
    measured edge or its reported size (roofs.analysis.model.level_sizes)."""
    if mode == "cold" or not caches:
        return memory_level
    for name, capacity in caches:
        if working_set < ((reach or {}).get(name) or DEFAULT.band_factor * capacity):
            return name
    return memory_level


def faster_level(model: Roofline, level: str, working_set: float, gbps, caches, read_bytes=None,
                 write_bytes=None) -> str | None:
    """Return the cache inside `level` that explains a warm point running faster than
    level's roof, or None (ARCHITECTURE.md, rule 12): the nearest inner cache whose band
    (DEFAULT.band_factor x its reported size) holds the working set and whose roof for the point's
    direction the point does not beat by more than DEFAULT.edge_tol. A point at L2 speed just past
    L2's measured reach is L2's, not bounded by the L3 roof it beats."""
    names = [n for n, _ in caches]
    if missing(gbps):
        return None
    found = model.point_bandwidth(level, read_bytes, write_bytes)
    if found is None or gbps <= found[0]:
        return None
    inner = names[:names.index(level)] if level in names else names
    for name, size in reversed([(n, s) for n, s in caches if n in inner]):
        own = model.point_bandwidth(name, read_bytes, write_bytes)
        if own is not None and working_set < DEFAULT.band_factor * size and gbps <= own[0] * (1 + DEFAULT.edge_tol):
            return name
    return None


def slower_level(model: Roofline, level: str, gbps, names, memory_level: str, read_bytes=None,
                 write_bytes=None) -> str | None:
    """Return the level that bounds a warm point whose own cache has no measured roof, or
    None (ARCHITECTURE.md, rule 12): the nearest level outside it with a roof for the point's
    direction that the point does not beat by more than DEFAULT.edge_tol. On a Zen 5 core torch's sum
    reads L1 no faster than L2, so L1's window sets no roof and its points, at or under L2's
    speed, are L2's; a point faster than every outer roof stays unbounded (no bound would
    explain it)."""
    if gbps is None or level not in names:
        return None
    for outer in names[names.index(level) + 1:] + [memory_level]:
        found = model.point_bandwidth(outer, read_bytes, write_bytes)
        if found is not None:
            return outer if gbps <= found[0] * (1 + DEFAULT.edge_tol) else None
    return None


def point_bound(model: Roofline, working_set, mode, intensity, precision, caches, memory_level,
                read_bytes=None, write_bytes=None, gbps=None):
    """Return (boundary, bound_note, attainable GFLOP/s or None, bandwidth roof or None) of
    one point: the boundary level from the measured capacities and reaches in the roofs
    (roofs.analysis.model.level_sizes) and the reported caches; the bandwidth at that level matching
    the point's read and write bytes (Roofline.point_bandwidth: the returned roof carries it
    as its value, and the roof it came from as extra "bound_roof"); attainable = min(P,
    BW x I). No bound at all when that level has no measured roof; bound_note says why, or
    why the point is bounded by the level's best rather than its direction's roof (a Reason whose
    code is its last part's: no_level_roof, next_level_out, nearest_level, served_faster,
    no_direction_roof or direction_unknown). gbps (the
    point's measured rate): a warm point faster than its level's roof that an inner cache's
    speed explains is bounded by that cache (faster_level)."""
    sizes = level_sizes(model.roofs, caches)
    level = boundary_level(float(working_set or 0), mode, [(n, c) for n, c, _ in sizes], memory_level,
                           {n: r for n, _, r in sizes if r})
    served = None
    if mode != "cold":
        served = faster_level(model, level, float(working_set or 0), number(gbps), caches,
                              number(read_bytes), number(write_bytes))
    if served:
        level = served
    why = Reason(f"runs at {served} speed past its measured reach: bounded by {served}", "served_faster") \
        if served else ""
    found = model.point_bandwidth(level, number(read_bytes), number(write_bytes))
    if found is None:
        outer = slower_level(model, level, number(gbps), [n for n, _ in caches], memory_level,
                             number(read_bytes), number(write_bytes))
        if outer is not None:
            why = Reason(f"{level} has no measured roof: bounded by {outer}, the next level out, whose roof "
                         "explains its speed", "next_level_out")
        else:  # faster than the next level out: the next level in, never slower than this one, bounds it
            outer = _nearest_with_roof(model, level, caches, memory_level)
            if outer is None:
                return "", Reason(f"{level}: no measured roof for this level, so no bound", "no_level_roof"), None, None
            why = Reason(f"{level} has no measured roof: bounded by the nearest level with one, {outer}",
                         "nearest_level")
        level, found = outer, model.point_bandwidth(outer, number(read_bytes), number(write_bytes))
    value, label, note = found
    parts = [x for x in (note, why) if x]   # the note's code is its last part's
    note = Reason("; ".join(parts), parts[-1].code) if parts else ""
    best = model.bandwidth(level)
    bw = replace(best, value=value, extra={**best.extra, "bound_roof": label})
    i = number(intensity) or 0.0
    peak = model.compute(precision) if precision else None
    att = min(value * i, peak.value) if peak else value * i
    return level, note, att, bw


def _nearest_with_roof(model: Roofline, level: str, caches, memory_level: str) -> str | None:
    """Return the nearest level inside level with a roof (a cache is never slower than the one
    outside it, so an inner roof bounds it), else the nearest outside, else None."""
    order = [n for n, _ in caches] + [memory_level]
    at = order.index(level) if level in order else len(order)
    for name in order[:at][::-1] + order[at + 1:]:
        if model.bandwidth(name) is not None:
            return name
    return None


def bound_at(model: Roofline, level: str, precision: str, intensity, read_bytes=None,
             write_bytes=None) -> tuple[float, float] | None:
    """Return (attainable GFLOP/s, bandwidth GB/s) of a point whose bound point_bound placed at
    level, from model's roofs (Roofline.at: one end of every interval, rule 17): the same level
    and direction, min(P, BW x I); None when the level has no roof in model."""
    found = model.point_bandwidth(level, read_bytes, write_bytes) if level else None
    if found is None:
        return None
    i = number(intensity) or 0.0
    peak = model.compute(precision) if precision else None
    return (min(found[0] * i, peak.value) if peak else found[0] * i), found[0]


def direction_bytes(r) -> tuple:
    """Return a row's (read_bytes, write_bytes): its columns, or for a stream row of a run
    that predates them, bytes split by the kernel's arrays read and written; (None, None)
    when unknown."""
    rb, wb = number(getattr(r, "read_bytes", None)), number(getattr(r, "write_bytes", None))
    if rb is not None and wb is not None:
        return rb, wb
    arrays = OLD_RUN_STREAM_ARRAYS.get(str(getattr(r, "op", "")))
    nbytes = number(getattr(r, "bytes", None))
    if arrays is None or nbytes is None:
        return None, None
    return nbytes * arrays[0] / sum(arrays), nbytes * arrays[1] / sum(arrays)


def annotate(rows: pd.DataFrame, roofs, device: dict | None = None) -> pd.DataFrame:
    """Return rows with boundary and bound_note (point_bound), bound_roof (the roof that
    bounds it: "hbm.read", "l2.read+write", "hbm" for the level's best), attainable_gflops,
    pct_of_bw_roof = 100 x GB/s / that bandwidth, pct_of_attainable = 100 x GFLOP/s /
    attainable (for flop-free rows, the bandwidth percentage), the same bound at the lows and
    highs of the roofs' intervals (rule 17: attainable_low and attainable_high, the same level
    and direction; pct_of_attainable_low = 100 x GFLOP/s / attainable_high and
    pct_of_attainable_high = 100 x GFLOP/s / attainable_low, of the bandwidth alike for
    flop-free rows; empty where no roof has an interval), and flag: why a point sits above the
    top of its bound's band by more than its own spread (even its slow end, the p80 time,
    beats it)."""
    model = Roofline(roofs)
    # the bounds at the bands' ends, only where a roof has an interval (a run before method 8 has none)
    ends = {end: model.at(end) for end in ("low", "high")} if any(r.interval for r in model.roofs) else {}
    caches, level = device_levels(device or {})
    out = rows.copy()
    trust = usable(out) if not out.empty else pd.Series(dtype=bool)
    keys = ("boundary", "bound_note", "bound_roof", "attainable_gflops", "pct_of_bw_roof", "pct_of_attainable", "flag",
            *BAND_COLUMNS)
    cols = {k: [] for k in keys}
    for r, good in zip(out.itertuples(index=False), trust):
        if r.status != "ok":
            for k in cols:
                cols[k].append("" if k in ("boundary", "bound_note", "bound_roof", "flag") else None)
            continue
        precision = getattr(r, "precision", "") or ""
        boundary, note, att, bw = point_bound(model, r.working_set_bytes, r.mode, r.intensity, precision, caches, level,
                                              *direction_bytes(r), gbps=getattr(r, "gbps", None))
        pct_bw = 100 * r.gbps / bw.value if bw is not None and r.gbps == r.gbps else None
        flops = 0 if missing(r.flops) else r.flops
        pct_att = (100 * r.gflops / att if flops and att else pct_bw)
        band = {end: bound_at(m, boundary, precision, r.intensity, *direction_bytes(r)) if bw is not None else None
                for end, m in ends.items()}
        banded = bw is not None and len(band) == 2 and None not in band.values() and band["low"] != band["high"]
        for end, other in (("low", "high"), ("high", "low")):  # the % at the band's top is the low one
            pct = None
            if banded:
                att_end, bw_end = band[other]
                pct = 100 * r.gflops / att_end if flops and att_end else (100 * r.gbps / bw_end if bw_end else None)
            cols[f"attainable_{end}"].append(band[end][0] if banded else None)
            cols[f"pct_of_attainable_{end}"].append(pct)
        cols["boundary"].append(boundary)
        cols["bound_note"].append(note)
        cols["bound_roof"].append(bw.extra.get("bound_roof", bw.name) if bw is not None else "")
        cols["attainable_gflops"].append(att)
        cols["pct_of_bw_roof"].append(pct_bw)
        cols["pct_of_attainable"].append(pct_att)
        top_bw, top_att = (replace(bw, value=band["high"][1]), band["high"][0]) if banded else (bw, att)
        cols["flag"].append(existing_flag(r) or above_roof_causes(r, model, top_bw, top_att, bool(good), caches))
    for k, v in cols.items():
        out[k] = v
    # points within 2x of the launch floor (roofs/analysis/launch_floor.py)
    out["bound_note"] = with_launch_notes(out, roofs)
    return out


def existing_flag(r) -> str:
    """Return a flag the runner set while measuring (a busy machine, a jump), kept through re-annotation."""
    flag = str(getattr(r, "flag", "") or "")
    return flag if is_runner_flag(flag) else ""


def above_roof_causes(r, model: Roofline, bw: Roof | None, attainable, trusted_row: bool, caches=()) -> str:
    """Return "" when the point is under its bound within its spread, else the likely causes.

    A point is judged at its slow end (the p80 time): flop-free points against their
    bandwidth roof, the others against their attainable GFLOP/s."""
    p80 = getattr(r, "p80_ms", None)
    if bw is None or missing(p80) or not p80:
        return ""
    flops = 0 if missing(r.flops) else r.flops
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
        used = (bw.extra or {}).get("bound_roof", bw.name)
        if used != bw.name:
            causes.append(f"bounded by its direction's roof, {used} ({bw.value:.4g} GB/s): the kernels that set "
                          f"that roof ran slower than this one")
        if r.mode == "cold":
            causes.append(f"timed cold, so its bytes came from {bw.name}: the {used} roof measured too low")
        else:
            capacity = dict(caches).get(bw.name)
            edge = (bw.extra or {}).get("edge_bytes")
            where = (f"a {r.working_set_bytes / 2**20:.3g} MiB working set "
                     f"beside the {capacity / 2**20:.3g} MiB {bw.name}"
                     + (f" (plateau measured to {edge / 2**20:.3g} MiB)" if edge else "")
                     if capacity else f"a {r.working_set_bytes / 2**20:.3g} MiB working set")
            causes.append(f"timed warm: {where}; the {used} roof measured too low by the kernels that set it")
            llc = model.bandwidth(caches[-1][0]) if caches and not capacity else None
            reach = (llc.extra or {}).get("reach_bytes") if llc is not None else None
            if reach and r.working_set_bytes < 2 * reach:
                causes.append(f"residual {llc.name} hits: the sweep reaches {bw.name} speed "
                              f"(within {DEFAULT.edge_tol:.0%}) from "
                              f"{reach / 2**20:.3g} MiB, past the {llc.name} plateau's measured edge of "
                              f"{llc.extra['edge_bytes'] / 2**20:.3g} MiB")
        if bw.plateau_values and bw.plateau_values[1] > 1.1 * bw.plateau_values[0]:
            causes.append(f"the {bw.name} roof is noisy: its plateau spans "
                          f"{bw.plateau_values[0]:.3g} to {bw.plateau_values[1]:.3g} GB/s")
    else:
        causes.append(f"this kernel beats the GEMMs that set the {peak.name} roof: the roof was measured too low")
        causes.append("a clock above the one the roof was measured at")
    causes.append("a FLOP or byte count that is too high")
    return f"above its attainable {bound:.4g} {unit} even at p80 ({slow:.4g}): " + "; ".join(causes)
