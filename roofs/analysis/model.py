"""One model of a ceiling: rows -> roofs (ARCHITECTURE.md, "How a roof is made").

Noise only ever slows a call. So a row's rate is its work over a low quantile of its sample
times (Policy.rate_quantile), and a measured rate is a floor of the ceiling it measures. Rows
the runner flagged (a busy machine, a time jump) and rows with too few samples set nothing.

    measurements   per working-set size (or GEMM/FMA shape) and pass, the best usable row
    levels         the sweep's sizes, each at its best row over kernels, impls, dtypes and
                   passes, split into plateaus of log rate against log size by least squares
                   (segment()), at most one more than the caches the device reports; sizes read
                   slower than a larger size (past Policy.level_step) are their kernels' own
                   limit and take no part; adjacent plateaus differ by level_step or merge.
                   The last plateau is off chip; the others take the caches' names in order,
                   matched to the reported sizes nearest their measured edges
    a roof         the roof_rank-th highest measurement of its plateau (a level: the outer half
                   of its sizes, from clear_factor x the inner level's edge, offchip_factor x
                   off chip, where no inner level serves part of the set; a direction: its rows
                   on those sizes; a precision: its own-unit shapes within shape_tol of its
                   best): no single lucky size, shape or pass sets it
    its interval   [roof, best x exp(R)]: the ceiling is at least the roof (every measurement
                   is a floor of it) and below the top unless every measurement was slowed more
                   than the roof's own spread shows (R: the larger of interval_reach x the log
                   of best/roof or of the best row's median/low, and the median over sizes of
                   Policy.pass_reach(n) x their n passes' log max/min)

Confirmation and the sustained figures are roofs/analysis/confirm.py's; this module builds
the roofs and their intervals only.
"""
from __future__ import annotations

import math
from dataclasses import replace
from itertools import combinations

import numpy as np
import pandas as pd

from bench import precisions
from bench.policy import DEFAULT, Policy
from bench.results import first_pass_id, is_runner_flag, text_column, usable
from bench.util import Reason, fmt_bytes, fmt_halfwidth, fmt_num, low_time, number, offchip_level
from roofs.analysis.launch_floor import launch_floor_roofs
from roofs.analysis.links import link_roofs
from roofs.analysis.roofline import (
    DIRECTIONS,
    INTEGER_PRECISIONS,
    OLD_RUN_STREAM_ARRAYS,
    Roof,
    direction_of,
    write_share,
)
from roofs.analysis.specs import cpu_missing_units
from roofs.analysis.statistic import ceiling, measurements, run_reach, with_memory_reach, with_run_reach

NOT_IT = 1e6     # the naming's cost of a cache whose reported size a plateau starts past
SUSTAINED_MODE = "sustained"   # rows of the sustained phase (bench/run/sustain_phase.py)
KERNEL_LIMIT = "kernel_limit"  # a note's code: sizes or a level read slower than an outer one (a finding)
COMPUTE_FAMILIES = ("gemm", "fma")
# why a precision's own rows run below its roof (extra.own_reason): no unit of its own, so every
# call converts its inputs to the wider precision whose path is its roof (rule 10)
CONVERTS_EACH_CALL = "converts_each_call"
# precisions whose inputs convert exactly to wider ones: the wider GEMM does the same math (rule 10)
EXACT_IN = {p.name: p.exact_in for p in precisions.ROWS if p.exact_in}   # bench/precisions.py's rows


def device_levels(device: dict) -> tuple[list[tuple[str, int]], str]:
    """Return ([(cache name, reported total bytes)] innermost first, the off-chip level's name)."""
    caches = [(c["name"], int(c["total_bytes"])) for c in (device or {}).get("caches", [])]
    return caches, offchip_level((device or {}).get("kind", ""))


def unit_of(row) -> str:
    """Return what a compute row measures: "gemm"; "vector" for a Triton FMA chain (registers);
    "elementwise" for torch's FMA chains, each step a pass through the caches (no unit's roof)."""
    if row.get("family") != "fma":
        return "gemm"
    return "vector" if str(row.get("impl", "")).endswith("/triton") else "elementwise"


