"""Pictures of a run. Reads only the run folder's files; never runs a kernel.

roofline.png            The overview, log-log FLOP/s against FLOP/byte. Roofs: each measured
                        bandwidth roof (the off-chip memory and each cache level) as a slope
                        that runs up to the highest compute roof, so it meets every
                        precision's roof; one flat per measured precision from its ridge with
                        the fastest level (a roof borrowed from a wider precision is labelled
                        "fp16 (via fp32)"); datasheet and computed roofs dashed; interconnect
                        and host links dotted. Points: the best point of each (op, impl,
                        precision), labelled; colour = family, marker = precision (a stream
                        point's: its element type); one legend.
roofline-stream.png     Every stream point that does FLOPs, coloured by the smallest memory
                        level its working set fits in, under the slopes of those levels.
roofline-gemm.png       Every GEMM point, coloured by precision like the flat roof that bounds
                        it; each sweep (square, skinny) joined in order.
roofline-gemv.png       Every decode GEMV point, one panel per weight format: each layer's batch
                        walk (B = 1, 2, ... 256, from the "BxNxK" shape) joined by a line, the
                        batch marked along the top.
roofline-attention.png  Every attention point, coloured by op and impl.
                        A family chart is drawn only when the run has points of that family.
bandwidth.png           GB/s against working-set size, one panel per dtype: a line per kernel,
                        the cache sizes, the sizes of at least 4x the last-level cache (the
                        only ones the off-chip roof comes from) shaded, the roofs derived from
                        that dtype's rows alone (roofs.derive.bandwidth_roofs) over their
                        plateaus, and the run's overall roof of each level thin and grey.
gemm.png                GFLOP/s against size per precision: the square sweep, and the skinny
                        sweep beside its attainable bound min(P, BW x I).
links.png               Interconnect and host-link GB/s against message size (runs with such rows).

In every chart a colour means one thing (its legend says which), and red is kept for
points above their attainable bound beyond their spread (the flag column): ringed, and
labelled so on the overview. Rows may carry `boundary` (the memory level whose roof bounds
the point); where it names a cache, GEMV and attention points are drawn hollow. Runs
written before that column draw all the same.

No two texts overprint: LabelPlacer puts each label by its point or roof and moves it
(vertically, or to the point's other side) until its box, measured in display coordinates
after a canvas draw, meets no other text. `figures(run)` returns the charts unsaved, and
`drawn_texts(fig)` lists the texts a draw puts on a figure, so a test can check that.
`plot_run` draws the charts of a run folder in forked worker processes, one per core
(the charts are independent and the measuring is over): the files are the same bytes.
"""
from __future__ import annotations

import contextlib
import functools
import multiprocessing
import os
import re
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from bench.results import Run, load_run  # noqa: E402
from roofs.derive import DRAM_FACTOR, bandwidth_roofs  # noqa: E402
from roofs.model import MEMORY_LEVELS, Roof, Roofline  # noqa: E402

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
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n:g} B"


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
    return "hbm" if run.device.get("kind") == "cuda" else "dram"


def _caches(run: Run) -> list[tuple[str, int]]:
    return [(str(c["name"]), int(c["total_bytes"])) for c in run.device.get("caches", []) if c.get("total_bytes")]


def _column(df: pd.DataFrame, name: str) -> pd.Series:
    """Return a text column, empty strings where the run predates it."""
    return df[name].fillna("").astype(str) if name in df else pd.Series("", index=df.index)


def _points(df: pd.DataFrame) -> pd.DataFrame:
    """Return the successful rows that do FLOPs (the ones a roofline can place), with
    `fmt`: the precision, or the element type for rows without one."""
    ok = df[(df["status"] == "ok") & (df["flops"] > 0) & (df["gflops"] > 0) & (df["intensity"] > 0)].copy()
    prec = _column(ok, "precision")
    ok["fmt"] = prec.where(prec != "", ok["dtype"].map(lambda d: ELEMENT_PRECISION.get(d, d)))
    ok["flagged"] = _column(ok, "flag") != ""
    ok["boundary"] = _column(ok, "boundary")
    return ok


