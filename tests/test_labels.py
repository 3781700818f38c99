"""The label placer (roofs/charts/labels.py) on a crowded chart built here: no two label boxes
intersect and no label box crosses a drawn line segment (the lines checked by sampling each
segment, not by the placer's own geometry; the edges of the roofs' bands are lines too), and the
charts' shared rules: one colour per memory level, elementwise ceilings dash-dotted and named, a
point's level by rule 12."""
import itertools

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from bench.util import fmt_halfwidth
from roofs.analysis.bounds import boundary_level
from roofs.analysis.roofline import Roof, Roofline
from roofs.charts.ceilings import CHAIN, RoofStyle, chain_label, draw_roofs
from roofs.charts.kit import LEVEL_COLORS, level_color
from roofs.charts.labels import KEY_ROWS, LabelPlacer


def _segments(fig, leaders: bool = False):
    """Return every drawn line of fig's axes (the placer's leader lines only with leaders)
    as sampled display-coordinate points (Line2D and LineCollection artists, and the edges of
    PolyCollections: the roofs' bands), NaN breaks and the parts clipped off the axes left out."""
    out = []
    for ax in fig.axes:
        frame = ax.get_window_extent(fig.canvas.get_renderer())
        for artist in list(ax.lines) + list(ax.collections):
            if artist.get_gid() == "leader" and not leaders:
                continue
            if isinstance(artist, matplotlib.lines.Line2D):
                if artist.get_linestyle() in ("None", "none", ""):
                    continue
                polylines = [artist.get_transform().transform(artist.get_xydata())]
            elif isinstance(artist, matplotlib.collections.LineCollection):
                polylines = [artist.get_transform().transform(np.asarray(s, float)) for s in artist.get_segments()]
            elif isinstance(artist, matplotlib.collections.PolyCollection):  # a band's edges (a roof's interval)
                polylines = [artist.get_transform().transform(poly) for path in artist.get_paths()
                             for poly in path.to_polygons()]
            else:
                continue
            for xy in polylines:
                for a, b in itertools.pairwise(xy):
                    if np.isfinite(a).all() and np.isfinite(b).all():
                        t = np.linspace(0, 1, 200)[:, None]
                        pts = a + t * (b - a)
                        if artist.get_clip_on():
                            pts = pts[(pts[:, 0] >= frame.x0) & (pts[:, 0] <= frame.x1)
                                      & (pts[:, 1] >= frame.y0) & (pts[:, 1] <= frame.y1)]
                        out.append(pts)
    return out


def crossings(fig, texts, leaders: bool = False) -> list[str]:
    """Return the texts whose box (shrunk by half a pixel) holds a sampled point of a drawn
    line (of the placer's leaders too, with leaders)."""
    renderer = fig.canvas.get_renderer()
    lines = _segments(fig, leaders)
    pts = np.concatenate(lines) if lines else np.zeros((0, 2))
    bad = []
    for t in texts:
        b = t.get_window_extent(renderer)
        if ((pts[:, 0] > b.x0 + 0.5) & (pts[:, 0] < b.x1 - 0.5) & (pts[:, 1] > b.y0 + 0.5)
                & (pts[:, 1] < b.y1 - 0.5)).any():
            bad.append(t.get_text())
    return bad


def overlapping(fig, texts) -> list[tuple[str, str]]:
    renderer = fig.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in texts]
    return [(texts[i].get_text(), texts[j].get_text()) for i in range(len(boxes)) for j in range(i + 1, len(boxes))
            if boxes[i].x0 < boxes[j].x1 and boxes[j].x0 < boxes[i].x1
            and boxes[i].y0 < boxes[j].y1 and boxes[j].y0 < boxes[i].y1]


def _log_frame(fig, ax, lims):
    """Set the chart's log axes to lims (x0, x1, y0, y1) and lay the figure out, as the charts do before placing."""
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lims[0], lims[1])
    ax.set_ylim(lims[2], lims[3])
    fig.tight_layout()


def crowded_model() -> Roofline:
    """Four levels, two of them 4% apart (a CPU's L1 and L2), seven compute roofs, chain lines."""
    bw = [Roof("bandwidth", n, v, "GB/s") for n, v in (("l1", 428.0), ("l2", 410.0), ("l3", 211.0), ("dram", 83.0))]
    flats = [Roof("compute", n, v, "GFLOP/s") for n, v in
             (("int8", 1754.0), ("bf16", 813.0), ("fp32", 223.0), ("fp64", 112.0))]
    chains = [Roof("compute", f"{p}.elementwise", v, "GFLOP/s", extra={"unit": "elementwise", "line_of": p})
              for p, v in (("fp32", 33.6), ("bf16", 22.0), ("fp64", 16.7))]
    refs = [Roof("compute", n, v, "GFLOP/s", source="computed") for n, v in (("fp32", 332.0), ("bf16", 665.0))]
    return Roofline(bw + flats + chains + refs)