def untrusted_text(rows: pd.DataFrame, policy: Policy = DEFAULT) -> str:
    """Return how many ok rows could not count, by cause, each with its remedy."""
    ok = rows[rows["status"] == "ok"]
    flagged = text_column(ok, "flag").map(is_runner_flag)
    few = ~usable(ok.assign(flag=""), policy) if not ok.empty else flagged
    parts = []
    if (few & ~flagged).any():
        parts.append(f"{int((few & ~flagged).sum())} had under {policy.min_samples} samples (a larger --budget helps)")
    if flagged.any():
        parts.append(f"{int(flagged.sum())} ran while the machine was busy or their time jumped (a quiet machine)")
    return "; ".join(parts) or "none could count"


def rated(rows: pd.DataFrame, samples: dict | None, policy: Policy = DEFAULT) -> pd.DataFrame:
    """Return the usable rows with "rate" (GB/s for stream and probe.l1, GFLOP/s for GEMMs and
    FMA chains: its figure at the low quantile of its samples, else at its p20), "jitter" (ln of
    median over that time) and "key" (its point across passes)."""
    if rows.empty:
        return rows.assign(rate=[], jitter=[], key=[])
    ok = rows[usable(rows, policy)]
    samples = samples or {}
    rate, jitter = [], []
    for pid, fam, gbps, gflops, med, p20 in zip(ok["point_id"], ok["family"], ok["gbps"], ok["gflops"],
                                                ok["median_ms"], ok.get("p20_ms", ok["median_ms"])):
        fig = number(gflops) if fam in COMPUTE_FAMILIES else number(gbps)
        med = number(med)
        t = low_time(samples.get(str(pid)), policy.rate_quantile)
        t_ms = t * 1e3 if t else number(p20) or med
        if not fig or not med or not t_ms:
            rate.append(np.nan)
            jitter.append(np.nan)
            continue
        t_ms = min(t_ms, med)
        rate.append(fig * med / t_ms)
        jitter.append(math.log(med / t_ms))
    out = ok.assign(rate=rate, jitter=jitter, key=ok["point_id"].map(first_pass_id))
    return out[out["rate"].notna() & (out["rate"] > 0)]


def directions(rows: pd.DataFrame) -> pd.Series:
    """Return each stream row's direction class (read, write, copy) from its bytes, or by op name."""
    if "read_bytes" in rows and rows["read_bytes"].notna().any():
        return pd.Series([direction_of(r, w) for r, w in zip(rows["read_bytes"], rows["write_bytes"])],
                         index=rows.index, dtype=object)
    named = {op: ("read" if w == 0 else "write" if r == 0 else "copy") for op, (r, w) in OLD_RUN_STREAM_ARRAYS.items()}
    return rows["op"].map(named).fillna("")


def write_shares(rows: pd.DataFrame) -> pd.Series:
    """Return the share of each stream row's bytes it writes, from its read and write bytes (by
    op name in runs without them: OLD_RUN_STREAM_ARRAYS); NaN where unknown."""
    if "read_bytes" in rows and rows["read_bytes"].notna().any():
        shares = [write_share(r, w) for r, w in zip(rows["read_bytes"], rows["write_bytes"])]
    else:
        shares = [write_share(*OLD_RUN_STREAM_ARRAYS[op]) if op in OLD_RUN_STREAM_ARRAYS else None for op in rows["op"]]
    return pd.Series([math.nan if s is None else s for s in shares], index=rows.index, dtype=float)


def size_bin(nbytes, policy: Policy = DEFAULT):
    """Return each working set's size (nearest 1 / Policy.bins_per_octave octave)."""
    return np.round(np.log2(np.asarray(nbytes, dtype=float)) * policy.bins_per_octave).astype(int)


