"""The plot modules' shared kit: colours and markers (one meaning each), the label placer
that keeps texts from overprinting, and the helpers every chart uses (points, limits, the
roofs drawn as slopes and flats). Reads only a run's records; draws nothing by itself.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.layout_engine import PlaceHolderLayoutEngine  # noqa: E402
from matplotlib.legend import Legend  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from bench import precisions  # noqa: E402
from bench.results import LEVEL_BYTE_COLUMNS, Run, is_runner_flag, text_column  # noqa: E402
from bench.util import fmt_bytes, offchip_level
from roofs.analysis.bounds import boundary_level  # noqa: E402
from roofs.analysis.checks import is_above  # noqa: E402
from roofs.analysis.model import level_sizes  # noqa: E402
from roofs.analysis.roofline import MEMORY_LEVELS, Roof, Roofline, shown_name  # noqa: E402
from roofs.charts.labels import LabelPlacer, drawn_texts  # noqa: E402,F401  (the charts place labels through kit)

DPI = 120
FLAG_COLOR = "red"  # only ever "above its attainable bound"

# overview: one colour per family
FAMILY_COLORS = {"stream": "tab:blue", "gemm": "tab:orange", "gemv": "tab:green", "attention": "tab:purple",
                 "user": "tab:brown", "fma": "tab:gray", "probe": "tab:cyan", "transfer": "tab:pink",
                 "comm": "tab:olive"}
# one marker and one colour per precision (stream points: their element type; no red: red is the
# flag), each its row's in bench/precisions.py; fp8 variants share a marker
PRECISION_MARKERS = {name: p.marker for name, p in precisions.chart_names().items()}
MARKER_NAMES = {"v": "fp8 (e4m3, e5m2)"}
# a stream point's element type (torch's name) -> its precision
ELEMENT_PRECISION = {p.storage: p.name for p in precisions.ROWS if p.storage and p.storage in (p.long, p.name)}
PRECISION_COLORS = {name: p.colour for name, p in precisions.chart_names().items()}
# stream charts: colour by op, or by the memory level a working set fits in
OP_COLORS = {"copy": "tab:blue", "scale": "tab:orange", "add": "tab:green", "triad": "tab:purple",
             "read": "tab:brown", "write": "tab:pink", "reread": "tab:cyan"}
# a stream kernel OP_COLORS does not name (a new Kind row) takes the first of these no other op
# of its chart holds, in name order; grey only past them
SPARE_OP_COLORS = ("tab:olive", "tab:gray", "#8c6d31", "#393b79", "#637939")


def op_colors(names) -> dict:
    """Return {stream op short name: colour} for one chart's ops: OP_COLORS's, and for the others
    a SPARE_OP_COLORS colour each, so no two of its ops share one."""
    names = sorted(set(names))
    out = {n: OP_COLORS[n] for n in names if n in OP_COLORS}
    spare = iter(SPARE_OP_COLORS)
    for n in names:
        if n not in out:
            out[n] = next(spare, "0.4")
    return out
# one colour per memory level on every chart, outside the tab10 colours the series use (and not red)
LEVEL_COLORS = {"l1": "#c51b7d", "l2": "#d4a000", "l3": "#01665e", "dram": "black", "hbm": "black"}
IMPL_MARKERS = {"torch": "o", "triton": "^", "numpy": "s", "torch_best": "D", "triton_rows": ">",
                "triton_tile": "<", "sdpa": "o", "torch_math": "s"}
IMPL_STYLES = {"torch": "-", "numpy": "-.", "triton": ":", "torch_best": "-.", "triton_rows": ":", "triton_tile": "--"}
OP_STYLES = {"gemm.square": "-", "gemm.skinny": "--", "gemm.search": "none"}
# series (GEMV layers, attention op/impl): the tab10/tab20 colours without their reds
SERIES_COLORS = ([c for i, c in enumerate(plt.get_cmap("tab10").colors) if i != 3],
                 [c for i, c in enumerate(plt.get_cmap("tab20").colors) if i not in (6, 7)])
# ---- reading the run ---------------------------------------------------------------------

def _short(op: str) -> str:
    return op.split(".", 1)[-1]


def _impl_name(impl: str) -> str:
    return impl.rsplit("/", 1)[-1]


def _fmt_bytes(n: float) -> str:
    """Return n bytes as people write them ("96 KiB", "1.17 GiB"): bench.util.fmt_bytes."""
    return fmt_bytes(n)


def _fmt_rate(value: float, unit: str) -> str:
    """Return '4,800 GB/s', '989 TFLOP/s', '3.2 GFLOP/s'."""
    if value >= 1e4 and unit.startswith("G"):
        t = value / 1e3
        return f"{t:,.0f} T{unit[1:]}" if t >= 100 else f"{t:.3g} T{unit[1:]}"
    return f"{value:,.0f} {unit}" if value >= 10 else f"{value:.3g} {unit}"


def _title(run: Run, what: str) -> str:
    dev = run.device
    return f"{what}: {dev.get('name', '?')} ({run.meta.get('start_utc', '')[:16]} UTC)"


def _memory_level(run: Run) -> str:
    return offchip_level(run.device.get("kind", ""))


def _caches(run: Run) -> list[tuple[str, int]]:
    return [(str(c["name"]), int(c["total_bytes"])) for c in run.device.get("caches", []) if c.get("total_bytes")]


def runner_flagged(df: pd.DataFrame) -> pd.Series:
    """Return, per row, whether the runner flagged it while measuring (a busy machine, a time
    jump, stolen cores: bench.results.is_runner_flag): such a row sets no roof and its time may
    be anything, so no chart draws it as a normal point (split_runner)."""
    return text_column(df, "flag").map(is_runner_flag).astype(bool)


def split_runner(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Return (the rows a chart draws as points and lines, the rows the runner flagged): the
    line charts draw the second hollow (runner_handle), the rooflines leave them off and count them."""
    flagged = runner_flagged(df)
    return df[~flagged], df[flagged]


