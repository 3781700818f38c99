"""A fleet: run folders written through the project's own writers (RunWriter,
write_roofs) with known values, combined by `run_bench.py fleet`; the statistics, the robust
outlier rule and its causes, mixed models and method versions, the runs left out."""
import json
import time
from pathlib import Path

import pandas as pd
import pytest
from helpers import ROOFS, SLOW_OF_A_THOUSAND, write_run

import bench.results as results
from bench.hw.device import DeviceInfo
from bench.results import METHOD_VERSION, RunWriter, write_roofs
from bench.run.session import run_meta
from roofs.reports import fleet as fl


@pytest.fixture(autouse=True)
def _no_git(monkeypatch):
    monkeypatch.setattr(results, "git_commit", lambda: "abc1234")  # a thousand folders, one commit


def test_the_rule_and_its_statistics_on_hand_worked_values():
    st = fl.stats([100, 101, 99, 100, 80])
    assert st["median"] == 100 and st["mad"] == 1.0 and st["n"] == 5
    assert st["p5"] == pytest.approx(80 + 0.2 * 19) and st["p95"] == pytest.approx(101 - 0.2 * 1)
    assert fl.is_outlier(80, st)                       # 20 MADs and 20% below
    assert not fl.is_outlier(98, st)                   # 2 MADs below: not beyond 3
    wide = fl.stats([100, 90, 110, 100, 96])           # MAD 4: 97 is 0.75 MAD below, 88 is 3 MADs exactly
    assert not fl.is_outlier(88, wide) and fl.is_outlier(87.9, wide)
    flat = fl.stats([100, 100, 100, 100, 98])          # MAD 0: the 3% test alone
    assert flat["mad"] == 0 and not fl.is_outlier(98, flat) and fl.is_outlier(96.9, flat)


@pytest.mark.slow
def test_a_thousand_devices_name_the_slow_one_and_why(thousands, tmp_path, cli_in_process):
    slow = SLOW_OF_A_THOUSAND  # conftest.py's thousands: a thousand runs, this one 15% slow, its clock held down
    t0 = time.perf_counter()
    r = cli_in_process("fleet", thousands / "slow-one" / "array", "--out", tmp_path / "fleet")
    wall = time.perf_counter() - t0
    assert r.returncode == 0, r.stderr[-2000:]
    print(f"\nfleet of 1000 synthetic runs: {wall:.2f} s, the command's own line: {r.stdout.splitlines()[0]}")
    doc = json.loads((tmp_path / "fleet" / "fleet.json").read_text())
    group = doc["groups"]["NVIDIA H200"]   # what the command's line counts: devices, runs, models, left out
    assert (len(doc["groups"]), group["devices"], group["runs"], doc["left_out"]) == (1, 1000, 1000, [])
    assert {(o["id"], o["host"]) for o in doc["outliers"]} == {(f"GPU-{slow:04d}", f"node{slow // 8:03d}")}
    assert f"GPU-{slow:04d}" in r.stdout                               # the outlier named on the terminal
    flagged = {o["roof"] for o in doc["outliers"] if o["id"] == f"GPU-{slow:04d}"}
    assert flagged == {c for n in ROOFS for c in (n, f"{n}.sustained")}   # every roof, burst and sustained
    assert {o["id"] for o in doc["outliers"]} == {f"GPU-{slow:04d}"}     # noise within 1% flags nobody else
    hbm = doc["groups"]["NVIDIA H200"]["roofs"]["hbm"]
    assert hbm["n"] == 1000 and hbm["median"] == pytest.approx(4000, rel=0.002)
    assert 0.98 * 4000 < hbm["p5"] < hbm["median"] < hbm["p95"] < 1.02 * 4000
    assert all(o["cause_codes"][0] == "clock" and "1,600 MHz" in o["causes"][0] for o in doc["outliers"])
    table = pd.read_csv(tmp_path / "fleet" / "fleet.csv")
    assert len(table) == 1000 and {"host", "id", "model", "hbm", "hbm.sustained", "power_limit_w", "ecc",
                                   "method_version", "commit"} <= set(table.columns)
    md = (tmp_path / "fleet" / "fleet.md").read_text()
    assert f"**GPU-{slow:04d}** on node{slow // 8:03d}" in md
    assert all(o["causes"][0] in md for o in doc["outliers"])          # beside it, its clock held down
    assert (tmp_path / "fleet" / "fleet-nvidia-h200-roofs.png").stat().st_size > 10_000
    assert (tmp_path / "fleet" / "fleet-nvidia-h200-roofline.png").stat().st_size > 10_000


