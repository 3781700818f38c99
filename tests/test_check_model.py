"""`check`'s one model of a ceiling (roofs/reports/check.py, ARCHITECTURE.md rule 18) on hand-worked
intervals: compare_roofs over lists of Roof, each verdict and its reason code, what decides an
UNCLEAR roof (which side, about how many passes: a half-width shrinks like 1 / sqrt(passes)), a
change that is the same per cycle (a clock change), and the causes a user sets (threads, affinity)
named first by their codes in check.json. Assertions are on codes and numbers, never on prose."""
import json
import re
from dataclasses import replace

import pytest
from helpers import ROOFS, write_run

import bench.results as results
from bench.hw.device import affinity_cpus, software_versions
from bench.policy import DEFAULT
from roofs.analysis.roofline import Roof
from roofs.reports import check as chk

T = 0.05
HOST = ("load", "flags")  # what the test machine itself was doing while write_run wrote a run: not asserted


@pytest.fixture(autouse=True)
def _no_git(monkeypatch):
    monkeypatch.setattr(results, "git_commit", lambda: "abc1234")


def roof(value, interval, name="fp32", kind="compute", clock=None, passes=None, **kw):
    extra = {**({"sustained": {"clock_mhz": clock}} if clock else {}), **({"pass_count": passes} if passes else {})}
    return Roof(kind, name, value, "GFLOP/s", interval=interval, extra=extra, **kw)


def one(run, base, **kw) -> dict:
    got = chk.compare_roofs([run], [base], **kw)
    assert len(got) == 1
    return got[0]


BASE = roof(100.0, (98.0, 102.0))


@pytest.mark.parametrize("value, interval, verdict, reason", [
    (85.0, (84.0, 86.0), "SLOWER", "apart"),          # 86 < 98 and 85 < 95
    (110.0, (109.0, 111.0), "FASTER", "apart"),       # 109 > 102 and 110 > 105
    (96.0, (95.0, 97.0), "SAME", "within"),           # apart, but -4% is within 5%
    (99.0, (97.0, 100.0), "SAME", "narrow"),          # overlapping, half-widths 1.5% and 2%
    (100.0, (90.0, 110.0), "UNCLEAR", "too_wide"),    # within 5%, but +/-10% could hide a 5% change
    (90.0, (89.0, 99.0), "UNCLEAR", "not_separated"),  # -10%, but 99 reaches past the baseline's 98
    (90.0, None, "UNCLEAR", "no_interval"),
])
def test_each_verdict_from_one_roofs_two_intervals(value, interval, verdict, reason):
    got = one(roof(value, interval), BASE)
    assert (got["verdict"], got["reason"]) == (verdict, reason), got["why"]
    assert set(got) >= {"name", "kind", "value", "base", "verdict", "why", "decide"}
    assert (got["name"], got["kind"], got["value"], got["base"]) == ("fp32", "compute", value, 100.0)
    assert got["change"] == pytest.approx(value / 100 - 1)
    assert (got["decide"] is None) == (verdict != "UNCLEAR")
    if got["decide"] is not None:
        assert got["decide"]["roof"] == "fp32" and got["decide"]["side"] == "run"


def test_compare_roofs_pairs_measured_roofs_by_kind_and_name_in_the_runs_order():
    run = [roof(85.0, (84.0, 86.0), "bf16"), roof(4000.0, (3960.0, 4040.0), "hbm", "bandwidth"),
           roof(85.0, (84.0, 86.0)), roof(1.0, (0.9, 1.1), "l1", "bandwidth"),
           roof(50.0, None, "fp16", source="datasheet")]
    base = [roof(100.0, (98.0, 102.0)), roof(100.0, (98.0, 102.0), "bf16"),
            roof(4000.0, (3960.0, 4040.0), "hbm", "bandwidth"), roof(100.0, None, "fp16", source="datasheet"),
            roof(4000.0, (3960.0, 4040.0), "hbm", "compute")]       # another kind: another roof
    got = chk.compare_roofs(run, base)
    assert [(g["kind"], g["name"], g["verdict"]) for g in got] == [
        ("compute", "bf16", "SLOWER"), ("bandwidth", "hbm", "SAME"), ("compute", "fp32", "SLOWER")]
    assert chk.compare_roofs([], base) == [] and chk.compare_roofs(run, []) == []