def best_points(df: pd.DataFrame) -> pd.DataFrame:
    """Return the best (highest GFLOP/s) row of each (op, impl, precision) among the rows a
    roofline can place; rows without a precision (stream) group by (op, impl)."""
    pts = _points(df)
    if pts.empty:
        return pts
    key = _column(pts, "precision")
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


# ---- roofs ---------------------------------------------------------------------------------

def _roof_name(r: Roof) -> str:
    via = (r.extra or {}).get("via")
    return f"{r.name} (via {via})" if via else r.name


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
    placer."""
    bws = _bandwidth(model)
    measured = _compute(model, precisions) if flats else []
    refs = _compute(model, {r.name for r in measured}, ("datasheet", "computed")) if flats else []
    top = max((r.value for r in measured), default=None)
    fastest = bws[0].value if bws else None
    labels = []  # (bandwidth, text, colour, sides) of each slope's label

    def slope(r: Roof, upto: float | None, gid: str, **style) -> None:
        end = min(hi_x, upto / r.value) if upto else hi_x
        ax.plot([lo_x, end], [r.value * lo_x, r.value * end], zorder=2, gid=gid, **style)

    for r in bws:
        mem = r.name in MEMORY_LEVELS
        slope(r, top, f"slope:{r.name}", color=level_colors.get(r.name, "0.4"), lw=2 if mem else 1.3)
        labels.append((r.value, f"{r.name.upper()} {_fmt_rate(r.value, 'GB/s')}", level_colors.get(r.name, "0.3"),
                       ("nw", "se")))
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
            ax.hlines(g.value, start, hi_x, color=color, lw=1.6, zorder=2, gid=f"flat:{g.name}")
        names = ", ".join(_roof_name(g) for g in group)
        placer.add(ax, right, r.value, f"{names} {_fmt_rate(r.value, r.unit)}", sides=("nw", "sw"),
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

def draw_roofline(run: Run):
    """Return the overview roofline figure (see the module docstring)."""
    model = Roofline(run.roofs)
    best = best_points(run.measurements)
    fig, ax = plt.subplots(figsize=(12.5, 7.5), dpi=DPI)
    placer = LabelPlacer(fig)
    lims = _limits(best, model)
    _draw_roofs(ax, placer, model, *lims, links=True)
    for (family, fmt), g in best.groupby(["family", "fmt"]):
        ax.scatter(g["intensity"], g["gflops"], color=FAMILY_COLORS.get(family, "tab:gray"),
                   marker=PRECISION_MARKERS.get(fmt, "*"), s=46, edgecolors="white", linewidths=0.5, zorder=4,
                   gid=f"points:{family}:{fmt}")
    _ring_flagged(ax, best)
    placer.avoid(ax, best["intensity"], best["gflops"])
    for r in best.sort_values("gflops", ascending=False).itertuples():
        label = f"{_short(r.op)}/{_impl_name(r.impl)}"
        if r.precision:
            label += f" {r.dtype} weights" if r.family == "gemv" and r.dtype != r.precision else f" {r.precision}"
        placer.add(ax, r.intensity, r.gflops, label + (" (above its bound)" if r.flagged else ""),
                   color=FLAG_COLOR if r.flagged else FAMILY_COLORS.get(r.family, "tab:gray"), gid="label:point", gap=7)
    _finish_axes(ax, lims)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("GFLOP/s (1e9 FLOP/s; GOP/s for int8), median")
    ax.set_title(_title(run, "Roofline"))
    handles = [Patch(color=FAMILY_COLORS.get(f, "tab:gray"), label=f) for f in sorted(best["family"].unique())]
    handles += _marker_handles(best["fmt"].unique())
    if best["flagged"].any():
        handles.append(_flag_handle())
    if handles:
        ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1), title="colour: family\n"
                  "marker: precision", title_fontsize=8, alignment="left")
    flagged = int(_points(run.measurements)["flagged"].sum())
    fig.text(0.01, 0.012, "Best point of each (op, impl, precision); every stream, GEMM, GEMV and attention point "
             "is in roofline-<family>.png. "
             "Solid: measured roofs (slopes: bandwidth of each level, up to every compute roof); dashed: datasheet "
             "or computed" + ("; dotted: links" if _links(model) else "") + ".\ncopy and write do no FLOPs "
             "(see bandwidth.png). "
             + (f"{flagged} points sit above their attainable bound beyond their spread: ringed red here when one "
                "is a best point, and in the family charts." if flagged else ""),
             fontsize=7, color="dimgray", va="bottom")
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    placer.place()
    return fig


def _family_points(run: Run, family: str):
    """Return (the family's points that do FLOPs, the run's Roofline), or (None, None)
    when the family has none: each per-family chart starts here."""
    pts = _points(run.measurements)
    pts = pts[pts["family"] == family]
    return (None, None) if pts.empty else (pts, Roofline(run.roofs))


def draw_stream_roofline(run: Run):
    """Return roofline-stream.png's figure, or None without stream points that do FLOPs."""
    pts, model = _family_points(run, "stream")
    if pts is None:
        return None
    caches, memory = _caches(run), _memory_level(run)
    pts = pts.assign(level=[_level_of(w, caches, memory) for w in pts["working_set_bytes"]],
                     impl_name=pts["impl"].map(_impl_name))
    fig, ax = plt.subplots(figsize=(11, 7), dpi=DPI)
    placer = LabelPlacer(fig)
    lims = _limits(pts, model, flats=False)
    _draw_roofs(ax, placer, model, *lims, level_colors=LEVEL_COLORS, flats=False)
    order = [n for n, _ in caches] + [memory]
    for (level, impl), g in pts.groupby(["level", "impl_name"]):
        ax.scatter(g["intensity"], g["gflops"], color=LEVEL_COLORS.get(level, "0.5"),
                   marker=IMPL_MARKERS.get(impl, "*"),
                   s=22, alpha=0.8, zorder=3, gid=f"points:{level}:{impl}")
    _ring_flagged(ax, pts, s=70)
    placer.avoid(ax, pts["intensity"], pts["gflops"])
    for (op, dtype), g in pts.groupby(["op", "dtype"]):
        top = g.loc[g["gflops"].idxmax()]
        placer.add(ax, top["intensity"], top["gflops"], f"{_short(op)} {ELEMENT_PRECISION.get(dtype, dtype)}",
                   sides=("n", "e", "w"), color="0.2", gap=5)
    _finish_axes(ax, lims)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("GFLOP/s (1e9 FLOP/s), median")
    ax.set_title(_title(run, "Stream kernels on the roofline"))
    sizes = dict(caches)
    handles = [Patch(color=LEVEL_COLORS.get(lv, "0.5"),
                     label=f"working set fits {lv.upper()} ({_fmt_bytes(sizes[lv])})" if lv in sizes
                     else f"working set beyond the caches ({lv.upper()})")
               for lv in order if lv in set(pts["level"])]
    handles += [Line2D([], [], ls="none", marker=IMPL_MARKERS.get(i, "*"), color="0.35", label=i)
                for i in sorted(pts["impl_name"].unique())]
    if pts["flagged"].any():
        handles.append(_flag_handle())
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.text(0.01, 0.012, "Every stream point that does FLOPs, one column per op and element type (sizes stacked). "
             "Slopes: the measured roof of each level, in that level's colour. copy and write do no FLOPs: see "
             "bandwidth.png.", fontsize=7, color="dimgray", va="bottom")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    placer.place()
    return fig


