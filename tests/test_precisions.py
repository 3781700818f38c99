"""bench/precisions.py is the one table of precisions: every precision named anywhere in the code,
the datasheets or the registry's ops has its row, and what other modules keep per precision is
read from that row (their figures are the row's, worked by hand here)."""
import ast
import json
import re
from pathlib import Path

import pytest
import torch

from bench import precisions, util
from bench.aot.targets import TRITON_TYPE
from bench.hw.units import AMX_FLAGS, NARROW_PRECISIONS, NARROW_UNITS, cpu_missing_units
from bench.measure.registry import REGISTRY, load_all
from bench.measure.tolerance import TOLERANCE, tolerance
from roofs.analysis.model import EXACT_IN
from roofs.analysis.roofline import INTEGER_PRECISIONS
from roofs.analysis.specs import AMX_OPS_PER_CLOCK, cpu_units
from roofs.charts.kit import ELEMENT_PRECISION, PRECISION_COLORS, PRECISION_MARKERS

ROOT = Path(__file__).parent.parent
# a token that names a precision: a short name (fp16, fp8e4m3, bf16, tf32, int8, mxfp4, fp6e2m3)
# or torch's name of an element type (float16, bfloat16, float8_e4m3fn, uint8)
PRECISION_TOKEN = re.compile(r"^(fp\d+(e\dm\d)?|bf16|tf32|u?int\d+|mxfp\d+\w*|nvfp\d+|b?float\d+(_e\dm\d\w*)?)$")
# element types the kernels index or pack with, never a measured precision
ELEMENT_TYPES_ONLY = {"uint8", "int16", "int64"}


def known_names() -> set:
    """Return every spelling the table gives a precision: short, long, other names, storage."""
    return {n for p in precisions.ROWS for n in (p.name, p.long, p.storage, *p.also) if n} | ELEMENT_TYPES_ONLY


def tokens_in_code(root: Path) -> dict[str, set]:
    """Return each precision-like token of the code under root (string constants and keyword
    names) with the files it is in."""
    out = {}
    for pkg in ("bench", "roofs", "kernels"):
        for path in (root / pkg).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                word = (node.value if isinstance(node, ast.Constant) and isinstance(node.value, str)
                        else node.arg if isinstance(node, ast.keyword) else None)
                if word and PRECISION_TOKEN.match(word):
                    out.setdefault(word, set()).add(str(path.relative_to(root)))
    return out


def tokens_in_json(value) -> set:
    """Return the precision-like keys and strings of a JSON document, at any depth."""
    if isinstance(value, dict):
        return {k for k in value if PRECISION_TOKEN.match(k)} | set().union(*map(tokens_in_json, value.values()))
    if isinstance(value, list):
        return set().union(*map(tokens_in_json, value)) if value else set()
    return {value} if isinstance(value, str) and PRECISION_TOKEN.match(value) else set()


def test_the_token_finder_finds_a_precision_added_to_a_colour_map(tmp_path):
    (tmp_path / "roofs").mkdir()
    (tmp_path / "roofs" / "colours.py").write_text('COLOURS = {"fp5e2m2": "gold", "l2": "black"}\n'
                                                   'CONFIGS = dict(A, fp5e3m1=B)\n')
    found = tokens_in_code(tmp_path)
    assert set(found) == {"fp5e2m2", "fp5e3m1"} and not set(found) <= known_names()
    assert tokens_in_json({"peaks_tflops": {"fp5e2m2": 4500, "l2": 1}, "about": "fp5e2m2"}) == {"fp5e2m2"}


def test_every_precision_the_code_names_has_a_row():
    missing = {word: sorted(files) for word, files in tokens_in_code(ROOT).items() if word not in known_names()}
    assert missing == {}


@pytest.mark.parametrize("name", ["specs.json", "cpu_cores.json"])
def test_every_precision_a_datasheet_names_has_a_row(name):
    found = tokens_in_json(json.loads((ROOT / "roofs" / "analysis" / name).read_text()))
    assert found - known_names() == set()
    if name == "specs.json":  # every precision a datasheet gives a peak for
        peaks = {p for part in json.loads((ROOT / "roofs/analysis/specs.json").read_text())["parts"]
                 for p in list(part["peaks_tflops"]) + list(part.get("clocks_mhz") or {})}
        assert peaks <= set(precisions.BY_NAME) and {"fp8e4m3", "mxfp4", "int8"} <= peaks


