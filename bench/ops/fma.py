"""FMA family: each precision's vector-unit roof (mixbench / Empirical Roofline Toolkit style).

fma.chains loads each of n elements once, runs k FMAs on it in C = 8 independent chains
(multiplier a_c = 1/2 + c/64, addend b = 1/4, all exact in every precision) and stores one
result per element (kernels/fma.py gives the recurrence):

    flops = 2 k C n                  (k FMAs per chain, the k-th folding the chain into y)
    bytes = (2 n + C + 1) w          (x read once, y written once, the C multipliers and b)
    intensity = 2 k C n / ((2 n + C + 1) w)  ~  k C / w FLOP/byte

Sweeping k (1, 2, 4, ... 1024; quick 1, 4, 16, 512, 1024) walks the kernel from memory-bound (k = 1: 16 FLOP per
8 bytes of fp32) to bound by the FMA pipes of its precision; the plateau is the vector
unit's roof, the sweep's knee the measured corner. Hand-worked: n = 1000, k = 3, fp32:
flops = 2 x 3 x 8 x 1000 = 48,000; bytes = (2000 + 9) x 4 = 8,036.

n follows from the working set 2 n w (x and y): on a GPU max(256 MiB, 4x L2), so the
memory-bound end reads HBM; on a CPU 128 KiB, so the torch chains (C x n values) stay in
the core's L2 and the sweep reaches the vector units through cache.

Triton (GPU): kernels/fma.py, one FMA per step per chain in the storage precision
(fma.rn.f64, .f32, .f16x2, .bf16x2 on sm_90). torch (CPU and GPU): the chains are a
(C, n) tensor; each step is one torch.addcmul(b, s, a, out=s) (b a full (C, n) tensor) over all chains and the
fold is torch.addmv(b, s^T, a): the same math, each step a pass through cache.

Checked against a float64 reference of the same recurrence, in closed form (the k - 1
steps of s <- a s + b give a^(k-1) x + b (1 - a^(k-1)) / (1 - a)), so the check costs O(C n)
at every k; tests/test_fma.py checks the closed form against the explicit recurrence.
"""
from __future__ import annotations

import torch

from bench.measure.registry import REGISTRY, Axis, Impl, Op
from bench.measure.tolerance import tolerance
from bench.util import TORCH_NAMES, itemsize, triton_interpreting

CHAINS = 8
B = 0.25
PRECISIONS = ("fp64", "fp32", "fp16", "bf16")
QUICK_PRECISIONS = ("fp64", "fp32")
K_VALUES = tuple(2 ** i for i in range(11))   # 1 ... 1024
QUICK_K = (1, 4, 16, 512, 1024)   # memory-bound, around the knee (fp32 at HBM: k ~ 7), the unit's plateau
# k chained FMAs round k times in the storage type (seen: 1e-16, 1e-7, 4e-4, 3e-3 for fp64,
# fp32, fp16, bf16 at k <= 64)
FMA_FACTOR = 2
TOLERANCE = {p: tolerance(p, FMA_FACTOR) for p in PRECISIONS}
INTERPRETER_MAX_K = 16   # Triton's interpreter checks the kernel at small k only


def multipliers() -> list[float]:
    """Return a_c = 1/2 + c/64 for c < C (six significant bits: exact in bf16 and up)."""
    return [0.5 + c / 64 for c in range(CHAINS)]


def fma_ws(device, quick: bool) -> tuple:
    """Return the working set 2 n w: max(256 MiB, 4x the last-level cache) on a GPU, 128 KiB on a CPU."""
    if device.kind == "cuda":
        return (max(2**28, 1 << (4 * device.llc_bytes - 1).bit_length()),)
    return (2**17,)


