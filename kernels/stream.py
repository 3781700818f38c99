"""Triton stream kernels: copy, scale, add, triad, read (a full sum), write (a fill) and
BabelStream's nstream (a += b + s c, in place).
(stream.reread's Triton impl is the L2 probe, kernels/probes.py.)

Pure compute: no timing, no files, no printing. Each host wrapper takes tensors that the
caller allocated (so allocation stays outside any timed region), launches one kernel, and
returns the output tensor. The reduction (read) writes one partial sum per program
of its persistent grid into a buffer of slots (partials(), allocated by the caller): no
atomic into a scalar that would have to be zeroed by a second launch first; the result is
the slots' sum, which the caller takes outside the timed call. Elementwise kernels compute in
fp32 and round once on store, as torch's own elementwise ops do, so both agree with a float64 reference to within one
rounding of the storage dtype.

Shapes: every tensor is 1-D and contiguous with n elements; the scalar ``s`` is a Python
float. Offsets are 64-bit so arrays beyond 2**31 elements index correctly.
"""
import torch
import triton
import triton.language as tl

BLOCK = 4096  # elements per program: 16 KiB of fp32, enough in flight per SM on a GPU
NUM_WARPS = 8
# The read kernel (a sum): a persistent grid of READ_PROGRAMS_PER_SM programs per SM, all
# resident at once (ptxas for sm_90: 64 registers a thread for fp32, 100 for 16-bit, so 4
# and 2 programs of 8 warps fit an SM's 64K registers), each with eight 16-byte loads per
# thread issued before the first add (32 KiB a program per iteration): 64 KiB in flight per
# SM, twice the ~30 KiB that HBM3e's bandwidth x latency asks of each SM. The earlier grid
# (8 programs of 4096 elements) held half as many bytes in flight for 16-bit arrays.
READ_BLOCK_BYTES = 32 * 1024
READ_WARPS = 8
READ_PROGRAMS_PER_SM = 2
# The read loop's software-pipeline depth: each stage a READ_BLOCK_BYTES buffer in shared
# memory per program (cp.async on sm_80+), so the loads of the next blocks are in flight while
# one is added; 3 stages x 32 KiB x 2 programs fit an SM's shared memory.
READ_STAGES = 3


