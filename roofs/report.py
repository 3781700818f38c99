"""The run report: report.md and a self-contained report.html, built from a run folder's
files alone (measurements.csv, run.json, roofs.json and the pictures).

Sections: the device and software; the validation table (each measured roof beside the
datasheet or computed roof, that roof corrected to the clock observed during the run, and
measured as a percentage of each); the top findings; every picture; the best points per
op, impl and dtype; the points above their roofs; why some levels have no roof.
"""
from __future__ import annotations

import base64
import html
import json
from pathlib import Path

import pandas as pd

from bench.results import load_run
from roofs import specs
from roofs.energy import fit_energy
from roofs.model import Roof, Roofline


# every picture a run folder may hold, in the report's order, with its section title
PICTURES = (("roofline.png", "Roofline"), ("roofline-stream.png", "Roofline: stream"),
            ("roofline-gemm.png", "Roofline: GEMM"), ("roofline-gemv.png", "Roofline: decode GEMV"),
            ("roofline-attention.png", "Roofline: attention"), ("bandwidth.png", "Bandwidth"),
            ("gemm.png", "Gemm"), ("links.png", "Links"), ("energy.png", "Energy"))


def observed_clock(df: pd.DataFrame, point_id: str) -> float | None:
    """Return the mean clock (MHz) recorded while the given point was timed, or None."""
    if "clock_mhz" not in df:
        return None
    hit = df.loc[df["point_id"] == point_id, "clock_mhz"].dropna()
    return float(hit.iloc[0]) if not hit.empty else None


def validation(run) -> tuple[pd.DataFrame, str]:
    """Return (one row per measured roof with its reference roofs and percentages, where the
    reference roofs came from)."""
    refs, origin = specs.reference_roofs(run.device)
    by_name = {(r.kind, r.name if r.kind == "compute" else "memory"): r for r in refs}
    rows = []
    for m in Roofline(run.roofs).roofs:
        if m.source != "measured":
            continue
        key = (m.kind, m.name if m.kind == "compute" else ("memory" if m.name in ("dram", "hbm") else m.name))
        ref = by_name.get(key)
        clock = observed_clock(run.measurements, m.point_id)
        fixed = specs.clock_corrected(ref, clock) if ref is not None else None
        rows.append({
            "ceiling": m.name, "unit": m.unit, "measured": m.value,
            "reference": ref.value if ref else None, "reference source": ref.source if ref else "",
            "at observed clock": fixed.value if fixed else None,
            "clock MHz": clock,
            "% of reference": 100 * m.value / ref.value if ref else None,
            "% of clock-corrected": 100 * m.value / fixed.value if fixed else None,
            "measured by": f"{m.impl} {m.dtype} {m.shape or ''}".strip(),
        })
    return pd.DataFrame(rows), origin


