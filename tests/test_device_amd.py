"""The AMD device path and the NVML board state, on a CPU: torch's device properties, amdsmi
and NVML are faked, and what DeviceInfo, run.json's device record and the telemetry make of
them is checked field by field."""
import sys
from types import SimpleNamespace

import pytest
import torch

from bench.hw import amd, detect, nvidia
from bench.hw.device import DeviceInfo
from roofs.analysis import specs

MI300X = SimpleNamespace(name="AMD Instinct MI300X", total_memory=205_822_885_888, multi_processor_count=304,
                         gcnArchName="gfx942:sramecc+:xnack-", L2_cache_size=4 * 2**20, shared_memory_per_block=65536,
                         major=9, minor=4, warp_size=64, clock_rate=2_100_000)


class FakeAmdSmi:
    """The slice of amdsmi's API the suite calls, with fixed readings."""
    AmdSmiClkType = SimpleNamespace(GFX="gfx", MEM="mem")
    AmdSmiTemperatureType = SimpleNamespace(HOTSPOT="hotspot")
    AmdSmiTemperatureMetric = SimpleNamespace(CURRENT="current")

    def __init__(self):
        self.energy = 1000

    def amdsmi_init(self):
        pass

    def amdsmi_shut_down(self):
        pass

    def amdsmi_get_processor_handles(self):
        return ["h0", "h1"]

    def amdsmi_get_gpu_driver_info(self, h):
        return {"driver_version": "6.8.5"}

    def amdsmi_get_clock_info(self, h, kind):
        return {"gfx": {"clk": 2005, "max_clk": 2100}, "mem": {"clk": 1300, "max_clk": 1300}}[kind]

    def amdsmi_get_power_cap_info(self, h):
        return {"power_cap": 750_000_000}          # microwatts

    def amdsmi_get_gpu_cache_info(self, h):
        return {"cache": [{"cache_level": 1, "cache_size": 32}, {"cache_level": 2, "cache_size": 4096},
                          {"cache_level": 3, "cache_size": 262144}]}

    def amdsmi_get_power_info(self, h):
        return {"current_socket_power": "N/A", "average_socket_power": 612}

    def amdsmi_get_temp_metric(self, h, kind, metric):
        return 71

    def amdsmi_get_energy_count(self, h):
        self.energy += 500_000                    # 500,000 counts x 15.3 uJ = 7.65 J per read
        return {"energy_accumulator": self.energy, "counter_resolution": 15.3}


def test_mi300x_from_torch_properties_alone():
    info = amd.amd_info(0, props=MI300X, smi={})
    assert (info.kind, info.vendor, info.torch_device, info.compute_unit_kind) == ("cuda", "amd", "cuda:0", "CUs")
    assert info.compute_units == 304 and info.compute_capability == "9.4" and info.extra["gfx"] == "gfx942"
    # L2: 4 MiB per XCD, 304 / 38 = 8 XCDs; the Infinity Cache as level l3, from the datasheet
    assert [(c.name, c.size_bytes, c.instances) for c in info.caches] == [("l2", 4 * 2**20, 8), ("l3", 256 * 2**20, 1)]
    assert "datasheet" in info.extra["l3_source"] and info.extra["l3_name"] == "Infinity Cache (MALL)"
    assert info.llc_bytes == 256 * 2**20 and info.memory_level == "hbm"
    assert info.max_clock_mhz == 2100 and info.extra["lds_bytes"] == 65536
    # run.json's record matches the MI300X datasheet entry by name, CUs and memory
    assert specs.match(info.to_dict()).part == "AMD Instinct MI300X"


def test_amdsmi_fields_and_caches(monkeypatch):
    monkeypatch.setitem(sys.modules, "amdsmi", FakeAmdSmi())
    smi = amd.amdsmi_info(0)
    assert smi["driver"] == "6.8.5" and smi["max_sm_clock_mhz"] == 2100 and smi["power_limit_w"] == 750.0
    assert smi["caches"] == {1: 32 * 1024, 2: 4 * 2**20, 3: 256 * 2**20}
    info = amd.amd_info(0, props=MI300X, smi=smi)
    assert info.extra["l3_source"] == "amdsmi" and info.software["driver"] == "6.8.5"
    monkeypatch.setitem(sys.modules, "amdsmi", None)      # not installed
    assert amd.amdsmi_info(0) == {}