def draw_gemm_roofline(run: Run):
    """Return roofline-gemm.png's figure, or None without GEMM points."""
    pts, model = _family_points(run, "gemm")
    if pts is None:
        return None
    pts = pts.assign(impl_name=pts["impl"].map(_impl_name))
    precisions = set(pts["fmt"])
    fig, ax = plt.subplots(figsize=(12, 7.5), dpi=DPI)
    placer = LabelPlacer(fig)
    lims = _limits(pts, model, precisions, tight=True)
    color = lambda p: PRECISION_COLORS.get(p, "0.4")  # noqa: E731
    _draw_roofs(ax, placer, model, *lims, precisions=precisions, compute_color=color)
    for (op, impl, fmt), g in pts.groupby(["op", "impl_name", "fmt"]):
        g = g.sort_values("intensity")
        ax.plot(g["intensity"], g["gflops"], color=color(fmt), ls=OP_STYLES.get(op, ":"), lw=1,
                marker=IMPL_MARKERS.get(impl, "*"), ms=5, alpha=0.85, zorder=3, gid=f"points:{op}:{impl}:{fmt}")
    _ring_flagged(ax, pts, s=80)
    placer.avoid(ax, pts["intensity"], pts["gflops"])
    _finish_axes(ax, lims)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("GFLOP/s (1e9 FLOP/s; GOP/s for int8), median")
    ax.set_title(_title(run, "GEMM on the roofline"))
    handles = [Patch(color=color(p), label=p) for p in sorted(precisions, key=_order(PRECISION_COLORS))]
    handles += [Line2D([], [], ls="none", marker=IMPL_MARKERS.get(i, "*"), color="0.35", label=i)
                for i in sorted(pts["impl_name"].unique())]
    handles += [Line2D([], [], ls=OP_STYLES.get(o, ":"), marker="." if OP_STYLES.get(o) == "none" else None,
                       color="0.35", label=_short(o)) for o in sorted(pts["op"].unique())]
    if pts["flagged"].any():
        handles.append(_flag_handle())
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1),
              title="colour: precision (and its roof)\nmarker: impl, line: sweep", title_fontsize=8, alignment="left")
    fig.text(0.01, 0.012, "Every GEMM point; each sweep joined in order of intensity (square: N grows; "
             "skinny: M grows). "
             "Solid flats: measured roofs; dashed: datasheet or computed.", fontsize=7, color="dimgray", va="bottom")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    placer.place()
    return fig


