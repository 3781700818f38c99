"""A CPU's clock is measured (a dependent add chain, bench/hw/clock.py) or labelled with where it
came from; computed peaks use the clock they name; a unit far below its computed rate is a
finding about its path (reason code specs.PATH_BELOW), never an implied clock."""
from pathlib import Path

import pandas as pd
import pytest

from bench.hw import clock as clk
from bench.hw.device import cpu_info
from roofs.analysis import specs
from roofs.reports.clocks import below_reference, clock_is_observed, clock_line
from tests.test_cpu_cores import unpack

ROOT = Path(__file__).resolve().parent.parent


def test_clock_from_a_synthetic_timing_hand_worked():
    # 2^19 iterations of 64 one-cycle adds: 33,554,432 cycles more in the long run than in the
    # short one; 15.5 ms - 8.0 ms = 7.5 ms, so 33,554,432 / 0.0075 s = 4,473.9 MHz (the fixed
    # 0.5 ms each run spends outside the chain cancels)
    assert clk.clock_from_timings(64, 2**19, 0.0080, 0.0155) == pytest.approx(4473.92, abs=0.01)
    assert clk.parse_output("64 524288 0.008000000 0.015500000 0\n") == pytest.approx(4473.92, abs=0.01)
    # the long run no longer than the short one: noise, no clock
    assert clk.clock_from_timings(64, 2**19, 0.0080, 0.0080) is None
    # 33.5 million cycles in 1 ms would be 33.5 GHz: a broken timing, not a clock
    assert clk.clock_from_timings(64, 2**19, 0.0080, 0.0090) is None
    assert clk.parse_output("") is None and clk.parse_output("64 x 0.1 0.2 0") is None


def test_clock_labels_measured_over_cpufreq_over_nominal():
    measured = clk.clock_record(2596.0, False, {"clock_mhz": 4481.04, "why": ""})
    assert measured["clock_mhz"] == 4481.0 and measured["clock_basis"] == clk.MEASURED
    # a failed measurement keeps the reported clock, labelled by where it came from, and why
    failed = {"clock_mhz": None, "why": "no C compiler (cc, gcc or clang) on PATH to build the add chain"}
    cpufreq = clk.clock_record(3529.0, True, failed)
    assert (cpufreq["clock_mhz"], cpufreq["clock_basis"]) == (3529.0, clk.CPUFREQ)
    assert cpufreq["clock_not_measured"] == failed["why"]
    assert clk.clock_record(2596.0, False, failed)["clock_basis"] == clk.NOMINAL
    assert clk.clock_record(2596.0, False, None)["clock_basis"] == clk.NOMINAL


def test_no_compiler_leaves_the_clock_nominal(monkeypatch, tmp_path):
    monkeypatch.setattr(clk.shutil, "which", lambda name: None)
    monkeypatch.delenv("CC", raising=False)
    assert clk.measure_clock(2)["clock_mhz"] is None
    info = cpu_info(*unpack("zen4-epyc-vm.txt", tmp_path))
    from bench.hw.device import with_measured_clock
    device = with_measured_clock(info).to_dict()
    assert specs.cpu_clock(device) == (2596.15, clk.NOMINAL) and device["extra"]["clock_not_measured"]


@pytest.mark.skipif(clk.compiler() is None, reason="no C compiler on this machine")
def test_the_add_chain_measures_a_clock_here():
    got = clk.measure_clock(1, iterations=1 << 16, reps=3)
    assert got["why"] == "" and clk.PLAUSIBLE_MHZ[0] <= got["clock_mhz"] <= clk.PLAUSIBLE_MHZ[1]


