"""Compute roofs from GEMM and FMA-chain rows (ARCHITECTURE.md, rule 10).

One roof per precision, its own units' best: its own GEMMs and its own FMA chains (fma.chains,
the vector unit), named with the row that set it and extra["unit"] ("gemm" or "vector"). A
wider precision its inputs convert to exactly (EXACT_IN) that runs faster is a labelled extra
line, "fp32 via fp64" (extra "via", "line_of", "own_gflops"), never the precision's roof; only
a precision that points carry but that no GEMM or FMA chain of its own measured (no unit for
it) takes the wider path as its roof, with extra "via". A precision whose roof is not its
vector unit's also gets "<precision>.vector" from its FMA chains ("<precision>.elementwise"
for torch's chains, whose every step is an elementwise pass through the caches: not a unit's
roof). Those elementwise chains set only their "<precision>.elementwise" line, in any run (full,
quick, --only fma, interrupted): they never set or stand in for a precision's roof, and a
precision whose only rows of its own are such chains has no compute roof (compute_notes says
so once; its points have no compute bound).
"""
from __future__ import annotations

import pandas as pd

from bench.util import number
from roofs.analysis.roofline import INTEGER_PRECISIONS, Roof
from roofs.analysis.trust import row_spread, trusted, untrusted_text

COMPUTE_FAMILIES = ("gemm", "fma")  # GEMMs, and the FMA chains that measure each vector unit

# Precisions whose inputs convert exactly to wider ones: the wider GEMM does the same math.
EXACT_IN = {
    "fp32": ("fp64",),
    "tf32": ("fp32", "fp64"),
    "fp16": ("fp32", "fp64"),
    "bf16": ("fp32", "fp64"),
    "fp8e4m3": ("fp16", "bf16", "fp32", "fp64"),
    "fp8e5m2": ("fp16", "bf16", "fp32", "fp64"),
}


def _best_per_precision(rows: pd.DataFrame) -> dict:
    """Return precision -> the row with the best median GFLOP/s among rows (by the dtype column)."""
    if rows.empty:
        return {}
    return {str(p): g.loc[g["gflops"].idxmax()] for p, g in rows.groupby("dtype", sort=False)}


def _compute_roof(name: str, src, note: str, extra: dict) -> Roof:
    """Return the measured compute roof called name, set by the row src (its GFLOP/s and spread)."""
    spread = row_spread(pd.DataFrame([src])).iloc[0]
    return Roof(kind="compute", name=name, value=float(src["gflops"]),
                unit="GOP/s" if name.split(" ")[0].split(".")[0] in INTEGER_PRECISIONS else "GFLOP/s",
                source="measured", op=str(src["op"]), impl=str(src["impl"]), dtype=str(src["dtype"]),
                point_id=str(src["point_id"]), shape=str(src["shape"]), working_set_bytes=int(src["working_set_bytes"]),
                spread=number(spread), note=note, extra=extra)


def unit_of(row) -> str:
    """Return what a compute row measures: "gemm"; "vector", the FMA pipes, for the FMA chains
    a Triton kernel keeps in registers; "elementwise" for torch's FMA chains (a CPU's), each
    step of which is an elementwise pass of the chains through the caches: a ceiling of
    such passes, not of the FMA units (a CPU run's chains read 34 GFLOP/s beside 332 computed)."""
    if row.get("family") != "fma":
        return "gemm"
    return "vector" if str(row.get("impl", "")).endswith("/triton") else "elementwise"


def units_of(rows: pd.DataFrame) -> pd.Series:
    """Return _unit of each row."""
    if rows.empty:
        return pd.Series([], index=rows.index, dtype=object)
    return pd.Series([unit_of(r) for _, r in rows.iterrows()], index=rows.index, dtype=object)


def line_name(precision: str, unit: str) -> str:
    """Return the name of a precision's FMA-chain line beside its roof: "<p>.vector", or
    "<p>.elementwise" for torch's chains."""
    return f"{precision}.{unit}"


