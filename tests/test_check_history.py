"""`run_bench.py check RUN --baseline RUN1 RUN2 ...`: several earlier runs of one node as the
baseline (ARCHITECTURE.md rule 18). Per roof the median run's figure and the hull of the runs'
intervals, [lowest low, highest top], stand for the baseline; the hull is the node's own spread,
judged like a fleet's band (a value inside it is SAME where the run's interval is narrow).
Hand-worked runs (tests/helpers.write_run), a committed run's roofs scaled, and the refusals by
their codes."""
import json
import shutil
from pathlib import Path

import pytest
from helpers import ROOFS, write_run

import bench.results as results
from bench.results import METHOD_VERSION
from roofs.analysis.roofline import Roof
from roofs.reports import check as chk
from roofs.reports.check_sides import hull

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "results" / "nvidia-h200-20261130T010900Z"   # its roofs as method 14 derived them
COMMITTED_ROOFS = COMMITTED / "derived" / "m14-7484a9741c9b" / "roofs.json"


@pytest.fixture(autouse=True)
def _no_git(monkeypatch):
    monkeypatch.setattr(results, "git_commit", lambda: "abc1234")


def history(tmp_path, scales, run_scale, **kw):
    """Write baseline runs b0, b1, ... of one device at scales x ROOFS (+/-1% intervals), a day
    apart, and the run at run_scale the day after; return (run, [baselines])."""
    bases = []
    for i, scale in enumerate(scales):
        write_run(tmp_path / f"b{i}", "vm", "GPU-vm", scale, interval=0.01, start=f"2026-12-0{i + 1}T00:00:00+00:00")
        bases.append(tmp_path / f"b{i}")
    write_run(tmp_path / "run", "vm", "GPU-vm", run_scale, interval=0.01, start="2026-12-09T00:00:00+00:00", **kw)
    return tmp_path / "run", bases


def verdicts(out: Path) -> dict:
    return {v["roof"]: v for v in json.loads((out / "check.json").read_text())["verdicts"]}


def test_a_run_slower_than_one_run_is_same_against_the_span_of_three(tmp_path, cli_in_process):
    """hbm 4,000 GB/s [3,960, 4,040] in b0, 3,700 [3,663, 3,737] in b1 (the shared host's slow
    minute), 4,100 [4,059, 4,141] in b2; the run 3,720 [3,682.8, 3,757.2]. Against b0 alone its
    top 3,757.2 lies below 3,960 and 3,720 is under 0.95 x 4,000 = 3,800: SLOWER. Against the
    three: the median run's 4,000 and the hull [3,663, 4,141]; -7.0% is past 5%, but 3,720 lies
    inside the node's own span and the run's +/-1% is narrow: SAME ("inside_history"). Every
    roof is scaled alike, so every roof reads the same."""
    run, bases = history(tmp_path, (1.0, 0.925, 1.025), 0.93)
    r = cli_in_process("check", run, "--baseline", bases[0], "--out", tmp_path / "one")
    assert r.returncode == 1, r.stderr
    assert {n: v["verdict"] for n, v in verdicts(tmp_path / "one").items()} == dict.fromkeys(ROOFS, "SLOWER")
    r = cli_in_process("check", run, "--baseline", *bases, "--out", tmp_path / "three")
    assert r.returncode == 0, r.stderr
    got = verdicts(tmp_path / "three")
    assert {n: (v["verdict"], v["reason"]) for n, v in got.items()} == dict.fromkeys(ROOFS, ("SAME", "inside_history"))
    hbm = got["hbm"]
    assert hbm["baseline"] == {"value": pytest.approx(4000.0), "interval": [pytest.approx(3663.0),
                                                                            pytest.approx(4141.0)], "runs": 3}
    assert hbm["change_pct"] == pytest.approx(-7.0) and hbm["run"]["interval"] == pytest.approx([3682.8, 3757.2])
    doc = json.loads((tmp_path / "three" / "check.json").read_text())
    assert doc["baseline"]["kind"] == "history" and doc["baseline"]["paths"] == [str(b) for b in bases]
    assert doc["baseline"]["path"] == str(bases[-1])    # the newest run: its records are the causes' baseline


