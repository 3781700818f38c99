"""Burst and sustained figures per roof (ARCHITECTURE.md, rule 14).

The sweeps set each roof from their best steady median: the burst figure, a few hundred
milliseconds at most. After the sweeps, bench/run/sustain_phase.py runs each roof's best candidates
(candidate_rows here) again, back to back, for a sustained window each, and records them as
rows of mode SUSTAINED_MODE. merge_sustained() then gives every memory, cache and compute
roof both figures in its `extra`:

    extra["burst"]      the sweep's figure (the roof's value), None for a roof the sustained
                        phase settled
    extra["sustained"]  {value, point_id, clock_mhz, power_w, joules, samples, spread,
                        steady, stop} of the best sustained row among the roof's candidates
                        (its window's median; clock and power sampled through the window)
    extra["sustained_why"]  why a roof has no sustained figure (the phase was off, its
                        candidates failed, or ran while the machine was busy)

A roof's value stays its burst figure (the bound of rule 12). A sustained window whose
spread is 10% or more is still the sustained figure (a clock that steps down halfway is
what a sustained run meets) but is marked steady: false.

On a CPU the phase also settles roofs the sweeps left unset because their rows were not
steady (a busy machine): a precision's compute roof from one steady sustained row, a
level's bandwidth roof from steady sustained rows of at least two working-set sizes within
the plateau tolerance of rule 11 (and, for a cache, 10% above the next outer level).
"""
from __future__ import annotations

import dataclasses

import pandas as pd

from bench.results import text_column
from bench.util import number
from roofs.analysis.derive import (
    CACHE_REL_TOL,
    CLEAR_FACTOR,
    DRAM_FACTOR,
    FIT_FRACTION,
    MIN_SIZES,
    REL_TOL,
    SUSTAINED_MODE,
    TRUST_SPREAD,
    device_levels,
    offchip_window,
    row_spread,
    size_bin,
)
from roofs.analysis.roofline import INTEGER_PRECISIONS, Roof
from roofs.analysis.trust import TRUST_MIN_SAMPLES, is_runner_flag

PER_ROOF = 3   # the best candidates of each roof that run a sustained window
QUICK_PER_ROOF = 2  # ... in a quick run (two, so a memory level can still be settled from two sizes)


def per_roof(quick: bool) -> int:
    """Return how many candidates of each roof run a sustained window."""
    return QUICK_PER_ROOF if quick else PER_ROOF


