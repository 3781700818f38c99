"""GEMM family: C = A @ B at every precision the device has, in three sweeps.

    gemm.square  M = N = K, growing until the device is full
    gemm.skinny  N and K fixed, M growing from 1: the point walks up the sloped roof
                 (intensity ~ M for small M) and onto the flat one; timed cold, so
                 B comes from DRAM/HBM each time
    gemm.search  the adaptive search for the best sustained throughput (the compute roof
                 takes the best over all three): squares growing by ~sqrt(2) in each layout
                 of B (SEARCH_LAYOUTS), until the rate stops rising (search_verdict: two sizes
                 in a row without a 3% gain over the best before them), the point budget
                 (rule 7) or the memory budget (rule 16) ends the sweep; a quick run's search
                 measures at most four sizes (Policy.quick_search_sizes)

Counts, for A (M, K), B (K, N) and C (M, N) at their stored widths:

    flops = 2 M N K                       (one multiply and one add per term)
    bytes = (M K + K N) w_in + M N w_out   (A and B read once, C written once;
                                            the two fp8 scales, 8 bytes, are not counted)
    written = M N w_out                    (the rest, (M K + K N) w_in, is read)

Inputs are random normal (never zeros: zeros run faster and draw less power on tensor
cores); fp8 inputs are scaled per tensor to fill the format's range and int8 inputs are
rounded normals times 32. The float64 reference uses the values actually stored
(dequantized for fp8), so the error measured is the kernel's, not the format's.
B is stored as (N, K) row-major and used transposed, as a linear layer stores weights
(layout "nt"); the search also tries B stored (K, N) row-major (layout "nn"), since a
library can be fastest in either (oneDNN's bf16 on CPUs wants "nt").
"""
from __future__ import annotations

import functools

import numpy as np
import torch

from bench import precisions
from bench.hw.units import cpu_missing_units
from bench.measure.registry import (
    PROJECTION_VECTORS,
    REGISTRY,
    Axis,
    Impl,
    LaunchContext,
    Op,
    Projection,
    f64_times,
)
from bench.ops._tune import Tuning, amd_gfx, autotune, compute_capability, run_tuning
from bench.ops.traffic import gemm_level_bytes
from bench.policy import DEFAULT
from bench.util import Reason, first_line, itemsize

# the precisions gemm.square, gemm.skinny and gemm.search measure: their rows of bench/precisions.py
# (storage and output dtypes, tolerance, the compute capability each needs, why a CPU lacks one)
PRECISIONS = {name: precisions.BY_NAME[name] for name in precisions.names(gemm="gemm")}
QUICK_PRECISIONS = tuple(PRECISIONS)
# A quick run on a CPU times the fixed square and skinny sweeps at the precisions its units
# run natively (the search still measures every precision's roof): fp16 and fp8 go through
# conversion on most CPUs, at a fraction of the rate, for seconds a point.
CPU_QUICK_SHAPE_PRECISIONS = ("fp32", "bf16", "int8")
# A quick run compiles and tunes the Triton GEMM where it is compared with the vendor
# library's roof that matters most on tensor cores (each precision is another ~20 compiles)
TRITON_QUICK_PRECISIONS = ("bf16", "fp8e4m3", "int8")


def gemm_flops(m: int, n: int, k: int) -> int:
    """Return 2 M N K."""
    return 2 * m * n * k


def gemm_bytes(m: int, n: int, k: int, precision: str) -> int:
    """Return (M K + K N) x input width + M N x output width."""
    p = PRECISIONS[precision]
    return (m * k + k * n) * itemsize(p.storage) + m * n * itemsize(p.out)


def gemm_write_bytes(m: int, n: int, k: int, precision: str) -> int:
    """Return M N x output width: the written part of gemm_bytes (C)."""
    return m * n * itemsize(PRECISIONS[precision].out)


def _mnk(point):
    return point["shape"]


# ---- sweeps, as data -------------------------------------------------------------------

SQUARE = {"cpu": ((128, 256, 512, 1024), (128, 256, 512, 1024, 2048, 4096)),
          "cuda": ((512, 2048, 8192), (256, 512, 1024, 2048, 4096, 8192, 12288, 16384))}
