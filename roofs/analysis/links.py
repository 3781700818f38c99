"""Interconnect and host-link roofs (ARCHITECTURE.md, rule 10): each collective's best bus
bandwidth, each send/recv pair's best bandwidth, each host copy direction and memory kind's
best GB/s. No plateau applies: a link's best row is its ceiling."""
from __future__ import annotations

import pandas as pd

from bench.results import text_column
from roofs.analysis.roofline import Roof


def link_roofs(rows: pd.DataFrame) -> list[Roof]:
    """Return interconnect and host-link roofs: per collective its best bus bandwidth, per
    send/recv pair its best bandwidth, per host copy direction and memory kind its best GB/s."""
    roofs = []
    comm = rows[(rows["family"] == "comm") & (rows["status"] == "ok")] if "family" in rows else rows.iloc[0:0]
    if not comm.empty:
        pairs = text_column(comm, "pair")
        keys = [op.split(".", 1)[1] + (f".{pair}" if pair else "") for op, pair in zip(comm["op"], pairs)]
        comm = comm.assign(key=keys,
                           rate=comm["bus_gbps"].fillna(comm["gbps"]))
        for key, g in comm.groupby("key", sort=False):
            best = g.loc[g["rate"].idxmax()]
            roofs.append(Roof("bandwidth", f"link.{key}", float(best["rate"]), "GB/s", op=str(best["op"]),
                              impl=str(best["impl"]), point_id=str(best["point_id"]),
                              working_set_bytes=int(best["bytes"]),
                              note=("bus bandwidth" if key.startswith(("all_", "reduce", "broad"))
                                    else "point-to-point bandwidth")))
    host = rows[(rows["family"] == "transfer") & (rows["status"] == "ok")] if "family" in rows else rows.iloc[0:0]
    for (op, memory), g in (host.groupby(["op", "memory"], sort=False) if not host.empty else ()):
        best = g.loc[g["gbps"].idxmax()]
        roofs.append(Roof("bandwidth", f"host.{op.split('.')[1]}.{memory}", float(best["gbps"]), "GB/s", op=op,
                          impl=str(best["impl"]), point_id=str(best["point_id"]), working_set_bytes=int(best["bytes"]),
                          note="host-device copy"))
    return roofs