def _steady_rows(rows: pd.DataFrame, families) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Return (the rows of the compute families, those of them that may set a roof with a GFLOP/s)."""
    fam = rows[rows["family"].isin(families)] if "family" in rows else rows
    ok = fam[trusted(fam)] if not fam.empty else fam
    ok = ok[ok["gflops"].notna()].reset_index(drop=True) if not ok.empty else ok
    return fam, ok


def _own_roof(precision: str, best, ok: pd.DataFrame) -> Roof:
    """Return the precision's own roof: its best row among ok."""
    shapes = ok[ok["dtype"] == precision]
    return _compute_roof(precision, best, f"best median over {shapes['impl'].nunique()} impl(s) and "
                         f"{shapes['shape'].nunique()} shape(s)", {"unit": unit_of(best)})


def _faster_wider_line(precision: str, best, own: dict) -> Roof | None:
    """Return the extra line "<p> via <wider>" of the fastest exact wider precision that beats
    the precision's own best (its own best kept as extra "own_gflops"), or None."""
    faster = [w for w in EXACT_IN.get(precision, ()) if w in own and own[w]["gflops"] > best["gflops"]]
    if not faster:
        return None
    wider = max(faster, key=lambda w: own[w]["gflops"])
    src = own[wider]
    mine, theirs = float(best["gflops"]), float(src["gflops"])
    note = (f"{precision} inputs convert exactly to {wider}, whose {unit_of(src)} ({theirs:,.4g}) beats "
            f"{precision}'s own best ({mine:,.4g}, {mine / theirs:.2f}x): an extra line, not {precision}'s roof")
    extra = {"via": wider, "line_of": precision, "own_gflops": mine, "own_point_id": str(best["point_id"])}
    return _compute_roof(f"{precision} via {wider}", src, note, extra)


def _vector_line(precision: str, best, vector: dict) -> Roof | None:
    """Return the precision's vector-unit line "<p>.vector" (its Triton FMA chains) where a GEMM,
    not its chains, set its roof; else None."""
    if precision not in vector or unit_of(best) != "gemm":
        return None
    return _compute_roof(line_name(precision, "vector"), vector[precision], f"{precision} FMA chains: the vector unit",
                         {"unit": "vector", "line_of": precision})


def _elementwise_line(precision: str, best) -> Roof:
    """Return the line "<p>.elementwise" of torch's FMA chains: every step an elementwise pass
    through the caches, a ceiling of such passes and never a unit's roof (rule 10), whether or
    not the precision has a roof."""
    return _compute_roof(line_name(precision, "elementwise"), best,
                         f"{precision} FMA chains: torch's elementwise passes through the caches (a ceiling of such "
                         "passes, not the FMA units')", {"unit": "elementwise", "line_of": precision})


def _without_own_roof(rows: pd.DataFrame, fam: pd.DataFrame, own: dict, own_all: dict, no_unit) -> tuple[list, dict]:
    """Return (the precisions with no steady row of their own that need a bound, sorted; the
    best ok row of each whose own rows ran but were too unsteady): those the points that ran
    carry (a skipped row, tf32 on a CPU, needs no bound), those whose rows were unsteady, and
    those the device has no unit for; never one whose only rows of its own are elementwise
    FMA chains (chain_only: it has no compute roof)."""
    ran = fam[(fam["status"] == "ok") & fam["gflops"].notna()] if not fam.empty else fam
    ran = ran[units_of(ran) != "elementwise"] if not ran.empty else ran
    unsteady = {p: best for p, best in _best_per_precision(ran).items() if p not in own}
    placed = rows[rows["status"] == "ok"] if "status" in rows else rows
    carried = set(placed["precision"].dropna().astype(str)) - {""} if "precision" in placed else set()
    need = (carried | set(unsteady) | (set(own_all) & set(no_unit))) - set(own) - chain_only(fam)
    return sorted(need), unsteady


def chain_only(fam: pd.DataFrame) -> set:
    """Return the precisions whose only ok rows among fam (the compute families' rows) are
    torch's elementwise FMA chains: no GEMM (or vector-unit chain) of theirs ran."""
    ok = fam[fam["status"] == "ok"] if not fam.empty else fam
    if ok.empty:
        return set()
    units = units_of(ok)
    dtypes = ok["dtype"].astype(str)
    return set(dtypes[units == "elementwise"]) - set(dtypes[units != "elementwise"])


def _why_wider(precision: str, mine, no_unit) -> str:
    """Return why a precision is bounded by its exact wider path."""
    if mine is None:
        return "no GEMM or FMA chain of its own measured here"
    if precision in no_unit:
        return (f"the device has no {precision} unit (its own best, {float(mine['gflops']):,.4g}, runs through "
                "conversion)")
    return f"its own best ({float(mine['gflops']):,.4g}) is from rows too unsteady to set a roof"