SKINNY_NK = {"cpu": (1024, 2048), "cuda": (8192, 8192)}
SEARCH_SIZES = {"cpu": (256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192),
                "cuda": (1024, 2048, 3072, 4096, 6144, 8192, 12288, 16384)}
SEARCH_LAYOUTS = ("nt", "nn")   # B stored (N, K) and used transposed; B stored (K, N)
SEARCH_MIN_BUDGET_S = 0.5       # a search point may take this long (rule 4's samples of a large
                                # GEMM do not fit 0.1 s); a quick run's search point, QUICK_SEARCH_BUDGET_S
QUICK_SEARCH_BUDGET_S = 0.25


def square_sweep(device, quick):
    return [(n, n, n) for n in SQUARE[device.kind][0 if quick else 1]]


def skinny_sweep(device, quick):
    """Return (M, N, K) with N = K fixed and M = 1, then x4 (quick) or x2 up to N; on a GPU
    quick runs step x8 from 16, so M is 1 or a multiple of 16 (fewer compiled variants)."""
    nk = SKINNY_NK[device.kind][0 if quick else 1]
    if quick and device.kind == "cuda":
        return [(m, nk, nk) for m in (1, 16, 128, 1024, nk)]
    step = 4 if quick else 2
    ms, m = [], 1
    while m <= nk:
        ms.append(m)
        m *= step
    if ms[-1] != nk:
        ms.append(nk)
    return [(m, nk, nk) for m in ms]


SEARCH_QUICK_FROM = {"cpu": 512, "cuda": 4096}


def search_layouts(device, quick):
    """Return the layouts of B the search tries: both on a CPU, where the BLAS libraries
    differ by layout (oneDNN's bf16 wants "nt"); on a GPU "nt" in quick runs (cuBLAS is as
    fast either way) and both in full runs."""
    return ("nt",) if device.kind == "cuda" and quick else SEARCH_LAYOUTS


def search_sweep(device, quick):
    """Return the squares the search may grow through, smallest first (it stops early:
    search_verdict); quick runs start higher (SEARCH_QUICK_FROM) and hold at most
    Policy.quick_search_sizes: a flat curve's noise reads as a gain now and then, and each
    size past the plan costs about 2.8x the last."""
    if not quick:
        return [(n, n, n) for n in SEARCH_SIZES[device.kind]]
    lo = SEARCH_QUICK_FROM[device.kind]
    return [(n, n, n) for n in SEARCH_SIZES[device.kind] if n >= lo][:DEFAULT.quick_search_sizes]


def search_verdict(rates, gain: float = DEFAULT.search_gain,
                   patience: int = DEFAULT.search_patience) -> tuple[bool, int]:
    """Return (stop, best) for a search's rates in order of size: best is the index of the
    highest rate (-1 for none); stop is True once the last `patience` rates each failed to
    beat the best rate before them by more than `gain` (the curve has flattened or fallen)."""
    if not rates:
        return False, -1
    best = max(range(len(rates)), key=lambda i: rates[i])
    top, stale = rates[0], 0
    for r in rates[1:]:
        stale = 0 if r > top * (1 + gain) else stale + 1
        top = max(top, r)
    return stale >= patience, best


def search_stop(history, device) -> str | None:
    """Return why the search grows no further (Op.sweep_stop), or None. history: the
    sweep's measured (point, FLOP/s) in order of size."""
    stop, best = search_verdict([r for _, r in history])
    if not stop:
        return None
    point, rate = history[best]
    return Reason(f"the rate stopped rising: {DEFAULT.search_patience} sizes without a {DEFAULT.search_gain:.0%} "
                  f"gain over the best, {rate / 1e9:.4g} GFLOP/s at {'x'.join(map(str, point['shape']))}",
                  "search_plateau")


# ---- inputs and reference --------------------------------------------------------------

