"""The plot modules' shared kit: colours and markers (one meaning each), the label placer
that keeps texts from overprinting, and the helpers every chart uses (points, limits, the
roofs drawn as slopes and flats). Reads only a run's records; draws nothing by itself.
"""
from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from bench.results import LEVEL_BYTE_COLUMNS, Run, text_column  # noqa: E402
from bench.util import fmt_bytes, offchip_level
from roofs.analysis.checks import is_above  # noqa: E402
from roofs.analysis.roofline import MEMORY_LEVELS, Roof, Roofline  # noqa: E402

DPI = 120
FLAG_COLOR = "red"  # only ever "above its attainable bound"

# overview: one colour per family
FAMILY_COLORS = {"stream": "tab:blue", "gemm": "tab:orange", "gemv": "tab:green", "attention": "tab:purple",
                 "user": "tab:brown", "transfer": "tab:gray", "comm": "tab:gray"}
# one marker per precision (stream points: their element type); fp8 variants share one
PRECISION_MARKERS = {"fp64": "D", "fp32": "o", "tf32": "h", "fp16": "s", "bf16": "^", "fp8e4m3": "v",
                     "fp8e5m2": "v", "fp8": "v", "int8": "P", "int4": "X", "int32": "p"}
MARKER_NAMES = {"v": "fp8 (e4m3, e5m2)"}
ELEMENT_PRECISION = {"float64": "fp64", "float32": "fp32", "float16": "fp16", "bfloat16": "bf16",
                     "int32": "int32", "int8": "int8"}
# family charts: gemm colours by precision (no red: red is the flag)
PRECISION_COLORS = {"fp64": "tab:gray", "fp32": "tab:blue", "tf32": "tab:cyan", "fp16": "tab:orange",
                    "bf16": "tab:brown", "fp8e4m3": "tab:purple", "fp8e5m2": "tab:pink", "fp8": "tab:purple",
                    "int8": "tab:green", "int4": "tab:olive"}
# stream charts: colour by op, or by the memory level a working set fits in
OP_COLORS = {"copy": "tab:blue", "scale": "tab:orange", "add": "tab:green", "triad": "tab:purple",
             "read": "tab:brown", "write": "tab:pink", "reread": "tab:cyan"}
LEVEL_COLORS = {"l1": "tab:purple", "l2": "tab:green", "l3": "tab:blue", "dram": "black", "hbm": "black"}
LEVEL_GREYS = {"l1": "0.62", "l2": "0.5", "l3": "0.35", "dram": "black", "hbm": "black"}
IMPL_MARKERS = {"torch": "o", "triton": "^", "numpy": "s", "torch_best": "D", "triton_rows": ">",
                "triton_tile": "<", "sdpa": "o", "torch_math": "s"}
IMPL_STYLES = {"torch": "-", "numpy": "-.", "triton": ":", "torch_best": "-.", "triton_rows": ":", "triton_tile": "--"}
OP_STYLES = {"gemm.square": "-", "gemm.skinny": "--", "gemm.search": "none"}
# series (GEMV layers, attention op/impl): the tab10/tab20 colours without their reds
SERIES_COLORS = ([c for i, c in enumerate(plt.get_cmap("tab10").colors) if i != 3],
                 [c for i, c in enumerate(plt.get_cmap("tab20").colors) if i not in (6, 7)])
LABEL_SIZE = 7
LABEL_BOX = dict(boxstyle="square,pad=0.1", fc="white", ec="none", alpha=0.8)


# ---- texts and the label placer --------------------------------------------------------

@contextlib.contextmanager
def _recording_texts(into: list):
    """Within the block, every Text that draws itself (visible, non-empty) is appended to into."""
    original = Text.draw

    @functools.wraps(original)
    def draw(self, renderer):
        if self.get_visible() and self.get_text().strip():
            into.append(self)
        return original(self, renderer)

    Text.draw = draw
    try:
        yield
    finally:
        Text.draw = original


def drawn_texts(fig) -> list[Text]:
    """Lay fig out as a draw would, without rasterizing it, and return every Text that
    drawing put on it (tick labels of ticks outside the view, empty and invisible texts
    excluded), in drawing order."""
    texts: list[Text] = []
    with _recording_texts(texts):
        fig.draw_without_rendering()
    seen, out = set(), []
    for t in texts:
        if id(t) not in seen:
            seen.add(id(t))
            out.append(t)
    return out


# Where a label sits relative to its anchor: (horizontal, vertical) placement of its box.
# "e": right of the anchor, centred on it; "nw": above and left; ...
_SIDES = {"e": (1, 0), "w": (-1, 0), "ne": (1, 1), "nw": (-1, 1), "se": (1, -1), "sw": (-1, -1),
          "n": (0, 1), "s": (0, -1)}