RUNNER_LABEL = "hollow: flagged by the runner (busy, time jump, stolen cores); sets no roof"


def runner_handle() -> Line2D:
    """Return the legend entry for the hollow markers of the rows the runner flagged."""
    return Line2D([], [], ls="none", marker="o", ms=6, mfc="none", mec="0.3", mew=1.0, label=RUNNER_LABEL)


def draw_runner_flagged(ax, x, y, color, gid: str) -> None:
    """Draw rows the runner flagged as hollow markers in color, joined to nothing."""
    ax.scatter(x, y, s=16, facecolors="none", edgecolors=color, linewidths=0.9, zorder=3, gid=gid)


def _points(df: pd.DataFrame) -> pd.DataFrame:
    """Return the successful rows that do FLOPs (the ones a roofline can place), with
    `fmt`: the precision, or the element type for rows without one; never a row the runner
    flagged (runner_flagged: its time says nothing of the kernel)."""
    df = split_runner(df)[0]
    ok = df[(df["status"] == "ok") & (df["flops"] > 0) & (df["gflops"] > 0) & (df["intensity"] > 0)].copy()
    prec = text_column(ok, "precision")
    ok["fmt"] = prec.where(prec != "", ok["dtype"].map(lambda d: ELEMENT_PRECISION.get(d, d)))
    ok["flagged"] = is_above(text_column(ok, "flag"))  # a busy flag alone is not drawn red
    ok["boundary"] = text_column(ok, "boundary")
    return ok


def roofline_points(df: pd.DataFrame) -> pd.DataFrame:
    """Return the best (highest GFLOP/s) row of each (op, impl, precision) among the rows a
    roofline can place; rows without a precision (stream) group by (op, impl); a model run's
    rows (family "model": one op per kind, each layer op its own shape) by shape and mode too,
    so each layer op is its own point."""
    pts = _points(df)
    if pts.empty:
        return pts
    key = text_column(pts, "precision")
    if "shape" in pts:
        model = pts["family"] == "model"
        key = key.where(~model, key + " " + text_column(pts, "shape") + " " + text_column(pts, "mode"))
    idx = pts.assign(_key=key).groupby(["op", "impl", "_key"])["gflops"].idxmax()
    return pts.loc[idx].reset_index(drop=True)


