"""Telemetry sampled in the background while a point is timed.

GPU (NVML, the nvidia-ml-py package): SM and memory clocks, power, temperature and the
clock-event (throttle) reasons every 10 ms, and the board's energy counter at start and
end. CPU: the cores' current clock (/proc/cpuinfo) and, where the kernel exposes one, the
RAPL package energy counter (/sys/class/powercap). Whatever cannot be read stays empty and
`note` says why, so a number is never guessed.

The summary (a dict stored with each measurement):
    source, note, window_s, samples,
    clock_mhz (mean SM or core clock), clock_min_mhz, mem_clock_mhz,
    power_w (mean), power_max_w, temp_max_c,
    energy_j (counter delta over the window; else mean power x window),
    throttled (bool), throttle_reasons (names other than idle / application clocks)
"""
from __future__ import annotations

import threading
import time
from pathlib import Path

PERIOD_S = 0.01
# NVML clock-event reasons that mean the clock was held down, by bit
THROTTLE_BITS = {0x2: "applications_clocks", 0x4: "sw_power_cap", 0x8: "hw_slowdown", 0x10: "sync_boost",
                 0x20: "sw_thermal", 0x40: "hw_thermal", 0x80: "hw_power_brake", 0x100: "display_clocks"}
BENIGN = {"applications_clocks", "sync_boost", "display_clocks"}


def _mean(xs):
    return sum(xs) / len(xs) if xs else None


class _Source:
    name = "none"
    note = ""
    threaded = False  # sampled by a background thread (else only at start and stop)

    def read(self) -> dict:  # one sample: clock_mhz, mem_clock_mhz, power_w, temp_c, reasons
        return {}

    def energy_j(self) -> float | None:
        return None


class NvmlSource(_Source):
    name = "nvml"
    threaded = True  # NVML calls are quick, and a GPU timing does not run Python in its timed region

    def __init__(self, index: int):
        import pynvml  # ImportError: the caller records why
        pynvml.nvmlInit()
        self.nv = pynvml
        self.h = pynvml.nvmlDeviceGetHandleByIndex(index)

    def read(self):
        nv, h = self.nv, self.h
        out = {}
        for key, fn in (("clock_mhz", lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)),
                        ("mem_clock_mhz", lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM)),
                        ("power_w", lambda: nv.nvmlDeviceGetPowerUsage(h) / 1000),
                        ("temp_c", lambda: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)),
                        ("reasons", lambda: nv.nvmlDeviceGetCurrentClocksThrottleReasons(h))):
            try:
                out[key] = fn()
            except Exception:
                pass
        return out

    def energy_j(self):
        try:
            return self.nv.nvmlDeviceGetTotalEnergyConsumption(self.h) / 1000  # mJ
        except Exception:
            return None


class CpuSource(_Source):
    # Read at start and stop only: a sampling thread would compete for the GIL with the
    # timing loop and slow the very kernels it watches.
    name = "cpu"

    def __init__(self, powercap: str | Path = "/sys/class/powercap"):
        zones = sorted(Path(powercap).glob("*:0/energy_uj")) if Path(powercap).exists() else []
        self.energy_file = zones[0] if zones else None
        self.max_uj = None
        if self.energy_file is not None:
            rng = self.energy_file.with_name("max_energy_range_uj")
            self.max_uj = int(rng.read_text()) if rng.exists() else None
        if self.energy_file is None:
            self.note = "no RAPL energy counter under /sys/class/powercap (a VM, or no permission): energy is empty"
        self._last_uj = None
        self._total_j = 0.0

    def read(self):
        mhz = []
        try:
            for line in Path("/proc/cpuinfo").read_text().splitlines():
                if line.startswith("cpu MHz"):
                    mhz.append(float(line.split(":")[1]))
        except OSError:
            pass
        return {"clock_mhz": _mean(mhz)} if mhz else {}

    def energy_j(self):
        if self.energy_file is None:
            return None
        try:
            uj = int(self.energy_file.read_text())
        except (OSError, ValueError):
            return None
        if self._last_uj is not None:
            delta = uj - self._last_uj
            if delta < 0 and self.max_uj:  # the counter wrapped
                delta += self.max_uj
            self._total_j += delta / 1e6
        self._last_uj = uj
        return self._total_j


def make_source(device) -> _Source:
    """Return the telemetry source for a DeviceInfo; a _Source with a note when none works."""
    if device.kind == "cuda":
        try:
            return NvmlSource(int(device.torch_device.split(":")[1]))
        except Exception as e:  # no package, no driver library, no permission
            src = _Source()
            src.note = f"NVML unavailable ({type(e).__name__}: {str(e).strip()[:80]}); install nvidia-ml-py for clocks, power and energy"
            return src
    return CpuSource()


class Sampler:
    """Samples a source in a background thread between start() and stop()."""

    def __init__(self, source: _Source, period_s: float = PERIOD_S):
        self.source, self.period = source, period_s
        self._samples: list[dict] = []
        self._stop = threading.Event()
        self._thread = None

    def start(self):
        self._samples, self._stop = [], threading.Event()
        self._e0 = self.source.energy_j()
        self._t0 = time.perf_counter()
        if self.source.threaded:
            self._thread = threading.Thread(target=self._loop, daemon=True)
            self._thread.start()
        else:
            self._add(self.source.read())
        return self

    def _add(self, s):
        if s:
            self._samples.append(s)

    def _loop(self):
        while not self._stop.is_set():
            self._add(self.source.read())
            self._stop.wait(self.period)

    def stop(self) -> dict:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        else:
            self._add(self.source.read())
        window = time.perf_counter() - self._t0
        e1 = self.source.energy_j()
        return summarize(self._samples, window, self._e0, e1, self.source.name, self.source.note)


def summarize(samples, window_s, e0, e1, source="none", note="") -> dict:
    """Return the telemetry summary of a window's samples (see the module docstring)."""
    col = lambda k: [s[k] for s in samples if s.get(k) is not None]  # noqa: E731
    power = col("power_w")
    reasons = 0
    for r in col("reasons"):
        reasons |= int(r)
    names = sorted(n for bit, n in THROTTLE_BITS.items() if reasons & bit)
    held = [n for n in names if n not in BENIGN]
    if e0 is not None and e1 is not None and e1 >= e0:
        energy = e1 - e0
    elif power:
        energy = _mean(power) * window_s
    else:
        energy = None
    clocks = col("clock_mhz")
    return {"source": source, "note": note, "window_s": window_s, "samples": len(samples),
            "clock_mhz": _mean(clocks), "clock_min_mhz": min(clocks) if clocks else None,
            "mem_clock_mhz": _mean(col("mem_clock_mhz")),
            "power_w": _mean(power), "power_max_w": max(power) if power else None,
            "temp_max_c": max(col("temp_c")) if col("temp_c") else None,
            "energy_j": energy, "throttled": bool(held), "throttle_reasons": held}
