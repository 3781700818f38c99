"""Revisit passes (ARCHITECTURE.md, rule 11): on a CPU, whose speed a VM's neighbours move from
minute to minute, the run measures some of its points again at later minutes. What a pass
measures is DECLARED, not derived: no roof is worked out in the middle of a run. The number of
passes follows the noise (Hoefler & Belli, "Scientific benchmarking of parallel computing
systems", SC15: repetitions follow the variability, not the cost).

    revisit_passes(device, quick)   -> the fewest passes (Policy.passes(quick)[0] on a CPU; none on a GPU)
    revisit_stops(plan, passes)     -> {task index: [pass numbers]}: after which tasks those run
    revisit_groups(rows)            -> {group: [point_id]}: the declared selection, group by group
    ladder_rows(rows)               -> [point_id]: GEMM and FMA rows slower than a smaller call of their kernel
    revisit_selection(rows)         -> [point_id]: the sweep's rows a pass measures again
    revisit_picks(rows, device)     -> [(op, impl, point, mode)] of a pass, for the runner
    pass_bests(rows)                -> {group: [its best rate in each pass]}
    needs_another_pass(...)         -> whether the plan's end runs one more pass

A group is one of: the warm stream rows of one octave of working set ("stream", octave); the
warm probe.l1 rows of one octave ("probe.l1", octave); the GEMM and FMA rows of one dtype and
unit ("compute", dtype, unit); the launch probe's rows of one impl and timer ("launch", impl,
timer). A pass measures each group's Policy.revisit_top fastest rows of the sweep (the launch
probe's one fastest call). A neighbour only ever slows a call, so the derivation keeps each
point's best pass.

Nothing here imports roofs: measuring reads bench.policy and bench.results alone.
"""
from __future__ import annotations

import math

import pandas as pd

from bench.policy import DEFAULT, Policy
from bench.results import Measurement, first_pass_id, is_runner_flag, usable
from bench.util import fmt_bytes, low_time

REVISIT_FAMILIES = ("stream", "probe", "gemm", "fma")  # the families a group is declared over
L1_OP, LAUNCH_OP = "probe.l1", "probe.launch"


def revisit_passes(device, quick: bool, policy: Policy = DEFAULT) -> int:
    """Return how many revisit passes a run has at its planned stops: on a CPU, whose memory
    bandwidth and call speed a VM's neighbours move minute to minute, Policy.passes(quick)[0]
    (more may follow at the plan's end, needs_another_pass); none on a GPU."""
    return policy.passes(quick)[0] if device.kind == "cpu" else 0


def revisit_stops(plan, passes: int) -> dict:
    """Return {task index: [pass numbers]}: where in plan (a runner Plan) each revisit pass
    runs, spread over the ends of the families after stream (the last at the plan's end), so
    the passes see the machine at different minutes; back to back at the end when fewer
    families follow."""
    if passes <= 0 or not any(t.op.family == "stream" for t in plan.tasks):
        return {}
    first = next(i for i, t in enumerate(plan.tasks) if t.op.family == "stream")
    ends = [i for i in range(first, len(plan.tasks))
            if i == len(plan.tasks) - 1 or plan.tasks[i + 1].op.family != plan.tasks[i].op.family]
    later = [i for i in ends if plan.tasks[i].op.family != "stream"] or [len(plan.tasks) - 1]
    out: dict = {}
    for j in range(passes):
        at = later[min(len(later) - 1, round((j + 1) * len(later) / passes) - 1)]
        out.setdefault(at, []).append(j + 2)
    return out


# ---- the declared selection -------------------------------------------------------------------

def group_of(row) -> tuple | None:
    """Return the declared group of a row (a dict or a DataFrame row), or None when no pass
    revisits its kind: ("stream", octave, direction) for a warm stream row (direction: read,
    write or copy by its read and write bytes, so every direction roof rests on rows measured
    again), ("probe.l1", octave) for a warm probe.l1 row (octave: round(log2 working_set_bytes)),
    ("compute", dtype, unit) for a GEMM or FMA row (unit "gemm"; an FMA chain "vector" when its
    impl ends "/triton", else "elementwise"), ("launch", impl, timer) for a probe.launch row."""
    family, op, mode = str(row.get("family", "")), str(row.get("op", "")), str(row.get("mode", ""))
    if (family == "stream" or op == L1_OP) and mode == "warm":
        ws = _number(row.get("working_set_bytes"))
        if ws <= 0:
            return None
        if family != "stream":
            return (L1_OP, round(math.log2(ws)))
        r, w = _number(row.get("read_bytes")), _number(row.get("write_bytes"))
        return ("stream", round(math.log2(ws)), "write" if r <= 0 < w else "read" if w <= 0 else "copy")
    if family in ("gemm", "fma"):
        impl = str(row.get("impl", ""))
        unit = "gemm" if family == "gemm" else ("vector" if impl.endswith("/triton") else "elementwise")
        return ("compute", str(row.get("dtype", "")), unit)
    if op == LAUNCH_OP:
        return ("launch", str(row.get("impl", "")), str(row.get("timer", "")))
    return None


