"""Machine models that know their truth: what each level and unit really does, and so what a
perfect measurement of a sweep would read (the simulator's ground truth, roofs.sim.generate).

A machine is a frozen record of
    caches      what the device reports (name, one instance's bytes, instances), as run.json has them
    levels      the memory hierarchy as it really is, innermost first, the last off chip: each
                level's true edge (where its plateau ends, which need not be the reported size)
                and its rate (GB/s of its fastest kernel, the reread); a level marked probe_only
                (a GPU's L1) serves probe.l1 alone, never a stream kernel's working set
    factors     each kernel class's share of a level's rate: reread and read fastest in the
                caches, copy and triad a bit slower, write slower (CACHE_FACTORS, OFFCHIP_FACTORS)
    units       per precision and unit (gemm, vector, elementwise) a peak (GFLOP/s, GOP/s for
                int8) and a shape-efficiency curve 1 / (1 + (half / g) ** power), g the shape's
                geometric mean of M, N and K (a GEMM) or the chain length k (an FMA chain)
    overheads   a per-call cost by backend (CPU torch ~1 us, so a 16 KiB copy reads low) and
                by op; the launch floors by (backend, form) in microseconds

A working set s past a level's edge e is served partly by that level: the cumulative share
served by the levels up to e is min(1, (e / s) ** sharpness), and the call's time is
bytes x sum(share_j / rate_j). A core's private caches end sharply (sharpness 4: one octave
past the edge 1/16 still hits, as a thrashed LRU cache does), a CPU's shared last level
gradually (1.5: a third still hits one octave past it, 4% three octaves past, as the
committed Zen 4 runs' L3 fades into DRAM over two or three octaves); a GPU's L2 sharply.

call_seconds(machine, row) is a row's true time per call: the rate its kernel would read with
no noise at all. Noise only ever adds to it (roofs.sim.noise).

A GPU model also has what the opt-in extras (roofs.sim.extras) read, which the default plan never
touches:
    link        its host link (Link): GB/s per (direction, host memory kind) and a latency per
                copy, so a host-device copy (family transfer) takes latency + bytes / rate
    board       its board (Board): idle and static power, energy per byte served at each level
                and per FLOP of each dtype, the SM clock a busy sustained window settles at, the
                share of the off-chip rate such a window keeps, its telemetry (NVML or amdsmi)
                and whether hardware counters can be read
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from bench.ops.stream import KINDS, reads, writes
from bench.util import offchip_level

KiB, MiB, GiB = 2**10, 2**20, 2**30



def stream_class(read_arrays: int, written_arrays: int) -> str:
    """Return a stream kernel's class from its arrays' traffic: read (nothing written), write
    (nothing read), copy (a mix writing half its bytes or more: copy, scale), triad (a mix
    writing less: add, triad, an in-place a += b + s c)."""
    if not written_arrays:
        return "read"
    if not read_arrays:
        return "write"
    return "copy" if 2 * written_arrays >= read_arrays + written_arrays else "triad"


# a kernel's class: what share of a level's rate it reads (and which direction roof it sets); each
# stream kernel's from its row of bench/ops/stream.py, reread's and probe.l1's (one resident buffer
# read again and again) their own
KERNEL_CLASS = {**{f"stream.{k.name}": stream_class(len(reads(k)), len(writes(k))) for k in KINDS},
                "stream.reread": "reread", "probe.l1": "probe"}


def kernel_class(op: str) -> str:
    """Return op's kernel class (KERNEL_CLASS); an op the simulator has no class for is an error
    that names it, never a default rate."""
    if op not in KERNEL_CLASS:
        raise ValueError(f"the simulator has no kernel class for '{op}': KERNEL_CLASS in roofs/sim/machines.py "
                         "holds the stream kernels of bench/ops/stream.py's KINDS, stream.reread and probe.l1.")
    return KERNEL_CLASS[op]
CLASS_DIRECTION = {"reread": "read", "read": "read", "copy": "copy", "triad": "copy", "write": "write",
                   "probe": "read"}
CACHE_FACTORS = {"reread": 1.0, "probe": 1.0, "read": 0.95, "copy": 0.9, "triad": 0.88, "write": 0.8}
OFFCHIP_FACTORS = {"reread": 1.0, "probe": 1.0, "read": 1.0, "copy": 0.95, "triad": 0.95, "write": 0.8}
GPU_EVENT_S = 1e-3   # a GPU row whose call lasts longer is timed by CUDA events, shorter ones by graph replay


@dataclass(frozen=True)
class Level:
    name: str                  # "l1", "l2", "l3"; "dram" or "hbm" off chip
    edge: float                # true edge in bytes (math.inf off chip; probe_only levels: their spans fit)
    rate: float                # GB/s of the level's fastest kernel class (reread)
    factors: dict = field(default_factory=dict)   # class -> share of rate, over the machine's defaults
    probe_only: bool = False   # serves probe.l1 alone (a GPU's per-SM L1); no stream working set lives here
    sharpness: float = 4.0     # past the edge, the share still served up to it is (edge / s) ** sharpness


@dataclass(frozen=True)
class Unit:
    dtype: str                 # as the rows spell it: "bf16", "fp8e4m3", "int8", "fp32"
    unit: str                  # "gemm", "vector" (Triton FMA chains), "elementwise" (torch's chains)
    peak: float                # GFLOP/s (GOP/s for int8)
    half: float = 0.0          # shape size at which efficiency is 1/2 (0: every shape at peak)
    power: float = 2.0

    def efficiency(self, g: float) -> float:
        return 1.0 if self.half <= 0 else 1.0 / (1.0 + (self.half / max(g, 1e-9)) ** self.power)


@dataclass(frozen=True)
class Link:
    name: str                  # "PCIe 5.0 x16"
    rate: dict                 # (direction "h2d"/"d2h", host memory "pinned"/"pageable") -> GB/s
    latency_us: float          # per copy, beside its bytes

    def seconds(self, direction: str, memory: str, nbytes: float) -> float:
        return self.latency_us * 1e-6 + nbytes / (self.rate[(direction, memory)] * 1e9)


@dataclass(frozen=True)
class Board:
    telemetry: str             # the runner's telemetry source: "nvml" or "amdsmi"
    power_kind: str            # NVML's "instant" field; "" where the source says nothing (amdsmi)
    sensor_period_s: float     # a window shorter than this carries no energy (bench.hw.telemetry)
    idle_w: float              # drawn with nothing running
    static_w: float            # drawn by a busy device beside its work (P0 of roofs.analysis.energy)
    power_limit_w: float
    e_byte_pj: dict            # level name (and "link") -> pJ per byte that level serves
    e_flop_pj: dict            # dtype -> pJ per FLOP (per op for int8)
    sustain_clock_mhz: float   # the SM clock a window that keeps the SMs busy settles at
    offchip_sustain: float     # the share of the burst off-chip rate a sustained window keeps
    mem_clock_mhz: float
    temp_c: float              # the hottest reading of a busy window
    counters: bool             # Nsight Compute can read its counters (NVIDIA)


@dataclass(frozen=True)
class Machine:
    key: str
    kind: str                  # "cpu" or "cuda" (a ROCm GPU is "cuda" too, as torch has it)
    name: str
    cores: int                 # CPU cores, SMs or CUs
    unit_kind: str             # "cores", "SMs", "CUs"
    caches: tuple              # reported: ((name, one instance's bytes, instances), ...), innermost first
    levels: tuple              # Level, innermost first, the last off chip
    units: tuple               # Unit
    flags: tuple = ()          # a CPU's SIMD flags (run.json's cpu_flags)
    vendor: str | None = None
    clock_mhz: float | None = None
    capability: str | None = None
    memory_bytes: int = 64 * GiB
    extra: dict = field(default_factory=dict)
    cpu_signature: str | None = None
    converted: dict = field(default_factory=dict)    # dtype without a unit -> (wider dtype, share of its rate)
    impl_factor: dict = field(default_factory=dict)  # impl id -> share of the machine's rate it reads
    impl_cap: dict = field(default_factory=dict)     # impl id -> GB/s it never exceeds (its own limit)
    overhead_s: dict = field(default_factory=dict)   # backend -> seconds per call
    op_overhead_s: dict = field(default_factory=dict)  # op -> seconds per call beyond its backend's
    launch_us: dict = field(default_factory=dict)    # (backend, form) -> the empty call, microseconds
    link: Link | None = None                         # a GPU's host link (the extras' transfer rows)
    board: Board | None = None                       # a GPU's power, clocks and counters (the extras)

    @property
    def offchip(self) -> Level:
        return self.levels[-1]

    @property
    def chain(self) -> tuple:
        """The levels a working set walks through (probe_only levels left out)."""
        return tuple(lv for lv in self.levels if not lv.probe_only)

    def level(self, name: str) -> Level:
        return next(lv for lv in self.levels if lv.name == name)

    def unit(self, dtype: str, unit: str) -> Unit | None:
        return next((u for u in self.units if u.dtype == dtype and u.unit == unit), None)

    def class_rate(self, level: Level, cls: str, impl: str = "") -> float:
        """Return GB/s that a kernel of class cls (impl) reads when level serves all of it."""
        base = OFFCHIP_FACTORS if level is self.offchip else CACHE_FACTORS
        rate = level.rate * level.factors.get(cls, base.get(cls, 1.0)) * self.impl_factor.get(impl, 1.0)
        return min(rate, self.impl_cap.get(impl, math.inf))


# ---- the true time of one call ------------------------------------------------------------------

def served(m: Machine, ws: float) -> list[tuple[Level, float]]:
    """Return [(level, share of the traffic it serves)] for a working set of ws bytes."""
    out, before = [], 0.0
    for lv in m.chain:
        cum = 1.0 if ws <= lv.edge else (lv.edge / ws) ** lv.sharpness
        if lv is m.chain[-1]:
            cum = 1.0
        if cum > before:
            out.append((lv, cum - before))
        before = max(before, cum)
    return out


def level_of(m: Machine, ws: float) -> Level:
    """Return the level whose range (the edge before it, its own edge] holds ws."""
    return next(lv for lv in m.chain if ws <= lv.edge or lv is m.chain[-1])


def overhead(m: Machine, backend: str, op: str) -> float:
    """Return the seconds a call costs beyond its work (the backend's, and its op's own)."""
    return m.overhead_s.get(backend, 0.0) + m.op_overhead_s.get(op, 0.0)


def memory_seconds(m: Machine, nbytes: float, ws: float, cls: str, impl: str, only: Level | None = None) -> float:
    """Return the seconds nbytes of class cls take at working set ws (all at `only` when given)."""
    if cls == "probe" and any(lv.probe_only for lv in m.levels):
        only = next(lv for lv in m.levels if lv.probe_only)
    parts = [(only, 1.0)] if only is not None else served(m, ws)
    return sum(nbytes * share / (m.class_rate(lv, cls, impl) * 1e9) for lv, share in parts)


def compute_rate(m: Machine, dtype: str, unit: str, impl: str, g: float) -> float:
    """Return FLOP/s of a shape of size g on dtype's unit (or the wider path it converts to)."""
    u = m.unit(dtype, unit)
    share = 1.0
    if u is None and dtype in m.converted:
        wider, share = m.converted[dtype]
        u = m.unit(wider, unit)
    if u is None:
        raise KeyError(f"{m.key} has no {unit} rate for {dtype}")
    return u.peak * 1e9 * share * u.efficiency(g) * m.impl_factor.get(impl, 1.0)


