"""A profiled program's report, from its profile folder's files (ops.csv, profile.json): the ops placed under
the roofs (roofs.analysis.program), in one ranking (ops with FLOPs and ops with bytes alone together); the
ops outside it after, each with its time and code; the step beside the sum of its ops' bounds; the roofline
chart (roofs.charts.profile); profile.md and profile.html (whose chart is the
SVG, inline, each point named on hover); with --counters (bench/run/profile_counters.py), the top ops' DRAM
bytes read by the hardware counters beside their counted bytes, or the one sentence saying why none were read.
"""
from __future__ import annotations

import html
import json
from pathlib import Path

import pandas as pd

from bench.hw.counters import FLAG_FRACTION
from bench.util import fmt_bytes, plural
from roofs.analysis.program import NO_ROOF, NO_TIME, UNCOUNTED, place_ops, ranking, read_ops, totals
from roofs.analysis.roofline import Roof
from roofs.charts.profile import plot_profile
from roofs.reports.report import html_table, md_table

TOP = 15  # ranked lines printed; profile.md lists every op
COUNTERS_TITLE = "Hardware counters: DRAM bytes beside the counted bytes (one replayed step)"
# the printed text's head of the ranked ops (finish_profile)
RANKED_HEAD = ("ranked by the share of the step to win at its roof (an op with FLOPs at its attainable, one with "
               "bytes alone at its bandwidth):")
WHY = {UNCOUNTED: "neither bytes nor FLOPs counted", NO_ROOF: "no measured roof at its level or precision",
       NO_TIME: "the profiler gave it no time"}


def _what(r) -> str:
    return ", ".join(x for x in (r.precision or r.dtype, r.shapes) if x)


def rank_line(r) -> str:
    """Return one op's ranked line: "aten::mm [bf16, 2048x4096, 4096x4096] in m.layers.3.mlp: 31% of the step at
    42% of its attainable (l3.read, 40-44% over the roofs' spread): 2.4x headroom, 18% of the step to win";
    an op outside the ranking: its time and its `unranked` code ("..., 0.3% of the step (0.05 ms), not
    ranked: uncounted (neither bytes nor FLOPs counted)")."""
    head = f"{r.op} [{_what(r)}] in {r.module}: {100 * r.share:.3g}% of the step"
    if pd.isna(r.pct_of_attainable):
        code = _text(getattr(r, "unranked", "")) or NO_ROOF
        why = (r.bound_note if code == NO_ROOF and r.bound_note else "") or WHY.get(code, "")
        return f"{head} ({1e3 * r.time_s:.4g} ms), not ranked: {code} ({why})"
    span = (f", {r.pct_low:.3g}-{r.pct_high:.3g}% over the roofs' intervals"
            if pd.notna(r.pct_low) and r.pct_high > r.pct_low * 1.005 else "")
    at = (f" at {r.pct_of_attainable:.3g}% of its attainable ({r.bound_roof}{span}"
          + ("" if _text(getattr(r, "counted_by", "flops")) == "flops" else "; by its bytes: no FLOPs counted")
          + ")")
    if r.pct_of_attainable > 100:
        return head + at + ": above its bound (a roof measured too low, or a count too high)" + _dram(r)
    return head + at + f": {_x(r.headroom)} headroom, {100 * r.to_win:.2g}% of the step to win" + _dram(r)


def _dram(r) -> str:
    """Return an op's counters beside its ranked line ("; DRAM 1.02x its counted bytes", "(flagged)" past
    FLAG_FRACTION), "" for an op the counters did not read."""
    ratio = getattr(r, "dram_ratio", None)
    if ratio is None or pd.isna(ratio):
        return ""
    flagged = " (flagged)" if _text(getattr(r, "dram_flag", "")) else ""
    return f"; DRAM {float(ratio):.2f}x its counted bytes{flagged}"


def _text(v) -> str:
    return "" if v is None or (isinstance(v, float) and pd.isna(v)) else str(v)


def _x(v: float) -> str:
    """Return a factor as people write it: "2.4x", "150x", "24,000x"."""
    return f"{v:.2g}x" if v < 100 else f"{v:,.0f}x"