def test_every_op_precision_has_a_row_and_each_gemm_precision_is_measured_by_its_op():
    load_all()
    gemm_ops = {}
    for op in REGISTRY.ops.values():
        axis = next((a for a in op.axes if a.name == "dtype"), None)
        for value in (axis.values if axis else ()):
            assert util.precision_name(value) in known_names(), (op.name, value)
            if op.family == "gemm":
                gemm_ops.setdefault(util.precision_name(value), set()).add(op.name)
    assert {p: sorted(ops) for p, ops in gemm_ops.items()} == {
        p.name: (["gemm.search", "gemm.skinny", "gemm.square"] if p.gemm == "gemm" else [p.gemm])
        for p in precisions.ROWS if p.gemm}


def test_rows_are_whole():
    for p in precisions.ROWS:
        assert set(p.exact_in) <= set(precisions.BY_NAME) and p.name not in p.exact_in, p.name
        if p.storage:
            assert isinstance(getattr(torch, p.storage), torch.dtype), p.name
        if p.gemm:
            assert p.out and p.tolerance is not None and p.triton, p.name
        assert bool(p.cpu_flags) == bool(p.cpu_rate) == bool(p.cpu_unit), p.name
        assert bool(p.amx_flag) == bool(p.amx_per_clock), p.name
    colours = [p.colour for p in precisions.ROWS]
    assert len(set(colours)) == len(colours) and not {"red", "tab:red"} & set(colours)


def test_what_other_modules_keep_per_precision_is_the_rows():
    # spellings: either one, case-blind
    assert util.precision_name("BFloat16") == "bf16" and util.dtype_spellings("FP64") == ("fp64", "float64")
    assert util.dtype_spellings("fp8e4m3") == ("fp8e4m3",) and util.itemsize("fp8e5m2") == 1
    assert util.TORCH_NAMES["tf32"] == "float32" and "mxfp4" not in util.TORCH_NAMES
    # the gate's figures, a family's factor times them
    assert tolerance("bfloat16") == 1.5e-2 and tolerance("fp32", 4) == 4e-5 and TOLERANCE["int32"] == 0.0
    assert "int4" not in TOLERANCE
    # rule 10's exact wider paths; the integer roofs count operations
    assert EXACT_IN["fp8e5m2"] == ("fp16", "bf16", "fp32", "fp64") and EXACT_IN["tf32"] == ("fp32", "fp64")
    assert "fp64" not in EXACT_IN and "mxfp4" not in EXACT_IN
    assert "int8" in INTEGER_PRECISIONS and "fp32" not in INTEGER_PRECISIONS
    # Triton's signature types
    assert TRITON_TYPE[torch.float8_e4m3fn] == "fp8e4nv" and TRITON_TYPE[torch.bfloat16] == "bf16"
    assert TRITON_TYPE[torch.int8] == "i8" and TRITON_TYPE[torch.uint8] == "u8"
    # chart colours and markers, the GEMV's "fp8" weight format drawn as fp8e4m3
    assert PRECISION_COLORS["fp8"] == PRECISION_COLORS["fp8e4m3"] == "tab:purple" and PRECISION_MARKERS["int8"] == "P"
    assert ELEMENT_PRECISION == {"float64": "fp64", "float32": "fp32", "float16": "fp16", "bfloat16": "bf16",
                                 "int8": "int8", "int32": "int32"}


def test_cpu_widths_come_from_the_rows():
    assert {name: (rate, unit) for name, _, rate, unit in NARROW_UNITS} == {
        "fp16": (2, "fp16 FMA"), "bf16": (2, "bf16 dot products"), "int8": (4, "int8 dot products")}
    assert AMX_FLAGS == {"fp16": "amx_fp16", "bf16": "amx_bf16", "int8": "amx_int8"}
    assert AMX_OPS_PER_CLOCK == {"fp16": 1024, "bf16": 1024, "int8": 2048}
    assert set(NARROW_PRECISIONS) == {"fp16", "bf16", "fp8e4m3", "fp8e5m2"}
    # a 256-bit datapath with 2 pipes (Zen 4's): fp32 = 8 lanes x 2 pipes x 2 = 32 per clock; bf16 2x, int8 4x
    units = cpu_units({"avx2", "fma", "avx512_bf16", "avx512_vnni"})
    assert {p: ops for p, (ops, _) in units.items()} == {"fp32": 32.0, "fp64": 16.0, "bf16": 64.0, "int8": 128.0}
    # Sapphire Rapids' AMX: a tile unit's 1,024 bf16 and 2,048 int8 per clock beat the vector units
    amx = cpu_units({"avx512f", "fma", "amx_bf16", "amx_int8", "avx512_bf16"})
    assert amx["bf16"][0] == 1024 and amx["int8"][0] == 2048
    assert cpu_missing_units({"kind": "cpu", "cpu_flags": ["avx2", "avx512_bf16"]}) == {"fp16", "fp8e4m3", "fp8e5m2"}
