"""Each measured roof's interval and the second measurement that confirms it (ARCHITECTURE.md,
rule 17).

    with_intervals(roofs, rows, points, device, counters)
        -> the roofs, each measured one with `interval` (low, high), `extra["interval_basis"]`
           (what set each end) and, for a memory level's roof or a precision's, `confirmation`

A row's interval is the distribution-free 95% confidence interval of its median (median_ranks:
order statistics, no assumption on the noise's shape), read as a rate: a rate is value x
median time / sample time, so the fastest samples give the top. A roof's top is its row's (or its
steady sustained window's, where that ran faster; or, for a compute or latency roof, a revisit
pass of its point that ran faster); its bottom reaches down to the lowest measurement of the
same kernel, impl and dtype on its plateau (a precision: the next-best shape, and its point's
slowest revisit pass) and to its sustained window (rule 17: on a shared host noise only ever
slows a read). A latency's ends are the other way round.

The confirmation checks, each the best row of its kind among the roof's candidates
(roofs.analysis.sustained.candidate_rows, the rows that could have set it):

    impl       another backend (torch, Triton, numpy) in the same direction or precision
    kernel     another op of the same backend and direction (copy and triad; read and
               reread; another GEMM sweep)
    counters   the counters' DRAM bytes for the roof's own point, on NVIDIA (counters.csv)
    sustained  the roof's sustained window: the same kernel run longer; named, confirms nothing
"""
from __future__ import annotations

import dataclasses
import math

import pandas as pd

from bench.hw.counters import FLAG_FRACTION
from bench.results import first_pass_id
from bench.util import number
from roofs.analysis.derive import (
    CACHE_REL_TOL,
    REL_TOL,
    SUSTAINED_MODE,
    device_levels,
    stream_direction,
    usable_offchip,
)
from roofs.analysis.roofline import DIRECTIONS, Roof
from roofs.analysis.sustained import candidate_rows
from roofs.analysis.trust import trusted, usable_floor

Z95 = 1.959964  # the normal quantile of a two-sided 95% interval
CHAIN_SPAN = 8  # an FMA chain within 8x the roof's chain length (FLOPs per byte) measures its ceiling;
# a shorter one is a point on the chain sweep's slope, where the passes' bytes decide (fma.png)
SMALL_N = 6     # under this many samples the interval is their whole range (no ranks inside it)
INDEPENDENT = ("impl", "kernel", "counters")  # the checks that can confirm a roof, in order
CHECK_WHAT = {"impl": "another impl of the same op", "kernel": "another kernel of the same direction",
              "counters": "the counters' DRAM bytes for its own point", "sustained": "its own sustained window"}
COMPUTE_WHAT = {"impl": "another impl of the same precision", "kernel": "another GEMM sweep of the same impl"}


def median_ranks(n: int) -> tuple[int, int]:
    """Return the 0-based indices (j, k) into n sorted samples of the distribution-free 95%
    confidence interval of their median: 1-based ranks floor((n - z sqrt n) / 2) and
    ceil(1 + (n + z sqrt n) / 2) (the binomial's normal approximation), clipped to the samples;
    the whole range (0, n - 1) under SMALL_N samples."""
    if n < SMALL_N:
        return 0, max(n - 1, 0)
    half = Z95 * math.sqrt(n)
    lo = math.floor((n - half) / 2)
    hi = math.ceil(1 + (n + half) / 2)
    return max(lo - 1, 0), min(hi - 1, n - 1)


def rate_interval(value: float, median_ms, samples_s=None, p20_ms=None, p80_ms=None,
                  per_time: bool = False) -> tuple[float, float] | None:
    """Return (low, high) of a row's figure value (a rate, value ~ 1 / time; or, per_time, a
    latency, value ~ time) from its samples' median interval (median_ranks), each rank read as
    value x median / t (value x t / median for a latency); from its p20 and p80 times when it
    has no samples; None when it has neither or no median."""
    med = number(median_ms)
    if not med or number(value) is None:
        return None
    times = sorted(float(t) * 1e3 for t in (samples_s or []) if number(t))  # ms, as median_ms
    if times:
        j, k = median_ranks(len(times))
        fast, slow = times[j], times[k]
    elif number(p20_ms) and number(p80_ms):
        fast, slow = float(p20_ms), float(p80_ms)
    else:
        return None
    if per_time:
        return value * fast / med, value * slow / med
    return value * med / slow, value * med / fast


