"""The report and compare commands, built from recorded run folders in tests/data alone."""
import json
import multiprocessing
import os
import re
import shutil
import time
from pathlib import Path

import pandas as pd
import pytest

import run_bench
from bench.run import options

DATA = Path(__file__).parent / "data"


@pytest.fixture
def run_a(tmp_path):
    return Path(shutil.copytree(DATA / "run_a", tmp_path / "run_a"))


@pytest.mark.slow
def test_report_rebuilds_everything_from_the_files(run_a, capsys):
    """Into RUN/derived/m<method>-<commit>/, the run's own files untouched."""
    from bench.results import METHOD_VERSION, derived_name, load_run
    before = {p.name: p.read_bytes() for p in run_a.iterdir() if p.is_file()}
    assert run_bench.main(["report", str(run_a)]) == 0
    assert {p.name: p.read_bytes() for p in run_a.iterdir() if p.is_file()} == before
    run_a = run_a / "derived" / derived_name()
    assert run_a.name.startswith(f"m{METHOD_VERSION}-")
    by = json.loads((run_a / "roofs.json").read_text())["derived_by"]
    assert by["method_version"] == METHOD_VERSION and json.loads((run_a / "run.json").read_text())["derived_by"] == by
    assert len(load_run(run_a).points) == len(load_run(run_a).measurements)  # the source's samples, read through
    for f in ("report.md", "report.html", "roofline.png", "bandwidth.png", "gemm.png"):
        assert (run_a / f).stat().st_size > 0, f
    md = (run_a / "report.md").read_text()
    for section in ("## Device and software", "## Validation", "## Findings", "![Roofline](roofline.png)",
                    "## Best points per op, impl and dtype", "computed CPU peaks"):
        assert section in md, section
    assert "DRAM bandwidth:" in md and "No energy model" in md
    html = (run_a / "report.html").read_text()
    # the pictures are linked beside it, not inlined as MBs of base64
    assert "base64" not in html and html.count('<img ') >= 3 and "<table>" in html
    for src in re.findall(r'<img alt="[^"]*" src="([^"]+)"', html):
        assert (run_a / src).is_file(), src
    assert (run_a / "report.html").stat().st_size < 200 * 2**10
    assert "report.md" in capsys.readouterr().out


def as_h200(run_dir: Path) -> Path:
    """Make the recorded CPU run look like an H200 run with telemetry: the device record of an
    H200, an SM clock of 1650 MHz and 500 W during every point. (Its L2 is shrunk to 20 MiB so
    that the CPU run's 128 and 256 MiB working sets count as off chip: two sizes, an HBM roof.)"""
    meta = json.loads((run_dir / "run.json").read_text())
    meta["device"] = {"kind": "cuda", "name": "NVIDIA H200", "memory_bytes": 150_100_000_000, "compute_units": 132,
                      "caches": [{"name": "l2", "size_bytes": 20 * 2**20, "instances": 1, "total_bytes": 20 * 2**20}],
                      "torch_device": "cuda:0", "compute_unit_kind": "SMs"}
    (run_dir / "run.json").write_text(json.dumps(meta))
    df = pd.read_csv(run_dir / "measurements.csv")
    ok = df["status"] == "ok"
    df.loc[ok, "clock_mhz"] = 1650.0
    df.loc[ok, "power_w"] = 500.0
    df.loc[ok, "joules"] = 500.0 * df.loc[ok, "median_ms"] * 1e-3
    df.to_csv(run_dir / "measurements.csv", index=False)
    return run_dir


