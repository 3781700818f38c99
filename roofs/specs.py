"""Vendor datasheet roofs (roofs/specs.json, data not code), matched to a device by SKU,
and a computed peak for CPUs.

Matching is SKU-aware: the device name must match the part's name_regex, then its SM (or
CU) count must equal the part's, then its memory must be within 8% of the part's. An H200
never gets an H100's bandwidth, and a part that matches nothing gets no datasheet roofs.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from roofs.model import INTEGER_PRECISIONS, Roof

SPECS = Path(__file__).with_name("specs.json")
MEMORY_TOLERANCE = 0.08


@dataclass(frozen=True)
class Part:
    part: str
    name_regex: str
    sms: int
    memory_gb: float              # the marketed size: GB or GiB, as the vendor prints it
    peaks_tflops: dict
    memory_tbps: float
    llc_mib: float
    boost_clock_mhz: float | None
    tensor_clock_mhz: float | None
    power_w: float | None
    source: str
    compute_capability: str | None = None   # what torch reports (MI300X: 9.4); for planning on a spec

    @property
    def peak_clock_mhz(self) -> float | None:
        """Return the clock the compute peaks assume: the tensor clock where known, else the boost clock."""
        return self.tensor_clock_mhz or self.boost_clock_mhz


def load_parts(path: Path = SPECS) -> list[Part]:
    return [Part(**p) for p in json.loads(Path(path).read_text())["parts"]]


def match(device: dict, parts: list[Part] | None = None) -> Part | None:
    """Return the one part whose name pattern, SM count and memory size fit the device
    record (run.json's "device"), or None ("no datasheet entry")."""
    parts = load_parts() if parts is None else parts
    name = device.get("name", "")
    sms = device.get("compute_units")
    mem = device.get("memory_bytes") or 0

    def size_fits(p):  # the device's bytes read as GB or as GiB, since vendors print either
        return not mem or min(abs(mem / u - p.memory_gb) for u in (1e9, 2**30)) <= MEMORY_TOLERANCE * p.memory_gb
    hits = [p for p in parts if re.search(p.name_regex, name)
            and (sms is None or p.sms == sms) and size_fits(p)]
    return hits[0] if len(hits) == 1 else None


def datasheet_roofs(part: Part, memory_level: str = "hbm") -> list[Roof]:
    """Return the part's roofs: its memory bandwidth and one compute roof per precision."""
    roofs = [Roof("bandwidth", memory_level, part.memory_tbps * 1000, "GB/s", source="datasheet",
                  note=f"{part.part}: {part.source}")]
    for precision, tflops in part.peaks_tflops.items():
        roofs.append(Roof("compute", precision, tflops * 1000,
                          "GOP/s" if precision in INTEGER_PRECISIONS else "GFLOP/s", source="datasheet",
                          note=f"{part.part}: {part.source}",
                          extra={"clock_mhz": part.peak_clock_mhz}))
    return roofs


def clock_corrected(roof: Roof, observed_mhz: float | None) -> Roof | None:
    """Return the datasheet (or computed) compute roof scaled to the clock observed during the
    run: value x observed / the clock its peak assumes; None without both clocks. Its
    source is the reference's with "@clock" appended."""
    assumed = roof.extra.get("clock_mhz") if roof.extra else None
    if roof.kind != "compute" or not assumed or not observed_mhz:
        return None
    return Roof(roof.kind, roof.name, roof.value * observed_mhz / assumed, roof.unit,
                source=f"{roof.source}@clock", note=f"{roof.value:,.0f} x {observed_mhz:.0f} / {assumed:.0f} MHz",
                extra={"clock_mhz": observed_mhz})


# ---- CPUs: a computed peak ------------------------------------------------------------------

FMA_PIPES = 2  # vector FMA pipes per core assumed: true of current server cores (Zen 5, Sapphire Rapids)


def cpu_vector_bits(flags) -> int:
    flags = set(flags)
    if "avx512f" in flags:
        return 512
    if "avx2" in flags and "fma" in flags:
        return 256
    return 128


def cpu_peaks_gflops(cores: int, clock_mhz: float, flags) -> dict:
    """Return computed peaks in GFLOP/s (GOP/s for int8):
    fp32 = cores x clock x (vector bits / 32) lanes x FMA_PIPES x 2 (an FMA is 2 FLOPs);
    fp64 = fp32 / 2; bf16 = 2 x fp32 with avx512_bf16 (a dot of bf16 pairs per fp32 lane);
    int8 = 4 x fp32 with VNNI (four int8 products per 32-bit lane)."""
    flags = set(flags)
    fp32 = cores * clock_mhz / 1000 * cpu_vector_bits(flags) / 32 * FMA_PIPES * 2
    peaks = {"fp32": fp32, "fp64": fp32 / 2}
    if "avx512_bf16" in flags:
        peaks["bf16"] = 2 * fp32
    if "avx512_vnni" in flags or "avx_vnni" in flags:
        peaks["int8"] = 4 * fp32
    return peaks


def computed_cpu_roofs(device: dict) -> list[Roof]:
    """Return the CPU's computed compute roofs (source "computed"), or [] without clock or cores."""
    clock, cores = device.get("max_clock_mhz"), device.get("compute_units")
    if device.get("kind") != "cpu" or not clock or not cores:
        return []
    bits = cpu_vector_bits(device.get("cpu_flags", ()))
    return [Roof("compute", p, v, "GOP/s" if p in INTEGER_PRECISIONS else "GFLOP/s", source="computed",
                 note=f"{cores} cores x {clock:.0f} MHz x {bits}-bit vectors x {FMA_PIPES} FMA pipes (assumed)",
                 extra={"clock_mhz": clock})
            for p, v in cpu_peaks_gflops(cores, clock, device.get("cpu_flags", ())).items()]


def reference_roofs(device: dict) -> tuple[list[Roof], str]:
    """Return (the device's datasheet or computed roofs, a sentence saying where they came from)."""
    if device.get("kind") == "cpu":
        roofs = computed_cpu_roofs(device)
        return roofs, ("computed CPU peaks from cores, clock and SIMD flags" if roofs
                       else "no datasheet entry, and no clock or core count to compute a CPU peak")
    part = match(device)
    if part is None:
        return [], f"no datasheet entry for {device.get('name', 'this device')}"
    return datasheet_roofs(part, "hbm"), f"datasheet: {part.part} ({part.source})"