def _rate(kind: str) -> str:
    return "gflops" if kind == "compute" else "gbps"


def row_interval(row, samples: dict, kind: str, value: float | None = None) -> tuple[float, float] | None:
    """Return a row's interval (rate_interval) at its own figure, or at value (a roof's figure
    from that row) when given. samples: point_id -> raw samples (seconds per call)."""
    fig = number(row.get(_rate(kind))) if value is None else value
    if fig is None:
        return None
    return rate_interval(fig, row.get("median_ms"), samples.get(str(row.get("point_id"))),
                         row.get("p20_ms"), row.get("p80_ms"), per_time=kind == "latency")


def _candidates(roof: Roof, sweep: pd.DataFrame, device: dict, own, window: bool = False) -> pd.DataFrame:
    """Return the usable sweep rows that could have set roof: its level's plateau rows (window:
    every row in the level's window, rule 11) in its direction (the rows rule 11's plateaus may
    use: usable_offchip), or its precision's trusted rows of the family that set it."""
    if roof.kind == "compute":
        rows = candidate_rows(sweep, "compute", roof.name, device, roof)
        return rows[trusted(rows)] if not rows.empty else rows
    level, _, direction = roof.name.partition(".")
    rows = candidate_rows(sweep, "bandwidth", level, device, None if window else roof)
    if rows.empty:
        return rows
    rows = rows[usable_offchip(rows)]
    if rows.empty:
        return rows
    want = direction if direction in DIRECTIONS else (stream_direction(pd.DataFrame([own])).iloc[0]
                                                       if own is not None else "")
    return rows[stream_direction(rows) == want] if want else rows


def _passes(ok: pd.DataFrame, own, kind: str) -> pd.DataFrame:
    """Return own's point at its other passes (rule 11's revisits: the same call measured at
    another minute of the run), the rows among them rule 11 may use (usable_offchip: a noisy
    one's median is a floor of the call's speed), or for a latency those that may set a floor
    (usable_floor: any spread)."""
    mine = ok["point_id"].map(first_pass_id) == first_pass_id(own["point_id"])
    same = ok[mine & (ok["point_id"] != own["point_id"]) & ok["median_ms"].notna()]
    if same.empty:
        return same
    return same[usable_floor(same) if kind == "latency" else usable_offchip(same)]


def pass_span(roof: Roof, own, again: pd.DataFrame) -> list[float] | None:
    """Return [lowest, highest] of a roof's point over its passes (its own row and again, in
    the roof's unit: extra "passes" of a cache, compute or latency roof, as an off-chip roof's
    per-pass bests), or None with one pass."""
    if again.empty:
        return None
    figure = _pass_figures(roof, own, again)
    return [float(min(figure.min(), roof.value)), float(max(figure.max(), roof.value))]


def _pass_figures(roof: Roof, own, again: pd.DataFrame) -> pd.Series:
    """Return each of again's passes in the roof's unit (a latency scaled from its own row's median)."""
    if roof.kind == "latency":
        return roof.value * again["median_ms"].astype(float) / float(own["median_ms"])
    return again[_rate(roof.kind)].astype(float)


def _pass_ends(roof: Roof, own, again: pd.DataFrame, ci: tuple) -> list:
    """Return the basis entries of a compute or latency roof's other passes (again, rule 17):
    the slowest as the band's slow end; the fastest, where it ran faster than the roof's own
    interval allows, as its fast end (noise never speeds a call: the ceiling may lie there)."""
    if again.empty:
        return []
    figure = _pass_figures(roof, own, again)
    slow, fast = (figure.idxmax(), figure.idxmin()) if roof.kind == "latency" else (figure.idxmin(), figure.idxmax())
    slow_end, fast_end = ("high", "low") if roof.kind == "latency" else ("low", "high")
    out = [{"end": slow_end, "point_id": str(again.loc[slow, "point_id"]), "value": float(figure[slow]),
            "what": "its own point measured again at another minute of the run (its slowest revisit pass: "
                    "the host's noise)"}]
    beyond = figure[fast] < ci[0] if roof.kind == "latency" else figure[fast] > ci[1]
    if beyond:
        out.append({"end": fast_end, "point_id": str(again.loc[fast, "point_id"]), "value": float(figure[fast]),
                    "what": "its own point at a revisit pass that ran faster than its row allows (a row the "
                            "roof may not rest on, rule 10: noise never speeds a call)"})
    return out


