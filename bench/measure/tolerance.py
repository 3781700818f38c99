"""The gate's tolerances: the largest relative error against the float64 reference that a
correct kernel's output may have, one figure per precision (its canonical short name), and a
family's factor where its outputs round more often than a single product does.

A figure is a few times what correct kernels were seen to reach, and far under what a wrong
or unwritten output gives (an error of order 1, or NaN from the gate's poison).
"""
from __future__ import annotations

from bench.util import precision_name

# per precision: relative norm error of one rounded product with fp32 (or exact) accumulation
TOLERANCE = {
    "fp64": 1e-12,
    "fp32": 1e-5,      # TF32 off
    "tf32": 5e-3,      # a 10-bit mantissa's products
    "fp16": 5e-3,
    "bf16": 1.5e-2,
    "fp8e4m3": 1.5e-2,  # fp8 inputs, bf16 output: the output's rounding dominates
    "fp8e5m2": 1.5e-2,
    "int8": 1e-12,     # int32 accumulation is exact; the float64 comparison is not quite
    "int32": 0.0,      # integer results are compared exactly
}


def tolerance(precision: str, factor: float = 1.0) -> float:
    """Return TOLERANCE[precision] x factor, precision in either spelling ("bf16" or
    "bfloat16"); factor is a family's (a chain of roundings, a long sum). Raises KeyError
    naming the precisions known for one that has no figure."""
    name = precision_name(precision)
    if name not in TOLERANCE:
        raise KeyError(f"no tolerance is known for precision '{precision}': use one of {', '.join(TOLERANCE)}")
    return TOLERANCE[name] * factor
