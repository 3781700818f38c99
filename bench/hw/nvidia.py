"""NVIDIA GPUs: what the device is (torch's properties, NVML's board state) and the NVML
telemetry source. NVML comes from the optional nvidia-ml-py package (`pip install
'.[gpu]'`); without it the fields stay empty and the source's note says why, so a number
is never guessed. The device is found by its UUID, so the right GPU is read under
CUDA_VISIBLE_DEVICES.
"""
from __future__ import annotations

import torch

from bench.hw.device import CacheLevel, DeviceInfo, pci_of, software_versions
from bench.hw.telemetry import NVML_FI_DEV_POWER_INSTANT, NVML_PERIOD_S, NVML_SUCCESS, Source


def uuid_of(props) -> str | None:
    """Return the GPU's UUID as NVML names it ("GPU-..."), or None when torch does not say."""
    u = getattr(props, "uuid", None)
    if not u:
        return None
    u = str(u)
    return u if u.startswith(("GPU-", "MIG-")) else f"GPU-{u}"


def _pci_text(value) -> str:
    """Return NVML's bus id ("00000000:3B:00.0", bytes in older bindings) as torch spells it ("0000:3b:00.0")."""
    text = value.decode() if isinstance(value, bytes) else str(value)
    rest = text.rsplit(":", 2)
    return f"{int(rest[0], 16):04x}:{rest[1].lower()}:{rest[2].lower()}" if len(rest) == 3 else text.lower()


def _pair(value) -> dict:
    """Return {"current", "pending"} of an NVML (current, pending) mode pair as booleans."""
    cur, pend = value
    return {"current": bool(cur), "pending": bool(pend)}


def nvml_state(nv, h) -> dict:
    """Return what a GPU engineer checks first, each field read on its own (None where the
    driver or the board does not say): ECC mode (current and pending), persistence mode,
    MIG mode (current and pending), the PCIe link's generation and width (current and
    max), the application clocks (SM and memory, MHz; what the driver holds the clocks to
    when set) and the power limits (enforced and default, W)."""
    fields = {
        "ecc_mode": lambda: _pair(nv.nvmlDeviceGetEccMode(h)),
        "persistence_mode": lambda: bool(nv.nvmlDeviceGetPersistenceMode(h)),
        "mig_mode": lambda: _pair(nv.nvmlDeviceGetMigMode(h)),
        "pcie_gen": lambda: nv.nvmlDeviceGetCurrPcieLinkGeneration(h),
        "pcie_gen_max": lambda: nv.nvmlDeviceGetMaxPcieLinkGeneration(h),
        "pcie_width": lambda: nv.nvmlDeviceGetCurrPcieLinkWidth(h),
        "pcie_width_max": lambda: nv.nvmlDeviceGetMaxPcieLinkWidth(h),
        "app_sm_clock_mhz": lambda: nv.nvmlDeviceGetApplicationsClock(h, nv.NVML_CLOCK_SM),
        "app_mem_clock_mhz": lambda: nv.nvmlDeviceGetApplicationsClock(h, nv.NVML_CLOCK_MEM),
        "power_limit_w": lambda: nv.nvmlDeviceGetEnforcedPowerLimit(h) / 1000,
        "default_power_limit_w": lambda: nv.nvmlDeviceGetPowerManagementDefaultLimit(h) / 1000,
    }
    out = {}
    for key, fn in fields.items():
        try:
            out[key] = fn()
        except Exception:  # not supported on this board or driver, or no permission
            out[key] = None
    return out


def nvml_info(index: int, uuid: str | None = None) -> dict:
    """Return driver version, clocks, power limit and the board's state (nvml_state)
    through NVML, or {} without it."""
    try:
        import pynvml  # optional (nvidia-ml-py): a run without it records no board state
        pynvml.nvmlInit()
    except Exception:  # package absent or no driver: the fields stay empty
        return {}
    try:
        h = nvml_handle(pynvml, index, uuid)
        out = {"driver": pynvml.nvmlSystemGetDriverVersion()}
        for key, fn in (("max_sm_clock_mhz", lambda: pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM)),
                        ("max_mem_clock_mhz", lambda: pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_MEM))):
            try:
                out[key] = fn()
            except Exception:
                out[key] = None
        try:
            out["pci_bus_id"] = _pci_text(pynvml.nvmlDeviceGetPciInfo(h).busId)
        except Exception:  # an old binding or driver: torch's properties say it instead
            out["pci_bus_id"] = None
        out["state"] = nvml_state(pynvml, h)
        out["power_limit_w"] = out["state"]["power_limit_w"]
        return out
    finally:
        pynvml.nvmlShutdown()


