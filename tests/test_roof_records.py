"""What roofs.json records for the tables and charts to read (issue 55, items 2 and 7), on
hand-worked cases: the sizes each level roof's statistic is over (extra.window_bytes, what
bandwidth.png shades), and why a precision with no unit of its own runs below the wider path
it borrows as its roof (extra.own_reason), which the tables and charts name as that path's line."""
import pandas as pd
from test_model import _gemm, _stair

from roofs.analysis.confirm import derive_roofs
from roofs.analysis.model import CONVERTS_EACH_CALL
from roofs.analysis.roofline import shown_name

KIB, MIB = 2**10, 2**20


def test_a_level_roof_records_the_sizes_its_statistic_is_over():
    """One 4 MiB cache: 256 KiB-4 MiB at 300 GB/s, 8-512 MiB at 50. Off chip starts at 4x the
    4 MiB edge: 16-512 MiB (6 sizes, from_bytes 16 MiB); its roof is over the outer half of
    those, the last 3 sizes: 128-512 MiB. The cache is the innermost level: all its sizes."""
    rows = pd.DataFrame(_stair([(256 * KIB, 4 * MIB, 300.0), (8 * MIB, 512 * MIB, 50.0)]))
    roofs, _ = derive_roofs(rows, {"kind": "cpu", "caches": [{"name": "l2", "total_bytes": 4 * MIB}]})
    got = {r.name: r for r in roofs}
    assert got["dram"].extra["from_bytes"] == 16 * MIB
    assert got["dram"].extra["window_bytes"] == [128 * MIB, 512 * MIB]
    assert got["l2"].extra["window_bytes"] == [256 * KIB, 4 * MIB]


def test_a_precision_without_a_unit_records_why_its_rows_run_below_its_line():
    """A CPU without AVX512-FP16: fp16 GEMMs at 5 and 4 GFLOP/s (own figure 5: 4 is not within
    the 10% shape tolerance of it, so 5 is its one shape) under fp32's 200 and 199 (roof 199).
    fp16's bound is fp32's path, labelled via, and its own rows run below it because every call
    converts its inputs."""
    rows = pd.DataFrame([_gemm("fp32", 2048, 200), _gemm("fp32", 1024, 199), _gemm("fp16", 2048, 5),
                         _gemm("fp16", 1024, 4)])
    roofs, _ = derive_roofs(rows, {"kind": "cpu", "caches": [], "cpu_flags": ["avx2", "fma"]})
    fp16 = next(r for r in roofs if r.name == "fp16")
    assert fp16.value == 199 and fp16.extra["own_gflops"] == 5
    assert fp16.extra["own_reason"] == CONVERTS_EACH_CALL
    assert shown_name(fp16) == "fp16 via fp32"
    fp32 = next(r for r in roofs if r.name == "fp32")
    assert shown_name(fp32) == "fp32" and "own_reason" not in fp32.extra
