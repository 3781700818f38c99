"""The README's showcase pictures and figures come from committed runs derived by the current
method: each picture's folder holds the roofs.json its caption's figures are read from, that
roofs.json was derived by bench.results.METHOD_VERSION, and every "<roof> <number>" the caption
states is that roof's measured value as printed (to the digits shown)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bench.results import METHOD_VERSION

ROOT = Path(__file__).resolve().parent.parent
PICTURE = re.compile(r"!\[[^\]]*\]\((results/[^)]+)/[^/)]+\.(?:png|svg)\)\n\n\*(.+?)\*\n", re.S)
# a caption's figure: a roof's name as the README spells it, then its number; the unit that
# follows the number (or the next unit in the sentence) scales it
NAMES = {"L1": "l1", "L2": "l2", "L3": "l3", "DRAM": "dram", "HBM": "hbm", "fp64": "fp64", "fp32": "fp32",
         "tf32": "tf32", "fp16": "fp16", "bf16": "bf16", "fp8 e4m3": "fp8e4m3", "fp8 e5m2": "fp8e5m2",
         "int8": "int8"}
UNITS = {"GB/s": 1.0, "TB/s": 1e3, "GFLOP/s": 1.0, "TFLOP/s": 1e3, "GOP/s": 1.0, "TOP/s": 1e3}
FIGURE = re.compile(r"(?<![\w.])(" + "|".join(sorted(map(re.escape, NAMES), key=len, reverse=True))
                    + r") (\d[\d,]*(?:\.\d+)?)")
UNIT = re.compile(r"\b(" + "|".join(map(re.escape, UNITS)) + r")")


def figures(caption: str) -> list[tuple[str, float, int, float]]:
    """Return [(roof name, figure, decimals shown, unit scale)] of a caption."""
    out = []
    for m in FIGURE.finditer(caption):
        unit = UNIT.search(caption, m.end())
        text = m.group(2).replace(",", "")
        decimals = len(text.split(".")[1]) if "." in text else 0
        out.append((NAMES[m.group(1)], float(text), decimals, UNITS[unit.group(1)] if unit else 1.0))
    return out


def showcases() -> list[tuple[str, str]]:
    text = (ROOT / "README.md").read_text()
    return [(folder, " ".join(caption.split())) for folder, caption in PICTURE.findall(text)]


def test_caption_parsing_by_hand():
    got = figures("L1 460, L2 453 and DRAM 72.5 GB/s up to bf16 1,003 and fp8 e4m3 1.5 TFLOP/s")
    assert got == [("l1", 460.0, 0, 1.0), ("l2", 453.0, 0, 1.0), ("dram", 72.5, 1, 1.0),
                   ("bf16", 1003.0, 0, 1e3), ("fp8e4m3", 1.5, 1, 1e3)]


def test_the_readme_shows_pictures():
    assert len(showcases()) >= 2


@pytest.mark.parametrize("folder,caption", showcases())
def test_each_caption_states_its_run_as_derived(folder, caption):
    roofs_json = ROOT / folder / "roofs.json"
    assert roofs_json.is_file(), f"{folder} holds no roofs.json beside its picture"
    data = json.loads(roofs_json.read_text())
    assert data["derived_by"]["method_version"] == METHOD_VERSION
    assert f"method {METHOD_VERSION}" in caption
    measured = {r["name"]: r["value"] for r in data["roofs"] if r.get("source") == "measured" and r.get("value")}
    stated = figures(caption)
    assert len(stated) >= 3
    for name, figure, decimals, scale in stated:
        assert name in measured, f"{name} is in the caption but {folder} measured no such roof"
        assert abs(measured[name] / scale - figure) <= 0.5 * 10 ** -decimals + 1e-9, (name, measured[name], figure)
