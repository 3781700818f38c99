"""Revisit passes (ARCHITECTURE.md, rule 11): on a CPU, whose speed a VM's neighbours move from
minute to minute, the run measures some of its points again at later minutes, between the
families after stream. What a pass measures, and where in the plan it runs:

    revisit_passes(device, quick)  -> how many passes (3, 2 quick, on a CPU; none on a GPU)
    revisit_stops(plan, passes)    -> {task index: [pass numbers]}: after which tasks each runs
    revisit_picks(rows, device)    -> [(op, impl, point, mode)] of a pass: the off-chip stream
                                      sizes, the rows the cache roofs rest on (cache_picks) and
                                      the rows that set a roof of their own (roof_picks)

A neighbour only ever slows a call, so derive keeps each point's best pass, and the passes'
spread is what the roof's interval reaches down to (rule 17): the machine at another minute.
"""
from __future__ import annotations

import pandas as pd

from bench.results import Measurement
from roofs.analysis.compute import unit_of
from roofs.analysis.derive import at_or_past, bandwidth_roofs, offchip_window
from roofs.analysis.launch_floor import LAUNCH_OP
from roofs.analysis.roofline import direction_of
from roofs.analysis.trust import trusted

REVISIT_PASSES = {"cpu": (3, 2)}   # revisit passes by device kind: (full run, quick run); none on a GPU
REVISIT_SIZES = 2                  # off-chip sizes per direction a pass revisits: the smallest past the start
ROOF_FAMILIES = ("probe", "fma", "gemm")  # families whose roofs each rest on one row: that row is revisited


def revisit_passes(device, quick: bool) -> int:
    """Return how many times a run revisits its points after they ran: on a CPU, whose memory
    bandwidth and call speed a VM's neighbours move minute to minute, 3 (2 quick); none on a
    GPU."""
    full, short = REVISIT_PASSES.get(device.kind, (0, 0))
    return short if quick else full


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


def revisit_picks(rows: list[Measurement], device) -> list[tuple]:
    """Return [(op, impl, point, mode)] a revisit pass measures, each once: the off-chip stream
    sizes, warm (stream_picks), the rows the cache roofs rest on (cache_picks), then the rows
    that set a roof of their own (roof_picks)."""
    picks = [(*pick, "warm") for pick in stream_picks(rows, device)] + cache_picks(rows, device) + roof_picks(rows)
    out, seen = [], set()
    for op, impl, point, mode in picks:
        key = (op, impl, str(sorted(point.items())), mode)  # a point may hold lists
        if key not in seen:
            seen.add(key)
            out.append((op, impl, point, mode))
    return out


def cache_picks(rows: list[Measurement], device) -> list[tuple]:
    """Return [(op, impl, point, mode)]: the row each cache level's roof and its direction roofs
    rest on, as the sweep's pass derives them (roofs.analysis.derive.bandwidth_roofs over the
    stream rows so far). A level's plateau is measured in one stretch of the sweep, a few
    seconds of one minute: a quick run's L3 rereads read 150-155 GB/s, the next run's 125-133."""
    stream = [m for m in rows if m.family == "stream" and m.status == "ok" and m.pass_no == 1 and m.samples_s]
    if not stream or not device.caches:
        return []
    df = pd.DataFrame([m.row() for m in stream])
    roofs, _ = bandwidth_roofs(df, [(c.name, c.total_bytes) for c in device.caches])
    by_id = {m.point_id: m for m in stream}
    names = {c.name for c in device.caches}
    rested = [by_id[r.point_id] for r in roofs if r.name.partition(".")[0] in names and r.point_id in by_id]
    return [(m.op, m.impl, m.point, m.mode) for m in rested]


def stream_picks(rows: list[Measurement], device) -> list[tuple]:
    """Return [(op, impl, point)]: per direction class of the stream kernels (read: nothing
    written; write: nothing read; copy: both), the (op, impl, dtype) sweep with the fastest
    warm off-chip row of the sweep's pass, at its REVISIT_SIZES smallest sizes from the
    off-chip start (roofs.analysis.derive.offchip_window)."""
    stream = [m for m in rows if m.family == "stream" and m.status == "ok" and m.pass_no == 1 and m.samples_s]
    sweep = [m for m in stream if m.op != "stream.reread" and m.mode == "warm"]
    if not sweep:
        return []
    caches = [(c.name, c.total_bytes) for c in device.caches]
    # the start derive will use: from every stream row (the reread measures the caches' edges)
    start = offchip_window(pd.DataFrame([m.row() for m in stream]), caches)[0] if caches else 0
    past = [m for m in sweep if at_or_past(m.working_set_bytes, start)]
    picks = []
    for direction in ("read", "write", "copy"):
        mine = [m for m in past if _direction(m) == direction]
        if not mine:
            continue
        best = max(mine, key=lambda m: m.gbps)
        same = sorted((m for m in mine if (m.op, m.impl, m.dtype) == (best.op, best.impl, best.dtype)),
                      key=lambda m: m.working_set_bytes)
        picks += [(m.op, m.impl, m.point) for m in same[:REVISIT_SIZES]]
    return picks


def roof_picks(rows: list[Measurement]) -> list[tuple]:
    """Return [(op, impl, point, mode)]: the row of the sweep's pass that sets, or would set,
    each roof resting on one row (ROOF_FAMILIES), among the rows that may set a roof
    (roofs.analysis.trust.trusted; all of a group's rows where none may): per probe op, impl
    and timer its best (the launch floor's fastest call, probe.l1's fastest read); per
    precision and unit (GEMM, a vector unit's FMA chains, torch's elementwise chains:
    roofs.analysis.compute.unit_of) its fastest row, warm or cold. One burst of one row says
    nothing of the minute after it; the pass measures it then."""
    mine = [m for m in rows if m.family in ROOF_FAMILIES and m.status == "ok" and m.pass_no == 1 and m.samples_s]
    if not mine:
        return []
    steady = trusted(pd.DataFrame([m.row() for m in mine])).tolist()
    best: dict = {}
    for m, ok in zip(mine, steady):
        if m.family == "probe":
            key, score = (m.op, m.impl, m.timer), (-m.median_s if m.op == LAUNCH_OP else m.gbps)
        else:
            key, score = (m.dtype, unit_of({"family": m.family, "impl": m.impl})), m.gflops
        if score == score and (key not in best or (ok, score) > best[key][0]):  # a trusted row first; NaN: none
            best[key] = ((ok, score), m)
    return [(m.op, m.impl, m.point, m.mode) for _, m in best.values()]


def _direction(m: Measurement) -> str:
    """Return a stream row's direction class from its read and write bytes (roofline.direction_of)."""
    return direction_of(m.columns.get("read_bytes"), m.columns.get("write_bytes"))
