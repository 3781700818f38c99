"""One statistic of a ceiling and its interval (ARCHITECTURE.md, rules 10 and 17): per group
(a working-set size, a shape, a message size) and pass the best usable row; the roof the
Policy.roof_rank-th highest group's best; its one-sided interval [roof, best x exp(R)], where
a roof whose point a revisit pass measured again reaches at least as far as one pass of the
run may read low (run_reach, with_run_reach), and the memory's roofs as far as any point of its
window moved between passes (with_memory_reach). roofs.analysis.model builds every level, direction and
compute roof with it, and roofs.analysis.links every link roof; this module imports neither."""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd

from bench.policy import Policy
from roofs.analysis.roofline import Roof


def measurements(rows: pd.DataFrame, group: pd.Series) -> pd.DataFrame:
    """Return, per (group, pass), the best row of rows (group: one value per row, in rows' order):
    the measurements a roof is a statistic of, in order of group, then pass; a tie goes to the
    row first in rows, and a row without a group is none."""
    passes = (rows["pass"].fillna(1).astype(int) if "pass" in rows else pd.Series(1, index=rows.index)).to_numpy()
    groups = group.to_numpy()
    pick = _fastest(rows["rate"].to_numpy(float), pd.factorize(groups, sort=True)[0], passes)
    return rows.iloc[pick].assign(_group=groups[pick], _pass=passes[pick])


def _fastest(rate: np.ndarray, *keys: np.ndarray) -> np.ndarray:
    """Return the position of the fastest row of each distinct key tuple, in order of the keys
    (the first key sorts first); a tie goes to the row first in order, and a row whose first
    key is negative (pd.factorize's code for none) is in no tuple."""
    order = np.lexsort((np.arange(len(rate)), -rate, *reversed(keys)))   # lexsort sorts by its last key first
    order = order[keys[0][order] >= 0]
    first = np.ones(len(order), bool)
    first[1:] = np.any([k[order][1:] != k[order][:-1] for k in keys], axis=0)
    return order[first]


def ceiling(meas: pd.DataFrame, policy: Policy, offchip: bool = False) -> tuple[float, tuple, dict, pd.Series]:
    """Return (roof, interval, basis, the row at the top) of a plateau's measurements (module
    docstring): the roof_rank-th highest; its interval [roof, best x exp(reach x S)]. offchip
    (groups are working-set sizes past the last cache): a plateau still falling at its largest
    size may sit above the memory's own speed (a set that size still hits in the cache now and
    then), so the low end is at most its largest size's best, the set least served by any cache.
    (A cache's plateau falls at its largest sizes because it is filling up.)"""
    # each size's (or shape's) best pass: noise only slows, so a pass faster than another is not luck
    per = _per_group(meas)
    ordered = meas.iloc[per["best_at"]].sort_values("rate", ascending=False)
    rates = ordered["rate"].to_numpy(float)
    at = ordered.iloc[min(policy.roof_rank, len(rates)) - 1]
    roof = float(at["rate"])
    # off chip a smaller set still hits in a fading cache now and then (its faster read is that
    # cache's, not the memory's): the top reaches from the sets at or past the roof's
    best = float(ordered.loc[ordered["_group"] >= at["_group"], "rate"].max()) if offchip else float(rates[0])
    drift = _spreads(meas, per)
    spread = {"best_over_roof": math.log(best / roof),
              "passes": float(np.median([d for d, _ in drift])) if drift else 0.0,
              "pass_reach": float(np.median([policy.pass_reach(n) * d for d, n in drift])) if drift else 0.0,
              "row": float(ordered["jitter"].iloc[0] or 0.0)}
    s = max(policy.interval_reach * max(spread["best_over_roof"], spread["row"]), spread["pass_reach"])
    high = max(best * math.exp(s), roof * (1 + 2 * policy.min_halfwidth))
    sizes = per["max"] if offchip else []
    fall = min(1.0, sizes[-1] / roof) if len(sizes) >= 2 else 1.0
    basis = {"measurements": len(meas), "groups": len(rates), "passes": int(meas["_pass"].nunique()),
             "most_passes": int(per["passes"].max()), "spread": spread, "best": best, "fall": fall}
    return roof, (roof * fall, float(high)), basis, at