def make_inputs(point, device):
    """Return A (M, K), B and C: B stored (N, K) and used transposed (layout "nt", every
    sweep's), or stored (K, N) row-major (layout "nn", the search's second layout)."""
    m, n, k = _mnk(point)
    p = PRECISIONS[point["dtype"]]
    gen = torch.Generator(device=device).manual_seed(4321)
    a = torch.randn(m, k, device=device, generator=gen)
    b = torch.randn(n, k, device=device, generator=gen)
    x = {"c": torch.empty(m, n, dtype=getattr(torch, p.out), device=device)}
    if p.scaled:
        fmax = torch.finfo(getattr(torch, p.storage)).max
        sa, sb = a.abs().max() / fmax, b.abs().max() / fmax
        x["a"], x["b_nk"] = (a / sa).to(getattr(torch, p.storage)), (b / sb).to(getattr(torch, p.storage))
        x["scale_a"], x["scale_b"] = sa.float(), sb.float()
        x["scales"] = torch.stack([x["scale_a"], x["scale_b"]])
    elif p.storage == "int8":
        x["a"] = (a * 32).round().clamp(-127, 127).to(torch.int8)
        x["b_nk"] = (b * 32).round().clamp(-127, 127).to(torch.int8)
    else:
        x["a"], x["b_nk"] = a.to(getattr(torch, p.storage)), b.to(getattr(torch, p.storage))
    x["b"] = x["b_nk"].t()  # (K, N), column-major
    if point.get("layout", "nt") == "nn":
        x["b"] = x.pop("b_nk").t().contiguous()  # (K, N), row-major: the only copy kept
    return x


FREIVALDS_FLOPS = 2 * 512**3   # from this size on a product is checked by projection, not in full


def reference(x):
    """Return the float64 product of the values as stored (fp8 dequantized with its scales);
    for products of FREIVALDS_FLOPS and more, its Projection instead (relative_norm_error compares)."""
    a, b = x["a"], x["b"]
    scale = x["scale_a"].double() * x["scale_b"].double() if "scale_a" in x else None
    m, k = a.shape
    n = b.shape[1]
    if gemm_flops(m, n, k) < FREIVALDS_FLOPS:
        ref = a.double() @ b.double()
        return ref * scale if scale is not None else ref
    gen = torch.Generator(device=a.device).manual_seed(2718)
    directions = torch.randn(n, PROJECTION_VECTORS, generator=gen, device=a.device, dtype=torch.float64)
    # B X, then A (B X): each operand widened a block of rows at a time, never whole (rule 2)
    ax = f64_times(a, f64_times(b, directions))
    return Projection(directions, ax * scale if scale is not None else ax)


# AMD targets with no tf32 (xf32) matrix instructions: CDNA2, and CDNA4, which dropped CDNA3's
# xf32 (Triton 3.9's gfx950 backend accepts input_precision ieee, bf16x3 and bf16x6 only)
NO_TF32_GFX = ("gfx90a", "gfx950")


def point_skip(point, device):
    p = PRECISIONS[point["dtype"]]
    if device.kind == "cpu" and p.cpu_reason:
        return p.cpu_reason
    gfx = (device.extra or {}).get("gfx") if getattr(device, "vendor", None) == "amd" else None
    if p.name == "tf32" and gfx in NO_TF32_GFX:
        return f"tf32 needs xf32 matrix instructions, which {gfx} lacks (its fp32 GEMMs run at the fp32 rate)"
    if device.kind == "cuda" and p.min_cc:
        cc = tuple(int(v) for v in device.compute_capability.split("."))
        if cc < p.min_cc:
            return Reason(f"{p.name} needs compute capability {p.min_cc[0]}.{p.min_cc[1]}+; "
                          f"this GPU is {device.compute_capability}", "below_min_cc")
    return None


# ---- implementations -------------------------------------------------------------------

@functools.cache
def probe(what: str, torch_device: str) -> str | None:
    """Return why torch's op for `what` ("fp8e4m3", "fp8e5m2", "int8") fails on a tiny
    problem on this device, or None when it works: a torch build without the op is a
    recorded skip, never a crash."""
    try:
        point = {"dtype": what, "shape": (32, 32, 32)}
        x = make_inputs(point, torch_device)
        _torch_launcher(x, LaunchContext(point))()
        return None
    except Exception as e:  # NotImplementedError, RuntimeError from cuBLASLt...
        return Reason(f"torch has no working {what} GEMM here ({first_line(e, 160)})", "torch_fails")