def _roof(kind: str, name: str, meas: pd.DataFrame, policy: Policy, note: str, extra: dict, offchip: bool = False,
          **kw) -> Roof:
    value, interval, basis, row = ceiling(meas, policy, offchip)
    unit = "GB/s" if kind == "bandwidth" else ("GOP/s" if name.split(".")[0].split(" ")[0] in INTEGER_PRECISIONS
                                             else "GFLOP/s")
    per_pass = meas.groupby("_pass")["rate"].max()
    passes = [float(per_pass.min()), float(per_pass.max())] if len(per_pass) >= 2 else None
    med = number(row.get("median_ms"))
    spread = ((number(row.get("p80_ms")) or med) - (number(row.get("p20_ms")) or med)) / med if med else None
    return Roof(kind=kind, name=name, value=value, unit=unit, source="measured", op=str(row["op"]),
                impl=str(row["impl"]), dtype=str(row["dtype"]), point_id=str(row["point_id"]),
                shape=str(row.get("shape", "")), working_set_bytes=int(row["working_set_bytes"]),
                spread=number(spread), note=note, interval=interval,
                extra={**extra, "interval_basis": basis, "pass_count": basis["passes"],
                       **({"passes": passes} if passes else {})}, **kw)


# --- levels: one segmentation of the sweep ------------------------------------------------------

def segment(x, kmax: int, min_len: int) -> list[list[tuple[int, int]]]:
    """Return, for k = 1..kmax, the least-squares split of x into k contiguous segments
    [(start, end)] (a textbook dynamic program, O(k n^2)); every segment holds min_len values
    or more except the last, which may hold one. [] where no split of k exists."""
    x = np.asarray(x, float)
    n = len(x)
    s1, s2 = np.concatenate([[0], np.cumsum(x)]), np.concatenate([[0], np.cumsum(x * x)])

    def cost(i, j):
        return s2[j] - s2[i] - (s1[j] - s1[i]) ** 2 / (j - i)

    best = {(0, 0): (0.0, None)}
    out = []
    for k in range(1, kmax + 1):
        for j in range(1, n + 1):
            need = 1 if j == n else min_len
            cands = [(best[(k - 1, i)][0] + cost(i, j), i) for i in range(0, j - need + 1) if (k - 1, i) in best
                     and (i > 0 or k == 1) and (k > 1 or i == 0)]
            if cands:
                best[(k, j)] = min(cands)
        if (k, n) not in best:
            out.append([])
            continue
        cuts, j, kk = [], n, k
        while kk > 0:
            i = best[(kk, j)][1]
            cuts.append((i, j))
            j, kk = i, kk - 1
        out.append(cuts[::-1])
    return out


def _order_limited(logs: np.ndarray, step: float) -> np.ndarray:
    """Return, per size, whether a larger size read faster by more than step: a smaller working
    set is never served slower than a larger one, so such a size shows its kernels' own limit."""
    later = np.maximum.accumulate(logs[::-1])[::-1]
    later = np.concatenate([later[1:], [-np.inf]])
    return logs < later - math.log(1 + step)


def plateaus(env: pd.DataFrame, n_levels: int, policy: Policy, caches=()) -> list[pd.DataFrame]:
    """Return the sweep's plateaus (env: one best row per size, sorted by size), inner first:
    the most segments (at most n_levels plus one transition per boundary between them) whose neighbours differ by
    Policy.level_step, less the transitions, with those off chip one (_offchip_merged); past
    n_levels, the two neighbours nearest in level merge until n_levels remain (a slow fade split
    in two is one level)."""
    logs = np.log(env["rate"].to_numpy(float))
    if len(logs) == 0:
        return []
    step = math.log(1 + policy.level_step)
    for cuts in reversed(segment(logs, min(2 * n_levels - 1, len(logs)), policy.min_sizes)):
        if not cuts:
            continue
        tops = [np.sort(logs[i:j])[::-1][min(policy.roof_rank, j - i) - 1] for i, j in cuts]
        if all(abs(a - b) >= step for a, b in zip(tops, tops[1:])):
            plats = _offchip_merged(_without_transitions([env.iloc[i:j] for i, j in cuts], policy), caches)
            while len(plats) > n_levels:
                level = [math.log(_top(p, policy)) for p in plats]
                i = min(range(len(plats) - 1), key=lambda k: abs(level[k] - level[k + 1]))
                plats[i:i + 2] = [pd.concat(plats[i:i + 2])]
            return plats
    return [env]


def _top(plat: pd.DataFrame, policy: Policy) -> float:
    """Return a plateau's roof_rank-th best size's rate."""
    rates = np.sort(plat["rate"].to_numpy(float))[::-1]
    return float(rates[min(policy.roof_rank, len(rates)) - 1])


