"""A precision's figures as the report's tables and findings give them: its own rows' figure,
never a wider path's line it borrows as its roof ("fp8e4m3 via bf16": no unit of its own), with
the reason code its own rows run below that line (extra.own_reason); and the findings comparing
fp8 and int8 with bf16. Reads roofs only (roofs/analysis/roofline.py) and the precisions' rows."""
from __future__ import annotations

from bench import precisions
from roofs.analysis.roofline import Roof, Roofline


def own_columns(m: Roof) -> dict:
    """Return, for a precision whose roof is a wider path's line (shown_name: "fp8e4m3 via bf16"),
    its own rows' best and why they run below it (extra.own_reason, a code: converts_each_call);
    both empty for every other roof."""
    extra = m.extra or {}
    mine = extra.get("via") and not extra.get("line_of")
    return {"own best": extra.get("own_gflops") if mine else None,
            "own rows below it": extra.get("own_reason", "") if mine else ""}


# CPU flags of the units behind a precision's speed (bench/hw/device.py keeps these flags): its
# vector unit's and its AMX tile unit's, from its row of bench/precisions.py
CPU_UNITS = {p.name: p.cpu_flags + ((p.amx_flag,) if p.amx_flag else ()) for p in precisions.ROWS if p.cpu_flags}


def own_rate(model: Roofline, precision: str) -> float | None:
    """Return a precision's own rows' figure: its roof's value, or, where its roof is a wider
    path's line (extra.via: no unit of its own), its own best (extra.own_gflops; None where none ran)."""
    roof = model.compute(precision)
    if roof is None:
        return None
    extra = roof.extra or {}
    return extra.get("own_gflops") if extra.get("via") and not extra.get("line_of") else roof.value


def precision_ratios(model: Roofline, device: dict) -> list[str]:
    """Return the findings comparing fp8 and int8 with bf16. On a GPU they speak of its
    units; on a CPU, which has no fp8 units and may lack bf16 or int8 ones (its SIMD flags
    say), of the software paths torch took, so that a ratio is never read as hardware. Each
    precision's figure is its own rows' (own_rate): a roof that is a wider path's line compares nothing."""
    bf16, fp8, int8 = (own_rate(model, p) for p in ("bf16", "fp8e4m3", "int8"))
    out = []
    if device.get("kind") != "cpu":
        if bf16 and fp8:
            ratio = fp8 / bf16
            out.append(f"fp8 runs at {ratio:.2f}x bf16" + (", so this part lacks fast fp8." if ratio < 1.3 else "."))
        if bf16 and int8:
            out.append(f"int8 runs at {int8 / bf16:.2f}x bf16.")
        return out
    flags = set(device.get("cpu_flags") or ())

    def units(precision):
        have = [f for f in CPU_UNITS[precision] if f in flags]
        return (f"{precision} units ({', '.join(have)})" if have
                else f"no {precision} units (no {' or '.join(CPU_UNITS[precision])} flag)")
    if bf16 and fp8:
        out.append(f"fp8 GEMMs run at {fp8 / bf16:.2f}x the bf16 GEMMs in this torch build. A CPU has no "
                   f"fp8 units, and this one has {units('bf16')}: this compares torch's CPU code paths, not hardware.")
    if bf16 and int8:
        out.append(f"int8 GEMMs run at {int8 / bf16:.2f}x the bf16 GEMMs; this CPU has {units('int8')} "
                   f"and {units('bf16')}.")
    return out
