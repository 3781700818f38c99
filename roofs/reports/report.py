"""The run report: report.md and report.html (its pictures linked, the PNGs beside it in the
run folder, so the page stays small), built from a run folder's files alone (measurements.csv,
run.json, roofs.json and the pictures).

Sections: the device and software; the validation table (each measured roof, with its
interval where it has one (ARCHITECTURE.md, rule 17), beside the datasheet or computed roof,
that roof corrected to the clock observed during the run, and measured as a percentage of
each); the confirmation of each roof by a second measurement (roofs/reports/bands.py); the top
findings (each disputed roof among them); every picture that has something to show; the best
points per op, impl and dtype (each % of attainable with its range where the run has one); each
Triton kernel's binding level; every point above its roof, grouped by op; with --counters, the
replayed points' counted and measured DRAM bytes and the points whose two differ by more than
10%; why some levels have no roof. An interconnect run's report speaks of its links only; a
model run's names the roofs it was given. summary() is the same run as terminal text.
"""
from __future__ import annotations

import html
from pathlib import Path

import pandas as pd

from bench.hw.counters import FLAG_FRACTION
from bench.policy import DEFAULT
from bench.results import load_counters, load_run, text_column
from bench.util import fmt_bytes, fmt_num, missing, plural
from roofs.analysis import specs
from roofs.analysis.checks import is_above, run_warnings, split_notes
from roofs.analysis.energy import fit_energy, fit_groups
from roofs.analysis.hierarchy import triton_binding_table
from roofs.analysis.model import device_levels
from roofs.analysis.roofline import MEMORY_LEVELS, Roof, Roofline, band_text, is_pass_ceiling, shown_name
from roofs.charts.registry import BY_FILE, charts_for
from roofs.reports.bands import confirmation_findings, confirmation_section, shown_validation, with_ranges
from roofs.reports.clocks import below_reference, clock_is_observed, clock_line
from roofs.reports.precisions import own_columns, precision_ratios


def observed_clock(df: pd.DataFrame, point_id: str) -> float | None:
    """Return the mean clock (MHz) recorded while the given point was timed, or None."""
    if "clock_mhz" not in df:
        return None
    hit = df.loc[df["point_id"] == point_id, "clock_mhz"].dropna()
    return float(hit.iloc[0]) if not hit.empty else None


def sustained_columns(m: Roof, ref: Roof | None) -> dict:
    """Return a roof's sustained figure for the validation table (ARCHITECTURE.md, rule 14):
    the window's median, clock and power, its share of the reference, and the row it came
    from, or why the roof has none."""
    extra = m.extra or {}
    sus = extra.get("sustained")
    if not sus:
        return {"sustained": None, "sustained clock MHz": None, "sustained W": None, "% sustained of reference": None,
                "sustained by": extra.get("sustained_why", "")}
    note = "" if sus.get("steady", True) else f" (unsteady: spread {sus.get('spread') or 0:.0%})"
    if extra.get("settled_by") == "sustained":
        note += " (set the roof: the sweep's rows were not steady)"
    return {"sustained": sus["value"], "sustained clock MHz": sus.get("clock_mhz"), "sustained W": sus.get("power_w"),
            "% sustained of reference": 100 * sus["value"] / ref.value if ref else None,
            "sustained by": sus.get("point_id", "") + note}