def _without_transitions(plats: list, policy: Policy) -> list:
    """Return plats less the transitions between levels: a segment neither first nor last that
    spans under Policy.level_min_octaves of working sets, or whose rates fall with every size by
    more than a level step in all (a working set partly in two levels reads between them, the
    more of it outside the larger it is; a real level is flat over octaves of the sweep)."""
    def transition(p):
        r, ws = p["rate"].to_numpy(float), p["working_set_bytes"].to_numpy(float)
        return bool(math.log2(ws.max() / ws.min()) < policy.level_min_octaves
                    or (np.all(np.diff(r) <= 0) and r[0] > (1 + policy.level_step) * r[-1]))
    return [p for i, p in enumerate(plats) if i in (0, len(plats) - 1) or not transition(p)]


def _offchip_merged(plats: list, caches) -> list:
    """Return plats with every plateau that starts at or past the largest reported cache's size
    merged into one, the last: no cache holds such a set (streamed whole, a set the cache's size
    evicts itself before its reuse), so they are one level, off chip (a VM's memory read at two
    speeds in two minutes splits its sizes in two; merged as two of the caches' levels instead,
    they would shift every name inward)."""
    if not caches or len(plats) < 2:
        return plats
    largest = max(size for _, size in caches)
    past = [i for i, p in enumerate(plats) if float(p["working_set_bytes"].min()) >= largest]
    if len(past) < 2 or past != list(range(past[0], len(plats))):
        return plats
    return plats[:past[0]] + [pd.concat(plats[past[0]:])]


def _passed(plats: list, caches, policy: Policy) -> list:
    """Return the inner caches the first of several plateaus runs past: its largest size more than
    Policy.band_factor x their reported size (no cache serves a set that many times itself, so
    the plateau is an outer level's and these caches have none of their own)."""
    if len(plats) < 2:
        return []
    end = float(plats[0]["working_set_bytes"].max())
    out = []
    for name, size in caches[:-1]:
        if end <= policy.band_factor * size:
            break
        out.append((name, size))
    return out


def _names(plats: list, caches, memory: str) -> list[str]:
    """Return each plateau's level. The last is off chip where the sweep reached past every
    reported cache (a level ends where its plateau does, but no sweep that stops inside the
    reported caches has left them all); the others take the caches' names in order, each matched
    to the reported size nearest its edge (log scale) where fewer plateaus than caches remain,
    never to a cache whose reported size it starts past; an inner plateau beyond the caches'
    count gets none."""
    names = [n for n, _ in caches]
    offchip = not caches or float(plats[-1]["working_set_bytes"].max()) > caches[-1][1]
    inner = plats[:-1] if offchip else list(plats)
    inner = inner[len(inner) - len(names):] if len(inner) > len(names) else inner
    best, choice = math.inf, ()
    for pick in combinations(range(len(names)), len(inner)):  # a plateau that starts past a cache's size is not it
        cost = sum(abs(math.log2(max(p["working_set_bytes"].max(), 1) / caches[i][1]))
                   + (NOT_IT if float(p["working_set_bytes"].min()) > caches[i][1] else 0.0)
                   for p, i in zip(inner, pick))
        if cost < best:
            best, choice = cost, pick
    named = [names[i] for i in choice] + ([memory] if offchip else [])
    return [""] * (len(plats) - len(named)) + named


