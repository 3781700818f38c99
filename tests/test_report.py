"""The report and compare commands, built from recorded run folders in tests/data alone."""
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

import run_bench

DATA = Path(__file__).parent / "data"


@pytest.fixture
def run_a(tmp_path):
    return Path(shutil.copytree(DATA / "run_a", tmp_path / "run_a"))


def test_report_rebuilds_everything_from_the_files(run_a, capsys):
    assert run_bench.main(["report", str(run_a)]) == 0
    for f in ("report.md", "report.html", "roofline.png", "bandwidth.png", "gemm.png"):
        assert (run_a / f).stat().st_size > 0, f
    md = (run_a / "report.md").read_text()
    for section in ("## Device and software", "## Validation", "## Findings", "![Roofline](roofline.png)",
                    "## Best points per op, impl and dtype", "computed CPU peaks"):
        assert section in md, section
    assert "DRAM bandwidth:" in md and "No energy model" in md
    html = (run_a / "report.html").read_text()
    assert html.count("data:image/png;base64,") >= 3 and "<table>" in html  # self-contained
    assert "report.md" in capsys.readouterr().out


def as_h200(run_dir: Path) -> Path:
    """Make the recorded CPU run look like an H200 run with telemetry: the device record of an
    H200, an SM clock of 1650 MHz and 500 W during every point."""
    meta = json.loads((run_dir / "run.json").read_text())
    meta["device"] = {"kind": "cuda", "name": "NVIDIA H200", "memory_bytes": 150_100_000_000, "compute_units": 132,
                      "caches": [{"name": "l2", "size_bytes": 50 * 2**20, "instances": 1, "total_bytes": 50 * 2**20}],
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
    from roofs.finish import finish_run
    from roofs.report import validation
    finish_run(as_h200(run_a))
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
    assert "Energy model:" in md and "static" in md and (run_a / "energy.png").exists()


def test_compare_two_runs(tmp_path, capsys):
    out = tmp_path / "cmp"
    assert run_bench.main(["compare", str(DATA / "run_a"), str(DATA / "run_b"), "--out", str(out)]) == 0
    assert (out / "compare.png").stat().st_size > 0 and "run 2 / run 1" in (out / "compare.md").read_text()
    printed = capsys.readouterr().out
    assert "dram" in printed and "bf16" in printed


def test_ratio_table_hand_worked():
    from roofs.compare import ratio_table

    class R:
        def __init__(self, roofs):
            self.roofs = roofs
    a = R([{"kind": "bandwidth", "name": "dram", "value": 50.0}, {"kind": "compute", "name": "bf16", "value": 900.0}])
    b = R([{"kind": "bandwidth", "name": "dram", "value": 75.0}])
    t = ratio_table([a, b]).set_index("roof")
    assert t.loc["dram", "run 2 / run 1"] == 1.5
    assert pd.isna(t.loc["bf16", "run 2"]) and pd.isna(t.loc["bf16", "run 2 / run 1"])


@pytest.mark.parametrize("args,expect", [
    (["report", "/nonexistent/run"], "does not exist"),
    (["compare", str(DATA / "run_a")], "at least two run folders"),
    (["compare", str(DATA / "run_a"), "/nonexistent/run"], "does not exist"),
])
def test_report_and_compare_bad_input(args, expect, capsys):
    assert run_bench.main(args) == 2
    err = capsys.readouterr().err
    assert expect in err and "Traceback" not in err