# the columns group_of and row_rate read, with the point's id, the runner's flag and the pass
ROW_COLUMNS = ("point_id", "family", "op", "mode", "impl", "dtype", "timer", "working_set_bytes", "read_bytes",
               "write_bytes", "bytes", "flops", "p20_ms", "median_ms", "flag", "pass")


def _records(rows: pd.DataFrame) -> list[dict]:
    """Return rows as dicts of the columns of ROW_COLUMNS they have (the selection reads no other)."""
    return rows[[c for c in ROW_COLUMNS if c in rows]].to_dict("records")


def row_rate(row, samples=None, policy: Policy = DEFAULT) -> float:
    """Return a row's rate for the selection: its work over the Policy.rate_quantile low
    quantile of its sample times (samples, seconds; without them its p20_ms, else its
    median_ms). The work is its bytes for stream and probe.l1 (bytes/s), its FLOPs for GEMM and
    FMA rows (FLOP/s), one call for the launch probe (calls/s: the fastest call the highest);
    NaN where it has no time or no work."""
    group = group_of(row)
    if group is None:
        return math.nan
    work = 1.0 if group[0] == "launch" else _number(row.get("flops" if group[0] == "compute" else "bytes"))
    t = low_time(samples, policy.rate_quantile)
    if t is None:
        ms = _number(row.get("p20_ms")) or _number(row.get("median_ms"))
        t = ms / 1e3 if ms > 0 else None
    return work / t if t and work > 0 else math.nan


def revisit_groups(rows: pd.DataFrame, policy: Policy = DEFAULT, samples: dict | None = None) -> dict:
    """Return {group: [point_id]}: per declared group (group_of) of the sweep's usable rows
    (pass 1), its Policy.revisit_top fastest by row_rate (the launch probe's groups: the one
    fastest call), fastest first; a tie goes to the row that ran first. Groups in the order their
    first row ran."""
    if rows.empty:
        return {}
    first = rows[usable(rows, policy)]
    if "pass" in first:
        first = first[pd.to_numeric(first["pass"], errors="coerce").fillna(1) == 1]
    samples = samples or {}
    found: dict = {}
    for row in _records(first):
        group = group_of(row)
        rate = row_rate(row, samples.get(str(row["point_id"])), policy) if group else math.nan
        if rate == rate:
            found.setdefault(group, []).append((rate, str(row["point_id"])))
    out = {}
    for group, rated in found.items():
        top = 1 if group[0] == "launch" else policy.revisit_top
        out[group] = [pid for _, pid in sorted(rated, key=lambda r: -r[0])[:top]]  # sorted is stable
    return out


def flagged_rows(rows: pd.DataFrame) -> list[str]:
    """Return the point_ids of the sweep's ok rows (pass 1) in a declared group that the runner
    flagged (a busy machine, stolen cores, a time jump): such a row counts for nothing (rule 9),
    so a pass measures it again rather than leave its size or shape unmeasured."""
    if rows.empty or "flag" not in rows:
        return []
    first = rows[rows["status"] == "ok"] if "status" in rows else rows
    if "pass" in first:
        first = first[pd.to_numeric(first["pass"], errors="coerce").fillna(1) == 1]
    return [str(r["point_id"]) for r in _records(first) if is_runner_flag(r["flag"]) and group_of(r)]


def ladder_rows(rows: pd.DataFrame, policy: Policy = DEFAULT, samples: dict | None = None) -> list[str]:
    """Return the point_ids of the sweep's usable GEMM and FMA rows (pass 1) that read more than
    Policy.shape_tol below a row of the same op, impl and dtype doing less work per call: a
    larger call of one kernel amortizes its fixed cost and runs at least as fast, so such a row
    was slowed (a host's slow minute over a run of rows), and a pass measures it again rather
    than leave its shape off its precision's plateau for good."""
    if rows.empty:
        return []
    first = rows[usable(rows, policy)]
    if "pass" in first:
        first = first[pd.to_numeric(first["pass"], errors="coerce").fillna(1) == 1]
    first = first[first["family"].isin(("gemm", "fma"))] if "family" in first else first.iloc[:0]
    samples = samples or {}
    out = []
    for _, g in first.groupby(["op", "impl", "dtype"], sort=False):
        ladder = sorted(((_number(r["flops"]), row_rate(r, samples.get(str(r["point_id"])), policy),
                          str(r["point_id"])) for r in _records(g)), key=lambda x: x[0])
        for flops, rate, pid in ladder:   # against the calls doing strictly less work
            fastest = max((x for f, x, _ in ladder if f < flops and x == x), default=0.0)
            if rate == rate and rate < (1 - policy.shape_tol) * fastest:
                out.append(pid)
    return out


def revisit_selection(rows: pd.DataFrame, policy: Policy = DEFAULT, samples: dict | None = None) -> list[str]:
    """Return the point_ids of the sweep's rows (pass 1) a revisit pass measures again, each
    once, in the order they ran: every declared group's picks (revisit_groups). rows holds the
    CSV columns (point_id, op, family, impl, dtype, mode, timer, working_set_bytes, bytes,
    flops, p20_ms or median_ms, status, samples, flag, pass); samples ({point_id: [seconds]},
    optional) gives each row's rate its low quantile, else its p20_ms stands for it."""
    chosen = {pid for pids in revisit_groups(rows, policy, samples).values() for pid in pids}
    chosen |= set(flagged_rows(rows)) | set(ladder_rows(rows, policy, samples))
    out, seen = [], set()
    for pid in rows["point_id"].astype(str) if not rows.empty else ():
        if pid in chosen and pid not in seen:
            seen.add(pid)
            out.append(pid)
    return out