def level_roofs(rows: pd.DataFrame, caches, memory: str, policy: Policy = DEFAULT) -> tuple[list[Roof], list[str]]:
    """Return (every level's roof and its direction roofs, notes) from the rated warm stream rows."""
    if rows.empty:
        return [], ["no usable stream rows: no bandwidth roof"]
    bins = pd.Series(size_bin(rows["working_set_bytes"], policy), index=rows.index)
    env = rows.loc[rows.groupby(bins)["rate"].idxmax()].sort_values("working_set_bytes")
    limited = _order_limited(np.log(env["rate"].to_numpy(float)), policy.level_step)
    notes = []
    if limited.any():
        cut = env[limited]
        notes.append(Reason(f"{len(cut)} size(s) from {fmt_bytes(cut['working_set_bytes'].min())} to "
                            f"{fmt_bytes(cut['working_set_bytes'].max())} read slower than a larger working set: "
                            "their kernels' own limit (or per-call cost), left out of the levels (a finding)",
                            KERNEL_LIMIT))
    plats = plateaus(env[~limited], max(len(caches), 1) + 1, policy, caches)
    passed = _passed(plats, caches, policy)
    shown = caches[len(passed):]   # the levels the sweep can show: one fewer per cache the first plateau ran past
    if passed:
        plats = plateaus(env[~limited], len(shown) + 1, policy, caches)
        top = fmt_bytes(plats[0]["working_set_bytes"].max())
        notes += [Reason(f"{name}: no plateau of its own: the first runs to {top}, past {policy.band_factor}x its "
                         f"reported {fmt_bytes(size)} (its kernels read it no faster than the next level)",
                         "passed_cache") for name, size in passed]
    names = _names(plats, shown, memory)
    kinds = directions(rows)
    limited_rows = set()   # per direction, the rows at sizes a larger size of that direction outran
    for d in DIRECTIONS:
        own = rows[kinds == d]
        if own.empty:
            continue
        best = own.loc[own.groupby(bins.loc[own.index])["rate"].idxmax()].sort_values("working_set_bytes")
        cut = set(bins.loc[best.index][_order_limited(np.log(best["rate"].to_numpy(float)), policy.level_step)])
        limited_rows |= set(own.index[bins.loc[own.index].isin(cut)])
    roofs, inner = [], None
    half_bin = 2 ** (0.5 / policy.bins_per_octave)
    for i, (name, plat) in enumerate(zip(names, plats)):
        if not name:
            continue
        if inner is not None:  # a working set a few times a cache's edge still hits in it
            factor = policy.offchip_factor if name == memory else policy.clear_factor
            clear = plat[plat["working_set_bytes"] >= factor * inner[1] / half_bin]
            if len(clear) < policy.min_sizes:
                notes.append(f"{name}: under {policy.min_sizes} sizes from {factor}x {inner[0]}'s measured edge "
                             f"({fmt_bytes(factor * inner[1])}), where {inner[0]} no longer serves part of the set")
                continue
            plat = clear
        lo, hi = float(plat["working_set_bytes"].min()), float(plat["working_set_bytes"].max())
        edge_hi = math.inf if name == memory else hi * half_bin
        # its outer half: a set near the inner level's edge may still hit in it, reading above its own level
        outer = plat.iloc[-max(policy.min_sizes, math.ceil(len(plat) / 2)):] if inner is not None else plat
        mine = rows[(rows["working_set_bytes"] >= outer["working_set_bytes"].min() / half_bin)
                    & (rows["working_set_bytes"] <= edge_hi)]
        if len(plat) < policy.min_sizes:
            notes.append(f"{name}: only {fmt_bytes(lo)} measured on its plateau: {policy.min_sizes} sizes needed")
            continue
        meas = measurements(mine, bins.loc[mine.index])
        # the sizes the statistic is over (the charts shade them): the outer half, not the whole plateau
        window = [int(mine["working_set_bytes"].min()), int(mine["working_set_bytes"].max())]
        roof = _roof("bandwidth", name, meas, policy, f"plateau of {len(plat)} sizes, {fmt_bytes(lo)}-{fmt_bytes(hi)}",
                     {"window_bytes": window}, name == memory, plateau_bytes=(int(lo), int(hi)),
                     plateau_points=len(plat), plateau_values=(float(plat["rate"].min()), float(plat["rate"].max())))
        on = plat[plat["rate"] >= (1 - policy.edge_tol) * roof.value]
        edge = int(on["working_set_bytes"].max())
        nxt = plats[i + 1] if i + 1 < len(plats) else None
        reach = int(nxt["working_set_bytes"].min()) if nxt is not None else None
        size = dict(caches).get(name)
        extra = {"edge_bytes": edge if name != memory else None, "reach_bytes": reach if name != memory else None,
                 "capacity_bytes": size, "from_bytes": int(lo), "plateau_median": float(plat["rate"].median()),
                 "steady": True}
        roofs.append(replace(roof, extra={**roof.extra, **extra}))
        roofs += _direction_roofs(name, mine.drop(index=list(limited_rows & set(mine.index))), bins, policy, notes,
                                  name == memory)
        inner = (name, edge)
    found = {r.name for r in roofs}
    for name in [n for n, _ in caches] + [memory]:
        if name not in found and not any(n.startswith(f"{name}:") for n in notes):
            why = (Reason("its sizes read slower than an outer level's: the kernels' own limit, not the cache "
                          "(a finding)", "kernel_limit")
                   if limited.any() and name == caches[0][0] else
                   Reason("no plateau of its own in the sweep (merged with a neighbour within the level step, or "
                          "not reached)", "no_plateau"))
            notes.append(Reason(f"{name}: no roof: {why}", why.code))
    return roofs, notes


