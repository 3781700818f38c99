"""The gate's tolerances: the largest relative error against the float64 reference that a
correct kernel's output may have, one figure per precision (its row in bench/precisions.py), and a
family's factor where its outputs round more often than a single product does.

A figure is a few times what correct kernels were seen to reach, and far under what a wrong
or unwritten output gives (an error of order 1, or NaN from the gate's poison).
"""
from __future__ import annotations

from bench import precisions
from bench.util import precision_name

# per precision: relative norm error of one rounded product with fp32 (or exact) accumulation;
# each figure is its precision's row in bench/precisions.py
TOLERANCE = {p.name: p.tolerance for p in precisions.ROWS if p.tolerance is not None}


def tolerance(precision: str, factor: float = 1.0) -> float:
    """Return TOLERANCE[precision] x factor, precision in either spelling ("bf16" or
    "bfloat16"); factor is a family's (a chain of roundings, a long sum). Raises KeyError
    naming the precisions known for one that has no figure."""
    name = precision_name(precision)
    if name not in TOLERANCE:
        raise KeyError(f"no tolerance is known for precision '{precision}': use one of {', '.join(TOLERANCE)}")
    return TOLERANCE[name] * factor