def scaled_copy(dest: Path, scale: float, start: str) -> Path:
    """Copy the committed H200 run's run.json, measurements.csv and samples to dest, with its method-14 roofs
    at scale x their figures and intervals (each measured roof; a rate, none is a latency) and
    start_utc start: the same device measured scale x as fast."""
    dest.mkdir()
    for name in ("measurements.csv", "samples.jsonl.gz"):
        shutil.copy(COMMITTED / name, dest)
    meta = json.loads((COMMITTED / "run.json").read_text())
    (dest / "run.json").write_text(json.dumps({**meta, "start_utc": start}))
    doc = json.loads(COMMITTED_ROOFS.read_text())
    for r in doc["roofs"]:
        if r.get("source") == "measured":
            assert r["kind"] != "latency"
            r["value"] *= scale
            if r.get("interval"):
                r["interval"] = [x * scale for x in r["interval"]]
    (dest / "roofs.json").write_text(json.dumps(doc))
    return dest


def test_a_run_85_percent_as_fast_is_slower_than_all_three_where_its_band_clears_theirs(tmp_path, cli_in_process):
    """Three runs of the committed H200 at 0.98, 1.0 and 1.01 x its method-14 roofs, and a run at
    0.85 x. Per roof [lo, hi]: the hull is [0.98 lo, 1.01 hi] and the median run's figure the
    1.0 x one, so the change is -15% on every roof; SLOWER exactly where 0.85 hi < 0.98 lo
    (hi / lo under 1.153: hbm's 4,763 / 4,642, the compute roofs' 1.02), and there SLOWER against
    each run alone too. l2.copy's [5,698, 8,879] (1.558) overlaps: -15% not separated, UNCLEAR."""
    bases = [scaled_copy(tmp_path / f"b{i}", s, f"2026-12-0{i + 1}T00:00:00+00:00")
             for i, s in enumerate((0.98, 1.0, 1.01))]
    run = scaled_copy(tmp_path / "run", 0.85, "2026-12-09T00:00:00+00:00")
    r = cli_in_process("check", run, "--baseline", *bases, "--out", tmp_path / "all")
    assert r.returncode == 1, r.stderr
    got = verdicts(tmp_path / "all")
    own = {r["name"]: r for r in json.loads(COMMITTED_ROOFS.read_text())["roofs"] if r.get("source") == "measured"}
    assert set(got) == set(own)
    slower = set()
    for name, v in got.items():
        assert v["change_pct"] == pytest.approx(-15.0) and v["baseline"]["runs"] == 3, name
        if own[name].get("interval") is None:   # the host transfers: no interval on either side
            assert (v["verdict"], v["reason"]) == ("UNCLEAR", "no_interval")
            continue
        lo, hi = own[name]["interval"]
        assert v["baseline"]["interval"] == pytest.approx([0.98 * lo, 1.01 * hi]), name
        want = "SLOWER" if 0.85 * hi < 0.98 * lo else "UNCLEAR"
        assert v["verdict"] == want, (name, v["why"])
        slower |= {name} if want == "SLOWER" else set()
    assert {"hbm", "bf16", "fp32", "l2"} <= slower and "l2.copy" not in slower
    for i, base in enumerate(bases):
        cli_in_process("check", run, "--baseline", base, "--out", tmp_path / f"one{i}")
        assert {n for n, v in verdicts(tmp_path / f"one{i}").items() if v["verdict"] == "SLOWER"} >= slower


def test_the_span_is_judged_by_its_width_only_where_one_run_alone_has_the_roof():
    """A baseline of 100 [80, 120] against a run of 100 [99, 101]: as the span of three runs it
    is the node's spread, SAME; as one run's interval it is too wide to tell (+/-20%)."""
    run = Roof("compute", "fp32", 100.0, "GFLOP/s", interval=(99.0, 101.0))
    for runs, want in ((3, ("SAME", "narrow")), (1, ("UNCLEAR", "too_wide"))):
        base = Roof("compute", "fp32", 100.0, "GFLOP/s", interval=(80.0, 120.0), extra={"history_runs": runs})
        got = chk.compare_roofs([run], [base])[0]
        assert (got["verdict"], got["reason"]) == want
    base = Roof("compute", "fp32", 100.0, "GFLOP/s", interval=(80.0, 120.0), extra={"history_runs": 2})
    got = chk.compare_roofs([Roof("compute", "fp32", 88.0, "GFLOP/s", interval=(87.5, 88.5))], [base])[0]
    assert (got["verdict"], got["reason"]) == ("SAME", "inside_history")     # -12%, inside the span


