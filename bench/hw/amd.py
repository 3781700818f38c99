"""AMD GPUs under ROCm torch (`torch.version.hip` set): what the device is, and its telemetry.

ROCm torch drives an AMD GPU through the torch.cuda API, so a run's device kind stays
"cuda" (tensors live on "cuda:N") and `vendor` says "amd". Read from torch's properties:
the name, memory, compute units (CUs), the gfx target (gcnArchName, "gfx942:sramecc+:xnack-"),
the LDS one workgroup may use and the L2 (per XCD: an MI300X has 8 XCDs of 38 CUs, each with
4 MiB of L2). From amdsmi when it is installed: the driver, the peak engine and memory
clocks, the power cap and the cache sizes, the Infinity Cache (AMD's MALL, a last-level
cache in front of HBM, recorded as level "l3") among them. Where amdsmi does not report
the Infinity Cache, its size comes from the gfx target's datasheet value and extra says so.
The library baseline is torch's matmul, which ROCm torch routes through hipBLASLt (the
software record names the BLAS library torch prefers).

Telemetry: an AMD GPU is read through amdsmi (the amdsmi Python package of ROCm), sampled the
way bench/hw/telemetry.py samples NVML: the engine (GFX) and memory clocks, power, the hotspot
temperature every PERIOD_S, and the energy accumulator read around the timed samples.
NVML is for NVIDIA GPUs only; an AMD GPU without amdsmi gets a source with a note.

amdsmi reports power in W (the socket's current power where the driver has it, else its
average) and energy as a counter times its resolution in microjoules.
"""
from __future__ import annotations

import torch

from bench.hw.device import CacheLevel, DeviceInfo, pci_of, software_versions
from bench.hw.telemetry import Source

# CUs per XCD (an XCD has its own L2): MI300X 304 = 8 x 38, MI300A 228 = 6 x 38, MI355X 256 = 8 x 32
XCD_CUS = {"gfx942": 38, "gfx950": 32}
# The Infinity Cache by gfx target, from the datasheets (MI300X/MI325X/MI355X: 256 MB),
# used only when amdsmi does not report it
INFINITY_CACHE_BYTES = {"gfx942": 256 * 2**20, "gfx950": 256 * 2**20}


def gfx_of(props) -> str | None:
    """Return the gfx target of torch's device properties ("gfx942"), or None."""
    name = str(getattr(props, "gcnArchName", "") or "").split(":")[0]
    return name or None


def amdsmi_info(index: int) -> dict:
    """Return what amdsmi says of GPU index (driver, max clocks, power cap in W, caches as
    {level: bytes}), each field read on its own; {} without amdsmi or its driver."""
    try:
        import amdsmi  # optional (ROCm's amdsmi): without it the fields stay empty
        amdsmi.amdsmi_init()
    except Exception:  # package absent, or no amdgpu driver
        return {}
    try:
        h = amdsmi.amdsmi_get_processor_handles()[index]
        out = {}

        def read(key, fn):
            try:
                out[key] = fn()
            except Exception:  # not supported by this driver or board
                out[key] = None

        read("driver", lambda: amdsmi.amdsmi_get_gpu_driver_info(h)["driver_version"])
        read("max_sm_clock_mhz", lambda: amdsmi.amdsmi_get_clock_info(h, amdsmi.AmdSmiClkType.GFX)["max_clk"])
        read("max_mem_clock_mhz", lambda: amdsmi.amdsmi_get_clock_info(h, amdsmi.AmdSmiClkType.MEM)["max_clk"])
        read("power_limit_w", lambda: amdsmi.amdsmi_get_power_cap_info(h)["power_cap"] / 1e6)  # microwatts
        read("uuid", lambda: amdsmi.amdsmi_get_gpu_device_uuid(h))
        read("pci_bus_id", lambda: str(amdsmi.amdsmi_get_gpu_device_bdf(h)).lower())
        read("caches", lambda: {int(c["cache_level"]): int(c["cache_size"]) * 1024  # KB
                                for c in amdsmi.amdsmi_get_gpu_cache_info(h)["cache"]})
        return out
    finally:
        try:
            amdsmi.amdsmi_shut_down()
        except Exception:  # noqa: S110  shutting down a library that half-started
            pass


def blas_library() -> str | None:
    """Return the BLAS library torch prefers for matmul (hipblaslt on ROCm's MI300 builds), or None."""
    try:
        return str(torch.backends.cuda.preferred_blas_library()).split(".")[-1].lower()
    except Exception:  # an older torch without the setting
        return None


def amd_info(index: int, props=None, smi: dict | None = None) -> DeviceInfo:
    """Return the DeviceInfo of AMD GPU index from torch's properties (props, read when None)
    and amdsmi (smi, read when None)."""
    p = props if props is not None else torch.cuda.get_device_properties(index)
    smi = amdsmi_info(index) if smi is None else smi
    gfx = gfx_of(p)
    cus = int(p.multi_processor_count)
    caches = []
    reported = smi.get("caches") or {}
    l2 = int(getattr(p, "L2_cache_size", 0) or 0) or reported.get(2, 0)
    if l2:
        xcds = max(1, round(cus / XCD_CUS[gfx])) if gfx in XCD_CUS else 1
        caches.append(CacheLevel("l2", l2, xcds))
    l3, l3_source = reported.get(3), "amdsmi"
    if not l3 and gfx in INFINITY_CACHE_BYTES:
        l3, l3_source = INFINITY_CACHE_BYTES[gfx], f"the {gfx} datasheet (amdsmi did not report it)"
    if l3:
        caches.append(CacheLevel("l3", l3, 1))
    sw = software_versions()
    sw["driver"] = smi.get("driver")
    sw["blas"] = blas_library()
    clock = smi.get("max_sm_clock_mhz") or (getattr(p, "clock_rate", 0) or 0) / 1000 or None
    lds = getattr(p, "shared_memory_per_block_optin", 0) or getattr(p, "shared_memory_per_block", 0) or None
    return DeviceInfo(
        kind="cuda", torch_device=f"cuda:{index}", name=p.name, memory_bytes=int(p.total_memory),
        compute_units=cus, compute_unit_kind="CUs", caches=tuple(caches),
        max_clock_mhz=clock, memory_clock_mhz=smi.get("max_mem_clock_mhz"),
        compute_capability=f"{p.major}.{p.minor}", software=sw, vendor="amd",
        uuid=smi.get("uuid") or (str(p.uuid) if getattr(p, "uuid", None) else None),
        pci_bus_id=smi.get("pci_bus_id") or pci_of(p),
        extra={"gfx": gfx, "lds_bytes": lds, "warp_size": getattr(p, "warp_size", 64),
               "power_limit_w": smi.get("power_limit_w"), "amdsmi": bool(smi), "nvml": False,
               "l3_name": "Infinity Cache (MALL)" if l3 else None, "l3_source": l3_source if l3 else None},
    )


class AmdSmiSource(Source):
    name = "amdsmi"
    threaded = True

    def __init__(self, index: int, smi=None):
        if smi is None:
            import amdsmi as smi  # optional (ROCm's amdsmi); ImportError: make_amd_source records why
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


def make_amd_source(device) -> Source:
    """Return the amdsmi source of an AMD DeviceInfo, or a _Source whose note says why not."""
    try:
        return AmdSmiSource(int(device.torch_device.split(":")[1]))
    except Exception as e:  # no package, no driver, no permission
        src = Source()
        src.note = (f"amdsmi unavailable ({type(e).__name__}: {str(e).strip()[:80]}); install ROCm's amdsmi "
                    "package for clocks, power and energy")
        return src
