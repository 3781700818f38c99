"""Stream family: copy, scale, add, triad, read (a full sum) and write (a fill).

One axis is the working set in bytes (every array the kernel touches), swept
geometrically from inside the first cache to well past the last-level cache, so that
each memory level's plateau shows; the element count n follows from it. Bytes are the
compulsory traffic, each array read or written once:

    copy  b = a          bytes = 2 n w   flops = 0
    scale b = s a        bytes = 2 n w   flops = n
    add   c = a + b      bytes = 3 n w   flops = n
    triad a = b + s c    bytes = 3 n w   flops = 2 n
    read  sum(a)         bytes = 1 n w   flops = n   (n - 1 adds, counted as n; the 4-byte result is not counted)
    write b = s          bytes = 1 n w   flops = 0

with w the element size in bytes. Write-allocate traffic that a CPU may add (reading a
line before writing it) is not compulsory and is not counted: it shows up as lower GB/s.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from bench.registry import REGISTRY, Axis, Impl, Op, geometric, relative_norm_error

SCALAR = 3.0
DTYPES = ("float32", "float16", "bfloat16")
QUICK_DTYPES = ("float32", "bfloat16")
TOLERANCE = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1e-2}
# A 16-bit sum is rounded once more at the end, by up to half an ulp of |sum|, and |sum|
# can be a few times ||a||_2, the scale its error is measured against.
READ_TOLERANCE_FACTOR = 4


@dataclass(frozen=True)
class Kind:
    name: str
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    flops_per_element: int
    formula: str


KINDS = (
    Kind("copy", ("a",), ("b",), 0, "b = a"),
    Kind("scale", ("a",), ("b",), 1, "b = s * a"),
    Kind("add", ("a", "b"), ("c",), 1, "c = a + b"),
    Kind("triad", ("b", "c"), ("a",), 2, "a = b + s * c"),
    Kind("read", ("a",), (), 1, "out = sum(a)"),
    Kind("write", (), ("b",), 0, "b = s"),
)


def itemsize(dtype: str) -> int:
    return torch.empty((), dtype=getattr(torch, dtype)).element_size()


def arrays(kind: Kind) -> int:
    """Return how many n-element arrays the kernel streams: reads + writes."""
    return len(kind.reads) + len(kind.writes)


def elements(kind: Kind, point) -> int:
    """Return n = working-set target // (arrays x itemsize)."""
    return max(1, point["ws_bytes"] // (arrays(kind) * itemsize(point["dtype"])))


def stream_bytes(kind: Kind, point) -> int:
    """Return compulsory bytes = arrays x n x itemsize (copy/scale 2, add/triad 3, read/write 1)."""
    return arrays(kind) * elements(kind, point) * itemsize(point["dtype"])


def stream_flops(kind: Kind, point) -> int:
    """Return flops_per_element x n (scale, add, read 1; triad 2; copy, write 0)."""
    return kind.flops_per_element * elements(kind, point)


def ws_sweep(device, quick: bool) -> list[int]:
    """Return working sets from 16 KiB (inside any L1) to 8x the last-level cache on a CPU,
    to max(8x L2, 1 GiB) on a GPU (double that in full runs); one size per octave in
    quick runs, two otherwise."""
    llc = device.llc_bytes
    if device.kind == "cuda":
        lo, hi = 64 * 2**10, max(8 * llc, 2**30) * (1 if quick else 2)
    else:
        lo, hi = 16 * 2**10, 8 * llc
    return geometric(lo, hi, 1 if quick else 2)


def _make_inputs(kind: Kind):
    def make_inputs(point, device):
        n, dt = elements(kind, point), getattr(torch, point["dtype"])
        gen = torch.Generator(device=device).manual_seed(1234)
        inputs = {name: torch.randn(n, dtype=dt, device=device, generator=gen)
                  for name in kind.reads + kind.writes}
        if kind.name == "read":
            inputs["out"] = torch.empty((), dtype=torch.float32, device=device)  # triton accumulates here
            inputs["out_native"] = torch.empty((), dtype=dt, device=device)  # torch.sum's own dtype
        inputs["s"] = SCALAR
        return inputs
    return make_inputs


def _reference(kind: Kind):
    def reference(x):
        d = {k: v.double() for k, v in x.items() if k in kind.reads}
        s = x["s"]
        return {
            "copy": lambda: d["a"],
            "scale": lambda: s * d["a"],
            "add": lambda: d["a"] + d["b"],
            "triad": lambda: d["b"] + s * d["c"],
            "read": lambda: d["a"].sum(),
            "write": lambda: torch.full_like(x["b"], s, dtype=torch.float64),
        }[kind.name]()
    return reference


def _read_error(out, ref, inputs) -> float:
    """Return |out - ref| / ||a||_2: a sum of normals can be near zero, so the error is
    scaled by the size of what was summed, not by the result."""
    return abs(out.double().item() - ref.item()) / max(inputs["a"].double().norm().item(), 1e-300)


def _torch_launcher(kind: Kind):
    def launcher(x):
        s = x["s"]
        return {
            "copy": lambda: x["b"].copy_(x["a"]),
            "scale": lambda: torch.mul(x["a"], s, out=x["b"]),
            "add": lambda: torch.add(x["a"], x["b"], out=x["c"]),
            "triad": lambda: torch.add(x["b"], x["c"], alpha=s, out=x["a"]),
            # out in a's dtype: a float32 out on a CPU makes torch cast all of a first
            "read": lambda: torch.sum(x["a"], dim=0, out=x["out_native"]),
            "write": lambda: x["b"].fill_(s),
        }[kind.name]
    return launcher


def _triton_launcher(kind: Kind):
    def launcher(x):
        from kernels import stream as k
        s = x["s"]
        return {
            "copy": lambda: k.copy(x["a"], x["b"]),
            "scale": lambda: k.scale(x["a"], x["b"], s),
            "add": lambda: k.add(x["a"], x["b"], x["c"]),
            "triad": lambda: k.triad(x["b"], x["c"], x["a"], s),
            "read": lambda: k.read(x["a"], x["out"]),
            "write": lambda: k.write(x["b"], s),
        }[kind.name]
    return launcher


def _register(kind: Kind):
    op = REGISTRY.add_op(Op(
        name=f"stream.{kind.name}", family="stream",
        doc=f"{kind.formula}; bytes = {arrays(kind)} n w, flops = {kind.flops_per_element} n",
        axes=(
            Axis("dtype", DTYPES, QUICK_DTYPES, doc="element type"),
            Axis("ws_bytes", sweep=ws_sweep, doc="working set in bytes (all arrays), geometric from 16 KiB to past 8x the last-level cache"),
        ),
        make_inputs=_make_inputs(kind),
        reference=_reference(kind),
        flops=lambda p: stream_flops(kind, p),
        bytes=lambda p: stream_bytes(kind, p),
        working_set=lambda p: stream_bytes(kind, p),
        describe=lambda p: (elements(kind, p), f"({elements(kind, p)},)"),
        tolerance=lambda p: TOLERANCE[p["dtype"]] * (READ_TOLERANCE_FACTOR if kind.name == "read" and p["dtype"] != "float32" else 1),
        outputs=kind.writes + (("out", "out_native") if kind.name == "read" else ()),
        error=_read_error if kind.name == "read" else relative_norm_error,
        memory_factor=1 + 8 / 2,  # the float64 reference of 16-bit data is 4x its size
    ))
    REGISTRY.add_impl(Impl(op.name, "torch", "torch", _torch_launcher(kind), doc="torch out= ops, one kernel each"))
    REGISTRY.add_impl(Impl(op.name, "triton", "triton", _triton_launcher(kind), doc="kernels/stream.py"))


for _kind in KINDS:
    _register(_kind)
