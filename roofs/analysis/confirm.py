"""A roof's second measurement and its sustained figure (ARCHITECTURE.md, "How a roof is made").

    confirm(roofs, rows, rates, device, counters, policy) -> (roofs, notes)

Each level roof, direction roof and precision roof is checked against the other measurements
of the same ceiling, each the best of its kind among the roof's candidates (candidate_rows):

    impl       another backend (torch, Triton, numpy): independent
    kernel     another op of the same backend (copy and triad; read and reread; another GEMM
               sweep): it runs in the same library, maybe at the same limit, so it is not
               independent, and the confirmation says so
    counters   the counters' DRAM bytes for the roof's own point, else for the point the counters
               phase replayed for the roof (its best candidate, counters.csv's chosen_as; NVIDIA)

A check agrees when its rate, widened by Policy.agree_tol, meets the roof's interval. Status:
confirmed (a check agrees; `independent` false when only a same-library kernel does),
disputed (a check reads above the interval, or the counters count other bytes than the
formula: the roof may read low or high), unconfirmed (no other
measurement, or only slower ones: noise only slows, so a slower kernel is a floor of the
ceiling too, and says nothing against it). The sustained
phase's best window among the candidates is the roof's extra "sustained" (rule 14), its burst
figure extra "burst"; a window is named, never a confirmation (the same kernel run longer).
A window faster than the roof's interval raises its top to it: the same ceiling measured at
another minute, and noise never speeds a call. The same candidates serve the sustained phase
(targets, candidate_rows, pick).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from bench.hw.counters import FLAG_FRACTION
from bench.policy import DEFAULT, Policy
from bench.results import usable
from bench.util import Reason, fmt_num, number
from roofs.analysis.model import COMPUTE_FAMILIES, SUSTAINED_MODE, device_levels, directions, estimate
from roofs.analysis.roofline import DIRECTIONS, Roof

PER_ROOF, QUICK_PER_ROOF = 3, 2   # the best candidates of each roof that run a sustained window


def per_roof(quick: bool) -> int:
    """Return how many candidates of each roof run a sustained window."""
    return QUICK_PER_ROOF if quick else PER_ROOF


def _judged(roof: Roof, levels: set) -> bool:
    if roof.source != "measured" or (roof.extra or {}).get("line_of") or (roof.extra or {}).get("via"):
        return False
    return roof.kind == "compute" or (roof.kind == "bandwidth" and roof.name.split(".")[0] in levels)


def targets(roofs, sweep_rows: pd.DataFrame, device: dict) -> list[tuple[str, str, Roof]]:
    """Return (kind, name, roof) of every level and precision roof the sustained phase re-runs."""
    caches, memory = device_levels(device)
    levels = {memory, "l1"} | {n for n, _ in caches}
    return [(r.kind, r.name, r) for r in roofs if _judged(r, levels) and "." not in r.name]


def candidate_rows(rows: pd.DataFrame, kind: str, name: str, device: dict, roof: Roof | None = None,
                   **_) -> pd.DataFrame:
    """Return the ok rows that measure the same ceiling as roof: a precision's rows of the
    family and dtype that set it; a level's stream rows (probe.l1 for a probe roof) on its
    plateau's sizes, in the roof's direction for a direction roof."""
    ok = (rows["status"] == "ok").to_numpy() if not rows.empty else np.zeros(0, bool)
    if roof is None or not ok.any():
        return rows.iloc[0:0]
    ops, family = rows["op"].to_numpy(), rows["family"].to_numpy()
    if kind == "compute":
        mine = family[ok & (ops == roof.op)]
        return rows[ok & (family == (mine[0] if len(mine) else "gemm")) & (rows["dtype"] == roof.dtype).to_numpy()]
    if (roof.extra or {}).get("probe"):
        return rows[ok & (ops == "probe.l1")]
    lo = (roof.extra or {}).get("from_bytes") or (roof.plateau_bytes or (0, 0))[0]
    hi = (roof.plateau_bytes or (0, float("inf")))[1]
    _, memory = device_levels(device)
    if name.split(".")[0] == memory:
        hi = float("inf")
    ws = rows["working_set_bytes"].to_numpy(float)
    half_bin = 2 ** (0.5 / DEFAULT.bins_per_octave)  # a size within half a size bin is that size
    sel = rows[ok & (family == "stream") & (ws >= lo / half_bin) & (ws <= hi * half_bin)]
    _, _, d = name.partition(".")
    return sel[directions(sel) == d] if d in DIRECTIONS and not sel.empty else sel


def pick(rows: pd.DataFrame, kind: str, per_roof: int = PER_ROOF) -> pd.DataFrame:
    """Return a roof's best per_roof candidates: distinct points, for a level distinct sizes."""
    if rows.empty:
        return rows
    rate = "gflops" if kind == "compute" else "gbps"
    best = rows.assign(_key=rows["point_id"].str.rsplit("@", n=1).str[0]).sort_values(rate, ascending=False)
    best = best.drop_duplicates("_key" if kind == "compute" else "working_set_bytes")
    return best.head(per_roof).drop(columns="_key")