def nvidia_info(index: int) -> DeviceInfo:
    """Return the DeviceInfo of the NVIDIA GPU cuda:index: torch's properties and NVML's."""
    p = torch.cuda.get_device_properties(index)
    nvml = nvml_info(index, uuid_of(p))
    l2 = getattr(p, "L2_cache_size", 0) or 0
    sw = software_versions()
    sw["driver"] = nvml.get("driver")
    clock = nvml.get("max_sm_clock_mhz") or (getattr(p, "clock_rate", 0) / 1000 or None)
    return DeviceInfo(
        kind="cuda", torch_device=f"cuda:{index}", name=p.name,
        memory_bytes=p.total_memory,
        compute_units=p.multi_processor_count, compute_unit_kind="SMs",
        caches=(CacheLevel("l2", l2, 1),) if l2 else (),
        max_clock_mhz=clock,
        memory_clock_mhz=nvml.get("max_mem_clock_mhz"),
        compute_capability=f"{p.major}.{p.minor}",
        software=sw,
        extra={"power_limit_w": nvml.get("power_limit_w"), "nvml": bool(nvml), "uuid": uuid_of(p),
               "state": nvml.get("state")},
        vendor="nvidia", uuid=uuid_of(p), pci_bus_id=nvml.get("pci_bus_id") or pci_of(p),
    )


def nvml_handle(nv, index: int, uuid: str | None):
    """Return the NVML handle of the GPU with this UUID ("GPU-..."), else of this index."""
    if uuid:
        for key in (uuid, uuid.encode()):  # older bindings want bytes
            try:
                return nv.nvmlDeviceGetHandleByUUID(key)
            except Exception:  # noqa: S112  the next form, then the index
                continue
    return nv.nvmlDeviceGetHandleByIndex(index)


class NvmlSource(Source):
    name = "nvml"
    threaded = True  # NVML calls are quick, and a GPU timing does not run Python in its timed region
    energy_period_s = NVML_PERIOD_S

    def __init__(self, index: int, uuid: str | None = None):
        import pynvml  # optional (nvidia-ml-py); ImportError: make_nvml_source records why
        pynvml.nvmlInit()
        self.nv = pynvml
        self.h = nvml_handle(pynvml, index, uuid)
        if not uuid:  # the index is right only without CUDA_VISIBLE_DEVICES
            self.note = "NVML device found by index (torch reported no UUID)"
        events = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
        self._reasons = events or pynvml.nvmlDeviceGetCurrentClocksThrottleReasons
        self._failed: set[str] = set()
        self._field = getattr(pynvml, "NVML_FI_DEV_POWER_INSTANT", NVML_FI_DEV_POWER_INSTANT)
        self.power_kind = "instant" if self._instant_w() is not None else "average_1s"
        if self.power_kind == "average_1s":
            self.note = "; ".join(filter(None, [self.note,
                                                "no instantaneous power field: power is NVML's 1 s average"]))

    def _instant_w(self) -> float | None:
        """Return the instantaneous board power (W) from NVML's field values, or None where
        the driver or the bindings lack the field."""
        get = getattr(self.nv, "nvmlDeviceGetFieldValues", None)
        if get is None:
            return None
        try:
            v = get(self.h, [self._field])[0]
        except Exception:  # an old driver: the call itself is refused
            return None
        if getattr(v, "nvmlReturn", NVML_SUCCESS) != NVML_SUCCESS:
            return None
        return v.value.uiVal / 1000  # mW

    def _power_w(self) -> float:
        if self.power_kind == "instant":
            w = self._instant_w()
            if w is not None:
                return w
        return self.nv.nvmlDeviceGetPowerUsage(self.h) / 1000

    def power_limit_w(self):
        try:
            return self.nv.nvmlDeviceGetEnforcedPowerLimit(self.h) / 1000  # mW
        except Exception:
            return None

    def read(self):
        nv, h = self.nv, self.h
        return self._read_each((("clock_mhz", lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)),
                                ("mem_clock_mhz", lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM)),
                                ("power_w", self._power_w),
                                ("temp_c", lambda: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)),
                                ("reasons", lambda: self._reasons(h))), "NVML")

    def energy_j(self):
        try:
            return self.nv.nvmlDeviceGetTotalEnergyConsumption(self.h) / 1000  # mJ
        except Exception:
            return None


def make_nvml_source(device) -> Source:
    """Return the NVML source of an NVIDIA DeviceInfo, or a Source whose note says why not."""
    try:
        return NvmlSource(int(device.torch_device.split(":")[1]), (device.extra or {}).get("uuid"))
    except Exception as e:  # no package, no driver library, no permission
        src = Source()
        src.note = (f"NVML unavailable ({type(e).__name__}: {str(e).strip()[:80]}); "
                    "install nvidia-ml-py for clocks, power and energy")
        return src
