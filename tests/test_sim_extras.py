"""The simulator's opt-in GPU extras (roofs/sim/extras.py): telemetry, host-device copies,
sustained windows and counters, each worked by hand from the machine model, and the default
simulated run left as it was. The whole path over them (report, charts, check, fleet) is
tests/test_gpu_shaped.py's."""
import json

import numpy as np
import pandas as pd
import pytest

from bench.policy import DEFAULT
from bench.results import load_counters, load_run
from bench.run import counters_phase, sustain_phase
from roofs.analysis.confirm import confirm, counted_for
from roofs.analysis.links import link_roofs
from roofs.analysis.model import rated
from roofs.analysis.roofline import Roof
from roofs.reports.finish import finish_run
from roofs.sim import extras
from roofs.sim.extras import busy_share, counted_points, roof_candidates, sustained_seconds
from roofs.sim.folder import write_run
from roofs.sim.generate import device_info, simulate, simulated
from roofs.sim.machines import MACHINES, call_seconds


@pytest.fixture(scope="module")
def h200(tmp_path_factory):
    """Return a finished simulated H200 run with its extras (1 s windows, six counted points)."""
    d = write_run(tmp_path_factory.mktemp("x") / "h200", "h200", "gpu", 1, extras=True)
    assert finish_run(d, charts=False) == []
    return d


def _roofs(d) -> dict:
    return {r["name"]: r for r in json.loads((d / "roofs.json").read_text())["roofs"] if r.get("source") == "measured"}


def test_the_default_run_is_the_sweep_alone_and_the_extras_leave_its_rows_as_they_were(h200, tmp_path):
    rows, _, samples = simulate("h200", "gpu", 1)
    assert set(rows["family"]) == {"stream", "probe", "fma", "gemm"} and set(rows["mode"]) == {"warm", "cold"}
    assert rows["clock_mhz"].isna().all() and rows["power_w"].isna().all() and rows["joules"].isna().all()
    plain = write_run(tmp_path / "plain", "h200", "gpu", 1)
    meta = json.loads((plain / "run.json").read_text())
    assert "sustain" not in meta and "counters" not in meta and not (plain / "counters.csv").exists()
    assert "extras" not in meta["simulated"]
    assert pd.read_csv(plain / "measurements.csv")["point_id"].tolist() == rows["point_id"].tolist()
    # with extras the sweep's rows come first, each with the same samples (the extras draw from a
    # stream of their own): only their telemetry is added
    run = load_run(h200)
    sweep = run.measurements.iloc[:len(rows)]
    assert sweep["point_id"].tolist() == rows["point_id"].tolist()
    assert np.allclose(sweep["median_ms"].to_numpy(float), rows["median_ms"].to_numpy(float), rtol=0, atol=0)
    assert [p["samples_s"] for p in run.points[:len(rows)]] == [samples[i] for i in rows["point_id"]]
    assert sweep["clock_mhz"].eq(MACHINES["h200"].clock_mhz).all() and sweep["joules"].isna().all()
    rest = run.measurements.iloc[len(rows):]
    assert set(rest["family"] + "/" + rest["mode"]) >= {"transfer/warm", "stream/sustained", "gemm/sustained"}


def test_a_host_copy_takes_the_links_latency_and_bytes_at_its_rate_and_sets_the_link_roof(h200):
    m = MACHINES["h200"]
    t = call_seconds(m, "transfer.h2d", "transfer", "transfer.h2d/torch", "torch", {"memory": "pinned"}, 2**30,
                     2**30, 0, "warm")
    assert t == pytest.approx(8e-6 + 2**30 / 53e9, rel=1e-12)
    run = load_run(h200)
    samples = {str(p.get("point_id")): p.get("samples_s") or [] for p in (run.points or [])}
    links = {r.name: r.value for r in link_roofs(rated(run.measurements, samples))}
    assert set(links) == {f"host.{d}.{k}" for d in ("h2d", "d2h") for k in ("pinned", "pageable")}
    for name, value in links.items():
        _, d, kind = name.split(".")
        rate = m.link.rate[(d, kind)]
        assert rate * (1 - DEFAULT.target_halfwidth) <= value <= rate   # noise only slows a copy
    assert _roofs(h200)["host.h2d.pinned"]["value"] == pytest.approx(links["host.h2d.pinned"])