def unit_of(family: str, impl: str) -> str:
    """Return a compute row's unit: gemm; vector for Triton's FMA chains; elementwise for torch's."""
    if family != "fma":
        return "gemm"
    return "vector" if impl.endswith("/triton") else "elementwise"


def shape_size(point: dict) -> float:
    """Return g: a GEMM's geometric mean of M, N, K; an FMA chain's length k."""
    if "shape" in point:
        m_, n_, k_ = point["shape"]
        return float(m_ * n_ * k_) ** (1 / 3)
    return float(point.get("k", 1))


def call_seconds(m: Machine, op: str, family: str, impl: str, backend: str, point: dict, ws: float,
                 nbytes: float, flops: float, mode: str, only: Level | None = None) -> float:
    """Return one call's true time in seconds (`only`: as if one level served all its bytes)."""
    if op == "probe.launch":
        return m.launch_us[(backend, point["form"])] * 1e-6
    if family == "transfer":
        if m.link is None:
            raise ValueError(f"{m.key} has no host link model: only a GPU model's link times a host-device copy.")
        return m.link.seconds(op.split(".", 1)[1], str(point["memory"]), nbytes)
    extra = overhead(m, backend, op)
    if family in ("stream", "probe"):
        return memory_seconds(m, nbytes, ws, kernel_class(op), impl, only) + extra
    unit = unit_of(family, impl)
    compute = flops / compute_rate(m, str(point["dtype"]), unit, impl, shape_size(point))
    mem_ws = math.inf if mode == "cold" else ws
    memory = memory_seconds(m, nbytes, mem_ws, "read", impl, only)
    return max(compute, memory) + extra