def _torch_launcher(x, ctx):
    precision = ctx.point["dtype"]
    p = PRECISIONS[precision]
    a, b, c = x["a"], x["b"], x["c"]
    if p.scaled:
        # fast accumulation, as the Triton fp8 GEMM accumulates (like for like)
        fn = lambda: torch._scaled_mm(a, b, scale_a=x["scale_a"], scale_b=x["scale_b"],  # noqa: E731
                                      out_dtype=c.dtype, use_fast_accum=True)
        fn.detail = "torch._scaled_mm, use_fast_accum=True"
        return fn
    if p.storage == "int8":
        return _int8_launcher(x, ctx)
    if p.storage == "float32":
        # fp32 must be IEEE fp32 and tf32 may use TF32: set for the call, restored after it
        # (a CUDA graph keeps the kernel chosen while it was captured)
        mode = "high" if precision == "tf32" else "highest"

        def fn():
            before = torch.get_float32_matmul_precision()
            torch.set_float32_matmul_precision(mode)
            try:
                return torch.mm(a, b, out=c)
            finally:
                torch.set_float32_matmul_precision(before)
        return fn
    return lambda: torch.mm(a, b, out=c)


def layout_skip(point, device) -> str | None:
    """Return why a layout other than "nt" is not tried for this precision, or None."""
    if point.get("layout", "nt") == "nt":
        return None
    p = PRECISIONS[point["dtype"]]
    if p.scaled:
        return "torch._scaled_mm takes B column-major only (layout nt)"
    if p.storage == "int8" and device.kind == "cuda":
        return "torch._int_mm on CUDA times both layouts of B inside the nt point (the faster of TN and NN)"
    return None


# torch._int_mm's forms. torch hands _int_mm to cuBLASLt (at::cuda::blas::int8_gemm) with
# no heuristic query and no workspace ("heuristics don't seem to work for int8", its source
# says), so the one choice left to a caller is the operands' layout: cuBLASLt's int8
# (IMMA) kernels want both operands K-major ("TN": A row-major, B column-major, which is
# how a linear layer stores its weight), and the other form makes it pick another kernel
# or transpose first. A GPU run times both and keeps the faster; the detail says which.
INT8_FORMS = ("TN", "NN")


def int8_form(x, form):
    """Return the callable of one torch._int_mm form: "TN" multiplies A by B stored (N, K)
    (a column-major (K, N) view, both operands K-major), "NN" by a row-major (K, N) copy."""
    a, b, c = x["a"], x["b"], x["c"]
    if form == "TN" and b.stride(0) != 1:
        b = b.t().contiguous().t()
    elif form == "NN" and not b.is_contiguous():
        b = b.contiguous()
    fn = lambda: torch._int_mm(a, b, out=c)  # noqa: E731
    fn.detail = f"torch._int_mm, {form} (B {'column' if form == 'TN' else 'row'}-major)"
    fn.form = form
    return fn


def _int8_launcher(x, ctx):
    if not x["a"].is_cuda:  # the layout the point stores B in (the search's "nn" has its own rows)
        return int8_form(x, "TN" if x["b"].stride(0) == 1 else "NN")
    key = ("int8_mm", tuple(x["a"].shape), tuple(x["b"].shape))
    form, _, _ = autotune(key + (str(x["a"].device), ctx.mode), INT8_FORMS, lambda f: int8_form(x, f),
                          str(x["a"].device), ctx.mode, getattr(ctx, "flush", None), getattr(ctx, "verify", None))
    fn = int8_form(x, form)
    fn.compared = INT8_FORMS  # the forms timed, of which fn.form was the faster
    fn.detail += f", the faster of {', '.join(INT8_FORMS)}"
    return fn


def torch_skip(point, device):
    reason = layout_skip(point, device)
    if reason:
        return reason
    p = PRECISIONS[point["dtype"]]
    if p.scaled or p.storage == "int8":
        m, n, k = _mnk(point)
        if device.kind == "cuda" and p.storage == "int8" and m <= 16:
            return Reason("torch._int_mm needs M > 16 on CUDA", "int_mm_small_m")
        if device.kind == "cuda" and p.scaled and (m % 16 or n % 16 or k % 16):
            return "torch._scaled_mm needs M, N and K to be multiples of 16"
        return probe(p.name, device.torch_device)
    return None


def _numpy_launcher(x, ctx):
    a, b, c = x["a"].numpy(), x["b"].numpy(), x["c"]
    cn = c.numpy()  # shares memory with c, so the correctness gate sees numpy's result
    return lambda: (np.matmul(a, b, out=cn), c)[1]