def _same_path(rows: pd.DataFrame, own) -> pd.Series:
    return (rows["op"] == own["op"]) & (rows["impl"] == own["impl"]) & (rows["dtype"] == own["dtype"])


def _interval(roof: Roof, own, cands: pd.DataFrame, samples: dict, again: pd.DataFrame) -> tuple[tuple | None, list]:
    """Return (roof's interval, its basis): the top from its row's median interval; the bottom
    the lowest of that interval's lower end, the next-best same-path candidate, the slowest of
    its own point's other passes (again: a latency's top), and the sustained window below the
    burst (rule 17)."""
    ci = row_interval(own, samples, roof.kind, roof.value)
    if ci is None:
        return None, []
    basis = [{"end": "high", "what": "the upper end of the 95% interval of its row's median",
              "point_id": str(own["point_id"]), "value": ci[1]},
             {"end": "low", "what": "the lower end of the 95% interval of its row's median",
              "point_id": str(own["point_id"]), "value": ci[0]}]
    rate = _rate(roof.kind)
    if roof.kind in ("compute", "latency"):  # a bandwidth roof's passes are among its plateau's rows
        basis += _pass_ends(roof, own, again, ci)
    if roof.kind in ("bandwidth", "compute") and not cands.empty:
        mates = cands[_same_path(cands, own) & (cands["point_id"] != own["point_id"]) & cands[rate].notna()]
        if roof.kind == "compute":  # another shape, not its own point's other passes (above)
            mates = mates[mates["point_id"].map(first_pass_id) != first_pass_id(own["point_id"])]
        if roof.kind == "compute" and own.get("family") == "fma":  # a chain's ceiling: the sweep's long chains only
            mates = mates[mates["intensity"].astype(float) >= float(own["intensity"]) / CHAIN_SPAN]
        if not mates.empty and roof.kind == "bandwidth":  # each the same ceiling measured again
            low_row = mates.loc[mates[rate].idxmin()]
            basis.append({"end": "low", "point_id": str(low_row["point_id"]), "value": float(low_row[rate]),
                          "what": "the lowest row of the same kernel, impl and dtype on its plateau (another "
                                  "working-set size or revisit pass: the host's noise)"})
        elif not mates.empty:  # another shape runs the units differently: what the roof reads without its best
            nxt = mates.loc[mates[rate].idxmax()]
            basis.append({"end": "low", "point_id": str(nxt["point_id"]), "value": float(nxt[rate]),
                          "what": "the next-best row of the same kernel, impl and dtype (another shape)"})
    sus = (roof.extra or {}).get("sustained") or {}
    if number(sus.get("value")) is not None and sus["value"] < roof.value:  # steady or not: rule 14's figure
        basis.append({"end": "low", "what": "its sustained window's median" + ("" if sus.get("steady") else
                      " (unsteady: the host's noise over a longer window)"),
                      "point_id": sus.get("point_id", ""), "value": float(sus["value"])})
    elif number(sus.get("value")) is not None and sus.get("steady") and sus["value"] > ci[1]:
        basis.append({"end": "high", "what": "its steady sustained window's median, above the burst (it read low)",
                      "point_id": sus.get("point_id", ""), "value": float(sus["value"])})
    low = min(b["value"] for b in basis if b["end"] == "low")
    high = max(b["value"] for b in basis if b["end"] == "high")
    low, high = min(low, roof.value), max(high, roof.value)
    for b in basis:
        b["sets"] = b["value"] == (high if b["end"] == "high" else low)
    return (low, high), basis


def agreement_tol(roof: Roof, memory: str) -> float:
    """Return how far apart two kernels' figures of one ceiling may be and still agree (rule 17):
    rule 11's plateau tolerance, 15% in a cache (read-only and read-write kernels differ more
    there), 10% off chip and for a precision."""
    cache = roof.kind == "bandwidth" and roof.name.split(".")[0] != memory
    return CACHE_REL_TOL if cache else REL_TOL