def test_computed_peaks_use_the_clock_they_name(tmp_path):
    # the 2-core Zen 4 VM reports 2,596 MHz (nominal); its cores measured 4,481
    device = cpu_info(*unpack("zen4-epyc-vm.txt", tmp_path)).to_dict()
    nominal = {r.name: r for r in specs.computed_cpu_roofs(device) if r.kind == "compute"}
    device["extra"].update(clk.clock_record(device["max_clock_mhz"], False, {"clock_mhz": 4481.0, "why": ""}))
    assert specs.cpu_clock(device) == (4481.0, clk.MEASURED)
    roofs = {r.name: r for r in specs.computed_cpu_roofs(device) if r.kind == "compute"}
    # fp32: 2 cores x 4.481 GHz x 32 per clock = 286.8 GFLOP/s (at the nominal clock: 166.2)
    assert roofs["fp32"].value == pytest.approx(2 * 4.481 * 32)
    assert nominal["fp32"].value == pytest.approx(2 * 2.59615 * 32)
    assert roofs["fp32"].extra["clock_basis"] == clk.MEASURED and f"({clk.MEASURED})" in roofs["fp32"].note
    assert specs.reference_label(roofs["fp32"]) == f"computed at 4,481 MHz ({clk.MEASURED})"
    assert specs.reference_label(nominal["fp32"]) == "computed at 2,596 MHz (nominal)"
    # the 121% of the nominal peak is 70% of the measured one: 1.21 x 2,596.15 / 4,481
    assert 1.21 * nominal["fp32"].value / roofs["fp32"].value == pytest.approx(0.701, abs=0.001)
    # the report's clock line names the measured clock, not the nominal one
    assert "4,481 MHz" in clock_line(device) and "2,596" not in clock_line(device)


def test_a_nominal_cpu_clock_is_not_observed():
    assert not clock_is_observed({"kind": "cpu", "extra": {"clock_source": "/proc/cpuinfo current MHz"}})
    assert clock_is_observed({"kind": "cpu", "extra": {"clock_source": "cpufreq max"}})
    assert clock_is_observed({"kind": "cuda", "extra": {}})


def test_a_unit_at_40_percent_of_its_computed_rate_is_a_path_finding_not_a_clock(tmp_path):
    # the Sapphire Rapids VM: 1 core at 2,400 MHz (nominal) x 2,048 int8 per clock (AMX)
    # = 4,915.2 GOP/s computed; int8 measured at 1,966 GOP/s is 40% of it
    device = cpu_info(*unpack("xeon-spr-amx.txt", tmp_path)).to_dict()
    int8 = next(r for r in specs.computed_cpu_roofs(device) if r.name == "int8")
    assert int8.value == pytest.approx(4915.2)
    measured = 0.4 * int8.value
    # before: "implies 960 MHz" (2,400 x 0.4); a rate below its units' implies no clock
    assert specs.implied_clock_mhz(measured, int8) is None
    assert specs.implied_clock_mhz(1.2 * int8.value, int8) == pytest.approx(2880.0)   # above: the clock it needs
    row = {"ceiling": "int8", "unit": "GOP/s", "measured": measured, "reference": int8.value,
           "reference source": specs.reference_label(int8), "% of reference": 40.0, "measured by": "torch int8"}
    found = below_reference(row)
    assert found["code"] == specs.PATH_BELOW and found["share"] == pytest.approx(0.4)
    # at 60% of its rate, or a bandwidth roof at 40%: no such finding
    assert below_reference({**row, "measured": 0.6 * int8.value, "% of reference": 60.0}) is None
    assert below_reference({**row, "unit": "GB/s"}) is None
    assert below_reference({**row, "% of reference": None}) is None


def test_a_nominal_vm_run_validates_at_no_observed_clock_and_dram_against_no_cache_roof():
    from bench.results import load_run
    from roofs.reports.report import observed_clock, validation
    run = load_run(ROOT / "results" / "cpu-amd-epyc-20261201T103023Z")  # a 2-core Zen 4 VM without cpufreq
    table = validation(run)[0].set_index("ceiling")
    fp32 = next(r for r in run.roofs if r["name"] == "fp32" and r["source"] == "measured")
    # its rows recorded /proc/cpuinfo's 2,596 MHz, the nominal figure: no clock correction uses it
    assert observed_clock(run.measurements, fp32["point_id"]) == pytest.approx(2596.15, abs=1)
    assert table.loc["fp32", "clock MHz"] is None and table.loc["fp32", "at observed clock"] is None
    assert table.loc["fp32", "reference source"] == "computed at 2,596 MHz (nominal)"
    # the L1's computed load ports (2 cores x 2,596.15 MHz x 64 bytes = 332.3 GB/s) stand for l1, not DRAM
    assert table.loc["l1", "reference"] == pytest.approx(2 * 2.59615 * 64, rel=1e-4)
    assert pd.isna(table.loc["dram", "reference"])