def device_fields(m: Machine) -> dict:
    """Return the DeviceInfo fields of machine m (bench.hw.device), as its run.json records them."""
    return dict(kind=m.kind, torch_device="cpu" if m.kind == "cpu" else "cuda:0", name=m.name,
                memory_bytes=m.memory_bytes, compute_units=m.cores, compute_unit_kind=m.unit_kind,
                max_clock_mhz=m.clock_mhz, compute_capability=m.capability, cpu_flags=tuple(m.flags),
                vendor=m.vendor, extra=dict(m.extra), cpu_signature=m.cpu_signature,
                host=f"sim-{m.key}", machine_id=f"sim-{m.key}", uuid=None if m.kind == "cpu" else f"SIM-{m.key}")


def memory_name(m: Machine) -> str:
    return offchip_level(m.kind)


# ---- the models -----------------------------------------------------------------------------------

ZEN4_FLAGS = ("avx", "avx2", "avx512_bf16", "avx512_bitalg", "avx512_vbmi2", "avx512_vnni", "avx512_vpopcntdq",
              "avx512bw", "avx512cd", "avx512dq", "avx512f", "avx512ifma", "avx512vbmi", "avx512vl", "f16c", "fma",
              "sse", "sse2", "sse4_1", "sse4_2", "sse4a")