@dataclass
class _Request:
    ax: object
    x: float
    y: float
    text: str
    sides: tuple
    leader: bool
    kw: dict
    near: float | None
    gap: float | None


def _nearest_free(want: float, lo: float, hi: float, blocked: list) -> float | None:
    """Return the value in [lo, hi] nearest want that lies in none of the open intervals
    blocked, or None when there is none."""
    merged: list[list[float]] = []
    for a, b in sorted(blocked):
        if merged and a < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    candidates = [c for c in [want, lo, hi] + [v for ab in merged for v in ab] if np.isfinite(c)]
    free = [c for c in candidates if lo <= c <= hi and not any(a < c < b for a, b in merged)]
    return min(free, key=lambda c: abs(c - want)) if free else None


class LabelPlacer:
    """Places text labels so that none overprints another text of the figure.

    Add every label with add(); after the figure's layout is final (tight_layout done, axis
    limits set), place() draws the canvas once, takes every text already drawn (titles,
    tick labels, legends) and each legend box as fixed, then puts the labels one by one, in
    the order added: each on the first of its sides, or another, moved vertically by the
    least amount that keeps its box (display coordinates) clear of every fixed and already
    placed box by `pad` pixels. A label stays inside its axes when it can, and keeps clear
    of the anchors (the labelled points) when it can; it always ends clear of every text.
    A label moved away from its point gets a thin leader line to it."""

    def __init__(self, fig, pad: float = 2.0, gap: float = 3.0):
        self.fig, self.pad, self.gap = fig, pad, gap
        self.requests: list[_Request] = []
        self.texts: list[Text] = []
        self.points: list[tuple] = []

    def avoid(self, ax, xs, ys, size: float = 4.0) -> None:
        """Keep labels off these data points of ax when there is room (markers of size px)."""
        self.points.append((ax, np.asarray(xs, float), np.asarray(ys, float), size))

    def add(self, ax, x: float, y: float, text: str, sides=("e", "w"), leader: bool = True,
            near: float | None = None, gap: float | None = None, **kw) -> None:
        """Ask for text to be placed by the data point (x, y) of ax, on one of sides, gap
        pixels from it (wider than the marker there); near: keeping off the data points may
        move it at most this many label heights (a roof's label belongs by its line more
        than it must keep off points)."""
        if np.isfinite(x) and np.isfinite(y) and text:
            self.requests.append(_Request(ax, float(x), float(y), text, tuple(sides), leader, kw, near, gap))

    def place(self) -> list[Text]:
        if not self.requests:
            return []
        fig = self.fig
        fixed = drawn_texts(fig)
        renderer = fig.canvas.get_renderer()
        boxes = [t.get_window_extent(renderer) for t in fixed]
        boxes += [leg.get_window_extent(renderer) for leg in
                  [ax.get_legend() for ax in fig.axes] + list(fig.legends) if leg is not None]
        placed = [(b.x0, b.y0, b.x1, b.y1) for b in boxes]
        anchors = [r.ax.transData.transform((r.x, r.y)) for r in self.requests]
        soft = {r.ax: [] for r in self.requests}
        for ax, xs, ys, size in self.points:
            if ax in soft and len(xs):
                for qx, qy in ax.transData.transform(np.column_stack([xs, ys])):
                    soft[ax].append((qx - size, qy - size, qx + size, qy + size))
        for r, (qx, qy) in zip(self.requests, anchors):
            soft[r.ax].append((qx - 4, qy - 4, qx + 4, qy + 4))
        fw, fh = fig.bbox.width, fig.bbox.height
        for req, (px, py) in zip(self.requests, anchors):
            kw = dict(fontsize=LABEL_SIZE, bbox=LABEL_BOX, zorder=6, clip_on=False) | req.kw
            t = req.ax.text(req.x, req.y, req.text, ha="left", va="bottom", **kw)
            bb = t.get_window_extent(renderer)
            w, h = bb.width, bb.height
            dx0, dy0 = bb.x0 - px, bb.y0 - py  # the box's corner relative to the text's position
            axb = req.ax.get_window_extent(renderer)
            gap = self.gap if req.gap is None else req.gap
            near = [s for s in soft[req.ax] if not (s[0] <= px <= s[2] and s[1] <= py <= s[3])]
            # inside the axes and off the points; inside the axes; inside the figure; anywhere
            # (the last always has room: above the highest box in the label's column)
            tiers = ((placed + near, (axb.x0, axb.y0, axb.x1, axb.y1)),
                     (placed, (axb.x0, axb.y0, axb.x1, axb.y1)),
                     (placed, (0, 0, fw, fh)),
                     (placed, (-np.inf, -np.inf, np.inf, np.inf)))
            best = None
            for tier, (obstacles, (bx0, by0, bx1, by1)) in enumerate(tiers):
                for rank, side in enumerate(req.sides):
                    sx, sy = _SIDES[side]
                    x0 = px + (gap if sx > 0 else -gap - w if sx < 0 else -w / 2)
                    want = py + (gap if sy > 0 else -gap - h if sy < 0 else -h / 2)
                    shift = min(max(x0, bx0), bx1 - w) - x0  # slid sideways to fit its bounds
                    if bx1 - bx0 < w:
                        continue
                    x0 += shift
                    blocked = [(oy0 - h - self.pad, oy1 + self.pad) for ox0, oy0, ox1, oy1 in obstacles
                               if ox0 - self.pad < x0 + w and ox1 + self.pad > x0]
                    y0 = _nearest_free(want, by0, by1 - h, blocked)
                    if y0 is not None and not (tier == 0 and req.near is not None and abs(y0 - want) > req.near * h):
                        cost = abs(y0 - want) + abs(shift) + 12 * rank
                        if best is None or cost < best[0]:
                            best = (cost, x0, y0)
                if best is not None:
                    break
            _, x0, y0 = best
            t.set_position(req.ax.transData.inverted().transform((x0 - dx0, y0 - dy0)))
            placed.append((x0, y0, x0 + w, y0 + h))
            self.texts.append(t)
            if req.leader and not (x0 - gap - 1 <= px <= x0 + w + gap + 1 and y0 - gap - 1 <= py <= y0 + h + gap + 1):
                ex, ey = min(max(px, x0), x0 + w), min(max(py, y0), y0 + h)
                inv = req.ax.transData.inverted()
                (lx0, ly0), (lx1, ly1) = inv.transform((px, py)), inv.transform((ex, ey))
                req.ax.add_artist(Line2D([lx0, lx1], [ly0, ly1], lw=0.5, color=kw.get("color", "0.3"),
                                         alpha=0.7, zorder=5, clip_on=False))
        return self.texts


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