def validation(run) -> tuple[pd.DataFrame, str]:
    """Return (one row per measured roof with its reference roofs and percentages, where the
    reference roofs came from). "reference source" names the clock a computed peak uses
    (specs.reference_label); "clock MHz" is the clock observed while the roof's point ran
    (clock_is_observed; empty for a CPU's nominal figure). "clock implied MHz" is the clock at
    which the reference's rate per clock gives a measured roof above it (specs.implied_clock_mhz).
    "measured" is the roof's value: the sweeps' burst figure (or, for a roof the sustained phase
    settled, its sustained one); the sustained columns give the window's figure beside it
    (sustained_columns); "interval" its (low, high) or None (rule 17; shown_validation writes it
    beside "measured")."""
    refs, origin = specs.reference_roofs(run.device)
    # the off-chip reference stands for every off-chip roof; a computed cache roof (a CPU's l1
    # load ports) for its own level only, never for DRAM
    by_name = {(r.kind, "memory" if r.kind == "bandwidth" and r.name in MEMORY_LEVELS else r.name): r for r in refs}
    rows = []
    for m in Roofline(run.roofs).roofs:
        if m.source != "measured" or is_pass_ceiling(m):  # not a unit's roof: no reference beside it
            continue
        level = "memory" if m.name.split(".")[0] in MEMORY_LEVELS else m.name
        key = (m.kind, m.name if m.kind == "compute" else level)
        ref = by_name.get(key)
        clock = observed_clock(run.measurements, m.point_id) if clock_is_observed(run.device) else None
        fixed = specs.clock_corrected(ref, clock) if ref is not None else None
        rows.append({
            "ceiling": shown_name(m), "unit": m.unit, "measured": m.value, "interval": m.interval,
            "reference": ref.value if ref else None, "reference source": specs.reference_label(ref) if ref else "",
            "at observed clock": fixed.value if fixed else None,
            "clock MHz": clock,
            "clock implied MHz": specs.implied_clock_mhz(m.value, ref) if ref is not None else None,
            "% of reference": 100 * m.value / ref.value if ref else None,
            "% of clock-corrected": 100 * m.value / fixed.value if fixed else None,
            "measured by": f"{m.impl} {m.dtype} {m.shape or ''}".strip(),
            **own_columns(m),
            **sustained_columns(m, ref),
        })
    return pd.DataFrame(rows), origin


def energy_fits(run) -> tuple[pd.DataFrame, list[str]]:
    """Return (the energy fit per precision and per level over the sustained windows, one
    line per failed physical check): roofs/analysis/energy.py's fit_groups, each group checked at its
    roof's sustained rate (the burst where it has none), against the power limit and the
    idle power read before the windows."""
    model = Roofline(run.roofs)
    rates = {}
    for r in model.roofs:
        if r.source == "measured" and r.kind in ("compute", "bandwidth"):
            sus = (r.extra or {}).get("sustained") or {}
            rates[r.name] = (sus.get("value") or r.value) * 1e9
    sustain = run.meta.get("sustain") or {}
    limit = sustain.get("power_limit_w") or (run.device.get("extra") or {}).get("power_limit_w")
    fits = fit_groups(run.measurements, rates, limit, sustain.get("idle_w"))
    rows = [{"group": f["group"], "per": f["per"], "e pJ": f.get("e_pj"), "static W": f.get("static_w"),
             "R^2": f.get("r2"), "all-in pJ": f["all_in_pj"], "windows": f["points"],
             "checks": "; ".join(x["text"] for x in f["failed"])
             or ("passed" if "e_pj" in f else f.get("why", ""))} for f in fits]
    lines = [f"{f['group']} energy fit fails a physical check: {x['text']}." for f in fits for x in f["failed"]]
    return pd.DataFrame(rows), lines


GEMM_MATCH = ["op", "dtype", "m", "n", "k", "mode"]   # a Triton GEMM row meets the vendor's at these


def triton_vs_library(df: pd.DataFrame, memory_bytes_from: float | None) -> list[str]:
    """Return one line per comparison of a Triton kernel with the library path beside it:
    for every GEMM impl whose backend is triton (triton, triton_tma, later ones) and every
    precision, its best GFLOP/s among the points the vendor path (impl torch) also ran at
    the same op, shape and mode, over the vendor's GFLOP/s at that point; and stream copy's
    best GB/s at off-chip working sets (memory_bytes_from and up). Ratios, not verdicts."""
    ok = df[df["status"] == "ok"]
    out = []
    gemm = ok[ok["family"] == "gemm"].assign(name=lambda d: d["impl"].str.rsplit("/", n=1).str[-1])
    keys = [c for c in GEMM_MATCH if c in gemm.columns]
    vendor = gemm[gemm["name"] == "torch"].groupby(keys, dropna=False)["gflops"].max().rename("vendor").reset_index()
    mine = gemm[gemm["backend"] == "triton"]
    if not mine.empty and not vendor.empty:
        both = mine.merge(vendor, on=keys, how="inner")
        for (name, precision), rows in sorted(both.groupby(["name", "dtype"]), key=lambda g: (g[0][1], g[0][0])):
            r = rows.loc[rows["gflops"].idxmax()]
            label = "Triton" if name == "triton" else f"Triton ({name})"
            shape = "x".join(str(int(r[c])) for c in ("m", "n", "k") if c in r and pd.notna(r[c]))
            out.append(f"{label} {precision} GEMM: best {r['gflops'] / 1e3:,.1f} TFLOP/s ({shape}, {r['mode']}), "
                       f"{r['gflops'] / r['vendor']:.2f}x torch's {r['vendor'] / 1e3:,.1f} at the same shape and mode.")
    if memory_bytes_from:
        copy = ok[(ok["op"] == "stream.copy") & (ok["working_set_bytes"] >= memory_bytes_from)]
        names = copy["impl"].str.rsplit("/", n=1).str[-1]
        if {"triton", "torch"} <= set(names):
            t, v = copy[names == "triton"]["gbps"].max(), copy[names == "torch"]["gbps"].max()
            out.append(f"Triton stream copy at off-chip sizes: best {t:,.0f} GB/s, {t / v:.2f}x torch's {v:,.0f}.")
    return out