def test_report_of_a_gpu_run_validates_against_the_datasheet_at_the_observed_clock(run_a):
    from bench.results import load_run
    from roofs.reports.finish import finish_run
    from roofs.reports.report import validation
    assert finish_run(as_h200(run_a), charts=False) == []  # the pictures: the energy chart alone, below
    table, origin = validation(load_run(run_a))
    assert origin.startswith("datasheet: NVIDIA H200 SXM 141GB")
    bf16 = table[table["ceiling"] == "bf16"].iloc[0]
    assert bf16["reference"] == 989000 and bf16["at observed clock"] == pytest.approx(989000 * 1650 / 1830)
    assert bf16["% of clock-corrected"] == pytest.approx(100 * bf16["measured"] / (989000 * 1650 / 1830))
    hbm = table[table["ceiling"] == "hbm"].iloc[0]
    assert hbm["reference"] == 4800 and hbm["% of reference"] == pytest.approx(100 * hbm["measured"] / 4800)
    roofs = json.loads((run_a / "roofs.json").read_text())["roofs"]
    assert {"measured", "datasheet", "datasheet@clock"} <= {r["source"] for r in roofs}
    md = (run_a / "report.md").read_text()
    assert "Energy model:" in md and "static" in md and not (run_a / "energy.png").exists()
    # the chart is drawn by the charts' entry point (a GPU run with telemetry has one), never by
    # the report: writing the report draws nothing, and its picture list follows what was drawn
    from roofs.charts import plot
    from roofs.reports.report import write_report
    run = load_run(run_a)
    fig = plot.draw_chart("energy.png", plot.chart_runs(run))
    plot.save_chart(fig, run_a / "energy.png")
    plot.plt.close(fig)
    write_report(run_a)
    assert "energy.png" in (run_a / "report.md").read_text()
    (run_a / "energy.png").unlink()
    write_report(run_a)
    assert not (run_a / "energy.png").exists() and "energy.png" not in (run_a / "report.md").read_text()


def test_compare_two_runs(tmp_path, capsys):
    out = tmp_path / "cmp"
    assert run_bench.main(["compare", str(DATA / "run_a"), str(DATA / "run_b"), "--out", str(out)]) == 0
    assert (out / "compare.png").stat().st_size > 0 and "run 2 / run 1" in (out / "compare.md").read_text()
    printed = capsys.readouterr().out
    assert "dram" in printed and "bf16" in printed


def test_ratio_table_hand_worked():
    from roofs.reports.compare import ratio_table

    class R:
        def __init__(self, roofs):
            self.roofs = roofs
    a = R([{"kind": "bandwidth", "name": "dram", "value": 50.0}, {"kind": "compute", "name": "bf16", "value": 900.0}])
    b = R([{"kind": "bandwidth", "name": "dram", "value": 75.0}])
    t = ratio_table([a, b]).set_index("roof")
    assert t.loc["dram", "run 2 / run 1"] == 1.5
    assert pd.isna(t.loc["bf16", "run 2"]) and pd.isna(t.loc["bf16", "run 2 / run 1"])


@pytest.mark.renders
def test_a_roof_over_its_computed_reference_names_the_clock_it_needs():
    from roofs.reports.report import above_reference

    # 968 GFLOP/s against 664 computed at the 2,596 MHz read while it ran: 968 / 664 = 145.8%,
    # so the reference's units need 2,596 x 1.458 = 3,786 MHz
    row = {"ceiling": "bf16", "measured": 968.0, "unit": "GFLOP/s", "reference source": "computed",
           "% of reference": 100 * 968 / 664, "clock MHz": 2596.0, "% of clock-corrected": 100 * 968 / 664}
    assert above_reference(row) == (
        "bf16 measures 968 GFLOP/s, 146% of the computed roof: with the reference's units it needs 3,785 MHz, "
        "not the 2,596 read while it ran, so the clock ran above the one read (a VM reports a nominal clock), "
        "or the reference misses a unit.")
    no_clock = {**row, "clock MHz": None, "% of clock-corrected": None}
    assert above_reference(no_clock).endswith("146% of the computed roof: the clock ran above the one assumed, "
                                              "or the reference misses a unit.")
    assert above_reference({**row, "% of reference": 104.9}) is None
    assert above_reference({**row, "% of reference": float("nan")}) is None


@pytest.mark.parametrize("args,expect", [
    (["report", "/nonexistent/run"], "does not exist"),
    (["compare", str(DATA / "run_a")], "at least two run folders"),
    (["compare", str(DATA / "run_a"), "/nonexistent/run"], "does not exist"),
    (["report", str(DATA / "run_a" / "run.json")],
     f"{DATA / 'run_a' / 'run.json'} is a file, not a run folder: give the folder that holds it ({DATA / 'run_a'})."),
    (["compare", str(DATA / "run_a"), str(DATA / "run_a") + "/"],
     f"run folder {DATA / 'run_a'} is given twice: compare needs two different runs."),
])
def test_report_and_compare_bad_input(args, expect, capsys):
    assert run_bench.main(args) == 2
    err = capsys.readouterr().err
    assert expect in err and "Traceback" not in err and err.count("\n") == 1


def _cut(d: Path):
    (d / "measurements.csv").write_bytes((d / "measurements.csv").read_bytes()[:10_000])