_GEMV_FORMATS = ("fp16", "bf16", "fp8", "fp8e4m3", "int8", "int4")


def _layer(shape: str) -> str:
    """'16x4096x14336' (B x N x K) -> '4096x14336' (N x K)."""
    parts = str(shape).split("x")
    return "x".join(parts[1:]) if len(parts) == 3 else str(shape)


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


def _spaced_ticks(ax, positions, labels, fontsize: float) -> list[tuple[float, str]]:
    """Return the (position, label) pairs, left to right, that a log x axis of ax can print
    without two labels touching (a label is skipped when it would touch the one before)."""
    lo, hi = ax.get_xlim()
    per_decade = ax.get_position().width * ax.figure.bbox.width / np.log10(hi / lo)
    out, edge = [], -np.inf
    for pos, lab in sorted(zip(positions, labels)):
        centre = np.log10(pos / lo) * per_decade
        half = 1.5 * (0.6 * fontsize * ax.figure.dpi / 72 * len(lab) / 2 + 2)  # 1.5: layout may shrink the axes
        if centre - half >= edge:
            out.append((pos, lab))
            edge = centre + half
    return out


def draw_gemv_roofline(run: Run):
    """Return roofline-gemv.png's figure (one panel per weight format, each layer's batch walk
    joined by a line), or None without GEMV points."""
    pts, model = _family_points(run, "gemv")
    if pts is None:
        return None
    memory = _memory_level(run)
    pts = pts.assign(impl_name=pts["impl"].map(_impl_name), layer=pts["shape"].map(_layer),
                     batch=pd.to_numeric(pts["size"], errors="coerce"))
    formats = sorted(pts["dtype"].unique(), key=_order(_GEMV_FORMATS))
    layers = sorted(pts["layer"].unique(), key=lambda s: [int(v) for v in re.findall(r"\d+", s)] or [0])
    layer_color = _series_colors(layers)
    ncol = min(3, len(formats))
    nrow = -(-len(formats) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(5.6 * ncol, 4.6 * nrow + 1.4), dpi=DPI, squeeze=False)
    placer = LabelPlacer(fig)
    lims = _limits(pts, model, set(pts["fmt"]), tight=True)
    for ax, fmt in zip(axes.flat, formats):
        sub = pts[pts["dtype"] == fmt]
        _draw_roofs(ax, placer, model, *lims, precisions=set(sub["fmt"]))
        for (impl, layer), g in sub.groupby(["impl_name", "layer"]):
            g = g.sort_values("batch")
            ax.plot(g["intensity"], g["gflops"], color=layer_color[layer], lw=1, alpha=0.9, zorder=3,
                    gid=f"walk:{fmt}:{impl}:{layer}")
            cache = (g["boundary"] != "") & ~g["boundary"].isin(MEMORY_LEVELS)
            for hollow, h in g.groupby(cache):
                ax.scatter(h["intensity"], h["gflops"], marker=IMPL_MARKERS.get(impl, "*"), s=24, zorder=4,
                           color=layer_color[layer], facecolors="white" if hollow else layer_color[layer],
                           gid=f"points:{fmt}:{impl}:{layer}")
        _ring_flagged(ax, sub, s=80)
        placer.avoid(ax, sub["intensity"], sub["gflops"])
        _finish_axes(ax, lims)
        ax.set_title(f"{fmt} weights ({', '.join(sorted(set(sub['fmt'])))} compute)", fontsize=10)
        ax.set_xlabel("arithmetic intensity (FLOP/byte)")
        bs = sub.groupby("batch")["intensity"].median()
        ticks = _spaced_ticks(ax, list(bs.values), [f"{int(b)}" for b in bs.index], fontsize=7)
        top = ax.secondary_xaxis("top")
        top.set_xticks([t for t, _ in ticks], labels=[lab for _, lab in ticks], minor=False)
        top.set_xticks([], minor=True)
        top.tick_params(labelsize=7)
        top.set_xlabel("batch B (median intensity over layers)", fontsize=8)
    for ax in axes.flat[len(formats):]:
        ax.set_visible(False)
    for row in axes:
        row[0].set_ylabel("GFLOP/s (1e9 FLOP/s), median")
    handles = [Line2D([], [], color=layer_color[lay], lw=1.5, label=f"layer {lay} (N x K)") for lay in layers]
    handles += [Line2D([], [], ls="none", marker=IMPL_MARKERS.get(i, "*"), color="0.35", label=i)
                for i in sorted(pts["impl_name"].unique())]
    if ((pts["boundary"] != "") & ~pts["boundary"].isin(MEMORY_LEVELS)).any():
        handles.append(Line2D([], [], ls="none", marker="o", mfc="white", color="0.35",
                              label=f"hollow: bounded by a cache roof, not {memory.upper()}"))
    if pts["flagged"].any():
        handles.append(_flag_handle())
    bottom = _bottom_legend(fig, handles, 4)
    fig.suptitle(_title(run, "Decode GEMV on the roofline (each line: one layer's batch walk, B = 1 at the left)"))
    fig.tight_layout(rect=(0, bottom, 1, 1))
    placer.place()
    return fig