def _table(placed: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({
        "op": placed["op"], "in": placed["module"], "dtype": placed["dtype"], "shapes": placed["shapes"],
        "calls": placed["calls"].map(lambda v: f"{v:g}"),
        "share %": (100 * placed["share"]).map(lambda v: f"{v:.3g}"),
        "ms": (1e3 * placed["time_s"]).map(lambda v: f"{v:.4g}"),
        "GFLOP": (placed["flops"] / 1e9).map(lambda v: "no formula" if pd.isna(v) else f"{v:.4g}"),
        "read": placed["read_bytes"].map(fmt_bytes), "written": placed["write_bytes"].map(fmt_bytes),
        "GFLOP/s": placed["gflops"].map(lambda v: f"{v:.4g}" if v > 0 else ""),
        "GB/s": placed["gbps"].map(lambda v: f"{v:.4g}"),
        "bound by": placed["bound_roof"].fillna(""),
        "% attainable": placed["pct_of_attainable"].map(lambda v: "" if pd.isna(v) else f"{v:.3g}"),
        "to win %": (100 * placed["to_win"]).map(lambda v: f"{v:.2g}")})


def summary_lines(t: dict, meta: dict) -> list[str]:
    """Return the step's lines: the step beside its ops, the gap and the sum of the ops' bounds."""
    n = meta["steps"]
    ops = (f"ops {1e3 * t['ops_s']:.4g} ms ({100 * t['ops_s'] / t['step_s']:.3g}% of the step); between ops "
           f"(Python, dispatch, idle device) {1e3 * t['gap_s']:.4g} ms")
    bound = (f"sum of the ops' roofline bounds {1e3 * t['bound_s']:.4g} ms: the ops could run "
             f"{t['ops_s'] / t['bound_s']:.3g}x faster on these roofs") if t["unbounded"] < t["ops"] else \
        "no op has a bound: the roofs given have no measured roof at the ops' levels and precisions"
    flops = (f"FLOPs {t['flops'] / 1e9:.6g} G in the table (FlopCounterMode counted "
             f"{meta['flop_counter_total'] / 1e9:.6g} G over the same program), bytes {fmt_bytes(t['bytes'])}")
    out = [f"step {1e3 * t['step_s']:.4g} ms (mean of {n} captured steps; each op's time a mean per step)",
           ops, bound, flops]
    if t["unranked"]:
        codes = ", ".join(f"{k} {v}" for k, v in sorted(t["unranked"].items()))
        out.append(f"{sum(t['unranked'].values())} op(s) not ranked ({codes}): counted at their own time in the sum")
    return (out + counters_lines(meta) + [f"warning: {n}" for n in meta.get("roof_notes", [])]
            + list(meta.get("notes", [])))


def counters_lines(meta: dict) -> list[str]:
    """Return the counters' line (profile.json's "counters"): none without --counters; "counters: none
    collected: <why>" (the run's words) where none were read; else how many ops, kernels and flags, and any
    replay kernel that matched no captured one."""
    info = meta.get("counters")
    if info is None:
        return []
    if info.get("why"):
        return [f"counters: none collected: {info['why']}"]
    out = [f"counters: DRAM bytes of the top {plural(info['ops'], 'op')} read under {info.get('tool') or 'ncu'} over "
           f"one replayed step ({plural(info.get('kernels', 0), 'kernel')}, caches flushed before each), "
           f"{info['flagged']} flagged beyond {FLAG_FRACTION:.0%} of their counted bytes"]
    if info.get("unmatched"):
        out.append(f"counters: {plural(info['unmatched'], 'kernel')} of the replay matched no kernel of the captured "
                   "step (the program's kernels changed between them) and are left out")
    return out


def counters_table(placed: pd.DataFrame) -> pd.DataFrame:
    """Return the counted ops' table: each op read by the counters (hw_kernels set), its counted bytes beside
    the DRAM bytes measured, the ratios (measured / counted) and the flag; empty without counter columns."""
    if "hw_kernels" not in placed:
        return pd.DataFrame()
    got = placed[placed["hw_kernels"].notna()]

    def x(v):
        return "" if v is None or pd.isna(v) else f"{float(v):.4f}"

    def b(v):
        return "" if v is None or pd.isna(v) else fmt_bytes(float(v))
    return pd.DataFrame({
        "op": got["op"], "in": got["module"], "shapes": got["shapes"],
        "read": got["read_bytes"].map(b), "written": got["write_bytes"].map(b),
        "DRAM read": got["hw_dram_read_bytes"].map(b), "DRAM written": got["hw_dram_write_bytes"].map(b),
        "DRAM ratio": got["dram_ratio"].map(x), "read ratio": got["read_ratio"].map(x),
        "write ratio": got["write_ratio"].map(x), "kernels": got["hw_kernels"].map(lambda v: f"{int(v)}"),
        "flag": got["dram_flag"].map(_text)})


def finish_profile(folder) -> tuple[str, list[Path]]:
    """Place a profile folder's ops (ops.csv rewritten with roofs.analysis.program.PLACED columns), draw its chart
    and write profile.md and profile.html; return (the text to print: the summary and the top ranked ops, the
    paths written)."""
    folder = Path(folder)
    meta = json.loads((folder / "profile.json").read_text())
    ops = read_ops(folder / "ops.csv")
    placed = place_ops(ops, [Roof.from_dict(r) for r in meta["roofs"]], meta["device"], meta["step_s"])
    placed.to_csv(folder / "ops.csv", index=False)
    charts = plot_profile(folder)
    t = totals(placed, meta["step_s"])
    summary = summary_lines(t, meta)
    ranked_ops, rest = ranking(placed)
    ranked = [rank_line(r) for r in ranked_ops.itertuples()]
    apart = [rank_line(r) for r in rest.itertuples()]
    counted = counters_table(placed)
    title = f"roofbench profile: {meta.get('program', 'program')} on {meta['device'].get('name', '?')}"
    roofs_line = f"roofs: {meta.get('roofs_from', '?')}"
    md = [f"# {title}\n", f"\n{roofs_line}\n\n", "".join(f"- {s}\n" for s in summary),
          "\n## Ops ranked by the share of the step they would win at their roof\n\n",
          "".join(f"{i}. {s}\n" for i, s in enumerate(ranked, 1)) or "none\n",
          "\n## Ops not ranked (nothing counted, no roof, or no time)\n\n",
          "".join(f"- {s}\n" for s in apart) or "none\n",
          f"\n## {COUNTERS_TITLE}\n\n" + md_table(counted) if len(counted) else "",
          "\n## Roofline\n\n![roofline](roofline.svg)\n\n## Every op\n\n",
          md_table(_table(placed))]
    (folder / "profile.md").write_text("".join(md))
    svg = (folder / "roofline.svg").read_text()
    svg = svg[svg.index("<svg"):]  # inline, so each point's <title> shows on hover (an <img> shows none)
    esc = html.escape
    body = (f"<h1>{esc(title)}</h1><p>{esc(roofs_line)}</p><ul>" + "".join(f"<li>{esc(s)}</li>" for s in summary)
            + "</ul><h2>Ops ranked by the share of the step they would win at their roof</h2><ol>"
            + "".join(f"<li>{esc(s)}</li>" for s in ranked) + "</ol><h2>Ops not ranked (nothing counted, no roof, "
            "or no time)</h2><ul>" + "".join(f"<li>{esc(s)}</li>" for s in apart) + "</ul>"
            + (f"<h2>{esc(COUNTERS_TITLE)}</h2>" + html_table(counted) if len(counted) else "") + "<h2>Roofline</h2>"
            "<p>Rest the pointer on a point to see its op.</p>" + svg + "<h2>Every op</h2>"
            + html_table(_table(placed)))
    style = ("body{font-family:sans-serif;max-width:1400px;margin:2em auto}table{border-collapse:collapse;"
             "font-size:12px}td,th{border:1px solid #ccc;padding:2px 6px}svg{max-width:100%;height:auto}")
    (folder / "profile.html").write_text(f"<!doctype html><html><head><meta charset='utf-8'><title>{esc(title)}"
                                         f"</title><style>{style}</style></head><body>{body}</body></html>")
    text = "\n".join(summary + ["", RANKED_HEAD]
                     + [f"{i:2}. {s}" for i, s in enumerate(ranked[:TOP], 1)]
                     + ([f"    ... {len(ranked) - TOP} more in profile.md"] if len(ranked) > TOP else [])
                     + (["", f"not ranked ({len(apart)}):"] + [f"  - {s}" for s in apart[:8]] if apart else [])
                     + ([f"    ... {len(apart) - 8} more in profile.md"] if len(apart) > 8 else []))
    return text, [folder / "ops.csv", folder / "profile.md", folder / "profile.html", *charts]
