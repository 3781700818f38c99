"""Triton probe kernels for the memory hierarchy: an L1 reread, an L2 reread, and an empty
kernel (the launch floor).

Pure compute: no timing, no files, no printing. The host wrappers take tensors that the
caller allocated and launch; the sizes, the grid and the number of passes come from the
caller (bench/ops/probe.py), which counts the bytes.

- l1_reread: program p owns the resident span a[p * span : (p + 1) * span] (span =
  windows x BLOCK elements, tens of KiB) and reads `iters` windows of BLOCK elements from
  it, window i mod windows at iteration i. After the first pass the span sits in its SM's
  L1 (loads ".ca"), so every later load is an L1 hit. The window rotates with the
  iteration and `windows` is a run-time value, so no load is loop-invariant (nothing can
  be hoisted out of the loop or held in registers), and every load is added into the
  accumulator, so none is dead. Program p stores the sum of its loads in slot p (iters a
  multiple of windows: the slots add up to passes x sum(a[: programs x span])).
- l2_reread: the whole buffer of n elements is read `repeats` times by a persistent grid:
  the flat index t in [0, repeats x nblocks) of block-reads is dealt out to the programs
  UNROLL at a time, and block-read t reads block t mod nblocks (BLOCK elements). Every
  block is read exactly `repeats` times, the UNROLL blocks of one step are independent
  loads in flight together, and no address repeats from one step to the next (nothing
  to hoist). Loads are ".cg" (cached in L2 only, bypassing L1), so a buffer that fits L2
  is read from L2 whatever its size, and every program has work at every size (small
  buffers are shared by many programs, as gpu-benches' L2 test shares its blocks). Each
  program stores its partial sum in its own slot of a buffer the caller allocated
  (l2_partials): a call is one launch, and the result is the slots' sum.
- empty_kernel: does nothing; its launch is the floor under any kernel's call.
"""
import torch
import triton
import triton.language as tl

from kernels.stream import partials

L1_BLOCK = 4096          # elements per program per iteration: 16 KiB of int32 or fp32, 16 per thread with 8 warps
L1_WARPS = 8
L1_PROGRAMS_PER_SM = 2   # two resident spans per SM: 2 x span bytes of L1 per SM
L2_BLOCK = 1024          # elements per block-read: 4 KiB of int32 or fp32
L2_UNROLL = 4            # block-reads in flight per program per step: 16 KiB
L2_WARPS = 4
L2_PROGRAMS_PER_SM = 4   # 16 warps and 64 KiB of loads in flight per SM


@triton.jit
def l1_reread_kernel(a_ptr,  # input: programs x span elements (int32 or fp32)
                     part_ptr,  # output, one element of a's dtype per program: part[p] = the sum of its loads
                     span,  # elements each program owns (windows x BLOCK)
                     windows,  # span // BLOCK (run time: the rotation cannot be unrolled away)
                     iters,  # windows read per program (a multiple of windows)
                     BLOCK: tl.constexpr):
    base = a_ptr + tl.program_id(0).to(tl.int64) * span
    cols = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], a_ptr.dtype.element_ty)
    w = 0
    for _ in range(0, iters):
        acc += tl.load(base + w * BLOCK + cols, cache_modifier=".ca")
        w += 1
        w = tl.where(w == windows, 0, w)
    tl.store(part_ptr + tl.program_id(0), tl.sum(acc, axis=0))  # its own slot: no atomic, nothing to zero


@triton.jit
def l2_reread_kernel(a_ptr,  # input, n elements (int32 or fp32)
                     part_ptr,  # output, one element of a's dtype per program: sum(part) = repeats x sum(a)
                     n,  # element count
                     repeats,  # passes over the buffer
                     BLOCK: tl.constexpr, UNROLL: tl.constexpr):
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    nblocks = tl.cdiv(n, BLOCK)
    total = repeats * nblocks  # block-reads in all
    rows = tl.arange(0, UNROLL)
    cols = tl.arange(0, BLOCK)
    acc = tl.zeros([UNROLL, BLOCK], a_ptr.dtype.element_ty)
    for t0 in range(pid * UNROLL, total, programs * UNROLL):
        t = t0 + rows
        b = t % nblocks
        offs = b.to(tl.int64)[:, None] * BLOCK + cols[None, :]
        mask = (t < total)[:, None] & (offs < n)
        acc += tl.load(a_ptr + offs, mask=mask, other=0, cache_modifier=".cg")
    tl.store(part_ptr + pid, tl.sum(tl.sum(acc, axis=1), axis=0))  # its own slot: no atomic, nothing to zero


@triton.jit
def empty_kernel(x_ptr):  # x is never touched: the launch is all there is
    pass


def sm_count(device) -> int:
    """Return the multiprocessor count of a CUDA device (1 elsewhere)."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 1


def l1_reread(a, part, span, passes, block=L1_BLOCK):
    """Return part (from l2_partials: one slot per program, its length the grid) holding the
    programs' partial sums, whose total is passes x sum(a[: programs x span]) (int32 adds
    wrap modulo 2**32): each program reads its own span `passes` times, window by window. One launch."""
    if span % block:
        raise ValueError(f"span {span} is not a multiple of the block {block}")
    windows = span // block
    l1_reread_kernel[(part.numel(),)](a, part, span, windows, windows * passes, BLOCK=block,
                                      num_warps=L1_WARPS, num_stages=1)
    return part


def l2_programs(sms, n, repeats, block=L2_BLOCK, unroll=L2_UNROLL, per_sm=L2_PROGRAMS_PER_SM) -> int:
    """Return the persistent grid of l2_reread: per_sm programs per SM (4 when sms is None,
    off a GPU), no more than there are steps of UNROLL block-reads."""
    steps = triton.cdiv(repeats * triton.cdiv(n, block), unroll)
    want = per_sm * sms if sms else 4
    return max(1, min(want, steps))


def l2_partials(a, programs) -> torch.Tensor:
    """Return l1_reread's and l2_reread's output: one slot of a's dtype per program, NaN or the largest
    integer until a call writes it (allocated once, outside the timed region)."""
    return partials(programs, a.dtype, a.device)


def l2_reread(a, part, repeats, block=L2_BLOCK, unroll=L2_UNROLL):
    """Return part (from l2_partials: its length is the grid) holding per-program partial sums
    whose total is repeats x sum(a) (int32 adds wrap modulo 2**32). One launch."""
    l2_reread_kernel[(part.numel(),)](a, part, a.numel(), int(repeats), BLOCK=block, UNROLL=unroll,
                                      num_warps=L2_WARPS, num_stages=1)
    return part


def empty(x):
    """Launch the empty kernel once on x's device; return x (untouched)."""
    empty_kernel[(1,)](x, num_warps=1)
    return x