def _blank_status(d: Path):
    df = pd.read_csv(d / "measurements.csv")
    df.loc[5, "status"] = None
    df.to_csv(d / "measurements.csv", index=False)


def _add_row(d: Path):
    lines = (d / "measurements.csv").read_text().splitlines(keepends=True)
    (d / "measurements.csv").write_text("".join(lines + lines[-1:]))   # a CSV missing its tail is kept instead


def _swap_rows(d: Path):
    lines = (d / "measurements.csv").read_text().splitlines(keepends=True)
    lines[1], lines[2] = lines[2], lines[1]
    (d / "measurements.csv").write_text("".join(lines))


@pytest.mark.parametrize("damage,code", [
    (_cut, "cut_row"), (_blank_status, "corrupt"), (_add_row, "mismatch"), (_swap_rows, "mismatch")])
def test_report_and_compare_refuse_files_that_disagree_and_rewrite_nothing(run_a, tmp_path, capsys, damage, code):
    """Measurements.csv is checked against itself and run.json first: a cut last row, a row with
    no status, a row run.json does not record, two rows in another order than run.json's."""
    damage(run_a)
    before = {p.name: p.read_bytes() for p in run_a.iterdir()}
    refused = len(options.REFUSED)
    assert run_bench.main(["report", str(run_a)]) == 2
    assert run_bench.main(["compare", str(run_a), str(DATA / "run_b"), "--out", str(tmp_path / "cmp")]) == 2
    assert options.REFUSED[refused:] == [code, code]
    assert capsys.readouterr().err.count("\n") == 2
    assert {p.name: p.read_bytes() for p in run_a.iterdir()} == before  # nothing rewritten, nothing added


def test_report_into_a_named_folder_or_in_place_only_when_asked(run_a, tmp_path, capsys):
    """--out names the folder; --in-place rewrites the run's derived files only. Both without
    charts (--no-charts): the report says so, and an earlier derivation's pictures are removed."""
    before = {p.name: p.read_bytes() for p in run_a.iterdir() if p.is_file()}
    assert run_bench.main(["report", str(run_a), "--out", str(tmp_path / "mine"), "--no-charts"]) == 0
    assert (tmp_path / "mine" / "roofs.json").exists() and (tmp_path / "mine" / "report.md").exists()
    md = (tmp_path / "mine" / "report.md").read_text()
    pictures = md.split("## Pictures\n", 1)[1].split("\n## ", 1)[0]
    assert "--no-charts" in pictures and "![" not in md  # it says why none is drawn, and shows none
    assert not list((tmp_path / "mine").glob("*.png")) and not list((tmp_path / "mine").glob("*.svg"))
    assert {p.name: p.read_bytes() for p in run_a.iterdir() if p.is_file()} == before
    assert not (run_a / "derived").exists()
    assert run_bench.main(["report", str(run_a), "--out", str(tmp_path / "x"), "--in-place"]) == 2
    assert "give one of them" in capsys.readouterr().err
    (run_a / "roofline.png").write_bytes(b"drawn from the roofs before")
    (run_a / "roofline.svg").write_text("<svg/>")
    assert run_bench.main(["report", str(run_a), "--in-place", "--no-charts"]) == 0
    assert "derived_by" in json.loads((run_a / "roofs.json").read_text())
    assert not (run_a / "roofline.png").exists() and not (run_a / "roofline.svg").exists()
    assert (run_a / "run.json").read_bytes() == before["run.json"]  # its points (this older folder's samples) stay


def test_compare_reads_its_runs_only(run_a, tmp_path):
    before = {p.name: p.read_bytes() for p in run_a.iterdir()}
    assert run_bench.main(["compare", str(run_a), str(DATA / "run_b"), "--out", str(tmp_path / "cmp")]) == 0
    assert {p.name: p.read_bytes() for p in run_a.iterdir()} == before


