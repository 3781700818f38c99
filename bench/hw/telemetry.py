"""Telemetry sampled in the background while a point is timed: the base Source, the CPU's
(CpuSource), the Sampler and LoadProbe; the NVML and amdsmi sources live in bench/hw/nvidia.py
and bench/hw/amd.py.

GPU (NVML, the nvidia-ml-py package; the device is found by its UUID, so the right GPU is
read under CUDA_VISIBLE_DEVICES): SM and memory clocks, power, temperature and the
clock-event (throttle) reasons every 10 ms, and the board's energy counter read just
before the first timed sample and just after the last (Sampler.window), so warm-up and
graph capture are not in it. Power is the instantaneous field (NVML_FI_DEV_POWER_INSTANT,
through nvmlDeviceGetFieldValues) where the driver has it, else nvmlDeviceGetPowerUsage,
which on Ampere and later is a one-second average: `power_kind` says which ("instant",
"average_1s"). CPU: the cores' current clock (/proc/cpuinfo) and, where the kernel exposes
one, the RAPL package energy counter (/sys/class/powercap). Whatever cannot be read stays
empty and `note` says why, so a number is never guessed.

Energy (ARCHITECTURE.md, rule 14): a Sampler made with energy=True (the sustained windows,
bench/run/sustain_phase.py) reports energy; the sweeps' samplers do not. A window shorter than the
source's sensor period (ENERGY_PERIOD_S: 1 s for NVML, whose averaged power and energy
counter move about once a second; 0.05 s for RAPL) carries no energy either, and
`energy_note` says why. Over a long enough window energy is, in order: mean instantaneous
power x the window (10+ instant readings), the energy counter's change, mean power x the
window.

The summary (a dict stored with each measurement):
    source, note, window_s, samples,
    clock_mhz (mean SM or core clock), clock_min_mhz, mem_clock_mhz,
    power_w (mean), power_max_w, power_kind, temp_max_c,
    energy_j (see above; else empty, never 0), energy_from, energy_note,
    throttled (bool), throttle_reasons (names other than idle / application clocks)
(the runner adds others_cpu, the share of all cores other processes used around the point,
steal_cpu, the share the hypervisor took from a VM's cores (steal time, never counted as other
processes' load), and load1, from LoadProbe)
"""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from bench.util import CLOCK_TICKS, Reason, machine_cpu_seconds, others_cores

PERIOD_S = 0.01
# NVML clock-event reasons that mean the clock was held down, by bit
THROTTLE_BITS = {0x2: "applications_clocks", 0x4: "sw_power_cap", 0x8: "hw_slowdown", 0x10: "sync_boost",
                 0x20: "sw_thermal", 0x40: "hw_thermal", 0x80: "hw_power_brake", 0x100: "display_clocks"}
BENIGN = {"applications_clocks", "sync_boost", "display_clocks"}
NVML_FI_DEV_POWER_INSTANT = 186  # nvml.h's field id, for bindings that predate the name
NVML_SUCCESS = 0
NVML_PERIOD_S = 1.0   # nvmlDeviceGetPowerUsage averages over 1 s (Ampere and later); the counter moves as slowly
RAPL_PERIOD_S = 0.05  # RAPL counters update about every millisecond; read only at a window's ends
MIN_INSTANT_READINGS = 10  # instant power x window needs at least this many readings
# the codes of energy_note, why a window has no energy: a sweep's window (energy is read over the
# sustained windows only), a window shorter than the sensor's period, nothing read
NOT_SUSTAINED, SHORTER_THAN_PERIOD, NOTHING_READ = "not_sustained", "shorter_than_period", "nothing_read"
# energy_from, where a window's energy came from: instant power readings integrated over it, the
# energy counter's difference, or the mean power reading times the window
FROM_INSTANT, FROM_COUNTER, FROM_MEAN = "instant power x window", "counter", "mean power x window"


def _mean(xs):
    return sum(xs) / len(xs) if xs else None


class Source:
    name = "none"
    note = ""
    threaded = False  # sampled by a background thread (else only at start and stop)
    energy_period_s = 0.0  # a window shorter than this carries no energy (the sensor's period)
    power_kind = ""        # "instant" or "average_1s": what power_w means

    def power_limit_w(self) -> float | None:
        return None

    def read(self) -> dict:  # one sample: clock_mhz, mem_clock_mhz, power_w, temp_c, reasons
        return {}

    def energy_j(self) -> float | None:
        return None

    def _read_each(self, readers, lib: str, skip_none: bool = False) -> dict:
        """Return {key: reader()} over readers [(key, reader)]; a reader that raises is left
        out and recorded once in the note ("<lib> <key> unreadable (<error>)"), never
        silently dropped; with skip_none, a reader's None is left out too."""
        failed = self.__dict__.setdefault("_failed", set())
        out = {}
        for key, fn in readers:
            try:
                v = fn()
            except Exception as e:  # noqa: BLE001  any sensor error: recorded, the others still read
                if key not in failed:
                    failed.add(key)
                    self.note = "; ".join(filter(None, [self.note, f"{lib} {key} unreadable ({type(e).__name__})"]))
                continue
            if v is not None or not skip_none:
                out[key] = v
        return out


class CpuSource(Source):
    # Read at start and stop only: a sampling thread would compete for the GIL with the
    # timing loop and slow the very kernels it watches.
    name = "cpu"
    energy_period_s = RAPL_PERIOD_S

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

    def power_limit_w(self):
        """Return the package's long-term power limit (RAPL constraint 0), or None."""
        if self.energy_file is None:
            return None
        try:
            return int(self.energy_file.with_name("constraint_0_power_limit_uw").read_text()) / 1e6
        except (OSError, ValueError):
            return None

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


