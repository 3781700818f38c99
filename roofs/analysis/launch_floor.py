"""Roofs from the probe family (bench/ops/probe.py): the launch floor, and the launch-bound
note it puts on points (ARCHITECTURE.md, rules 5 and 12).

The launch floor: one roof per (backend, form), kind "latency", unit "us": the lowest
trustworthy median time per call of an empty call (probe.launch). Forms: `launch` (host
launches back to back, what a row timed by CUDA events around launched calls pays), `graph`
(a CUDA-graph node, what a row timed by graph replay pays), `call` (a CPU call: torch's
dispatch). Its name is launch.<backend>.<form>, e.g. launch.triton.graph.

A point is launch-bound when its median time per call is under LAUNCH_FACTOR (2) x the
floor its own timing pays: the floor of its backend and of the form its timer used
(TIMER_FORM), or the lowest floor of that form when its backend has none. Such a point
measures the call, not its kernel; bound_note says so (it is not a flag: the point is not
above any bound, and it may be right where the floor puts it).

This module reads rows and roofs only; it imports nothing from roofs.analysis.model (which calls it).
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd

from bench.policy import Policy
from bench.results import text_column, usable
from bench.util import low_time, missing, number
from roofs.analysis.roofline import Roof

LAUNCH_OP = "probe.launch"
LAUNCH_FACTOR = 2.0
TIMER_FORM = {"cuda_graph": "graph", "cuda_event": "launch", "perf_counter_ns": "call"}
LAUNCH_PREFIX = "launch-bound"


def launch_roofs(rows: pd.DataFrame) -> list[Roof]:
    """Return the launch-floor roofs from the rows that may set one (the caller filters them:
    roofs.analysis.model.rated, at each row's low-quantile time): per (backend, form) the lowest median time per call
    of op probe.launch over its passes, in microseconds."""
    if rows.empty or not {"op", "status", "median_ms", "backend", "timer"} <= set(rows.columns):
        return []
    empty = rows[(rows["op"] == LAUNCH_OP) & (rows["status"] == "ok") & rows["median_ms"].notna()]
    # the form is the way the timer took the call (the launch form refuses graph capture)
    forms = empty["timer"].astype(str).map(TIMER_FORM)
    empty = empty[forms.notna()]
    roofs = []
    for (backend, form), g in empty.groupby([empty["backend"].astype(str), forms[forms.notna()]], sort=True):
        best = g.loc[g["median_ms"].astype(float).idxmin()]
        spread = (float(best["p80_ms"]) - float(best["p20_ms"])) / float(best["median_ms"]) \
            if {"p20_ms", "p80_ms"} <= set(best.index) else None
        roofs.append(Roof(
            kind="latency", name=f"launch.{backend}.{form}", value=1e3 * float(best["median_ms"]), unit="us",
            op=LAUNCH_OP, impl=str(best["impl"]), point_id=str(best["point_id"]), working_set_bytes=0,
            spread=number(spread),
            note=f"an empty call per {'graph node' if form == 'graph' else form}: the floor under any {backend} call "
                 f"timed this way; points within {LAUNCH_FACTOR:g}x of it are launch-bound",
            extra={"backend": backend, "form": form}))
    return roofs


def launch_floors(roofs) -> dict:
    """Return {(backend, form): microseconds} of the launch-floor roofs among roofs (Roof or dict)."""
    out = {}
    for r in roofs:
        r = r if isinstance(r, Roof) else Roof.from_dict(r)
        if r.kind == "latency" and r.name.startswith("launch."):
            out[(r.extra.get("backend", ""), r.extra.get("form", ""))] = r.value
    return out


def floor_for(backend: str, timer: str, floors: dict) -> tuple[float, str] | None:
    """Return (microseconds, the floor's name) that a row of this backend and timer pays per
    call: its backend's floor of the timer's form, else the lowest floor of that form."""
    form = TIMER_FORM.get(timer)
    if form is None:
        return None
    if (backend, form) in floors:
        return floors[(backend, form)], f"launch.{backend}.{form}"
    same = [(us, f"launch.{b}.{f}") for (b, f), us in floors.items() if f == form]
    return min(same) if same else None


def launch_note(median_ms, backend: str, timer: str, floors: dict, op: str = "") -> str:
    """Return "launch-bound: ..." when median_ms is under LAUNCH_FACTOR x the floor the row
    pays (floor_for), else "". The empty call's own rows are the floor, never launch-bound."""
    if op == LAUNCH_OP or missing(median_ms):
        return ""
    hit = floor_for(backend, timer, floors)
    if hit is None:
        return ""
    us, name = hit
    t = 1e3 * float(median_ms)
    if t >= LAUNCH_FACTOR * us:
        return ""
    return f"{LAUNCH_PREFIX}: {t:.3g} us per call is within {LAUNCH_FACTOR:g}x of the {us:.3g} us {name} floor"


def with_launch_notes(rows: pd.DataFrame, roofs) -> pd.Series:
    """Return rows' bound_note with the launch-bound note appended ("; "-joined) where it applies."""
    floors = launch_floors(roofs)
    notes = text_column(rows, "bound_note")
    if not floors or rows.empty:
        return notes
    col = lambda name: rows[name] if name in rows else pd.Series("", index=rows.index)  # noqa: E731
    out = []
    for note, status, med, backend, timer, op in zip(notes, col("status"), col("median_ms"), col("backend"),
                                                     col("timer"), col("op")):
        extra = launch_note(med, str(backend), str(timer), floors, str(op)) if status == "ok" else ""
        out.append("; ".join(x for x in (note, extra) if x))
    return pd.Series(out, index=rows.index)


def is_launch_bound(rows: pd.DataFrame) -> pd.Series:
    """Return, per row, whether bound_note calls it launch-bound."""
    if "bound_note" not in rows:
        return pd.Series(False, index=rows.index)
    return text_column(rows, "bound_note").str.contains(LAUNCH_PREFIX)


def launch_floor_roofs(rows: pd.DataFrame, samples: dict | None, policy: Policy) -> list[Roof]:
    """Return the launch floors (rule 5): each (backend, form)'s lowest low-quantile time per
    call, its interval reaching down by the same spread S a rate's reaches up."""
    empty = rows[(rows["op"] == LAUNCH_OP) & usable(rows, policy)] if not rows.empty else rows
    if empty.empty:
        return []
    low = [low_time((samples or {}).get(str(p)), policy.rate_quantile) for p in empty["point_id"]]
    low_ms = [min(t * 1e3, m) if t else m for t, m in zip(low, empty["median_ms"].astype(float))]
    timed = empty.assign(median_ms=low_ms, jitter=np.log(empty["median_ms"].astype(float) / low_ms))
    out = []
    for roof in launch_roofs(timed):
        own = timed[timed["point_id"] == roof.point_id].iloc[0]
        same = timed[(timed["impl"] == own["impl"]) & (timed["timer"] == own["timer"])]["median_ms"] * 1e3
        s = max(policy.interval_reach * float(own["jitter"]),
                policy.pass_reach(len(same)) * math.log(same.max() / same.min()))
        low = roof.value / max(math.exp(s), 1 + 2 * policy.min_halfwidth)
        out.append(replace(roof, interval=(low, roof.value),
                           extra={**roof.extra, "pass_count": len(same),
                                  **({"passes": [float(same.min()), float(same.max())]} if len(same) >= 2 else {})}))
    return out