def test_the_tolerance_is_the_policys_unless_given():
    run = roof(92.0, (91.0, 93.0))
    assert one(run, BASE)["verdict"] == "SLOWER"                                           # -8% past 5%
    assert one(run, BASE, policy=replace(DEFAULT, check_tolerance=0.10))["verdict"] == "SAME"
    assert one(run, BASE, policy=replace(DEFAULT, check_tolerance=0.10), tolerance=0.05)["verdict"] == "SLOWER"


def test_one_roofs_passes_never_widen_another_roofs_band():
    """fp32's passes moved 46% within the run; bf16's did not move: both SLOWER, each on its own intervals."""
    run = [Roof("compute", "fp32", 72.0, "GFLOP/s", interval=(71.0, 73.0), extra={"passes": [49.3, 72.0]}),
           Roof("compute", "bf16", 72.0, "GFLOP/s", interval=(71.0, 73.0))]
    base = [roof(100.0, (98.0, 102.0)), roof(100.0, (98.0, 102.0), "bf16")]
    assert [g["verdict"] for g in chk.compare_roofs(run, base)] == ["SLOWER", "SLOWER"]


# ---- what would decide an UNCLEAR roof ------------------------------------------------------

@pytest.mark.parametrize("n, h, h_needed, want", [
    (1, 0.10, 0.05, 4),        # (0.10 / 0.05)^2 = 4
    (3, 0.10, 0.05, 12),       # 3 passes gave +/-10%: 12 would give +/-5%
    (2, 0.06, 0.05, 3),        # 2 x 1.44 = 2.88
    (4, 0.04, 0.05, 4),        # already narrow enough
    (1, 0.05, 0.05, 1),        # exactly t: narrow enough
    (1, 0.25, 0.05, None),     # 25 passes: past decide_max_passes (20)
    (1, 0.02, 0.005, None),    # +/-0.5% is under min_halfwidth (1%): no interval gets that narrow
    (1, 0.10, 0.0, None),      # a tolerance of 0 is never confirmed
])
def test_passes_needed_shrinks_a_halfwidth_like_one_over_root_passes(n, h, h_needed, want):
    assert chk.passes_needed(n, h, h_needed) == want


def test_the_passes_limit_is_the_policys():
    assert chk.passes_needed(1, 0.25, 0.05) is None
    assert chk.passes_needed(1, 0.25, 0.05, replace(DEFAULT, decide_max_passes=30)) == 25
    assert chk.passes_needed(1, 0.02, 0.005, replace(DEFAULT, min_halfwidth=0.001)) == 16


@pytest.mark.parametrize("run, base, side, passes", [
    # within t, the run's +/-10% over 1 pass: (10 / 5)^2 = 4 passes; over 2 passes: 8
    (roof(100.0, (90.0, 110.0)), BASE, "run", 4),
    (roof(100.0, (90.0, 110.0), passes=2), BASE, "run", 8),
    # within t, both too wide: the run's 2 passes need 8, the baseline's +/-20% over 1 needs 16
    (roof(100.0, (90.0, 110.0), passes=2), roof(100.0, (80.0, 120.0)), "both", 16),
    (roof(100.0, (99.0, 101.0)), roof(100.0, (80.0, 120.0), passes=1), "baseline", 16),
    # -10%, not separated: the gap is ln(100/90) = 0.1054, the baseline reaches ln(100/98) = 0.0202 toward
    # the run, leaving the run 0.0852; it reaches ln(105/90) = 0.1542: (0.1542 / 0.0852)^2 = 3.28 -> 4 passes
    (roof(90.0, (89.5, 105.0)), BASE, "run", 4),
    # both reach past half the gap (0.0527): the run ln(97/90) = 0.0749 -> 2.02 -> 3; the baseline
    # ln(100/93) = 0.0726 -> 1.90 -> 2; both, about 3
    (roof(90.0, (88.0, 97.0)), roof(100.0, (93.0, 106.0)), "both", 3),
    # intervals that touch (98 = 98) overlap: the run's reach just fills its room, one pass more
    (roof(90.0, (88.0, 98.0)), BASE, "run", 2),
    # the run reaches ln(140/90) = 0.442 against a room of 0.0852: 26.9 passes, past 20
    (roof(90.0, (80.0, 140.0)), BASE, "run", None),
    (roof(100.0, (75.0, 125.0)), BASE, "run", None),   # +/-25% to +/-5%: 25 passes
])
def test_an_unclear_roof_names_the_side_and_the_passes_that_would_decide_it(run, base, side, passes):
    got = one(run, base)
    assert got["verdict"] == "UNCLEAR" and got["decide"] == {"roof": "fp32", "side": side, "passes": passes}