def analyst_notes(run) -> list[str]:
    """Return the bullet lines of the run folder's notes.md: what a person who examined the
    run wrote about its gaps (kept beside the files, so report rebuilds keep it)."""
    path = run.dir / "notes.md"
    if not path.exists():
        return []
    return [line[2:].strip() for line in path.read_text().splitlines() if line.startswith("- ")]


def _known(x) -> bool:
    return x is not None and x == x


def above_reference(row: dict) -> str | None:
    """Return the finding for a validation row measured over 105% of its reference, else None.
    With a clock read while its point ran, it names the clock the rate needs with the
    reference's units: observed clock x measured / clock-corrected reference (a VM reports a
    nominal clock, so a CPU's computed peak can be low by its boost)."""
    pct = row["% of reference"]
    if not _known(pct) or pct <= 105:
        return None
    text = (f"{row['ceiling']} measures {row['measured']:,.0f} {row['unit']}, "
            f"{pct:.0f}% of the {row['reference source']} roof")
    clock, fixed = row.get("clock MHz"), row.get("% of clock-corrected")
    if _known(clock) and _known(fixed) and fixed > 105:
        return (text + f": with the reference's units it needs {clock * fixed / 100:,.0f} MHz, not the {clock:,.0f} "
                "read while it ran, so the clock ran above the one read (a VM reports a nominal clock), or the "
                "reference misses a unit.")
    return text + ": the clock ran above the one assumed, or the reference misses a unit."


def finding_records(run, table: pd.DataFrame, energy: dict | None) -> list[dict]:
    """Return the report's headline findings, most important first, each {"code", "text"}
    and, for a count, "count": the code names the kind of finding (FINDING_CODES, or a
    below-reference finding's own code), the text is its sentence."""
    out = []

    def add(code, text, **more):
        out.append({"code": code, "text": text, **more})
    model = Roofline(run.roofs)
    df = run.measurements
    bw = model.bandwidth()
    if bw is not None:
        ref = table[(table["ceiling"] == bw.name)]
        pct = ref["% of reference"].iloc[0] if not ref.empty else None
        spread = (f" (its plateau spans {bw.plateau_values[0]:,.1f} to {bw.plateau_values[1]:,.1f} GB/s)"
                  if bw.plateau_values and bw.plateau_values[1] > 1.05 * bw.plateau_values[0] else "")
        figure = band_text(bw.value, bw.interval, "GB/s") if bw.interval else f"{bw.value:,.1f} GB/s"
        add("bandwidth", f"{bw.name.upper()} bandwidth: {figure} by {bw.impl} {bw.dtype}"
            + (f", {pct:.0f}% of the datasheet" if pct == pct and pct is not None else "") + spread + ".")
    for line in filter(None, map(above_reference, table.to_dict("records"))):
        add("above_reference", line)
    for f in filter(None, map(below_reference, table.to_dict("records"))):
        add(f["code"], f["text"])
    for line in confirmation_findings(model):  # a roof no second measurement reaches (rule 17)
        add("disputed", line)
    for line in precision_ratios(model, run.device):
        add("precision_ratio", line)
    for p in ("fp32", "bf16"):
        r, ridge = model.compute(p), model.ridge(p)
        if r and ridge:
            add("ridge", f"{p} ridge point: {ridge:.3g} FLOP/byte (a kernel needs that intensity to be compute-bound).")
    above = int(is_above(text_column(df, "flag")).sum())
    if above:
        add("above_bound", f"Points above their attainable roof beyond their own spread: {fmt_num(above)} "
            "(see 'Flagged points').", count=above)
    held = throttled(df)
    if held.any():
        add("throttled", f"{plural(int(held.sum()), 'point')} measured while the clock was held down (throttled).",
            count=int(held.sum()))
    if energy:
        add("energy_model", f"Energy model: {energy['e_flop_pj']:.3g} pJ/FLOP, {energy['e_byte_pj']:.3g} pJ/byte, "
            f"{energy['static_w']:.3g} W static (R^2 {energy['r2']:.3f} over {energy['points']} points).")
    errors = int((df["status"] == "error").sum())
    if errors:
        add("failed_points", f"{errors} points failed (wrong results or exceptions); they were not timed.",
            count=errors)
    caches, _ = device_levels(run.device)
    for line in triton_vs_library(df, DEFAULT.offchip_factor * caches[-1][1] if caches else None):
        add("triton_vs_library", line)
    for w in run_warnings(run):
        add("run_warning", w[0].upper() + w[1:] + ".")
    for n in analyst_notes(run):
        add("analyst_note", f"Analyst's note: {n}")
    return out


