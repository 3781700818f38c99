"""GEMV decode family: y = x @ W^T for one decode step, batch 1 up to past the ridge.

W is a linear layer's weight, stored (N out, K in). Shapes come from real decoder layers
(LAYERS, as data) and plain squares; the batch grows 1, 2, 4, ... 256. Weight formats:

    fp16, bf16  16-bit weights
    int8        int8 weights, fp32 scale per output channel
    fp8         e4m3 weights, fp32 scale per output channel
    int4        two 4-bit values per byte along K, fp16 scale per group of 128 along K

Quantized weights are dequantized inside the kernel; activations and outputs stay 16-bit:
fp16 for fp16 weights, bf16 otherwise (int8 and e4m3 values are exact in bf16, and bf16 is
the fast 16-bit path of CPUs as well as GPUs). Counts:

    flops = 2 B N K
    bytes = N K bits/8 (weights at their stored width) + scales (int8/fp8: 4 N;
            int4: 2 N K/128) + 2 B K (activations read) + 2 B N (outputs written)
    written = 2 B N                     (the rest, weights, scales and activations, is read)

The points are timed cold (caches flushed before every sample), so the weights come from
DRAM/HBM as they do in a real decode step, where each layer's weights are read once per token.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from bench.measure.inputs import tiled_normal
from bench.measure.registry import (
    F64_BLOCK_BYTES,
    PROJECTION_VECTORS,
    REGISTRY,
    Axis,
    Impl,
    Op,
    Projection,
    f64_rows_product,
    f64_weighted_rows,
)
from bench.measure.tolerance import tolerance
from bench.ops._tune import Tuning, compute_capability, run_tuning
from bench.ops.traffic import gemv_rows_level_bytes, gemv_tile_level_bytes
from bench.util import Reason, first_line

GROUP = 128


@dataclass(frozen=True)
class WeightFormat:
    name: str
    bits: int
    act: str                 # activation and output dtype
    precision: str           # the compute roof that bounds it: the 16-bit math it runs in
    scale_bytes_per: str     # "channel" (4 bytes per output row), "group" (2 bytes per 128 of K), ""
    doc: str

    @property
    def tolerance(self) -> float:
        """Return the gate's tolerance for the output's precision (bench/measure/tolerance.py)."""
        return tolerance(self.precision)


FORMATS = {f.name: f for f in (
    WeightFormat("fp16", 16, "float16", "fp16", "", "fp16 weights"),
    WeightFormat("bf16", 16, "bfloat16", "bf16", "", "bf16 weights"),
    WeightFormat("int8", 8, "bfloat16", "bf16", "channel", "int8 weight-only, fp32 per-channel scales"),
    WeightFormat("fp8", 8, "bfloat16", "bf16", "channel", "fp8 e4m3 weight-only, fp32 per-channel scales"),
    WeightFormat("int4", 4, "bfloat16", "bf16", "group", "int4 weight-only, fp16 scales per 128 along K"),
)}

# (N, K) of real layers. llama8b: hidden 4096, 32 query heads and 8 KV heads of 128, FFN
# 14336, vocabulary 128256 (Llama-3-8B's shapes); llama70b: hidden 8192, 64 and 8 heads
# of 128, FFN 28672 (Llama-3-70B's). gate_up is the fused gate and up projection.
LAYERS = {
    "llama8b.qkv": (4096 + 2 * 1024, 4096),
    "llama8b.o": (4096, 4096),
    "llama8b.gate_up": (2 * 14336, 4096),
    "llama8b.down": (4096, 14336),
    "llama8b.lm_head": (128256, 4096),
    "llama70b.qkv": (8192 + 2 * 1024, 8192),
    "llama70b.o": (8192, 8192),
    "llama70b.gate_up": (2 * 28672, 8192),
    "llama70b.down": (8192, 28672),
    "llama70b.lm_head": (128256, 8192),
    "square1024": (1024, 1024),
    "square4096": (4096, 4096),
    "square8192": (8192, 8192),
}
# Per device kind, (quick, full): a CPU gets the layers its memory and time allow. A GPU's full
# sweep leaves out what repeats a shape or a plateau (so that a full H200 run fits ten minutes,
# ARCHITECTURE.md rule 15): square4096 and square8192 are llama8b.o's and llama70b.o's exact
# shapes; square1024 (2 MiB of bf16 weights) reads in about a microsecond, the launch floor,
# not memory; llama70b.qkv, .o, .gate_up and .lm_head stream 128 MiB to 2 GiB of weights from
# HBM at every format, the plateau that llama8b.down, .gate_up, .lm_head and llama70b.down
# already span (112 MiB to 1 GiB in bf16, 28 to 250 MiB in int4).
LAYER_SWEEP = {
    "cpu": (("llama8b.o", "llama8b.down"),
            ("square1024", "llama8b.qkv", "llama8b.o", "llama8b.gate_up", "llama8b.down")),
    "cuda": (("llama8b.qkv", "llama8b.down", "llama8b.lm_head"),
             ("llama8b.qkv", "llama8b.o", "llama8b.gate_up", "llama8b.down", "llama8b.lm_head", "llama70b.down")),
}
# Batches 2, 8 and 32 are left out: up to 64 rows a decode step is memory-bound on every
# device here (bf16 weights: B FLOP per weight byte, against ridges of 60-200), so its time is
# the weights' read and 2, 8 and 32 repeat their neighbours 1, 4, 16 and 64; from 64 to 256,
# around the ridge, every octave stays.
BATCHES = (1, 4, 16, 64, 128, 256)
QUICK_BATCHES = (1, 16, 256)
MAX_BATCH = max(BATCHES)


def weight_bytes(n: int, k: int, fmt: str) -> int:
    """Return the stored weight bytes plus scales: N K bits/8 + (4 N | 2 N K/128 | 0)."""
    f = FORMATS[fmt]
    scales = {"channel": 4 * n, "group": 2 * n * (k // GROUP), "": 0}[f.scale_bytes_per]
    return n * k * f.bits // 8 + scales


def gemv_bytes(b: int, n: int, k: int, fmt: str) -> int:
    """Return weights + scales + 2 B K activations read + 2 B N outputs written."""
    return weight_bytes(n, k, fmt) + 2 * b * k + 2 * b * n


def best_bytes(point) -> int:
    """Return torch_best's traffic: gemv_bytes, except that torch's int4 layout stores a bf16
    scale and a bf16 zero point per group (4 bytes per 128 of K, not the format's 2)."""
    b, n, k = _bnk(point)
    extra = 2 * n * (k // GROUP) if point["dtype"] == "int4" else 0
    return gemv_bytes(b, n, k, point["dtype"]) + extra


def gemv_flops(b: int, n: int, k: int) -> int:
    """Return 2 B N K."""
    return 2 * b * n * k


def _bnk(point):
    n, k = LAYERS[point["layer"]]
    return point["batch"], n, k


def layer_sweep(device, quick):
    return LAYER_SWEEP[device.kind][0 if quick else 1]


CPU_QUICK_FORMATS = ("bf16", "int8", "int4")   # a CPU's quick run: 16-bit, 8-bit and 4-bit weights once each


def format_sweep(device, quick):
    """Return the weight formats: all of them on a CPU (CPU_QUICK_FORMATS in a quick run: fp16
    repeats bf16's bytes through a slower path, fp8 int8's); on a GPU all but fp16, whose
    weights move bf16's bytes at bf16's tensor-core rate on every GPU here (ARCHITECTURE.md
    rule 15)."""
    if device.kind == "cpu" and quick:
        return CPU_QUICK_FORMATS
    return tuple(f for f in FORMATS if device.kind != "cuda" or f != "fp16")


# ---- weights, inputs and reference -----------------------------------------------------------

@functools.lru_cache(maxsize=2)
def raw_weights(n: int, k: int, device: str) -> torch.Tensor:
    """Return the fp32 weights of an (N, K) layer (normals x 0.05, at copy speed from
    bench/measure/inputs.py's repeated prime-length block: no two rows alike), made once and
    shared by every format quantized from them (the layer is the sweep's outermost axis)."""
    return tiled_normal((n, k), torch.float32, device, seed=99).mul_(0.05)


@functools.lru_cache(maxsize=1)
def make_weights(n: int, k: int, fmt: str, device: str):
    """Return (stored weight, scale or None, dequantized weight) of an (N, K) layer, kept
    while consecutive points (the batch sweep) reuse them. The dequantized weights are the
    stored values times their scales, computed in fp32 (exact there for 16-bit, int4 x an
    fp16 scale and fp8 values; within one fp32 rounding for int8 x an fp32 scale), or the
    stored 16-bit weights themselves; the reference widens them to float64 a block of rows
    at a time (f64_rows_product), never as one N x K float64 copy: a fresh array that size
    costs more in first-touch page faults than the product it feeds."""
    from kernels.gemv import pack_int4  # deferred: kernels/ imports Triton, which is optional (Linux only)
    f = FORMATS[fmt]
    w = raw_weights(n, k, device)
    if f.bits == 16:
        stored = w.to(getattr(torch, f.act))
        return stored, None, stored
    if fmt == "int4":
        g = w.view(n, k // GROUP, GROUP)
        scale = (torch.linalg.vector_norm(g, float("inf"), dim=-1) / 7).to(torch.float16)  # (N, K/G)
        s32 = scale.float()[..., None]
        t = torch.div(g, s32).round_().clamp_(-8, 7)  # the int4 values, held in fp32 (exactly)
        q = t.to(torch.int8).view(n, k)
        return pack_int4(q), scale, t.mul_(s32).view(n, k)
    if fmt == "int8":
        scale = torch.linalg.vector_norm(w, float("inf"), dim=1) / 127
        t = torch.div(w, scale[:, None]).round_().clamp_(-127, 127)  # the int8 values, held in fp32
        q = t.to(torch.int8)
    else:  # fp8 e4m3
        scale = torch.linalg.vector_norm(w, float("inf"), dim=1) / torch.finfo(torch.float8_e4m3fn).max
        t = torch.div(w, scale[:, None])
        q = t.to(torch.float8_e4m3fn)
        t.copy_(q)  # the e4m3 values, held in fp32 (exactly)
    return q, scale, t.mul_(scale[:, None])


def _draw_activations(b: int, k: int, act: str, device: str) -> torch.Tensor:
    gen = torch.Generator(device=device).manual_seed(7)
    return torch.randn(b, k, device=device, generator=gen).to(getattr(torch, act))


@functools.lru_cache(maxsize=2)
def activations(k: int, act: str, device: str) -> torch.Tensor:
    """Return MAX_BATCH rows of K activations (normals, in act): a batch of B decodes the
    first B rows, so every batch of a sweep shares its rows and their reference."""
    return _draw_activations(MAX_BATCH, k, act, device)


def make_inputs(point, device):
    return build_inputs(*_bnk(point), point["dtype"], device)


def build_inputs(b, n, k, fmt, device):
    f = FORMATS[fmt]
    w, scale, deq = make_weights(n, k, fmt, device)
    act = getattr(torch, f.act)
    rows = activations(k, f.act, device) if b <= MAX_BATCH else None
    x = rows[:b] if rows is not None else _draw_activations(b, k, f.act, device)
    return {"x": x, "rows": rows, "w": w, "scale": scale, "deq": deq, "layer": (n, k, fmt, str(device)),
            "y": torch.empty(b, n, dtype=act, device=device),
            "workspace": torch.empty(n, dtype=torch.float32, device=device), "format": f.name}


_REFERENCE: dict = {}  # the last layer's float64 reference rows: {"rows": activations, "deq": ..., "out": ...}


PROJECT_FROM_BATCH = 16  # a larger batch is checked by projection (bench.measure.registry.Projection)
def reference(x):
    """Return x @ dequant(W)^T in float64; for a batch over PROJECT_FROM_BATCH rows its
    Projection (Freivalds' check, O(N K) where the product is O(B N K)). When x is the first B rows of the shared
    activations, the rows already computed for a smaller batch of the same layer and
    format are reused and only the new ones computed: a batch sweep costs one MAX_BATCH-row
    float64 product, not one per batch."""
    xs, deq, rows = x["x"], x["deq"], x.get("rows")
    if xs.shape[0] > PROJECT_FROM_BATCH:  # Freivalds' check: x (W^T X) for random X, O(N K), not O(B N K)
        gen = torch.Generator(device=deq.device).manual_seed(2718)
        directions = torch.randn(deq.shape[0], PROJECTION_VECTORS, generator=gen, device=deq.device,
                                 dtype=torch.float64)
        return Projection(directions, xs.double() @ f64_weighted_rows(deq, directions))
    if rows is None or xs.data_ptr() != rows.data_ptr():
        return f64_rows_product(xs.double(), deq)
    c = _REFERENCE
    if c.get("rows") is not rows or c.get("deq") is not deq:  # another layer or format
        c.clear()
        c.update(rows=rows, deq=deq, out=torch.empty(0, deq.shape[0], dtype=torch.float64, device=deq.device))
    b, have = xs.shape[0], c["out"].shape[0]
    if have < b:
        c["out"] = torch.cat([c["out"], f64_rows_product(rows[have:b].double(), deq)])
    return c["out"][:b]


# bytes per weight (N K) a point may add at its peak beyond what is already held: the fp32 raw
# weights (4) and, quantized, the fp32 dequantized ones (4); int4 also its packed bytes (0.5) and
# torch's CPU packing's int32 copies (8.5, cpu_int4_pack); int8 and fp8 their stored bytes (1) and
# the baseline's per-call 16-bit dequantize (4); 16-bit weights their stored copy (2)
PEAK_PER_WEIGHT = {4: 17.0, 8: 13.0, 16: 6.0}


def gemv_memory(point) -> int:
    """Return a point's peak bytes (Op.memory): PEAK_PER_WEIGHT x N K, the float64 reference's
    widened block of rows (F64_BLOCK_BYTES) and rows (B K and MAX_BATCH N, 8 bytes each), the
    16-bit activations (MAX_BATCH K) and outputs (B N)."""
    b, n, k = _bnk(point)
    return int(PEAK_PER_WEIGHT[FORMATS[point["dtype"]].bits] * n * k + F64_BLOCK_BYTES
               + 8 * (b * k + MAX_BATCH * n) + 2 * (MAX_BATCH * k + b * n))


def release_caches() -> None:
    """Drop the weights, activations and reference rows kept across points: the runner calls
    it once no later point of the plan is a GEMV (Op.release; ARCHITECTURE.md, rule 16)."""
    for cached in (raw_weights, make_weights, activations, cpu_int4_pack):
        cached.cache_clear()
    _REFERENCE.clear()


# ---- implementations -----------------------------------------------------------------------

def dequantize(w, scale, fmt: str, dtype):
    """Return the dense (N, K) weights in dtype, the way a straightforward torch program does."""
    from kernels.gemv import unpack_int4  # deferred: kernels/ imports Triton, which is optional (Linux only)
    if fmt == "int4":
        q = unpack_int4(w).to(dtype)
        n, k = q.shape
        return (q.view(n, k // GROUP, GROUP) * scale.to(dtype)[..., None]).view(n, k)
    if scale is None:
        return w
    return w.to(dtype) * scale.to(dtype)[:, None]


def _torch_baseline(x, ctx=None):
    """Dequantize, then one matmul: the naive path, and for 16-bit weights the only one."""
    xs, w, s, y, fmt = x["x"], x["w"], x["scale"], x["y"], x["format"]
    if s is None:
        return lambda: torch.mm(xs, w.t(), out=y)
    return lambda: torch.mm(xs, dequantize(w, s, fmt, xs.dtype).t(), out=y)


def _torch_best(x, ctx=None):
    xs, w, s, fmt = x["x"], x["w"], x["scale"], x["format"]
    if fmt == "int8":
        s16 = s.to(xs.dtype)
        return lambda: torch._weight_int8pack_mm(xs, w, s16)
    if fmt == "int4":  # CPU: torch's own packing, built outside the timed region, once per layer
        packed, sz = cpu_int4_pack(*x["layer"], xs.dtype)
        return lambda: torch._weight_int4pack_mm_for_cpu(xs, packed, GROUP, sz)
    raise NotImplementedError(f"no torch fast path for {fmt}")


@functools.lru_cache(maxsize=1)
def cpu_int4_pack(n: int, k: int, fmt: str, device: str, act):
    """Return (torch's CPU int4 layout of the layer's weights, its (K/G, N, 2) scales and zero
    points in act), made once per layer and shared by every batch of the sweep."""
    from kernels.gemv import unpack_int4  # deferred: kernels/ imports Triton, which is optional (Linux only)
    w, s, _ = make_weights(n, k, fmt, device)
    packed = torch._convert_weight_to_int4pack_for_cpu(unpack_int4(w).to(torch.int32) + 8, 1)
    sz = torch.stack([s.t().to(act), torch.zeros_like(s.t(), dtype=act)], dim=-1).contiguous()
    return packed, sz


@functools.cache
def _probe_best(fmt: str, torch_device: str) -> str | None:
    """Return why torch's fast path for fmt fails on a tiny problem here, or None."""
    try:
        x = build_inputs(2, 64, 256, fmt, torch_device)
        out = _torch_best(x)()
        err = ((out.double() - reference(x)).norm() / reference(x).norm()).item()
        return None if err < 0.05 else f"torch's {fmt} fast path gives wrong results here (error {err:.2g})"
    except Exception as e:
        return f"torch has no working {fmt} weight-only matmul here ({first_line(e, 160)})"


def best_skip(point, device):
    fmt = point["dtype"]
    if FORMATS[fmt].bits == 16:
        return "for 16-bit weights torch's best path is the baseline matmul"
    if fmt == "fp8":
        return Reason("torch has no fp8 weight-only matmul (its fp8 GEMM quantizes activations too); the baseline "
                      "dequantizes", "no_fp8_weight_only")
    if fmt == "int4" and device.kind == "cuda":
        return "torch's CUDA int4 path needs its tiled weight layout and bf16 activations; not wired here"
    return _probe_best(fmt, device.torch_device)


INTERPRETER_ROW = (16, 256, 2)
INTERPRETER_TILE = (64, 128)


def _rows_call(x, cfg):
    from kernels.gemv import gemv_rows  # deferred: kernels/ imports Triton, which is optional (Linux only)
    bn, bk, sk = cfg
    return lambda: gemv_rows(x["x"], x["w"], x["scale"], x["y"], GROUP, bn, bk, sk, x["workspace"])


def _tile_call(x, cfg):
    from kernels.gemv import gemv_tile  # deferred: kernels/ imports Triton, which is optional (Linux only)
    bn, bk = cfg
    return lambda: gemv_tile(x["x"], x["w"], x["scale"], x["y"], GROUP, bn, bk)


def _rows_tuning(x, ctx=None) -> Tuning:
    from kernels.gemv import ROW_CANDIDATES  # deferred: kernels/ imports Triton, which is optional (Linux only)
    key = ("rows", x["format"], tuple(x["x"].shape), tuple(x["w"].shape))
    return Tuning(key, ROW_CANDIDATES, INTERPRETER_ROW, lambda c: _rows_call(x, c))


def _tile_tuning(x, ctx=None) -> Tuning:
    from kernels.gemv import (  # deferred: kernels/ imports Triton, which is optional (Linux only)
        TILE_FALLBACK,
        tile_candidates,
        tile_config,
        tile_smem_bytes,
    )
    batch, bits = x["x"].shape[0], FORMATS[x["format"]].bits
    block_b, _ = tile_config(batch)
    cc = compute_capability(ctx)
    key = ("tile", x["format"], tuple(x["x"].shape), tuple(x["w"].shape))
    return Tuning(key, tile_candidates(batch, bits), INTERPRETER_TILE, lambda c: _tile_call(x, c),
                  smem=lambda c: tile_smem_bytes(block_b, c[0], c[1], bits, cc), fallback=TILE_FALLBACK)


def _level_bytes(x, name, cfg) -> dict:
    """Return the L2 bytes of the chosen tiles (bench/ops/traffic.py)."""
    (b, k), n = x["x"].shape, x["w"].shape[0]
    wb = weight_bytes(n, k, x["format"])
    if name == "rows":
        return gemv_rows_level_bytes(wb, n, k, cfg[0], cfg[2])
    return gemv_tile_level_bytes(wb, b, n, k, cfg[0])


def _launcher(tuning, name):
    def launcher(x, ctx=None):
        fn, cfg = run_tuning(x["x"], tuning(x, ctx), ctx)
        fn.detail = f"{name} {'x'.join(map(str, cfg))}"
        fn.level_bytes = _level_bytes(x, name, cfg)
        return fn
    return launcher


_rows_launcher, _tile_launcher = _launcher(_rows_tuning, "rows"), _launcher(_tile_tuning, "tile")


FP8_MIN_CC = (8, 9)  # Triton has no e4m3 ("fp8e4nv") type before sm_89: such a kernel does not compile


def triton_skip(point, device):
    """Return why a Triton GEMV kernel cannot run this point on this device (before
    anything compiles), or None."""
    cc = getattr(device, "compute_capability", None)
    if point["dtype"] == "fp8" and device.kind == "cuda" and cc:
        if tuple(int(v) for v in cc.split(".")) < FP8_MIN_CC:
            return (f"Triton compiles fp8 e4m3 weights for compute capability {FP8_MIN_CC[0]}.{FP8_MIN_CC[1]}+ "
                    f"only; this GPU is {cc}")
    return None


def rows_skip(point, device):
    if point["batch"] != 1:
        return "the row kernel is for batch 1; gemv/triton_tile covers larger batches"
    return triton_skip(point, device)


REGISTRY.add_op(Op(
    name="gemv.decode", family="gemv",
    doc="y = x W^T for one decode step; flops = 2 B N K, bytes = weights at stored width + scales + 2 B K + 2 B N",
    # layer outermost: each layer's fp32 weights are drawn once, each format quantized once
    axes=(Axis("layer", sweep=layer_sweep,
               doc="(N, K) of a decoder layer: " + ", ".join(f"{k} {v[0]}x{v[1]}" for k, v in LAYERS.items())),
          Axis("dtype", sweep=format_sweep, doc="weight format: " + ", ".join(FORMATS) + " (a GPU: fp16 left out)"),
          Axis("batch", BATCHES, QUICK_BATCHES, doc="decode batch B")),
    make_inputs=make_inputs, reference=reference,
    flops=lambda p: gemv_flops(*_bnk(p)),
    bytes=lambda p: gemv_bytes(*_bnk(p), p["dtype"]),
    write_bytes=lambda p: 2 * p["batch"] * LAYERS[p["layer"]][0],  # 2 B N: the 16-bit outputs
    working_set=lambda p: gemv_bytes(*_bnk(p), p["dtype"]),
    describe=lambda p: (p["batch"], "{}x{}x{}".format(*_bnk(p))),
    tolerance=lambda p: FORMATS[p["dtype"]].tolerance,
    outputs=("y",), modes=("cold",), precision=lambda p: FORMATS[p["dtype"]].precision,
    columns=lambda p: dict(zip(("n", "k"), LAYERS[p["layer"]])),
    memory=gemv_memory,  # the weights' fp32 and packed copies; float64 a block of rows at a time
    release=release_caches,
))
REGISTRY.add_impl(Impl("gemv.decode", "torch", "torch", _torch_baseline,
                       doc="dequantize in torch, then torch.mm (the straightforward baseline)"))
REGISTRY.add_impl(Impl("gemv.decode", "torch_best", "torch", _torch_best, skip=best_skip, bytes=best_bytes,
                       doc="torch's weight-only kernels: _weight_int8pack_mm, _weight_int4pack_mm_for_cpu"))
REGISTRY.add_impl(Impl("gemv.decode", "triton_rows", "triton", _rows_launcher, skip=rows_skip, tuning=_rows_tuning,
                       doc="kernels/gemv.py gemv_rows: batch 1, row-parallel with split-K"))
REGISTRY.add_impl(Impl("gemv.decode", "triton_tile", "triton", _tile_launcher, skip=triton_skip, tuning=_tile_tuning,
                       doc="kernels/gemv.py gemv_tile: the whole batch in one tensor-core tile"))
