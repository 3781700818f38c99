"""A mixbench/ERT-style Triton kernel: each element loaded once, k FMAs on it in CHAINS
independent chains, one result stored. Sweeping k moves the kernel from memory-bound to
bound by the vector unit of its precision (the FMA pipes, not the tensor cores).

Pure compute: no timing, no files, no printing.

The recurrence, per element x, chain c (multiplier a_c = coef[c]) and scalar b, all in the
storage precision (every FMA rounds once, as the unit does):

    s_c <- x                                   (no arithmetic)
    s_c <- fma(s_c, a_c, b)    k - 1 times     (2 (k - 1) FLOPs per chain)
    y   =  b + sum_c a_c s_c                   (C multiplies and C adds: 2 C FLOPs)

so y costs exactly 2 k C FLOPs: k FMAs per chain, the last one of each folding the chain
into y (the same math as fma(s_c, a_c, acc) chain after chain). The chains differ by their
multiplier, which the compiler cannot see (coef is loaded), so none can be merged with
another; every step depends on the one before in its chain only, so a thread has
C x (elements per thread) independent FMAs in flight.
"""
import triton
import triton.language as tl

CHAINS = 8
NUM_WARPS = 4
BLOCK = {"fp64": 256, "fp32": 512, "fp16": 1024, "bf16": 1024}  # elements per program: 16-64 chain values per thread


@triton.jit
def fma_kernel(x_ptr,  # input, n elements
               coef_ptr,  # input, CHAINS + 1 values of x's dtype: the multipliers a_c, then b
               y_ptr,  # output, n elements: y = b + sum_c a_c s_c after k - 1 steps
               n,  # element count
               k,  # FMAs per chain (k >= 1)
               BLOCK: tl.constexpr, CHAINS: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0)
    dt = x.dtype
    a = tl.load(coef_ptr + tl.arange(0, CHAINS))[None, :]
    bb = tl.load(coef_ptr + CHAINS)
    s = tl.broadcast_to(x[:, None], (BLOCK, CHAINS))
    for _ in range(1, k):
        s = tl.fma(s, a, bb)
    y = tl.sum(s * a, axis=1) + bb
    tl.store(y_ptr + offs, y.to(dt), mask=mask)


def fma_chains(x, coef, y, k, block=None, num_warps=NUM_WARPS):
    """Return y after y = b + sum_c coef[c] s_c, each chain s_c = x taken through k - 1
    steps s_c <- fma(s_c, coef[c], b) (see the module docstring); coef holds the CHAINS
    multipliers and then b, in x's dtype."""
    if coef.numel() != CHAINS + 1:
        raise ValueError(f"coef holds {coef.numel()} values; the kernel needs {CHAINS} multipliers and b")
    if k < 1:
        raise ValueError(f"k = {k}: at least one FMA per chain")
    name = {"torch.float64": "fp64", "torch.float32": "fp32", "torch.float16": "fp16",
            "torch.bfloat16": "bf16"}[str(x.dtype)]
    block = block or BLOCK[name]
    n = x.numel()
    fma_kernel[(triton.cdiv(n, block),)](x, coef, y, n, int(k), BLOCK=block, CHAINS=CHAINS,
                                          num_warps=num_warps, num_stages=1)
    return y