def test_placer_on_a_crowded_chart_keeps_labels_off_each_other_and_off_every_line():
    fig, ax = plt.subplots(figsize=(10, 6.5), dpi=120)
    rng = np.random.default_rng(3)
    lims = (1e-2, 1e4, 0.5, 6000.0)
    placer = LabelPlacer(fig)
    draw_roofs(ax, placer, crowded_model(), lims, RoofStyle())
    # thirty points in a tight cluster between the roofs, each labelled, and a sweep's line through them
    xs = np.sort(10 ** rng.uniform(2, 3, 30))
    ys = 60 * (xs / 100) ** 0.4 * 10 ** rng.uniform(-0.05, 0.05, 30)
    ax.plot(xs, ys, lw=1, marker="o", ms=4)
    placer.avoid(ax, xs, ys)
    for i, (x, y) in enumerate(zip(xs, ys)):
        placer.add(ax, x, y, f"square/torch point {i}", gap=7)
    _log_frame(fig, ax, lims)
    try:
        placed = placer.place()
        assert len(placed) == 30 + 4 + 4 + 3 + 2  # every point, slope, flat, chain line and reference labelled
        assert overlapping(fig, placed) == []
        assert crossings(fig, placed) == []  # no roof, data line or frame through a label
        edge = fig.bbox
        renderer = fig.canvas.get_renderer()
        for t in placed:
            b = t.get_window_extent(renderer)
            assert edge.x0 <= b.x0 and b.x1 <= edge.x1 and edge.y0 <= b.y0 and b.y1 <= edge.y1, t.get_text()
    finally:
        plt.close(fig)


def test_keyed_labels_in_a_crowded_cluster_become_numbers_and_a_key_and_no_leader_crosses_a_text():
    """Sixty keyed labels on forty pixels of cluster: those with no place whose leader crosses no
    text become a number by their point and a line of one key; every label is said once, on
    the chart or in the key, and the labels' leaders cross no text."""
    fig, ax = plt.subplots(figsize=(10, 6.5), dpi=120)
    rng = np.random.default_rng(5)
    lims = (1e-2, 1e4, 0.5, 6000.0)
    placer = LabelPlacer(fig)
    draw_roofs(ax, placer, crowded_model(), lims, RoofStyle())
    xs = 10 ** rng.uniform(2.4, 2.6, 60)
    ys = 80 * 10 ** rng.uniform(-0.1, 0.1, 60)
    ax.scatter(xs, ys, s=16)
    placer.avoid(ax, xs, ys)
    names = [f"square/torch point {i}" for i in range(60)]
    for x, y, name in zip(xs, ys, names):
        placer.add(ax, x, y, name, gap=7, key=True)
    _log_frame(fig, ax, lims)
    try:
        placed = placer.place()
        key = [t for t in placed if t.get_gid() == "label:key"]
        assert key, "the cluster needs a key"
        lines = [line for t in key for line in t.get_text().split("\n")]  # its columns, in order
        assert lines[0] == "numbered points" and all(len(t.get_text().split("\n")) <= KEY_ROWS for t in key)
        keyed = {line.split("  ", 1)[1]: line.split("  ", 1)[0] for line in lines[1:] if line[0].isdigit()}
        placeless = {line.split("  ", 1)[1].split(" (at x ")[0] for line in lines[1:] if line.startswith("-  ")}
        assert len(keyed) + len(placeless) == len(lines) - 1 and len(keyed) >= 5
        on_chart = {t.get_text() for t in placed} - {t.get_text() for t in key}
        assert sorted(keyed.values(), key=int) == [str(n) for n in range(1, len(keyed) + 1)]
        assert set(keyed.values()) <= on_chart  # each number by its point
        keyed.update(dict.fromkeys(placeless, "-"))
        assert sorted(set(names) & on_chart | set(keyed)) == sorted(names)  # every label said, once
        assert not set(names) & on_chart & set(keyed)
        assert crossings(fig, placed, leaders=True) == []  # no line, leaders too, through a text placed
        assert overlapping(fig, placed) == []
    finally:
        plt.close(fig)