def draw_attention_roofline(run: Run):
    """Return roofline-attention.png's figure, or None without attention points."""
    pts, model = _family_points(run, "attention")
    if pts is None:
        return None
    pts = pts.assign(series=pts["op"].map(_short) + "/" + pts["impl"].map(_impl_name))
    series = sorted(pts["series"].unique())
    series_color = _series_colors(series)
    fig, ax = plt.subplots(figsize=(11.5, 7), dpi=DPI)
    placer = LabelPlacer(fig)
    lims = _limits(pts, model, set(pts["fmt"]), tight=True)
    _draw_roofs(ax, placer, model, *lims, precisions=set(pts["fmt"]))
    for (s, fmt), g in pts.groupby(["series", "fmt"]):
        cache = (g["boundary"] != "") & ~g["boundary"].isin(MEMORY_LEVELS)
        for hollow, h in g.groupby(cache):
            ax.scatter(h["intensity"], h["gflops"], marker=PRECISION_MARKERS.get(fmt, "*"), s=30, zorder=4,
                       color=series_color[s], facecolors="white" if hollow else series_color[s], alpha=0.85,
                       gid=f"points:{s}:{fmt}")
    _ring_flagged(ax, pts, s=90)
    placer.avoid(ax, pts["intensity"], pts["gflops"])
    _finish_axes(ax, lims)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("GFLOP/s (1e9 FLOP/s), median")
    ax.set_title(_title(run, "Attention on the roofline"))
    handles = [Patch(color=series_color[s], label=s) for s in series] + _marker_handles(pts["fmt"].unique())
    if ((pts["boundary"] != "") & ~pts["boundary"].isin(MEMORY_LEVELS)).any():
        handles.append(Line2D([], [], ls="none", marker="o", mfc="white", color="0.35",
                              label="hollow: bounded by a cache roof"))
    if pts["flagged"].any():
        handles.append(_flag_handle())
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1),
              title="colour: op/impl\nmarker: precision", title_fontsize=8, alignment="left")
    fig.text(0.01, 0.012, "Every attention point (prefill: sequence lengths and head shapes; decode: KV lengths and "
             "batches).", fontsize=7, color="dimgray", va="bottom")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    placer.place()
    return fig