def findings(run, table: pd.DataFrame, energy: dict | None) -> list[str]:
    """Return the report's headline findings, most important first."""
    out = []
    model = Roofline(run.roofs)
    df = run.measurements
    bw = model.bandwidth()
    if bw is not None:
        ref = table[(table["ceiling"] == bw.name)]
        pct = ref["% of reference"].iloc[0] if not ref.empty else None
        spread = (f" (its plateau spans {bw.plateau_values[0]:,.1f} to {bw.plateau_values[1]:,.1f} GB/s)"
                  if bw.plateau_values and bw.plateau_values[1] > 1.05 * bw.plateau_values[0] else "")
        out.append(f"{bw.name.upper()} bandwidth: {bw.value:,.1f} GB/s by {bw.impl} {bw.dtype}"
                   + (f", {pct:.0f}% of the datasheet" if pct == pct and pct is not None else "") + spread + ".")
    for r in table.to_dict("records"):
        pct = r["% of reference"]
        if pct is not None and pct == pct and pct > 105:
            out.append(f"{r['ceiling']} measures {r['measured']:,.0f} {r['unit']}, {pct:.0f}% of the "
                       f"{r['reference source']} roof: the clock ran above the one assumed, or the reference misses a unit.")
    bf16, fp8, int8 = (model.compute(p) for p in ("bf16", "fp8e4m3", "int8"))
    if bf16 and fp8:
        ratio = fp8.value / bf16.value
        out.append(f"fp8 runs at {ratio:.2f}x bf16" + (", so this part lacks fast fp8." if ratio < 1.3 else "."))
    if bf16 and int8:
        out.append(f"int8 runs at {int8.value / bf16.value:.2f}x bf16.")
    for p in ("fp32", "bf16"):
        r, ridge = model.compute(p), model.ridge(p)
        if r and ridge:
            out.append(f"{p} ridge point: {ridge:.3g} FLOP/byte (a kernel needs that intensity to be compute-bound).")
    flagged = df[df.get("flag", pd.Series(dtype=str)).fillna("") != ""] if "flag" in df else df.iloc[0:0]
    if not flagged.empty:
        out.append(f"{len(flagged)} points sit above their attainable roof beyond their own spread (see 'Points above their roofs').")
    if "throttled" in df and df["throttled"].fillna(False).astype(bool).any():
        out.append(f"{int(df['throttled'].fillna(False).astype(bool).sum())} points were measured while the clock was held down (throttled).")
    if energy:
        out.append(f"Energy model: {energy['e_flop_pj']:.3g} pJ/FLOP, {energy['e_byte_pj']:.3g} pJ/byte, "
                   f"{energy['static_w']:.3g} W static (R^2 {energy['r2']:.3f} over {energy['points']} points).")
    errors = int((df["status"] == "error").sum())
    if errors:
        out.append(f"{errors} points failed (wrong results or exceptions); they were not timed.")
    from roofs.checks import warnings
    return out + [w[0].upper() + w[1:] + "." for w in warnings(run)]


def best_points(df: pd.DataFrame) -> pd.DataFrame:
    ok = df[df["status"] == "ok"].copy()
    if ok.empty:
        return ok
    ok["rate"] = ok["gflops"].where(ok["flops"] > 0, ok["gbps"])
    best = ok.loc[ok.groupby(["op", "impl", "dtype", "mode"])["rate"].idxmax()]
    cols = ["op", "impl", "dtype", "mode", "shape", "gbps", "gflops", "intensity", "pct_of_attainable", "detail"]
    return best[[c for c in cols if c in best]].reset_index(drop=True)


