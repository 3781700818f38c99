"""The label placer: puts each chart label by its point or line so that its box meets no other
text, no legend, no drawn line segment and no edge of a filled band (a roof's interval,
roofs/charts/ceilings.py draw_band: a label may not straddle a band's edge any more than a line;
one wholly inside a band wide enough to hold it is clear of it, as a label between two lines is),
and lists the texts a draw puts on a figure (so a
test can check that). Display coordinates (pixels) throughout; reads nothing but the figure.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
from dataclasses import dataclass

import numpy as np
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.lines import Line2D
from matplotlib.text import Text

LABEL_SIZE = 7
LABEL_BOX = {"boxstyle": "square,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.8}

# The placer's distances, in display pixels, and its costs, in pixels of displacement.
PAD = 2.0            # clearance kept between a label's box and every other box or line
GAP = 3.0            # default distance from a label's anchor to the near edge of its box
ANCHOR_HALF = 4.0    # half the side of the square kept clear around each labelled point
SIDE_COST = 12.0     # choosing the next of a label's sides costs as much as moving it this far
ALONG_COST = 8.0     # each further anchor along a line (add's `along`) costs this much
LEADER_SLACK = 1.0   # a label within gap + this of its anchor needs no leader line
FREE_TRIES = 6       # free heights tried per column when a leader would cross a label
LEADER_CROSS_COST = 150.0  # where leaders may cross labels: each one crossed costs this much
SLIDES = (0.0, -0.5, 0.5, -1.0, 1.0, -2.0, 2.0)  # sideways moves tried, in box widths, for a displaced label
KEYED_ROUNDS = 3      # a keyed label (add's key) tries the rounds whose leaders cross no label
KEY_ROWS = 8          # lines per column of the key
KEY_ROUNDS = 5        # a column of the key tries every round that keeps it inside the figure
LEADER_STYLE = {"lw": 0.5, "alpha": 0.7, "zorder": 5, "clip_on": False, "gid": "leader"}
_UNBOUNDED = (-np.inf, -np.inf, np.inf, np.inf)


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


# ---- the lines of a figure, as display segments --------------------------------------------

def _clip(seg: np.ndarray, box) -> np.ndarray:
    """Return the rows (x0, y0, x1, y1, half width) of seg clipped to box (x0, y0, x1, y1)
    by the parametric (Liang-Barsky) rule: p = p0 + t (p1 - p0), t kept in [0, 1] and
    inside each of the box's four half-planes; rows wholly outside are dropped."""
    if not len(seg):
        return seg
    d = seg[:, 2:4] - seg[:, 0:2]
    lo, hi = np.zeros(len(seg)), np.ones(len(seg))
    with np.errstate(divide="ignore", invalid="ignore"):
        for axis, (low, high) in enumerate(((box[0], box[2]), (box[1], box[3]))):
            p0, dp = seg[:, axis], d[:, axis]
            t_low, t_high = (low - p0) / dp, (high - p0) / dp
            parallel = dp == 0
            inside = (p0 >= low) & (p0 <= high)
            enter = np.where(parallel, np.where(inside, -np.inf, np.inf), np.minimum(t_low, t_high))
            leave = np.where(parallel, np.where(inside, np.inf, -np.inf), np.maximum(t_low, t_high))
            lo, hi = np.maximum(lo, enter), np.minimum(hi, leave)
    keep = lo <= hi
    a = seg[keep, 0:2] + lo[keep, None] * d[keep]
    b = seg[keep, 0:2] + hi[keep, None] * d[keep]
    return np.column_stack([a, b, seg[keep, 4]])


def _artist_segments(artist) -> list[np.ndarray]:
    """Return an artist's drawn polylines in display coordinates, each as (x, y) rows."""
    if isinstance(artist, Line2D):
        if artist.get_linestyle() in ("None", "none", "", " ") or len(artist.get_xydata()) < 2:
            return []
        return [artist.get_transform().transform(artist.get_xydata())]
    if isinstance(artist, LineCollection):
        tr = artist.get_transform()
        return [tr.transform(np.asarray(s, float)) for s in artist.get_segments() if len(s) >= 2]
    if isinstance(artist, PolyCollection):  # a band's outline, closed
        tr = artist.get_transform()
        return [tr.transform(poly) for path in artist.get_paths() for poly in path.to_polygons() if len(poly) >= 2]
    return []


