"""Charts as SVG whose points name themselves when the pointer rests on them (a <title> per point), offline.

    name_points(collection, titles)   a scatter's points, one title each, in the order they were given
    point_title(row)                  a run's point's title
    save_svg(fig, path)               the figure as SVG, each named point wrapped in <g><title>...</title>...</g>
    point_titles(path)                {title: count} of a saved SVG's named points (what a test reads)

Matplotlib writes a scatter with a gid as one <g id=gid> holding a <path> or a <use> per point, in the
order of its offsets (a line's markers: a <use> each); save_svg finds those, adds the titles and lets only
them take the pointer. Browsers show a <title> child as the element's tooltip, no script, no server.
"""
from __future__ import annotations

import io
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import pandas as pd
from matplotlib.lines import Line2D

from roofs.charts.kit import final_layout

SVG = "http://www.w3.org/2000/svg"
XLINK = "http://www.w3.org/1999/xlink"
ET.register_namespace("", SVG)
ET.register_namespace("xlink", XLINK)
TITLES = "_roofbench_titles"


def name_points(collection, titles) -> None:
    """Attach one title per point of a scatter (a PathCollection), or per marker of a line drawn with markers
    (a Line2D: its markers, in data order), for save_svg; give it a gid if it has none."""
    if not collection.get_gid():
        collection.set_gid(f"points:{id(collection)}")
    setattr(collection, TITLES, [str(t) for t in titles])


def _marks(group, markers_only: bool = False) -> list:
    """Return (parent, element) of each point drawn in a scatter's group, in document order (defs left out);
    markers_only: a line's markers (<use>), not the line's own path."""
    out = []

    def walk(parent):
        for child in list(parent):
            tag = child.tag.split("}")[-1]
            if tag == "use" or (tag == "path" and not markers_only):
                out.append((parent, child))
            elif tag == "g":
                walk(child)
    for child in group:
        if child.tag.split("}")[-1] != "defs":
            if child.tag.split("}")[-1] == "g":
                walk(child)
            elif child.tag.split("}")[-1] == "use" or (child.tag.split("}")[-1] == "path" and not markers_only):
                out.append((group, child))
    return out


def point_title(r) -> str:
    """Return a run's point's hover text (a row of its measurements): "gemm.square/torch fp32 1024x1024x1024:
    250 GFLOP/s, 80% of attainable"."""
    pct = getattr(r, "pct_of_attainable", None)
    pct = f", {float(pct):.3g}% of attainable" if pct is not None and pct != "" and pd.notna(pct) else ""
    return f"{r.impl} {r.precision or r.dtype} {r.shape}: {r.gflops:.4g} GFLOP/s{pct}"


def has_named_points(fig) -> bool:
    """Return whether fig holds a scatter named with name_points."""
    return bool(fig.findobj(lambda a: hasattr(a, TITLES)))


def save_svg(fig, path) -> Path:
    """Write fig as SVG at path, each point of a name_points scatter inside a <g> with its <title>; return path."""
    artists = fig.findobj(lambda a: hasattr(a, TITLES))
    named = {a.get_gid(): getattr(a, TITLES) for a in artists}
    lines = {a.get_gid() for a in artists if isinstance(a, Line2D)}
    buf = io.StringIO()
    final_layout(fig)
    fig.savefig(buf, format="svg")
    root = ET.fromstring(buf.getvalue())
    for group in root.iter(f"{{{SVG}}}g"):
        titles = named.get(group.get("id"))
        if not titles:
            continue
        for (parent, mark), text in zip(_marks(group, group.get("id") in lines), titles):
            wrap = ET.Element(f"{{{SVG}}}g", {"class": "point"})
            title = ET.SubElement(wrap, f"{{{SVG}}}title")
            title.text = text
            index = list(parent).index(mark)
            parent.remove(mark)
            wrap.append(mark)
            parent.insert(index, wrap)
    # only the named points take the pointer: a label's leader line or box drawn over a point would
    # otherwise take it, and the point's title would never show (defs keep theirs: a point's <use> clones them)
    _pointer_off(root)
    path = Path(path)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)
    return path


def _pointer_off(element) -> None:
    """Set pointer-events="none" on every drawn element under element outside named points and defs."""
    for child in element:
        tag = child.tag.split("}")[-1]
        if tag == "defs" or child.get("class") == "point":
            continue
        if tag in ("path", "use", "text", "image", "rect", "line", "polyline", "polygon", "circle", "ellipse"):
            child.set("pointer-events", "none")
        _pointer_off(child)


def point_titles(path) -> Counter:
    """Return a Counter of the titles of the named points (<g class="point"><title>) in an SVG file."""
    root = ET.parse(path).getroot()
    return Counter(t.text for g in root.iter(f"{{{SVG}}}g") if g.get("class") == "point"
                   for t in g.findall(f"{{{SVG}}}title"))