def agrees(other: tuple, band: tuple, tol: float) -> bool:
    """Return whether an interval other = (lo, hi) meets the band (lo, hi) once other is widened
    by the factor 1 + tol each way."""
    return other[1] * (1 + tol) >= band[0] and other[0] <= band[1] * (1 + tol)


def _check(kind: str, roof: Roof, row, samples: dict, what: str, tol: float) -> dict:
    """Return one confirmation check: the row, its figure and interval, whether it meets the roof's band."""
    rate = _rate(roof.kind)
    value = float(row[rate])
    iv = row_interval(row, samples, roof.kind) or (value, value)
    return {"kind": kind, "what": what, "point_id": str(row["point_id"]), "op": str(row["op"]),
            "impl": str(row["impl"]), "dtype": str(row["dtype"]), "value": value, "interval": [iv[0], iv[1]],
            "agrees": agrees(iv, roof.interval, tol)}


def _cause(check: dict, roof: Roof, own, other) -> str:
    """Return the likely cause of a check that falls below the roof's band."""
    pct = 100 * check["value"] / roof.value if roof.value else float("nan")
    if check["kind"] == "counters":
        return (f"a count that is wrong: the counters read {check['ratio']:.2f}x the formula's DRAM bytes "
                f"for {roof.point_id}")
    if check["value"] > roof.value:  # above the band: the roof itself may read low
        return (f"a faster measurement than the roof: {check['impl']} reads {pct:.0f}% of it "
                f"({check['point_id']}), a row that could not set it (unsteady, flagged, or off the roof's "
                "plateau): the roof may read low")
    if check["kind"] == "impl":
        return (f"one impl's own limit: {check['impl']} reaches {pct:.0f}% of {roof.impl}'s figure "
                "(the slower impl's code, or a count the faster one gets wrong)")
    if roof.kind == "compute":
        return (f"the sweeps differ: {check['op']}'s best reaches {pct:.0f}% of {roof.op}'s (shapes the library "
                "runs less well, or a roof set by one lucky shape)")
    mine, theirs = number(own.get("working_set_bytes")), number(other.get("working_set_bytes"))
    if mine and theirs and theirs >= 2 * mine:
        return (f"a cache the working set did not leave: the roof's row is at {mine / 2**20:,.3g} MiB, "
                f"{check['op']}'s best at {theirs / 2**20:,.3g} MiB reaches {pct:.0f}%")
    return (f"one kernel's own limit: {check['op']} reaches {pct:.0f}% of {roof.op} in the same direction "
            "(its loop or its mix of reads and writes, not the memory)")


def _counters_check(roof: Roof, counters: pd.DataFrame | None, memory: str) -> dict | None:
    if counters is None or counters.empty or roof.kind != "bandwidth" or roof.name.split(".")[0] != memory:
        return None
    mine = counters[(counters["point_id"] == roof.point_id) & (counters["status"] == "ok")]
    ratio = number(mine["dram_ratio"].iloc[0]) if not mine.empty else None
    if ratio is None:
        return None
    value = roof.value * ratio
    return {"kind": "counters", "what": CHECK_WHAT["counters"], "point_id": roof.point_id, "op": roof.op,
            "impl": roof.impl, "dtype": roof.dtype, "value": value, "ratio": ratio,
            "interval": [value, value], "agrees": bool(abs(ratio - 1) <= FLAG_FRACTION + 1e-12)}