SPR_FLAGS = ("amx_bf16", "amx_int8", "amx_tile", "avx", "avx2", "avx512_bf16", "avx512_bitalg", "avx512_fp16",
             "avx512_vbmi2", "avx512_vnni", "avx512_vpopcntdq", "avx512bw", "avx512cd", "avx512dq", "avx512f",
             "avx512ifma", "avx512vbmi", "avx512vl", "avx_vnni", "f16c", "fma", "sse", "sse2", "sse4_1", "sse4_2")
ZEN3_FLAGS = ("avx", "avx2", "f16c", "fma", "sse", "sse2", "sse4_1", "sse4_2", "sse4a")
CPU_OVERHEAD = {"torch": 1.0e-6, "numpy": 2.0e-6}
CPU_OP_OVERHEAD = {"stream.read": 1.5e-6, "fma.chains": 45e-6}   # torch.sum's reduction set-up; the chains' fold
LLC_SHARPNESS = 1.5   # a CPU's shared last level fades into DRAM over two or three octaves
GPU_OVERHEAD = {"torch": 1.0e-6, "triton": 1.3e-6}


def _llc(edge: float, rate: float, sharpness: float = LLC_SHARPNESS) -> Level:
    """Return a CPU's shared L3: its plateau fades into DRAM over two or three octaves (over
    four at sharpness 1)."""
    return Level("l3", edge, rate, sharpness=sharpness)


def _cpu(key, name, caches, levels, units, flags, clock, signature, **kw) -> Machine:
    return Machine(key=key, kind="cpu", name=name, cores=2, unit_kind="cores", caches=caches, levels=levels,
                   units=units, flags=flags, clock_mhz=clock, cpu_signature=signature,
                   extra={"clock_source": "/proc/cpuinfo current MHz", "threads_per_core": 1},
                   overhead_s=CPU_OVERHEAD, op_overhead_s=CPU_OP_OVERHEAD, launch_us={("torch", "call"): 0.9},
                   impl_factor={"gemm.search/torch": 0.96, "gemm.square/torch": 0.95, "gemm.skinny/torch": 0.95},
                   memory_bytes=24 * GiB, **kw)