FINDING_CODES = ("bandwidth", "above_reference", "disputed", "precision_ratio", "ridge", "above_bound", "throttled",
                 "energy_model", "failed_points", "triton_vs_library", "run_warning", "analyst_note")


def findings(run, table: pd.DataFrame, energy: dict | None) -> list[str]:
    """Return the report's headline findings' sentences, most important first (finding_records)."""
    return [f["text"] for f in finding_records(run, table, energy)]


def throttled(df: pd.DataFrame) -> pd.Series:
    """Return, per row, whether a clock-limiting reason was active (the column holds True,
    False, 1.0, 0.0, their text, or nothing); no dtype juggling that a later pandas refuses."""
    if "throttled" not in df:
        return pd.Series(False, index=df.index)
    return df["throttled"].map(lambda v: str(v).strip().lower() in ("true", "1", "1.0"))


BEST_COLUMNS = ["op", "impl", "dtype", "mode", "shape", "gbps", "gflops", "intensity", "pct_of_attainable", "detail"]


def point_rate(df: pd.DataFrame) -> pd.Series:
    """Return each row's rate: GFLOP/s where it does FLOPs, else GB/s."""
    return df["gflops"].where(df["flops"] > 0, df["gbps"])


def best_rows(df: pd.DataFrame, columns=BEST_COLUMNS) -> pd.DataFrame:
    """Return the best successful point per op, impl, dtype and mode (by GFLOP/s, or GB/s for
    points without FLOPs), with the given columns, its % of attainable written with its range
    where the run has one (bands.with_ranges, rule 17)."""
    ok = df[df["status"] == "ok"].copy()
    if ok.empty:
        return ok
    ok["rate"] = point_rate(ok)
    best = with_ranges(ok.loc[ok.groupby(["op", "impl", "dtype", "mode"])["rate"].idxmax()])
    return best[[c for c in columns if c in best]].reset_index(drop=True)