def test_a_sustained_window_runs_at_the_sustained_clock_on_chip_and_a_share_of_the_rate_off_chip(h200):
    m = MACHINES["h200"]
    sus = [x for x in simulated("h200", "gpu", 1)]
    gemm = next(x for x in sus if x.family == "gemm" and x.mode == "warm")
    warm = call_seconds(m, gemm.op, gemm.family, gemm.impl, gemm.backend, gemm.point, gemm.working_set_bytes,
                        gemm.bytes, gemm.flops, "warm")
    assert busy_share(m, gemm) == 1.0
    assert sustained_seconds(m, gemm, 1.0) == pytest.approx(warm * 1980 / 1935, rel=1e-12)
    read = next(x for x in sus if x.op == "stream.read" and x.working_set_bytes == 2**28 and x.impl.endswith("torch"))
    t = 2**28 / 4300e9 + 1e-6    # its bytes at HBM (L2 serves (23 / 256) ** 4 of them: nothing) and torch's call
    busy = 1e-6 / t
    clock = 1980 - (1980 - 1935) * busy
    assert busy_share(m, read) == pytest.approx(busy, rel=5e-3)   # and the L2 share's time, on chip too
    assert sustained_seconds(m, read, 1.0) == pytest.approx(t * (busy * 1980 / clock + (1 - busy) / 0.99), rel=1e-3)
    df = load_run(h200).measurements
    windows = df[df["mode"] == "sustained"]
    assert (windows["stop"] == "window").all() and (windows["samples"] >= DEFAULT.min_samples).all()
    assert (windows["median_ms"] * 1e-3 * windows["samples"] * windows["reps"] >= 0.99).all()   # each spans 1 s
    assert windows.loc[windows["family"] == "gemm", "clock_mhz"].eq(1935).all()


def test_energy_is_the_windows_power_times_its_time_and_only_past_the_sensors_period(h200, tmp_path):
    m = MACHINES["h200"]
    b = m.board
    df = load_run(h200).measurements
    windows = df[df["mode"] == "sustained"]
    assert windows["joules"].notna().all()
    # the runner's joules per call: energy over the window (mean instant power x window) x median time
    assert np.allclose(windows["joules"], windows["power_w"] * windows["median_ms"] * 1e-3, rtol=1e-9)
    hbm = windows[(windows["family"] == "stream") & (windows["boundary"] == "hbm")]
    assert len(hbm) >= 1
    # an HBM read: static power, and 45 pJ per byte at its rate
    assert np.allclose(hbm["power_w"], b.static_w + b.e_byte_pj["hbm"] * 1e-12 * hbm["gbps"] * 1e9, rtol=0.01)
    bf16 = windows[(windows["family"] == "gemm") & (windows["dtype"] == "bf16")]
    # a bf16 GEMM: 0.3 pJ per FLOP, and its A, B and C from HBM (8192-square: L2 holds none of them)
    assert len(bf16) >= 1 and np.allclose(
        bf16["power_w"], b.static_w + (0.3 * bf16["gflops"] + 45 * bf16["gbps"]) * 1e-3, rtol=0.01)
    # a quick window (0.25 s) is shorter than NVML's 1 s period: no energy; amdsmi's counter has no period
    quick = write_run(tmp_path / "quick", "h200", "gpu", 1, extras=True, window_s=0.25, counters=0)
    q = pd.read_csv(quick / "measurements.csv")
    assert q.loc[q["mode"] == "sustained", "joules"].isna().all() and q["power_w"].notna().all()
    amd = write_run(tmp_path / "amd", "mi300x", "gpu", 1, extras=True, window_s=0.25, counters=0)
    a = pd.read_csv(amd / "measurements.csv")
    assert a.loc[a["mode"] == "sustained", "joules"].gt(0).all()
    assert "counters" not in json.loads((quick / "run.json").read_text())