def test_against_a_fleet_only_the_run_is_rerun():
    """A fleet's band is its devices' spread, which passes do not narrow: -30% against [80, 120]
    with the run reaching 85 leaves the run ln(100/70) - ln(100/80) = 0.1335 of its reach 0.1942:
    2.11 -> 3 passes; inside the band a +/-10% run needs 4 passes to be SAME."""
    fleet = roof(100.0, (80.0, 120.0))
    got = one(roof(70.0, (69.0, 85.0)), fleet, fleet=True)
    assert (got["reason"], got["decide"]["side"], got["decide"]["passes"]) == ("not_separated", "run", 3)
    got = one(roof(88.0, (79.2, 96.8)), fleet, fleet=True)
    assert (got["reason"], got["decide"]["side"], got["decide"]["passes"]) == ("too_wide", "run", 4)
    assert one(roof(88.0, (87.5, 88.5)), fleet, fleet=True)["reason"] == "inside_fleet"


# ---- the same per cycle: a clock change -----------------------------------------------------

@pytest.mark.parametrize("run, base, clocks, verdict, reason", [
    # 15% slower at 1,683 MHz against 1,980: 85 / 1683 = 100 / 1980 per cycle
    (roof(85.0, (84.0, 86.0), clock=1683.0), roof(100.0, (98.0, 102.0), clock=1980.0), None, "SLOWER", "clock"),
    # ... at 1,800 MHz: -6.5% per cycle, past 5%: a change in cycles too
    (roof(85.0, (84.0, 86.0), clock=1800.0), roof(100.0, (98.0, 102.0), clock=1980.0), None, "SLOWER", "apart"),
    # 20% faster at 2,376 MHz against 1,980: the same per cycle
    (roof(120.0, (119.0, 121.0), clock=2376.0), roof(100.0, (98.0, 102.0), clock=1980.0), None, "FASTER", "clock"),
    # no clock in the roofs' windows: the run records' clocks stand in
    (roof(85.0, (84.0, 86.0)), roof(100.0, (98.0, 102.0)), (1683.0, 1980.0), "SLOWER", "clock"),
    # a clock on one side only: no per-cycle figure
    (roof(85.0, (84.0, 86.0), clock=1683.0), roof(100.0, (98.0, 102.0)), None, "SLOWER", "apart"),
    # a latency judged on its rate: 2.0 us at 1,683 MHz is 3,366 cycles, as 1.7 us at 1,980
    (roof(2.0, (1.98, 2.02), "launch", "latency", clock=1683.0),
     roof(1.7, (1.69, 1.71), "launch", "latency", clock=1980.0), None, "SLOWER", "clock"),
])
def test_a_change_that_is_the_same_per_cycle_is_a_clock_change(run, base, clocks, verdict, reason):
    got = one(run, base, **({"clocks": clocks} if clocks else {}))
    assert (got["verdict"], got["reason"]) == (verdict, reason), got["why"]
    if reason == "clock":
        assert got["per_cycle"] == pytest.approx(0.0, abs=1e-9)
        assert got["clock_mhz"] == [run.extra.get("sustained", {}).get("clock_mhz") or clocks[0],
                                    base.extra.get("sustained", {}).get("clock_mhz") or clocks[1]]


