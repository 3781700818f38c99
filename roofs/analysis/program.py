"""A program's ops under the roofs (ARCHITECTURE.md, rule 12): each op's bound, its share of the step and what
it would win at its roof.

Each op is a warm point (a program's steady state re-reads what earlier ops left in the caches): its
working set (read + written bytes) picks its memory level, its read and write bytes the level's direction
roof, its precision its compute roof (roofs.analysis.bounds.point_bound, the suite's one rule). From there:

    time share     = time / step time
    attained       = FLOPs / time (GFLOP/s), or bytes / time (GB/s) for an op with no FLOP formula
    % attainable   = 100 x attained / attainable, attainable = min(P, BW x I) (bandwidth BW for a flop-free op)
    headroom       = 100 / % attainable (x)
    bound time     = time x % attainable / 100 (the op at its roof)
    to win         = time share x (1 - % attainable / 100) (the step's share the op would give back)
An op above its bound (% attainable over 100) wins nothing and is flagged: its bound time is its time.

One ranking holds every op with counted FLOPs or bytes (counted_by "flops" or "bytes"): an op with FLOPs at
min(P, BW x I), an op that moves bytes and counts no FLOPs (a cast, a copy, an elementwise op with no formula)
at its level's bandwidth roof, BW, by its read + written bytes. Ranked by to_win, then share (largest
first): `rank` 1, 2, ... An op outside the ranking has no rank and its code in `unranked`: "uncounted"
(neither bytes nor FLOPs counted), "no_roof" (no measured roof at its level or precision) or "no_time" (the
profiler gave it no time); such ops follow the ranked ones, largest share first, at their own time.
The % of attainable has an interval where the bounding roofs have one (ARCHITECTURE.md, rule 17: the same
bound at the low and high ends of the roofs' intervals, roofs.analysis.bounds.bound_at): pct_low at the band's
top, pct_high at its bottom.
"""
from __future__ import annotations

import math

import pandas as pd

from roofs.analysis.bounds import bound_at, point_bound
from roofs.analysis.model import device_levels
from roofs.analysis.roofline import Roofline

PLACED = ["boundary", "bound_roof", "bound_note", "intensity", "gflops", "gbps", "attainable_gflops",
          "bandwidth_gbps", "pct_of_attainable", "pct_low", "pct_high", "headroom", "share", "bound_s", "to_win",
          "has_formula", "counted_by", "unranked", "rank"]
# why an op has no rank (ops.csv's `unranked`; "" for a ranked op)
UNCOUNTED, NO_ROOF, NO_TIME = "uncounted", "no_roof", "no_time"


def _peak_at(model: Roofline, precision: str) -> tuple[float, float] | None:
    """Return (P, P) of an op with FLOPs and no bytes (bounded by compute alone) from model, or None."""
    peak = model.compute(precision) if precision else None
    return (peak.value, peak.value) if peak is not None else None


TEXT = ("op", "module", "shapes", "dtype", "precision", "kind", "boundary", "bound_roof", "bound_note", "counted_by",
        "unranked")


def read_ops(path) -> pd.DataFrame:
    """Return a profile folder's ops.csv with its text columns as strings ("" where empty)."""
    ops = pd.read_csv(path, dtype={c: str for c in TEXT})  # read as text: "2048" stays a shape, "" stays text
    for c in TEXT:
        if c in ops:
            ops[c] = ops[c].fillna("").astype(str)
    return ops


