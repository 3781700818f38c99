"""Roof records and the roofline model built from them.

Units: bandwidth roofs in GB/s (1e9 bytes/s), compute roofs in GFLOP/s (1e9 FLOP/s);
intensity in FLOP/byte, so bandwidth x intensity is directly GFLOP/s.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields, replace

from bench import precisions
from bench.util import Reason, fmt_num, missing

MEMORY_LEVELS = ("hbm", "dram")
CACHE_LEVELS = ("l1", "l2", "l3")
UNITS = {"bandwidth": "GB/s", "compute": "GFLOP/s"}
INTEGER_PRECISIONS = precisions.names(integer=True)  # their compute roofs count operations: GOP/s
DIRECTIONS = ("read", "write", "copy")  # a level's direction roofs are named "<level>.<direction>"


# for run folders written before the read_bytes and write_bytes columns: the stream kernels'
# (read, written) n-element arrays by op, as those runs' kernels had them
OLD_RUN_STREAM_ARRAYS = {"stream.copy": (1, 1), "stream.scale": (1, 1), "stream.add": (2, 1), "stream.triad": (2, 1),
                         "stream.read": (1, 0), "stream.reread": (1, 0), "stream.write": (0, 1)}
# the least share of its bytes a copy roof's rows wrote in those runs (add and triad: 1/3), for a
# copy roof derived before roofs recorded their own (extra.write_share)
OLD_RUN_WRITE_SHARE = min(w / (r + w) for r, w in OLD_RUN_STREAM_ARRAYS.values() if r and w)


def write_share(read_bytes, write_bytes) -> float | None:
    """Return the share of a row's bytes it writes, write_bytes / (read_bytes + write_bytes), or
    None when either is unknown (None or NaN) or both are zero."""
    try:
        r, w = float(read_bytes), float(write_bytes)
    except (TypeError, ValueError):
        return None
    return w / (r + w) if r == r and w == w and r + w > 0 else None


def copy_share(roof) -> float:
    """Return the least share of its bytes that a row of a copy roof's mix wrote on its level's
    sizes (extra.write_share): the points that write at least as much may take the roof as
    their bound. OLD_RUN_WRITE_SHARE for a copy roof derived before roofs recorded it."""
    share = (roof.extra or {}).get("write_share")
    return OLD_RUN_WRITE_SHARE if share is None else float(share)


def direction_of(read_bytes, write_bytes) -> str:
    """Return a point's direction class: "read" (nothing written), "write" (nothing read),
    "copy" (both, as copy, scale, add and triad do), or "" when either count is unknown
    (None or NaN) or both are zero. A level's direction roofs are named by these classes."""
    try:
        r, w = float(read_bytes), float(write_bytes)
    except (TypeError, ValueError):
        return ""
    if r != r or w != w or (r <= 0 and w <= 0):
        return ""
    if w <= 0:
        return "read"
    if r <= 0:
        return "write"
    return "copy"


@dataclass(frozen=True)
class Roof:
    kind: str                      # "bandwidth" or "compute"
    name: str                      # "hbm", "dram", "l2", "l3"; "fp32", "bf16", ...
    value: float                   # in unit
    unit: str                      # "GB/s" or "GFLOP/s"
    source: str = "measured"       # "measured", "datasheet" or "computed"
    op: str = ""                   # the measurement it came from
    impl: str = ""
    dtype: str = ""
    point_id: str = ""
    shape: str = ""
    working_set_bytes: int | None = None
    plateau_bytes: tuple | None = None   # (smallest, largest) working set of its plateau
    plateau_points: int = 0
    plateau_values: tuple | None = None  # (lowest, highest) value over the plateau
    spread: float | None = None          # (p80 - p20) / median of the row that set it
    note: str = ""
    extra: dict = field(default_factory=dict)
    # (low, high) in unit around value (ARCHITECTURE.md, rule 17): None for a roof not measured,
    # or one derived before intervals existed
    interval: tuple | None = None
    # the second measurement behind it (rule 17): {"status": "confirmed" | "disputed" |
    # "unconfirmed", "checks": [...], ...}; None where not judged
    confirmation: dict | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    def at(self, end: str) -> Roof:
        """Return this roof with its value at one end of its interval ("low" or "high"); the
        roof itself when it has no interval."""
        if self.interval is None:
            return self
        return replace(self, value=float(self.interval[0 if end == "low" else 1]))

    @classmethod
    def from_dict(cls, d: dict) -> Roof:
        names = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in names}
        for k in ("plateau_bytes", "plateau_values", "interval"):
            if kw.get(k) is not None:
                kw[k] = tuple(kw[k])
        return cls(**kw)