def _points(df: pd.DataFrame) -> pd.DataFrame:
    """Return the successful rows that do FLOPs (the ones a roofline can place), with
    `fmt`: the precision, or the element type for rows without one."""
    ok = df[(df["status"] == "ok") & (df["flops"] > 0) & (df["gflops"] > 0) & (df["intensity"] > 0)].copy()
    prec = text_column(ok, "precision")
    ok["fmt"] = prec.where(prec != "", ok["dtype"].map(lambda d: ELEMENT_PRECISION.get(d, d)))
    ok["flagged"] = is_above(text_column(ok, "flag"))  # a busy flag alone is not drawn red
    ok["boundary"] = text_column(ok, "boundary")
    return ok


def roofline_points(df: pd.DataFrame) -> pd.DataFrame:
    """Return the best (highest GFLOP/s) row of each (op, impl, precision) among the rows a
    roofline can place; rows without a precision (stream) group by (op, impl)."""
    pts = _points(df)
    if pts.empty:
        return pts
    key = text_column(pts, "precision")
    idx = pts.assign(_key=key).groupby(["op", "impl", "_key"])["gflops"].idxmax()
    return pts.loc[idx].reset_index(drop=True)


def _series_colors(keys) -> dict:
    """Return a colour (never red) for each key, in order."""
    keys = list(keys)
    palette = SERIES_COLORS[0] if len(keys) <= len(SERIES_COLORS[0]) else SERIES_COLORS[1]
    return {k: palette[i % len(palette)] for i, k in enumerate(keys)}


def _level_of(ws: float, caches, memory: str) -> str:
    """Return the smallest level the working set fits in (innermost cache first)."""
    for name, size in caches:
        if ws <= size:
            return name
    return memory


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
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["src", "level", "intensity", "gflops"])


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
                   edgecolors=LEVEL_COLORS.get(level, "0.4"), zorder=3.5, gid=f"levels:{level}")
    return lv


def level_handles(lv: pd.DataFrame) -> list:
    """Return a legend entry for each level drawn by draw_level_points."""
    return [Line2D([], [], color="0.6", lw=0.6, marker="o", ms=4, mfc="white", mec=LEVEL_COLORS.get(level, "0.4"),
                   label=f"same point at {level.upper()} intensity (its tiles' {level.upper()} bytes)")
            for level in sorted(set(lv["level"]), reverse=True)]


# ---- roofs ---------------------------------------------------------------------------------

def _roof_name(r: Roof) -> str:
    via = (r.extra or {}).get("via")
    return f"{r.name} (via {via})" if via and " via " not in r.name else r.name


def sustained_value(r: Roof) -> float | None:
    """Return a roof's sustained figure where it has one beside its burst figure
    (roofs/analysis/sustained.py), else None (a roof the sustained phase settled is its own value)."""
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