def test_report_lists_every_flagged_point_grouped_by_op(run_a):
    """The findings' count and the listing agree; nothing is cut at 50 rows."""
    from bench.results import load_run
    from roofs.reports.report import finding_records, flagged_sections, validation, write_report
    df = pd.read_csv(run_a / "measurements.csv", dtype={"flag": str})
    ok = df.index[df["status"] == "ok"]
    df.loc[ok, "flag"] = "above its attainable bound (a test flag)"
    df.to_csv(run_a / "measurements.csv", index=False)
    write_report(run_a)
    md = (run_a / "report.md").read_text()
    run = load_run(run_a)
    above = [f for f in finding_records(run, validation(run)[0], None) if f["code"] == "above_bound"]
    assert len(ok) > 50 and [f["count"] for f in above] == [len(ok)] and above[0]["text"] in md
    # one sub-section per op, each listing every one of its points, in report.md as they are here
    listed = [(title, table) for title, table in flagged_sections(run.measurements)[1:]]
    assert {title[4:].split(":")[0]: len(table) for title, table in listed} == df.loc[ok, "op"].value_counts().to_dict()
    assert all(title in md for title, _ in listed)
    assert all(pid in md for pid in df.loc[ok, "point_id"])


def test_a_busy_point_under_its_bound_is_not_listed_as_above_it(run_a):
    """A runner flag (busy, a time jump) alone is not 'above the roof': the report lists it
    apart, and the findings' count of points above their bound leaves it out."""
    from bench.results import load_run
    from roofs.reports.report import finding_records, flagged_points, validation, write_report
    df = pd.read_csv(run_a / "measurements.csv", dtype={"flag": str})
    ok = df.index[df["status"] == "ok"]
    busy, above, both = ok[0], ok[1], ok[2]
    df.loc[busy, "flag"] = "measured while the machine was busy: other processes used 23% of its 2 cores"
    df.loc[above, "flag"] = "above its attainable 10 GFLOP/s even at p80 (11): a test flag"
    df.loc[both, "flag"] = ("measured while the machine was busy: load 3; "
                            "above its attainable 10 GFLOP/s even at p80 (12)")
    df.to_csv(run_a / "measurements.csv", index=False)
    write_report(run_a)
    md = (run_a / "report.md").read_text()
    run = load_run(run_a)
    counted = [f["count"] for f in finding_records(run, validation(run)[0], None) if f["code"] == "above_bound"]
    up, runner = flagged_points(run.measurements)
    assert counted == [2] and set(up["point_id"]) == {df.at[above, "point_id"], df.at[both, "point_id"]}
    assert list(runner["point_id"]) == [df.at[busy, "point_id"]]
    # report.md lists the busy point last, in its own section after those above their bound
    last = md.split("## Flagged points", 1)[1].rsplit("\n### ", 1)[1]
    assert df.at[busy, "point_id"] in last and df.at[above, "point_id"] not in last


def test_compare_text_names_its_runs_and_warns_on_method_and_simd(tmp_path, capsys):
    """A legend, numbers people read, and the warnings."""
    b = Path(shutil.copytree(DATA / "run_b", tmp_path / "run_b"))
    meta = json.loads((b / "run.json").read_text())
    meta["method_version"] = 1  # as if run_b were made by the method before this one
    meta["device"]["cpu_flags"] = [f for f in meta["device"]["cpu_flags"] if not f.startswith("avx512")]
    (b / "run.json").write_text(json.dumps(meta))
    assert run_bench.main(["compare", str(DATA / "run_a"), str(b), "--out", str(tmp_path / "cmp")]) == 0
    out = capsys.readouterr().out
    assert "run 1: AMD EPYC" in out and "run 2: AMD EPYC" in out
    assert "NaN" not in out and "e+0" not in out and "1,9" in out  # int8 about 1,950 GOP/s, not 1.95e+03
    assert "method version 1" in out and "method version 2" in out
    from bench.results import load_run
    from roofs.reports.compare import comparison_warnings, simd_differences
    runs = [load_run(DATA / "run_a"), load_run(b)]
    [(first, more, second, fewer)] = simd_differences(runs)
    avx512 = sorted(f for f in json.loads((DATA / "run_a" / "run.json").read_text())["device"]["cpu_flags"]
                    if f.startswith("avx512"))
    assert (first, more, second, fewer) == (1, avx512, 2, []) and avx512
    md = (tmp_path / "cmp" / "compare.md").read_text()
    # each warning printed, and in compare.md, the SIMD one among them
    assert all(w in out and w in md for w in comparison_warnings(runs)) and len(comparison_warnings(runs)) == 2


