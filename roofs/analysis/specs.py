"""Vendor datasheet roofs (roofs/analysis/specs.json, data not code), matched to a device by SKU,
and a computed peak for CPUs from their core's datapath (roofs/analysis/cpu_cores.json, keyed by
vendor, family and model).

Matching is SKU-aware: the device name must match the part's name_regex, then its SM (or
CU) count must equal the part's, then its memory must be within 8% of the part's. An H200
never gets an H100's bandwidth, and a part that matches nothing gets no datasheet roofs.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from bench import precisions
from bench.hw.clock import CPUFREQ, MEASURED, NOMINAL
from bench.hw.units import AMX_FLAGS, NARROW_UNITS, cpu_missing_units  # noqa: F401 (cpu_missing_units: its callers)
from bench.util import Reason
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

CPU_CORES = Path(__file__).with_name("cpu_cores.json")
FMA_PIPES = 2  # vector FMA pipes per core assumed for a core the table does not know
CPU_VENDORS = {"AMD": "AuthenticAMD", "Intel": "GenuineIntel"}  # a record without vendor_id: by its name


@dataclass(frozen=True)
class Core:
    """One row of cpu_cores.json: a core's FMA datapath and pipes, the models it covers, the
    published clocks of its parts (base to maximum boost) and the public source of each."""
    core: str
    vendor: str
    family: int
    models: list
    datapath_bits: int
    fma_pipes: int
    source: str
    clock_mhz: list | None = None     # [lowest base, highest boost] of the line's parts
    one_pipe_names: str | None = None  # model names of the line's parts with one FMA unit
    flags_any: dict | None = None      # {"all": [...], "none": [...]}: the row from flags alone
    l1_load_bytes: int | None = None   # bytes its L1 can load per clock per core (the load ports' widths)
    l1_source: str | None = None

    def pipes_for(self, name: str) -> int:
        """Return the FMA pipes of the part called name: 1 where one_pipe_names matches it."""
        return 1 if self.one_pipe_names and re.search(self.one_pipe_names, name or "") else self.fma_pipes

    def covers(self, vendor: str, family, model) -> bool:
        return (vendor == self.vendor and family == self.family
                and any(lo <= model <= hi for lo, hi in self.models))

    def has_flags(self, flags: set) -> bool:
        want = self.flags_any or {}
        return bool(want) and set(want.get("all", ())) <= flags and not set(want.get("none", ())) & flags


def load_cores(path: Path = CPU_CORES) -> list[Core]:
    return [Core(**c) for c in json.loads(Path(path).read_text())["cores"]]


def cpu_core(device: dict, cores: list[Core] | None = None) -> tuple[Core | None, str]:
    """Return (the cpu_cores.json row of a CPU's device record, how it was found): by vendor,
    family and model (run.json's device extra "cpu_vendor", "cpu_family", "cpu_model");
    for a record that predates them, by its name's vendor and the first row whose flags_any
    its SIMD flags fit; (None, "") when neither finds a row."""
    cores = load_cores() if cores is None else cores
    extra = (device or {}).get("extra") or {}
    vendor, family, model = extra.get("cpu_vendor"), extra.get("cpu_family"), extra.get("cpu_model")
    if vendor and family is not None and model is not None:
        hit = next((c for c in cores if c.covers(vendor, family, model)), None)
        return hit, (f"{vendor} family {family} model {model}" if hit else "")
    name = (device or {}).get("name", "")
    vendor = next((v for word, v in CPU_VENDORS.items() if word in name), None)
    flags = set((device or {}).get("cpu_flags") or ())
    hit = next((c for c in cores if c.vendor == vendor and c.has_flags(flags)), None)
    return hit, ("from its SIMD flags (the record names no family or model)" if hit else "")


def cpu_vector_bits(flags) -> int:
    """Return the widest vector register the flags name: 512 (AVX-512), 256 (AVX2 with FMA), else 128."""
    flags = set(flags)
    if "avx512f" in flags:
        return 512
    if "avx2" in flags and "fma" in flags:
        return 256
    return 128


# One AMX tile unit (TMUL) per core, per clock: 16 x 32 bf16 or fp16 products (1,024 FLOP)
# or 16 x 64 int8 products (2,048 OP) into fp32 / int32 (Intel's optimization manual).
AMX_OPS_PER_CLOCK = {p.name: p.amx_per_clock for p in precisions.ROWS if p.amx_flag}   # bench/precisions.py
# NARROW_UNITS (each narrow unit's flags and rate against fp32's) and AMX_FLAGS live in
# bench/hw/units.py with cpu_missing_units, which measuring reads too


def cpu_units(flags, core: Core | None = None, name: str = "") -> dict:
    """Return, per precision, (operations per clock per core, the unit's name) of the
    fastest unit the flags (/proc/cpuinfo) say the CPU has, on its core's datapath (a
    cpu_cores.json row; without one, the widest register the flags name and FMA_PIPES pipes,
    assumed): fp32 = (datapath bits / 32) lanes x pipes x 2 (an FMA is 2 FLOPs); fp64 = fp32
    / 2; bf16 = 2 x fp32 with AVX512-BF16 (or AMX-BF16's 1,024); fp16 = 2 x fp32 with
    AVX512-FP16 (or AMX-FP16's 1,024); int8 = 4 x fp32 with VNNI (or AMX-INT8's 2,048).
    Zen 4: 256-bit x 2 pipes, so fp32 32, fp64 16, bf16 64, int8 128."""
    flags = set(flags)
    if core is not None:
        bits, pipes = core.datapath_bits, core.pipes_for(name)
        fma = f"{bits}-bit FMA datapath x {pipes} pipes, {core.core}"
    else:
        bits, pipes = cpu_vector_bits(flags), FMA_PIPES
        fma = f"{bits}-bit FMA x {pipes} pipes, assumed: a core cpu_cores.json does not know"
    fp32 = bits / 32 * pipes * 2
    units = {"fp32": (fp32, fma), "fp64": (fp32 / 2, fma)}
    for precision, names, factor, what in NARROW_UNITS:
        if flags & set(names):
            units[precision] = (factor * fp32, f"{what} on the {fma}")
    for precision, flag in AMX_FLAGS.items():
        if flag in flags and AMX_OPS_PER_CLOCK[precision] > units.get(precision, (0,))[0]:
            units[precision] = (AMX_OPS_PER_CLOCK[precision], f"AMX {precision} tiles (one TMUL per core)")
    return units


def cpu_peaks_gflops(cores: int, clock_mhz: float, flags, core: Core | None = None, name: str = "") -> dict:
    """Return computed peaks in GFLOP/s (GOP/s for int8): cores x clock x each precision's
    operations per clock per core on its fastest unit (cpu_units)."""
    return {p: cores * clock_mhz / 1000 * ops for p, (ops, _) in cpu_units(flags, core, name).items()}


def cpu_clock(device: dict) -> tuple[float | None, str]:
    """Return (the clock a CPU's computed peaks assume in MHz, its basis): the clock the run
    measured on its cores (device extra "clock_basis" "measured (dependent add chain)",
    bench/hw/clock.py), else cpufreq's maximum where the kernel exposes one ("cpufreq
    maximum"), else the clock /proc/cpuinfo reports, labelled "nominal" (a VM without cpufreq
    reports its nominal clock while its cores boost)."""
    extra = device.get("extra") or {}
    if extra.get("clock_basis") == MEASURED and extra.get("clock_mhz"):
        return float(extra["clock_mhz"]), MEASURED
    return device.get("max_clock_mhz"), (CPUFREQ if cpu_reads_its_clock(device) else NOMINAL)


def cpu_reads_its_clock(device: dict) -> bool:
    """Return whether a CPU's kernel reads its cores' clock (cpufreq): only then is the
    /proc/cpuinfo MHz read while a point ran a clock observed, not the nominal one."""
    return (device.get("extra") or {}).get("clock_source") == "cpufreq max"


def reference_label(ref: Roof) -> str:
    """Return a reference roof's source with the clock it names, where it names one: "computed
    at 4,481 MHz (measured (dependent add chain))", "computed at 2,596 MHz (nominal)"; a
    datasheet's source as it is."""
    extra = ref.extra or {}
    if ref.source == "computed" and extra.get("clock_mhz") and extra.get("clock_basis"):
        return f"{ref.source} at {extra['clock_mhz']:,.0f} MHz ({extra['clock_basis']})"
    return ref.source


def physical_cores(device: dict) -> int | None:
    """Return the CPU's physical cores: its logical CPUs over the threads each core runs
    (device extra "threads_per_core", 1 where unknown): SMT threads share their core's FMA pipes."""
    logical = device.get("compute_units")
    threads = (device.get("extra") or {}).get("threads_per_core") or 1
    return max(1, logical // threads) if logical else None


def computed_cpu_roofs(device: dict) -> list[Roof]:
    """Return the CPU's computed compute roofs (source "computed"): physical cores x clock
    (cpu_clock) x operations per clock per core (cpu_units on its cpu_core row), each with
    extra "clock_mhz", "clock_basis", "core" and "published_clock_mhz"; [] without clock or cores."""
    (clock, basis), cores = cpu_clock(device), physical_cores(device)
    if device.get("kind") != "cpu" or not clock or not cores:
        return []
    core, _ = cpu_core(device)
    extra = {"clock_mhz": clock, "clock_basis": basis, "core": core.core if core else None,
             "published_clock_mhz": core.clock_mhz if core else None}
    units = cpu_units(device.get("cpu_flags", ()), core, device.get("name", ""))
    out = [Roof("compute", p, cores * clock / 1000 * ops, "GOP/s" if p in INTEGER_PRECISIONS else "GFLOP/s",
                source="computed",
                note=f"{cores} cores x {clock:,.0f} MHz ({basis}) x {ops:g} per clock per core ({unit})",
                extra={**extra, "per_clock": ops})
           for p, (ops, unit) in units.items()]
    if core is not None and core.l1_load_bytes:  # the L1's load ports: a reference beside the measured l1
        out.append(Roof("bandwidth", "l1", cores * clock / 1000 * core.l1_load_bytes, "GB/s", source="computed",
                        note=f"{cores} cores x {clock:,.0f} MHz ({basis}) x {core.l1_load_bytes} bytes loaded per "
                             f"clock per core ({core.l1_source})",
                        extra={**extra, "per_clock": core.l1_load_bytes}))
    return out


def cpu_reference_origin(device: dict, roofs: list[Roof]) -> str:
    """Return the sentence that says where a CPU's computed peaks came from: its core (or the
    assumption), how the core was found and the row's source, the cores and the clock with
    its basis, and the published clocks of the core's parts where the table has them."""
    if not roofs:
        return "no datasheet entry, and no clock or core count to compute a CPU peak"
    core, how = cpu_core(device)
    (clock, basis), cores = cpu_clock(device), physical_cores(device)
    what = (f"{core.core} ({how}; {core.source})" if core
            else "a core cpu_cores.json does not know: 2 FMA pipes of the widest register its flags name, assumed")
    text = f"computed CPU peaks: {what}; {cores} cores at {clock:,.0f} MHz ({basis})"
    if core and core.clock_mhz:
        text += f"; its parts' published clocks run {core.clock_mhz[0]:,}-{core.clock_mhz[1]:,} MHz"
    return text


def implied_clock_mhz(measured: float, reference: Roof) -> float | None:
    """Return the clock at which the reference's rate per clock gives a measured rate above
    it: the clock it assumes x measured / reference; None without that clock, and None for a
    rate at or below the reference's: a unit running below its rate is a finding about the path
    (library, shapes, warm-up: path_below_reference), never a clock."""
    assumed = (reference.extra or {}).get("clock_mhz")
    if not assumed or not reference.value or measured <= reference.value:
        return None
    return assumed * measured / reference.value


# A compute roof under this share of its reference's rate is a finding about the path that set
# it (path_below_reference): the reference's units run at least twice as fast as it got them to
BELOW_REFERENCE = 0.5
PATH_BELOW = "path_below_reference"  # the finding's reason code


def path_below_reference(measured: float, reference: float | None) -> dict | None:
    """Return {"code": PATH_BELOW, "share": measured / reference} for a compute roof's rate under
    BELOW_REFERENCE of its reference's, else None: its path (the library's kernel, the shapes
    swept, the warm-up) fell short of the units, which no clock explains."""
    if not reference or measured != measured:
        return None
    share = measured / reference
    return {"code": PATH_BELOW, "share": share} if share < BELOW_REFERENCE else None


def reference_roofs(device: dict) -> tuple[list[Roof], str]:
    """Return (the device's datasheet or computed roofs, a sentence saying where they came from)."""
    if device.get("kind") == "cpu":
        roofs = computed_cpu_roofs(device)
        return roofs, cpu_reference_origin(device, roofs)
    part = match(device)
    if part is None:
        return [], Reason(f"no datasheet entry for {device.get('name', 'this device')}", "no_datasheet")
    return datasheet_roofs(part, "hbm"), f"datasheet: {part.part} ({part.source})"
