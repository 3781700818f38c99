"""Interconnect and host-link roofs (ARCHITECTURE.md, rules 10 and 17): each collective's bus
bandwidth, each send/recv pair's bandwidth, each host copy direction and memory kind's GB/s.
A link reaches its ceiling at its large messages, where its per-copy latency is amortized: a
roof is the statistic of roofs.analysis.statistic over its message sizes within
Policy.shape_tol of its best, with its one-sided interval, as a precision's over its shapes."""
from __future__ import annotations

import pandas as pd

from bench.policy import DEFAULT, Policy
from bench.results import text_column
from roofs.analysis.roofline import Roof
from roofs.analysis.statistic import ceiling, measurements


def _link(name: str, g: pd.DataFrame, policy: Policy, note: str) -> Roof:
    best = g.groupby("key")["rate"].max()
    keep = g[g["key"].isin(best[best >= (1 - policy.shape_tol) * best.max()].index)]
    value, interval, basis, row = ceiling(measurements(keep, keep["key"]), policy)
    return Roof("bandwidth", name, value, "GB/s", op=str(row["op"]), impl=str(row["impl"]),
                point_id=str(row["point_id"]), working_set_bytes=int(row["bytes"]), note=note, interval=interval,
                extra={"interval_basis": basis, "pass_count": basis["passes"]})


def link_roofs(rates: pd.DataFrame, policy: Policy = DEFAULT) -> list[Roof]:
    """Return interconnect and host-link roofs from rated rows (roofs.analysis.model.rated: "rate"
    the row's GB/s at the low quantile of its samples, "key" its point across passes): per
    collective its bus bandwidth, per send/recv pair its bandwidth, per host copy direction and
    memory kind its GB/s."""
    roofs = []
    fam = rates["family"] if "family" in rates else pd.Series("", index=rates.index)
    comm = rates[fam == "comm"]
    if not comm.empty:
        pairs = text_column(comm, "pair")
        keys = [op.split(".", 1)[1] + (f".{pair}" if pair else "") for op, pair in zip(comm["op"], pairs)]
        bus = comm["bus_gbps"] if "bus_gbps" in comm else comm["gbps"]
        comm = comm.assign(link=keys, rate=comm["rate"] * (bus.fillna(comm["gbps"]) / comm["gbps"]))
        for key, g in comm.groupby("link", sort=False):
            roofs.append(_link(f"link.{key}", g, policy, "bus bandwidth" if key.startswith(("all_", "reduce", "broad"))
                               else "point-to-point bandwidth"))
    host = rates[fam == "transfer"]
    for (op, memory), g in (host.groupby(["op", "memory"], sort=False) if not host.empty else ()):
        roofs.append(_link(f"host.{op.split('.')[1]}.{memory}", g, policy, "host-device copy"))
    return roofs