def test_models_apart_twice_measured_devices_and_what_is_left_out(tmp_path):
    for i in range(6):
        write_run(tmp_path / f"h200-{i}", "a", f"GPU-h{i}", 1.0, power=700.0 if i else 500.0)
        write_run(tmp_path / f"h100-{i}", "b", f"GPU-g{i}", 0.6, model="NVIDIA H100")
    write_run(tmp_path / "h200-0-again", "a", "GPU-h0", 1.0, start="2099-01-01T00:00:00+00:00")
    write_run(tmp_path / "died", "a", "GPU-x", 1.0, status="running")
    write_run(tmp_path / "failed", "a", "GPU-y", 1.0, status="failed: device lost")
    (tmp_path / "cut").mkdir()
    (tmp_path / "cut" / "run.json").write_text('{"schema_version": 1, "dev')
    fleet = fl.gather([tmp_path])
    md, doc = fl.write_fleet(fleet, tmp_path / "out")
    assert set(doc["groups"]) == {"NVIDIA H200", "NVIDIA H100"}          # 0.6x the H200 flags no H100
    assert doc["groups"]["NVIDIA H100"]["roofs"]["hbm"]["median"] == pytest.approx(2400)
    assert doc["groups"]["NVIDIA H200"] == dict(doc["groups"]["NVIDIA H200"], devices=6, runs=7)
    assert doc["outliers"] == []
    assert doc["measured_twice"] == {"GPU-h0": [str(tmp_path / "h200-0"), str(tmp_path / "h200-0-again")]}
    why = dict((Path(d).name, w) for d, w in fleet.left_out)
    assert why["died"].code == "not_complete" and "still running" in why["died"]
    assert why["failed"].code == "not_complete" and "device lost" in why["failed"]
    assert why["cut"].code == "unreadable" and "corrupt" in why["cut"]
    text = md.read_text()
    assert "**GPU-h0**" in text                                         # the device measured twice
    assert "- " in text.split("## Left out")[1]


def test_a_slow_device_with_a_lower_power_limit_is_named_with_it(tmp_path):
    for i in range(8):
        write_run(tmp_path / f"r{i}", "h", f"GPU-{i}", 0.9 if i == 3 else 1.0, power=500.0 if i == 3 else 700.0,
                  driver="550.1" if i == 3 else "560.35")
    _, doc = fl.write_fleet(fl.gather([tmp_path]), tmp_path / "out")
    assert {o["id"] for o in doc["outliers"]} == {"GPU-3"}
    coded = {code: text for o in doc["outliers"] for code, text in zip(o["cause_codes"], o["causes"])}
    assert set(coded) == {"power_limit", "version"}   # its power cap and its driver, each with both values
    assert "500 W" in coded["power_limit"] and "700 W" in coded["power_limit"]
    assert "550.1" in coded["version"] and "560.35" in coded["version"]


def test_mixed_method_versions_are_refused_unless_asked(tmp_path, cli_in_process):
    write_run(tmp_path / "new", "h", "GPU-1", 1.0)
    write_run(tmp_path / "old", "h", "GPU-2", 1.0, method=3)
    r = cli_in_process("fleet", tmp_path, "--out", tmp_path / "f")
    assert r.returncode == 2 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert r.code == "mixed_methods" and "--mixed-methods" in r.stderr
    assert "version 3: 1 runs" in r.stderr and f"version {METHOD_VERSION}: 1 runs" in r.stderr
    assert not (tmp_path / "f").exists()                                  # nothing written
    fleet = fl.gather([tmp_path], allow_mixed=True)
    _, doc = fl.write_fleet(fleet, tmp_path / "f")
    assert set(doc["groups"]) == {"NVIDIA H200 (method 3)", f"NVIDIA H200 (method {METHOD_VERSION})"}
    assert doc["mixed_methods"]
    md = (tmp_path / "f" / "fleet.md").read_text()
    assert all(f"## {g}:" in md for g in doc["groups"])                 # each version its own labelled group


