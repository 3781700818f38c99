"""Each Triton point at every level it crosses (ARCHITECTURE.md, rule 12): its bound at
each memory level from the bytes its tiles move there (bench/ops/traffic.py, the l2_bytes and
l1_bytes columns), and the binding level, the one whose bound is lowest.

At a level, bound = BW_level x FLOPs / bytes_level, the bandwidth matching the traffic's
direction (Roofline.point_bandwidth): at the point's boundary level its read and write
bytes; in L2, the tiles' loads read and the output written; in L1 (shared memory), reads
only. At the boundary level the bytes are the larger of the compulsory bytes and the level's
own column (a small GEMM that fits L2 still loads its tiles through it). The compute roof
of the point's precision is a bound too: a point whose lowest bound is that roof is
compute-bound ("compute").
"""
from __future__ import annotations

import math

import pandas as pd

from bench.results import LEVEL_BYTE_COLUMNS, text_column
from bench.util import missing, number
from roofs.analysis.roofline import Roofline


def _num(v) -> float:
    """Return v as a float, NaN when it is missing (NaN compares false: a missing count is never > 0)."""
    f = number(v)
    return math.nan if f is None else f


def level_bounds(row, model: Roofline) -> dict:
    """Return {level: bound GFLOP/s} of one row (a Series or namedtuple) at its boundary level
    and at each level whose bytes it carries (levels without a roof are left out), and
    {"compute": roof} when its precision has a compute roof."""
    get = (lambda k: row.get(k)) if isinstance(row, (dict, pd.Series)) else (lambda k: getattr(row, k, None))
    flops = _num(get("flops"))
    if missing(flops) or flops <= 0:
        return {}
    written = _num(get("write_bytes"))
    out = {}
    boundary = str(get("boundary") or "")
    levels = {boundary: (_num(get("bytes")), _num(get("read_bytes")), written)} if boundary else {}
    for level, col in LEVEL_BYTE_COLUMNS.items():
        nbytes = _num(get(col))
        if not nbytes > 0:
            continue
        if level == boundary:
            nbytes = max(nbytes, levels[level][0])
        w = 0.0 if level == "l1" else number(written)
        levels[level] = (nbytes, nbytes - w if w is not None else None, w)
    for level, (nbytes, r, w) in levels.items():
        found = model.point_bandwidth(level, number(r), number(w)) if nbytes > 0 else None
        if found is not None:
            out[level] = found[0] * flops / nbytes
    peak = model.compute(str(get("precision") or "")) if get("precision") else None
    if peak is not None:
        out["compute"] = peak.value
    return out


def binding_level(bounds: dict) -> str:
    """Return the key of the lowest bound ("" when there is none)."""
    return min(bounds, key=bounds.get) if bounds else ""


def triton_binding_table(df: pd.DataFrame, model: Roofline) -> pd.DataFrame:
    """Return one row per Triton kernel (op, impl, precision): its fastest point, its bound
    at each level and the binding level. Only ok rows with FLOPs; empty when none."""
    ok = df[(df["status"] == "ok") & (df.get("backend", "") == "triton")
            & (pd.to_numeric(df["flops"], errors="coerce") > 0)]
    ok = ok[pd.to_numeric(ok["gflops"], errors="coerce") > 0]
    if ok.empty:
        return pd.DataFrame()
    best = ok.loc[ok.assign(_p=text_column(ok, "precision")).groupby(["op", "impl", "_p"])["gflops"].idxmax()]
    rows = []
    for _, r in best.iterrows():
        b = level_bounds(r, model)
        rows.append({"kernel": f"{r['impl']} {r['precision'] or r['dtype']}", "shape": r["shape"],
                     "GFLOP/s": float(r["gflops"]),
                     **{f"bound {lv}": b.get(lv) for lv in ("hbm", "dram", "l3", "l2", "l1", "compute") if lv in b},
                     "binding": binding_level(b) or "-",
                     "% of binding bound": 100 * float(r["gflops"]) / b[binding_level(b)] if b else None})
    table = pd.DataFrame(rows)
    levels = [f"bound {lv}" for lv in ("hbm", "dram", "l3", "l2", "l1", "compute") if f"bound {lv}" in table]
    return table[["kernel", "shape", "GFLOP/s", *levels, "binding", "% of binding bound"]]
