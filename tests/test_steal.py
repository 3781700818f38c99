"""A VM's steal time (/proc/stat's 8th value) is read apart from other processes' load, flagged
under its own prefix (bench.results.STEAL_PREFIX), and a steal-flagged row counts toward
nothing, as a busy-flagged one does (bench.results.usable: one rule)."""
import pandas as pd
import pytest

from bench.hw.telemetry import load_shares
from bench.measure.runner import busy_flag, steal_flag
from bench.results import BUSY_PREFIX, STEAL_PREFIX, is_runner_flag, usable
from bench.util import CLOCK_TICKS, cpu_times

# two hand-made /proc/stat snapshots of a 2-core VM 1 s apart (USER_HZ ticks):
#        user nice system idle iowait irq softirq steal guest guest_nice
BEFORE = ("cpu  1000 0 500 90000 20 0 10 300 0 0\n"
          "cpu0 500 0 250 45000 10 0 5 150 0 0\ncpu1 500 0 250 45000 10 0 5 150 0 0\nintr 1 2 3\n")
# over the second: 20 user, 10 system, 5 softirq ticks (35 busy), 104 stolen, 61 idle (2 cores x 100 ticks)
AFTER = ("cpu  1020 0 510 90061 20 0 15 404 0 0\n"
         "cpu0 510 0 255 45030 10 0 7 202 0 0\ncpu1 510 0 255 45031 10 0 8 202 0 0\n")


def test_steal_is_read_apart_from_busy():
    busy, steal = cpu_times(BEFORE)
    assert busy == pytest.approx((1000 + 500 + 10) / CLOCK_TICKS)   # user + system + softirq
    assert steal == pytest.approx(300 / CLOCK_TICKS)                   # the 8th value alone
    # guest and guest_nice are inside user and nice already: not counted twice
    assert cpu_times("cpu  100 0 0 0 0 0 0 0 40 0\n") == (pytest.approx(100 / CLOCK_TICKS), 0.0)
    # a line without steal (kernels before 2.6.11): none stolen; no cpu line: nothing to read
    assert cpu_times("cpu  100 5 50 900 0 1 2\n") == (pytest.approx(158 / CLOCK_TICKS), 0.0)
    assert cpu_times("intr 1 2\n") is None and cpu_times("") is None


def test_load_shares_of_two_snapshots_split_steal_from_other_processes():
    (b0, s0), (b1, s1) = cpu_times(BEFORE), cpu_times(AFTER)
    own = 20 / CLOCK_TICKS  # this process ran 20 of the 35 busy ticks
    shares = load_shares((0.0, b0, s0, 0.0), (1.0, b1, s1, own), cores=2)
    # 35 busy ticks less its own 20: 15 ticks = 0.15 core of 2; 104 stolen ticks = 1.04 cores of 2
    if CLOCK_TICKS == 100:
        assert shares["others_cpu"] == pytest.approx(0.075)
        assert shares["steal_cpu"] == pytest.approx(0.52)
    assert shares["steal_cpu"] == pytest.approx(104 / CLOCK_TICKS / 2)
    # before the fix steal counted as busy: the same snapshots read (35 + 104 - 20) ticks of others
    assert shares["others_cpu"] == pytest.approx((35 - 20) / CLOCK_TICKS / 2)
    assert load_shares((0.0, b0, s0, 0.0), (0.01, b1, s1, own), cores=2) == {"others_cpu": None, "steal_cpu": None}


CPU = type("Dev", (), {"kind": "cpu", "compute_units": 2})()
GPU = type("Dev", (), {"kind": "cuda", "compute_units": 132})()


def test_steal_gets_its_own_flag_not_the_busy_one():
    # the row: 52% of 2 cores stolen, nothing else running
    tel = {"others_cpu": 0.01, "steal_cpu": 0.52, "load1": 1.0}
    assert busy_flag(tel, CPU) == ""
    flag = steal_flag(tel, CPU)
    assert flag.startswith(STEAL_PREFIX) and not flag.startswith(BUSY_PREFIX) and "52%" in flag
    assert steal_flag({"steal_cpu": 0.2}, CPU) == ""                    # at the share: not flagged
    assert steal_flag({"steal_cpu": 0.9}, GPU) == "" and steal_flag({"steal_cpu": None}, CPU) == ""


def test_a_steal_flagged_row_counts_toward_nothing_as_a_busy_one():
    rows = pd.DataFrame({"status": ["ok"] * 4, "samples": [20] * 4,
                         "flag": ["", f"{STEAL_PREFIX}: 52%", f"{BUSY_PREFIX}: 60%",
                                  f"time jumped: 12x; {STEAL_PREFIX}: 30%"]})
    assert list(rows["flag"].map(is_runner_flag)) == [False, True, True, True]
    assert list(usable(rows)) == [True, False, False, False]