def _draw_roofs(ax, placer: LabelPlacer, model: Roofline, lo_x: float, hi_x: float, lo_y: float,
                hi_y: float, precisions=None, compute_color=None, level_colors=LEVEL_GREYS,
                flats: bool = True, links: bool = False) -> None:
    """Draw the bandwidth slopes, each running up to the highest drawn compute roof (so it
    meets every precision's roof), the measured flats from the ridge with the fastest
    level, the datasheet/computed roofs dashed and, with links, the interconnect and host
    links as dotted slopes (roofs within 5% of each other share one label); labels go to
    placer. A roof with a sustained figure (ARCHITECTURE.md, rule 14) is drawn solid at it,
    its burst figure as a thin line beside it (gid ...:burst)."""
    bws = _bandwidth(model)
    measured = _compute(model, precisions) if flats else []
    refs = _compute(model, {r.name for r in measured}, ("datasheet", "computed")) if flats else []
    top = max((r.value for r in measured), default=None)
    fastest = bws[0].value if bws else None
    labels = []  # (bandwidth, text, colour, sides) of each slope's label

    def slope(r: Roof | float, upto: float | None, gid: str, **style) -> None:
        value = r if isinstance(r, float) else r.value
        end = min(hi_x, upto / value) if upto else hi_x
        ax.plot([lo_x, end], [value * lo_x, value * end], zorder=2, gid=gid, **style)

    for r in bws:
        mem = r.name in MEMORY_LEVELS
        color, sv = level_colors.get(r.name, "0.4"), sustained_value(r)
        slope(sv or r.value, top, f"slope:{r.name}", color=color, lw=2 if mem else 1.3)
        if sv is not None:
            slope(r, top, f"slope:{r.name}:burst", color=color, lw=0.7, alpha=0.7)
        labels.append((sv or r.value, _roof_text(r, r.name.upper()), level_colors.get(r.name, "0.3"), ("nw", "se")))
    ref_top = max((x.value for x in refs), default=top)
    for r in _bandwidth(model, "datasheet"):
        slope(r, ref_top, f"slope:{r.name}:datasheet", color="0.45", lw=1, ls="--")
        labels.append((r.value, f"{r.name.upper()} {_fmt_rate(r.value, 'GB/s')} datasheet", "0.35", ("nw", "se")))
    for group, text in (_link_sets(model) if links else []):
        for r in group:
            slope(r, top, f"slope:{r.name}", color="0.55", lw=0.9, ls=":")
        labels.append((group[-1].value, text, "0.45", ("se", "nw")))
    # each label at the foot of its slope, each a step higher than the one before (slowest
    # first: it sits furthest right), so each touches its own line and no other label
    for k, (bw, text, color, sides) in enumerate(sorted(labels, key=lambda lab: lab[0])):
        upto = top if top else np.inf
        xa = min(max(lo_y * (hi_y / lo_y) ** (0.08 + 0.05 * k) / bw, lo_x * 1.6), upto / bw, hi_x)
        placer.add(ax, xa, bw * xa, text, sides=sides, leader=False, near=1.5, color=color)
    right = hi_x / (hi_x / lo_x) ** 0.004  # a little inside the right spine
    for group in _groups(measured):
        r = group[0]
        start = max(r.value / fastest if fastest else lo_x, lo_x)
        color = compute_color(r.name) if compute_color else "black"
        for g in group:
            sv = sustained_value(g)
            ax.hlines(sv or g.value, start, hi_x, color=color, lw=1.6, zorder=2, gid=f"flat:{g.name}")
            if sv is not None:
                ax.hlines(g.value, start, hi_x, color=color, lw=0.7, alpha=0.7, zorder=2, gid=f"flat:{g.name}:burst")
        names = ", ".join(_roof_name(g) for g in group)
        placer.add(ax, right, r.value, _roof_text(r, names), sides=("nw", "sw"),
                   leader=False, near=1.5, color=color)
    for source in ("datasheet", "computed"):
        for group in _groups([r for r in refs if r.source == source]):
            r = group[0]
            start = max(r.value / fastest if fastest else lo_x, lo_x)
            color = compute_color(r.name) if compute_color else "0.35"
            for g in group:
                ax.hlines(g.value, start, hi_x, color=color, lw=0.9, ls="--", alpha=0.8, zorder=2,
                          gid=f"flat:{g.name}:{source}")
            names = ", ".join(g.name for g in group)
            placer.add(ax, start * 1.05, r.value, f"{names} {_fmt_rate(r.value, r.unit)} {source}",
                       sides=("ne", "se"), leader=False, near=1.5, color=color)


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


def far_under_bound(pts: pd.DataFrame) -> pd.Series:
    """Return which rows run under FAR_UNDER_BOUND of their attainable bound (rows without
    a bound: never)."""
    bound = pd.to_numeric(text_column(pts, "attainable_gflops"), errors="coerce")
    return (bound > 0) & (pts["gflops"] < bound * FAR_UNDER_BOUND)


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