def _series_colors(keys) -> dict:
    """Return a colour (never red) for each key, in order."""
    keys = list(keys)
    palette = SERIES_COLORS[0] if len(keys) <= len(SERIES_COLORS[0]) else SERIES_COLORS[1]
    return {k: palette[i % len(palette)] for i, k in enumerate(keys)}


def level_color(name: str) -> str:
    """Return a memory level's colour (LEVEL_COLORS); "l2.read" is L2's; another name grey."""
    return LEVEL_COLORS.get(str(name).split(".", 1)[0], "0.4")


def point_levels(run: Run, pts: pd.DataFrame) -> pd.Series:
    """Return the memory level bounding each point: its `boundary` column where the run
    wrote one, else roofs.analysis.bounds.boundary_level's rule (rule 12) on its working
    set, mode and the levels' measured edges and reaches; the same rule either way."""
    sizes = level_sizes(run.roofs, _caches(run))
    caches = [(name, size) for name, size, _ in sizes]
    reach = {name: r for name, _, r in sizes if r}
    memory = _memory_level(run)
    own = text_column(pts, "boundary")
    ruled = [boundary_level(ws, mode, caches, memory, reach) for ws, mode in zip(pts["working_set_bytes"], pts["mode"])]
    return own.where(own != "", pd.Series(ruled, index=pts.index))


def _order(table):
    """Return a sort key putting names in table's order, unknown ones last."""
    names = list(table)
    return lambda name: (names.index(name), "") if name in names else (len(names), name)


def _marker_handles(fmts) -> list:
    seen, out = set(), []
    for f in sorted(fmts, key=_order(PRECISION_MARKERS)):
        m = PRECISION_MARKERS.get(f, "*")
        if m in seen:
            continue
        seen.add(m)
        out.append(Line2D([], [], ls="none", marker=m, color="0.35", ms=7, label=MARKER_NAMES.get(m, f)))
    return out


def _flag_handle() -> Line2D:
    return Line2D([], [], ls="none", marker="o", ms=12, mfc="none", mec=FLAG_COLOR, mew=1.6,
                  label="above its attainable bound (flag)")


def _ring_flagged(ax, rows: pd.DataFrame, s: float = 150) -> None:
    f = rows[rows["flagged"]]
    if not f.empty:
        ax.scatter(f["intensity"], f["gflops"], s=s, facecolors="none", edgecolors=FLAG_COLOR, lw=1.6,
                   zorder=3, gid="flagged")


# ---- each point at every level it crosses (the hierarchical roofline) -----------------------

def level_points(pts: pd.DataFrame) -> pd.DataFrame:
    """Return one row per (point, level) whose bytes the point carries (l2_bytes, l1_bytes):
    src (the point's index), level, intensity = FLOPs / that level's bytes, and gflops."""
    parts = []
    for level, col in LEVEL_BYTE_COLUMNS.items():
        if col not in pts:
            continue
        nbytes = pd.to_numeric(pts[col], errors="coerce")
        has = nbytes > 0
        if has.any():
            sub = pts[has]
            parts.append(pd.DataFrame({"src": sub.index, "level": level, "intensity": sub["flops"] / nbytes[has],
                                       "gflops": sub["gflops"]}))
    if not parts:
        return pd.DataFrame(columns=["src", "level", "intensity", "gflops"])
    return pd.concat(parts, ignore_index=True)


def with_level_points(pts: pd.DataFrame) -> pd.DataFrame:
    """Return pts' intensity and gflops with every level point added (for limits and label avoidance)."""
    lv = level_points(pts)
    return pd.concat([pts[["intensity", "gflops"]], lv[["intensity", "gflops"]]], ignore_index=True) if len(lv) else pts


