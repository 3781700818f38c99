"""Stream family: copy, scale, add, triad, read (a full sum), write (a fill) and BabelStream's
nstream (a += b + s c, in place), plus reread, which reads one resident buffer many times
inside a single call.

Each kernel is one Kind row of KINDS, its n-element arrays by role: in (read), out (written;
the gate poisons it) or in-out (read and written in place; the gate snapshots and restores it,
bench/measure/gate.py). Two counts follow from the roles and differ where an array is in-out:
the working set, the bytes resident while it runs (every array once), and the traffic, the
bytes moved per call (an in-out array twice: read, then written).

One axis is the working set in bytes (every array resident), swept
geometrically from inside the first cache to well past the last-level cache, so that
each memory level's plateau shows; the element count n follows from it, rounded down to a
multiple of ELEMENT_MULTIPLE so that every array starts and ends on a 256-byte boundary
and a GPU kernel keeps its vector loads. Bytes are the compulsory traffic, each in array
read once, each out array written once and each in-out array both:

    copy  b = a          bytes = 2 n w   flops = 0
    scale b = s a        bytes = 2 n w   flops = n
    add   c = a + b      bytes = 3 n w   flops = n
    triad a = b + s c    bytes = 3 n w   flops = 2 n
    read  sum(a)         bytes = 1 n w   flops = n   (n - 1 adds, counted as n; the result is not counted:
                                                      nor are the Triton read's per-program partial sums,
                                                      4 bytes a program, about 1 KiB on a GPU)
    write b = s          bytes = 1 n w   flops = 0
    nstream a += b + s c bytes = 4 n w   flops = 2 n   (a in-out: read and written; working set 3 n w)

with w the element size in bytes, and the working set n w per array resident (the bytes
for all but nstream, whose a is moved twice and held once). The written part of those bytes
(Op.write_bytes, for the direction roofs of ARCHITECTURE.md rule 12) is the out and in-out
arrays (n w each: one for copy, scale, add, triad, write and nstream, none for read and
reread); the rest is read:

    copy, scale  read n w,   write n w
    add, triad   read 2 n w, write n w
    read         read n w,   write 0
    write        read 0,     write n w
    nstream      read 3 n w, write n w   (a quarter of its bytes written)

Write-allocate traffic that a CPU may add (reading a
line before writing it) is not compulsory and is not counted: it shows up as lower GB/s.

reread sums the same n-element buffer R times in one call (R = ceil(call_bytes / (n w)),
bytes = R n w, flops = R n): one call moves about call_bytes (REREAD_CALL_BYTES: 256 MiB on
a CPU, 1 GiB on a GPU, where L2 reads are 20x faster), so the cost of the call itself (a
few microseconds on a CPU, a launch on a GPU) stays under 5% of it, and a buffer that fits
a cache is read from that cache. This is what sets the cache roofs: a
plain kernel on a cache-sized buffer lasts about as long as its own call overhead.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from bench.measure import memory
from bench.measure.inputs import tiled_normal
from bench.measure.registry import REGISTRY, Axis, Impl, Op, geometric
from bench.measure.tolerance import tolerance
from bench.ops.stream_sizes import (  # noqa: F401  (GPU_MIN_WS, STREAM_CAP_BYTES: read as stream's own)
    GPU_MIN_WS,
    STREAM_CAP_BYTES,
    around_caches,
    offchip_floor,
    offchip_settled,
    with_sizes,
    ws_sweep,
)
from bench.util import itemsize, triton_interpreting

SCALAR = 3.0
DTYPES = ("float32", "float16", "bfloat16")
QUICK_DTYPES = ("float32", "bfloat16")
CPU_QUICK_DTYPES = ("float32",)   # a CPU's quick run: the same bytes in one type (bf16 moves them alike)
GPU_DTYPES = ("float32", "bfloat16")  # on a GPU float16 moves the same bytes through the same loads as bfloat16
# an elementwise kernel rounds an exact fp32 result once, with nothing accumulated: tighter
# than a product's tolerance (bench/measure/tolerance.py)
STREAM_FACTOR = 2 / 3
# A 16-bit sum is rounded once more at the end, by up to half an ulp of |sum|, and |sum|
# can be a few times ||a||_2, the scale its error is measured against.
READ_TOLERANCE_FACTOR = 4 * STREAM_FACTOR
# R passes of an fp32 sum (hundreds of millions of adds) lose more than one pass does
REREAD_FP32_FACTOR = 10
ELEMENT_MULTIPLE = 64
REREAD_CALL_BYTES = {"cpu": 2**28, "cuda": 2**30}  # bytes one reread call moves
REREAD_DTYPES = ("int32", "float32")  # int32: integer adds keep up with a CPU's L1 where fp32 adds do not


def _read_error(out, ref, inputs) -> float:
    """Return |sum(out) - ref| / ||a||_2: a sum of normals can be near zero, so the error is
    scaled by the size of what was summed, not by the result. out is torch's 0-d sum, or the
    Triton kernel's per-program partial sums, added here in float64 (a few hundred values,
    outside the timed call; a slot left at its NaN poison fails)."""
    return abs(out.double().sum().item() - ref.item()) / max(block_norm(inputs["a"]), 1e-300)


def _exact_error(out, ref, inputs) -> float:
    """Return 0 when out equals ref element for element (copy and write are exact), else 1:
    one differing element fails (an unwritten, NaN-poisoned element differs). A 0-d ref (the
    write's constant) is compared through a stride-0 view: no n-element reference is made."""
    return 0.0 if torch.equal(out, ref.expand_as(out)) else 1.0


def _fp32_error(out, ref, inputs) -> float:
    """Return ||out - ref||_2 / ||ref||_2 with ref computed in fp32: the kernels compute in
    fp32 and round once to the storage type, so an fp32 reference is within an fp32 ulp of
    the exact value, far under every dtype's tolerance, and costs no float64 copy."""
    diff = torch.linalg.vector_norm(out.float() - ref).item()  # fp32 norms: a relative error of 1e-7
    denom = torch.linalg.vector_norm(ref).item()
    return diff / denom if denom > 0 else diff


SUM_BLOCK = 2**20  # elements block_sum widens at a time (8 MiB of float64)


def block_sum(a: torch.Tensor) -> torch.Tensor:
    """Return sum(a) as a 0-d float64 tensor (int64 for an integer a: exact), widening a block of
    SUM_BLOCK elements at a time into one reused buffer: widening all of a at once makes
    a fresh array twice its size, whose first-touch page faults cost more than the sum."""
    wide = torch.float64 if a.is_floating_point() else torch.int64
    a = a.reshape(-1)
    buf = torch.empty(min(SUM_BLOCK, a.numel()), dtype=wide, device=a.device)
    total = torch.zeros((), dtype=wide, device=a.device)
    for lo in range(0, a.numel(), SUM_BLOCK):
        part = buf[:min(SUM_BLOCK, a.numel() - lo)]
        part.copy_(a[lo:lo + part.numel()])
        total += part.sum()
    return total


def block_norm(a: torch.Tensor) -> float:
    """Return ||a||_2 (a scale: fp32 blocks are exact enough), SUM_BLOCK elements at a time:
    a 16-bit a's norm in fp32 in one call makes an fp32 copy of all of a on a CPU (2x its bytes)."""
    a, sq = a.reshape(-1), torch.zeros((), dtype=torch.float64, device=a.device)
    for lo in range(0, a.numel(), SUM_BLOCK):
        sq += torch.linalg.vector_norm(a[lo:lo + SUM_BLOCK], dtype=torch.float32).double() ** 2
    return math.sqrt(sq.item())


def _fp32_check_memory(n: int, w: int) -> int:
    """Return the fp32 check's peak temporaries: n-element fp32 arrays, three beside 16-bit data
    (whose .float() copies), two for fp32 (see _fp32_error)."""
    return (3 if w < 4 else 2) * 4 * n


def _no_check_memory(n: int, w: int) -> int:
    """Return 0: the reference is the input itself (copy) or one constant (write)."""
    return 0


def _sum_check_memory(n: int, w: int) -> int:
    """Return block_sum's float64 block: 8 x min(n, SUM_BLOCK) bytes (block_norm's fp32 block, half
    of it, comes after it is freed)."""
    return 8 * min(n, SUM_BLOCK)


def _triton_read(k, x):
    """The Triton read: setup (here, outside the timed region) allocates its output, one fp32
    slot per program of the persistent grid, as the inputs' "out" (so the gate and the tuner's
    check poison it); the timed call is one launch that writes every slot, and the check adds
    them (_read_error). The slots' bytes (4 per program, about 1 KiB on a GPU) are not counted:
    under 0.03% of the smallest GPU point's 4 MiB."""
    x["out"] = k.read_partials(x["a"])
    return lambda: k.read(x["a"], x["out"])


def _torch_read(x):
    # out in a's dtype: a float32 out on a CPU makes torch cast all of a first
    return lambda: torch.sum(x["a"], dim=0, out=x["out_native"])


@dataclass(frozen=True)
class Kind:
    """One stream kernel: its arrays by role (ins read, outs written, inouts read and written
    in place), its formula, and its reference, torch and Triton implementations (each a
    function of the inputs dict). References are made from the inputs before the gate's call
    and are as cheap as the check allows: the input itself for copy (exact), the constant as
    a 0-d tensor for write (exact), fp32 arithmetic for scale, add and triad (see
    _fp32_error), a float64 sum for read (block_sum)."""
    name: str
    ins: tuple[str, ...]
    outs: tuple[str, ...]
    flops_per_element: int
    formula: str
    reference: Callable        # (inputs) -> reference tensor
    torch: Callable            # (inputs) -> zero-argument callable
    triton: Callable           # (kernels.stream module, inputs) -> zero-argument callable
    error: Callable = _fp32_error
    extra_outputs: tuple[str, ...] = ()   # scalar outputs beside the n-element arrays
    check_memory: Callable = _fp32_check_memory   # (n, itemsize) -> peak bytes of its reference and check
    tolerance_factor: float = STREAM_FACTOR   # of bench/measure/tolerance.py's figure
    inouts: tuple[str, ...] = ()   # arrays read and written in place (a += ...)
    repeats: str = ""     # the kernel whose traffic class this one repeats: not run on a GPU or in a quick run
    quick: bool = True    # False: full runs only (no roof a quick run derives needs it)
    torch_doc: str = "one torch out= op"   # what its torch impl launches


def _f(x, name):
    return x[name].float()


KINDS = (
    Kind("copy", ("a",), ("b",), 0, "b = a",
         reference=lambda x: x["a"], error=_exact_error, check_memory=_no_check_memory,
         torch=lambda x: lambda: x["b"].copy_(x["a"]),
         triton=lambda k, x: lambda: k.copy(x["a"], x["b"])),
    Kind("scale", ("a",), ("b",), 1, "b = s * a", repeats="copy",
         reference=lambda x: x["s"] * _f(x, "a"),
         torch=lambda x: lambda: torch.mul(x["a"], x["s"], out=x["b"]),
         triton=lambda k, x: lambda: k.scale(x["a"], x["b"], x["s"])),
    Kind("add", ("a", "b"), ("c",), 1, "c = a + b", repeats="triad",
         reference=lambda x: _f(x, "a") + _f(x, "b"),
         torch=lambda x: lambda: torch.add(x["a"], x["b"], out=x["c"]),
         triton=lambda k, x: lambda: k.add(x["a"], x["b"], x["c"])),
    Kind("triad", ("b", "c"), ("a",), 2, "a = b + s * c",
         reference=lambda x: _f(x, "b") + x["s"] * _f(x, "c"),
         torch=lambda x: lambda: torch.add(x["b"], x["c"], alpha=x["s"], out=x["a"]),
         triton=lambda k, x: lambda: k.triad(x["b"], x["c"], x["a"], x["s"])),
    Kind("read", ("a",), (), 1, "out = sum(a)",
         reference=lambda x: block_sum(x["a"]),
         torch=_torch_read,
         triton=_triton_read,
         extra_outputs=("out", "out_native"), error=_read_error, tolerance_factor=READ_TOLERANCE_FACTOR,
         check_memory=_sum_check_memory),
    Kind("write", (), ("b",), 0, "b = s",
         reference=lambda x: torch.tensor(x["s"], dtype=x["b"].dtype, device=x["b"].device), error=_exact_error,
         check_memory=_no_check_memory,
         torch=lambda x: lambda: x["b"].fill_(x["s"]),
         triton=lambda k, x: lambda: k.write(x["b"], x["s"])),
    # BabelStream's nstream: the timed calls keep adding to a, as BabelStream's own do (its values
    # grow, its timing does not); full runs only, as no roof a quick run derives needs its mix.
    # torch has no three-input elementwise op: its impl is two in-place passes (6 n w moved for the
    # 4 n w counted, so its GB/s reads low); Triton's is the one pass the formula counts
    Kind("nstream", ("b", "c"), (), 2, "a += b + s * c", inouts=("a",), quick=False,
         reference=lambda x: x["a"].to(torch.float32, copy=True).add_(x["b"]).add_(x["c"], alpha=x["s"]),
         torch=lambda x: lambda: x["a"].add_(x["b"]).add_(x["c"], alpha=x["s"]),
         torch_doc="two in-place torch ops (a += b, then a += s c): 6 n w moved for the 4 n w counted",
         triton=lambda k, x: lambda: k.nstream(x["a"], x["b"], x["c"], x["s"])),
)


# On a GPU, scale moves copy's bytes in copy's directions (one read, one write; its multiply is
# free) and add moves triad's (two reads, one write): their rows repeat those kernels' points
# and no roof needs them, so a GPU runs copy and triad only (ARCHITECTURE.md rule 15).
GPU_REPEATS = {k.name: k.repeats for k in KINDS if k.repeats}


def reads(kind: Kind) -> tuple[str, ...]:
    """Return the arrays the kernel reads: its ins and in-outs."""
    return kind.ins + kind.inouts


def writes(kind: Kind) -> tuple[str, ...]:
    """Return the arrays the kernel writes: its outs and in-outs."""
    return kind.outs + kind.inouts


def arrays(kind: Kind) -> int:
    """Return how many n-element arrays are resident while the kernel runs: each once."""
    return len(kind.ins) + len(kind.outs) + len(kind.inouts)


def traffic_arrays(kind: Kind) -> int:
    """Return how many n-element arrays' bytes one call moves: reads + writes (an in-out twice)."""
    return len(reads(kind)) + len(writes(kind))


def round_elements(n: int) -> int:
    """Return n rounded down to a multiple of ELEMENT_MULTIPLE (at least one multiple)."""
    return max(ELEMENT_MULTIPLE, n // ELEMENT_MULTIPLE * ELEMENT_MULTIPLE)


def elements(kind: Kind, point) -> int:
    """Return n = working-set target // (resident arrays x itemsize), rounded down to a multiple of 64."""
    return round_elements(point["ws_bytes"] // (arrays(kind) * itemsize(point["dtype"])))


def stream_working_set(kind: Kind, point) -> int:
    """Return the bytes resident = resident arrays x n x itemsize."""
    return arrays(kind) * elements(kind, point) * itemsize(point["dtype"])


def stream_bytes(kind: Kind, point) -> int:
    """Return compulsory traffic = (reads + writes) x n x itemsize (copy/scale 2, add/triad 3, read/write 1)."""
    return traffic_arrays(kind) * elements(kind, point) * itemsize(point["dtype"])


def stream_write_bytes(kind: Kind, point) -> int:
    """Return the written part of stream_bytes: len(writes) x n x itemsize (n w, or 0 for read)."""
    return len(writes(kind)) * elements(kind, point) * itemsize(point["dtype"])


def stream_flops(kind: Kind, point) -> int:
    """Return flops_per_element x n (scale, add, read 1; triad 2; copy, write 0)."""
    return kind.flops_per_element * elements(kind, point)


def dtype_sweep(device, quick: bool, kind: Kind | None = None) -> tuple:
    """Return the element types: QUICK_DTYPES in quick runs (CPU_QUICK_DTYPES on a CPU),
    GPU_DTYPES on a GPU, else DTYPES;
    none for a kind that repeats another's traffic class (Kind.repeats, GPU_REPEATS: scale
    moves copy's bytes, add triad's) on a GPU or in a quick run, nor for a full-run-only kind
    (Kind.quick False) in a quick run."""
    if kind is not None and (((device.kind == "cuda" or quick) and kind.repeats) or (quick and not kind.quick)):
        return ()
    if quick:
        return CPU_QUICK_DTYPES if device.kind == "cpu" else QUICK_DTYPES
    return GPU_DTYPES if device.kind == "cuda" else DTYPES



def _stream_stop(history, device) -> str | None:
    return offchip_settled([(p["ws_bytes"], r) for p, r in history], offchip_floor(device))


def random_pool(n: int, dtype, device) -> torch.Tensor:
    """Return at least n normal values of dtype on device, from a pool held once per
    (dtype, device) (bench/measure/memory.py) and regrown to exactly n only when a larger sweep point
    needs more, so a sweep's inputs are not made again for every kernel, size, impl and
    mode; the runner releases it when no later point of the plan uses it (rule 16). The
    pool is filled at copy speed from a repeated random block (bench/measure/inputs.py): the values
    do not change a stream kernel's timing, they are never all zeros, and two arrays sliced
    from it hold other values at every index."""
    if str(device) == "meta":  # shapes without data (bench/aot/table.py plans on the meta device)
        return torch.empty(n, dtype=dtype, device="meta")
    return memory.pool(pool_key(dtype, device), n, lambda k: tiled_normal((k,), dtype, device, seed=1234))


def output_pool(n: int, dtype, device) -> torch.Tensor:
    """Return at least n elements of dtype on device for a point's outputs, from a pool held
    like the random pool (out_pool_key): a fresh multi-MiB array costs a page fault per 4 KiB
    page on its first touch, several times its write time on a VM, once per point; the pool
    pays it once per growth. Its contents never matter: the gate poisons every output before
    the kernel runs, so a value left by an earlier point cannot pass for a result."""
    if str(device) == "meta":
        return torch.empty(n, dtype=dtype, device="meta")
    return memory.pool(out_pool_key(dtype, device), n, lambda k: torch.empty(k, dtype=dtype, device=device))


def pool_key(dtype, device) -> tuple:
    return ("stream", str(dtype).replace("torch.", ""), str(torch.device(device)))


def out_pool_key(dtype, device) -> tuple:
    return ("stream.out", str(dtype).replace("torch.", ""), str(torch.device(device)))


def stream_pools(kind: Kind, point, device) -> dict:
    """Return {pool key: bytes} a point's arrays slice: reads x n x w from the random pool (an
    in-out's starting values too), writes x n x w from the output pool."""
    n, w, out = elements(kind, point), itemsize(point["dtype"]), {}
    if reads(kind):
        out[pool_key(point["dtype"], device)] = len(reads(kind)) * n * w
    if writes(kind):
        out[out_pool_key(point["dtype"], device)] = len(writes(kind)) * n * w
    return out


def stream_memory(kind: Kind, point) -> int:
    """Return the peak bytes of a point beyond its pools: its kind's check_memory (the
    reference and the check at their peak) and the gate's copy of each in-out array (n w)."""
    n, w = elements(kind, point), itemsize(point["dtype"])
    return kind.check_memory(n, w) + len(kind.inouts) * n * w


def make_stream_inputs(kind: Kind, point, device) -> dict:
    """Return the arrays of kind at point and the scalar s: ins are disjoint slices of the
    dtype's random pool (kernels never write them), outs disjoint slices of its output
    pool (the gate poisons them), and an in-out a slice of the output pool that starts as a
    copy of its own slice of the random pool (the kernel writes it; the pool stays as made)."""
    n, dt = elements(kind, point), getattr(torch, point["dtype"])
    inputs = {}
    if reads(kind):  # (a write reads nothing: no random pool of its size, which stream_pools does not count)
        pool = random_pool(n * len(reads(kind)), dt, device)
        inputs = {name: pool[i * n:(i + 1) * n] for i, name in enumerate(reads(kind))}
    if writes(kind):
        outs = output_pool(n * len(writes(kind)), dt, device)
        for i, name in enumerate(writes(kind)):
            inputs[name] = (outs[i * n:(i + 1) * n].copy_(inputs[name]) if name in kind.inouts
                            else outs[i * n:(i + 1) * n])
    if kind.name == "read":
        # the Triton impl's output, its per-program partial sums, is made by its launcher (_triton_read)
        inputs["out_native"] = torch.empty((), dtype=dt, device=device)  # torch.sum's own dtype
    inputs["s"] = SCALAR
    return inputs


def stream_tolerance(kind: Kind, point) -> float:
    """Return the dtype's tolerance x the kind's factor (STREAM_FACTOR; the read's READ_TOLERANCE_FACTOR)."""
    return tolerance(point["dtype"], kind.tolerance_factor)


def _register(kind: Kind):
    op = REGISTRY.add_op(Op(
        name=f"stream.{kind.name}", family="stream",
        doc=(f"{kind.formula}; bytes = {traffic_arrays(kind)} n w ({len(writes(kind))} n w written), "
             f"working set {arrays(kind)} n w, flops = {kind.flops_per_element} n"),
        axes=(
            Axis("dtype", sweep=lambda d, q: dtype_sweep(d, q, kind),
                 doc="element type (the values: this device's sweep)"
                 + (f"; none on a GPU, where it repeats {kind.repeats}" if kind.repeats else "")
                 + ("; none in a quick run" if not kind.quick else "")),
            Axis("ws_bytes", sweep=ws_sweep,
                 doc="working set in bytes (every array resident), geometric until the off-chip rate settles"),
        ),
        make_inputs=lambda p, d: make_stream_inputs(kind, p, d),
        reference=kind.reference,
        flops=lambda p: stream_flops(kind, p),
        bytes=lambda p: stream_bytes(kind, p),
        write_bytes=lambda p: stream_write_bytes(kind, p),
        working_set=lambda p: stream_working_set(kind, p),
        describe=lambda p: (elements(kind, p), f"({elements(kind, p)},)"),
        tolerance=lambda p: stream_tolerance(kind, p),
        outputs=kind.outs + kind.extra_outputs,
        inouts=kind.inouts,
        error=kind.error,
        memory=lambda p: stream_memory(kind, p),
        pools=lambda p, d: stream_pools(kind, p, d),
        sweep_stop=_stream_stop,
    ))

    def triton_launcher(x, ctx):
        from kernels import stream as k  # deferred: kernels/ imports Triton, which is optional (Linux only)
        return kind.triton(k, x)

    REGISTRY.add_impl(Impl(op.name, "torch", "torch", lambda x, ctx: kind.torch(x), doc=kind.torch_doc))
    REGISTRY.add_impl(Impl(op.name, "triton", "triton", triton_launcher, doc="kernels/stream.py"))


for _kind in KINDS:
    _register(_kind)


# ---- reread: the cache roofs ----------------------------------------------------------------

def reread_elements(point) -> int:
    """Return n = ws_bytes // itemsize, rounded down to a multiple of 64."""
    return round_elements(point["ws_bytes"] // itemsize(point["dtype"]))


def reread_repeats(point) -> int:
    """Return R = ceil(call_bytes / (n w)): the passes over the buffer in one call."""
    return max(1, math.ceil(point["call_bytes"] / (reread_elements(point) * itemsize(point["dtype"]))))


def reread_bytes(point) -> int:
    """Return R n w: every pass reads the whole buffer once (the scalar result is not counted)."""
    return reread_repeats(point) * reread_elements(point) * itemsize(point["dtype"])


def reread_sweep(device, quick: bool) -> list[int]:
    """Return buffer sizes from 16 KiB (1 MiB on a GPU, whose L1 roof is probe.l1's) to 2x
    the last-level cache, two per octave in quick runs too (a point costs a tenth of a
    second, and a cache's window holds only a few octaves): every cache level's plateau and
    the first step past the last one."""
    lo = 2**20 if device.kind == "cuda" else 16 * 2**10  # on a GPU the L1 is probe.l1's: reread starts in L2
    sizes = geometric(lo, 2 * device.llc_bytes, 2)
    return with_sizes(sizes, around_caches(device, lo, sizes[-1]))


def reread_inputs(point, device) -> dict:
    """Return the buffer (random, never zeros: normals for fp32, integers up to +-1000 for
    int32) and the scalar outputs."""
    n = reread_elements(point)
    gen = torch.Generator(device=device).manual_seed(4242)
    if point["dtype"] == "int32":
        a = torch.randint(-1000, 1001, (n,), dtype=torch.int32, device=device, generator=gen)
    else:
        a = torch.randn(n, dtype=torch.float32, device=device, generator=gen)
    return {"a": a, "repeats": reread_repeats(point),  # the Triton impl's "out" is made by its launcher
            "out_native": torch.empty((), dtype=a.dtype, device=device)}   # torch's


def wrap_int32(v: int) -> int:
    """Return v modulo 2**32 as a signed 32-bit value: what int32 adds give, in any order."""
    return (v + 2**31) % 2**32 - 2**31


def reread_reference(x) -> torch.Tensor:
    """Return R x sum(a) in float64; for int32, exactly, wrapped to 32 bits as the kernels'
    own integer adds wrap (addition modulo 2**32 is exact in any order)."""
    a, reps = x["a"], x["repeats"]
    if a.dtype == torch.int32:
        return torch.tensor(float(wrap_int32(reps * int(block_sum(a).item()))), dtype=torch.float64)
    return block_sum(a) * reps


def reread_error(out, ref, x) -> float:
    """Return, for int32, 0 when the wrapped sum is exact and 1 otherwise; for float32,
    |sum(out) - ref| / (R ||a||_2). out is torch's 0-d sum or the Triton kernel's per-program
    partial sums, added here (int32 partials in int64, then wrapped as int32 adds wrap)."""
    if x["a"].dtype == torch.int32:
        return 0.0 if wrap_int32(int(out.long().sum().item())) == int(ref.item()) else 1.0
    norm = torch.linalg.vector_norm(x["a"], dtype=torch.float32).item()  # a scale: fp32 is exact enough
    return abs(out.double().sum().item() - ref.item()) / max(x["repeats"] * norm, 1e-300)


def resident_sum(a: torch.Tensor, reps: int, parts: int, out: torch.Tensor):
    """Return a call that sums a, split into `parts` contiguous spans, each span read `reps`
    times through a stride-0 view (one torch reduction, no per-pass call), into out: every
    thread rereads only its own span, so the spans stay in the caches they fit."""
    m = a.numel() // parts
    view = a.as_strided((parts, reps, m), (m, 0, 1))
    partial = torch.empty(parts, dtype=a.dtype, device=a.device)

    def fn():
        torch.sum(view, dim=(1, 2), out=partial)
        return torch.sum(partial, dim=0, out=out)
    return fn


def _reread_torch(x, ctx):
    """Split the buffer into one contiguous chunk per thread (CPU) and sum a view that
    repeats each chunk R times with stride 0 (resident_sum): the working set spreads over
    the cores' private caches as a stream kernel's does."""
    a, reps = x["a"], x["repeats"]
    parts = torch.get_num_threads() if a.device.type == "cpu" else 1
    while a.numel() % parts:
        parts -= 1
    fn = resident_sum(a, reps, parts, x["out_native"])
    fn.detail = f"{parts} chunk(s) x {reps} passes"
    return fn


def _reread_triton(x, ctx):
    """The L2 probe (kernels/probes.py l2_reread): the R x nblocks block-reads
    dealt to a persistent grid, several independent L1-bypassing loads in flight each."""
    from kernels import probes as k  # deferred: kernels/ imports Triton, which is optional (Linux only)
    device = getattr(ctx, "device", None)
    sms = int(device.compute_units or 1) if getattr(device, "kind", "") == "cuda" else None
    programs = k.l2_programs(sms, x["a"].numel(), x["repeats"])
    x["out"] = k.l2_partials(x["a"], programs)  # setup: one slot per program; the call is one launch
    fn = lambda: k.l2_reread(x["a"], x["out"], x["repeats"])  # noqa: E731
    fn.detail = (f"{x['repeats']} passes on {programs} programs, {k.L2_UNROLL} x {k.L2_BLOCK}-element "
                 f"L1-bypassing (.cg) loads in flight per program")
    return fn


REGISTRY.add_op(Op(
    name="stream.reread", family="stream",
    doc="out = R x sum(a), a read R times in one call (call_bytes per call); bytes = R n w, flops = R n",
    axes=(Axis("dtype", REREAD_DTYPES, ("int32",), doc="int32 or float32"),
          Axis("ws_bytes", sweep=reread_sweep, doc="buffer size, geometric"),
          Axis("call_bytes", sweep=lambda d, q: (REREAD_CALL_BYTES[d.kind],), doc="bytes one call reads (R n w)")),
    make_inputs=reread_inputs, reference=reread_reference,
    flops=lambda p: reread_repeats(p) * reread_elements(p),
    bytes=reread_bytes,
    write_bytes=lambda p: 0,  # read only: the scalar result is not counted
    working_set=lambda p: reread_elements(p) * itemsize(p["dtype"]),
    describe=lambda p: (reread_elements(p), f"({reread_elements(p)},)x{reread_repeats(p)}"),
    tolerance=lambda p: tolerance(p["dtype"], REREAD_FP32_FACTOR),  # int32: exact (0)
    outputs=("out", "out_native"), error=reread_error, memory_factor=3.0, cost_group="stream.reread",
))
REGISTRY.add_impl(Impl("stream.reread", "torch", "torch", _reread_torch,
                       doc="torch.sum over a stride-0 view that repeats each thread's chunk R times"))
def _reread_triton_skip(point, device):
    if triton_interpreting():
        return ("its hundreds of MiB per call are far too many for Triton's interpreter; "
                "tests/test_probes.py checks the kernel (kernels/probes.py l2_reread) with few passes")
    return None


REGISTRY.add_impl(Impl("stream.reread", "triton", "triton", _reread_triton, skip=_reread_triton_skip,
                       doc="kernels/probes.py l2_reread: block-reads dealt to a persistent grid, "
                           "4 independent .cg loads per step"))
