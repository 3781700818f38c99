"""Which arithmetic units a CPU has, from its flags (/proc/cpuinfo), and the narrow precisions it
lacks one for: what measuring needs (bench/ops/gemm.py's quick search leaves those precisions out)
and what deriving needs (roofs/analysis/specs.py's computed peaks, the compute roofs' bounds).

A leaf module of bench/hw: it imports only bench/precisions.py, so bench/ops reads it without
importing roofs (ARCHITECTURE.md: nothing under bench/measure or bench/ops imports roofs).
"""
from __future__ import annotations

from bench import precisions

# each from the precisions' rows (bench/precisions.py):
# the flags of each narrow unit, and its rate against fp32's: a dot of bf16 pairs or an fp16
# FMA per 16-bit lane (2x), a dot of four int8 products per 32-bit lane (4x); Arm's BFDOT,
# FP16 arithmetic and SDOT alike
NARROW_UNITS = tuple((p.name, p.cpu_flags, p.cpu_rate, p.cpu_unit) for p in precisions.ROWS if p.cpu_flags)
# the flag of each AMX tile unit (TMUL), by the precision it multiplies
AMX_FLAGS = {p.name: p.amx_flag for p in precisions.ROWS if p.amx_flag}
# the narrow precisions a CPU may lack a unit for: without one its GEMMs run through conversion
NARROW_PRECISIONS = precisions.names(cpu_may_lack=True)


def cpu_unit_precisions(flags) -> set:
    """Return the precisions a CPU has an arithmetic unit for: fp32 and fp64 (every FMA
    datapath), and each narrow one whose unit its flags name (NARROW_UNITS, AMX_FLAGS)."""
    flags = set(flags or ())
    out = {"fp32", "fp64"}
    out |= {precision for precision, names, _, _ in NARROW_UNITS if flags & set(names)}
    out |= {precision for precision, flag in AMX_FLAGS.items() if flag in flags}
    return out


def cpu_missing_units(device: dict) -> set:
    """Return the narrow precisions (fp16, bf16, fp8) a CPU has no arithmetic unit for, from
    its flags (cpu_unit_precisions): their GEMMs run through conversion, so their bound is the
    exact wider path (ARCHITECTURE.md, rule 10). Empty for GPUs and for CPUs whose flags are unknown."""
    if (device or {}).get("kind") != "cpu" or not device.get("cpu_flags"):
        return set()
    return set(NARROW_PRECISIONS) - cpu_unit_precisions(device["cpu_flags"])