def test_rocm_torch_takes_the_amd_path(monkeypatch):
    monkeypatch.setattr(torch.version, "hip", "6.2.41133", raising=False)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: MI300X)
    monkeypatch.setattr(amd, "amdsmi_info", lambda i: {})
    info = detect.gpu_info(0)
    assert info.vendor == "amd" and info.name == "AMD Instinct MI300X" and info.software["hip_runtime"] == "6.2.41133"
    # the tuner models an AMD GPU as sm_80 (register-fed MFMA, num_stages - 1 LDS buffers)
    # and, where torch reports no opt-in limit, takes the gfx target's LDS
    from bench.ops import _tune
    assert _tune.compute_capability(SimpleNamespace(device=info)) == _tune.AMD_MODEL_CC == 80
    assert _tune.smem_limit("cuda:0") == 65536


def test_amd_telemetry_through_amdsmi_never_nvml(monkeypatch):
    fake = FakeAmdSmi()
    monkeypatch.setitem(sys.modules, "amdsmi", fake)
    monkeypatch.setitem(sys.modules, "pynvml", None)      # NVML must not be needed
    gpu = DeviceInfo("cuda", "cuda:1", "AMD Instinct MI300X", 2**37, 304, "CUs", (), vendor="amd")
    src = detect.make_source(gpu)
    assert src.name == "amdsmi" and src.h == "h1"
    assert src.read() == {"clock_mhz": 2005, "mem_clock_mhz": 1300, "power_w": 612.0, "temp_c": 71}
    e0, e1 = src.energy_j(), src.energy_j()
    assert e1 - e0 == pytest.approx(500_000 * 15.3 / 1e6)  # 7.65 J between two reads
    monkeypatch.setitem(sys.modules, "amdsmi", None)
    src = detect.make_source(gpu)
    assert src.name == "none" and "amdsmi unavailable" in src.note and "NVML" not in src.note


class FakeNvml:
    NVML_CLOCK_SM, NVML_CLOCK_MEM = 0, 1

    def nvmlInit(self):
        pass

    def nvmlShutdown(self):
        pass

    def nvmlDeviceGetHandleByIndex(self, i):
        return "h"

    def nvmlDeviceGetHandleByUUID(self, u):
        return "h"

    def nvmlSystemGetDriverVersion(self):
        return "570.86"

    def nvmlDeviceGetMaxClockInfo(self, h, kind):
        return (1980, 3201)[kind]

    def nvmlDeviceGetEccMode(self, h):
        return (1, 1)

    def nvmlDeviceGetPersistenceMode(self, h):
        return 1

    def nvmlDeviceGetMigMode(self, h):
        raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h):
        return 5

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h):
        return 5

    def nvmlDeviceGetCurrPcieLinkWidth(self, h):
        return 8

    def nvmlDeviceGetMaxPcieLinkWidth(self, h):
        return 16

    def nvmlDeviceGetApplicationsClock(self, h, kind):
        return (1980, 3201)[kind]

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        return 700_000

    def nvmlDeviceGetPowerManagementDefaultLimit(self, h):
        return 700_000


def test_nvml_board_state_each_field_guarded(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml())
    out = nvidia.nvml_info(0, "GPU-1234")
    assert out["driver"] == "570.86" and out["max_sm_clock_mhz"] == 1980 and out["power_limit_w"] == 700.0
    assert out["state"] == {"ecc_mode": {"current": True, "pending": True}, "persistence_mode": True,
                            "mig_mode": None,   # this board does not support MIG: None, not a crash
                            "pcie_gen": 5, "pcie_gen_max": 5, "pcie_width": 8, "pcie_width_max": 16,
                            "app_sm_clock_mhz": 1980, "app_mem_clock_mhz": 3201,
                            "power_limit_w": 700.0, "default_power_limit_w": 700.0}
    monkeypatch.setitem(sys.modules, "pynvml", None)
    assert nvidia.nvml_info(0) == {}


def test_nvidia_device_record_carries_the_board_state(monkeypatch):
    props = SimpleNamespace(name="NVIDIA H200", total_memory=150_000_000_000, multi_processor_count=132,
                            L2_cache_size=60 * 2**20, major=9, minor=0, clock_rate=1_980_000, uuid="1234")
    monkeypatch.setattr(torch.version, "hip", None, raising=False)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: props)
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml())
    record = detect.gpu_info(0).to_dict()          # what run.json's "device" holds
    assert record["vendor"] == "nvidia" and record["extra"]["nvml"] is True
    state = record["extra"]["state"]
    assert (state["pcie_gen"], state["pcie_width"], state["pcie_width_max"]) == (5, 8, 16)
    assert state["ecc_mode"]["current"] is True and state["persistence_mode"] is True and state["mig_mode"] is None