def revisit_picks(rows: list[Measurement], device=None, policy: Policy = DEFAULT) -> list[tuple]:
    """Return [(op, impl, point, mode)] a revisit pass measures, for the runner: the rows of
    revisit_selection over the sweep's measurements so far, in the order they ran, each in its
    own mode. (device: the runner's call; the selection is the same on any device, and a GPU
    run has no passes.)"""
    mine = [m for m in rows if m.pass_no == 1 and m.family in REVISIT_FAMILIES]
    if not mine:
        return []
    chosen = set(revisit_selection(pd.DataFrame([m.row() for m in mine]), policy,
                                   {m.point_id: m.samples_s for m in mine}))
    return [(m.op, m.impl, m.point, m.mode) for m in mine if m.point_id in chosen]


# ---- how many passes: the noise decides -------------------------------------------------------

def pass_bests(rows: pd.DataFrame, policy: Policy = DEFAULT, samples: dict | None = None) -> dict:
    """Return {group: [its best rate in each pass, by pass number]}: the groups the sweep
    declares (revisit_groups over rows' pass-1 rows), each pass's best row_rate among the
    group's picks (a revisit's point id less its pass mark), usable rows only; a pass that
    measured none of a group's picks gives it no entry."""
    groups = revisit_groups(rows, policy, samples)
    owner = {pid: group for group, pids in groups.items() for pid in pids}
    if not owner:
        return {}
    samples = samples or {}
    best: dict = {}
    for row in _records(rows[usable(rows, policy)]):
        group = owner.get(first_pass_id(row["point_id"]))
        if group is None:
            continue
        rate = row_rate(row, samples.get(str(row["point_id"])), policy)
        pass_no = int(_number(row.get("pass")) or 1)
        if rate == rate and rate > best.setdefault(group, {}).get(pass_no, 0.0):
            best[group][pass_no] = rate
    return {group: [by_pass[p] for p in sorted(by_pass)] for group, by_pass in best.items() if by_pass}


def measured_pass_bests(rows: list[Measurement], policy: Policy = DEFAULT) -> dict:
    """Return pass_bests of a runner's measurements so far (every pass)."""
    mine = [m for m in rows if m.family in REVISIT_FAMILIES]
    if not mine:
        return {}
    return pass_bests(pd.DataFrame([m.row() for m in mine]), policy, {m.point_id: m.samples_s for m in mine})


def halfwidth(rates) -> float:
    """Return the half-width of a group's passes: (max / min - 1) / 2 over its positive rates;
    0 with fewer than two (one pass says nothing of the next)."""
    vals = [float(r) for r in rates if r is not None and r == r and 0 < float(r) < math.inf]
    return (max(vals) / min(vals) - 1) / 2 if len(vals) >= 2 else 0.0


def needs_another_pass(pass_bests: dict, revisit_s: float, elapsed_s: float, passes_done: int, quick: bool,
                       policy: Policy = DEFAULT) -> bool:
    """Return whether a CPU run measures one more revisit pass at its plan's end: always while
    it has run fewer than Policy.passes(quick)[0] revisit passes (passes_done, the sweep not
    counted), never once it has run Policy.passes(quick)[1]; in between, while (i) some group
    is still wide (pass_bests: {group: [its best rate in each pass]}, halfwidth over
    Policy.target_halfwidth) and (ii) the revisit passes so far (revisit_s) took under
    Policy.pass_time_share of the run's elapsed_s."""
    fewest, most = policy.passes(quick)
    if passes_done >= most:
        return False
    if passes_done < fewest:
        return True
    if revisit_s >= policy.pass_time_share * elapsed_s:
        return False
    return any(halfwidth(rates) > policy.target_halfwidth for rates in pass_bests.values())


def widest(pass_bests: dict) -> tuple[tuple | None, float]:
    """Return (the group whose passes spread most, its halfwidth); (None, 0.0) with none."""
    spread = [(halfwidth(rates), group) for group, rates in pass_bests.items()]
    if not spread:
        return None, 0.0
    width, group = max(spread, key=lambda s: s[0])
    return group, width


def group_name(group) -> str:
    """Return a group for a progress line: "stream ~128 MiB", "fp32 gemm", "probe.launch/torch
    (perf_counter_ns)"."""
    if not group:
        return "no group"
    if group[0] in ("stream", L1_OP):
        return f"{group[0]} ~{fmt_bytes(2 ** group[1])}"
    if group[0] == "compute":
        return f"{group[1]} {group[2]}"
    return f"{group[1]} ({group[2]})"



def _number(v) -> float:
    """Return v as a float, 0.0 where it is missing or not a number."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return 0.0
    return f if f == f else 0.0