def plot_energy(run, model: dict, path: Path) -> Path:
    """Draw energy.png: FLOP/J against intensity, the points and the fitted model at the
    attainable rate."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from roofs.energy import flops_per_joule
    df = run.measurements
    d = df[(df["status"] == "ok") & df["joules"].notna() & (df["flops"] > 0)]
    fig, ax = plt.subplots(figsize=(8, 5))
    for fam, g in d.groupby("family"):
        ax.scatter(g["intensity"], g["flops"] / g["joules"], s=14, label=fam)
    rl = Roofline(run.roofs)
    xs = np.logspace(-2, 4, 200)
    ax.plot(xs, flops_per_joule(model, xs, [rl.attainable_gflops(x) for x in xs]), color="black",
            label="fit: 1 / (e_flop + e_byte / I + P0 / attainable)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("FLOP per joule")
    ax.set_title(f"Energy roofline: {run.device.get('name', '')}")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# ---- rendering --------------------------------------------------------------------------

def _fmt(v):
    if v is None or (isinstance(v, float) and v != v):
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


def sections(run) -> list[tuple[str, object]]:
    """Return the report as (title, content) pairs; content is text, a list of lines, a
    DataFrame or a Path to a picture."""
    dev, sw = run.device, run.meta.get("software", {})
    table, origin = validation(run)
    energy, energy_why = fit_energy(run.measurements)
    if energy:
        plot_energy(run, energy, run.dir / "energy.png")
    env = pd.DataFrame([
        ("device", f"{dev.get('name')} ({dev.get('torch_device')})"),
        ("memory", f"{(dev.get('memory_bytes') or 0) / 2**30:.1f} GiB"),
        (dev.get("compute_unit_kind", "units"), dev.get("compute_units")),
        ("caches", ", ".join(f"{c['name']} {c['total_bytes'] / 2**20:g} MiB" for c in dev.get("caches", []))),
        ("max clock", f"{dev.get('max_clock_mhz') or '?'} MHz ({dev.get('extra', {}).get('clock_source', 'NVML/torch')})"),
        ("compute capability", dev.get("compute_capability") or "-"),
        ("software", ", ".join(f"{k} {v}" for k, v in sw.items() if k in ("python", "torch", "triton", "cuda_runtime", "driver") and v)),
        ("command", run.meta.get("command", "")),
        ("run", f"{run.meta.get('start_utc')} to {run.meta.get('end_utc')} UTC, status {run.meta.get('status')}"),
    ], columns=["", "value"])
    df = run.measurements
    flagged = df[df["flag"].fillna("") != ""][["point_id", "gflops", "attainable_gflops", "flag"]] if "flag" in df else df.iloc[0:0]
    telemetry_note = _telemetry_note(run)
    out = [("Device and software", env),
           ("Validation", [f"Reference roofs: {origin}. Percentages are measured / reference; the clock-corrected "
                           "reference scales the compute peak by the clock observed while the roof's point ran, "
                           "divided by the clock the peak assumes.", telemetry_note]),
           ("", table),
           ("Findings", findings(run, table, energy))]
    for name, title in PICTURES:
        if (run.dir / name).exists():
            out.append((title, run.dir / name))
    if not energy:
        out.append(("Energy", [f"No energy model: {energy_why}."]))
    out += [("Best points per op, impl and dtype", best_points(df)),
            ("Points above their roofs", flagged.head(50)),
            ("Levels without a roof", _roof_notes(run) or ["every level of the sweep produced a roof"])]
    return out


def _telemetry_note(run) -> str:
    notes = {p.get("telemetry", {}).get("note") for p in run.meta.get("points", []) if p.get("telemetry")}
    notes.discard(None)
    notes.discard("")
    return "Telemetry: " + ("; ".join(sorted(notes)) if notes else "recorded with every timed point.")


def _roof_notes(run) -> list[str]:
    path = run.dir / "roofs.json"
    return json.loads(path.read_text()).get("notes", []) if path.exists() else []


def write_report(run_dir) -> tuple[Path, Path]:
    """Write report.md and report.html into run_dir from its files; return both paths."""
    run = load_run(run_dir)
    parts = sections(run)
    title = f"roofbench report: {run.device.get('name', '?')}, {run.meta.get('start_utc', '')} UTC"
    md, body = [f"# {title}\n"], []
    for name, content in parts:
        if name:
            md.append(f"\n## {name}\n")
            body.append(f"<h2>{html.escape(name)}</h2>")
        if isinstance(content, pd.DataFrame):
            md.append(md_table(content))
            body.append(html_table(content))
        elif isinstance(content, Path):
            md.append(f"![{name}]({content.name})\n")
            data = base64.b64encode(content.read_bytes()).decode()
            body.append(f'<img alt="{html.escape(name)}" src="data:image/png;base64,{data}">')
        else:
            lines = content if isinstance(content, list) else [content]
            md.append("".join(f"- {line}\n" for line in lines))
            body.append("<ul>" + "".join(f"<li>{html.escape(line)}</li>" for line in lines) + "</ul>")
    d = Path(run_dir)
    (d / "report.md").write_text("".join(md))
    style = ("body{font-family:sans-serif;max-width:1200px;margin:2em auto}table{border-collapse:collapse;"
             "font-size:12px}td,th{border:1px solid #ccc;padding:2px 6px}img{max-width:100%}")
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