@triton.jit
def copy_kernel(a_ptr,  # input, n elements
                b_ptr,  # output, n elements: b = a
                n,  # element count
                BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(b_ptr + offs, tl.load(a_ptr + offs, mask=mask), mask=mask)


@triton.jit
def scale_kernel(a_ptr,  # input, n elements
                 b_ptr,  # output, n elements: b = s * a
                 s,  # fp32 scalar
                 n,  # element count
                 BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask).to(tl.float32)
    tl.store(b_ptr + offs, (s * a).to(b_ptr.dtype.element_ty), mask=mask)


@triton.jit
def add_kernel(a_ptr,  # input, n elements
               b_ptr,  # input, n elements
               c_ptr,  # output, n elements: c = a + b
               n,  # element count
               BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask).to(tl.float32)
    b = tl.load(b_ptr + offs, mask=mask).to(tl.float32)
    tl.store(c_ptr + offs, (a + b).to(c_ptr.dtype.element_ty), mask=mask)


@triton.jit
def triad_kernel(b_ptr,  # input, n elements
                 c_ptr,  # input, n elements
                 a_ptr,  # output, n elements: a = b + s * c
                 s,  # fp32 scalar
                 n,  # element count
                 BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    b = tl.load(b_ptr + offs, mask=mask).to(tl.float32)
    c = tl.load(c_ptr + offs, mask=mask).to(tl.float32)
    tl.store(a_ptr + offs, (b + s * c).to(a_ptr.dtype.element_ty), mask=mask)


@triton.jit
def nstream_kernel(a_ptr,  # input and output, n elements: a += b + s * c, in place
                   b_ptr,  # input, n elements
                   c_ptr,  # input, n elements
                   s,  # fp32 scalar
                   n,  # element count
                   BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask).to(tl.float32)
    b = tl.load(b_ptr + offs, mask=mask).to(tl.float32)
    c = tl.load(c_ptr + offs, mask=mask).to(tl.float32)
    tl.store(a_ptr + offs, (a + b + s * c).to(a_ptr.dtype.element_ty), mask=mask)


@triton.jit
def read_kernel(a_ptr,  # input, n elements
                part_ptr,  # output, one fp32 slot per program: part[p] = program p's partial sum of a
                n,  # element count
                BLOCK: tl.constexpr, STAGES: tl.constexpr):
    # Persistent grid: program p sums blocks p, p + G, p + 2G, ... and stores one partial
    # sum in its own slot (sum(a) = sum(part)): no atomic and no output to zero first, so a
    # call is one launch. Whole blocks load unmasked (one 16-byte load per thread and 16
    # bytes of the block, all issued before the first add: BLOCK x width / (16 x threads)
    # loads in flight per thread), and the loop is software-pipelined STAGES deep (Triton
    # pipelines loads that feed no dot only when the loop asks), so the next blocks' loads
    # are in flight while this one is added; only the one partial block at the end, if any,
    # is masked. Each byte is read once: the loads are marked evict-first, so the stream
    # does not push other lines out of L2.
    pid = tl.program_id(0).to(tl.int64)  # 64-bit offsets: arrays past 2**31 elements
    programs = tl.num_programs(0).to(tl.int64)
    full = n // BLOCK * BLOCK  # elements in whole blocks (n's own width: i64 when n passes 2**31)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in tl.range(pid * BLOCK, full, programs * BLOCK, num_stages=STAGES):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(a_ptr + offs, eviction_policy="evict_first").to(tl.float32)
    if pid == (n // BLOCK) % programs:  # the partial block, on the program whose turn it is
        offs = full + tl.arange(0, BLOCK)
        acc += tl.load(a_ptr + offs, mask=offs < n, other=0.0, eviction_policy="evict_first").to(tl.float32)
    tl.store(part_ptr + pid, tl.sum(acc, axis=0))


@triton.jit
def write_kernel(b_ptr,  # output, n elements: b = s
                 s,  # fp32 scalar
                 n,  # element count
                 BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    vals = tl.full([BLOCK], s, tl.float32).to(b_ptr.dtype.element_ty)
    tl.store(b_ptr + offs, vals, mask=offs < n)


def _grid(n, block):
    return (triton.cdiv(n, block),)


def copy(a, b, block=BLOCK):
    """Return b after b = a."""
    copy_kernel[_grid(a.numel(), block)](a, b, a.numel(), BLOCK=block, num_warps=NUM_WARPS)
    return b


def scale(a, b, s, block=BLOCK):
    """Return b after b = s * a."""
    scale_kernel[_grid(a.numel(), block)](a, b, float(s), a.numel(), BLOCK=block, num_warps=NUM_WARPS)
    return b


def add(a, b, c, block=BLOCK):
    """Return c after c = a + b."""
    add_kernel[_grid(a.numel(), block)](a, b, c, a.numel(), BLOCK=block, num_warps=NUM_WARPS)
    return c


def triad(b, c, a, s, block=BLOCK):
    """Return a after a = b + s * c (STREAM's triad)."""
    triad_kernel[_grid(b.numel(), block)](b, c, a, float(s), b.numel(), BLOCK=block, num_warps=NUM_WARPS)
    return a


def nstream(a, b, c, s, block=BLOCK):
    """Return a after a += b + s * c (BabelStream's nstream): each element of a read and written
    once by the program that owns it, so the update in place needs no second buffer."""
    nstream_kernel[_grid(a.numel(), block)](a, b, c, float(s), a.numel(), BLOCK=block, num_warps=NUM_WARPS)
    return a


def read_block(element_bytes: int) -> int:
    """Return read()'s block: READ_BLOCK_BYTES per iteration whatever the dtype (a 16-bit
    array gets twice the fp32 elements), so the bytes in flight per program are the same."""
    return READ_BLOCK_BYTES // element_bytes


def read_programs(device):
    """Return the persistent grid size for read(): READ_PROGRAMS_PER_SM per SM on a GPU, 4 elsewhere."""
    if device.type == "cuda":
        return READ_PROGRAMS_PER_SM * torch.cuda.get_device_properties(device).multi_processor_count
    return 4


def partials(programs: int, dtype, device) -> torch.Tensor:
    """Return the output of a persistent reduction (read, the probes' rereads): one slot per program, NaN
    (the largest integer for an integer dtype) until a call writes it. Allocate it once,
    outside any timed region; the call writes every slot, and the result is its sum."""
    fill = float("nan") if dtype.is_floating_point else torch.iinfo(dtype).max
    return torch.full((programs,), fill, dtype=dtype, device=device)


def read_partials(a, block=None, programs=None) -> torch.Tensor:
    """Return read()'s output for a: one fp32 slot per program of its persistent grid
    (at most `programs`, default read_programs(a's device), and no more than a's blocks)."""
    block = block or read_block(a.element_size())
    programs = programs or read_programs(a.device)
    return partials(max(1, min(programs, triton.cdiv(a.numel(), block))), torch.float32, a.device)


def read(a, part, block=None):
    """Return part (from read_partials, with the same block) holding per-program partial sums
    of a, accumulated in fp32: sum(a) = part.sum(). One launch, on part.numel() programs.
    block: elements per program and iteration (default read_block(a's width))."""
    block = block or read_block(a.element_size())
    read_kernel[(part.numel(),)](a, part, a.numel(), BLOCK=block, STAGES=READ_STAGES, num_warps=READ_WARPS)
    return part


def write(b, s, block=BLOCK):
    """Return b after b = s everywhere (a fill)."""
    write_kernel[_grid(b.numel(), block)](b, float(s), b.numel(), BLOCK=block, num_warps=NUM_WARPS)
    return b