def _direction_roofs(level: str, mine: pd.DataFrame, bins: pd.Series, policy: Policy, notes: list,
                     offchip: bool = False) -> list[Roof]:
    """Return "<level>.read/.write/.copy": the same statistic over one direction's rows on the level's sizes."""
    out = []
    kinds = directions(mine)
    for d in DIRECTIONS:
        rows = mine[kinds == d]
        if rows.empty:
            continue
        if bins.loc[rows.index].nunique() < policy.min_sizes:
            notes.append(f"{level}.{d}: one size of its direction on the level's plateau")
            continue
        extra = {"direction": d}
        if d == "copy" and write_shares(rows).notna().any():
            # the least share of its bytes a row of this mix writes: a point that writes at least as
            # much may take this roof as its bound (rule 12, Roofline.point_bandwidth)
            extra["write_share"] = float(write_shares(rows).min())
        out.append(_roof("bandwidth", f"{level}.{d}", measurements(rows, bins.loc[rows.index]), policy,
                         f"{d} kernels on {level}'s sizes", extra, offchip))
    return out


def probe_l1_roof(rows: pd.DataFrame, policy: Policy) -> Roof | None:
    """Return probe.l1's roof (each program rereads its own span: L1 by construction), or None."""
    probe = rows[(rows["op"] == "probe.l1")]
    if probe.empty:
        return None
    meas = measurements(probe, pd.Series(size_bin(probe["working_set_bytes"], policy), index=probe.index))
    return _roof("bandwidth", "l1", meas, policy, "probe.l1: each program rereads its own span", {"probe": True})


# --- compute: a precision's own unit -------------------------------------------------------------

def compute_roofs(rows: pd.DataFrame, all_rows: pd.DataFrame, no_unit=frozenset(),
                  policy: Policy = DEFAULT) -> tuple[list[Roof], list[str]]:
    """Return (compute roofs, notes) (rule 10): per precision its own unit's plateau (GEMMs and
    Triton FMA chains), an exact wider path that runs faster as the extra line "<p> via <w>",
    the wider path as the roof, labelled via, of a precision with no unit or no usable row of its
    own, "<p>.vector" beside a GEMM roof, and torch's chains as "<p>.elementwise" only."""
    comp = rows[rows["family"].isin(COMPUTE_FAMILIES)] if not rows.empty else rows
    if comp.empty:
        return [], []
    units = [unit_of({"family": f, "impl": i}) for f, i in zip(comp["family"], comp["impl"])]
    comp = comp.assign(_unit=units)
    own, roofs, by_unit = {}, [], {}
    for (p, unit), g in comp.groupby(["dtype", "_unit"], sort=False):
        roof = by_unit[(str(p), unit)] = _precision(str(p), unit, g, policy)
        if unit == "elementwise":
            roofs.append(replace(roof, name=f"{p}.elementwise", extra={**roof.extra, "line_of": str(p)}))
        elif str(p) not in own or roof.value > own[str(p)].value:
            own[str(p)] = roof
    for p, roof in list(own.items()):
        vec = by_unit.get((p, "vector")) if roof.extra["unit"] == "gemm" else None
        roofs += [replace(vec, name=f"{p}.vector", extra={**vec.extra, "line_of": p})] if vec else []
    for p in sorted(set(own) & set(no_unit)):
        mine = own.pop(p)
        wider = _wider(p, own)
        if wider is None:
            own[p] = mine
        else:
            below = {"own_reason": CONVERTS_EACH_CALL} if mine.value < wider.value else {}
            own[p] = replace(wider, name=p, note=f"{p}: the device has no {p} unit (its own best, "
                             f"{fmt_num(mine.value)}, runs through conversion); its inputs convert exactly to "
                             f"{wider.name}",
                             extra={**wider.extra, "via": wider.name, "no_unit": True, "own_gflops": mine.value,
                                    **below})
    for p, roof in list(own.items()):
        wider = _wider(p, own)
        if wider is not None and wider.value > roof.value and not roof.extra.get("via"):
            roofs.append(replace(wider, name=f"{p} via {wider.name}", note=f"{p} inputs convert exactly to "
                                 f"{wider.name}, which runs faster: an extra line, not {p}'s roof",
                                 extra={**wider.extra, "via": wider.name, "line_of": p, "own_gflops": roof.value}))
    carried = set(text_column(all_rows[all_rows["status"] == "ok"], "precision")) - {""} if "precision" in all_rows \
        else set()
    for p in sorted(carried - set(own) - {r.extra.get("line_of") for r in roofs}):
        wider = _wider(p, own)
        if wider is not None:
            roofs.append(replace(wider, name=p, note=f"{p}: no GEMM or FMA chain of its own measured here; its "
                                 f"inputs convert exactly to {wider.name}", extra={**wider.extra, "via": wider.name}))
    notes = [f"{p}: no compute roof: only its elementwise FMA chains ran (torch's passes through the caches, never a "
             "unit's roof): its points have no compute bound" for p in sorted({r.extra["line_of"] for r in roofs
                                                                              if r.name.endswith(".elementwise")}
                                                                             - set(own))]
    return sorted(list(own.values()) + roofs, key=lambda r: -r.value), notes