def numpy_skip(point, device):
    if device.kind != "cpu":
        return "numpy runs on the CPU only"
    if PRECISIONS[point["dtype"]].storage not in ("float32", "float64") or point["dtype"] == "tf32":
        return "numpy's BLAS matmul covers fp32 and fp64 only"
    return None


def _triton_call(x, precision, cfg):
    from kernels import gemm as k  # deferred: kernels/ imports Triton, which is optional (Linux only)
    a, b, c = x["a"], x["b"], x["c"]
    ip = "tf32" if precision == "tf32" else "ieee"
    scales = x.get("scales")
    return lambda: k.matmul(a, b, c, cfg, input_precision=ip, scales=scales)


def _triton_tuning(x, ctx) -> Tuning:
    from kernels import gemm as k  # deferred: kernels/ imports Triton, which is optional (Linux only)
    precision = ctx.point["dtype"]
    p, cc = PRECISIONS[precision], compute_capability(ctx)
    return Tuning(("gemm", precision, tuple(x["a"].shape), tuple(x["b"].shape)),
                  k.candidates(precision, ctx.quick, cc, amd=amd_gfx(ctx) is not None),
                  k.INTERPRETER_CONFIG,
                  lambda c: _triton_call(x, precision, c),
                  smem=lambda c: k.smem_bytes(c, itemsize(p.storage), cc, fma=precision == "fp32",
                                              out_bytes=itemsize(p.out), gfx=amd_gfx(ctx)))


def _tuned_launch(x, tuning: Tuning, ctx, n: int, what: str):
    """Return the tuned GEMM call with its detail (what, the tile) and the bytes its tiles
    move through L2 (bench/ops/traffic.py: each program's A rows and B columns once per tile, C
    once; the persistent TMA kernel's tiles cross L2 as the pointer-load kernel's do)."""
    fn, cfg = run_tuning(x["a"], tuning, ctx)
    fn.detail = f"{what}tile {cfg}"
    m, k = x["a"].shape
    fn.level_bytes = gemm_level_bytes(m, n, k, x["a"].element_size(), x["c"].element_size(),
                                      cfg.block_m, cfg.block_n, cfg.num_warps)
    return fn


def _triton_launcher(x, ctx):
    return _tuned_launch(x, _triton_tuning(x, ctx), ctx, x["b"].shape[1], "")


def triton_skip(point, device):
    if point["dtype"] == "fp64":
        return "the Triton GEMM covers fp32 and narrower types"
    if point.get("layout", "nt") != "nt":
        return "the Triton GEMM is measured in one layout (B stored (N, K)); the search's others are for the libraries"
    return None


def _tma_call(x, precision, cfg, sms):
    from kernels import gemm_tma as kt  # deferred: kernels/ imports Triton, which is optional (Linux only)
    a, b_nk, c, scales = x["a"], x["b_nk"], x["c"], x.get("scales")
    return lambda: kt.matmul(a, b_nk, c, cfg, scales=scales, sms=sms)


def _tma_tuning(x, ctx) -> Tuning:
    from kernels import gemm_tma as kt  # deferred: kernels/ imports Triton, which is optional (Linux only)
    precision = ctx.point["dtype"]
    p, cc = PRECISIONS[precision], compute_capability(ctx)
    device = getattr(ctx, "device", None)
    # the persistent grid: one program per SM of the run's GPU (known ahead of time too)
    sms = device.compute_units if getattr(device, "kind", None) == "cuda" and device.compute_units else None
    return Tuning(("gemm_tma", precision, tuple(x["a"].shape), tuple(x["b_nk"].shape)),
                  kt.candidates(precision), kt.INTERPRETER_CONFIG,
                  lambda c: _tma_call(x, precision, c, sms),
                  smem=lambda c: kt.smem_bytes(c, itemsize(p.storage), itemsize(p.out), cc))


def _tma_launcher(x, ctx):
    return _tuned_launch(x, _tma_tuning(x, ctx), ctx, x["b_nk"].shape[0], "persistent TMA, ")