def flagged_points(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Return (the points above their attainable bound beyond their spread, the points the
    runner flagged as measured while the machine was busy or whose time jumped and that are
    not above it), each bound with its range (rule 17)."""
    flags = text_column(df, "flag")
    up = is_above(flags)
    return with_ranges(df[up]), with_ranges(df[(flags != "") & ~up])


def flagged_sections(df: pd.DataFrame) -> list[tuple[str, object]]:
    """Return the "Flagged points" sections (flagged_points): the points above their attainable
    bound, how many per op and then every one grouped by op (none left out: the findings count
    them all); then the points the runner flagged as measured while the machine was busy or
    whose time jumped (they set no roof; they need not be above anything)."""
    above, runner = flagged_points(df)
    title = "Flagged points"
    if above.empty and runner.empty:
        return [(title, ["none: every measured point is under its attainable bound within its own spread, "
                         "and none was measured while the machine was busy"])]
    groups = above.groupby("op", sort=False)
    head = (f"{plural(len(above), 'point')} above their attainable bound beyond their spread, "
            f"in {plural(groups.ngroups, 'op')}, "
            "every one listed below: " + ", ".join(f"{op} {len(g)}" for op, g in groups) + "." if len(above) else
            "none above its attainable bound beyond its spread.")
    if len(runner):
        head += (f" {plural(len(runner), 'more point')} measured while the machine was busy or whose time jumped "
                 "(they set no roof), listed last.")
    out = [(title, [head])]
    columns = ["point_id", "gflops", "gbps", "attainable_gflops", "flag"]
    for op, g in groups:
        out.append((f"### {op}: {plural(len(g), 'point')} above the bound", g[[c for c in columns if c in g]]))
    if len(runner):
        out.append((f"### measured while busy or whose time jumped: {plural(len(runner), 'point')}",
                    runner[[c for c in columns if c in runner]]))
    return out


def run_kind(run) -> str:
    """Return the kind of run: "comm" (interconnect rows only), "model" (a model command's
    run) or "device" (the suite's own sweeps): run.json's run_kind, else the rows' families."""
    kind = run.meta.get("run_kind")
    if kind:
        return kind
    families = set(run.measurements["family"])
    return "comm" if families == {"comm"} else ("model" if "model" in families else "device")


def charts(run) -> list[str]:
    """Return the pictures the report shows for this run, in roofs.charts.registry.CHARTS' order:
    those the table gives the run (no roofline for interconnect rows alone, no bandwidth chart
    without stream points) that were drawn."""
    return [c.file for c in charts_for(run) if (run.dir / c.file).exists()]


# ---- rendering --------------------------------------------------------------------------

def _fmt(v):
    if missing(v):
        return ""
    if isinstance(v, float):
        return f"{v:,.4g}" if abs(v) < 1e4 else f"{v:,.0f}"
    return str(v)


def md_table(df: pd.DataFrame) -> str:
    if df.empty:
        return "(none)\n"
    head = "| " + " | ".join(map(str, df.columns)) + " |\n|" + "---|" * len(df.columns) + "\n"
    return head + "".join("| " + " | ".join(_fmt(v).replace("|", "/") for v in row) + " |\n"
                          for row in df.itertuples(index=False))


def html_table(df: pd.DataFrame) -> str:
    if df.empty:
        return "<p>(none)</p>"
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in df.columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_fmt(v))}</td>" for v in row) + "</tr>"
                   for row in df.itertuples(index=False))
    return f"<table><tr>{head}</tr>{body}</table>"


NO_ROOF_LEVELS = "Levels without a roof"  # the section of a sweep's levels that set no roof (none in a model run)