def draw_bandwidth(run: Run):
    """Return bandwidth.png's figure: one panel per dtype (see the module docstring)."""
    df = run.measurements
    ok = df[(df["status"] == "ok") & (df["family"] == "stream") & df["gbps"].notna()]
    stream = df[df["family"] == "stream"]
    dtypes = sorted(ok["dtype"].unique()) or ["(none)"]
    caches, memory = _caches(run), _memory_level(run)
    llc = caches[-1][1] if caches else None
    overall = {r.name: r for r in _bandwidth(Roofline(run.roofs))}
    ncol = min(3, len(dtypes))
    nrow = -(-len(dtypes) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(6.2 * ncol, 5 * nrow + 1.0), dpi=DPI, sharey=True, squeeze=False)
    placer = LabelPlacer(fig)
    top_y = max([ok["gbps"].max() if not ok.empty else 1] + [r.value for r in overall.values()]) * 1.3
    lo_b = ok["working_set_bytes"].min() / 1.5 if not ok.empty else 2**14
    hi_b = ok["working_set_bytes"].max() * 1.5 if not ok.empty else 2**30
    if llc:
        hi_b = max(hi_b, DRAM_FACTOR * llc * 1.5)
    ops, impls, modes = set(), set(), set()
    for ax, dtype in zip(axes.flat, dtypes):
        sub = ok[ok["dtype"] == dtype]
        for (op, impl, mode), g in sub.groupby(["op", "impl", "mode"]):
            g = g.sort_values("working_set_bytes")
            name = _impl_name(impl)
            ops.add(_short(op))
            impls.add(name)
            modes.add(mode)
            ax.plot(g["working_set_bytes"], g["gbps"], color=OP_COLORS.get(_short(op), "0.4"),
                    ls=IMPL_STYLES.get(name, "--"), lw=1.2, marker="o" if mode == "warm" else "x", ms=2.5, zorder=3)
            placer.avoid(ax, g["working_set_bytes"], g["gbps"], size=3)
        ax.set_xscale("log", base=2)
        ax.set_xlim(lo_b, hi_b)
        ax.set_ylim(-0.03 * top_y, top_y)  # the 0 label clear of the x axis's first label
        if llc:
            ax.axvspan(DRAM_FACTOR * llc, hi_b, color="0.93", zorder=0, gid="4xllc")
            placer.add(ax, DRAM_FACTOR * llc, top_y * 0.97, f">= {DRAM_FACTOR}x LLC ({_fmt_bytes(DRAM_FACTOR * llc)}): "
                       f"{memory.upper()} roof sizes", sides=("se", "sw"), leader=False, color="0.35", rotation=90)
        for name, size in caches:
            ax.axvline(size, color="0.55", ls=":", lw=1, zorder=1)
            placer.add(ax, size, top_y * 0.9, f"{name.upper()} {_fmt_bytes(size)}", sides=("sw", "se"),
                       leader=False, color="0.4")
        for name, r in overall.items():
            ax.axhline(r.value, color="0.6", lw=0.8, zorder=1, gid=f"overall:{name}")
            placer.add(ax, lo_b, r.value, f"all dtypes: {name.upper()} {_fmt_rate(r.value, 'GB/s')}",
                       sides=("ne", "se"), leader=False, near=1.5, color="0.45")
        own, _ = bandwidth_roofs(stream[stream["dtype"] == dtype], caches, memory)
        for r in own:
            if not r.plateau_bytes:
                continue
            x0, x1 = r.plateau_bytes
            if x0 == x1:
                x0, x1 = x0 / 1.15, x1 * 1.15
            ax.hlines(r.value, x0, x1, color="black", lw=3, alpha=0.75, zorder=4, gid=f"roof:{r.name}")
            placer.add(ax, np.sqrt(x0 * x1), r.value, f"{r.name.upper()} {_fmt_rate(r.value, 'GB/s')}",
                       sides=("n", "s"), leader=False, near=1.5, color="black", fontweight="bold")
        ax.set_xlabel("working set (bytes, all arrays)")
        ax.set_title(f"{dtype}: roofs from {dtype} rows", fontsize=10)
        ax.grid(True, which="major", alpha=0.25)
    for ax in axes.flat[len(dtypes):]:
        ax.set_visible(False)
    for row in axes:
        row[0].set_ylabel("achieved GB/s (1e9 bytes/s, median)")
    handles = [Line2D([], [], color=OP_COLORS.get(o, "0.4"), lw=2, label=o) for o in sorted(ops, key=_order(OP_COLORS))]
    handles += [Line2D([], [], color="0.3", ls=IMPL_STYLES.get(i, "--"), label=i) for i in sorted(impls)]
    if "cold" in modes:
        handles.append(Line2D([], [], color="0.3", marker="x", ls="none", label="cold (caches flushed)"))
    handles.append(Line2D([], [], color="black", lw=3, alpha=0.75, label="roof from this dtype, over its plateau"))
    handles.append(Line2D([], [], color="0.6", lw=0.8, label="the run's roof of each level (all dtypes)"))
    bottom = _bottom_legend(fig, handles, 6)
    fig.suptitle(_title(run, "Stream bandwidth"))
    fig.tight_layout(rect=(0, bottom, 1, 1))
    placer.place()
    return fig