def elements(point) -> int:
    """Return n = ws_bytes // (2 w), rounded down to a multiple of 64."""
    return max(64, point["ws_bytes"] // (2 * itemsize(point["dtype"])) // 64 * 64)


def fma_flops(point) -> int:
    """Return 2 k C n."""
    return 2 * point["k"] * CHAINS * elements(point)


def fma_bytes(point) -> int:
    """Return (2 n + C + 1) w."""
    return (2 * elements(point) + CHAINS + 1) * itemsize(point["dtype"])


def fma_inputs(point, device) -> dict:
    dt = getattr(torch, TORCH_NAMES[point["dtype"]])
    n = elements(point)
    gen = torch.Generator(device=device).manual_seed(5151)
    x = torch.randn(n, dtype=torch.float32, device=device, generator=gen).to(dt)
    coef = torch.tensor(multipliers() + [B], dtype=dt, device=device)
    return {"x": x, "coef": coef, "k": point["k"], "y": torch.empty(n, dtype=dt, device=device)}


def closed_form(x64: torch.Tensor, a: list, b: float, k: int) -> torch.Tensor:
    """Return y = b + sum_c a_c s_c with s_c = a_c^(k-1) x + b (1 - a_c^(k-1)) / (1 - a_c):
    the recurrence's value in float64, O(C n)."""
    y = torch.full_like(x64, b)
    for ac in a:
        p = ac ** (k - 1)
        y += ac * (p * x64 + b * (1 - p) / (1 - ac))
    return y


def recurrence(x64: torch.Tensor, a: list, b: float, k: int) -> torch.Tensor:
    """Return y by running the k - 1 steps and the fold one by one (float64, O(k C n))."""
    s = x64[None, :].repeat(len(a), 1)
    av = torch.tensor(a, dtype=torch.float64, device=x64.device)[:, None]
    for _ in range(k - 1):
        s = s * av + b
    return b + (s * av).sum(0)


def fma_reference(x) -> torch.Tensor:
    return closed_form(x["x"].double(), multipliers(), B, x["k"])


def _fma_triton(x, ctx):
    from kernels import fma as kf  # deferred: kernels/ imports Triton, which is optional (Linux only)
    fn = lambda: kf.fma_chains(x["x"], x["coef"], x["y"], x["k"])  # noqa: E731
    fn.detail = f"{CHAINS} chains x k = {x['k']}"
    return fn


def _fma_torch(x, ctx):
    """(C, n) chains: s = x broadcast; k - 1 steps s = b + s a (addcmul, one pass over all
    chains); y = b + s^T a (addmv: C multiplies and C adds per element)."""
    xv, coef, y, k = x["x"], x["coef"], x["y"], x["k"]
    a_col = coef[:CHAINS].reshape(CHAINS, 1).contiguous()
    a_vec = coef[:CHAINS].contiguous()
    b_full = coef[CHAINS].expand(CHAINS, xv.numel()).contiguous()  # a 0-d b sends addcmul down a slow path
    b_vec = b_full[0]
    s = torch.empty((CHAINS, xv.numel()), dtype=xv.dtype, device=xv.device)

    def fn():
        s.copy_(xv.expand(CHAINS, -1))
        for _ in range(k - 1):
            torch.addcmul(b_full, s, a_col, out=s)
        return torch.addmv(b_vec, s.t(), a_vec, out=y)
    fn.detail = f"{CHAINS} chains x k = {k}, torch addcmul steps"
    return fn


def _torch_skip(point, device):
    if device.kind == "cuda":
        return ("on a GPU each torch step is a pass through memory (C n values), so it measures "
                "bandwidth, not the FMA pipes: the Triton kernel measures the unit")
    return None


def _triton_skip(point, device):
    if triton_interpreting() and point["k"] > INTERPRETER_MAX_K:
        return f"checked under Triton's interpreter only up to k = {INTERPRETER_MAX_K} (tests/test_fma.py)"
    return None


REGISTRY.add_op(Op(
    name="fma.chains", family="fma",
    doc="y = b + sum_c a_c s_c after k - 1 FMA steps in each of 8 chains; flops = 2 k C n, bytes = (2 n + C + 1) w",
    axes=(Axis("dtype", PRECISIONS, QUICK_PRECISIONS, doc="precision of the data and the arithmetic"),
          Axis("k", K_VALUES, QUICK_K, doc="FMAs per chain per element"),
          Axis("ws_bytes", sweep=fma_ws, doc="x and y in bytes (2 n w)")),
    make_inputs=fma_inputs, reference=fma_reference,
    flops=fma_flops, bytes=fma_bytes, working_set=lambda p: 2 * elements(p) * itemsize(p["dtype"]),
    write_bytes=lambda p: elements(p) * itemsize(p["dtype"]),   # y; x, the multipliers and b are read
    describe=lambda p: (elements(p), f"({elements(p)},)x{CHAINS}x{p['k']}"),
    tolerance=lambda p: TOLERANCE[p["dtype"]],
    outputs=("y",), precision=lambda p: p["dtype"], memory_factor=6.0, cost_group="fma.chains",
))
REGISTRY.add_impl(Impl("fma.chains", "torch", "torch", _fma_torch, skip=_torch_skip,
                       doc="(C, n) chains: addcmul steps and an addmv fold"))
REGISTRY.add_impl(Impl("fma.chains", "triton", "triton", _fma_triton, skip=_triton_skip,
                       doc="kernels/fma.py: k FMAs per chain in registers, 8 chains per element"))
