"""Probe family: the parts of the hierarchy no stream kernel reaches.

probe.l1 (the L1 / shared-memory roof). P programs (2 per SM on a GPU, one per torch
thread on a CPU) each own a resident span of S bytes (tens of KiB: inside one SM's L1, or
one core's L1d) and read it R times in one call, so after the first pass every load hits
L1. With w the element size (fp32: 4) and span = S / w elements:

    R     = max(1, ceil(call_bytes / (P S)))       passes per call
    bytes = R P S                                  (the scalar result is not counted)
    flops = R P S / w                              (one add per element loaded; w = 4: int32 or fp32)
    working set = P S

call_bytes is 8 GiB on a GPU (at the ~33 TB/s of 128 B/clk x 132 SMs x 1.98 GHz a call
lasts about 250 us, so a launch of a few microseconds is under 5% of it) and 256 MiB on a
CPU. Triton: kernels/probes.py l1_reread (".ca" loads, a window that rotates with the
iteration, so nothing is hoisted). torch: each thread's span summed through a view that
repeats it R times with stride 0 (as stream.reread's torch impl, with spans sized for L1).
Hand-worked: P = 264, S = 64 KiB, call_bytes = 8 GiB: R = ceil(2^33 / (264 x 2^16)) = 497,
bytes = 497 x 264 x 65536 = 8,598,847,488.

probe.launch (the launch floor). An empty call, timed per call: on a GPU the empty Triton
kernel (kernels/probes.py) and torch's smallest op (a 1-element neg) in two forms: `launch`,
back-to-back stream launches from the host (the callable refuses graph capture, so the
timer launches each call itself), and `graph`, the same call replayed as nodes of a CUDA
graph (the timer's own replay). On a CPU, form `call`: the torch op's dispatch cost.
bytes = flops = working set = 0; the figure is the time per call (median_ms), which
roofs/analysis/launch_floor.py turns into the launch-floor roofs (unit us).

The L2 probe is stream.reread's Triton impl (same op, same formula: R n w bytes), which
now launches kernels/probes.py l2_reread (many programs, UNROLL independent ".cg" loads in
flight per program) instead of kernels/stream.py's reread.
"""
from __future__ import annotations

import math

import torch

from bench.measure.registry import REGISTRY, Axis, Impl, Op
from bench.measure.tolerance import tolerance
from bench.ops.stream import resident_sum, wrap_int32
from bench.util import triton_interpreting

L1_CALL_BYTES = {"cpu": 2**28, "cuda": 2**33}
L1_SPANS = {"cuda": (16, 32, 48, 64, 96, 112), "cpu": (4, 8, 16, 24, 48)}   # KiB per program
L1_QUICK_SPANS = {"cuda": (32, 64), "cpu": (12, 16, 24)}   # three spans: a plateau needs two within 15%
L1_PROGRAMS_PER_SM = 2
# an fp32 sum of R P S / 4 values (tens of millions) loses up to ~1e-3 of R ||a||_2 in its
# order of adds (seen: 4e-4 on a CPU); a wrong or missed index costs O(1)
L1_FP32_FACTOR = 200   # x fp32's 1e-5: 2e-3


def l1_programs(device) -> int:
    """Return P: 2 programs per SM on a GPU, torch's thread count on a CPU."""
    if device.kind == "cuda":
        return L1_PROGRAMS_PER_SM * int(device.compute_units or 1)
    return torch.get_num_threads()


# int32: exact sums at any R (a CPU's torch sum loses ~1e-3 in fp32); fp32: the GPU's widest add pipe
L1_DTYPES = {"cuda": ("float32",), "cpu": ("int32", "float32")}
L1_QUICK_DTYPES = {"cuda": ("float32",), "cpu": ("int32",)}


def l1_span_elements(point) -> int:
    """Return span = S / 4 (int32 or fp32 elements one program owns)."""
    return point["span_bytes"] // 4


def l1_passes(point) -> int:
    """Return R = max(1, ceil(call_bytes / (P S)))."""
    return max(1, math.ceil(point["call_bytes"] / (point["programs"] * point["span_bytes"])))