def figure_segments(fig, renderer) -> np.ndarray:
    """Return every line segment drawn on fig's axes (Line2D and LineCollection artists, the
    outlines of PolyCollections: the bands; the axes' frame) as rows (x0, y0, x1, y1, half
    its width), display coordinates, each clipped to its axes as drawing clips it; grid lines
    and ticks are not among them."""
    px_per_pt = fig.dpi / 72
    rows = []
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        frame = ax.get_window_extent(renderer)
        box = (frame.x0, frame.y0, frame.x1, frame.y1)
        parts = [np.array([[box[0], box[1], box[2], box[1], 0.5], [box[2], box[1], box[2], box[3], 0.5],
                           [box[2], box[3], box[0], box[3], 0.5], [box[0], box[3], box[0], box[1], 0.5]])]
        for artist in list(ax.lines) + [c for c in ax.collections if isinstance(c, (LineCollection, PolyCollection))]:
            if not artist.get_visible():
                continue
            lw = artist.get_linewidth()
            half = float(np.max(lw) if np.size(lw) else 1.0) * px_per_pt / 2
            for xy in _artist_segments(artist):
                seg = np.column_stack([xy[:-1], xy[1:], np.full(len(xy) - 1, half)])
                seg = seg[np.isfinite(seg).all(axis=1)]
                parts.append(_clip(seg, box) if artist.get_clip_on() else seg)
        rows += parts
    return np.concatenate(rows) if rows else np.zeros((0, 5))


# ---- where a box may go in one column --------------------------------------------------------

def _blocked_by_boxes(boxes: np.ndarray, x0: float, w: float, h: float, pad: float) -> np.ndarray:
    """Return the open intervals of y0 (a box's bottom) at which a box [x0, x0 + w] x
    [y0, y0 + h] comes within pad of one of boxes (rows x0, y0, x1, y1)."""
    if not len(boxes):
        return np.zeros((0, 2))
    hit = (boxes[:, 0] - pad < x0 + w) & (boxes[:, 2] + pad > x0)
    b = boxes[hit]
    return np.column_stack([b[:, 1] - h - pad, b[:, 3] + pad])


def _blocked_by_segments(seg: np.ndarray, x0: float, w: float, h: float, pad: float) -> np.ndarray:
    """Return the open intervals of y0 at which the box [x0, x0 + w] x [y0, y0 + h] comes
    within pad (plus the line's half width) of one of the segments: over the box's column,
    a straight segment spans [ylo, yhi], so the box must end below ylo or start above yhi."""
    if not len(seg):
        return np.zeros((0, 2))
    margin = pad + seg[:, 4]
    c0, c1 = x0 - margin, x0 + w + margin
    xa, ya, xb, yb = seg[:, 0], seg[:, 1], seg[:, 2], seg[:, 3]
    left, right = np.minimum(xa, xb), np.maximum(xa, xb)
    hit = (right >= c0) & (left <= c1)
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = np.where(xb != xa, (yb - ya) / (xb - xa), 0.0)
    u0, u1 = np.maximum(left, c0), np.minimum(right, c1)
    y_u0 = np.where(xb != xa, ya + slope * (u0 - xa), np.minimum(ya, yb))
    y_u1 = np.where(xb != xa, ya + slope * (u1 - xa), np.maximum(ya, yb))
    ylo, yhi = np.minimum(y_u0, y_u1), np.maximum(y_u0, y_u1)
    return np.column_stack([ylo - margin - h, yhi + margin])[hit]


def free_heights(want: float, lo: float, hi: float, blocked: np.ndarray) -> list[float]:
    """Return the values in [lo, hi] that lie in none of the open intervals blocked, taken
    from want, lo, hi and the merged intervals' ends, nearest want first."""
    merged: list[list[float]] = []
    for a, b in sorted(map(tuple, blocked)):
        if merged and a < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    candidates = {c for c in [want, lo, hi] + [v for ab in merged for v in ab] if np.isfinite(c)}
    free = [c for c in candidates if lo <= c <= hi and not any(a < c < b for a, b in merged)]
    return sorted(free, key=lambda c: (abs(c - want), c))