def _precision(p: str, unit: str, g: pd.DataFrame, policy: Policy) -> Roof:
    """Return the roof of one precision and unit: the statistic over its shapes within shape_tol of its best."""
    best = g.groupby("key")["rate"].max()
    keep = best[best >= (1 - policy.shape_tol) * best.max()].index
    rows = g[g["key"].isin(keep)]
    return _roof("compute", p, measurements(rows, rows["key"]), policy,
                 f"{len(keep)} shape(s) within {policy.shape_tol:.0%} of its best, over {g['impl'].nunique()} impl(s)",
                 {"unit": unit})


def _wider(p: str, own: dict) -> Roof | None:
    """Return the fastest exact wider precision's roof among own, or None."""
    return max((own[w] for w in EXACT_IN.get(p, ()) if w in own and not own[w].extra.get("via")),
               key=lambda r: r.value, default=None)


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


# --- everything -------------------------------------------------------------------------------

def physical_order(roofs: list, caches, memory: str) -> tuple[list, list[str]]:
    """Return (roofs, notes) with every level measured slower than the next outer level that
    has a roof removed with its direction roofs, and every direction roof slower than the same
    direction's outside it: a cache never serves slower than the level outside it, so such a
    figure is its kernel's own limit (a finding, named in the notes)."""
    order = (["l1"] if "l1" not in dict(caches) else []) + [n for n, _ in caches] + [memory]
    notes, gone = [], set()
    for suffix in ("", *(f".{d}" for d in DIRECTIONS)):
        level = {r.name: r for r in roofs if r.kind == "bandwidth" and r.name in {o + suffix for o in order}}
        for i, name in enumerate(order[:-1]):
            mine = level.get(name + suffix)
            outer = next((level[o + suffix] for o in order[i + 1:] if o + suffix in level), None)
            if mine is None or outer is None or mine.value >= outer.value or name in gone:
                continue
            gone |= {name} if not suffix else set()
            gone.add(name + suffix)
            notes.append(Reason(f"{mine.name}: {fmt_num(mine.value)} GB/s ({mine.op}) reads slower than "
                                f"{outer.name}'s {fmt_num(outer.value)}: its kernel's own limit, not the cache "
                                "(a finding)", KERNEL_LIMIT))
    return [r for r in roofs if not (r.kind == "bandwidth" and (r.name in gone or r.name.split(".")[0] in gone))], notes