def l1_bytes(point) -> int:
    """Return R P S."""
    return l1_passes(point) * point["programs"] * point["span_bytes"]


def l1_inputs(point, device) -> dict:
    gen = torch.Generator(device=device).manual_seed(4343)
    n = point["programs"] * l1_span_elements(point)
    if point["dtype"] == "int32":
        a = torch.randint(-1000, 1001, (n,), dtype=torch.int32, device=device, generator=gen)
    else:
        a = torch.randn(n, dtype=torch.float32, device=device, generator=gen)
    return {"a": a, "passes": l1_passes(point), "programs": point["programs"],  # the Triton impl's "out":
            "out_native": torch.empty((), dtype=a.dtype, device=device)}       # its launcher's; torch's


def l1_reference(x) -> torch.Tensor:
    """Return R x sum(a) in float64; for int32 exactly, wrapped to 32 bits as the adds wrap."""
    if x["a"].dtype == torch.int32:
        return torch.tensor(float(wrap_int32(x["passes"] * int(x["a"].long().sum().item()))), dtype=torch.float64)
    return x["a"].double().sum() * x["passes"]


def l1_error(out, ref, x) -> float:
    """Return, for int32, 0 when the wrapped sum is exact and 1 otherwise; for fp32,
    |sum(out) - ref| / (R ||a||_2): the sum is scaled by what was summed, not by itself. out is
    torch's 0-d sum or the Triton kernel's per-program partial sums, added here."""
    if x["a"].dtype == torch.int32:
        return 0.0 if wrap_int32(int(out.long().sum().item())) == int(ref.item()) else 1.0
    return abs(out.double().sum().item() - ref.item()) / max(x["passes"] * x["a"].double().norm().item(), 1e-300)


def _l1_torch(x, ctx):
    a, reps, parts = x["a"], x["passes"], x["programs"]
    fn = resident_sum(a, reps, parts, x["out_native"])
    fn.detail = f"{parts} spans x {reps} passes"
    return fn


def _l1_triton(x, ctx):
    from kernels import probes as k  # deferred: kernels/ imports Triton, which is optional (Linux only)
    span = x["a"].numel() // x["programs"]
    x["out"] = k.l2_partials(x["a"], x["programs"])  # setup: one slot per program; the call is one launch
    fn = lambda: k.l1_reread(x["a"], x["out"], span, x["passes"])  # noqa: E731
    fn.detail = f"{x['programs']} programs x {span} elements x {x['passes']} passes, L1 (.ca) loads"
    return fn


def _interpreter_skip(point, device):
    if triton_interpreting():
        return ("its gigabytes per call are far too many for Triton's interpreter; "
                "tests/test_probes.py checks the kernel with few passes")
    return None


REGISTRY.add_op(Op(
    name="probe.l1", family="probe",
    doc="out = R x sum(a): P programs each reread their own resident span of S bytes; bytes = R P S, flops = R P S / 4",
    axes=(Axis("dtype", sweep=lambda d, q: (L1_QUICK_DTYPES if q else L1_DTYPES)[d.kind], doc="int32 or float32"),
          Axis("span_bytes", sweep=lambda d, q: tuple(s * 1024 for s in (L1_QUICK_SPANS if q else L1_SPANS)[d.kind]),
               doc="bytes each program owns and rereads (tens of KiB on a GPU: inside one SM's L1)"),
          Axis("programs", sweep=lambda d, q: (l1_programs(d),), doc="programs (2 per SM; a CPU's torch threads)"),
          Axis("call_bytes", sweep=lambda d, q: (L1_CALL_BYTES[d.kind],), doc="bytes one call reads (R P S)")),
    make_inputs=l1_inputs, reference=l1_reference,
    flops=lambda p: l1_bytes(p) // 4,
    bytes=l1_bytes,
    working_set=lambda p: p["programs"] * p["span_bytes"],
    describe=lambda p: (p["programs"] * l1_span_elements(p),
                        f"{p['programs']}x({l1_span_elements(p)},)x{l1_passes(p)}"),
    write_bytes=lambda p: 0,   # the scalar result is not counted: a read-only kernel
    tolerance=lambda p: tolerance(p["dtype"], L1_FP32_FACTOR),  # int32: exact (0)
    outputs=("out", "out_native"), error=l1_error, memory_factor=3.0, cost_group="probe.l1",
))
REGISTRY.add_impl(Impl("probe.l1", "torch", "torch", _l1_torch,
                       doc="torch.sum over a stride-0 view that repeats each thread's span R times"))
