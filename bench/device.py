"""What the device is: name, memory, caches, cores or SMs, clocks, software versions.

Everything here is read, never assumed: a field that cannot be read is None, and the
results say so instead of guessing.
"""
from __future__ import annotations

import dataclasses
import importlib.metadata
import os
import platform
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import torch

from bench.util import triton_interpreting


class DeviceError(ValueError):
    """A device name the user gave that this machine does not have."""


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
        return "hbm" if self.kind == "cuda" else "dram"

    @property
    def slug(self) -> str:
        """Return a file-name-safe short name: "nvidia-h200", "cpu-amd-epyc"."""
        base = self.name if self.kind == "cuda" else f"cpu-{self.name}"
        return re.sub(r"[^a-z0-9]+", "-", base.lower()).strip("-")[:48] or self.kind

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["caches"] = [dict(dataclasses.asdict(c), total_bytes=c.total_bytes) for c in self.caches]
        d["slug"] = self.slug
        return d


def available_devices() -> list[str]:
    """Return the device names this machine accepts for --device."""
    names = ["cpu"]
    if torch.cuda.is_available():
        names += ["cuda"] + [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    return names


def resolve(name: str | None = None) -> DeviceInfo:
    """Return the DeviceInfo for name ("cpu", "cuda", "cuda:N"); None picks the first GPU, else the CPU.

    Raises DeviceError with one sentence listing the devices that exist.
    """
    if name is None:
        name = "cuda:0" if torch.cuda.is_available() else "cpu"
    name = name.strip().lower()
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise DeviceError(f"no CUDA device on this machine (asked for '{name}'): use --device cpu, or run on a machine "
                          "with a GPU and a CUDA build of torch.")
    if name == "cuda":
        name = "cuda:0"
    if name not in available_devices():
        raise DeviceError(f"unknown device '{name}': this machine has {', '.join(available_devices())}.")
    return _cpu_info() if name == "cpu" else _cuda_info(int(name.split(":")[1]))


def software_versions() -> dict:
    """Return the versions of python, torch, triton, numpy, pandas (and CUDA/driver where present)."""
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
    return out


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


def _cpuinfo() -> dict:
    text = _read("/proc/cpuinfo") or ""
    info = {}
    for line in text.splitlines():
        key, _, val = line.partition(":")
        key = key.strip()
        if key and key not in info:
            info[key] = val.strip()
    return info


def _meminfo_bytes(key: str) -> int | None:
    for line in (_read("/proc/meminfo") or "").splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    return None


def _cpu_info() -> DeviceInfo:
    ci = _cpuinfo()
    max_khz = _read("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
    clock = float(max_khz) / 1000 if max_khz else (float(ci["cpu MHz"]) if "cpu MHz" in ci else None)
    return DeviceInfo(
        kind="cpu", torch_device="cpu",
        name=ci.get("model name") or platform.processor() or "cpu",
        memory_bytes=_meminfo_bytes("MemTotal"),
        compute_units=os.cpu_count(), compute_unit_kind="cores",
        caches=cpu_caches(),
        max_clock_mhz=clock,
        cpu_flags=tuple(sorted(f for f in ci.get("flags", "").split() if re.match(r"(avx|sse|fma|amx|f16c|neon|sve)", f))),
        software=software_versions(),
        extra={"clock_source": "cpufreq max" if max_khz else "/proc/cpuinfo current MHz"},
    )


def _uuid(props) -> str | None:
    """Return the GPU's UUID as NVML names it ("GPU-..."), or None when torch does not say."""
    u = getattr(props, "uuid", None)
    if not u:
        return None
    u = str(u)
    return u if u.startswith(("GPU-", "MIG-")) else f"GPU-{u}"


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


def _nvml_info(index: int, uuid: str | None = None) -> dict:
    """Return driver version, clocks, power limit and the board's state (nvml_state)
    through NVML, or {} without it."""
    try:
        import pynvml
        pynvml.nvmlInit()
    except Exception:  # package absent or no driver: the fields stay empty
        return {}
    try:
        from bench.telemetry import nvml_handle
        h = nvml_handle(pynvml, index, uuid)
        out = {"driver": pynvml.nvmlSystemGetDriverVersion()}
        for key, fn in (("max_sm_clock_mhz", lambda: pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM)),
                        ("max_mem_clock_mhz", lambda: pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_MEM))):
            try:
                out[key] = fn()
            except Exception:
                out[key] = None
        out["state"] = nvml_state(pynvml, h)
        out["power_limit_w"] = out["state"]["power_limit_w"]
        return out
    finally:
        pynvml.nvmlShutdown()


def _cuda_info(index: int) -> DeviceInfo:
    if torch.version.hip:  # ROCm torch: an AMD GPU behind the same torch.cuda API
        from bench.device_amd import amd_info
        return amd_info(index)
    p = torch.cuda.get_device_properties(index)
    nvml = _nvml_info(index, _uuid(p))
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
        extra={"power_limit_w": nvml.get("power_limit_w"), "nvml": bool(nvml), "uuid": _uuid(p),
               "state": nvml.get("state")},
        vendor="nvidia",
    )


def free_memory_bytes(info: DeviceInfo) -> int | None:
    """Return the bytes that can still be allocated on the device (MemAvailable on a CPU)."""
    if info.kind == "cuda":
        free, _total = torch.cuda.mem_get_info(torch.device(info.torch_device))
        return free
    return _meminfo_bytes("MemAvailable")


COMMAND_ENV = "ROOFBENCH_COMMAND"  # set by the multi-device launcher (bench/distributed.py) for its workers


def command_line() -> str:
    """Return the command this run was started with: the launcher's, for a worker it started
    (whose own arguments are torchrun's), else this process's."""
    return os.environ.get(COMMAND_ENV) or " ".join([Path(sys.executable).name] + sys.argv)