def sections(run, drawn: bool = True) -> list[tuple[str, object]]:
    """Return the report as (title, content) pairs; content is text, a list of lines, a
    DataFrame or a Path to a picture; a title starting with "###" is a sub-section.
    An interconnect run speaks of its links only; a model run of the roofs it was given.
    drawn=False: the folder was finished without its pictures, which the report says."""
    dev, sw = run.device, run.meta.get("software", {})
    kind = run_kind(run)
    env = pd.DataFrame([
        ("device", f"{dev.get('name')} ({dev.get('torch_device')})"),
        ("memory", fmt_bytes(dev.get("memory_bytes") or 0)),
        (dev.get("compute_unit_kind", "units"), dev.get("compute_units")),
        ("caches", ", ".join(f"{c['name']} {fmt_bytes(c['total_bytes'])}" for c in dev.get("caches", []))),
        ("max clock",
         f"{dev.get('max_clock_mhz') or '?'} MHz ({dev.get('extra', {}).get('clock_source', 'NVML/torch')})"
         + clock_line(dev)),
        ("compute capability", dev.get("compute_capability") or "-"),
        ("software", ", ".join(f"{k} {v}" for k, v in sw.items()
                               if k in ("python", "torch", "triton", "cuda_runtime", "driver") and v)),
        ("command", run.meta.get("command", "")),
        ("roofbench", f"commit {run.meta.get('roofbench_commit', 'not recorded')}, "
                      f"method version {run.meta.get('method_version', 1)}"),
        ("run", f"{run.meta.get('start_utc')} to {run.meta.get('end_utc')} UTC, status {run.meta.get('status')}"),
    ], columns=["", "value"])
    df = run.measurements
    if kind == "comm":
        return [("Device and software", env), ("Link roofs", link_lines(run)), ("", link_table(run)),
                *_pictures(run, drawn), ("Failed points", _error_lines(df))]
    table, origin = validation(run)
    energy, energy_why = fit_energy(df)
    out = [("Device and software", env)]
    if kind == "model":
        out.append(("Roofs", [f"This model run is placed under the roofs {run.meta.get('roofs_from', 'it was given')}; "
                              "its own rows set none (see model.md for the per-layer table)."]))
    out += [("Validation", [f"Reference roofs: {origin}. Percentages are measured / reference; the clock-corrected "
                            "reference scales the compute peak by the clock observed while the roof's point ran, "
                            "divided by the clock the peak assumes.", _telemetry_note(run)]),
            ("", shown_validation(table)), *confirmation_section(Roofline(run.roofs)),
            ("Findings", findings(run, table, energy)), *_pictures(run, drawn)]
    if not energy:
        out.append(("Energy", [f"No energy model: {energy_why}."]))
    groups, failed = energy_fits(run)
    if not groups.empty:
        sustain = run.meta.get("sustain") or {}
        out += [("Energy per precision and level", [
            "Fitted over the sustained windows only (E = e x work + P0 x T per group); checked against the power "
            f"limit ({sustain.get('power_limit_w') or 'unknown'} W) and the idle power "
            f"({sustain.get('idle_w') if sustain.get('idle_w') is not None else 'unknown'} W); power read as "
            f"{sustain.get('power_kind') or 'no power sensor'}.", *failed]), ("", groups)]
    out += [("Best points per op, impl and dtype", best_rows(df)), *binding_section(df, Roofline(run.roofs)),
            *flagged_sections(df), *counters_section(run)]
    if kind != "model":
        missing, about = split_notes(run)
        out.append((NO_ROOF_LEVELS, missing or ["every level of the sweep produced a roof"]))
        if about:
            out.append(("Notes on the roofs", about))
    return out


COUNTER_TABLE = {"point_id": "point", "chosen_as": "chosen as", "bytes": "counted DRAM bytes",
                 "hw_dram_bytes": "measured DRAM bytes", "dram_ratio": "DRAM ratio", "read_ratio": "read ratio",
                 "write_ratio": "write ratio", "l2_ratio": "L2 ratio", "l1_ratio": "L1 ratio",
                 "hw_tensor_inst": "tensor-pipe instructions", "flops_per_tensor_inst": "FLOPs per instruction",
                 "kernels": "kernels"}


def counter_lines(run) -> list[str]:
    """Return a few lines on a --counters run's replays for a terminal (brief, summary): each
    point's DRAM ratio (measured / counted), the flagged ones marked, or why none were read;
    none for a run without --counters."""
    info, df = run.meta.get("counters"), load_counters(run.dir)
    if not info and df is None:
        return []
    if df is None or df.empty:
        return [f"counters: none collected: {(info or {}).get('why') or 'no point was replayed'}"]
    out = [f"counters: {plural(len(df), 'point')} replayed under {(info or {}).get('tool') or 'ncu'}, "
           f"{plural(int((df['flag'] != '').sum()), 'point')} flagged (DRAM bytes beyond {FLAG_FRACTION:.0%} of the "
           "formula's)"]
    for r in df.itertuples():
        got = (f"DRAM {r.dram_ratio:.3f}x counted" if r.status == "ok" and pd.notna(r.dram_ratio) else
               f"no counters ({r.reason})" if r.status != "ok" else "DRAM bytes unknown")
        out.append(f"  {r.point_id}: {got}" + (" FLAGGED" if r.flag else ""))
    if (info or {}).get("why"):
        out.append(f"  stopped: {info['why']}")
    return out


