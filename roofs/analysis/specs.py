"""Vendor datasheet roofs (roofs/analysis/specs.json, data not code), matched to a device by SKU,
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

from roofs.analysis.roofline import INTEGER_PRECISIONS, Roof

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
    clocks_mhz: dict | None = None          # precision -> the clock its peak assumes (None: unknown)
    clock_basis: str = ""                   # how those clocks were found

    @property
    def peak_clock_mhz(self) -> float | None:
        """Return the clock the tensor peaks assume: the tensor clock where known, else the boost clock."""
        return self.tensor_clock_mhz or self.boost_clock_mhz

    def clock_for(self, precision: str) -> float | None:
        """Return the clock this precision's peak assumes: clocks_mhz's entry (None where the
        datasheet gives no way to derive it), else peak_clock_mhz. NVIDIA's fp32 and fp64
        peaks assume the boost clock, its tensor peaks a lower one (H100: 1,980 and 1,830 MHz)."""
        if self.clocks_mhz is not None and precision in self.clocks_mhz:
            return self.clocks_mhz[precision]
        return self.peak_clock_mhz


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
                          extra={"clock_mhz": part.clock_for(precision)}))
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


# One AMX tile unit (TMUL) per core, per clock: 16 x 32 bf16 or fp16 products (1,024 FLOP)
# or 16 x 64 int8 products (2,048 OP) into fp32 / int32 (Intel's optimization manual).
AMX_OPS_PER_CLOCK = {"bf16": 1024, "fp16": 1024, "int8": 2048}


def cpu_units(flags) -> dict:
    """Return, per precision, (operations per clock per core, the unit's name) of the
    fastest unit the flags (/proc/cpuinfo) say the CPU has:
    fp32 = (vector bits / 32) lanes x FMA_PIPES x 2 (an FMA is 2 FLOPs); fp64 = fp32 / 2;
    bf16 = 2 x fp32 with AVX512-BF16 (a dot of bf16 pairs per fp32 lane), or AMX-BF16's
    1,024; fp16 = 2 x fp32 with AVX512-FP16 (fp16 lanes, twice as many), or AMX-FP16's
    1,024; int8 = 4 x fp32 with VNNI (four int8 products per 32-bit lane), or AMX-INT8's 2,048."""
    flags = set(flags)
    bits = cpu_vector_bits(flags)
    fp32 = bits / 32 * FMA_PIPES * 2
    fma = f"{bits}-bit FMA x {FMA_PIPES} pipes"
    units = {"fp32": (fp32, fma), "fp64": (fp32 / 2, fma)}
    if "avx512_bf16" in flags:
        units["bf16"] = (2 * fp32, "AVX512-BF16 dot products")
    if "avx512_fp16" in flags:
        units["fp16"] = (2 * fp32, "AVX512-FP16 FMA")
    if "avx512_vnni" in flags or "avx_vnni" in flags:
        units["int8"] = (4 * fp32, "VNNI dot products")
    for precision, flag in (("bf16", "amx_bf16"), ("fp16", "amx_fp16"), ("int8", "amx_int8")):
        if flag in flags and AMX_OPS_PER_CLOCK[precision] > units.get(precision, (0,))[0]:
            units[precision] = (AMX_OPS_PER_CLOCK[precision], f"AMX {precision} tiles (one TMUL per core)")
    return units


def cpu_missing_units(device: dict) -> set:
    """Return the narrow precisions (fp16, bf16, fp8) a CPU has no arithmetic unit for, from
    its flags (cpu_units): their GEMMs run through conversion, so their bound is the exact
    wider path (ARCHITECTURE.md, rule 10). Empty for GPUs and for CPUs whose flags are unknown."""
    if (device or {}).get("kind") != "cpu" or not device.get("cpu_flags"):
        return set()
    return {"fp16", "bf16", "fp8e4m3", "fp8e5m2"} - set(cpu_units(device["cpu_flags"]))


def cpu_peaks_gflops(cores: int, clock_mhz: float, flags) -> dict:
    """Return computed peaks in GFLOP/s (GOP/s for int8): cores x clock x each precision's
    operations per clock per core on its fastest unit (cpu_units)."""
    return {p: cores * clock_mhz / 1000 * ops for p, (ops, _) in cpu_units(flags).items()}


def computed_cpu_roofs(device: dict) -> list[Roof]:
    """Return the CPU's computed compute roofs (source "computed"), or [] without clock or cores."""
    clock, cores = device.get("max_clock_mhz"), device.get("compute_units")
    if device.get("kind") != "cpu" or not clock or not cores:
        return []
    units = cpu_units(device.get("cpu_flags", ()))
    return [Roof("compute", p, cores * clock / 1000 * ops, "GOP/s" if p in INTEGER_PRECISIONS else "GFLOP/s",
                 source="computed", note=f"{cores} cores x {clock:.0f} MHz x {ops:g} per clock ({unit}, assumed)",
                 extra={"clock_mhz": clock})
            for p, (ops, unit) in units.items()]


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