def test_cpu_findings_compare_software_paths_not_units():
    from roofs.analysis.roofline import Roof, Roofline
    from roofs.reports.report import precision_ratios
    model = Roofline([Roof("compute", "bf16", 100.0, "GFLOP/s"), Roof("compute", "fp8e4m3", 454.0, "GFLOP/s"),
                      Roof("compute", "int8", 300.0, "GOP/s")])
    plain = precision_ratios(model, {"kind": "cpu", "cpu_flags": ["avx2", "fma"]})
    assert "4.54x" in plain[0] and "not hardware" in plain[0] and "no bf16 units" in plain[0]
    assert "no int8 units" in plain[1]
    vnni = precision_ratios(model, {"kind": "cpu", "cpu_flags": ["avx512_bf16", "avx512_vnni"]})
    # the flags that give the units named, and no "no ... units"
    assert "avx512_bf16" in vnni[0] and "no bf16 units" not in vnni[0]
    assert "avx512_vnni" in vnni[1] and "no int8 units" not in vnni[1]
    assert precision_ratios(model, {"kind": "cuda"})[0] == "fp8 runs at 4.54x bf16."


def test_summary_lists_roof_notes_and_counts_what_it_cuts(run_a):
    from bench.results import load_run
    from roofs.reports.summary import summary
    text = summary(load_run(run_a))
    assert "roofs:" in text and "best GB/s" in text and "at working set" in text  # the stream table's columns
    assert "decode GEMV" in text  # the batch, n and k columns give the decode lines


def test_numbers_printed_as_people_write_them(run_a):
    """Sizes in binary units, counts with separators, "1 token"; and no
    pandas FutureWarning from the throttled column (a float column once filled with False)."""
    import warnings

    from bench.results import load_run
    from bench.util import fmt_num, plural
    from roofs.reports.report import findings, throttled, validation, write_report
    from roofs.reports.summary import summary
    assert [fmt_num(v) for v in (21890.4, 0.09375, 12.3456, 3.0, None, float("nan"))] == \
        ["21,890", "0.09375", "12.35", "3", "", ""]
    assert (plural(1, "token"), plural(21890, "row")) == ("1 token", "21,890 rows")
    assert list(throttled(pd.DataFrame({"throttled": [1.0, 0.0, None, "True", False]}))) == [
        True, False, False, True, False]
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        run = load_run(run_a)
        run.measurements["throttled"] = [float("nan")] * len(run.measurements)
        findings(run, validation(run)[0], None)
        text = summary(run)
        write_report(run_a)
    md = (run_a / "report.md").read_text()
    assert all(size in md for size in ("l1 96 KiB", "l2 2 MiB", "l3 32 MiB", "23.5 GiB"))
    counts = run.measurements["status"].value_counts().to_dict()
    assert counts == {"skipped": 93, "ok": 77}
    assert "0.09375" not in md and all(n in text for n in ("170 rows", "93 skipped", "77 ok"))


def test_the_loaded_machine_warning_leaves_out_the_runs_own_threads():
    """A run that kept both cores of a 2-core machine busy ends at a load average near 2 by
    itself: only the load of other processes makes the machine 'loaded'."""
    from roofs.analysis.checks import others_load
    assert others_load({"cores": 2, "start": [0.3, 0, 0], "end": [2.04, 0, 0], "own": 1.95}) == (pytest.approx(0.3), 2)
    assert others_load({"cores": 2, "start": [0.3, 0, 0], "end": [4.1, 0, 0], "own": 1.9}) == (pytest.approx(2.2), 2)
    assert others_load({"cores": 2, "start": [2.5, 0, 0], "end": [1.0, 0, 0], "own": 1.9})[0] == 2.5
    # runs written before "own" was recorded: the end reading as it was
    assert others_load({"start": [0.1, 0, 0], "end": [2.04, 0, 0]}, 2) == (2.04, 2)
    assert others_load({}, 2) == (None, 2)
    # the measured share, where the run recorded it, over the load averages (the start's 1.8 is
    # the minute before: the previous run)
    assert others_load({"cores": 2, "start": [1.8, 0, 0], "end": [2.0, 0, 0], "own": 1.9, "others": 0.05}) == (0.05, 2)


def test_other_processes_share_is_the_machines_busy_time_less_the_runs_own():
    from bench.util import machine_busy_seconds, others_cores
    assert others_cores(3.0, 1.0, 2.0) == 1.0        # 3 busy core-seconds in 2 s, 1 of them the run's: 1 core
    assert others_cores(0.98, 1.0, 1.0) == 0.0       # clock grains: never below 0
    assert others_cores(1.0, 0.0, 0.0) == 0.0
    first = machine_busy_seconds()
    if first is not None:                            # Linux: /proc/stat
        t = time.process_time() + 0.05
        while time.process_time() < t:               # this process busy for 0.05 s
            pass
        assert machine_busy_seconds() >= first + 0.03