def _cpu_units(fp32, fp64, extra=(), ew32=24.0, ew64=12.0, half=200.0) -> tuple:
    return (Unit("fp32", "gemm", fp32, half), Unit("fp64", "gemm", fp64, half),
            *(Unit(d, "gemm", peak, half) for d, peak in extra),
            Unit("fp32", "elementwise", ew32), Unit("fp64", "elementwise", ew64))


ZEN4_VM = _cpu(
    "zen4_vm", "AMD EPYC 9R14 (Zen 4)",
    caches=(("l1", 32 * KiB, 2), ("l2", 1 * MiB, 2), ("l3", 32 * MiB, 1)),
    levels=(Level("l1", 48 * KiB, 300.0), Level("l2", 1.5 * MiB, 200.0), _llc(16 * MiB, 165.0),
            Level("dram", math.inf, 40.0)),
    units=_cpu_units(210.0, 105.0, (("bf16", 440.0), ("int8", 870.0))),
    flags=ZEN4_FLAGS, clock=2596.0, signature="25/17/1")

INTEL_AMX_VM = _cpu(
    "intel_amx_vm", "Intel Xeon Platinum 8488C (Sapphire Rapids, AMX)",
    caches=(("l1", 48 * KiB, 2), ("l2", 2 * MiB, 2), ("l3", 300 * MiB, 1)),
    levels=(Level("l1", 80 * KiB, 380.0), Level("l2", 3 * MiB, 190.0), _llc(100 * MiB, 95.0),
            Level("dram", math.inf, 26.0)),
    units=_cpu_units(230.0, 115.0, (("bf16", 2000.0), ("fp16", 460.0), ("int8", 4000.0)), ew32=20.0, ew64=10.0,
                     half=320.0),
    flags=SPR_FLAGS, clock=2400.0, signature="6/143/8")

AVX2_VM = _cpu(
    "avx2_vm", "AMD EPYC 7B13 (Zen 3)",
    caches=(("l1", 32 * KiB, 2), ("l2", 512 * KiB, 2), ("l3", 32 * MiB, 1)),
    levels=(Level("l1", 48 * KiB, 260.0), Level("l2", 768 * KiB, 170.0), _llc(20 * MiB, 120.0),
            Level("dram", math.inf, 21.0)),
    units=_cpu_units(170.0, 85.0, (("int8", 300.0),), ew32=18.0, ew64=9.0),
    converted={"bf16": ("fp32", 0.45), "fp16": ("fp32", 0.4)},
    flags=ZEN3_FLAGS, clock=2450.0, signature="25/1/1")


ZEN5_VM = _cpu(   # a last level that fades slowly: past 4x its edge a quarter of a stream still hits, and
    "zen5_vm", "AMD EPYC 9R45 (Zen 5)",   # its edge lies past the reported 32 MiB, so at the sweep's
    caches=(("l1", 48 * KiB, 2), ("l2", 1 * MiB, 2), ("l3", 32 * MiB, 1)),   # off-chip floor 3/8 still hits
    levels=(Level("l1", 64 * KiB, 480.0), Level("l2", 1.5 * MiB, 380.0), _llc(48 * MiB, 255.0, 1.0),
            Level("dram", math.inf, 75.0)),
    units=_cpu_units(330.0, 165.0, (("bf16", 820.0), ("int8", 1750.0)), ew32=30.0, ew64=15.0),
    flags=ZEN4_FLAGS + ("avx_vnni",), clock=2600.0, signature="26/2/1")


def _gpu_units(tensor: dict, fp32, fp64, vec32, vec64, half=1200.0) -> tuple:
    return (*(Unit(d, "gemm", peak, half) for d, peak in tensor.items()),
            Unit("fp32", "gemm", fp32, half), Unit("fp64", "gemm", fp64, half),
            Unit("fp32", "vector", vec32, 8.0, 1.0), Unit("fp64", "vector", vec64, 8.0, 1.0))