class LoadProbe:
    """How busy the rest of the machine was over a window: the share of all cores' time that
    other processes used (from /proc/stat's busy time minus this process's own
    /proc/self/stat), the share the hypervisor stole from a VM's cores (/proc/stat's steal, kept
    apart: it is no process of this machine), and the 1-minute load average. Where /proc is
    missing the shares stay None."""

    def __init__(self, proc: str | Path = "/proc"):
        self.proc = Path(proc)
        self._start = None

    def _read(self):
        times = machine_cpu_seconds(str(self.proc))
        try:
            mine = self.proc.joinpath("self", "stat").read_text().rsplit(")", 1)[1].split()
            own = int(mine[11]) + int(mine[12])  # utime + stime, in clock ticks
        except (OSError, IndexError, ValueError):
            return None
        return (time.perf_counter(), *times, own / CLOCK_TICKS) if times is not None else None

    def start(self):
        self._start = self._read()
        return self

    def stop(self) -> dict:
        load1 = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
        end = self._read()
        if self._start is None or end is None:
            return {"others_cpu": None, "steal_cpu": None, "load1": load1}
        return {**load_shares(self._start, end, os.cpu_count() or 1), "load1": load1}


def load_shares(start: tuple, end: tuple, cores: int) -> dict:
    """Return {"others_cpu", "steal_cpu"} between two LoadProbe readings (wall seconds, busy
    seconds, steal seconds, this process's CPU seconds): the share of all cores' time other
    processes used (the busy time less this process's own) and the share the hypervisor stole;
    None for both over a window under 0.05 s (ticks are 10 ms: a few of them say little)."""
    (t0, busy0, steal0, own0), (t1, busy1, steal1, own1) = start, end
    window = max(t1 - t0, 1e-9)
    if window < 0.05:
        return {"others_cpu": None, "steal_cpu": None}
    others = others_cores(busy1 - busy0, own1 - own0, window) / cores
    return {"others_cpu": min(1.0, others), "steal_cpu": min(1.0, max(0.0, steal1 - steal0) / window / cores)}


class Sampler:
    """Samples a source in a background thread between start() and stop(); window("start")
    and window("stop") mark the timed samples, around which the energy counter is read.
    energy: whether the summary reports energy at all (the sustained windows do; the
    sweeps, whose windows are mostly shorter than a sensor's period, do not)."""

    def __init__(self, source: Source, period_s: float = PERIOD_S, energy: bool = False):
        self.source, self.period, self.energy = source, period_s, energy
        self._samples: list[dict] = []
        self._stop = threading.Event()
        self._thread = None
        self._marks: dict = {}

    def start(self):
        self._samples, self._stop, self._marks = [], threading.Event(), {}
        self._t0 = time.perf_counter()
        if self.source.threaded:
            self._thread = threading.Thread(target=self._loop, daemon=True)
            self._thread.start()
        else:
            self._add(self.source.read())
        return self

    def window(self, event: str) -> None:
        """Record the energy counter and the time at "start" (first timed sample) or "stop"."""
        self._marks[event] = (time.perf_counter(), self.source.energy_j())

    def _add(self, s):
        if s:
            s.setdefault("t", time.perf_counter())
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
        t_end = time.perf_counter()
        (t0, e0), (t1, e1) = self._marks.get("start", (self._t0, None)), self._marks.get("stop", (t_end, None))
        inside = [s for s in self._samples if t0 <= s["t"] <= t1] or self._samples
        out = summarize(inside, t1 - t0, e0, e1, self.source.name, self.source.note, self.source.power_kind,
                        self.source.energy_period_s)
        if not self.energy:
            note = Reason("energy is measured over sustained windows only", NOT_SUSTAINED)
            out.update(energy_j=None, energy_from="", energy_note=note)
        return out


def summarize(samples, window_s, e0, e1, source="none", note="", power_kind="", energy_period_s=0.0) -> dict:
    """Return the telemetry summary of a window's samples (see the module docstring): no
    energy over a window shorter than energy_period_s, the sensor's period."""
    col = lambda k: [s[k] for s in samples if s.get(k) is not None]  # noqa: E731
    power = col("power_w")
    reasons = 0
    for r in col("reasons"):
        reasons |= int(r)
    names = sorted(n for bit, n in THROTTLE_BITS.items() if reasons & bit)
    held = [n for n in names if n not in BENIGN]
    energy, energy_from, energy_note = None, "", ""
    if window_s < energy_period_s:
        energy_note = Reason(f"a {window_s:.3g} s window is shorter than the sensor's {energy_period_s:g} s period: "
                             "no energy", SHORTER_THAN_PERIOD)
    elif power_kind == "instant" and len(power) >= MIN_INSTANT_READINGS and window_s > 0:
        energy, energy_from = _mean(power) * window_s, FROM_INSTANT
    elif e0 is not None and e1 is not None and e1 > e0:
        energy, energy_from = e1 - e0, FROM_COUNTER
    elif power and window_s > 0:
        energy, energy_from = _mean(power) * window_s, FROM_MEAN
    else:  # a counter that did not move measured nothing, not 0 J
        energy_note = Reason("the energy counter did not move and no power was read", NOTHING_READ)
    clocks = col("clock_mhz")
    return {"source": source, "note": note, "window_s": window_s, "samples": len(samples),
            "clock_mhz": _mean(clocks), "clock_min_mhz": min(clocks) if clocks else None,
            "mem_clock_mhz": _mean(col("mem_clock_mhz")),
            "power_w": _mean(power), "power_max_w": max(power) if power else None, "power_kind": power_kind,
            "temp_max_c": max(col("temp_c")) if col("temp_c") else None,
            "energy_j": energy, "energy_from": energy_from, "energy_note": energy_note,
            "throttled": bool(held), "throttle_reasons": held}