def _wider_path_roof(precision: str, own: dict, own_all: dict, unsteady: dict, no_unit) -> Roof | None:
    """Return the roof of a precision with no steady row of its own: the fastest exact wider
    path, labelled via (its own best kept as extra "own_gflops", with "no_unit" or
    "own_steady" false); with no wider path measured, its own rows where it has no unit; else None."""
    wider = max((w for w in EXACT_IN.get(precision, ()) if w in own), key=lambda w: own[w]["gflops"], default=None)
    if wider is None:
        if precision not in own_all:
            return None
        best = own_all[precision]  # no unit, but no wider path measured either: its own rows stand
        return _compute_roof(precision, best, "best of its own rows (no unit and no wider path)",
                             {"unit": unit_of(best)})
    mine = own_all.get(precision) if precision in no_unit else unsteady.get(precision)
    extra = {"via": wider}
    if mine is not None:
        extra.update({"own_gflops": float(mine["gflops"]), "own_point_id": str(mine["point_id"])})
        extra.update({"no_unit": True} if precision in no_unit else {"own_steady": False})
    return _compute_roof(precision, own[wider],
                         f"{precision}: {_why_wider(precision, mine, no_unit)}; its inputs convert exactly to {wider}",
                         extra)


def compute_roofs(rows: pd.DataFrame, families=COMPUTE_FAMILIES, no_unit=frozenset()) -> list[Roof]:
    """Return the compute roofs (see the module docstring), fastest first: per precision its own
    units' best median GFLOP/s among trustworthy GEMM and FMA-chain rows (the dtype column); a
    faster exact wider path as the extra line "<p> via <wider>"; the wider path as the roof
    only for a precision that rows carry (the precision column) but none of its own measured;
    "<p>.vector" where the vector unit is not the precision's roof. A precision in no_unit
    (the device has no unit for it: fp16 on a CPU without AVX512-FP16) is bounded by the
    exact wider path, labelled via, its own best kept beside it."""
    fam, ok = _steady_rows(rows, families)
    units = units_of(ok)
    own_all = _best_per_precision(ok[units != "elementwise"] if not ok.empty else ok)
    own = {p: best for p, best in own_all.items() if p not in no_unit}
    vector = _best_per_precision(ok[units == "vector"] if not ok.empty else ok)
    roofs = [_elementwise_line(p, best) for p, best in _best_per_precision(ok[units == "elementwise"]
                                                                             if not ok.empty else ok).items()]
    for precision, best in own.items():
        roofs.append(_own_roof(precision, best, ok))
        roofs += [r for r in (_faster_wider_line(precision, best, own), _vector_line(precision, best, vector)) if r]
    need, unsteady = _without_own_roof(rows, fam, own, own_all, no_unit)
    roofs += [r for r in (_wider_path_roof(p, own, own_all, unsteady, no_unit) for p in need) if r]
    return sorted(roofs, key=lambda r: -r.value)


def compute_notes(rows: pd.DataFrame, roofs, families=COMPUTE_FAMILIES) -> list[str]:
    """Return one line per precision that ran but has no compute roof: its GEMMs ran but none
    was trustworthy, or only its elementwise FMA chains ran (chain_only): its points then have
    no compute bound, said here once."""
    fam = rows[rows["family"].isin(families) & (rows["status"] == "ok")] if "family" in rows else rows.iloc[0:0]
    have = {r.name for r in roofs if r.kind == "compute"}
    chains = chain_only(fam)
    notes = []
    for p, g in fam.groupby("dtype", sort=False):
        if p in have:
            continue
        if p in chains:
            line = line_name(p, "elementwise")
            if line in have:
                what = f"set only the {line} line"
            else:
                what = f"set no roof, not even the {line} line (none steady)"
            notes.append(f"{p}: no compute roof: no GEMM of it ran, and its FMA chains (torch's elementwise passes) "
                         f"{what}, never a unit's roof: its points have no compute bound")
        else:
            units = g[units_of(g) != "elementwise"]
            notes.append(f"{p}: no compute roof: of its {len(units)} GEMM rows, {untrusted_text(units)}")
    return notes