def test_the_hull_is_the_median_runs_figure_and_the_widest_interval():
    """Four runs of 100, 90, 110, 95: ranked as rates 90, 95, 100, 110, the slower middle one is
    95; the hull [lowest low, highest top]. Two launch floors of 2.0 and 1.0 us: as rates 0.5 and
    1, the slower is 2.0 us. A run without an interval leaves the hull none."""
    roofs = [{"value": v, "interval": [v - 1, v + 2], "unit": "GB/s"} for v in (100.0, 90.0, 110.0, 95.0)]
    got = hull("bandwidth", roofs)
    assert (got["value"], got["interval"], got["runs"], got["extra"]["history_runs"]) == (95.0, [89.0, 112.0], 4, 4)
    launch = [{"value": v, "interval": [v, v * 1.01], "unit": "us"} for v in (1.0, 2.0)]
    assert hull("latency", launch)["value"] == 2.0 and hull("latency", launch)["interval"] == [1.0, 2.02]
    assert hull("bandwidth", roofs[:2] + [{"value": 99.0, "unit": "GB/s"}])["interval"] is None


def test_the_refusals_have_their_codes_and_write_nothing(tmp_path, cli_in_process):
    run, bases = history(tmp_path, (1.0, 1.0), 1.0)
    write_run(tmp_path / "other", "vm2", "GPU-other", 1.0, interval=0.01)
    write_run(tmp_path / "h100", "vm", "GPU-h100", 1.0, interval=0.01, model="NVIDIA H100")
    write_run(tmp_path / "old", "vm", "GPU-vm", 1.0, interval=0.01, method=METHOD_VERSION - 1)
    write_run(tmp_path / "old2", "vm", "GPU-vm", 1.0, interval=0.01, method=METHOD_VERSION - 1)
    write_run(tmp_path / "fleet-runs" / "r", "vm", "GPU-vm", 1.0, interval=0.01)
    assert cli_in_process("fleet", tmp_path / "fleet-runs", "--out", tmp_path / "fleet").returncode == 0
    cases = [([*bases, tmp_path / "other"], {}, "other_device"),          # two devices' runs are a fleet's
             ([*bases, tmp_path / "h100"], {}, "other_device"),
             ([*bases, tmp_path / "old"], {}, "mixed_methods"),           # methods among the baseline runs
             ([tmp_path / "old", tmp_path / "old2"], {}, "mixed_methods"),  # ... and against the run's
             ([*bases, tmp_path / "fleet"], {}, "fleet_in_history"),
             ([*bases, run], {}, "itself"),
             ([bases[0], bases[1], bases[0]], {}, "repeated")]
    for dirs, kw, code in cases:
        with pytest.raises(chk.CheckError) as e:
            chk.check(run, dirs, **kw)
        assert e.value.code == code, (dirs, str(e.value))
        r = cli_in_process("check", run, "--baseline", *dirs, "--out", tmp_path / "out")
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
        assert not (tmp_path / "out").exists()
    for dirs, flag in (([*bases, tmp_path / "other"], "other_device"), ([*bases, tmp_path / "old"], "mixed_methods"),
                       ([tmp_path / "old", tmp_path / "old2"], "mixed_methods")):
        result = chk.check(run, dirs, **{flag: True})
        assert result["baseline"]["kind"] == "history" and result["warnings"], flag
    r = cli_in_process("check", run, "--baseline", *bases, "--out", bases[0] / "check")   # into a baseline run
    assert r.returncode == 2 and not (bases[0] / "check").exists()
    with pytest.raises(chk.CheckError):
        chk.refuse_out(bases[0] / "x", chk.check(run, bases))
