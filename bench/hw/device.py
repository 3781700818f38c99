"""What the device is: name, memory, caches, cores or SMs, clocks, software versions.

The base of bench/hw: DeviceInfo and CacheLevel, which every vendor module fills, and the
CPU's own reading (sysfs caches, /proc/cpuinfo flags and clock, MemAvailable). A GPU's is
read by bench/hw/nvidia.py or bench/hw/amd.py; bench/hw/detect.py picks which.
Everything here is read, never assumed: a field that cannot be read is None, and the
results say so instead of guessing.
"""
from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import os
import platform
import re
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path

import torch

from bench.hw.clock import clock_record, measure_clock
from bench.identity import device_id
from bench.util import Refusal, offchip_level, triton_interpreting


class DeviceError(Refusal):
    """A device name the user gave that this machine does not have: one sentence, and its code
    (no_cuda, unknown_device)."""


@dataclass(frozen=True)
class CacheLevel:
    """One level of the memory hierarchy below DRAM/HBM.

    size_bytes is one instance's capacity; instances is how many the device has, so
    total_bytes = size_bytes * instances is what a working set spread over every core
    (or SM) can occupy.
    """
    name: str            # "l1", "l2", "l3"
    size_bytes: int
    instances: int = 1

    @property
    def total_bytes(self) -> int:
        return self.size_bytes * self.instances


@dataclass(frozen=True)
class DeviceInfo:
    kind: str                      # "cpu" or "cuda" (torch's device type: a ROCm GPU is "cuda" too)
    torch_device: str              # what tensors are allocated on: "cpu", "cuda:0"
    name: str
    memory_bytes: int | None
    compute_units: int | None      # CPU cores or GPU SMs
    compute_unit_kind: str         # "cores" or "SMs"
    caches: tuple[CacheLevel, ...]  # innermost first; the last one is the last-level cache
    max_clock_mhz: float | None = None
    memory_clock_mhz: float | None = None
    compute_capability: str | None = None
    cpu_flags: tuple[str, ...] = ()
    software: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)
    vendor: str | None = None      # a GPU's maker: "nvidia" or "amd" (None on a CPU, or unknown)
    host: str = field(default_factory=socket.gethostname)  # the machine it was measured on
    uuid: str | None = None        # a GPU's UUID (NVML's "GPU-...", or amdsmi's); None on a CPU
    pci_bus_id: str | None = None  # "0000:3b:00.0" where the device sits on PCI; None on a CPU
    machine_id: str | None = field(default_factory=lambda: machine_id())  # this machine's id, hashed (machine_id())
    cpu_signature: str | None = None  # a CPU's "family/model/stepping" (25/17/1: Zen 4; 26/...: Zen 5)

    @property
    def id(self) -> str:
        """Return the physical device's identity across a fleet (bench.identity.device_id): a
        GPU's UUID, else "<host>:cpu:<machine key>" for a CPU, the key hashed from the machine
        id, model, CPU signature, flags, caches and memory, so two VMs named alike differ."""
        return device_id(self._record())

    def _record(self) -> dict:
        d = dataclasses.asdict(self)
        d["caches"] = [dict(dataclasses.asdict(c), total_bytes=c.total_bytes) for c in self.caches]
        return d

    @property
    def llc(self) -> CacheLevel | None:
        """Return the last-level cache (the outermost level), or None when unknown."""
        return self.caches[-1] if self.caches else None

    @property
    def llc_bytes(self) -> int:
        """Return the last-level cache's total capacity in bytes (32 MiB when unknown)."""
        return self.llc.total_bytes if self.llc else 32 * 2**20

    @property
    def memory_level(self) -> str:
        """Return the name of the off-chip memory level: "hbm" on a GPU, "dram" on a CPU."""
        return offchip_level(self.kind)

    @property
    def slug(self) -> str:
        """Return a file-name-safe short name: "nvidia-h200", "cpu-amd-epyc"."""
        base = self.name if self.kind == "cuda" else f"cpu-{self.name}"
        return re.sub(r"[^a-z0-9]+", "-", base.lower()).strip("-")[:48] or self.kind

    def to_dict(self) -> dict:
        d = self._record()
        d["slug"] = self.slug
        d["id"] = self.id
        return d