# The TMA GEMM is registered on gemm.square only, and a GPU run times it at bf16, fp8e4m3
# and int8 from 4096^3 to 16384^3 (TMA_SIZES): its point is the compute roof at the issue's
# shapes (8192^3 against torch); small and skinny shapes are launch- or bandwidth-bound (the
# pointer-load kernel's narrow tiles' ground), fp16 and e5m2 run the same MMAs at the same
# rates as bf16 and e4m3, and the device check's full run is bounded (every precision and
# sweep cost about 60 s more on the H200's dry run, past its 425 s limit; this costs 7 s).
TMA_SAME_AS = {"fp16": "bf16", "fp8e5m2": "fp8e4m3"}
TMA_SIZES = (4096, 16384)  # the range of max(M, N, K) a GPU run times the TMA GEMM in


def tma_skip(point, device):
    """Why the TMA GEMM does not run a point (a bench.util.Reason, its code in parentheses): precisions
    it lacks (tma_precision), an AMD GPU (tma_amd), GPUs before Hopper (tma_before_hopper), rows TMA
    cannot address (tma_stride), a Triton without device-side descriptors (tma_no_descriptor), on a
    GPU a size outside TMA_SIZES (tma_size) or a precision timed as another (tma_same_as); bf16 under
    the interpreter is bench/measure/skip.py's rule."""
    from kernels import gemm_tma as kt  # deferred: kernels/ imports Triton, which is optional (Linux only)
    p = PRECISIONS[point["dtype"]]
    if p.name not in kt.PRECISIONS:
        return Reason("the TMA GEMM covers fp16, bf16, fp8 and int8 (kernels/gemm.py runs the rest)", "tma_precision")
    if device.kind == "cuda" and getattr(device, "vendor", None) == "amd":
        return Reason("TMA is NVIDIA hardware (Hopper and later): on an AMD GPU kernels/gemm.py's GEMM runs", "tma_amd")
    if device.kind == "cuda":
        major = int(str(device.compute_capability or "0").split(".")[0])
        if major < 9:
            return Reason(f"TMA tensor descriptors need compute capability 9.0+ (Hopper); this GPU is "
                          f"{device.compute_capability}: kernels/gemm.py's pointer-load GEMM runs here",
                          "tma_before_hopper")
    m, n, k = _mnk(point)
    if (k * itemsize(p.storage)) % 16 or (n * itemsize(p.out)) % 16:
        return Reason(f"TMA needs 16-byte row strides: K x {itemsize(p.storage)} B and N x {itemsize(p.out)} B must "
                      f"be multiples of 16 (K = {k}, N = {n})", "tma_stride")
    import triton.language as tl  # deferred: Triton is optional (Linux only)
    if not hasattr(tl, "make_tensor_descriptor"):
        return Reason("this Triton has no tl.make_tensor_descriptor (Triton 3.6 or newer has)", "tma_no_descriptor")
    if device.kind == "cuda" and not TMA_SIZES[0] <= max(m, n, k) <= TMA_SIZES[1]:
        return Reason(f"a GPU run times the TMA GEMM on squares from {TMA_SIZES[0]} to {TMA_SIZES[1]} (its compute "
                      f"roof; kernels/gemm.py times the other shapes)", "tma_size")
    if device.kind == "cuda" and p.name in TMA_SAME_AS:
        return Reason(f"{p.name} runs the same tensor-core MMAs as {TMA_SAME_AS[p.name]} at its rate: a GPU run times "
                      f"the TMA GEMM at bf16, fp8e4m3 and int8 (tests/test_gemm_tma.py checks {p.name} too)",
                      "tma_same_as")
    return None


def gemm_memory(point) -> int:
    """Return a point's peak bytes: A, B and C as stored, plus the float64 reference's A, B
    and product, plus the check's float64 copy of C and difference (bench.measure.registry's
    relative_norm_error); the fp32 normals A and B are drawn from are gone by then."""
    m, n, k = _mnk(point)
    return gemm_bytes(m, n, k, point["dtype"]) + 8 * (m * k + k * n + m * n) + 16 * m * n


def search_precisions(device, quick):
    """Return the precisions the search measures: every one, but on a CPU's quick run not
    those its flags name no unit for (fp8 always; fp16 without AVX512-FP16 or AMX-FP16; bf16
    without AVX512-BF16 or AMX-BF16): their GEMMs run through conversion, and their bound is
    the exact wider path the search measures anyway (ARCHITECTURE.md, rule 10)."""
    if not (quick and device.kind == "cpu"):
        return QUICK_PRECISIONS if quick else tuple(PRECISIONS)
    missing = cpu_missing_units({"kind": "cpu", "cpu_flags": list(device.cpu_flags or ())})
    return tuple(p for p in QUICK_PRECISIONS if p not in missing)