def test_bad_folders_are_one_sentence(tmp_path, cli_in_process):
    r = cli_in_process("fleet", tmp_path / "nope")
    assert r.returncode == 2 and r.code == "not_a_folder" and "Traceback" not in r.stderr
    r = cli_in_process("fleet", tmp_path)
    assert r.returncode == 2 and r.code == "no_complete_run" and str(tmp_path) in r.stderr


def test_an_unwritable_out_is_one_sentence(tmp_path, cli_in_process):
    write_run(tmp_path / "runs" / "a", "h", "GPU-1", 1.0)
    (tmp_path / "file").write_text("x")
    r = cli_in_process("fleet", tmp_path / "runs", "--out", tmp_path / "file")
    assert r.returncode == 2 and r.code == "unwritable" and "Traceback" not in r.stderr


def test_a_fleet_of_one_device_is_its_run_to_run_spread_never_its_own_outlier(tmp_path, cli_in_process):
    """Four runs of one device, one of them 20% down: one device, no outlier, and its spread
    (hand-worked: hbm 3,200-4,000 GB/s, median 4,000, so (4,000 - 3,200) / 4,000 = 20%)."""
    for i, scale in enumerate((1.0, 1.0, 0.8, 1.0)):
        write_run(tmp_path / f"r{i}", "vm", "GPU-one", scale, start=f"2026-12-0{i + 1}T00:00:00+00:00")
    r = cli_in_process("fleet", tmp_path, "--out", tmp_path / "fleet")
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "fleet" / "fleet.json").read_text())
    group = doc["groups"]["NVIDIA H200"]
    assert doc["outliers"] == [] and (len(doc["groups"]), group["devices"], group["runs"]) == (1, 1, 4)
    # too few devices to name an outlier: the group says why, and the terminal prints it and the spread
    assert group["devices"] < fl.MIN_DEVICES and group["no_outliers"] in r.stdout and "GPU-one" in r.stdout
    assert doc["spread"]["GPU-one"]["hbm"] == {"runs": 4, "min": 3200.0, "max": 4000.0, "spread_pct": 20.0}
    # the group's figure is the latest run's (4,000), with the run-to-run ratio 4,000 / 3,200 beside it
    hbm = doc["groups"]["NVIDIA H200"]["roofs"]["hbm"]
    assert (hbm["median"], hbm["p5"], hbm["p95"]) == (4000.0, 4000.0, 4000.0)
    assert hbm["run_to_run"] == {"devices": 1, "ratio": 1.25}
    md = (tmp_path / "fleet" / "fleet.md").read_text()
    title = md.splitlines()[0]
    assert "1 device" in title and "4 runs" in title and group["no_outliers"] in md
    [spread] = [line for line in md.splitlines() if line.startswith("**GPU-one**")]
    assert "hbm" in spread and f"({doc['spread']['GPU-one']['hbm']['spread_pct']:.1f}%)" in spread


def test_two_devices_cannot_tell_an_outlier_and_three_can(tmp_path):
    write_run(tmp_path / "a", "vm", "GPU-a", 1.0)
    write_run(tmp_path / "b", "vm", "GPU-b", 0.8)
    doc = fl.analyse(fl.gather([tmp_path]))
    assert doc["outliers"] == [] and doc["groups"]["NVIDIA H200"]["devices"] == 2
    assert "no_outliers" in doc["groups"]["NVIDIA H200"]               # too few devices to tell, and why
    write_run(tmp_path / "c", "vm", "GPU-c", 1.0)
    doc = fl.analyse(fl.gather([tmp_path]))
    assert {o["id"] for o in doc["outliers"]} == {"GPU-b"} and "no_outliers" not in doc["groups"]["NVIDIA H200"]


def test_two_cpu_vms_of_one_host_name_are_two_devices(tmp_path):
    from bench.hw.device import CacheLevel
    for name, mid in (("a", "1" * 32), ("b", "2" * 32)):
        dev = DeviceInfo("cpu", "cpu", "AMD EPYC", 2**34, 2, "cores", (CacheLevel("l3", 2**25),), host="vm",
                         machine_id=mid)
        w = RunWriter(tmp_path / name, run_meta(dev, {"quick": True}, "device"))
        w.finish("complete")
        write_roofs(tmp_path / name, [{"kind": "bandwidth", "name": "dram", "value": 40.0, "unit": "GB/s",
                                       "source": "measured"}])
    rows = fl.gather([tmp_path]).rows
    assert rows["id"].nunique() == 2 and set(rows["host"]) == {"vm"}