@pytest.mark.parametrize("kind", ["compute", "latency"])
def test_the_per_cycle_change_reads_as_the_change_does(kind):
    """At one clock the change per cycle is the change itself, a latency's in its own terms (+17.6% longer)."""
    got = one(roof(2.0, (1.98, 2.02), "x", kind, clock=1980.0), roof(1.7, (1.69, 1.71), "x", kind, clock=1980.0))
    assert got["per_cycle"] == pytest.approx(got["change"]) == pytest.approx(2.0 / 1.7 - 1)
    assert got["verdict"] == ("FASTER" if kind == "compute" else "SLOWER") and got["reason"] == "apart"



def _stated(why: str) -> float:
    """The signed change in % a why opens with ("-6.0%: ..."), as a number."""
    return float(re.match(r"([+-]\d+\.\d)%", why).group(1))


def test_a_launch_floors_change_has_one_sign_in_its_column_and_its_reason(tmp_path):
    """A launch floor of 9.4 us [9.35, 9.4] against 10.0 us [10.0, 10.1]: as rates 1 / 9.4 = 0.1064
    is above the baseline's top 1 / 10 = 0.1 and past 1.05 x 0.1, FASTER. Its change is the figure's
    as shown, (9.4 - 10) / 10 = -6.0%, in check.json, the table's column and the why alike (the
    rates' 10 / 9.4 - 1 = +6.4% is nowhere)."""
    run, base = roof(9.4, (9.35, 9.4), "launch.torch.empty", "latency"), roof(10.0, (10.0, 10.1),
                                                                            "launch.torch.empty", "latency")
    got = one(run, base)
    assert (got["verdict"], got["reason"]) == ("FASTER", "apart")
    assert got["change"] == pytest.approx(-0.06) and _stated(got["why"]) == -6.0
    write_run(tmp_path / "base", "node1", "GPU-1", 1.0, interval=0.01)
    write_run(tmp_path / "run", "node1", "GPU-1", 1.0, interval=0.01)
    for folder, r in (("base", base), ("run", run)):
        doc = json.loads((tmp_path / folder / "roofs.json").read_text())
        results.write_roofs(tmp_path / folder, doc["roofs"] + [{**r.to_dict(), "source": "measured"}])
    result = chk.check(tmp_path / "run", tmp_path / "base")
    launch = next(v for v in result["verdicts"] if v["kind"] == "latency")
    assert launch["verdict"] == "FASTER" and launch["change_pct"] == pytest.approx(-6.0)
    column = chk.table(result).set_index("roof").loc["latency launch.torch.empty", "change"]
    assert float(column.rstrip("%")) == _stated(launch["why"]) == -6.0
    assert chk.changes(result, "")[0][0] == "FASTER launch.torch.empty -6.0%"


def test_a_run_whose_clock_moved_is_named_a_clock_change_first(tmp_path, cli_in_process):
    write_run(tmp_path / "base", "node1", "GPU-1", 1.0, interval=0.01)
    write_run(tmp_path / "run", "node1", "GPU-1", 0.85, interval=0.01, clock=0.85 * 1980.0)
    r = cli_in_process("check", tmp_path / "run", "--baseline", tmp_path / "base", "--out", tmp_path / "out")
    doc = json.loads((tmp_path / "out" / "check.json").read_text())
    assert r.returncode == 1 and {v["roof"]: v["verdict"] for v in doc["verdicts"]} == dict.fromkeys(ROOFS, "SLOWER")
    for v in doc["verdicts"]:
        assert v["reason"] == "clock" and v["causes"][0]["code"] == "clock", v
        assert v["per_cycle_pct"] == pytest.approx(0.0, abs=1e-6) and v["change_pct"] == pytest.approx(-15.0)


# ---- the causes a user sets -------------------------------------------------------------------

def test_the_software_record_holds_threads_and_affinity():
    soft = software_versions()
    assert isinstance(soft["torch_threads"], int) and soft["affinity_cpus"] == affinity_cpus()
    assert affinity_cpus() is None or affinity_cpus() >= 1


