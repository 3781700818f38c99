"""`run_bench.py check RUN --baseline BASE`: the verdict of ARCHITECTURE.md rule 18 on
hand-worked intervals (each boundary among them), run folders of known roofs and intervals
(tests/helpers.write_run) against a run and against a fleet of a thousand devices, the
refusals and the exit codes. The model itself over lists of Roof (compare_roofs: what decides
an UNCLEAR roof, the clock rule) is tests/test_check_model.py's."""
import json
import math
import shutil

import numpy as np
import pytest
from helpers import ROOFS, write_run

import bench.results as results
from bench.results import METHOD_VERSION, write_roofs
from roofs.reports import check as chk

T = 0.05  # the default tolerance, 5%
BASE = (100.0, (98.0, 102.0))  # a baseline of 100 with +/-2%


@pytest.fixture(autouse=True)
def _no_git(monkeypatch):
    monkeypatch.setattr(results, "git_commit", lambda: "abc1234")  # a thousand folders, one commit


@pytest.mark.parametrize("v, iv, want", [
    (85.0, (84.0, 86.0), "SLOWER"),     # hi 86 < LO 98, and 85 < 0.95 x 100
    (94.9, (94.0, 96.0), "SLOWER"),     # apart, and 94.9 just past 95
    (95.0, (94.0, 96.0), "SAME"),       # apart, but v = (1 - t) V exactly: within the tolerance
    (90.0, (88.0, 98.0), "UNCLEAR"),    # hi = LO: intervals that touch overlap; 10% is past t, not separated
    (93.0, (90.0, 99.0), "UNCLEAR"),    # overlapping, -7%: past t, not separated
    (110.0, (109.0, 111.0), "FASTER"),  # lo 109 > HI 102 and 110 > 1.05 x 100
    (105.0, (104.0, 106.0), "SAME"),    # apart, v = (1 + t) V exactly
    (105.1, (104.0, 106.0), "FASTER"),
    (110.0, (102.0, 111.0), "UNCLEAR"),  # lo = HI: touching, so not FASTER
    (99.0, (97.0, 100.0), "SAME"),      # overlap; half-widths 1.5% and 2%, both within 5%
    (100.0, (95.0, 105.0), "SAME"),     # the run's half-width exactly t: narrow enough
    (100.0, (94.9, 105.0), "UNCLEAR"),  # 5.05%: too wide to have shown a 5% change
    (100.0, (85.0, 110.0), "UNCLEAR"),  # 12.5%
    (100.0, (100.0, 100.0), "SAME"),    # a point interval at the baseline's value
])
def test_the_verdict_on_hand_worked_intervals(v, iv, want):
    got = chk.verdict(v, iv, *BASE, T)
    assert got["verdict"] == want, got["why"]
    assert f"{v / 100 - 1:+.1%}" in got["why"]
    assert (got["decide"] is None) == (want != "UNCLEAR")   # an UNCLEAR roof says what would decide it


def test_a_run_baselines_width_is_judged_and_a_fleets_is_not():
    """A baseline of 100 with [80, 120] (+/-20%: a noisy run, or a fleet's spread) and a run of
    100 with [99, 101]: against the run it is too wide to tell, against a fleet SAME."""
    got = chk.verdict(100.0, (99.0, 101.0), 100.0, (80.0, 120.0), T)
    assert (got["verdict"], got["reason"], got["decide"]["side"]) == ("UNCLEAR", "too_wide", "baseline")
    got = chk.verdict(100.0, (99.0, 101.0), 100.0, (80.0, 120.0), T, fleet=True)
    assert (got["verdict"], got["reason"]) == ("SAME", "narrow")
    got = chk.verdict(100.0, (90.0, 110.0), 100.0, (80.0, 120.0), T)  # both too wide: both named
    assert (got["verdict"], got["decide"]["side"]) == ("UNCLEAR", "both")
    got = chk.verdict(100.0, (90.0, 110.0), 100.0, (80.0, 120.0), T, fleet=True)  # the run's own width still counts
    assert (got["verdict"], got["decide"]["side"]) == ("UNCLEAR", "run")
    # 88 is 12% below the fleet's median, past the 5% tolerance, but inside its p5-p95: SAME as the fleet
    got = chk.verdict(88.0, (87.5, 88.5), 100.0, (80.0, 120.0), T, fleet=True)
    assert (got["verdict"], got["reason"]) == ("SAME", "inside_fleet")
    got = chk.verdict(88.0, (87.5, 88.5), 100.0, (80.0, 120.0), T)  # against a run: too wide to tell
    assert (got["verdict"], got["reason"], got["decide"]["side"]) == ("UNCLEAR", "not_separated", "baseline")