def draw_gemm(run: Run):
    """Return gemm.png's figure (throughput against size per precision: the square sweep by
    N, the skinny sweep by M with each precision's attainable bound dotted), or None."""
    df = run.measurements
    ok = df[(df["status"] == "ok") & (df["family"] == "gemm") & df["gflops"].notna()]
    if ok.empty:
        return None
    model = Roofline(run.roofs)
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.4), dpi=DPI)
    for ax, op, axis_name in ((axes[0], "gemm.square", "N (= M = K)"), (axes[1], "gemm.skinny", "M (N = K fixed)")):
        sub = ok[ok["op"] == op]
        for (precision, impl), g in sub.groupby(["dtype", "impl"]):
            dims = g["shape"].str.split("x", expand=True).astype(int)
            x = dims[0]
            order = np.argsort(x.values)
            name = _impl_name(impl)
            color = PRECISION_COLORS.get(precision, "gray")
            ax.plot(x.values[order], g["gflops"].values[order], marker=IMPL_MARKERS.get(name, "s"), ms=4,
                    color=color, ls="-" if name == "torch" else ":", label=f"{precision} ({name})")
            if op == "gemm.skinny" and name == "torch":
                bound = [model.attainable_gflops(i, precision) for i in g["intensity"].values[order]]
                ax.plot(x.values[order], bound, color=color, ls=":", lw=1, alpha=0.6)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel(axis_name)
        ax.set_title(op + (" (dotted: attainable min(P, BW x I))" if op == "gemm.skinny" else ""), fontsize=9)
        ax.grid(True, which="both", alpha=0.25)
        if not sub.empty:
            ax.legend(fontsize=7, ncol=2)
    axes[0].set_ylabel("GFLOP/s (median; GOP/s for int8)")
    fig.suptitle(_title(run, "GEMM throughput"))
    fig.tight_layout()
    return fig