REGISTRY.add_impl(Impl("probe.l1", "triton", "triton", _l1_triton, skip=_interpreter_skip,
                       doc="kernels/probes.py l1_reread: each program rereads its own span, .ca loads"))


# ---- the launch floor ---------------------------------------------------------------------------

LAUNCH_FORMS = {"cuda": ("launch", "graph"), "cpu": ("call",)}


class NotCapturable(RuntimeError):
    """Raised inside a CUDA graph capture by the `launch` form: it is timed launch by launch."""


def launch_inputs(point, device) -> dict:
    x = torch.full((1,), 2.0, dtype=torch.float32, device=device)
    return {"x": x, "y": torch.empty(1, dtype=torch.float32, device=device)}


def launch_reference(x) -> torch.Tensor:
    """Return what the call leaves in its output: -2 for torch's neg (the empty kernel leaves x, 2)."""
    return torch.tensor([-2.0], dtype=torch.float64)


def _launch_error(out, ref, x) -> float:
    """Return 0 when the call left its output as it should (torch: y = -x; Triton: x untouched), else 1."""
    want = ref if out is x["y"] else -ref
    return 0.0 if torch.equal(out.double().cpu(), want) else 1.0


def _form_guard(fn, form: str, device):
    """Return fn, made to refuse graph capture in the `launch` form on a GPU (the timer then
    launches every call from the host, which is what that form measures)."""
    if form != "launch" or device.type != "cuda":
        return fn

    def launched():
        if torch.cuda.is_current_stream_capturing():
            raise NotCapturable("the launch form is timed launch by launch, not replayed from a graph")
        return fn()
    return launched


def _launch_torch(x, ctx):
    form = ctx.point.get("form", "call")
    fn = _form_guard(lambda: torch.neg(x["x"], out=x["y"]), form, x["x"].device)
    fn.detail = f"torch.neg on 1 element, {form}"
    return fn


def _launch_triton(x, ctx):
    from kernels import probes as k  # deferred: kernels/ imports Triton, which is optional (Linux only)
    form = ctx.point.get("form", "launch")
    fn = _form_guard(lambda: k.empty(x["x"]), form, x["x"].device)
    fn.detail = f"empty Triton kernel, {form}"
    return fn


def _launch_triton_skip(point, device):
    if triton_interpreting():
        return ("an empty kernel under Triton's interpreter measures the interpreter; "
                "tests/test_probes.py checks it runs")
    return None


REGISTRY.add_op(Op(
    name="probe.launch", family="probe",
    doc="an empty call (empty Triton kernel, torch 1-element op): the time per call is the launch floor; "
        "bytes = flops = 0",
    axes=(Axis("form", sweep=lambda d, q: LAUNCH_FORMS[d.kind],
               doc="launch: host launches back to back; graph: CUDA-graph nodes; call: a CPU call"),),
    make_inputs=launch_inputs, reference=launch_reference,
    flops=lambda p: 0, bytes=lambda p: 0, working_set=lambda p: 0, write_bytes=lambda p: 0,
    describe=lambda p: (1, f"(1,) {p['form']}"),
    tolerance=lambda p: 0.0, outputs=("y",), error=_launch_error, memory_factor=1.0, cost_group="probe.launch",
))
REGISTRY.add_impl(Impl("probe.launch", "torch", "torch", _launch_torch, doc="torch.neg(x, out=y) on one element"))
REGISTRY.add_impl(Impl("probe.launch", "triton", "triton", _launch_triton, skip=_launch_triton_skip,
                       doc="kernels/probes.py empty_kernel, one program of one warp"))