def split(rows: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Return (the sweeps' rows, the sustained rows)."""
    if "mode" not in rows:
        return rows, rows.iloc[0:0]
    sus = rows["mode"] == SUSTAINED_MODE
    return rows[~sus], rows[sus]


def level_window(name: str, caches, memory_level: str, sweep_rows: pd.DataFrame | None = None) -> tuple[float, float]:
    """Return the working-set window (lo, hi bytes) of a level (rule 11): the off-chip
    level from where derive starts it (offchip_window: DRAM_FACTOR x the last-level cache's
    measured edge in sweep_rows, or past the LLC's reach; DRAM_FACTOR x its reported size
    without sweep rows); a cache from CLEAR_FACTOR x the next inner level's capacity to
    FIT_FRACTION x its own."""
    caches = list(caches)
    if name == memory_level:
        if not caches:
            return 0.0, float("inf")
        if sweep_rows is not None and not sweep_rows.empty:
            return float(offchip_window(sweep_rows, caches)[0]), float("inf")
        return float(DRAM_FACTOR * caches[-1][1]), float("inf")
    for i, (cname, size) in enumerate(caches):
        if cname == name:
            inner = caches[i - 1][1] if i > 0 else 0
            return CLEAR_FACTOR * inner, FIT_FRACTION * size
    return float("inf"), float("inf")


def candidate_rows(rows: pd.DataFrame, kind: str, name: str, device: dict, roof: Roof | None = None,
                   sweep: bool = True, sweep_rows: pd.DataFrame | None = None) -> pd.DataFrame:
    """Return the ok rows that may stand for a roof: a compute roof's rows of the op family
    and dtype that set it (GEMMs; FMA chains for a vector roof; its `via` precision when it
    borrows one); a level's stream (and probe.l1) rows on its plateau (or, for a roof not
    set, in its level's window, placed by the sweep's rows: rows themselves when sweep,
    else sweep_rows), warm only for a cache in the sweeps."""
    ok = rows[rows["status"] == "ok"]
    if kind == "compute":
        dtype = roof.dtype if roof is not None and roof.dtype else name
        # the family of the op that set it: a vector roof's candidates are FMA chains, not GEMMs
        # (read from the rows where they hold that op: an op's name need not start with its family)
        setter = ok.loc[ok["op"] == roof.op, "family"] if roof is not None and roof.op else ok["family"].iloc[:0]
        family = setter.iloc[0] if len(setter) else (roof.op.split(".")[0] if roof is not None and roof.op else "gemm")
        return ok[(ok["family"] == family) & (ok["dtype"] == dtype) & ok["gflops"].notna()]
    caches, memory = device_levels(device)
    if roof is not None and roof.plateau_bytes:
        lo, hi = roof.plateau_bytes
    else:
        lo, hi = level_window(name, caches, memory, rows if sweep else sweep_rows)
    sel = (((ok["family"] == "stream") | (ok["op"] == "probe.l1")) & ok["gbps"].notna()
           & (ok["working_set_bytes"] >= lo) & (ok["working_set_bytes"] <= hi))
    if sweep and name != memory:
        sel &= ok["mode"] == "warm"
    return ok[sel]


def pick(rows: pd.DataFrame, kind: str, per_roof: int = PER_ROOF) -> pd.DataFrame:
    """Return a roof's best per_roof candidates: for a compute roof the fastest distinct
    (impl, point)s; for a level the fastest row of each of its best working-set sizes (a
    bandwidth roof rests on two sizes or more)."""
    if rows.empty:
        return rows
    rate = "gflops" if kind == "compute" else "gbps"
    key = rows["point_id"].str.rsplit("@", n=1).str[0]  # the same point timed warm and cold runs once
    best = rows.assign(_key=key).sort_values(rate, ascending=False).drop_duplicates("_key")
    if kind != "compute":
        best = best.assign(_bin=size_bin(best["working_set_bytes"])).drop_duplicates("_bin")
    return best.head(per_roof).drop(columns=[c for c in ("_key", "_bin") if c in best])


def targets(roofs, sweep_rows: pd.DataFrame, device: dict) -> list[tuple[str, str, Roof | None]]:
    """Return the (kind, name, roof or None) the sustained phase confirms: every measured
    memory, cache and compute roof (not the extra lines "fp16 via fp32", "bf16.vector") and, on a
    CPU, each level and precision the sweeps measured but left without a roof."""
    caches, memory = device_levels(device)
    levels = [memory] + [n for n, _ in caches]
    out = [(r.kind, r.name, r) for r in roofs if r.source == "measured"
           and ((r.kind == "bandwidth" and r.name in levels)
                or (r.kind == "compute" and not (r.extra or {}).get("line_of")))]  # not the extra lines of rule 10
    if (device or {}).get("kind") == "cpu":
        have = {(k, n) for k, n, _ in out}
        out += [("bandwidth", n, None) for n in levels if ("bandwidth", n) not in have]
        gemm = sweep_rows[(sweep_rows["family"] == "gemm") & (sweep_rows["status"] == "ok")]
        out += [("compute", p, None) for p in dict.fromkeys(gemm["dtype"]) if ("compute", p) not in have]
    return out


def _steady(rows: pd.DataFrame) -> pd.Series:
    flagged = text_column(rows, "flag").map(is_runner_flag)
    return (rows["samples"].fillna(0) >= TRUST_MIN_SAMPLES) & (row_spread(rows) < TRUST_SPREAD) & ~flagged


def _figure(row, kind: str, steady: bool) -> dict:
    rate = "gflops" if kind == "compute" else "gbps"
    get = lambda k: (None if pd.isna(row.get(k)) else float(row.get(k))) if k in row else None  # noqa: E731
    spread = row_spread(pd.DataFrame([row])).iloc[0]
    return {"value": float(row[rate]), "point_id": str(row["point_id"]), "clock_mhz": get("clock_mhz"),
            "power_w": get("power_w"), "joules": get("joules"), "samples": int(row.get("samples") or 0),
            "spread": number(spread), "steady": bool(steady), "stop": str(row.get("stop", ""))}


def _best(rows: pd.DataFrame, kind: str):
    """Return (the best usable sustained row, its steadiness) or (None, why)."""
    if rows.empty:
        return None, "none of its candidates ran a sustained window (failed or skipped; see the sustained rows)"
    busy = text_column(rows, "flag").map(is_runner_flag)
    usable = rows[~busy]
    if usable.empty:
        return None, f"its {len(rows)} sustained window(s) ran while the machine was busy"
    best = usable.loc[usable["gflops" if kind == "compute" else "gbps"].idxmax()]
    return best, bool(_steady(pd.DataFrame([best])).iloc[0])


def merge_sustained(roofs, notes, rows: pd.DataFrame, device: dict) -> tuple[list[Roof], list[str]]:
    """Return (roofs, notes) with each roof's burst and sustained figures (module docstring),
    and on a CPU the roofs the sustained windows settle."""
    sweep, sus = split(rows)
    caches, memory = device_levels(device)
    levels = {memory} | {n for n, _ in caches}
    out, notes = [], list(notes)
    for r in roofs:
        if r.source != "measured" or not (r.kind == "compute" or (r.kind == "bandwidth" and r.name in levels)):
            out.append(r)
            continue
        extra = dict(r.extra, burst=r.value)
        if (r.extra or {}).get("line_of"):  # an extra line of rule 10: targets() runs no window for it
            extra.update(sustained=None, sustained_why=f"an extra line beside the {r.extra['line_of']} roof, not a "
                         "roof: the sustained phase runs windows for roofs only")
        elif sus.empty:
            extra.update(sustained=None,
                         sustained_why="no sustained phase in this run (--sustain 0, or a run before it)")
        else:
            best, steady = _best(candidate_rows(sus, r.kind, r.name, device, r, sweep=False), r.kind)
            if best is None:
                extra.update(sustained=None, sustained_why=steady)
            else:
                extra["sustained"] = _figure(best, r.kind, steady)
        out.append(dataclasses.replace(r, extra=extra))
    if not sus.empty and (device or {}).get("kind") == "cpu":
        out, notes = _settle(out, notes, sweep, sus, device)
    return out, notes


def _settle(roofs, notes, sweep, sus, device) -> tuple[list[Roof], list[str]]:
    """Return (roofs, notes) with the CPU roofs that only the sustained windows could set."""
    caches, memory = device_levels(device)
    have = {(r.kind, r.name) for r in roofs if r.source == "measured"}
    for kind, name, _ in targets([r for r in roofs if r.source == "measured"], sweep, device):
        if (kind, name) in have:
            continue
        rows = candidate_rows(sus, kind, name, device, sweep=False, sweep_rows=sweep)
        steady = rows[_steady(rows)] if not rows.empty else rows
        roof, why = (_settle_compute(name, steady) if kind == "compute"
                     else _settle_level(name, steady, roofs, caches, memory))
        if roof is None and steady.empty:
            why = _unsteady_why(rows)
        if roof is None:  # one note per level or precision: the sweep's, extended
            at = next((i for i, n in enumerate(notes) if n.startswith(f"{name}:")), None)
            if at is None:
                notes.append(f"{name}: the sustained phase could not settle it: {why}")
            else:
                notes[at] = f"{notes[at]}; the sustained phase could not settle it either: {why}"
            continue
        notes = [n for n in notes if not (n.startswith(f"{name}:") and "settled" not in n)]
        notes.append(f"{name}: set by the sustained phase ({roof.note})")
        roofs.append(roof)
    return roofs, notes


def _unsteady_why(rows: pd.DataFrame) -> str:
    """Return why none of a level's or precision's sustained windows was steady."""
    if rows.empty:
        return "no sustained window ran in its window (failed, skipped or not a candidate)"
    busy = int(text_column(rows, "flag").map(is_runner_flag).sum())
    if busy == len(rows):
        return f"its {len(rows)} sustained window(s) ran while the machine was busy"
    return (f"none of its {len(rows)} sustained window(s) was steady ({TRUST_MIN_SAMPLES}+ samples, spread under "
            f"{TRUST_SPREAD:.0%}; {busy} ran while the machine was busy)")


def _settled(kind, name, best, note, **kw) -> Roof:
    rate = "gflops" if kind == "compute" else "gbps"
    unit = "GB/s" if kind == "bandwidth" else ("GOP/s" if name in INTEGER_PRECISIONS else "GFLOP/s")
    spread = row_spread(pd.DataFrame([best])).iloc[0]
    return Roof(kind=kind, name=name, value=float(best[rate]), unit=unit, source="measured", op=str(best["op"]),
                impl=str(best["impl"]), dtype=str(best["dtype"]), point_id=str(best["point_id"]),
                shape=str(best.get("shape", "")), working_set_bytes=int(best["working_set_bytes"]),
                spread=number(spread), note=note,
                extra={"burst": None, "settled_by": "sustained", "sustained": _figure(best, kind, True)}, **kw)


def _settle_compute(name, steady):
    if steady.empty:
        return None, "no steady sustained window among its GEMMs"
    best = steady.loc[steady["gflops"].idxmax()]
    return _settled("compute", name, best, "its sweep rows were not steady; a steady sustained window set it"), ""


def _settle_level(name, steady, roofs, caches, memory):
    if steady.empty:
        return None, "no steady sustained window in its working-set window"
    tol = REL_TOL if name == memory else max(REL_TOL, CACHE_REL_TOL)
    top = steady["gbps"].max()
    near = steady[steady["gbps"] >= (1 - tol) * top]
    sizes = size_bin(near["working_set_bytes"]).nunique()
    if sizes < MIN_SIZES:
        return None, (f"steady sustained windows at {sizes} working-set size(s) within {tol:.0%} of the best; "
                      f"{MIN_SIZES} needed")
    names = [memory] + [n for n, _ in reversed(caches)]  # outermost first
    outer = None
    for n in names[:names.index(name)][::-1] if name in names else []:
        outer = next((r for r in roofs if r.kind == "bandwidth" and r.name == n and r.source == "measured"), None)
        if outer is not None:
            break
    median = float(near["gbps"].median())
    if outer is not None and median < (1 + REL_TOL) * outer.extra.get("plateau_median", outer.value):
        return None, f"its steady sustained median ({median:.1f} GB/s) is not {REL_TOL:.0%} above the {outer.name} roof"
    best = near.loc[near["gbps"].idxmax()]
    capacity = dict(caches).get(name)
    roof = _settled("bandwidth", name, best, "its sweep rows were not steady; steady sustained windows at "
                    f"{sizes} sizes set it", plateau_bytes=(int(near["working_set_bytes"].min()),
                                                             int(near["working_set_bytes"].max())),
                    plateau_points=len(near), plateau_values=(float(near["gbps"].min()), float(near["gbps"].max())))
    extra = dict(roof.extra, plateau_median=median, **({"capacity_bytes": capacity} if capacity else {}))
    return dataclasses.replace(roof, extra=extra), ""