def _agrees(rate: float, interval, tol: float) -> bool:
    return rate * (1 + tol) >= interval[0] and rate <= interval[1] * (1 + tol)


def _level_bounds(roof: Roof, roofs: list) -> Roof:
    """Return the roof whose sizes a direction roof shares: its level's roof (itself for a level)."""
    level = roof.name.split(".")[0]
    return next((r for r in roofs if r.kind == "bandwidth" and r.name == level), roof)


def _checks(roof: Roof, cands: pd.DataFrame, counters, memory: str, policy: Policy) -> list[dict]:
    backends = (cands["backend"] if "backend" in cands else cands["impl"].astype(str).str.split("/").str[-1]).to_numpy()
    own = cands["point_id"].to_numpy() == roof.point_id
    backend = backends[own][0] if own.any() else ""
    rates, ops = cands["rate"].to_numpy(float), cands["op"].to_numpy()
    out = []
    others = ~own & ~np.isnan(rates)
    for kind, sel in (("impl", others & (backends != backend)),
                      ("kernel", others & (backends == backend) & (ops != roof.op))):
        if not sel.any():
            continue
        at = np.flatnonzero(sel)[np.argmax(rates[sel])]   # the fastest, the first of a tie
        best = cands.iloc[at]
        rate = float(rates[at])
        agrees = _agrees(rate, roof.interval, policy.agree_tol)
        check = {"kind": kind, "independent": kind == "impl", "point_id": str(best["point_id"]), "op": str(best["op"]),
                 "impl": str(best["impl"]), "dtype": str(best["dtype"]), "value": rate, "interval": [rate, rate],
                 "agrees": agrees}
        if not agrees:
            pct = 100 * rate / roof.value
            check["cause"] = (f"{best['impl']} reads {pct:.0f}% of the roof: "
                              + ("faster than its band, so the roof may read low" if rate > roof.value else
                                 "that kernel's own limit" if kind == "kernel" else "that impl's own limit"))
        out.append(check)
    if counters is not None and not counters.empty and roof.kind == "bandwidth" and roof.name.split(".")[0] == memory:
        counted = counters[counters["status"] == "ok"]
        mine = counted[counted["point_id"] == roof.point_id]
        if mine.empty and "chosen_as" in counted:  # the point the counters phase replayed for this roof
            mine = counted[counted["chosen_as"].map(lambda why: roof.name in counted_for(why))]
        ratio = number(mine["dram_ratio"].iloc[0]) if not mine.empty else None
        if ratio is not None:
            ok = abs(ratio - 1) <= FLAG_FRACTION + 1e-12
            at = mine.iloc[0]
            out.append({"kind": "counters", "independent": True, "point_id": str(at["point_id"]), "op": str(at["op"]),
                        "impl": str(at["impl"]), "dtype": roof.dtype, "value": roof.value * ratio, "ratio": ratio,
                        "interval": [roof.value * ratio] * 2, "agrees": ok,
                        **({} if ok else {"cause": f"the counters read {ratio:.2f}x the formula's DRAM bytes"})})
    return out