class Roofline:
    """attainable(I) = min(P_roof, BW_roof x I), from a set of roofs."""

    def __init__(self, roofs):
        self.roofs = [r if isinstance(r, Roof) else Roof.from_dict(r) for r in roofs]

    def at(self, end: str) -> Roofline:
        """Return the roofline of every roof at one end of its interval ("low" or "high",
        Roof.at): the bounds a point's % of attainable ranges over (rule 17)."""
        return Roofline([r.at(end) for r in self.roofs])

    def bandwidth(self, level: str | None = None, source: str = "measured") -> Roof | None:
        """Return the bandwidth roof of level (default: the off-chip memory, hbm or dram)."""
        names = (level,) if level else MEMORY_LEVELS
        hits = [r for r in self.roofs if r.kind == "bandwidth" and r.name in names and r.source == source]
        return max(hits, key=lambda r: r.value, default=None)

    def direction(self, level: str, direction: str) -> Roof | None:
        """Return the measured direction roof "<level>.<direction>" (read, write, copy), or None."""
        return self.bandwidth(f"{level}.{direction}")

    def point_bandwidth(self, level: str, read_bytes=None, write_bytes=None) -> tuple | None:
        """Return (GB/s, label, note) of the bandwidth that bounds a point at level from its
        read and write bytes (ARCHITECTURE.md, rule 12), or None when the level has no roof:

            read only         the level's read roof
            write only        the level's write roof
            both              (R + W) / (R / BW_read + W / BW_write), the time the reads and
                              the writes take one after the other, when both roofs exist; or
                              the level's copy roof (the best measured mix) when that is
                              higher and the point writes at least the least share of its
                              bytes that a row of that roof's mix wrote (copy_share: 1/3 over
                              copy's 1/2 and triad's 1/3), or when it is the only one
            otherwise         the level's best roof, with a note saying why (a Reason: its code
                              no_direction_roof, or direction_unknown without read and write bytes)

        label names the roof used ("hbm.read", "hbm.read+write", "hbm")."""
        best = self.bandwidth(level)
        if best is None:
            return None
        kind = direction_of(read_bytes, write_bytes)
        if kind in ("read", "write"):
            own = self.direction(level, kind)
            if own is not None:
                return own.value, own.name, ""
            return best.value, best.name, Reason(f"no {level}.{kind} roof: bounded by the level's best",
                                                 "no_direction_roof")
        if kind == "copy":
            r, w = float(read_bytes), float(write_bytes)
            rd, wr, cp = (self.direction(level, d) for d in DIRECTIONS)
            options = []
            if rd is not None and wr is not None:
                options.append(((r + w) / (r / rd.value + w / wr.value), f"{level}.read+write"))
            if cp is not None and (w / (r + w) >= copy_share(cp) - 1e-9 or not options):
                options.append((cp.value, cp.name))
            if options:
                value, label = max(options)
                return value, label, ""
            return best.value, best.name, Reason(f"no {level}.copy roof, nor both {level}.read and {level}.write: "
                                                 "bounded by the level's best", "no_direction_roof")
        return best.value, best.name, Reason("read and write bytes unknown: bounded by the level's best",
                                             "direction_unknown")

    def compute(self, precision: str | None = None, source: str = "measured") -> Roof | None:
        """Return the compute roof of precision, or, when precision is None, the highest compute roof
        that is a precision's own (not an extra line: extra "line_of", rule 10)."""
        hits = [r for r in self.roofs if r.kind == "compute" and r.source == source
                and (r.name == precision if precision is not None else not (r.extra or {}).get("line_of"))]
        return max(hits, key=lambda r: r.value, default=None)

    def attainable_gflops(self, intensity: float, precision: str | None = None,
                          level: str | None = None) -> float:
        """Return min(P, BW x I) in GFLOP/s; a missing roof imposes no limit (inf)."""
        bw, peak = self.bandwidth(level), self.compute(precision)
        bound = bw.value * intensity if bw else math.inf
        return min(bound, peak.value) if peak else bound

    def bound_gflops(self, intensity: float, precision: str | None = None, level: str | None = None) -> float | None:
        """Return a point's attainable bound (ARCHITECTURE.md, rule 12): min(P_precision,
        BW_level x I) when its precision has a compute roof, BW_level x I when it has none,
        and None when the level (default: the off-chip memory) has no roof. Which level a
        point's bytes cross is roofs.analysis.bounds.boundary_level's rule."""
        bw = self.bandwidth(level)
        if bw is None:
            return None
        peak = self.compute(precision) if precision else None
        return min(bw.value * intensity, peak.value) if peak else bw.value * intensity

    def ridge(self, precision: str | None = None, level: str | None = None) -> float | None:
        """Return the ridge intensity P / BW in FLOP/byte, or None without both roofs."""
        bw, peak = self.bandwidth(level), self.compute(precision)
        return peak.value / bw.value if bw and peak else None


def band_text(value, interval, unit: str = "") -> str:
    """Return a figure with its interval as people write it: "372 GFLOP/s, 355-390"; the
    figure alone without an interval (ARCHITECTURE.md, rule 17)."""
    head = f"{fmt_num(value)} {unit}".strip()
    if interval is None or any(missing(v) for v in interval):
        return head
    return f"{head}, {fmt_num(interval[0])}-{fmt_num(interval[1])}"


def is_pass_ceiling(roof) -> bool:
    """Return whether a roof is a ceiling of torch's elementwise passes ("<p>.elementwise":
    a CPU's FMA chains), which bounds such passes and is no unit's roof: the tables of the
    units' roofs leave it out and list it apart."""
    return (roof.extra or {}).get("unit") == "elementwise" and bool((roof.extra or {}).get("line_of"))


def shown_name(roof) -> str:
    """Return a roof's name as tables and charts write it: a precision bounded by a wider path
    it converts to (extra.via: no unit of its own, or no row of its own) is that path's line,
    "fp8e4m3 via bf16", never that precision's own roof; every other roof its name."""
    extra = roof.extra or {}
    via = extra.get("via")
    return f"{roof.name} via {via}" if via and " via " not in roof.name else roof.name