@pytest.mark.slow   # two more simulated runs written and derived whole (seconds)
def test_counters_agreeing_confirm_the_hbm_roof_and_counting_other_bytes_dispute_it(h200, tmp_path):
    counted = load_counters(h200)
    assert len(counted) == 6 and (counted["status"] == "ok").all() and (counted["flag"] == "").all()
    hbm = _roofs(h200)["hbm"]["confirmation"]
    check = next(c for c in hbm["checks"] if c["kind"] == "counters")
    assert check["agrees"] and abs(check["ratio"] - 1) < 0.02 and "hbm" in counted_for(
        counted.loc[counted["point_id"] == check["point_id"], "chosen_as"].iloc[0])
    assert hbm["status"] == "confirmed"
    more = write_run(tmp_path / "more", "h200", "gpu", 1, extras=True, dram_ratio=1.3)
    assert finish_run(more, charts=False) == []
    assert (load_counters(more)["dram_ratio"] > 1.25).all() and (load_counters(more)["flag"] != "").all()
    check = next(c for c in _roofs(more)["hbm"]["confirmation"]["checks"] if c["kind"] == "counters")
    assert not check["agrees"] and check["value"] == pytest.approx(_roofs(more)["hbm"]["value"] * check["ratio"])
    # an AMD GPU has no counters: no counters.csv, and run.json's "counters" says why (no point counted)
    amd = write_run(tmp_path / "amd", "mi300x", "gpu", 1, extras=True)
    info = json.loads((amd / "run.json").read_text())["counters"]
    assert not (amd / "counters.csv").exists() and info["points"] == 0 and info["why"]


def test_counters_for_a_roof_read_its_own_point_else_the_point_replayed_for_it():
    assert counted_for("l2+hbm roof, stream's fastest point") == {"l2", "hbm"}
    assert counted_for("stream's fastest point") == set() and counted_for(None) == set()
    roof = Roof("bandwidth", "hbm", 100.0, "GB/s", op="stream.read", impl="stream.read/torch", point_id="own",
                working_set_bytes=2**28, interval=(100.0, 104.0), plateau_bytes=(2**26, 2**28), source="measured")
    rows = pd.DataFrame({"point_id": ["own"], "op": ["stream.read"], "impl": ["stream.read/torch"],
                         "backend": ["torch"], "family": ["stream"], "dtype": ["float32"], "mode": ["warm"],
                         "working_set_bytes": [2**28], "status": ["ok"], "gbps": [100.0], "rate": [100.0]})
    counters = pd.DataFrame({"point_id": ["other"], "op": ["stream.reread"], "impl": ["stream.reread/triton"],
                             "status": ["ok"], "dram_ratio": [1.25], "chosen_as": ["hbm roof"]})
    device = {"kind": "cuda", "caches": [{"name": "l2", "total_bytes": 2**25}]}
    (out,), _ = confirm([roof], rows, rows, device, counters)
    check = next(c for c in out.confirmation["checks"] if c["kind"] == "counters")
    assert check["point_id"] == "other" and check["ratio"] == 1.25 and not check["agrees"]
    assert check["value"] == pytest.approx(125.0) and out.confirmation["status"] == "disputed"


def test_the_extras_choose_the_windows_and_counted_points_by_the_runners_own_rules():
    # roofs.sim sits above bench.run in the layers: its restatement of the two phases' choices
    # must pick what bench.run.sustain_phase.candidates and counters_phase.choose pick
    m = MACHINES["h200"]
    sweep = simulated("h200", "gpu", 2)
    dev = device_info(m)
    assert roof_candidates(sweep, m, 2) == sustain_phase.candidates(sweep, dev, 2)
    ours, theirs = counted_points(sweep, m, 6), counters_phase.choose(sweep, dev, 6)
    assert ours == theirs and len(ours) == 6
    assert [extras.formula_of(x, w) for w, x in ours] == [counters_phase.formula_of(x, w) for w, x in theirs]
    assert (extras.DEFAULT_POINTS, extras.IDLE_MIN_S) == (counters_phase.DEFAULT_POINTS, sustain_phase.IDLE_MIN_S)