def test_no_interval_on_either_side_is_unclear():
    for iv, base_iv, side in ((None, (98.0, 102.0), "run"), ((84.0, 86.0), None, "baseline"), (None, None, "both")):
        got = chk.verdict(85.0, iv, 100.0, base_iv, T)
        assert (got["verdict"], got["reason"]) == ("UNCLEAR", "no_interval")
        assert got["decide"] == {"side": side, "passes": None}   # passes can not decide it: re-deriving can


def test_the_tolerance_moves_the_boundaries():
    assert chk.verdict(92.0, (91.0, 93.0), *BASE, 0.05)["verdict"] == "SLOWER"
    assert chk.verdict(92.0, (91.0, 93.0), *BASE, 0.10)["verdict"] == "SAME"   # apart, -8% within 10%
    assert chk.verdict(92.0, (91.0, 93.0), *BASE, 0.08)["verdict"] == "SAME"   # -8% exactly: within


def test_a_latency_is_judged_on_its_rate():
    """A launch of 2.0 us [1.9, 2.1] against 1.0 us [0.98, 1.02]: as rates 0.5 [1/2.1, 1/1.9]
    against 1 [1/1.02, 1/0.98], wholly below and 50% down: SLOWER (it takes longer)."""
    rate, iv = chk.as_rates("latency", 2.0, (1.9, 2.1))
    assert rate == 0.5 and iv == pytest.approx((1 / 2.1, 1 / 1.9))
    assert chk.verdict(rate, iv, *chk.as_rates("latency", 1.0, (0.98, 1.02)), T)["verdict"] == "SLOWER"
    assert chk.as_rates("bandwidth", 2.0, (1.9, 2.1)) == (2.0, (1.9, 2.1))


@pytest.mark.parametrize("passes", [1.46, {"fp32": 1.46}, None])
def test_a_roofs_passes_widen_no_band(tmp_path, passes, cli_in_process):
    """A run 28% slow with 1% intervals is SLOWER on every roof whatever its passes moved: a
    roof's own interval holds its passes (the estimator's), and one roof's noise never widens
    another's band (bf16, hbm and l2 beside an fp32 whose passes moved 46%)."""
    write_run(tmp_path / "base", "node1", "GPU-1", 1.0, interval=0.01)
    write_run(tmp_path / "run", "node1", "GPU-1", 0.72, interval=0.01, passes=passes)
    r = cli_in_process("check", tmp_path / "run", "--baseline", tmp_path / "base", "--out", tmp_path / "out")
    doc = json.loads((tmp_path / "out" / "check.json").read_text())
    assert {v["roof"]: v["verdict"] for v in doc["verdicts"]} == dict.fromkeys(ROOFS, "SLOWER") and r.returncode == 1
    assert all("pass_ratio" not in v and "pass_ratio_roof" not in v for v in doc["verdicts"])
    assert not hasattr(chk, "host_ratio") and not hasattr(chk, "widened") and not hasattr(chk, "moves_with")


def warned(out, r) -> list[str]:
    """Return the codes of check.json's warnings in out, each warning's sentence printed on r's stdout."""
    warnings = json.loads((out / "check.json").read_text())["warnings"]
    assert all(w["text"] in r.stdout for w in warnings), r.stdout
    return [w["code"] for w in warnings]


def runs(tmp_path, scale, interval=0.01, **kw):
    """Return (run, baseline): two run folders of ROOFS, the run at scale x the baseline's values."""
    write_run(tmp_path / "base", "node1", "GPU-1", 1.0, interval=interval,
              software={"torch": "2.13.0", "triton": "3.9.0"})
    write_run(tmp_path / "run", "node1", "GPU-1", scale, interval=interval, **kw)
    return tmp_path / "run", tmp_path / "base"