def _segment_hits(p, q, boxes: np.ndarray) -> np.ndarray:
    """Return which of boxes (rows x0, y0, x1, y1) the segment p-q passes through or touches:
    p + t (q - p) lies in a box for some t in [0, 1] (the parametric rule, per axis)."""
    if not len(boxes):
        return np.zeros(0, bool)
    lo, hi = np.zeros(len(boxes)), np.ones(len(boxes))
    with np.errstate(divide="ignore", invalid="ignore"):
        for axis in (0, 1):
            d = q[axis] - p[axis]
            a, b = boxes[:, axis], boxes[:, axis + 2]
            if d == 0:
                inside = (a <= p[axis]) & (p[axis] <= b)
                lo, hi = np.where(inside, lo, np.inf), np.where(inside, hi, -np.inf)
            else:
                t1, t2 = (a - p[axis]) / d, (b - p[axis]) / d
                lo, hi = np.maximum(lo, np.minimum(t1, t2)), np.minimum(hi, np.maximum(t1, t2))
    return lo <= hi


# ---- the placer ------------------------------------------------------------------------------

# Where a label sits relative to its anchor: (horizontal, vertical) placement of its box.
# "e": right of the anchor, centred on it; "nw": above and left; ...
_SIDES = {"e": (1, 0), "w": (-1, 0), "ne": (1, 1), "nw": (-1, 1), "se": (1, -1), "sw": (-1, -1),
          "n": (0, 1), "s": (0, -1)}


@dataclass
class _Request:
    ax: object
    anchors: list          # data points, the preferred first (a line's label: places along it)
    text: str
    sides: tuple
    leader: bool
    kw: dict
    near: float | None
    gap: float | None
    band: tuple | None = None  # (low, high): factors of each anchor's y its band spans (add's band)
    keyed: bool = False        # add's key: a number by its point and a line of the key, rather than a crossing leader


@dataclass
class _Tier:
    """One round of the search: the bounds a box must stay in, and whether it keeps off the points."""
    bounds: tuple
    off_points: bool
    near_only: bool        # a label with `near` may move at most near heights in this round
    clear_leader: bool = True  # its leader must cross no placed label
    off_lines: bool = True     # its box must cross no line (the last rounds, texts only: always room)


@dataclass
class _Choice:
    cost: float
    x0: float
    y0: float
    anchor: tuple          # display coordinates of the anchor it belongs to: (x, y, band bottom, band top)