def _uncounted(sweep: pd.DataFrame, rates: pd.DataFrame, levels: list, policy: Policy) -> list[str]:
    """Return a note for each level whose stream rows ran but none could count, and each
    precision whose GEMM or FMA rows ran but none could count, with how many and why."""
    if sweep.empty or "family" not in sweep:
        return []
    ran = sweep[sweep["status"] == "ok"]
    counted = set(rates["point_id"]) if not rates.empty else set()
    notes = []
    stream = ran[ran["family"] == "stream"]
    if not stream.empty and not (stream["point_id"].isin(counted)).any():
        notes += [f"{name}: no roof: of its sweep's {len(stream)} stream rows, {untrusted_text(stream, policy)}"
                  for name in levels]
    comp = ran[ran["family"].isin(COMPUTE_FAMILIES)]
    for p, g in comp.groupby("dtype", sort=False):
        if not g["point_id"].isin(counted).any():
            notes.append(f"{p}: no compute roof: of its {len(g)} rows, {untrusted_text(g, policy)}")
    return notes


def _measured_again(rows: pd.DataFrame) -> set:
    """Return the points (first-pass ids) that a revisit pass measured again, usable or not."""
    if rows.empty or "pass" not in rows:
        return set()
    return set(rows.loc[rows["pass"].fillna(1).astype(int) > 1, "point_id"].map(first_pass_id))


def estimate(rows: pd.DataFrame, device: dict, samples: dict | None = None,
             policy: Policy = DEFAULT) -> tuple[list[Roof], list[str], pd.DataFrame]:
    """Return (every roof of a run, each measured one with its interval; notes; the rated sweep
    rows): levels and directions, probe.l1, compute roofs and lines, launch floors, links. Their
    confirmations and sustained figures are roofs.analysis.confirm.derive_roofs's."""
    sweep = rows[rows["mode"] != SUSTAINED_MODE] if "mode" in rows else rows
    rates = rated(sweep, samples, policy)
    caches, memory = device_levels(device)
    stream = rates[(rates["family"] == "stream") & (rates["mode"] == "warm")] if not rates.empty else rates
    roofs, notes = level_roofs(stream, caches, memory, policy) if not stream.empty else ([], [])
    notes += _uncounted(sweep, rates, [n for n, _ in caches] + [memory], policy)
    probe = probe_l1_roof(rates[rates["mode"] == "warm"], policy) if not rates.empty else None
    if probe is not None:
        old = next((r for r in roofs if r.name == "l1"), None)
        if old is None or probe.value > old.value:
            keep = {k: old.extra.get(k) for k in ("edge_bytes", "reach_bytes", "capacity_bytes")} if old else {}
            roofs = [r for r in roofs if r is not old] + [replace(probe, extra={**probe.extra, **keep})]
            notes = [n for n in notes if not n.startswith("l1:")]
    roofs, order_notes = physical_order(roofs, caches, memory)
    notes += order_notes
    comp, comp_notes = compute_roofs(rates, sweep, cpu_missing_units(device), policy)
    roofs += comp + launch_floor_roofs(sweep, samples, policy) + link_roofs(rates, policy)
    notes += comp_notes
    # a roof whose point a revisit pass measured again: its best pass was one of the run's
    reach, again = run_reach(rates, policy), _measured_again(sweep)
    roofs = [with_run_reach(r, reach) if first_pass_id(r.point_id) in again else r for r in roofs]
    roofs = with_memory_reach(roofs, stream, memory)
    wide = [r for r in roofs if r.interval and r.kind != "latency" and r.value
            and (r.interval[1] / r.interval[0] - 1) / 2 > policy.target_halfwidth and not r.extra.get("line_of")]
    notes += [f"{r.name}: its interval is {fmt_halfwidth((r.interval[1] / r.interval[0] - 1) / 2)} after "
              f"{r.extra.get('pass_count', 1)} pass(es), wider than the {policy.target_halfwidth:.0%} target: "
              "the host's noise outran the passes the run had time for" for r in wide]
    one = [r.name for r in roofs if (device or {}).get("kind") == "cpu" and r.interval and r.kind != "latency"
           and r.extra.get("pass_count") == 1 and not r.extra.get("line_of")]
    notes += [f"{', '.join(one)}: measured in one pass, so each interval reaches only as far as one pass of the "
              f"run's other points may read low (up to {math.exp(reach) - 1:.0%} past its best)" if reach else
              f"{', '.join(one)}: measured in one pass, so each interval holds one minute's spread; a host that "
              "moves between minutes can put the ceiling past it (revisit passes bound that, rule 17)"] if one else []
    return roofs, notes, rates
