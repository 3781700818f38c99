"""Every picture a run folder holds, declared once. The table CHARTS is what the code reads:

    roofs/charts/plot.py         draws (plot_run, figures) and removes (clear_charts) the charts
                                 the table gives a run, by the drawing function each row names
    roofs/reports/report.py      shows them, in the table's order, under each row's title
    bench/doctables.py           writes REFERENCE.md's charts table from the rows
    tests                        read the table for which charts a run has

A new chart is its drawing module and one row here. Each row holds the chart's file name, its
report title, the runs that draw it (a When: one phrase for the docs, one test of the run), the
"module:function" that draws it (given the run, it returns the figure, or None when the run has
nothing for it), which of the run's rows it reads, and its line for REFERENCE.md. The drawing
functions are named, not imported, so the report and the docs read the table without matplotlib.
"""
from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from bench.results import Run, is_runner_flag, text_column
from roofs.analysis.energy import fit_energy
from roofs.analysis.model import SUSTAINED_MODE

FMA_OP = "fma.chains"


class ChartTableError(LookupError):
    """A row of CHARTS names a drawing function that does not exist: `reason` says which part is missing."""

    def __init__(self, message: str, reason: str):
        super().__init__(message)
        self.reason = reason   # "no_module" or "no_function"


@dataclass(frozen=True)
class When:
    """Which runs draw a chart: `says` is REFERENCE.md's phrase, `holds(run)` the test of a run
    (the run as the chart reads it: chart_runs)."""
    says: str
    holds: Callable[[Run], bool]


def _ok(run: Run) -> pd.DataFrame:
    df = run.measurements
    return df[df["status"] == "ok"]


def _placed(df: pd.DataFrame) -> pd.DataFrame:
    """Return the rows a roofline places (roofs/charts/kit.py's _points): ok, doing FLOPs at a
    rate and an intensity, never flagged by the runner."""
    keep = ~text_column(df, "flag").map(is_runner_flag).astype(bool)
    return df[keep & (df["status"] == "ok") & (df["flops"] > 0) & (df["gflops"] > 0) & (df["intensity"] > 0)]


def interconnect_only(run: Run) -> bool:
    """Return whether the run measured links alone (`--comm`): run.json's run_kind, else its rows' families."""
    kind = run.meta.get("run_kind")
    return kind == "comm" if kind else set(run.measurements["family"]) == {"comm"}


def _family_placed(family: str, says: str) -> When:
    return When(f"runs with {says} points that do FLOPs",
                lambda run: bool((_placed(run.measurements)["family"] == family).any()))


def _rated(family: str, rate: str) -> Callable[[Run], bool]:
    return lambda run: bool(((_ok(run)["family"] == family) & _ok(run)[rate].notna()).any())


DEVICE_RUN = When("every run but an interconnect-only one (`--comm`)", lambda run: not interconnect_only(run))
STREAM_RATES = When("runs with stream points", _rated("stream", "gbps"))
GEMM_RATES = When("runs with GEMM points", _rated("gemm", "gflops"))
LINK_ROWS = When("runs with interconnect or host-copy points (`--comm`, the transfer family)",
                 lambda run: bool(_ok(run)["family"].isin(["comm", "transfer"]).any()))
FMA_ROWS = When(f"runs with `{FMA_OP}` points the runner did not flag",
                lambda run: bool(((_ok(run)["op"] == FMA_OP) & (_ok(run)["gflops"] > 0)
                                  & ~text_column(_ok(run), "flag").map(is_runner_flag).astype(bool)).any()))
ENERGY_ROWS = When("runs whose energy readings fit the energy model (3 or more points with joules)",
                   lambda run: fit_energy(run.measurements)[0] is not None)


@dataclass(frozen=True)
class Chart:
    file: str       # its file in the run folder; an SVG of the same stem beside it when it names its points
    title: str      # its section title in report.md and report.html
    when: When      # the runs that draw it
    draw: str       # "module:function": function(run) -> its figure, or None when the run has nothing for it
    meaning: str    # its line in REFERENCE.md's charts table
    rows: str = "sweeps"   # the run it reads (chart_runs): "sweeps" without the sustained rows, or "all"

    def drawer(self) -> Callable:
        """Return the function that draws this chart; ChartTableError when its row names none."""
        module, _, name = self.draw.partition(":")
        try:
            found = getattr(importlib.import_module(module), name, None)
        except ModuleNotFoundError:
            raise ChartTableError(f"{self.file}'s row names {self.draw}, and there is no module {module}.",
                                  "no_module") from None
        if not callable(found):
            raise ChartTableError(f"{self.file}'s row names {self.draw}, and {module} has no function {name}.",
                                  "no_function")
        return found