def test_a_run_15_percent_slow_is_slower_on_every_roof_with_what_differs(tmp_path, cli_in_process):
    run, base = runs(tmp_path, 0.85, clock=1600.0, power=500.0, driver="550.1",
                     software={"torch": "2.11.0", "triton": "3.6.0"})
    r = cli_in_process("check", run, "--baseline", base, "--out", tmp_path / "out")
    assert r.returncode == 1, r.stderr
    doc = json.loads((tmp_path / "out" / "check.json").read_text())
    assert {(v["roof"], v["verdict"]) for v in doc["verdicts"]} == {(n, "SLOWER") for n in ROOFS}
    assert doc["counts"] == {"SAME": 0, "SLOWER": 4, "FASTER": 0, "UNCLEAR": 0} and doc["exit_code"] == 1
    hbm = next(v for v in doc["verdicts"] if v["roof"] == "hbm")
    assert hbm["change_pct"] == pytest.approx(-15.0)
    assert hbm["run"] == {"value": pytest.approx(3400), "interval": [pytest.approx(3366), pytest.approx(3434)]}
    assert hbm["baseline"]["interval"] == [pytest.approx(3960), pytest.approx(4040)]
    codes = [c["code"] for c in hbm["causes"]]
    # the sustained window's clock and the application clock; the power cap; the driver, torch and Triton
    assert codes.count("clock") == 2 and codes.count("power_limit") == 1 and codes.count("version") == 3, codes
    assert hbm["reason"] == "apart" and hbm["per_cycle_pct"] == pytest.approx(100 * (0.85 * 1980 / 1600 - 1))
    assert hbm["clock_mhz"] == {"run": 1600.0, "baseline": 1980.0}  # +5.2% per cycle: past 5%, no clock change
    assert doc["rule"]["tolerance"] == 0.05 and doc["baseline"]["kind"] == "run"
    assert doc["only_in_run"] == [] and doc["only_in_baseline"] == []  # the datasheet fp32 is not compared
    # the terminal and check.md show the counts and each roof's figures as check.json holds them
    assert chk.headline(doc) in r.stdout and chk.terminal_text(doc) in r.stdout and "-15.0%" in r.stdout
    md = (tmp_path / "out" / "check.md").read_text()
    assert md.splitlines()[0].endswith(chk.headline(doc)) and chk.markdown(doc) == md
    # the four roofs' causes are one group, said once in each
    [group] = chk.change_groups(doc)
    assert group["verdict"] == "SLOWER" and [r["roof"] for r in group["roofs"]] == list(ROOFS)
    assert group["causes"] == hbm["causes"]
    assert r.stdout.count(hbm["causes"][0]["text"]) == 1 and md.count(hbm["causes"][0]["text"]) == 1


def test_an_identical_copy_is_same_and_a_3_percent_shift_never_slower(tmp_path, cli_in_process):
    write_run(tmp_path / "base", "node1", "GPU-1", 1.0, interval=0.01)
    write_run(tmp_path / "copy", "node1", "GPU-1", 1.0, interval=0.01)
    write_run(tmp_path / "shift", "node1", "GPU-1", 0.97, interval=0.01)
    r = cli_in_process("check", tmp_path / "copy", "--baseline", tmp_path / "base", "--out", tmp_path / "o1")
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "o1" / "check.json").read_text())
    assert {v["verdict"] for v in doc["verdicts"]} == {"SAME"} and len(doc["verdicts"]) == len(ROOFS)
    assert all("causes" not in v for v in doc["verdicts"])
    r = cli_in_process("check", tmp_path / "shift", "--baseline", tmp_path / "base", "--out", tmp_path / "o2")
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "o2" / "check.json").read_text())
    assert {v["verdict"] for v in doc["verdicts"]} <= {"SAME", "UNCLEAR"}
    r = cli_in_process("check", tmp_path / "base", "--baseline", tmp_path / "shift", "--out", tmp_path / "o3",
                       "--tolerance", "2")
    assert r.returncode == 0 and {v["verdict"] for v in json.loads(
        (tmp_path / "o3" / "check.json").read_text())["verdicts"]} == {"FASTER"}   # 3% up, past 2%