@pytest.mark.parametrize("key, code", [("torch_threads", "threads"), ("affinity_cpus", "affinity")])
def test_a_slower_compute_roof_on_fewer_cpus_names_them_first(tmp_path, key, code, cli_in_process):
    """A run at half speed on 1 thread (or 1 affinity CPU) against 2, with another driver besides:
    its compute roofs name the CPUs first, its bandwidth roofs the driver first; every cause has its code."""
    write_run(tmp_path / "base", "node1", "GPU-1", 1.0, interval=0.01, software={key: 2})
    write_run(tmp_path / "run", "node1", "GPU-1", 0.5, interval=0.01, driver="550.1", software={key: 1})
    r = cli_in_process("check", tmp_path / "run", "--baseline", tmp_path / "base", "--out", tmp_path / "out")
    assert r.returncode == 1
    doc = {v["roof"]: v for v in json.loads((tmp_path / "out" / "check.json").read_text())["verdicts"]}
    for name, (kind, _, _) in ROOFS.items():
        codes = [c["code"] for c in doc[name]["causes"] if c["code"] not in HOST]
        assert doc[name]["verdict"] == "SLOWER" and sorted(codes) == sorted([code, "version"]), codes
        assert codes[0] == (code if kind == "compute" else "version"), (name, codes)
        assert all(isinstance(c["text"], str) and c["text"] for c in doc[name]["causes"])


def test_more_threads_on_a_faster_run_is_named_but_not_first(tmp_path, cli_in_process):
    write_run(tmp_path / "base", "node1", "GPU-1", 1.0, interval=0.01, software={"torch_threads": 1})
    write_run(tmp_path / "run", "node1", "GPU-1", 2.0, interval=0.01, driver="570.1", software={"torch_threads": 2})
    r = cli_in_process("check", tmp_path / "run", "--baseline", tmp_path / "base", "--out", tmp_path / "out")
    assert r.returncode == 0
    doc = {v["roof"]: v for v in json.loads((tmp_path / "out" / "check.json").read_text())["verdicts"]}
    codes = [c["code"] for c in doc["fp32"]["causes"] if c["code"] not in HOST]
    assert doc["fp32"]["verdict"] == "FASTER" and codes == ["version", "threads"]


def test_an_unclear_roof_says_what_would_decide_it_in_check_json(tmp_path, cli_in_process):
    """A run at the baseline's figures with +/-10% intervals against +/-1%: every roof UNCLEAR,
    the run's interval too wide, (10 / 5)^2 = 4 passes would narrow it to the 5% tolerance."""
    write_run(tmp_path / "base", "node1", "GPU-1", 1.0, interval=0.01)
    write_run(tmp_path / "run", "node1", "GPU-1", 1.0, interval=0.10)
    r = cli_in_process("check", tmp_path / "run", "--baseline", tmp_path / "base", "--out", tmp_path / "out")
    doc = json.loads((tmp_path / "out" / "check.json").read_text())
    assert r.returncode == 0 and doc["rule"]["decide_max_passes"] == DEFAULT.decide_max_passes
    for v in doc["verdicts"]:
        assert (v["verdict"], v["reason"]) == ("UNCLEAR", "too_wide")
        assert v["decide"] == {"roof": v["roof"], "side": "run", "passes": 4} and "causes" not in v


def test_the_runner_flags_counted_for_a_cause_include_steal():
    """Rows the runner flagged busy (2), stolen (3, one also jumped) and jumped (1 more): check's
    "flags" cause counts each kind, steal apart from busy."""
    import pandas as pd

    from roofs.reports import check_sides
    flags = pd.Series([f"{results.BUSY_PREFIX}: x", f"{results.BUSY_PREFIX}: y", f"{results.STEAL_PREFIX}: 30%",
                       f"{results.STEAL_PREFIX}: 25%", f"{results.STEAL_PREFIX}: 40%; {results.JUMP_PREFIX}: 9x",
                       f"{results.JUMP_PREFIX}: 12x", "", None])
    counts = check_sides.flag_counts(flags)
    assert counts == {"busy": 2, "steal": 3, "jumped": 2}
    side = check_sides.Side(path=None, kind="run", model="m", method=15, roofs={}, flags={**counts, "busy": 0})
    assert [code for code, _ in check_sides.run_level_notes(side, None)] == ["flags"]