def draw_level_points(ax, pts: pd.DataFrame) -> pd.DataFrame:
    """Draw each point again at each level's intensity, in that level's colour, hollow and
    small, joined to the point by one thin grey line (as Nsight Compute's hierarchical
    roofline does); return the level points drawn."""
    lv = level_points(pts)
    if lv.empty:
        return lv
    xs, ys = [], []
    for src, g in lv.groupby("src"):
        line = sorted([float(pts.at[src, "intensity"])] + list(g["intensity"]))
        xs += line + [np.nan]
        ys += [float(pts.at[src, "gflops"])] * len(line) + [np.nan]
    ax.plot(xs, ys, color="0.6", lw=0.6, zorder=2.5, gid="levels:lines")
    for level, g in lv.groupby("level"):
        ax.scatter(g["intensity"], g["gflops"], marker="o", s=13, facecolors="white", lw=0.9,
                   edgecolors=level_color(level), zorder=3.5, gid=f"levels:{level}")
    return lv


def level_handles(lv: pd.DataFrame) -> list:
    """Return a legend entry for each level drawn by draw_level_points."""
    return [Line2D([], [], color="0.6", lw=0.6, marker="o", ms=4, mfc="white", mec=level_color(level),
                   label=f"same point at {level.upper()} intensity (its tiles' {level.upper()} bytes)")
            for level in sorted(set(lv["level"]), reverse=True)]


# ---- roofs ---------------------------------------------------------------------------------

def _roof_name(r: Roof) -> str:
    """Return a roof's name on a chart: a wider path's line as such, "fp8e4m3 via bf16" (shown_name)."""
    return shown_name(r)


def converted(model: Roofline) -> dict[str, str]:
    """Return {precision: why its own rows run below its roof} for each precision whose roof
    is a wider path it converts to on every call (extra.own_reason, roofs/analysis/model.py):
    its points are drawn however far under that line, and the chart says why."""
    return {r.name: str(r.extra["own_reason"]) for r in model.roofs
            if r.kind == "compute" and (r.extra or {}).get("own_reason")}


# what a reason code (extra.own_reason) means, in a chart's words
REASON_TEXT = {"converts_each_call": "converts its inputs on every call (no unit of its own)"}


def conversion_note(model: Roofline, shown=None) -> str:
    """Return a chart's footnote on the precisions whose own rows run below their roof's line
    (converted): "fp8e4m3, fp8e5m2: no unit of their own; their points sit under the line
    'fp8e4m3 via bf16' because each call converts its inputs"; "" without any (or none of
    shown, the precisions the chart draws points of)."""
    why = {p: c for p, c in converted(model).items() if shown is None or p in set(shown)}
    if not why:
        return ""
    lines = {shown_name(r) for r in model.roofs if r.name in why and r.kind == "compute"}
    return (f"{', '.join(sorted(why))}: their own points sit under the line{'s' if len(lines) > 1 else ''} "
            f"{', '.join(repr(x) for x in sorted(lines))}: each " + "; ".join(
                sorted({REASON_TEXT.get(c, c) for c in why.values()})) + ".")


def sustained_value(r: Roof) -> float | None:
    """Return a roof's sustained figure where it has one beside its burst figure
    (roofs/analysis/confirm.py), else None (a roof the sustained phase settled is its own value)."""
    extra = r.extra or {}
    sus = extra.get("sustained")
    return float(sus["value"]) if sus and extra.get("burst") is not None and sus.get("value") else None


def _roof_text(r: Roof, name: str) -> str:
    """Return a roof's label figure: the sustained and the burst where it has both."""
    sv = sustained_value(r)
    if sv is None:
        return f"{name} {_fmt_rate(r.value, r.unit)}"
    return f"{name} {_fmt_rate(sv, r.unit)} sustained, {_fmt_rate(r.value, r.unit)} burst"