def draw_links(run: Run):
    """Return links.png's figure: bus bandwidth of each collective and send/recv pair, and GB/s
    of each host-device copy, against message size; None without such rows."""
    df = run.measurements
    ok = df[(df["status"] == "ok") & df["family"].isin(["comm", "transfer"])]
    if ok.empty:
        return None
    fig, ax = plt.subplots(figsize=(9, 5.5), dpi=DPI)
    for (op, shape), g in ok.groupby(["op", "shape"]):
        g = g.sort_values("bytes")
        rate = g["bus_gbps"].fillna(g["gbps"]) if "bus_gbps" in g else g["gbps"]
        label = f"{_short(op)} {shape}" + (" (bus)" if op.startswith("comm.") and "sendrecv" not in op else "")
        ax.plot(g["bytes"], rate, marker="o", ms=3, label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("GB/s (bus bandwidth for collectives)")
    ax.set_title(_title(run, "Interconnect and host links"))
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=7, ncol=2, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.tight_layout()
    return fig


# file name -> the function drawing it (None when the run has nothing for it)
CHARTS = {
    "roofline.png": draw_roofline,
    "roofline-stream.png": draw_stream_roofline,
    "roofline-gemm.png": draw_gemm_roofline,
    "roofline-gemv.png": draw_gemv_roofline,
    "roofline-attention.png": draw_attention_roofline,
    "bandwidth.png": draw_bandwidth,
    "gemm.png": draw_gemm,
    "links.png": draw_links,
}


def figures(run: Run) -> dict:
    """Return {file name: figure} for every chart the run has data for, unsaved and open
    (close them with plt.close)."""
    out = {}
    for name, draw in CHARTS.items():
        fig = draw(run)
        if fig is not None:
            out[name] = fig
    return out


def _save(fig, path: Path) -> Path | None:
    if fig is None:
        return None
    try:
        fig.savefig(path, dpi=DPI)
    finally:
        plt.close(fig)
    return path


def plot_roofline(run: Run, path: Path) -> Path:
    return _save(draw_roofline(run), path)


def plot_bandwidth(run: Run, path: Path) -> Path:
    return _save(draw_bandwidth(run), path)


def plot_gemm(run: Run, path: Path) -> Path | None:
    return _save(draw_gemm(run), path)


def plot_links(run: Run, path: Path) -> Path | None:
    return _save(draw_links(run), path)


_FORKED_RUN: Run | None = None  # the run plot_run's forked workers inherit (read once, here)


def _draw_and_save(name: str, run: Run | None = None) -> Path | None:
    run = run or _FORKED_RUN
    return _save(CHARTS[name](run), Path(run.dir) / name)


def plot_run(run_dir, workers: int | None = None) -> list[Path]:
    """Draw every picture the run folder run_dir has data for; return their paths. The run
    is read once; the charts are independent, so on Linux they are drawn by up to `workers`
    forked processes (default: one per core, at most 4), which inherit it; one worker, or a
    pool that cannot start, draws them here one after another."""
    global _FORKED_RUN
    run, names = load_run(run_dir), list(CHARTS)
    workers = min(len(names), 4, os.cpu_count() or 1) if workers is None else workers
    paths = None
    if workers > 1 and "fork" in multiprocessing.get_all_start_methods():
        _FORKED_RUN = run
        try:
            with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
                paths = list(pool.map(_draw_and_save, names))
        except BrokenProcessPool:  # a worker died (out of memory, a signal): draw them here
            paths = None
        finally:
            _FORKED_RUN = None
    if paths is None:
        paths = [_draw_and_save(name, run) for name in names]
    return [p for p in paths if p is not None]