def test_roofs_one_side_has_are_listed_and_roofs_without_intervals_unclear(tmp_path):
    run, base = runs(tmp_path, 1.0)
    doc = json.loads((base / "roofs.json").read_text())
    doc["roofs"].append({"kind": "bandwidth", "name": "l1", "value": 20000.0, "unit": "GB/s", "source": "measured",
                         "interval": [19000.0, 21000.0]})
    write_roofs(base, doc["roofs"])
    doc = json.loads((run / "roofs.json").read_text())
    for r in doc["roofs"]:
        if r["name"] == "bf16":
            r.pop("interval")        # derived before intervals
    doc["roofs"].append({"kind": "compute", "name": "fp16 via fp32", "value": 50000.0, "unit": "GFLOP/s",
                         "source": "measured", "extra": {"via": "fp32", "line_of": "fp16"}})
    write_roofs(run, doc["roofs"])
    result = chk.check(run, base)
    assert result["only_in_baseline"] == [{"kind": "bandwidth", "roof": "l1"}]
    assert result["only_in_run"] == [{"kind": "compute", "roof": "fp16 via fp32"}]
    bf16 = next(v for v in result["verdicts"] if v["roof"] == "bf16")
    assert (bf16["verdict"], bf16["reason"], bf16["decide"]["side"]) == ("UNCLEAR", "no_interval", "run")
    assert result["without_interval"] == 1 and result["exit_code"] == 0
    # check.md gains a list item per roof one side alone has, naming it and its side (and the headline
    # counts them), and one counting the roofs without an interval
    md = set(chk.markdown(result).splitlines())
    one_side = {line for line in md - set(chk.markdown(dict(result, only_in_run=[], only_in_baseline=[])).splitlines())
                if line.startswith("- ")}
    named = {who: f"{r['kind']} {r['roof']}" for who in ("run", "baseline") for r in result[f"only_in_{who}"]}
    assert {(named["baseline"] in line, "baseline" in line, named["run"] in line) for line in one_side} == {
        (True, True, False), (False, False, True)}
    [count] = md - set(chk.markdown(dict(result, without_interval=0)).splitlines())
    assert "1 roof" in count


def test_roof_labels_name_the_extra_lines():
    assert chk.roof_label({"kind": "compute", "name": "fp16 via fp32", "value": 1, "unit": "GFLOP/s",
                           "extra": {"via": "fp32", "line_of": "fp16"}}) == "extra line"
    assert chk.roof_label({"kind": "compute", "name": "fp32.elementwise", "value": 1, "unit": "GFLOP/s",
                           "extra": {"unit": "elementwise", "line_of": "fp32"}}) == "elementwise passes' ceiling"
    assert chk.roof_label({"kind": "compute", "name": "fp16", "value": 1, "unit": "GFLOP/s",
                           "extra": {"via": "fp32", "no_unit": True}}) == "roof via fp32"
    assert chk.roof_label({"kind": "bandwidth", "name": "dram", "value": 1, "unit": "GB/s"}) == "roof"


@pytest.fixture(scope="module")
def fleet_of_a_thousand(thousands):
    """A fleet folder (`run_bench.py fleet`'s output) of 1,000 synthetic H200s, each roof within
    1% of ROOFS' value, and two nodes outside it: one 15% slow with its clock held down, one
    healthy; every node's roofs with +/-1% intervals (conftest.py's thousands)."""
    return thousands / "check"


@pytest.mark.slow
def test_a_node_against_a_fleet_of_a_thousand(fleet_of_a_thousand, cli_in_process):
    top = fleet_of_a_thousand
    r = cli_in_process("check", top / "slow", "--baseline", top / "fleet", "--out", top / "c-slow")
    assert r.returncode == 1, r.stderr
    doc = json.loads((top / "c-slow" / "check.json").read_text())
    assert {(v["roof"], v["verdict"]) for v in doc["verdicts"]} == {(n, "SLOWER") for n in ROOFS}
    assert doc["baseline"] == dict(doc["baseline"], kind="fleet", group="NVIDIA H200", devices=1000)
    hbm = next(v for v in doc["verdicts"] if v["roof"] == "hbm")
    assert hbm["baseline"]["devices"] == 1000 and hbm["change_pct"] == pytest.approx(-15, abs=1)
    assert 0.98 * 4000 < hbm["baseline"]["interval"][0] < hbm["baseline"]["value"] < hbm["baseline"]["interval"][1]
    # fleet.causes' own: the clock held down in its sustained window, and the application clock
    codes = [c["code"] for c in hbm["causes"] if c["code"] not in ("load", "flags")]  # not the test machine's load
    assert codes == ["clock", "clock"]                                   # the fleet's own driver and commit
    assert hbm["clock_mhz"] == {"run": 1600.0, "baseline": pytest.approx(1980.0)} and hbm["reason"] == "apart"
    r = cli_in_process("check", top / "healthy", "--baseline", top / "fleet", "--out", top / "c-ok")
    assert r.returncode == 0, r.stderr
    doc = json.loads((top / "c-ok" / "check.json").read_text())
    assert {(v["roof"], v["verdict"]) for v in doc["verdicts"]} == {(n, "SAME") for n in ROOFS}
    assert doc["baseline"]["devices"] == 1000 and chk.baseline_text(doc["baseline"]) in r.stdout