def shape_precisions(device, quick):
    """Return the precisions of the square and skinny sweeps: every one, but on a CPU's
    quick run CPU_QUICK_SHAPE_PRECISIONS."""
    if quick and device.kind == "cpu":
        return CPU_QUICK_SHAPE_PRECISIONS
    return QUICK_PRECISIONS if quick else tuple(PRECISIONS)


def _register(name, sweep, doc, modes=("warm",), layouts=None, tma=False, precisions=None, **extra):
    axes = (Axis("dtype", tuple(PRECISIONS), QUICK_PRECISIONS, sweep=precisions,
                 doc="precision: " + ", ".join(PRECISIONS)),)
    if layouts:
        axes += (Axis("layout", sweep=layouts, doc="nt: B stored (N, K), used transposed; nn: B stored (K, N)"),)
    op = REGISTRY.add_op(Op(
        name=name, family="gemm", doc=doc + "; flops = 2 M N K, bytes = (M K + K N) w_in + M N w_out",
        axes=axes + (Axis("shape", sweep=sweep, doc="(M, N, K)"),),
        make_inputs=make_inputs, reference=reference,
        flops=lambda pt: gemm_flops(*_mnk(pt)),
        bytes=lambda pt: gemm_bytes(*_mnk(pt), pt["dtype"]),
        write_bytes=lambda pt: gemm_write_bytes(*_mnk(pt), pt["dtype"]),
        working_set=lambda pt: gemm_bytes(*_mnk(pt), pt["dtype"]),
        describe=lambda pt: (max(_mnk(pt)), "x".join(map(str, _mnk(pt)))),
        tolerance=lambda pt: PRECISIONS[pt["dtype"]].tolerance,
        outputs=("c",), skip=point_skip, modes=modes, precision=lambda pt: pt["dtype"],
        memory=gemm_memory, **extra,
    ))
    REGISTRY.add_impl(Impl(op.name, "torch", "torch",
                           _torch_launcher, skip=torch_skip,
                           doc="torch.mm; torch._scaled_mm (fast accumulation) for fp8; torch._int_mm for int8"))
    REGISTRY.add_impl(Impl(op.name, "numpy", "numpy", _numpy_launcher, skip=numpy_skip,
                           doc="numpy.matmul (the BLAS numpy links), CPU only"))
    REGISTRY.add_impl(Impl(op.name, "triton", "triton",
                           _triton_launcher, skip=triton_skip, quick_dtypes=TRITON_QUICK_PRECISIONS,
                           tuning=_triton_tuning,
                           doc="kernels/gemm.py, tiles autotuned with the suite's timer on a GPU"))
    if not tma:
        return
    REGISTRY.add_impl(Impl(op.name, "triton_tma", "triton",
                           _tma_launcher, skip=tma_skip, quick_dtypes=TRITON_QUICK_PRECISIONS,
                           tuning=_tma_tuning,
                           doc="kernels/gemm_tma.py: persistent, TMA descriptors, pipelined or warp-specialized; "
                               "sm_90+"))


_register("gemm.square", square_sweep, "square M = N = K", tma=True, precisions=shape_precisions)
# cold: the small-M points are bandwidth-bound, and their weights must come from DRAM/HBM
# (flushed before every sample), not from a cache the previous call warmed
_register("gemm.skinny", skinny_sweep, "N = K fixed, M from 1 up: the walk up the sloped roof", modes=("cold",),
          precisions=shape_precisions)
_register("gemm.search", search_sweep, "squares growing in each layout until the rate stops rising: best sustained "
          "throughput", layouts=search_layouts, precisions=search_precisions, sweep_stop=search_stop,
          min_budget_s=SEARCH_MIN_BUDGET_S,
          quick_min_budget_s=QUICK_SEARCH_BUDGET_S,
          # its own cost group: its first size always runs, each next one is predicted from the
          # search's previous size (rule 7), not from a 128^3 square dominated by call overhead
          cost_group="gemm.search")
