"""Host-device copies: host-to-device and device-to-host, from pinned and from pageable host
memory, over message sizes. bytes = the size copied (read once on one side, written once
on the other); no FLOPs. A GPU family: on a CPU-only machine every point is skipped."""
from __future__ import annotations

import torch

from bench.measure.registry import REGISTRY, Axis, Impl, Op, geometric

# One size per octave in full runs too: a copy's rate rises smoothly from its latency to the
# link's plateau, and the half-octave sizes between added rows, not shape (ARCHITECTURE.md rule 15).
SIZES = {"quick": (2**12, 2**30, 1), "full": (2**12, 2**31, 1)}


def size_sweep(device, quick):
    lo, hi, per = SIZES["quick" if quick else "full"]
    return geometric(lo, hi, per)


def make_inputs(kind):
    def make(point, device):
        n = point["bytes"] // 4
        pinned = point["memory"] == "pinned" and torch.cuda.is_available()
        # its own generator: torch's global one is left alone
        host = torch.randn(n, generator=torch.Generator().manual_seed(5))
        if pinned:
            host = host.pin_memory()
        dev = torch.empty(n, device=device)
        if kind == "h2d":
            return {"src": host, "dst": dev}
        dev.copy_(host)
        return {"src": dev, "dst": torch.empty_like(host).pin_memory() if pinned else torch.empty_like(host)}
    return make


def skip(point, device):
    return "host-device copies need a GPU" if device.kind != "cuda" else None


for kind, doc in (("h2d", "host to device"), ("d2h", "device to host")):
    REGISTRY.add_op(Op(
        name=f"transfer.{kind}", family="transfer", doc=f"{doc} copy; bytes = the size copied",
        axes=(Axis("memory", ("pinned", "pageable"), doc="host memory kind"),
              Axis("bytes", sweep=size_sweep, doc="bytes copied")),
        make_inputs=make_inputs(kind), reference=lambda x: x["src"].double().cpu(),
        flops=lambda p: 0, bytes=lambda p: p["bytes"] // 4 * 4, working_set=lambda p: p["bytes"] // 4 * 4,
        describe=lambda p: (p["bytes"], p["memory"]), tolerance=lambda p: 0.0,
        outputs=("dst",), skip=skip, memory_factor=3.0,
        error=lambda out, ref, x: (out.double().cpu() - ref).abs().max().item()))
    REGISTRY.add_impl(Impl(f"transfer.{kind}", "torch", "torch",
                           lambda x, ctx: (lambda: x["dst"].copy_(x["src"], non_blocking=True)),
                           doc="Tensor.copy_(non_blocking=True); pinned memory lets the copy engine DMA directly"))