def test_a_fleet_of_one_devices_runs_is_a_band_of_its_runs_not_of_its_latest(tmp_path, cli_in_process):
    """Four runs of one device, one 20% down: the fleet's figure is the latest (4,000 GB/s hbm)
    and its p5-p95 that one value; widened by the runs' max / min ratio 1.25, the band is
    [3,200, 5,000], so a fifth run 15% down (3,400, +/-1%) lies inside it: SAME, where the bare
    [4,000, 4,000] made it SLOWER. A run 25% down (3,000, +/-1%) is below the widened band: SLOWER."""
    for i, scale in enumerate((1.0, 1.0, 0.8, 1.0)):
        write_run(tmp_path / "runs" / f"r{i}", "vm", "GPU-one", scale, start=f"2026-12-0{i + 1}T00:00:00+00:00",
                  interval=0.01)
    assert cli_in_process("fleet", tmp_path / "runs", "--out", tmp_path / "fleet").returncode == 0
    for name, scale, verdict, code in (("near", 0.85, "SAME", 0), ("far", 0.75, "SLOWER", 1)):
        write_run(tmp_path / name, "vm", "GPU-one", scale, start="2026-12-09T00:00:00+00:00", interval=0.01)
        r = cli_in_process("check", tmp_path / name, "--baseline", tmp_path / "fleet", "--out", tmp_path / f"c-{name}")
        assert r.returncode == code, r.stderr
        hbm = next(v for v in json.loads((tmp_path / f"c-{name}" / "check.json").read_text())["verdicts"]
                   if v["roof"] == "hbm")
        assert hbm["verdict"] == verdict and hbm["baseline"]["interval"] == pytest.approx([3200.0, 5000.0])


@pytest.mark.slow
def test_a_fleet_without_the_runs_model_or_method_is_refused(fleet_of_a_thousand, tmp_path, cli_in_process):
    top = fleet_of_a_thousand
    write_run(tmp_path / "h100", "x", "GPU-h100", 0.6, interval=0.01, model="NVIDIA H100")
    r = cli_in_process("check", tmp_path / "h100", "--baseline", top / "fleet", "--out", tmp_path / "o")
    assert r.returncode == 2 and r.code == "other_device" and "NVIDIA H100" in r.stderr and "NVIDIA H200" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr and not (tmp_path / "o").exists()
    r = cli_in_process("check", tmp_path / "h100", "--baseline", top / "fleet", "--out", tmp_path / "o",
                       "--other-device")
    assert r.returncode == 1, r.stderr               # 0.6x an H200: SLOWER, with the models named
    assert warned(tmp_path / "o", r) == ["other_device"]
    write_run(tmp_path / "old", "x", "GPU-old", 1.0, interval=0.01, method=METHOD_VERSION - 1)
    r = cli_in_process("check", tmp_path / "old", "--baseline", top / "fleet", "--out", tmp_path / "o2")
    assert r.returncode == 2 and r.code == "mixed_methods" and f"method {METHOD_VERSION - 1}" in r.stderr
    assert "--mixed-methods" in r.stderr and not (tmp_path / "o2").exists()
    r = cli_in_process("check", tmp_path / "old", "--baseline", top / "fleet", "--out", tmp_path / "o2",
                       "--mixed-methods")
    assert r.returncode == 0, r.stderr
    assert warned(tmp_path / "o2", r) == ["mixed_methods"]
    for name, text, code in (("fleet.json", '{"groups": [1, ', "corrupt"), ("fleet.csv", None, "no_fleet_file")):
        broken = tmp_path / f"broken-{name}"
        shutil.copytree(top / "fleet", broken)
        (broken / name).write_text(text) if text else (broken / name).unlink()
        r = cli_in_process("check", top / "healthy", "--baseline", broken, "--out", tmp_path / "o3")
        assert r.returncode == 2 and r.code == code and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert name in r.stderr
        assert not (tmp_path / "o3").exists()