def test_a_label_that_fits_beside_its_line_stays_there():
    """One slope and one flat on an empty chart: the flat's label touches its line (its box
    within gap + 2 px of it)."""
    fig, ax = plt.subplots(figsize=(6, 4), dpi=120)
    placer = LabelPlacer(fig)
    lims = (1e-2, 1e3, 1.0, 1e4)
    draw_roofs(ax, placer, Roofline([Roof("bandwidth", "dram", 80.0, "GB/s"),
                                     Roof("compute", "fp32", 200.0, "GFLOP/s")]), lims)
    _log_frame(fig, ax, lims)
    try:
        placed = placer.place()
        renderer = fig.canvas.get_renderer()
        flat = next(t for t in placed if t.get_text().startswith("fp32"))
        y = ax.transData.transform((1.0, 200.0))[1]
        b = flat.get_window_extent(renderer)
        assert min(abs(b.y0 - y), abs(b.y1 - y)) <= 3.0 + 2.0
    finally:
        plt.close(fig)


def test_elementwise_ceilings_are_dash_dotted_and_named_so_and_levels_keep_their_colour():
    fig, ax = plt.subplots()
    placer = LabelPlacer(fig)
    handles = draw_roofs(ax, placer, crowded_model(), (1e-2, 1e4, 0.5, 6000.0))
    try:
        gids = {a.get_gid(): a for a in ax.get_children() if a.get_gid()}
        chain = gids["flat:fp32.elementwise"]
        assert chain.get_linestyle()[0][1] is not None  # dashed (a solid line has no dash pattern)
        assert tuple(chain.get_linestyle()[0][1]) != tuple(gids["flat:fp32"].get_linestyle()[0][1] or ())
        texts = [r.text for r in placer.requests]
        roof = next(r for r in crowded_model().roofs if r.name == "fp32.elementwise")
        named = [t for t in texts if t.startswith(chain_label(roof) + " ")]  # its name as the charts write it
        assert roof.value == 33.6 and len(named) == 1 and named[0].endswith(" 34 GFLOP/s")  # at 2 digits
        assert not any(t.startswith("fp32.elementwise") for t in texts)
        for level in ("l1", "l2", "l3", "dram"):
            assert matplotlib.colors.same_color(gids[f"slope:{level}"].get_color(), LEVEL_COLORS[level])
        assert len({LEVEL_COLORS[k] for k in ("l1", "l2", "l3", "dram")}) == 4
        labels = [h.get_label() for h in handles]
        assert any(lab.startswith("dash-dot: elementwise ceiling") for lab in labels)
        assert [lab.split()[1] for lab in labels if lab.startswith("slope:")] == ["L1", "L2", "L3", "DRAM"]
        assert level_color("l2.read") == LEVEL_COLORS["l2"] and CHAIN["ls"] == "-."
    finally:
        plt.close(fig)


def test_a_points_level_follows_its_boundary_column_or_rule_12():
    """The stream chart colours a point by its boundary column; a row without one gets
    boundary_level's answer (reach, or 4x capacity), not "working set <= size"."""
    from bench.results import Run
    from roofs.charts.kit import point_levels
    caches = [{"name": "l1", "total_bytes": 32 * 1024}, {"name": "l2", "total_bytes": 1 << 20}]
    run = Run(dir=".", meta={"device": {"kind": "cpu", "caches": caches}}, measurements=pd.DataFrame(),
              roofs=[])
    ws = [16e3, 100e3, 3e6, 5e6, 100e3]
    pts = pd.DataFrame({"working_set_bytes": ws, "mode": ["warm"] * 4 + ["cold"],
                        "boundary": ["", "", "", "", ""]})
    got = list(point_levels(run, pts))
    sizes = [("l1", 32 * 1024), ("l2", 1 << 20)]
    assert got == [boundary_level(w, m, sizes, "dram") for w, m in zip(ws, pts["mode"])]
    assert got == ["l1", "l1", "l2", "dram", "dram"]  # 100 KB is within L1's 4x band; 3 MB within L2's
    pts["boundary"] = ["l2", "", "", "", ""]
    assert point_levels(run, pts).iloc[0] == "l2"


if __name__ == "__main__":
    pytest.main([__file__])


def test_a_halfwidth_reads_as_a_percentage_up_to_999_and_as_over_that_past_it():
    assert fmt_halfwidth(0.123) == "+/-12%" and fmt_halfwidth(0.1234, 1) == "+/-12.3%"
    assert fmt_halfwidth(9.99) == "+/-999%"
    assert fmt_halfwidth(10.0) == fmt_halfwidth(3.2e23) == "over +/-999%"