def pci_of(props) -> str | None:
    """Return the PCI bus id ("0000:3b:00.0") from torch's properties, or None when it does not say."""
    bus = getattr(props, "pci_bus_id", None)
    if bus is None:
        return None
    return f"{getattr(props, 'pci_domain_id', 0) or 0:04x}:{bus:02x}:{getattr(props, 'pci_device_id', 0) or 0:02x}.0"


def software_versions() -> dict:
    """Return the versions of python, torch, triton, numpy, pandas (and CUDA/driver where present),
    torch's thread count and the CPUs the process's affinity allows."""
    out = {"python": platform.python_version(), "torch": torch.__version__,
           "platform": platform.platform()}
    for pkg in ("triton", "numpy", "pandas", "matplotlib"):
        try:
            out[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            out[pkg] = None
    out["cuda_runtime"] = torch.version.cuda
    out["hip_runtime"] = getattr(torch.version, "hip", None)
    out["triton_interpret"] = triton_interpreting()
    out["torch_threads"] = torch.get_num_threads()
    out["affinity_cpus"] = affinity_cpus()
    return out


def affinity_cpus() -> int | None:
    """Return how many CPUs this process may run on (its affinity mask), or None where the
    platform does not say: `taskset`, a container's cpuset or a job scheduler narrows it."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def _read(path: str | Path) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _parse_size(text: str) -> int:
    """Return bytes for a sysfs cache size such as "48K", "1024K", "32M"."""
    m = re.fullmatch(r"(\d+)\s*([KMG]?)", text.strip().upper())
    if not m:
        raise ValueError(f"cannot parse cache size {text!r}")
    return int(m.group(1)) * {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}[m.group(2)]


def _cpu_list_len(text: str) -> int:
    """Return how many CPUs a sysfs list such as "0-3,8" names."""
    count = 0
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        count += int(hi or lo) - int(lo) + 1
    return count


def cpu_caches(sysfs: str | Path = "/sys/devices/system/cpu") -> tuple[CacheLevel, ...]:
    """Return the data/unified cache levels from sysfs, innermost first.

    Instances = online CPUs / CPUs sharing one instance (a per-core L2 on 2 cores is 2).
    """
    base = Path(sysfs) / "cpu0" / "cache"
    online = _cpu_list_len(_read(Path(sysfs) / "online") or "0")
    levels = {}
    for idx in sorted(base.glob("index*")):
        kind = _read(idx / "type")
        if kind not in ("Data", "Unified"):
            continue
        level = int(_read(idx / "level") or 0)
        size = _parse_size(_read(idx / "size") or "0")
        sharing = _cpu_list_len(_read(idx / "shared_cpu_list") or "0") or 1
        levels[level] = CacheLevel(f"l{level}", size, max(1, online // sharing))
    return tuple(levels[k] for k in sorted(levels))


def machine_id() -> str | None:
    """Return this machine's id as roofbench records it: the OS's id (systemd's
    /etc/machine-id, else D-Bus's) hashed with the application's own key, sha256("roofbench:"
    + id)[:32] (the raw id is meant to stay private: systemd's machine-id(5)), or None where
    neither can be read. It tells two VMs of one image and host name apart."""
    for path in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
        text = _read(path)
        if text:
            return hashlib.sha256(f"roofbench:{text}".encode()).hexdigest()[:32]
    return None


def _cpuinfo(path: str | Path = "/proc/cpuinfo") -> dict:
    """Return /proc/cpuinfo's fields, the first CPU's value of each."""
    text = _read(path) or ""
    info = {}
    for line in text.splitlines():
        key, _, val = line.partition(":")
        key = key.strip()
        if key and key not in info:
            info[key] = val.strip()
    return info


def _meminfo_bytes(key: str, path: str | Path = "/proc/meminfo") -> int | None:
    for line in (_read(path) or "").splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    return None


ARM_IMPLEMENTERS = {"0x41": "ARM"}  # /proc/cpuinfo's "CPU implementer" on Arm's own cores


def cpu_identity(ci: dict) -> dict:
    """Return {"cpu_vendor", "cpu_family", "cpu_model"} from /proc/cpuinfo's fields: x86's
    vendor_id, cpu family and model; Arm's implementer (ARM for 0x41), CPU architecture and CPU
    part (the key of roofs/analysis/cpu_cores.json); {} where they cannot be read."""
    try:
        if "vendor_id" in ci:
            return {"cpu_vendor": ci["vendor_id"], "cpu_family": int(ci["cpu family"]), "cpu_model": int(ci["model"])}
        if "CPU implementer" in ci:
            impl = ci["CPU implementer"].lower()
            return {"cpu_vendor": ARM_IMPLEMENTERS.get(impl, impl), "cpu_family": int(ci.get("CPU architecture", 0)),
                    "cpu_model": int(ci["CPU part"], 16)}
    except (KeyError, ValueError):
        pass
    return {}


def cpu_info(proc: str | Path = "/proc", sysfs: str | Path = "/sys/devices/system/cpu") -> DeviceInfo:
    """Return the CPU's DeviceInfo from /proc (cpuinfo, meminfo) and sysfs (caches, online CPUs,
    threads per core, cpufreq's maximum clock; else cpuinfo's MHz, a nominal clock), its extra's
    "clock_mhz" and "clock_basis" the clock its computed peaks use and where it came from
    (bench/hw/clock.py; measured only by with_measured_clock, which a run calls)."""
    ci = _cpuinfo(Path(proc) / "cpuinfo")
    max_khz = _read(Path(sysfs) / "cpu0" / "cpufreq" / "cpuinfo_max_freq")
    clock = float(max_khz) / 1000 if max_khz else (float(ci["cpu MHz"]) if "cpu MHz" in ci else None)
    online, siblings = _read(Path(sysfs) / "online"), _read(Path(sysfs) / "cpu0" / "topology" / "thread_siblings_list")
    features = (ci.get("flags") or ci.get("Features") or "").split()  # x86's flags, Arm's Features
    simd = r"(avx|sse|fma|amx|f16c|neon|sve|asimd|bf16|i8mm|fphp)"
    return DeviceInfo(
        kind="cpu", torch_device="cpu",
        name=ci.get("model name") or platform.processor() or "cpu",
        memory_bytes=_meminfo_bytes("MemTotal", Path(proc) / "meminfo"),
        compute_units=_cpu_list_len(online) if online else os.cpu_count(), compute_unit_kind="cores",
        caches=cpu_caches(sysfs),
        max_clock_mhz=clock,
        cpu_flags=tuple(sorted(f for f in features if re.match(simd, f))),
        software=software_versions(),
        extra={"clock_source": "cpufreq max" if max_khz else "/proc/cpuinfo current MHz", **cpu_identity(ci),
               **clock_record(clock, bool(max_khz), None),
               "threads_per_core": _cpu_list_len(siblings) if siblings else None},
        cpu_signature="/".join(ci[k] for k in ("cpu family", "model", "stepping") if k in ci) or None,
    )


def with_measured_clock(info: DeviceInfo) -> DeviceInfo:
    """Return a CPU's DeviceInfo with its clock measured on every core it may run on (a
    dependent add chain: bench/hw/clock.py), its extra's "clock_mhz" and "clock_basis" the
    measured clock, else the reported one labelled with where it came from and
    "clock_not_measured" saying why; a GPU's unchanged."""
    if info.kind != "cpu":
        return info
    measured = measure_clock(affinity_cpus() or info.compute_units or 1)
    record = clock_record(info.max_clock_mhz, info.extra.get("clock_source") == "cpufreq max", measured)
    return dataclasses.replace(info, extra={**info.extra, **record})


def free_memory_bytes(info: DeviceInfo) -> int | None:
    """Return the bytes that can still be allocated on the device (MemAvailable on a CPU)."""
    if info.kind == "cuda":
        free, _total = torch.cuda.mem_get_info(torch.device(info.torch_device))
        return free
    return _meminfo_bytes("MemAvailable")


COMMAND_ENV = "ROOFBENCH_COMMAND"  # set by the multi-device launcher (bench/run/distributed.py) for its workers


def command_line() -> str:
    """Return the command this run was started with: the launcher's, for a worker it started
    (whose own arguments are torchrun's), else this process's."""
    return os.environ.get(COMMAND_ENV) or " ".join([Path(sys.executable).name] + sys.argv)