def counters_section(run) -> list[tuple[str, object]]:
    """Return the "Counters beside counted bytes" section of a run made with --counters
    (counters.csv, run.json's "counters"): each replayed point's DRAM bytes counted by its
    formula beside those the hardware counters measured, the ratios (measured / counted) of
    DRAM, its reads and writes, L2 and L1, its tensor-pipe instructions, and the points whose
    DRAM bytes differ by more than FLAG_FRACTION listed apart; or why none were read. A run
    without --counters gets none."""
    info = run.meta.get("counters")
    df = load_counters(run.dir)
    if not info and df is None:
        return []
    info = info or {}
    title = "Counters beside counted bytes"
    if df is None or df.empty:
        return [(title, [f"No counters were collected: {info.get('why') or 'no point was replayed'}."])]
    ok, failed = df[df["status"] == "ok"], df[df["status"] != "ok"]
    flagged = ok[ok["flag"] != ""]
    lines = [f"{plural(len(df), 'point')} replayed once each under {info.get('tool') or 'ncu'} after the timing, "
             "each in a process of its own (no timed sample ran under the profiler): caches flushed before each "
             "kernel, so DRAM bytes are a cold call's, beside the compulsory bytes the formulas count; ratios are "
             "measured / counted. "
             f"A point whose DRAM bytes differ from the formula's by more than {FLAG_FRACTION:.0%} is flagged: "
             + (f"{plural(len(flagged), 'point')}: "
                + "; ".join(f"{r.point_id} ({r.flag})" for r in flagged.itertuples())
                if len(flagged) else "none") + "."]
    lines += [f"{r.point_id}: no counters ({r.reason})" for r in failed.itertuples()]
    if info.get("why"):
        lines.append(f"The replays stopped: {info['why']}.")
    shown = ok.copy()
    for c in ("bytes", "hw_dram_bytes", "hw_tensor_inst", "flops_per_tensor_inst"):
        shown[c] = pd.to_numeric(shown[c], errors="coerce").astype(float)
    for c in ("dram_ratio", "read_ratio", "write_ratio", "l2_ratio", "l1_ratio"):  # 1.000 apart from 1.0001
        shown[c] = [f"{v:.4f}" if pd.notna(v) else "" for v in pd.to_numeric(shown[c], errors="coerce")]
    out = [(title, lines), ("", shown[list(COUNTER_TABLE)].rename(columns=COUNTER_TABLE))]
    if len(flagged):
        out.append((f"### DRAM bytes beyond {FLAG_FRACTION:.0%} of the formula's: {plural(len(flagged), 'point')}",
                    shown.loc[flagged.index, ["point_id", "bytes", "hw_dram_bytes", "dram_ratio", "flag"]]
                    .rename(columns=COUNTER_TABLE)))
    return out


def binding_section(df: pd.DataFrame, model: Roofline) -> list[tuple[str, object]]:
    """Return the "Binding level of each Triton kernel" section (roofs/analysis/hierarchy.py), or
    nothing when no Triton point was measured."""
    table = triton_binding_table(df, model)
    if table.empty:
        return []
    return [("Binding level of each Triton kernel",
             ["Each Triton kernel's fastest point, bounded at each level by that level's roof times its intensity "
              "there (FLOPs over the bytes its tiles move through the level: the l2_bytes and l1_bytes columns; "
              "the boundary level uses the compulsory bytes). The binding level is the lowest bound; \"compute\" "
              "means the precision's roof is lower than every level's."]), ("", table)]


def link_lines(run) -> list[str]:
    """Return the sentences above an interconnect run's link table."""
    df = run.measurements
    ranks = run.meta.get("ranks") or (int(df["ranks"].dropna().max()) if df["ranks"].notna().any() else "?")
    return [f"{ranks} ranks over {run.meta.get('backend', df['backend'].iloc[0] if len(df) else '?')}; every result "
            "was checked on every rank before it was timed.",
            "Collectives give bus bandwidth (algorithm bandwidth x the collective's factor, nccl-tests' "
            "convention); send/recv gives the bandwidth of one ordered pair. "
            "Each value is the best over message sizes."]


