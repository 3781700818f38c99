"""roofs/charts/registry.py's CHARTS, the one list of a run folder's pictures: each row names a
function that draws it, every run-drawing function has a row, a finished run folder holds the
charts the table gives it and no other file of a picture, and each row's condition (When) says
which runs draw it as its drawing function finds: worked by hand on small runs, and checked
against the functions on the committed runs."""
import importlib
import inspect
import math
import pkgutil
import shutil
from pathlib import Path

import pandas as pd
import pytest
from synthetic import make_row

import roofs.charts
from bench.results import BUSY_PREFIX, COLUMNS, Run, load_run
from roofs.charts.registry import BY_FILE, CHARTS, Chart, ChartTableError, chart_runs, charts_for
from roofs.reports.finish import finish_run

ROOT = Path(__file__).parent.parent
DATA = Path(__file__).parent / "data"
H200_GEMM = ROOT / "results" / "nvidia-h200-20261130T003145Z"   # a committed run of GEMMs alone
H200 = ROOT / "results" / "nvidia-h200-20261130T010900Z"
REFERENCE = ROOT / "results" / "cpu-amd-epyc-20261130T024914Z"


def test_every_row_names_a_drawing_function_and_a_file_of_its_own():
    assert len({c.file for c in CHARTS}) == len({c.title for c in CHARTS}) == len(CHARTS) == len(BY_FILE)
    for c in CHARTS:
        assert c.file.endswith(".png") and c.rows in ("sweeps", "all") and c.meaning and c.when.says, c.file
        assert callable(c.drawer()), c.file
    row = CHARTS[0]
    for draw, reason in (("roofs.charts.plot:no_such_chart", "no_function"), ("roofs.charts.nothing:draw", "no_module"),
                         ("roofs.charts.plot:WINDOW_PAD", "no_function")):  # a number is no function either
        with pytest.raises(ChartTableError) as e:
            Chart(row.file, row.title, row.when, draw, row.meaning).drawer()
        assert e.value.reason == reason


def test_every_function_that_draws_a_run_has_a_row():
    """A chart is drawn by a function draw_NAME(run) of a module of roofs/charts: each such
    function is some row's, so a chart drawn outside the table cannot be added unseen."""
    tabled = {c.drawer() for c in CHARTS}
    found = []
    for m in pkgutil.iter_modules(roofs.charts.__path__):
        module = importlib.import_module(f"roofs.charts.{m.name}")
        for name, f in inspect.getmembers(module, inspect.isfunction):
            if f.__module__ == module.__name__ and name.startswith("draw_") \
                    and list(inspect.signature(f).parameters) == ["run"]:
                found.append(f)
    assert len(found) == len(CHARTS) and set(found) == tabled


@pytest.mark.slow
def test_a_finished_run_folder_holds_the_tables_charts_and_no_other(tmp_path):
    """tests/data/run_a (stream, GEMM and GEMV rows; no attention, link, FMA-chain or energy rows)
    finished as a run finishes: its pictures are the table's rows for it, the overview, three
    family rooflines, bandwidth and gemm, each SVG beside its PNG, and the report shows each in the
    table's order."""
    d = Path(shutil.copytree(DATA / "run_a", tmp_path / "run_a"))
    assert finish_run(d) == []
    mine = [c.file for c in charts_for(load_run(d))]
    assert len(mine) == 6 and {"roofline-attention.png", "links.png", "fma.png", "energy.png"}.isdisjoint(mine)
    assert sorted(p.name for p in d.glob("*.png")) == sorted(mine)
    assert {p.stem for p in d.glob("*.svg")} <= {Path(f).stem for f in mine}
    md = (d / "report.md").read_text()
    shown = [md.index(f"![{BY_FILE[f].title}]({f})") for f in mine]
    assert shown == sorted(shown)


def _run(rows: list[dict], tmp_path, **meta) -> Run:
    df = pd.DataFrame(rows)
    for c in COLUMNS:
        if c not in df:
            df[c] = None
    return Run(dir=tmp_path, meta=meta, measurements=df, roofs=[])


def _stream_copy(n=2**20):   # a copy does no FLOPs: bandwidth.png draws it, no roofline places it
    return make_row("stream.copy", "torch", "float32", n, f"({n},)", 8 * n, 0, 8 * n, 8 * n / 100e9)


def _gemm(n=1024, mode="warm", joules=None):
    row = make_row("gemm.square", "torch", "fp32", n, f"{n}x{n}x{n}", 12 * n * n, 2 * n**3, 12 * n * n,
                   2 * n**3 / 1e12, mode=mode, precision="fp32")
    return dict(row, joules=joules)


def _fma(flag=""):
    n = 2**20
    return make_row("fma.chains", "triton", "fp32", n, f"({n},)x8x4", 8 * n, 64 * n, 8 * n, 64 * n / 1e12,
                    precision="fp32", flag=flag)


def _files(run) -> list[str]:
    return [c.file for c in charts_for(run)]


def test_which_runs_draw_each_chart_worked_by_hand(tmp_path):
    # copies alone: the overview and bandwidth, no stream roofline (no FLOPs to place)
    assert _files(_run([_stream_copy()], tmp_path)) == ["roofline.png", "bandwidth.png"]
    # interconnect rows alone (a --comm run): links.png only, whether run.json or the rows say so
    comm = make_row("comm.all_reduce", "nccl", "float32", 2**20, "2 ranks", 4 * 2**20, 0, 4 * 2**20, 1e-4)
    assert _files(_run([comm], tmp_path)) == _files(_run([comm], tmp_path, run_kind="comm")) == ["links.png"]
    # GEMMs measured in the sustained phase only: the sweeps hold none, so no GEMM chart
    assert _files(_run([_stream_copy(), _gemm(mode="sustained")], tmp_path)) == ["roofline.png", "bandwidth.png"]
    # energy: the fit needs 3 rows with joules, and reads the sustained windows too (rows="all")
    two = [_gemm(1024, joules=0.5), _gemm(2048, joules=3.0)]
    assert "energy.png" not in _files(_run(two, tmp_path))
    three = _run(two + [_gemm(4096, mode="sustained", joules=20.0)], tmp_path)
    assert _files(three) == ["roofline.png", "roofline-gemm.png", "gemm.png", "energy.png"]
    # FMA chains the runner flagged set no sweep: no fma.png until one is unflagged
    busy = _fma(flag=f"{BUSY_PREFIX}: load 3.1 on 2 cores")
    assert "fma.png" not in _files(_run([busy], tmp_path))
    assert "fma.png" in _files(_run([busy, _fma()], tmp_path))
    # a skipped row draws nothing of its family
    skipped = dict(_gemm(), status="skipped", gflops=math.nan)
    assert _files(_run([skipped], tmp_path)) == ["roofline.png"]


@pytest.mark.parametrize("folder", [DATA / "run_a", H200_GEMM, H200, REFERENCE], ids=lambda p: p.name)
def test_a_chart_the_table_leaves_out_is_one_its_function_finds_nothing_for(folder):
    """Each row the table leaves out of a committed run, its drawing function returns None for
    (tests/test_plot.py's drawn figures are the other side: every chart the table gives a run is drawn)."""
    run = load_run(folder)
    runs = chart_runs(run)
    left = [c for c in CHARTS if c not in charts_for(run, runs)]
    assert left  # each of these runs lacks some family
    for c in left:
        assert c.drawer()(runs[c.rows]) is None, c.file
