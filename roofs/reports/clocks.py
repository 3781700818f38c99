"""The clocks of a run's report: which clock a CPU's computed peaks use and where it came from
(clock_line), whether a row's recorded clock was observed (clock_is_observed), and the finding
of a compute roof far below its reference (below_reference), which is about the path that set
it, never an implied clock.
"""
from __future__ import annotations

from roofs.analysis import specs


def _known(x) -> bool:
    return x is not None and x == x


def clock_line(device: dict) -> str:
    """Return, for a CPU, the clock its computed peaks use and its basis ("; peaks computed at
    4,481 MHz (measured (dependent add chain))"), with why it was not measured where it was
    not; "" for a GPU."""
    if device.get("kind") != "cpu":
        return ""
    clock, basis = specs.cpu_clock(device)
    why = (device.get("extra") or {}).get("clock_not_measured")
    return ((f"; peaks computed at {clock:,.0f} MHz ({basis})" if clock else "")
            + (f"; not measured: {why}" if why else ""))


def clock_is_observed(device: dict) -> bool:
    """Return whether the clock_mhz a row recorded is a clock observed while it ran: a GPU's
    (NVML, amdsmi) and a CPU's whose kernel reads its clock (cpufreq); a CPU's without cpufreq
    is /proc/cpuinfo's nominal figure, which no clock correction may use."""
    return device.get("kind") != "cpu" or specs.cpu_reads_its_clock(device)


COMPUTE_UNITS = ("GFLOP/s", "GOP/s")  # a validation row in these is a compute roof's


def below_reference(row: dict) -> dict | None:
    """Return the finding {"code", "share", "text"} for a validation row of a compute roof under
    specs.BELOW_REFERENCE of its reference (specs.path_below_reference): the path that set it
    (the library's kernel, the shapes swept, the warm-up) falls short of the units; no clock
    is implied from it. None otherwise."""
    pct = row.get("% of reference")
    found = (specs.path_below_reference(row["measured"], row.get("reference"))
             if row.get("unit") in COMPUTE_UNITS and _known(pct) else None)
    if found is None:
        return None
    return {**found, "text": f"{row['ceiling']} measures {row['measured']:,.0f} {row['unit']}, {pct:.0f}% of the "
                             f"{row['reference source']} roof: the path that set it ({row.get('measured by') or '?'}) "
                             "falls short of its units (the library's kernel, the shapes swept, the warm-up), "
                             "which no clock explains."}