def test_the_refusals_are_one_sentence_and_write_nothing(tmp_path, cli_in_process):
    run, base = runs(tmp_path, 1.0)
    (tmp_path / "empty").mkdir()
    (tmp_path / "cut").mkdir()
    write_run(tmp_path / "cut" / "r", "node1", "GPU-1", 1.0, interval=0.01)
    (tmp_path / "cut" / "r" / "roofs.json").write_text('{"schema_version": 1, "roo')
    write_run(tmp_path / "h100", "node1", "GPU-9", 1.0, interval=0.01, model="NVIDIA H100")
    write_run(tmp_path / "old", "node1", "GPU-1", 1.0, interval=0.01, method=METHOD_VERSION - 1)
    # (arguments, the refusal's code, what its sentence names)
    cases = [
        ((tmp_path / "nope", "--baseline", base), "missing", "nope"),
        ((run, "--baseline", tmp_path / "nope"), "no_baseline", "nope"),
        ((run, "--baseline", tmp_path / "empty"), "not_a_baseline", "empty"),
        ((tmp_path / "empty", "--baseline", base), "not_a_run", "run.json"),
        ((tmp_path / "cut" / "r", "--baseline", base), "corrupt", "roofs.json"),
        ((run, "--baseline", tmp_path / "cut" / "r"), "corrupt", "roofs.json"),
        ((run, "--baseline", tmp_path / "h100"), "other_device", "NVIDIA H100"),
        ((run, "--baseline", tmp_path / "old"), "mixed_methods", f"method {METHOD_VERSION - 1}"),
        ((run, "--baseline", run), "itself", str(run)),
        ((run, "--baseline", base, "--tolerance", "-5"), "bad_tolerance", "(got -5.0)"),
        ((run, "--baseline", base, "--tolerance", "100"), "bad_tolerance", "(got 100.0)"),
        ((run, "--baseline", base, "--tolerance", "nan"), "bad_tolerance", "(got nan)"),
        ((run, "--baseline", base, "--tolerance", "five"), "bad_argument", "--tolerance"),
        ((run,), "bad_argument", "--baseline"),
    ]
    for args, code, said in cases:
        r = cli_in_process("check", *args, "--out", tmp_path / "out")
        assert r.returncode == 2 and r.code == code, (args, r.code, r.stdout, r.stderr)
        assert said in r.stderr and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr
        assert not (tmp_path / "out").exists()
    for inside in (run / "check", base, base / "x" / "y"):      # never into either run folder
        r = cli_in_process("check", run, "--baseline", base, "--out", inside)
        assert r.returncode == 2 and r.code == "out_inside"
    assert sorted(p.name for p in run.iterdir()) == ["measurements.csv", "roofs.json", "run.json", "samples.jsonl"]
    r = cli_in_process("check", run, "--baseline", tmp_path / "h100", "--other-device", "--out", tmp_path / "o1")
    assert r.returncode == 0 and warned(tmp_path / "o1", r) == ["other_device"]
    r = cli_in_process("check", run, "--baseline", tmp_path / "old", "--mixed-methods", "--out", tmp_path / "o2")
    assert r.returncode == 0 and warned(tmp_path / "o2", r) == ["mixed_methods"]