H200 = Machine(
    key="h200", kind="cuda", name="NVIDIA H200", cores=132, unit_kind="SMs", vendor="nvidia",
    clock_mhz=1980.0, capability="9.0", memory_bytes=141 * GiB,
    extra={"power_limit_w": 700.0, "nvml": True},
    caches=(("l2", 60 * MiB, 1),),
    levels=(Level("l1", 256 * KiB * 132, 30000.0, probe_only=True), Level("l2", 23 * MiB, 10000.0),
            Level("hbm", math.inf, 4300.0, factors={"write": 0.97, "copy": 0.95, "triad": 0.97})),
    units=_gpu_units({"bf16": 800e3, "fp16": 800e3, "tf32": 400e3, "fp8e4m3": 1450e3, "int8": 1400e3},
                     fp32=50e3, fp64=55e3, vec32=60e3, vec64=60e3),
    impl_factor={"gemm.square/triton": 0.92, "gemm.search/triton": 0.92, "gemm.skinny/triton": 0.9},
    impl_cap={"stream.reread/torch": 2800.0, "probe.l1/torch": 2800.0},
    overhead_s=GPU_OVERHEAD,
    launch_us={("torch", "launch"): 4.5, ("torch", "graph"): 1.2, ("triton", "launch"): 6.5,
               ("triton", "graph"): 1.4},
    link=Link("PCIe 5.0 x16", {("h2d", "pinned"): 53.0, ("d2h", "pinned"): 54.0, ("h2d", "pageable"): 24.0,
                                ("d2h", "pageable"): 19.0}, latency_us=8.0),
    board=Board("nvml", "instant", 1.0, idle_w=75.0, static_w=160.0, power_limit_w=700.0,
                e_byte_pj={"l1": 1.5, "l2": 6.0, "hbm": 45.0, "link": 30.0},
                e_flop_pj={"bf16": 0.3, "fp16": 0.3, "tf32": 0.6, "fp8e4m3": 0.18, "int8": 0.18, "fp32": 3.0,
                           "fp64": 4.5},
                sustain_clock_mhz=1935.0, offchip_sustain=0.99, mem_clock_mhz=3201.0, temp_c=68.0, counters=True))

MI300X = Machine(
    key="mi300x", kind="cuda", name="AMD Instinct MI300X", cores=304, unit_kind="CUs", vendor="amd",
    clock_mhz=2100.0, capability="9.4", memory_bytes=192 * GiB,
    extra={"gfx": "gfx942", "warp_size": 64, "amdsmi": True, "nvml": False},
    caches=(("l2", 4 * MiB, 8), ("l3", 256 * MiB, 1)),
    levels=(Level("l1", 64 * KiB * 304, 25000.0, probe_only=True), Level("l2", 3 * MiB, 14000.0),
            Level("l3", 192 * MiB, 9500.0), Level("hbm", math.inf, 4100.0)),
    units=_gpu_units({"bf16": 900e3, "fp16": 900e3, "tf32": 300e3, "fp8e4m3": 1700e3, "int8": 1600e3},
                     fp32=120e3, fp64=90e3, vec32=80e3, vec64=70e3, half=1500.0),
    impl_factor={"gemm.square/triton": 0.85, "gemm.search/triton": 0.85, "gemm.skinny/triton": 0.85},
    impl_cap={"stream.reread/torch": 3000.0, "probe.l1/torch": 3000.0},
    overhead_s={"torch": 1.5e-6, "triton": 2.0e-6},
    launch_us={("torch", "launch"): 6.0, ("torch", "graph"): 1.8, ("triton", "launch"): 8.0,
               ("triton", "graph"): 2.0},
    link=Link("PCIe 5.0 x16", {("h2d", "pinned"): 55.0, ("d2h", "pinned"): 56.0, ("h2d", "pageable"): 18.0,
                                ("d2h", "pageable"): 16.0}, latency_us=10.0),
    board=Board("amdsmi", "", 0.0, idle_w=140.0, static_w=230.0, power_limit_w=750.0,
                e_byte_pj={"l1": 1.5, "l2": 5.0, "l3": 12.0, "hbm": 50.0, "link": 30.0},
                e_flop_pj={"bf16": 0.28, "fp16": 0.28, "tf32": 0.8, "fp8e4m3": 0.15, "int8": 0.15, "fp32": 1.8,
                           "fp64": 2.5},
                sustain_clock_mhz=2040.0, offchip_sustain=0.985, mem_clock_mhz=1300.0, temp_c=74.0, counters=False))

MACHINES = {m.key: m for m in (ZEN4_VM, ZEN5_VM, INTEL_AMX_VM, AVX2_VM, H200, MI300X)}