def _bandwidth(model: Roofline, source: str = "measured") -> list[Roof]:
    """Return the memory-hierarchy bandwidth roofs (links excluded), fastest first."""
    levels = ("l1", "l2", "l3") + MEMORY_LEVELS
    return sorted((r for r in model.roofs if r.kind == "bandwidth" and r.source == source and r.name in levels),
                  key=lambda r: -r.value)


def _links(model: Roofline) -> list[Roof]:
    """Return the measured interconnect and host-link roofs (link.*, host.*), fastest first."""
    return sorted((r for r in model.roofs if r.kind == "bandwidth" and r.source == "measured"
                   and r.name.startswith(("link.", "host."))), key=lambda r: -r.value)


def _link_sets(model: Roofline) -> list[tuple[list[Roof], str]]:
    """Return the link roofs to draw, fastest first, each set with its label: every
    send/recv pair together (its fastest and slowest drawn: a node has dozens of pairs), each
    other link alone, links within 5% of each other sharing a label."""
    links = _links(model)
    pairs = [r for r in links if r.name.startswith("link.sendrecv")]
    out = []
    for group in _groups([r for r in links if r not in pairs], rel=0.05):
        out.append((group, f"{', '.join(r.name for r in group)} {_fmt_rate(group[0].value, 'GB/s')}"))
    if len(pairs) == 1:
        out.append((pairs, f"{pairs[0].name} {_fmt_rate(pairs[0].value, 'GB/s')}"))
    elif pairs:
        out.append(([pairs[0], pairs[-1]], f"link.sendrecv, {len(pairs)} pairs: "
                    f"{_fmt_rate(pairs[-1].value, 'GB/s')} to {_fmt_rate(pairs[0].value, 'GB/s')}"))
    return sorted(out, key=lambda item: -item[0][0].value)


def roof_windows(model: Roofline) -> list[tuple[str, int, int]]:
    """Return [(level, smallest, largest working set)] of the sizes each measured level roof
    is a statistic of, as the derivation recorded them (extra.window_bytes: for the off-chip
    level the outer half of its sizes past the last cache, not a multiple of a reported size),
    fastest level first; a roof derived before the window was recorded has none (nothing is
    guessed)."""
    out = []
    for r in _bandwidth(model):
        window = (r.extra or {}).get("window_bytes")
        if window and len(window) == 2:
            out.append((r.name, int(window[0]), int(window[1])))
    return out


def _compute(model: Roofline, precisions=None, sources=("measured",)) -> list[Roof]:
    out = [r for r in model.roofs if r.kind == "compute" and r.source in sources
           and (precisions is None or r.name in precisions)]
    seen, unique = set(), []
    for r in sorted(out, key=lambda r: -r.value):
        key = (r.name, round(r.value, 6))
        if key not in seen:  # the same roof listed twice
            seen.add(key)
            unique.append(r)
    return unique


def _groups(roofs: list[Roof], rel: float = 0.01) -> list[list[Roof]]:
    """Return roofs grouped by value (within rel): one line and one label per group."""
    groups: list[list[Roof]] = []
    for r in sorted(roofs, key=lambda r: -r.value):
        if groups and r.value >= (1 - rel) * groups[-1][0].value:
            groups[-1].append(r)
        else:
            groups.append([r])
    return groups


def _limits(pts: pd.DataFrame, model: Roofline, precisions=None, flats: bool = True, tight: bool = False):
    """Return (lo_x, hi_x, lo_y, hi_y) covering the points, the ridges and the drawn roofs;
    the overview (not tight) spans at least 1e-2 to 100 FLOP/byte."""
    bws = _bandwidth(model)
    peaks = [r.value for r in _compute(model, precisions, ("measured", "datasheet", "computed"))] if flats else []
    ridges = [p / b.value for p in peaks for b in bws]
    xs = list(pts["intensity"]) + ridges
    lo_x = min(xs) / 4 if xs else 1e-2
    hi_x = max(xs) * 4 if xs else 1e3
    if flats and not tight:
        lo_x, hi_x = min(lo_x, 1e-2), max(hi_x, 100)
    ys = list(pts["gflops"]) + peaks
    hi_y = max(ys) * 3 if ys else 1e3
    lo_y = min(list(pts["gflops"]) + ([min(b.value for b in bws) * lo_x * 3] if bws else [])) / 4 \
        if len(pts) or bws else 1e-3
    return lo_x, hi_x, max(lo_y, hi_y * 1e-7), hi_y


