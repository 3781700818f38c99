"""Which device is here: the names --device accepts, the DeviceInfo of one (CPU, NVIDIA or
AMD, each read by its own module) and its telemetry source. The one place that knows every
vendor, so the vendor modules import only the base modules (device, telemetry)."""
from __future__ import annotations

import torch

from bench.hw.amd import amd_info, make_amd_source
from bench.hw.device import DeviceError, DeviceInfo, cpu_info
from bench.hw.nvidia import make_nvml_source, nvidia_info
from bench.hw.telemetry import CpuSource, Source


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
                          "with a GPU and a CUDA build of torch.", "no_cuda")
    if name == "cuda":
        name = "cuda:0"
    if name not in available_devices():
        raise DeviceError(f"unknown device '{name}': this machine has {', '.join(available_devices())}.",
                          "unknown_device")
    return cpu_info() if name == "cpu" else gpu_info(int(name.split(":")[1]))



def gpu_info(index: int) -> DeviceInfo:
    """Return the DeviceInfo of GPU index: AMD under ROCm torch (the same torch.cuda API), else NVIDIA."""
    return amd_info(index) if torch.version.hip else nvidia_info(index)


def make_source(device) -> Source:
    """Return the telemetry source for a DeviceInfo; a Source with a note when none works:
    amdsmi on an AMD GPU, NVML on an NVIDIA GPU, the cores' clock and RAPL on a CPU."""
    if device.kind == "cuda":
        return make_amd_source(device) if getattr(device, "vendor", None) == "amd" else make_nvml_source(device)
    return CpuSource()
