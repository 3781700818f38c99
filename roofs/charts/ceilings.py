"""The roofs on a roofline chart: each memory level's bandwidth roof as a slope in that
level's colour (LEVEL_COLORS), each precision's measured compute roof as a solid flat, the
FMA chains' elementwise (or vector-unit) lines dash-dotted and named so, datasheet and computed
references dashed, links dotted; a sustained figure solid with its burst figure thin beside
it (ARCHITECTURE.md, rule 14). A measured roof with an interval (rule 17) also gets a band: a
translucent fill in its own colour between its low and high figures (draw_band, the one band
helper every chart draws through), under its line, which stays at its value; a roof without one
(an older run's, a datasheet or computed reference) is its line alone. Every roof gets one label,
by its line (roofs/charts/labels.py: it keeps clear of the bands' edges as of every line), and
draw_roofs returns the legend entries saying what each colour, line style and the band mean.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from roofs.analysis.roofline import MEMORY_LEVELS, Roof, Roofline
from roofs.charts.kit import (
    _bandwidth,
    _compute,
    _fmt_rate,
    _groups,
    _link_sets,
    _roof_name,
    _roof_text,
    level_color,
    sustained_value,
)
from roofs.charts.labels import LabelPlacer

# the line styles, one meaning each (the legend entries below say which)
MEASURED = {"ls": "-", "lw": 1.6}
BURST = {"lw": 0.7, "alpha": 0.7}
CHAIN = {"ls": "-.", "lw": 1.2}             # an FMA-chain line: an elementwise or vector-unit ceiling
REFERENCE = {"ls": "--", "lw": 0.9, "alpha": 0.8}
LINK = {"ls": ":", "lw": 0.9, "color": "0.55"}
SLOPE_WIDTH = {True: 2.0, False: 1.3}     # the off-chip level's slope, a cache's
LABEL_PLACES = 7                          # places along its line a roof's label may take
FOOT_STEP = (0.08, 0.05)                  # slope labels' feet: this far up the y span, a step more each
BAND = {"alpha": 0.16, "lw": 0, "zorder": 1.5}  # a roof's interval: under the lines (zorder 2), over the grid
BAND_LABEL = "band: the roof's interval, rule 17"


def draw_band(ax, roof: Roof, x0: float, x1: float, color, upto: float | None = None, gid: str | None = None,
              flat: bool | None = None):
    """Draw roof's interval (ARCHITECTURE.md, rule 17) over x0..x1 as a translucent band in
    color and return it (a PolyCollection, gid "band:<name>" unless given); None for a roof
    without an interval, which keeps its line alone. A flat (a compute roof, or any roof when
    flat: a bandwidth chart's level) is the band low <= y <= high; a bandwidth slope is
    BW_low x I <= y <= min(BW_high x I, upto): topped at the compute roof upto where the slope
    meets it, as its line is, and ending where BW_low x I reaches upto (or at x1)."""
    if roof.interval is None:
        return None
    lo, hi = sorted(float(v) for v in roof.interval)
    if flat is None:
        flat = roof.kind != "bandwidth"
    if flat:
        xs = np.array([x0, x1], float)
        low, high = np.full(2, lo), np.full(2, hi)
    else:
        end = min(x1, upto / lo) if upto and lo > 0 else x1
        if end <= x0:
            return None
        corner = upto / hi if upto and hi > 0 else np.inf  # where the top edge meets the compute roof
        xs = np.array([x0] + ([corner] if x0 < corner < end else []) + [end], float)
        low, high = lo * xs, np.minimum(hi * xs, upto) if upto else hi * xs
    return ax.fill_between(xs, low, high, color=color, gid=gid or f"band:{roof.name}", **BAND)


def band_factors(roofs, at: float) -> tuple[float, float] | None:
    """Return (low, high) of the bands of roofs as factors of the figure at which their one
    label is anchored (the label placer keeps the label clear of the band as of the line: add's
    band): min(low) / at and max(high) / at over the roofs with an interval; None without one."""
    spans = [r.interval for r in roofs if r.interval is not None]
    if not spans or not at:
        return None
    return min(min(i) for i in spans) / at, max(max(i) for i in spans) / at


def band_handle() -> Patch:
    """Return the legend entry saying what a band is (one per legend, wherever a band is drawn)."""
    return Patch(facecolor="0.3", alpha=BAND["alpha"] * 2, lw=0, label=BAND_LABEL)


@dataclass(frozen=True)
class RoofStyle:
    """Which roofs a chart draws and how: the precisions whose compute roofs it draws (None:
    all), a precision's colour (None: black, references grey), whether compute roofs are
    drawn at all (flats) and whether the interconnect and host links are (links); slope_labels
    False: the measured slopes unlabelled on the chart, their figures in the legend's entries
    instead (panels that share one legend and whose slopes crowd one corner: decode GEMV)."""
    precisions: frozenset | set | None = None
    compute_color: Callable[[str], str] | None = None
    flats: bool = True
    links: bool = False
    slope_labels: bool = True


@dataclass
class _Roofs:
    """The roofs one chart draws, read from the model once."""
    slopes: list[Roof]
    measured: list[Roof]
    chains: list[Roof]
    refs: list[Roof]
    datasheet_slopes: list[Roof]
    links: list = field(default_factory=list)

    @property
    def top(self) -> float | None:
        """The highest drawn compute roof (the slopes run up to it)."""
        return max((r.value for r in self.measured + self.chains), default=None)

    @property
    def fastest(self) -> float | None:
        return self.slopes[0].value if self.slopes else None


def is_chain_line(r: Roof) -> bool:
    """Return whether a compute roof is an FMA-chain line ("<p>.elementwise", "<p>.vector"):
    a ceiling beside a precision's roof, never the precision's roof itself."""
    extra = r.extra or {}
    return bool(extra.get("line_of")) and extra.get("unit") in ("elementwise", "vector") \
        or r.name.endswith((".elementwise", ".vector"))


def chain_label(r: Roof) -> str:
    """Return an FMA-chain line's name as the charts write it: "fp32 elementwise ceiling"."""
    base, _, unit = r.name.rpartition(".")
    unit = unit if unit in ("elementwise", "vector") else (r.extra or {}).get("unit", "elementwise")
    return f"{base or r.name} {'vector-unit' if unit == 'vector' else 'elementwise'} ceiling"


def _select(model: Roofline, style: RoofStyle) -> _Roofs:
    """Return the roofs the style draws: the chain lines only on a chart of every precision."""
    computes = _compute(model, style.precisions) if style.flats else []
    measured = [r for r in computes if not is_chain_line(r)]
    chains = [r for r in computes if is_chain_line(r)]  # by name only where every precision is drawn
    refs = _compute(model, {r.name for r in measured}, ("datasheet", "computed")) if style.flats else []
    return _Roofs(_bandwidth(model), measured, chains, refs, _bandwidth(model, "datasheet"),
                  _link_sets(model) if style.links else [])


def _slope(ax, value: float, lims, upto: float | None, gid: str, **line) -> None:
    """Draw BW x I from the left edge up to the roof upto (or the right edge)."""
    lo_x, hi_x = lims[0], lims[1]
    end = min(hi_x, upto / value) if upto else hi_x
    ax.plot([lo_x, end], [value * lo_x, value * end], zorder=2, gid=gid, **line)


def _places_along_slope(value: float, lims, upto: float | None, k: int) -> list[tuple[float, float]]:
    """Return where a slope's label may sit, the preferred first: its foot (FOOT_STEP up the
    chart's y span, a step higher for each slope before it, so neighbours' feet differ),
    then evenly in log x up to where the slope ends (on its roof, or at the chart's edge)."""
    lo_x, hi_x, lo_y, hi_y = lims
    end = min(hi_x, upto / value if upto else np.inf, hi_y / value)
    start = max(lo_x * 1.6, lo_y / value)
    foot = min(max(lo_y * (hi_y / lo_y) ** (FOOT_STEP[0] + FOOT_STEP[1] * k) / value, start), end)
    xs = [foot] + list(np.geomspace(start, end, LABEL_PLACES)) if end > start else [foot]
    return [(x, value * x) for x in xs]


def _places_along_flat(value: float, start: float, hi_x: float) -> list[tuple[float, float]]:
    """Return where a flat's label may sit: just inside the right spine, then leftwards."""
    right = hi_x / (hi_x / start) ** 0.004 if hi_x > start else hi_x
    return [(x, value) for x in np.geomspace(right, start, LABEL_PLACES)]


def _label(placer: LabelPlacer, ax, places, text: str, sides, color, band=None) -> None:
    (x, y), *rest = places
    placer.add(ax, x, y, text, sides=sides, leader=True, near=1.5, along=rest, band=band, color=color)


def _draw_slopes(ax, placer: LabelPlacer, roofs: _Roofs, lims, labelled: bool = True) -> None:
    """Each level's slope in its colour (its burst figure thin beside it), each datasheet
    slope dashed in its level's colour, each link set dotted; one label each (but the measured
    slopes when not labelled: RoofStyle.slope_labels)."""
    top = roofs.top
    labels = []  # (bandwidth, text, colour, sides, roof it ends on, band factors)
    for r in roofs.slopes:
        color, sv = level_color(r.name), sustained_value(r)
        _slope(ax, sv or r.value, lims, top, f"slope:{r.name}", color=color, lw=SLOPE_WIDTH[r.name in MEMORY_LEVELS])
        draw_band(ax, r, lims[0], lims[1], color, upto=top)
        if sv is not None:
            _slope(ax, r.value, lims, top, f"slope:{r.name}:burst", color=color, **BURST)
        if labelled:
            labels.append((sv or r.value, _roof_text(r, r.name.upper()), color, ("nw", "se"), top,
                           band_factors([r], sv or r.value)))
    ref_top = max((x.value for x in roofs.refs), default=top)
    for r in roofs.datasheet_slopes:
        color = level_color(r.name)
        _slope(ax, r.value, lims, ref_top, f"slope:{r.name}:datasheet", color=color, **REFERENCE)
        labels.append((r.value, f"{r.name.upper()} {_fmt_rate(r.value, 'GB/s')} datasheet", color, ("nw", "se"),
                       ref_top, None))
    for group, text in roofs.links:
        for r in group:
            _slope(ax, r.value, lims, top, f"slope:{r.name}", **LINK)
            draw_band(ax, r, lims[0], lims[1], LINK["color"], upto=top)
        labels.append((group[-1].value, text, "0.45", ("se", "nw"), top, band_factors(group, group[-1].value)))
    for k, (bw, text, color, sides, upto, band) in enumerate(sorted(labels, key=lambda lab: lab[0])):
        _label(placer, ax, _places_along_slope(bw, lims, upto, k), text, sides, color, band)


def _draw_flats(ax, placer: LabelPlacer, roofs: _Roofs, lims, style: RoofStyle) -> None:
    """Each precision's measured roof solid from its ridge with the fastest level (roofs
    within 1% share one line and one label), its burst figure thin; the chain lines dash-dotted."""
    hi_x = lims[1]
    for group in _groups(roofs.measured) + [[r] for r in roofs.chains]:
        r = group[0]
        chain = is_chain_line(r)
        start = max(r.value / roofs.fastest if roofs.fastest else lims[0], lims[0])
        precision = (r.extra or {}).get("line_of") or r.name.rpartition(".")[0] if chain else r.name
        color = style.compute_color(precision) if style.compute_color else "black"
        for g in group:
            sv = sustained_value(g)
            ax.hlines(sv or g.value, start, hi_x, color=color, zorder=2, gid=f"flat:{g.name}",
                      **(CHAIN if chain else MEASURED))
            if sv is not None:
                ax.hlines(g.value, start, hi_x, color=color, zorder=2, gid=f"flat:{g.name}:burst", **BURST)
            if not chain:  # an elementwise ceiling is no unit's roof (rule 10): its line alone, no band
                draw_band(ax, g, start, hi_x, color)
        text = f"{chain_label(r)} {_fmt_rate(r.value, r.unit)}" if chain else \
            _roof_text(r, ", ".join(_roof_name(g) for g in group))
        _label(placer, ax, _places_along_flat(r.value, start, hi_x), text, ("nw", "sw"), color,
               None if chain else band_factors(group, r.value))


def _draw_references(ax, placer: LabelPlacer, roofs: _Roofs, lims, style: RoofStyle) -> None:
    """The datasheet and computed roofs of the drawn precisions, dashed, one label per value."""
    hi_x = lims[1]
    for source in ("datasheet", "computed"):
        for group in _groups([r for r in roofs.refs if r.source == source]):
            r = group[0]
            start = max(r.value / roofs.fastest if roofs.fastest else lims[0], lims[0])
            color = style.compute_color(r.name) if style.compute_color else "0.35"
            for g in group:
                ax.hlines(g.value, start, hi_x, color=color, zorder=2, gid=f"flat:{g.name}:{source}", **REFERENCE)
            places = list(reversed(_places_along_flat(r.value, start * 1.05, hi_x)))
            _label(placer, ax, places, f"{', '.join(g.name for g in group)} {_fmt_rate(r.value, r.unit)} {source}",
                   ("ne", "se"), color)


def _handles(roofs: _Roofs, style: RoofStyle) -> list[Line2D]:
    """Return the legend entries for what was drawn: a level's colour, then each line style."""
    order = ("l1", "l2", "l3", *MEMORY_LEVELS)
    out = [Line2D([], [], color=level_color(r.name), lw=2, label=f"slope: {r.name.upper()} bandwidth roof"
                  if style.slope_labels else f"slope: {_roof_text(r, r.name.upper())}")
           for r in sorted(roofs.slopes, key=lambda r: order.index(r.name) if r.name in order else len(order))]
    sustained = any(sustained_value(r) is not None for r in roofs.slopes + roofs.measured)
    if roofs.measured:
        out.append(Line2D([], [], color="0.2", label="solid flat: a precision's roof", **MEASURED))
    if sustained:
        out.append(Line2D([], [], color="0.2", label="thin: burst figure (thick: sustained)", **BURST))
    if roofs.chains:
        out.append(Line2D([], [], color="0.2", label="dash-dot: elementwise ceiling (FMA chains)",
                          **CHAIN))
    if roofs.refs or roofs.datasheet_slopes:
        out.append(Line2D([], [], color="0.35", label="dashed: datasheet or computed", **REFERENCE))
    if roofs.links:
        out.append(Line2D([], [], label="dotted: interconnect or host link", **LINK))
    if any(r.interval is not None for r in roofs.slopes + roofs.measured + roofs.chains
           + [x for group, _ in roofs.links for x in group]):
        out.append(band_handle())
    return out


def draw_roofs(ax, placer: LabelPlacer, model: Roofline, lims, style: RoofStyle = RoofStyle()) -> list[Line2D]:
    """Draw the roofs style selects over the chart limits lims (lo_x, hi_x, lo_y, hi_y):
    the slopes, each running up to the highest drawn compute roof (so it meets every
    precision's roof), then the measured flats from the ridge with the fastest level, then
    the references; labels go to placer. Returns the legend entries for what was drawn."""
    roofs = _select(model, style)
    _draw_slopes(ax, placer, roofs, lims, style.slope_labels)
    _draw_flats(ax, placer, roofs, lims, style)
    _draw_references(ax, placer, roofs, lims, style)
    return _handles(roofs, style)