def counted_for(chosen_as) -> set:
    """Return the roofs a counters.csv row was replayed for, from its chosen_as ("l2+hbm roof,
    stream's fastest point": {"l2", "hbm"}; bench/run/counters_phase.py's labels)."""
    parts = str(chosen_as or "").split(", ")
    return {name for p in parts if p.endswith(" roof") for name in p[:-len(" roof")].split("+")}


def _status(roof: Roof, checks: list) -> dict:
    label = f"{roof.name} ({roof.impl})"
    agree = [c for c in checks if c["agrees"]]
    if agree:
        by = next((c for c in agree if c["independent"]), agree[0])
        finding = "" if by["independent"] else (f"{label}: confirmed only by {by['op']} of the same library, which "
                                                "may run at the same limit: not independent")
        return {"status": "confirmed", "by": by, "independent": by["independent"], "checks": checks, "finding": finding}
    # a faster measurement of the same ceiling says the roof may read low; counters that count
    # other bytes than the formula say its rate is off either way
    above = [c for c in checks if not c["agrees"] and (c["kind"] == "counters" or c["value"] > roof.interval[1])]
    if above:
        return {"status": "disputed", "by": None, "independent": False, "checks": checks,
                "finding": f"{label}: another measurement reads above its band "
                           f"({'; '.join(c['cause'] for c in above)})"}
    if checks:  # slower ones are floors of the ceiling too: they do not contradict it, nor confirm it
        return {"status": "unconfirmed", "by": None, "independent": False, "checks": checks,
                "finding": f"{label}: every other measurement reads below its band "
                           f"({'; '.join(c['cause'] for c in checks)})"}
    return {"status": "unconfirmed", "by": None, "independent": False, "checks": [],
            "finding": f"{label}: rests on one kernel and impl alone ({roof.op})"}


def _sustained(roof: Roof, sus: pd.DataFrame, device: dict, policy: Policy) -> dict:
    """Return the extra keys "burst", "sustained" (or "sustained_why" and its "sustained_code":
    no_phase, no_window) of one roof (rule 14)."""
    if sus.empty:
        return {"burst": roof.value, "sustained": None, "sustained_code": "no_phase",
                "sustained_why": "no sustained phase in this run (--sustain 0, or a run before it)"}
    rows = candidate_rows(sus, roof.kind, roof.name, device, roof)
    rows = rows[usable(rows, policy)] if not rows.empty else rows  # a busy window is no sustained figure
    if rows.empty:
        return {"burst": roof.value, "sustained": None, "sustained_code": "no_window",
                "sustained_why": "none of its candidates ran a sustained window (failed or skipped)"}
    rate = "gflops" if roof.kind == "compute" else "gbps"
    best = rows.loc[rows[rate].astype(float).idxmax()]
    med = number(best.get("median_ms"))
    spread = ((number(best.get("p80_ms")) or med) - (number(best.get("p20_ms")) or med)) / med if med else None
    get = lambda k: number(best.get(k))  # noqa: E731
    return {"burst": roof.value, "sustained": {
        "value": float(best[rate]), "point_id": str(best["point_id"]), "clock_mhz": get("clock_mhz"),
        "power_w": get("power_w"), "joules": get("joules"), "samples": int(get("samples") or 0), "spread": spread,
        "steady": spread is not None and spread < policy.steady_spread, "stop": str(best.get("stop", ""))}}