class LabelPlacer:
    """Places text labels so that none overprints another text, a legend or a drawn line.

    Add every label with add(); after the figure's layout is final (tight_layout done, axis
    limits set), place() draws the canvas once, takes every text already drawn (titles,
    tick labels, legends), each legend box and every line segment of the axes as fixed, then
    puts the labels one by one, in the order added: for each anchor (a point, or places along
    a line) and each side, the box is slid into its bounds and moved vertically by the least
    amount that keeps it `pad` pixels clear of every box and segment (a band's edges among
    them; a label by a banded line is measured from the band's edge on its side, so it sits by
    the band as another sits by its line, with no leader); the cheapest choice
    wins (displacement + SIDE_COST per side rank + ALONG_COST per anchor rank). The rounds:
    inside the axes and off the points, inside the axes, inside the figure (then with a
    leader that may cross a label); only where none of those had room, inside the figure
    clear of texts alone, and anywhere (the last
    always has room: above everything in the label's column). A label moved away from
    its anchor gets a thin leader line to it, drawn only where it crosses no placed label;
    the leaders become segments the later labels keep clear of. A label added with key=True
    never takes those last rounds: where the first three have no room, its point gets a number
    (placed as a label of its own, in those rounds too) and the label becomes that number's line
    in one key, placed in the axes clear of everything (top left first); a point with no room
    even for its number is a key line giving its place instead ("-  label (at x 250, y 1.8e+03)")."""

    def __init__(self, fig, pad: float = PAD, gap: float = GAP):
        self.fig, self.pad, self.gap = fig, pad, gap
        self.requests: list[_Request] = []
        self.texts: list[Text] = []
        self.points: list[tuple] = []

    def avoid(self, ax, xs, ys, size: float = 4.0) -> None:
        """Keep labels off these data points of ax when there is room (markers of size px)."""
        self.points.append((ax, np.asarray(xs, float), np.asarray(ys, float), size))

    def add(self, ax, x: float, y: float, text: str, sides=("e", "w"), leader: bool = True,
            near: float | None = None, gap: float | None = None, along=(), band: tuple | None = None,
            key: bool = False, **kw) -> None:
        """Ask for text to be placed by the data point (x, y) of ax, on one of sides, gap
        pixels from it (wider than the marker there); along: further data points it may sit
        by instead, in order of preference (a line's label: places along its line); near:
        in the first round, at most this many label heights from where it asks to be (a
        roof's label belongs by its line more than it must keep off points); band: (low, high),
        the factors of each anchor's y that a band about its line spans (a roof's interval over
        its value, ceilings.band_factors): a side above the anchor is measured from the band's
        top, one below from its bottom, and the label needs no leader while it touches the band.
        key: where only a leader across another label would reach it, a number by its point and
        a line of the chart's key instead (a crowded cluster's points)."""
        anchors = [(float(px), float(py)) for px, py in [(x, y), *along] if np.isfinite(px) and np.isfinite(py)]
        if anchors and text:
            self.requests.append(_Request(ax, anchors, text, tuple(sides), leader, kw, near, gap,
                                          tuple(map(float, band)) if band is not None else None, key))

    # -- the steps of place() --

    def _fixed_boxes(self, renderer) -> list[tuple]:
        """Return the boxes every label keeps clear of: each drawn text's and each legend's."""
        fig = self.fig
        boxes = [t.get_window_extent(renderer) for t in drawn_texts(fig)]
        boxes += [leg.get_window_extent(renderer) for leg in
                  [ax.get_legend() for ax in fig.axes] + list(fig.legends) if leg is not None]
        return [(b.x0, b.y0, b.x1, b.y1) for b in boxes]

    def _point_boxes(self) -> dict:
        """Return, per axes, the squares around its avoided points and its labels' first anchors."""
        soft = {r.ax: [] for r in self.requests}
        for ax, xs, ys, size in self.points:
            if ax in soft and len(xs):
                for qx, qy in ax.transData.transform(np.column_stack([xs, ys])):
                    soft[ax].append((qx - size, qy - size, qx + size, qy + size))
        for r in self.requests:
            qx, qy = r.ax.transData.transform(r.anchors[0])
            soft[r.ax].append((qx - ANCHOR_HALF, qy - ANCHOR_HALF, qx + ANCHOR_HALF, qy + ANCHOR_HALF))
        return soft

    def _tiers(self, axes_box) -> tuple[_Tier, ...]:
        fig_box = (0, 0, self.fig.bbox.width, self.fig.bbox.height)
        return (_Tier(axes_box, True, True), _Tier(axes_box, False, False), _Tier(fig_box, False, False),
                _Tier(fig_box, False, False, clear_leader=False),
                _Tier(fig_box, False, False, clear_leader=False, off_lines=False),
                _Tier(_UNBOUNDED, False, False, clear_leader=False, off_lines=False))

    @staticmethod
    def _display_anchors(req) -> list[tuple]:
        """Return req's anchors in display coordinates, each (x, y, band bottom, band top): its
        band's edges there (the anchor's y twice without a band)."""
        xy = np.asarray(req.anchors, float)
        mid = req.ax.transData.transform(xy)
        if req.band is None:
            return [(x, y, y, y) for x, y in mid.tolist()]
        lo = req.ax.transData.transform(np.column_stack([xy[:, 0], xy[:, 1] * req.band[0]]))[:, 1]
        hi = req.ax.transData.transform(np.column_stack([xy[:, 0], xy[:, 1] * req.band[1]]))[:, 1]
        return [(x, y, min(a, b), max(a, b)) for (x, y), a, b in zip(mid.tolist(), lo.tolist(), hi.tolist())]

    def _needs_leader(self, x0, y0, w, h, anchor, gap) -> bool:
        """Return whether a box at (x0, y0), w x h, lies farther than gap + LEADER_SLACK from its
        anchor (from the nearest point of the anchor's band, where it has one)."""
        px, _, lo, hi = anchor
        reach = gap + LEADER_SLACK
        return not (x0 - reach <= px <= x0 + w + reach and y0 - reach <= hi and lo <= y0 + h + reach)

    @staticmethod
    def _leader_start(y0, h, anchor) -> tuple[float, float]:
        """Return where a leader to the box leaves its anchor: the point of the anchor's band
        nearest the box's middle height (the anchor itself without a band)."""
        px, _, lo, hi = anchor
        return px, min(max(y0 + h / 2, lo), hi)

    @staticmethod
    def _leader_end(x0, y0, w, h, start) -> tuple[float, float]:
        """Return the point of the box nearest the leader's start (where its leader line ends)."""
        return min(max(start[0], x0), x0 + w), min(max(start[1], y0), y0 + h)

    def _leader_crossings(self, x0, y0, w, h, anchor, labels: np.ndarray) -> int:
        """Return how many placed labels' boxes the leader from anchor to the box passes."""
        start = self._leader_start(y0, h, anchor)
        return int(_segment_hits(start, self._leader_end(x0, y0, w, h, start), labels).sum())

    def _columns(self, req, anchor, size, tier, gap):
        """Yield (x0, want, cost) for each column req's box may take by anchor in this round:
        each side's column slid into the bounds, and, for a label with a leader outside the
        first round, the same slid sideways by SLIDES box widths; want is the bottom the
        side asks for, cost the side's rank and the slide."""
        w, h = size
        px, py, lo, hi = anchor
        bx0, bx1 = tier.bounds[0], tier.bounds[2]
        slides = SLIDES if req.leader and not tier.near_only else (0.0,)
        for rank, side in enumerate(req.sides):
            sx, sy = _SIDES[side]
            x0 = px + (gap if sx > 0 else -gap - w if sx < 0 else -w / 2)
            want = hi + gap if sy > 0 else lo - gap - h if sy < 0 else py - h / 2
            for slide in slides:
                x = min(max(x0 + slide * w, bx0), bx1 - w)  # slid sideways, kept in its bounds
                yield x, want, abs(x - x0) + SIDE_COST * rank

    def _first_free(self, req, x0, want, size, tier, obstacles, segments, anchor, gap, labels):
        """Return (bottom, penalty) of the free place in column x0 nearest want (clear of the
        obstacles and, in rounds that ask it, of segments) whose leader, where it needs one,
        passes no label; in rounds that allow crossing leaders, of the FREE_TRIES nearest the
        one with the least displacement + LEADER_CROSS_COST per label its leader passes. None
        when there is none."""
        w, h = size
        lines = segments if tier.off_lines else segments[:0]
        blocked = np.concatenate([_blocked_by_boxes(obstacles, x0, w, h, self.pad),
                                  _blocked_by_segments(lines, x0, w, h, self.pad)])
        best = None
        for y0 in free_heights(want, tier.bounds[1], tier.bounds[3] - h, blocked)[:FREE_TRIES]:
            if tier.near_only and req.near is not None and abs(y0 - want) > req.near * h:
                break
            crossed = self._leader_crossings(x0, y0, w, h, anchor, labels) \
                if req.leader and self._needs_leader(x0, y0, w, h, anchor, gap) else 0
            if crossed and tier.clear_leader:
                continue
            penalty = LEADER_CROSS_COST * crossed
            if best is None or abs(y0 - want) + penalty < abs(best[0] - want) + best[1]:
                best = (y0, penalty)
            if not crossed:
                break  # the nearest clear place: a further one only moves it more
        return best

    def _best(self, req, size, tier, boxes, segments, soft) -> _Choice | None:
        """Return the cheapest place for req's box (w, h = size) in one round, or None: over
        its anchors and columns, displacement + column cost + ALONG_COST per anchor rank."""
        if tier.bounds[2] - tier.bounds[0] < size[0]:
            return None
        gap = self.gap if req.gap is None else req.gap
        obstacles = np.array(boxes + (soft if tier.off_points else []), float).reshape(-1, 4)
        # a leader keeps clear of every text and legend, the fixed ones (a roof's label drawn before) too
        labels = np.array(boxes, float).reshape(-1, 4)
        best = None
        for along, anchor in enumerate(self._display_anchors(req)):
            for x0, want, cost in self._columns(req, anchor, size, tier, gap):
                if best is not None and cost + ALONG_COST * along >= best.cost:
                    continue  # cannot beat the best found (displacement only adds)
                found = self._first_free(req, x0, want, size, tier, obstacles, segments, anchor, gap, labels)
                if found is not None:
                    y0, penalty = found
                    total = abs(y0 - want) + penalty + cost + ALONG_COST * along
                    if best is None or total < best.cost:
                        best = _Choice(total, x0, y0, anchor)
        return best

    def _draw_leader(self, req, choice, size, color) -> np.ndarray | None:
        """Draw the leader from the chosen anchor to the box when the box sits away from it;
        return it as a segment row (or None)."""
        gap = self.gap if req.gap is None else req.gap
        if not (req.leader and self._needs_leader(choice.x0, choice.y0, *size, choice.anchor, gap)):
            return None
        start = self._leader_start(choice.y0, size[1], choice.anchor)
        end = self._leader_end(choice.x0, choice.y0, *size, start)
        inv = req.ax.transData.inverted()
        (lx0, ly0), (lx1, ly1) = inv.transform(start), inv.transform(end)
        req.ax.add_artist(Line2D([lx0, lx1], [ly0, ly1], color=color, **LEADER_STYLE))
        half = LEADER_STYLE["lw"] * self.fig.dpi / 72 / 2
        return np.array([[*start, *end, half]])

    def _put(self, req, renderer, state: dict, rounds: int | None = None) -> Text | None:
        """Place req's text in the first of the rounds (all of them, or the first `rounds`) with
        room, adding its box and leader to state (boxes, segments, soft); return the
        text, or None (nothing drawn) when none of those rounds had room."""
        kw = {"fontsize": LABEL_SIZE, "bbox": LABEL_BOX, "zorder": 6, "clip_on": False} | req.kw
        t = req.ax.text(*req.anchors[0], req.text, ha="left", va="bottom", **kw)
        bb = t.get_window_extent(renderer)
        size = (bb.width, bb.height)
        px, py = req.ax.transData.transform(req.anchors[0])
        corner = (bb.x0 - px, bb.y0 - py)  # the box's corner relative to the text's position
        a = req.ax.get_window_extent(renderer)
        near = [s for s in state["soft"].get(req.ax, []) if not (s[0] <= px <= s[2] and s[1] <= py <= s[3])]
        choice = None
        for tier in self._tiers((a.x0, a.y0, a.x1, a.y1))[:rounds]:
            choice = self._best(req, size, tier, state["boxes"], state["segments"], near)
            if choice is not None:
                break
        if choice is None:
            t.remove()
            return None
        t.set_position(req.ax.transData.inverted().transform((choice.x0 - corner[0], choice.y0 - corner[1])))
        box = (choice.x0, choice.y0, choice.x0 + size[0], choice.y0 + size[1])
        state["boxes"].append(box)
        self.texts.append(t)
        leader = self._draw_leader(req, choice, size, kw.get("color", "0.3"))
        if leader is not None:
            state["segments"] = np.concatenate([state["segments"], leader])
        return t

    def place(self) -> list[Text]:
        """Place every label added (see the class docstring); return the texts drawn."""
        if not self.requests:
            return []
        renderer = self.fig.canvas.get_renderer()
        state = {"boxes": self._fixed_boxes(renderer), "segments": figure_segments(self.fig, renderer),
                 "soft": self._point_boxes()}
        keyed = []  # the keyed labels with no clear place: numbered below
        for req in self.requests:
            if self._put(req, renderer, state, KEYED_ROUNDS if req.keyed else None) is None:
                keyed.append(req)
        lines, n = [], 0
        for req in keyed:  # its number by the point, as a label of its own; where even that has
            tag = dataclasses.replace(req, text=str(n + 1), keyed=False, sides=tuple(_SIDES), gap=2.0)
            if self._put(tag, renderer, state, KEYED_ROUNDS) is not None:
                n += 1
                lines.append(f"{n}  {req.text}")
            else:  # no room, the key gives the point's place
                x, y = req.anchors[0]
                lines.append(f"-  {req.text} (at x {x:,.3g}, y {y:,.3g})")
        if lines:  # the key, in columns of KEY_ROWS lines, each kept inside the figure where it can be
            ax = keyed[0].ax
            (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
            lines = ["numbered points", *lines]
            for i in range(0, len(lines), KEY_ROWS):
                column = _Request(ax, [(x0, y1), (x1, y1), (x0, y0)], "\n".join(lines[i:i + KEY_ROWS]),
                                  ("se", "sw", "ne"), False, {"color": "0.2", "gid": "label:key"}, None, 4.0)
                if self._put(column, renderer, state, KEY_ROUNDS) is None:
                    self._put(column, renderer, state)
        return self.texts
