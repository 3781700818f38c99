"""Telemetry of an AMD GPU through amdsmi (the amdsmi Python package of ROCm), sampled the
way bench/telemetry.py samples NVML: the engine (GFX) and memory clocks, power, the hotspot
temperature every PERIOD_S, and the energy accumulator read around the timed samples.
NVML is for NVIDIA GPUs only; an AMD GPU without amdsmi gets a source with a note.

amdsmi reports power in W (the socket's current power where the driver has it, else its
average) and energy as a counter times its resolution in microjoules.
"""
from __future__ import annotations

from bench.telemetry import _Source


class AmdSmiSource(_Source):
    name = "amdsmi"
    threaded = True

    def __init__(self, index: int, smi=None):
        if smi is None:
            import amdsmi as smi  # ImportError: the caller records why
        smi.amdsmi_init()
        self.smi = smi
        self.h = smi.amdsmi_get_processor_handles()[index]
        self._failed: set[str] = set()

    def _power(self):
        info = self.smi.amdsmi_get_power_info(self.h)
        for key in ("current_socket_power", "average_socket_power", "socket_power"):
            v = info.get(key)
            if isinstance(v, (int, float)) and v > 0:
                return float(v)
        return None

    def read(self):
        smi, h = self.smi, self.h
        return self._read_each((("clock_mhz", lambda: smi.amdsmi_get_clock_info(h, smi.AmdSmiClkType.GFX)["clk"]),
                                ("mem_clock_mhz", lambda: smi.amdsmi_get_clock_info(h, smi.AmdSmiClkType.MEM)["clk"]),
                                ("power_w", self._power),
                                ("temp_c", lambda: smi.amdsmi_get_temp_metric(h, smi.AmdSmiTemperatureType.HOTSPOT,
                                                                              smi.AmdSmiTemperatureMetric.CURRENT))),
                               "amdsmi", skip_none=True)

    def energy_j(self):
        try:
            e = self.smi.amdsmi_get_energy_count(self.h)
            count = e.get("energy_accumulator", e.get("power"))
            return float(count) * float(e["counter_resolution"]) / 1e6
        except Exception:
            return None


def make_amd_source(device) -> _Source:
    """Return the amdsmi source of an AMD DeviceInfo, or a _Source whose note says why not."""
    try:
        return AmdSmiSource(int(device.torch_device.split(":")[1]))
    except Exception as e:  # no package, no driver, no permission
        src = _Source()
        src.note = (f"amdsmi unavailable ({type(e).__name__}: {str(e).strip()[:80]}); install ROCm's amdsmi "
                    "package for clocks, power and energy")
        return src
