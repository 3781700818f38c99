"""Telemetry: the NVML sampler without NVML, summaries of synthetic samples, RAPL wrap-around."""
import sys

import pytest

from bench.hw import detect, nvidia
from bench.hw import telemetry as tm
from bench.hw.device import DeviceInfo

GPU = DeviceInfo("cuda", "cuda:0", "NVIDIA H200", 2**37, 132, "SMs", ())


def test_nvml_absent_leaves_fields_empty_and_says_why(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails as if the package were missing
    src = detect.make_source(GPU)
    assert src.name == "none" and "NVML unavailable" in src.note and "nvidia-ml-py" in src.note
    s = tm.Sampler(src).start().stop()
    assert s["energy_j"] is None and s["clock_mhz"] is None and s["power_w"] is None
    assert s["throttled"] is False and s["note"] == src.note


def test_nvml_without_a_driver_is_a_note_not_a_crash():
    pytest.importorskip("pynvml")
    src = detect.make_source(GPU)  # no NVIDIA driver here: nvmlInit fails
    assert src.name in ("none", "nvml")


def test_summary_of_synthetic_samples():
    samples = [{"clock_mhz": 1800, "power_w": 100.0, "temp_c": 60, "reasons": 0x1},
               {"clock_mhz": 1600, "power_w": 200.0, "temp_c": 70, "reasons": 0x4 | 0x2}]
    s = tm.summarize(samples, window_s=2.0, e0=None, e1=None, source="nvml")
    assert s["clock_mhz"] == 1700 and s["clock_min_mhz"] == 1600
    assert s["power_w"] == 150 and s["power_max_w"] == 200 and s["temp_max_c"] == 70
    assert s["energy_j"] == 300.0                         # mean power x window without a counter
    assert s["throttled"] and s["throttle_reasons"] == ["sw_power_cap"]  # applications clocks are benign
    assert tm.summarize(samples, 2.0, 10.0, 40.0)["energy_j"] == 30.0     # the counter wins


def test_rapl_counter_wraps(tmp_path):
    zone = tmp_path / "intel-rapl:0"
    zone.mkdir()
    (zone / "max_energy_range_uj").write_text("1000000")
    (zone / "energy_uj").write_text("900000")
    src = tm.CpuSource(tmp_path)
    assert src.energy_j() == 0.0
    (zone / "energy_uj").write_text("100000")            # wrapped: 0.1 J to the top, 0.1 J after
    assert src.energy_j() == pytest.approx(0.2)


def test_cpu_source_without_powercap(tmp_path):
    src = tm.CpuSource(tmp_path / "none")
    assert src.energy_j() is None and "RAPL" in src.note
    s = tm.Sampler(src).start().stop()
    assert s["source"] == "cpu" and s["samples"] == 2 and (s["clock_mhz"] is None or s["clock_mhz"] > 0)


def test_a_counter_that_did_not_move_is_missing_not_zero():
    # a 0.1 s window can see no update of the energy counter: that measured nothing
    assert tm.summarize([{"clock_mhz": 1800}], 0.1, 55.0, 55.0)["energy_j"] is None
    # with power readings, mean power x window stands in
    assert tm.summarize([{"power_w": 300.0}], 0.1, 55.0, 55.0)["energy_j"] == pytest.approx(30.0)


class _FakeSource(tm.Source):
    name = "fake"

    def __init__(self):
        self.energy = 0.0

    def read(self):
        return {"power_w": 100.0}

    def energy_j(self):
        return self.energy


def test_sampler_reads_energy_around_the_timed_samples_only():
    src = _FakeSource()
    s = tm.Sampler(src, energy=True).start()
    src.energy = 50.0          # warm-up and graph capture: not counted
    s.window("start")
    src.energy = 80.0          # the timed samples
    s.window("stop")
    src.energy = 95.0          # after the samples: not counted
    out = s.stop()
    assert out["energy_j"] == 30.0 and out["window_s"] >= 0


def test_nvml_is_found_by_uuid_first():
    class NV:
        def nvmlDeviceGetHandleByUUID(self, key):
            if isinstance(key, str):
                raise TypeError("bytes wanted")
            return ("uuid", key)

        def nvmlDeviceGetHandleByIndex(self, i):
            return ("index", i)
    assert nvidia.nvml_handle(NV(), 0, "GPU-abc") == ("uuid", b"GPU-abc")
    assert nvidia.nvml_handle(NV(), 3, None) == ("index", 3)


def test_sweep_samplers_carry_no_energy():
    src = _FakeSource()
    s = tm.Sampler(src).start()
    s.window("start")
    src.energy = 80.0
    s.window("stop")
    out = s.stop()
    assert out["energy_j"] is None and out["energy_note"].code == tm.NOT_SUSTAINED
    assert out["power_w"] == 100.0                       # power is still read


def test_a_window_shorter_than_the_sensor_period_carries_no_energy():
    power = [{"power_w": 300.0}] * 20
    short = tm.summarize(power, 0.5, 10.0, 200.0, power_kind="instant", energy_period_s=1.0)
    assert short["energy_j"] is None and short["energy_note"].code == tm.SHORTER_THAN_PERIOD
    # 20 instant readings of 300 W over 2 s: 600 J, preferred to the counter's 190 J
    long = tm.summarize(power, 2.0, 10.0, 200.0, power_kind="instant", energy_period_s=1.0)
    assert long["energy_j"] == pytest.approx(600.0) and long["energy_from"] == tm.FROM_INSTANT
    # a 1 s average: the counter wins, then mean power x window
    avg = tm.summarize(power, 2.0, 10.0, 200.0, power_kind="average_1s", energy_period_s=1.0)
    assert avg["energy_j"] == pytest.approx(190.0) and avg["energy_from"] == tm.FROM_COUNTER
    assert tm.summarize(power[:3], 2.0, None, None, power_kind="instant", energy_period_s=1.0)["energy_from"] == \
        tm.FROM_MEAN                                    # too few instant readings to integrate


class _Field:
    def __init__(self, mw, ret=0):
        self.nvmlReturn = ret
        self.value = type("V", (), {"uiVal": mw})()


class FakeNvml:
    """A stand-in for the pynvml module: one GPU drawing 412.5 W now (instant field) and 380 W
    averaged over the last second; a 700 W enforced limit."""
    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0
    NVML_FI_DEV_POWER_INSTANT = 186

    def __init__(self, instant=True):
        self.instant = instant
        self.fields_asked = []

    def nvmlInit(self):
        pass

    def nvmlDeviceGetHandleByIndex(self, i):
        return ("gpu", i)

    def nvmlDeviceGetFieldValues(self, h, ids):
        self.fields_asked.append(tuple(ids))
        return [_Field(412_500 if self.instant else 0, 0 if self.instant else 2) for _ in ids]

    def nvmlDeviceGetPowerUsage(self, h):
        return 380_000

    def nvmlDeviceGetClockInfo(self, h, which):
        return 1980 if which == 1 else 2619

    def nvmlDeviceGetTemperature(self, h, which):
        return 61

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h):
        return 0

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        return 5_000_000

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        return 700_000


@pytest.mark.parametrize("instant", [True, False])
def test_nvml_reads_instant_power_where_the_driver_has_it(monkeypatch, instant):
    fake = FakeNvml(instant)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    src = detect.make_source(GPU)
    assert src.name == "nvml" and src.energy_period_s == 1.0 and src.power_limit_w() == 700.0
    r = src.read()
    assert (186,) in fake.fields_asked and r["clock_mhz"] == 1980 and r["temp_c"] == 61
    if instant:
        assert src.power_kind == "instant" and r["power_w"] == 412.5
    else:  # the field is refused: the 1 s average, labelled
        assert src.power_kind == "average_1s" and r["power_w"] == 380.0 and "1 s average" in src.note