def place_ops(rows: pd.DataFrame, roofs, device: dict, step_s: float) -> pd.DataFrame:
    """Return rows (bench.run.profile's ops.csv) with the PLACED columns (the module docstring's formulas):
    the ranked ops first, by to_win, then share (largest first), then the unranked ones by share."""
    model = Roofline(list(roofs))
    ends = (model.at("low"), model.at("high"))
    caches, memory = device_levels(device)
    out = rows.copy()
    cols = {k: [] for k in PLACED}
    for r in out.itertuples(index=False):
        nbytes = float(r.read_bytes + r.write_bytes)
        has = not (isinstance(r.flops, float) and math.isnan(r.flops))
        flops = float(r.flops) if has else 0.0
        t = float(r.time_s)
        intensity = flops / nbytes if nbytes else (math.inf if flops else 0.0)
        gflops = flops / t / 1e9 if t > 0 else math.nan
        gbps = nbytes / t / 1e9 if t > 0 else math.nan
        counted = "flops" if flops else "bytes" if nbytes else ""
        if counted:
            level, note, att, bw = point_bound(model, nbytes, "warm",
                                               intensity if math.isfinite(intensity) else 0.0,
                                               r.precision if flops else "", caches, memory, r.read_bytes,
                                               r.write_bytes, gbps=gbps)
        else:  # nothing counted: no level, no roof
            level, note, att, bw = "", "neither bytes nor FLOPs counted", None, None
        if flops and not math.isfinite(intensity):  # FLOPs with no bytes: bounded by compute alone
            peak = model.compute(r.precision) if r.precision else None
            att = peak.value if peak else None
        pct = lo = hi = None
        if not t > 0:  # no time (or a NaN one): nothing to rank by
            pass
        elif flops and att:
            pct = 100 * gflops / att
        elif not flops and bw is not None and nbytes:
            pct = 100 * gbps / bw.value
        if pct is not None:
            band = [bound_at(m, level, r.precision if flops else "", intensity, r.read_bytes, r.write_bytes)
                    if math.isfinite(intensity) else _peak_at(m, r.precision) for m in ends]
            if None not in band and band[0] != band[1]:
                k, rate = (0, gflops) if flops else (1, gbps)  # band ends are (GFLOP/s, GB/s)
                lo, hi = 100 * rate / band[1][k], 100 * rate / band[0][k]
        share = t / step_s if step_s > 0 else math.nan
        cols["boundary"].append(level)
        cols["bound_roof"].append(bw.extra.get("bound_roof", bw.name) if bw is not None else "")
        cols["bound_note"].append(note)
        cols["intensity"].append(intensity)
        cols["gflops"].append(gflops)
        cols["gbps"].append(gbps)
        cols["attainable_gflops"].append(att if flops else None)
        cols["bandwidth_gbps"].append(bw.value if bw is not None else None)
        cols["pct_of_attainable"].append(pct)
        cols["pct_low"].append(lo)
        cols["pct_high"].append(hi)
        cols["headroom"].append(100 / pct if pct else None)
        cols["share"].append(share)
        cols["bound_s"].append(t * min(pct, 100) / 100 if pct else t)
        cols["to_win"].append(share * max(0.0, 1 - pct / 100) if pct else 0.0)
        cols["has_formula"].append(has)
        cols["counted_by"].append(counted)
        cols["unranked"].append("" if pct is not None else UNCOUNTED if not counted else NO_TIME if not t > 0
                                else NO_ROOF)
        cols["rank"].append(None)
    for k, v in cols.items():
        out[k] = v
    out["_ranked"] = out["unranked"] == ""
    out = out.sort_values(["_ranked", "to_win", "share"], ascending=False, kind="stable").drop(columns="_ranked")
    out = out.reset_index(drop=True)
    ranked = out["unranked"] == ""
    out["rank"] = pd.array([i + 1 if ok else None for i, ok in enumerate(ranked)], dtype="Int64")
    return out


def ranking(placed: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Return (the ranked ops in rank order, the unranked ops by share) of place_ops' table: the one ranking
    the report prints, and the ops listed after it with their time and `unranked` code."""
    has = placed["rank"].notna()
    return placed[has].sort_values("rank", kind="stable"), placed[~has]


def totals(placed: pd.DataFrame, step_s: float) -> dict:
    """Return the step's sums: ops_s (the ops' time), gap_s = step - ops (between ops), bound_s (each op at its
    bound, an op without one at its own time) and program_bound_s = bound_s (how fast the ops could run here),
    unbounded (ops with no bound), unranked ({code: ops} of the ops outside the ranking), flops (the table's)
    and bytes."""
    ops_s = float(placed["time_s"].sum())
    codes = placed.loc[placed["unranked"] != "", "unranked"]
    return {"step_s": step_s, "ops_s": ops_s, "ops": len(placed), "gap_s": step_s - ops_s,
            "bound_s": float(placed["bound_s"].sum()),
            "unbounded": int(placed["pct_of_attainable"].isna().sum()),
            "unranked": {str(k): int(v) for k, v in codes.value_counts().items()},
            "flops": float(placed["flops"].fillna(0).sum()),
            "bytes": float((placed["read_bytes"] + placed["write_bytes"]).sum())}