CHARTS = (
    Chart("roofline.png", "Roofline", DEVICE_RUN, "roofs.charts.plot:draw_roofline",
          "the overview, log-log: each measured bandwidth roof (memory and each cache level) as a slope up to every "
          "precision's roof, one flat roof per precision (a roof with a sustained figure solid at it, its burst "
          "figure a thin line beside it), each measured roof's interval a band in its colour, datasheet/computed "
          "roofs dashed, links dotted; the best point of each (op, impl, precision), labelled by its point or, in a "
          "cluster where only a leader across another text would reach it, by a number and a line of the chart's "
          "\"numbered points\" key (or the key gives its place), colour by family and marker by precision; points "
          "above their bound ringed red; a roof a precision borrows from a wider path labelled as that path's line "
          "(\"fp8e4m3 via bf16\"), its own points drawn however far under it when it converts on every call (the "
          "footnote says so)"),
    Chart("roofline-stream.png", "Roofline: stream", _family_placed("stream", "stream"),
          "roofs.charts.families:draw_stream_roofline",
          "every stream point that does FLOPs under the roofs, coloured by the memory level that bounds it (its "
          "`boundary` column)"),
    Chart("roofline-gemm.png", "Roofline: GEMM", _family_placed("gemm", "GEMM"),
          "roofs.charts.families:draw_gemm_roofline",
          "every GEMM point under the roofs, coloured by precision, each sweep joined in order"),
    Chart("roofline-gemv.png", "Roofline: decode GEMV", _family_placed("gemv", "decode GEMV"),
          "roofs.charts.families:draw_gemv_roofline",
          "every decode GEMV point, one panel per weight format, each layer's batch walk joined"),
    Chart("roofline-attention.png", "Roofline: attention", _family_placed("attention", "attention"),
          "roofs.charts.families:draw_attention_roofline",
          "every attention point under the roofs, coloured by op and impl"),
    Chart("bandwidth.png", "Bandwidth", STREAM_RATES, "roofs.charts.plot:draw_bandwidth",
          "achieved GB/s against working-set size, one panel per dtype: cache sizes marked, the sizes each level's "
          "roof came from shaded (`roofs.json`'s `extra.window_bytes`), each roof thick over them on the panel of the "
          "dtype that set it, the run's roof of each level thin on every panel; each level in its own colour, as on "
          "every roofline"),
    Chart("gemm.png", "Gemm", GEMM_RATES, "roofs.charts.plot:draw_gemm",
          "GEMM GFLOP/s against size per precision: the square sweep, and the skinny sweep beside its attainable "
          "bound min(P, BW x I)"),
    Chart("links.png", "Links", LINK_ROWS, "roofs.charts.plot:draw_links",
          "interconnect bus bandwidth and host-device copies against message size"),
    Chart("fma.png", "Vector units: FMA chains", FMA_ROWS, "roofs.charts.fma:draw_fma",
          "the FMA-chain sweep: GFLOP/s against FLOP/byte as k grows, one line per impl and precision, under each "
          "precision's vector roof and the bandwidth roof its bytes cross, with the roofline's corner and the "
          "measured knee marked"),
    Chart("energy.png", "Energy", ENERGY_ROWS, "roofs.charts.energy:draw_energy",
          "FLOP per joule against intensity with the fitted energy model (over every row, the sustained windows "
          "included)", rows="all"),
)
BY_FILE = {c.file: c for c in CHARTS}


def chart_runs(run: Run) -> dict:
    """Return {"all": run, "sweeps": run without its sustained rows}: what the charts read. The
    charts place the sweeps' points; the sustained rows appear as the solid roofs (rule 14),
    and a chart whose row says rows="all" (the energy fit) reads the sustained windows too."""
    sweeps = dataclasses.replace(run, measurements=run.measurements[run.measurements["mode"] != SUSTAINED_MODE])
    return {"all": run, "sweeps": sweeps}


def charts_for(run: Run, runs: dict | None = None) -> list[Chart]:
    """Return the charts the run draws, in the table's order (runs: chart_runs(run), when made already)."""
    runs = runs or chart_runs(run)
    return [c for c in CHARTS if c.when.holds(runs[c.rows])]