def _a_run_busy_for(folder: str, seconds: float) -> dict:
    """Write a run folder with RunWriter while one core is busy for seconds; return run.json's load."""
    from bench.results import RunWriter
    w = RunWriter(Path(folder), {"device": {}})
    t = time.process_time() + seconds
    while time.process_time() < t:
        pass
    w.finish()
    return json.loads((Path(folder) / "run.json").read_text())["load"]


def test_a_run_records_its_own_share_of_the_load(tmp_path):
    # in a forked process of its own: its own share counts the processes it waited for, and
    # this one reaps the processes the suite's fixtures start
    with multiprocessing.get_context("fork").Pool(1) as pool:
        load = pool.apply(_a_run_busy_for, (str(tmp_path / "run"), 0.2))
    assert 0 < load["own"] <= (os.cpu_count() or 1) + 0.5
    if os.path.exists("/proc/stat"):  # other processes' share, however busy the machine
        assert 0 <= load["others"] <= (os.cpu_count() or 1) + 0.5


def test_every_triton_gemm_impl_is_compared_with_torch_at_the_same_shape_and_mode():
    from roofs.reports.report import triton_vs_library

    def row(impl, backend, dtype, n, mode, gflops):
        return {"status": "ok", "family": "gemm", "op": "gemm.square", "impl": f"gemm.square/{impl}",
                "backend": backend, "dtype": dtype, "m": n, "n": n, "k": n, "mode": mode, "gflops": gflops}
    df = pd.DataFrame([
        row("torch", "torch", "bf16", 4096, "warm", 700e3), row("torch", "torch", "bf16", 8192, "warm", 800e3),
        row("triton", "triton", "bf16", 4096, "warm", 560e3), row("triton", "triton", "bf16", 8192, "warm", 600e3),
        row("triton_tma", "triton", "bf16", 8192, "warm", 760e3),
        row("triton_tma", "triton", "bf16", 16384, "warm", 900e3),      # no torch row at 16384: not compared
        row("triton_tma", "triton", "fp8e4m3", 8192, "warm", 1500e3),
        row("torch", "torch", "fp8e4m3", 8192, "warm", 1200e3),
        row("triton_tma", "triton", "int8", 8192, "cold", 1000e3), row("torch", "torch", "int8", 8192, "warm", 1000e3),
    ])
    assert triton_vs_library(df, None) == [
        "Triton bf16 GEMM: best 600.0 TFLOP/s (8192x8192x8192, warm), 0.75x torch's 800.0 at the same shape and mode.",
        "Triton (triton_tma) bf16 GEMM: best 760.0 TFLOP/s (8192x8192x8192, warm), "
        "0.95x torch's 800.0 at the same shape and mode.",
        "Triton (triton_tma) fp8e4m3 GEMM: best 1,500.0 TFLOP/s (8192x8192x8192, warm), "
        "1.25x torch's 1,200.0 at the same shape and mode.",
    ]


@pytest.mark.slow
def test_a_derived_folder_with_points_of_its_own_is_re_derived_with_them(run_a, capsys):
    """Report on add_to_run's folder keeps its added points; report on a
    plain derived folder re-derives its run into the same place."""
    import torch

    from bench import api
    from bench.results import derived_name, load_run
    r = api.measure(lambda: torch.ones(64) * 2, flops=64, bytes=512, name="dbl", device="cpu", budget_s=0.02)
    user = api.add_to_run(run_a, [r], charts=False)  # the folders' rows are read, not their pictures
    n = len(load_run(user).measurements)
    assert run_bench.main(["report", str(user), "--no-charts"]) == 0
    again = user / "derived" / derived_name()
    assert len(load_run(again).measurements) == n and "user.dbl/torch" in (again / "report.md").read_text()
    assert run_bench.main(["report", str(run_a), "--no-charts"]) == 0
    plain = run_a / "derived" / derived_name()
    before = sorted(p.name for p in plain.iterdir())
    assert run_bench.main(["report", str(plain), "--no-charts"]) == 0  # the same folder, re-derived from the run
    assert sorted(p.name for p in plain.iterdir()) == before and not (plain / "derived").exists()
    assert len(load_run(plain).measurements) == n - 1
    assert json.loads((plain / "run.json").read_text())["derived_from"] == "../.."