def _confirmation(roof: Roof, own, cands: pd.DataFrame, samples: dict, counters, memory: str) -> dict:
    """Return the roof's confirmation (rule 17): every check the run has, its status, the first
    check that agrees, and a finding for a disputed or unconfirmed roof."""
    rate = _rate(roof.kind)
    words = COMPUTE_WHAT if roof.kind == "compute" else CHECK_WHAT
    others = cands[(cands["point_id"] != own["point_id"]) & cands[rate].notna()] if not cands.empty else cands
    checks = []
    if not others.empty:
        kinds = {"impl": others["backend"] != own["backend"],
                 "kernel": (others["backend"] == own["backend"]) & (others["op"] != own["op"])}
        for kind, sel in kinds.items():
            pool = others[sel]
            if not pool.empty:
                best = pool.loc[pool[rate].idxmax()]
                check = _check(kind, roof, best, samples, words[kind], agreement_tol(roof, memory))
                if not check["agrees"]:
                    check["cause"] = _cause(check, roof, own, best)
                checks.append(check)
    counted = _counters_check(roof, counters, memory)
    if counted is not None:
        if not counted["agrees"]:
            counted["cause"] = _cause(counted, roof, own, None)
        checks.append(counted)
    sus = (roof.extra or {}).get("sustained") or {}
    if number(sus.get("value")) is not None:
        lo, hi = roof.interval
        checks.append({"kind": "sustained", "what": CHECK_WHAT["sustained"], "point_id": sus.get("point_id", ""),
                       "op": roof.op, "impl": roof.impl, "dtype": roof.dtype, "value": float(sus["value"]),
                       "interval": [float(sus["value"])] * 2, "agrees": bool(lo <= sus["value"] <= hi)})
    independent = [c for c in checks if c["kind"] in INDEPENDENT]
    by = next((c for c in independent if c["agrees"]), None)
    label = f"{roof.name} ({roof.impl})"
    if by is not None:
        return {"status": "confirmed", "by": by, "checks": checks, "finding": ""}
    if independent:
        causes = "; ".join(c["cause"] for c in independent)
        return {"status": "disputed", "by": None, "checks": checks,
                "finding": f"{label}: no independent measurement agrees with its band ({causes})"}
    alone = next((c for c in checks if c["kind"] == "sustained"), None)
    tail = (f"; its sustained window ({alone['value']:,.4g}) {'agrees' if alone['agrees'] else 'falls outside it'}"
            if alone else "")
    return {"status": "unconfirmed", "by": None, "checks": checks,
            "finding": f"{label}: rests on one kernel and impl alone ({roof.op}, {roof.impl}){tail}"}


def with_intervals(roofs, rows: pd.DataFrame, points, device: dict,
                   counters: pd.DataFrame | None = None) -> list[Roof]:
    """Return roofs with every measured roof's interval and basis, and each memory level's,
    cache's and precision's confirmation (module docstring; rule 17). points: the run's raw
    records in row order (bench.results.Run.points), read by point_id; counters: counters.csv."""
    samples = {str(p.get("point_id")): p.get("samples_s") or [] for p in (points or [])}
    ok = rows[rows["status"] == "ok"] if not rows.empty else rows
    by_id = ok.drop_duplicates("point_id", keep="last").set_index("point_id", drop=False) if not ok.empty else None
    sweep = ok[ok["mode"] != SUSTAINED_MODE] if not ok.empty else ok
    caches, memory = device_levels(device)
    levels = {memory} | {n for n, _ in caches}
    # a direction roof set by its level's own row is that row's ceiling again: it carries the
    # level's sustained window (rule 14 runs windows for the levels only), so its band is as wide
    level_of = {r.name: r for r in roofs if r.source == "measured" and r.kind == "bandwidth" and r.name in levels}
    out = []
    for roof in roofs:
        if roof.source != "measured" or by_id is None or roof.point_id not in by_id.index:
            out.append(roof)
            continue
        level = level_of.get(roof.name.partition(".")[0]) if roof.kind == "bandwidth" and "." in roof.name else None
        if level is not None and level.point_id == roof.point_id and not (roof.extra or {}).get("sustained"):
            sus = (level.extra or {}).get("sustained")
            if sus:
                roof = dataclasses.replace(roof, extra={**roof.extra, "sustained": sus})
        own = by_id.loc[roof.point_id]
        judged = roof.kind == "compute" or (roof.kind == "bandwidth" and roof.name.split(".")[0] in levels)
        cands = _candidates(roof, sweep, device, own) if judged else sweep.iloc[0:0]
        again = _passes(ok, own, roof.kind)
        interval, basis = _interval(roof, own, cands, samples, again)
        if interval is None:
            out.append(roof)
            continue
        span = None if "passes" in (roof.extra or {}) else pass_span(roof, own, again)  # off-chip: per-pass bests
        roof = dataclasses.replace(roof, interval=(float(interval[0]), float(interval[1])),
                                   extra={**roof.extra, "interval_basis": basis, **({"passes": span} if span else {})})
        if judged:
            pool = _candidates(roof, sweep, device, own, window=True)
            roof = dataclasses.replace(roof, confirmation=_confirmation(roof, own, pool, samples, counters, memory))
        out.append(roof)
    return out