def run_reach(rates: pd.DataFrame, policy: Policy) -> float:
    """Return how far below the truth one pass of a run may read (log): the median over the
    run's points (rates' column "key") measured in n >= 2 passes of (1 + Policy.pass_reach(n)) x
    their passes' log max / min; 0 for a run of one pass. Noise only slows: a point's fastest pass
    is within pass_reach(n) x its spread of the truth but for Policy.pass_miss of runs, and any
    one of its passes within one spread more. A roof whose every row ran in one pass has no
    spread of its own, yet that pass was one of the run's: it reaches at least this far."""
    drift = _point_spreads(rates)
    return float(np.median([(1 + policy.pass_reach(n)) * d for d, n in drift])) if drift else 0.0


def largest_move(rates: pd.DataFrame) -> float:
    """Return the largest log max / min of rates' points (column "key") between their passes, 0
    for none measured twice: how much slower than another pass any one pass of them read."""
    return max((d for d, _ in _point_spreads(rates)), default=0.0)


def _point_spreads(rates: pd.DataFrame) -> list[tuple[float, int]]:
    """Return _spreads of rates' points (column "key"), each pass's best row a measurement."""
    return _spreads(measurements(rates, rates["key"])) if not rates.empty else []


def _per_group(meas: pd.DataFrame) -> dict:
    """Return, per group of measurements (column "_group", in sorted order; a row without a group
    in none): "best_at", the position of its fastest row (the first of a tie); "max" and "min",
    its fastest and slowest rate; "rows" and "passes", how many rows and distinct passes it holds."""
    codes, uniques = pd.factorize(meas["_group"].to_numpy(), sort=True)
    rate, k, mine = meas["rate"].to_numpy(float), len(uniques), codes >= 0
    best = _fastest(rate, codes)
    low = np.full(k, np.inf)
    np.minimum.at(low, codes[mine], rate[mine])
    pairs = np.unique(np.column_stack([codes, meas["_pass"].to_numpy()])[mine], axis=0)
    return {"best_at": best, "max": rate[best], "min": low,
            "rows": np.bincount(codes[mine], minlength=k), "passes": np.bincount(pairs[:, 0], minlength=k)}


def _spreads(meas: pd.DataFrame, per: dict | None = None) -> list[tuple[float, int]]:
    """Return, per group of measurements (one per group and pass) measured in n >= 2 passes,
    (its passes' log max / min, n). per: _per_group(meas), where the caller has it."""
    per = _per_group(meas) if per is None else per
    return [(math.log(hi / lo), int(n)) for hi, lo, n in zip(per["max"], per["min"], per["rows"]) if n >= 2]


def with_run_reach(roof: Roof, reach: float, name: str = "run_reach") -> Roof:
    """Return roof with its interval reaching at least reach (run_reach) past its best (a
    latency roof: down from its floor), recorded as extra[name]. estimate passes a roof whose
    point a revisit pass measured again (its best pass was one of the run's, however close its
    own passes read: a busy row the runner missed, or flagged, leaves a roof fewer passes than
    the run made, and their spread may be none); with_memory_reach the memory's roofs."""
    basis, iv = roof.extra.get("interval_basis"), roof.interval
    if not reach or not iv:
        return roof
    if roof.kind == "latency":
        iv = (min(iv[0], roof.value / math.exp(reach)), iv[1])
    else:
        iv = (iv[0], max(iv[1], (basis or {}).get("best", roof.value) * math.exp(reach)))
    return replace(roof, interval=iv, extra={**roof.extra, name: reach})


def with_memory_reach(roofs: list, stream: pd.DataFrame, memory: str) -> list:
    """Return roofs with the off-chip level's roof and its direction roofs reaching at least as far
    past their best as any point of its window moved between passes (ln max / min): the memory is
    shared with the host's other tenants, who slow it minute to minute for every kernel alike, and
    noise only slows, so a point that read f x slower in one pass shows that any pass of any kernel
    there may have; a kernel whose every pass met a slow minute shows no spread of its own."""
    level = next((r for r in roofs if r.name == memory and r.extra.get("window_bytes")), None)
    if level is None:
        return roofs
    lo, hi = level.extra["window_bytes"]
    mine = stream[(stream["working_set_bytes"] >= lo) & (stream["working_set_bytes"] <= hi)]
    reach = largest_move(mine)
    return [with_run_reach(r, reach, "memory_reach") if r.name.split(".")[0] == memory else r for r in roofs]