def confirm(roofs: list, rows: pd.DataFrame, rates: pd.DataFrame, device: dict, counters=None,
            policy: Policy = DEFAULT) -> tuple[list[Roof], list[str]]:
    """Return (roofs with each judged roof's confirmation and sustained figure, notes)."""
    caches, memory = device_levels(device)
    levels = {memory, "l1"} | {n for n, _ in caches}
    sus = rows[rows["mode"] == SUSTAINED_MODE] if "mode" in rows else rows.iloc[0:0]
    warm = rates[(rates["mode"] == "warm") | rates["family"].isin(COMPUTE_FAMILIES)] if not rates.empty else rates
    out, notes = [], []
    for roof in roofs:
        if not _judged(roof, levels) or roof.interval is None:
            out.append(roof)
            continue
        base = _level_bounds(roof, roofs)
        cands = candidate_rows(warm, roof.kind, roof.name, device, replace(base, name=roof.name))
        if roof.kind == "bandwidth" and roof.name.split(".")[0] == memory and not cands.empty:
            # off chip a smaller set than the roof's may still hit in the last cache (rule 17)
            cands = cands[cands["working_set_bytes"] * 2 ** (0.5 / policy.bins_per_octave) >= base.working_set_bytes]
        conf = _status(roof, _checks(roof, cands, counters, memory, policy))
        extra = {**roof.extra, **_sustained(replace(base, name=roof.name, value=roof.value, op=roof.op,
                                                    dtype=roof.dtype), sus, device, policy)}
        sus_value = (extra.get("sustained") or {}).get("value")
        interval = roof.interval
        if sus_value is not None and sus_value > interval[1]:  # the same ceiling at another minute: noise never
            interval = (interval[0], float(sus_value))          # speeds a call, so the top reaches it
            notes.append(Reason(f"{roof.name}: its sustained window read {fmt_num(sus_value)}, above the sweep's "
                                "interval: the top reaches it (the host was slower while the sweep ran)",
                                "sustained_above"))
        out.append(replace(roof, confirmation=conf, extra=extra, interval=interval))
    return out, notes


def derive_roofs(rows: pd.DataFrame, device: dict, samples: dict | None = None, counters=None,
                 policy: Policy = DEFAULT) -> tuple[list[Roof], list[str]]:
    """Return every roof of a run and its notes: the estimator's roofs and intervals
    (roofs.analysis.model.estimate), each level and precision roof with its confirmation and
    sustained figure (confirm). samples: {point_id: seconds per call}; counters: counters.csv."""
    roofs, notes, rates = estimate(rows, device, samples, policy)
    roofs, more = confirm(roofs, rows, rates, device, counters, policy)
    return roofs, notes + more


NO_KERNEL_FAMILIES = ("transfer",)   # families whose points launch no kernel (host-device copies)


def phase_candidates(measurements: list, device: dict, per_roof_n: int) -> list[tuple]:
    """Return [(the roofs it stands for, "+"-joined; the measurement)] in run order: each level and
    precision roof's best per_roof_n candidates among measurements (objects with row(),
    point_id, samples_s: bench.results.Measurement), each point once. The sustained phase runs
    these (bench/run/sustain_phase.py), and the simulator's extras as it does."""
    if not measurements:
        return []
    rows = pd.DataFrame([m.row() for m in measurements])
    roofs, _ = derive_roofs(rows, device, {m.point_id: list(m.samples_s) for m in measurements})
    chosen: dict[int, str] = {}
    for kind, name, roof in targets(roofs, rows, device):
        for i in pick(candidate_rows(rows, kind, name, device, roof), kind, per_roof_n).index:
            chosen[int(i)] = chosen.get(int(i), "") + ("+" if i in chosen else "") + name
    return [(label, measurements[i]) for i, label in sorted(chosen.items())]


def counted_choice(measurements: list, device: dict, most: int) -> list[tuple]:
    """Return [(why it was chosen, the measurement)] the counters phase replays
    (bench/run/counters_phase.py): each roof's best candidate, then each family's fastest point
    (GFLOP/s, GB/s without FLOPs), each point once, at most `most`; sustained windows and
    families that launch no kernel are never counted."""
    sweep = [m for m in measurements if m.status == "ok" and m.mode != SUSTAINED_MODE
             and m.family not in NO_KERNEL_FAMILIES]
    try:
        roofs = phase_candidates(sweep, device, 1)
    except Exception:  # noqa: BLE001 -- rows no roof can be derived from: each family's fastest still stands
        roofs = []
    out = {}
    for label, m in roofs:
        out.setdefault(m.point_id, (f"{label} roof", m))
    best = {}
    rate = lambda m: m.gflops if m.flops else m.gbps  # noqa: E731
    for m in sweep:
        if m.family not in best or rate(m) > rate(best[m.family]):
            best[m.family] = m
    for fam, m in best.items():
        label = f"{fam}'s fastest point"
        out[m.point_id] = (out[m.point_id][0] + ", " + label, m) if m.point_id in out else (label, m)
    return list(out.values())[:most]