def link_table(run) -> pd.DataFrame:
    """Return one row per link roof: its value with significant digits, the message size it
    was reached at and the measurement behind it."""
    rows = [{"link": r.name, "GB/s": f"{r.value:.4g}", "at message size": fmt_bytes(r.working_set_bytes or 0),
             "kind": r.note, "measured by": r.point_id}
            for r in Roofline(run.roofs).roofs if r.kind == "bandwidth" and r.name.startswith(("link.", "host."))]
    return pd.DataFrame(rows)


def _pictures(run, drawn: bool = True) -> list[tuple[str, object]]:
    if not drawn:
        return [("Pictures", [f"Not drawn: this folder was finished with --no-charts; `python run_bench.py report "
                              f"{run.dir}` draws them."])]
    return [(BY_FILE[name].title, run.dir / name) for name in charts(run)]


def _error_lines(df: pd.DataFrame) -> list[str]:
    errors = df[df["status"] == "error"]
    return [f"{r.point_id}: {r.reason}" for r in errors.itertuples()] or ["none"]


def _telemetry_note(run) -> str:
    notes = {p.get("telemetry", {}).get("note") for p in run.points if p.get("telemetry")}
    notes.discard(None)
    notes.discard("")
    return "Telemetry: " + ("; ".join(sorted(notes)) if notes else "recorded with every timed point.")


def write_report(run_dir, drawn: bool = True) -> tuple[Path, Path]:
    """Write report.md and report.html into run_dir from its files; return both paths.
    drawn=False: its pictures were not drawn (finish_run's charts), which the report says."""
    run = load_run(run_dir)
    parts = sections(run, drawn)
    title = f"roofbench report: {run.device.get('name', '?')}, {run.meta.get('start_utc', '')} UTC"
    md, body = [f"# {title}\n"], []
    for name, content in parts:
        if name.startswith("### "):
            md.append(f"\n{name}\n")
            body.append(f"<h3>{html.escape(name[4:])}</h3>")
        elif name:
            md.append(f"\n## {name}\n")
            body.append(f"<h2>{html.escape(name)}</h2>")
        if isinstance(content, pd.DataFrame):
            md.append(md_table(content))
            body.append(html_table(content))
        elif isinstance(content, Path):
            md.append(f"![{name}]({content.name})\n")
            # linked, not inlined: a run's pictures are MBs of base64 (report.html sits beside them)
            src = html.escape(content.name, quote=True)
            img = f'<img alt="{html.escape(name)}" src="{src}">'
            svg = content.with_suffix(".svg")
            if svg.exists():  # its points named on hover (roofs/charts/svg.py); an <img> of an SVG shows no titles
                img = f'<object type="image/svg+xml" data="{html.escape(svg.name, quote=True)}">{img}</object>'
            body.append(f'<a href="{src}">{img}</a>')
        else:
            lines = content if isinstance(content, list) else [content]
            md.append("".join(f"- {line}\n" for line in lines))
            body.append("<ul>" + "".join(f"<li>{html.escape(line)}</li>" for line in lines) + "</ul>")
    d = Path(run_dir)
    (d / "report.md").write_text("".join(md))
    # a table wider than the page scrolls inside its own box (display:block lets overflow apply to it)
    style = ("body{font-family:sans-serif;max-width:1200px;margin:2em auto}table{border-collapse:collapse;"
             "font-size:12px;display:block;max-width:100%;overflow-x:auto}td,th{border:1px solid #ccc;"
             "padding:2px 6px;white-space:nowrap}img,object{max-width:100%}")
    (d / "report.html").write_text(f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
                                   f"</title><style>{style}</style></head><body><h1>{html.escape(title)}</h1>"
                                   + "".join(body) + "</body></html>")
    return d / "report.md", d / "report.html"


def reference_roofs_for(device: dict, measured, rows: pd.DataFrame) -> list[Roof]:
    """Return the device's datasheet (or computed) roofs, and each compute one corrected to
    the clock observed while the matching measured roof's point ran."""
    refs, _ = specs.reference_roofs(device)
    by_name = {r.name: r for r in measured if r.kind == "compute"}
    out = list(refs)
    for ref in refs:
        m = by_name.get(ref.name)
        fixed = specs.clock_corrected(ref, observed_clock(rows, m.point_id)) if m else None
        if fixed and abs(fixed.value - ref.value) > 1e-9 * ref.value:  # the same clock adds nothing
            out.append(fixed)
    return out