def test_the_default_out_is_a_check_folder_under_results(tmp_path, cli_in_process, monkeypatch):
    from bench.run import commands
    run, base = runs(tmp_path, 1.0)
    monkeypatch.setattr(commands, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(commands, "utc_stamp", lambda: "20270101T000000Z")
    r = cli_in_process("check", run, "--baseline", base)
    assert r.returncode == 0, r.stderr
    out = tmp_path / "results" / "check-20270101T000000Z"
    assert sorted(p.name for p in out.iterdir()) == ["check.json", "check.md"]
    assert str(out / "check.md") in r.stdout
    assert not math.isnan(json.loads((out / "check.json").read_text())["verdicts"][0]["change_pct"])


KiB, MiB = 2**10, 2**20
# a CPU's stream curve (L1 96 KiB, L2 2 MiB, L3 32 MiB in all): working set -> GB/s, each plateau within 1%
# (an interval reaches Policy.interval_reach x its plateau's own spread past its best: a flat plateau keeps it
# narrow enough to tell a 15% shift). Two copy threads: 64 KiB is 32 KiB a core, in its 48 KiB L1, and 128 KiB
# is past it, a step; L2 to L3 and L3 to DRAM each fall over two sizes (a transition, no level)
CURVE = {16 * KiB: 398, 32 * KiB: 400, 64 * KiB: 399, 128 * KiB: 198, 256 * KiB: 200, 512 * KiB: 199,
         1 * MiB: 199.5, 2 * MiB: 150, 3 * MiB: 120, 4 * MiB: 99, 8 * MiB: 100, 16 * MiB: 99.5, 32 * MiB: 80,
         64 * MiB: 60, 128 * MiB: 50, 256 * MiB: 49.8, 512 * MiB: 49.9}
GEMMS = {"fp32": {256: 180.0, 512: 198.0, 1024: 200.0}, "bf16": {256: 700.0, 512: 790.0, 1024: 800.0}}
N_SAMPLES = 40


def _samples(seconds: float, rng) -> tuple:
    """Return N_SAMPLES times of a call whose median is near seconds, slowed by up to 1% (a host's noise only slows)."""
    return tuple(seconds * (1 + rng.uniform(0.0, 0.01, N_SAMPLES)))


def synthetic_run(path, seed: int = 17):
    """Write a finished CPU run folder measured as a run writes one (RunWriter: measurements.csv,
    samples.jsonl, run.json): stream.copy at CURVE's working sets, square GEMMs of GEMMS' rates,
    every row N_SAMPLES raw samples of at most 1% spread; derived by finish_run (rule 17's
    intervals among it). Return path."""
    from bench.hw.device import CacheLevel, DeviceInfo
    from bench.results import Measurement, RunWriter
    from bench.run.session import run_meta
    from roofs.reports.finish import finish_run
    rng = np.random.default_rng(seed)
    dev = DeviceInfo("cpu", "cpu", "AMD EPYC 9B45", 2**34, 2, "cores",
                     (CacheLevel("l1", 48 * KiB, 2), CacheLevel("l2", MiB, 2), CacheLevel("l3", 32 * MiB)),
                     host="vm", machine_id="1" * 32, software={"torch": "2.13.0+cpu", "triton": "3.9.0"})
    w = RunWriter(path, run_meta(dev, {"quick": True}, "device"))
    common = dict(backend="torch", mode="warm", status="ok", reps=1, timer="perf_counter_ns", stop="converged",
                  error=0.0, tolerance=1e-5)
    for ws, gbps in CURVE.items():
        w.add(Measurement(op="stream.copy", family="stream", impl="stream.copy/torch",
                          point={"dtype": "float32", "ws_bytes": ws}, size=ws // 8, shape=f"({ws // 8},)",
                          working_set_bytes=ws, flops=0, bytes=ws, samples_s=_samples(ws / gbps / 1e9, rng),
                          columns={"read_bytes": ws // 2, "write_bytes": ws // 2}, **common))
    for dtype, rates in GEMMS.items():
        for n, gflops in rates.items():
            w.add(Measurement(op="gemm.square", family="gemm", impl="gemm.square/torch",
                              point={"dtype": dtype, "shape": (n, n, n)}, size=n, shape=f"{n}x{n}x{n}",
                              working_set_bytes=12 * n * n, flops=2 * n**3, bytes=12 * n * n, precision=dtype,
                              samples_s=_samples(2 * n**3 / gflops / 1e9, rng), **common))
    w.finish("complete")
    assert finish_run(path, charts=False) == []  # their roofs are read, never their pictures
    return path


def shifted_copy(src, dest, factor: float):
    """Copy the run folder src to dest with every sample time x 1 / factor (its median, p20 and
    p80 columns too; its rates x factor), and derive the copy's roofs again (finish_run): the
    run measured factor x as fast."""
    import pandas as pd

    from roofs.reports.finish import finish_run
    shutil.copytree(src, dest)
    lines = [json.loads(line) for line in (dest / "samples.jsonl").read_text().splitlines()]
    for rec in lines:
        rec["samples_s"] = [t / factor for t in rec["samples_s"]]
    (dest / "samples.jsonl").write_text("".join(json.dumps(rec) + "\n" for rec in lines))
    df = pd.read_csv(dest / "measurements.csv")
    for col in ("median_ms", "p20_ms", "p80_ms"):
        df[col] = df[col] / factor
    for col in ("gbps", "gflops"):
        df[col] = df[col] * factor
    df.to_csv(dest / "measurements.csv", index=False)
    assert finish_run(dest, charts=False) == []
    return dest


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """The synthetic run, its identical copy and its copies measured 0.85x and 0.97x as fast."""
    top = tmp_path_factory.mktemp("measured")
    base = synthetic_run(top / "base")
    shutil.copytree(base, top / "copy")
    return {"base": base, "copy": top / "copy", "0.85": shifted_copy(base, top / "slow", 0.85),
            "0.97": shifted_copy(base, top / "shift", 0.97)}


def test_the_synthetic_runs_roofs_have_intervals(measured):
    roofs = {r["name"]: r for r in json.loads((measured["base"] / "roofs.json").read_text())["roofs"]
             if r["source"] == "measured"}
    assert {"dram", "l3", "l2", "l1", "fp32", "bf16"} <= set(roofs)
    for name in ("dram", "l3", "l2", "l1", "fp32", "bf16"):
        lo, hi = roofs[name]["interval"]
        # narrow enough that a 15% shift (the 0.85x copy below) moves a band clear of its own: under 7.5% wide
        assert lo <= roofs[name]["value"] <= hi and (hi - lo) / roofs[name]["value"] < 0.075, (name, lo, hi)


@pytest.mark.parametrize("which, allowed, code", [("0.85", {"SLOWER"}, 1), ("0.97", {"SAME", "UNCLEAR"}, 0),
                                                   ("copy", {"SAME"}, 0)])
def test_a_run_measured_slower_is_slower_on_every_roof_and_a_small_shift_never(measured, which, allowed, code,
                                                                               tmp_path, cli_in_process):
    r = cli_in_process("check", measured[which], "--baseline", measured["base"], "--out", tmp_path / "out")
    assert r.returncode == code, r.stdout + r.stderr
    doc = json.loads((tmp_path / "out" / "check.json").read_text())
    got = {v["roof"]: v["verdict"] for v in doc["verdicts"]}
    assert set(got) >= {"dram", "l3", "l2", "l1", "fp32", "bf16"} and doc["without_interval"] == 0
    assert set(got.values()) <= allowed, {k: (v, next(x["why"] for x in doc["verdicts"] if x["roof"] == k))
                                          for k, v in got.items()}
    if which == "0.85":
        assert all(v["change_pct"] == pytest.approx(-15.0, abs=0.01) for v in doc["verdicts"])


def test_a_derived_folder_is_a_baseline_and_its_run_is_never_written(measured, tmp_path, cli_in_process):
    """The baseline re-derived into RUN/derived/<method>-<commit> (`report RUN`): the 0.85x copy is
    SLOWER on every roof against it, the run itself SAME, and no --out may lie in the run it came from."""
    from roofs.reports.finish import rederive
    run = tmp_path / "base"
    shutil.copytree(measured["base"], run)
    derived, problems = rederive(run, charts=False)
    assert problems == [] and derived.parent == run / "derived"
    r = cli_in_process("check", measured["0.85"], "--baseline", derived, "--out", tmp_path / "o1")
    assert r.returncode == 1 and {v["verdict"] for v in json.loads(
        (tmp_path / "o1" / "check.json").read_text())["verdicts"]} == {"SLOWER"}
    r = cli_in_process("check", run, "--baseline", derived, "--out", tmp_path / "o2")
    assert r.returncode == 0 and {v["verdict"] for v in json.loads(
        (tmp_path / "o2" / "check.json").read_text())["verdicts"]} == {"SAME"}
    r = cli_in_process("check", measured["0.85"], "--baseline", derived, "--out", run / "checks")
    assert r.returncode == 2 and r.code == "out_inside" and str(run.resolve()) in r.stderr
    assert not (run / "checks").exists()