# A best point under this share of its own attainable bound (an fp8 GEMM on a CPU's slow
# path, at 0.01 GFLOP/s) would stretch the overview's y axis over decades that hold nothing
# else: the overview leaves it off and its footnote names it (report.md lists every point).
FAR_UNDER_BOUND = 1e-3


def far_under_bound(pts: pd.DataFrame, keep=()) -> pd.Series:
    """Return which rows run under FAR_UNDER_BOUND of their attainable bound (rows without
    a bound: never), but those of the precisions in keep (converted: a precision converted on
    every call runs far under its line by its nature, and the chart shows it and says why)."""
    bound = pd.to_numeric(text_column(pts, "attainable_gflops"), errors="coerce")
    mine = text_column(pts, "precision").isin(set(keep))
    return (bound > 0) & (pts["gflops"] < bound * FAR_UNDER_BOUND) & ~mine


def _off_decade(v: float, margin: float = 0.25) -> float:
    """Return v, or a lower value when v sits just under a power of ten: a tick there would
    print its label at the axes' bottom-left corner, onto the x axis's first label."""
    exp = np.log10(v)
    frac = exp - np.floor(exp)
    return 10 ** (np.floor(exp) - margin) if frac < margin else v


def _finish_axes(ax, lims) -> None:
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lims[0], lims[1])
    ax.set_ylim(_off_decade(lims[2]), lims[3])
    ax.grid(True, which="major", alpha=0.25)
    ax.grid(True, which="minor", alpha=0.08)


# ---- the charts ----------------------------------------------------------------------------

def _bottom_legend(fig, handles, max_cols: int) -> float:
    """Put one legend for the whole figure along its bottom, in as many columns (up to
    max_cols) as fit the figure's width; return the fraction of the height it takes."""
    renderer = fig.canvas.get_renderer()
    for ncol in range(min(max_cols, len(handles)), 0, -1):
        leg = fig.legend(handles=handles, fontsize=8, loc="lower center", ncol=ncol, frameon=False)
        box = leg.get_window_extent(renderer)
        if box.width <= 0.98 * fig.bbox.width or ncol == 1:
            return (box.height + 6) / fig.bbox.height
        leg.remove()
    return 0.0


def final_layout(fig) -> None:
    """Say that fig's layout is final: drop the placeholder layout engine that fig.tight_layout()
    leaves behind, with which savefig draws the whole figure once more, without rendering it,
    before the draw it saves (a sixth of a chart's saving time, for the same pixels)."""
    if isinstance(fig.get_layout_engine(), PlaceHolderLayoutEngine):
        fig.set_layout_engine(None)


def save_png(fig, path, dpi: int = DPI) -> Path:
    """Save fig as PNG at path (its layout final: final_layout); return path."""
    final_layout(fig)
    fig.savefig(path, dpi=dpi)
    return Path(path)


def fit_legends(fig, margin: float = 4.0) -> None:
    """After tight_layout: narrow the axes until every legend of theirs (a second one, added
    as an artist, is not in tight_layout's sums) ends margin pixels inside the figure's right edge."""
    renderer = fig.canvas.get_renderer()
    right = max((c.get_window_extent(renderer).x1 for ax in fig.axes for c in ax.get_children()
                 if isinstance(c, Legend)), default=0.0)
    overflow = right + margin - fig.bbox.width
    if overflow > 0:
        fig.subplots_adjust(right=fig.subplotpars.right - overflow / fig.bbox.width)
