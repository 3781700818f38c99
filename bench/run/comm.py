"""Interconnect benchmarks on torch.distributed: collectives and point-to-point copies,
run in lockstep by every rank of a process group (NCCL on GPUs, gloo on CPUs), each result
checked before it is timed. Run inside a torchrun worker; rank 0 records the rows.

For a message of S bytes over n ranks (nccl-tests' conventions; S is the per-rank buffer
of all_reduce, broadcast and all_to_all, and the gathered output / scattered input of
all_gather and reduce_scatter):

    algorithm bandwidth  algbw = S / t
    bus bandwidth        busbw = algbw x factor, the per-link rate that compares across n:
        all_reduce 2 (n - 1) / n; all_gather, reduce_scatter, all_to_all (n - 1) / n;
        broadcast 1; send/recv 1

The FLOPs of a reduction (n - 1 adds per element) are not counted: these are bandwidth roofs.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist

from bench.measure.timing import time_lockstep
from bench.results import Measurement

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all")
# fault injection for the tests: this rank exits abruptly after this many rows
DIE_ENV = "ROOFBENCH_TEST_DIE"


def bus_factor(op: str, n: int) -> float:
    """Return busbw / algbw for op over n ranks (see the module docstring)."""
    if op == "all_reduce":
        return 2 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    return 1.0


def sizes(kind: str, quick: bool) -> list[int]:
    """Return message sizes in bytes: 4 B to 64 MiB with gloo (1 GiB with NCCL), x4 steps (x16 quick)."""
    top = 30 if kind == "cuda" else 26
    return [2 ** e for e in range(2, top + 1, 4 if quick else 2)]


@dataclass
class Case:
    op: str
    nbytes: int
    run: Callable[[], object]          # the timed collective
    check: Callable[[], bool]
    prepare: Callable[[], object] = lambda: None   # refills the buffers, before the barrier: not timed


def _case(op: str, nbytes: int, rank: int, n: int, device: str, src: int = 0, dst: int = 1) -> Case:
    """Return the buffers, the call and the check of one collective of nbytes on this rank.
    Inputs hold rank-dependent values, outputs are poisoned, so a check fails on a wrong
    sum, a wrong order or an output never written."""
    elems = max(n, nbytes // 4 // n * n)
    nan = float("nan")
    if op == "all_reduce":
        x = torch.empty(elems, device=device)
        return Case(op, elems * 4, lambda: dist.all_reduce(x), lambda: bool((x == n * (n + 1) / 2).all()),
                    prepare=lambda: x.fill_(rank + 1))
    if op == "broadcast":
        x = torch.empty(elems, device=device)
        return Case(op, elems * 4, lambda: dist.broadcast(x, src=0), lambda: bool((x == 7.0).all()),
                    prepare=lambda: x.fill_(7.0 if rank == 0 else nan))
    if op == "all_gather":
        chunk = elems // n
        inp = torch.full((chunk,), float(rank + 1), device=device)
        out = torch.full((elems,), nan, device=device)
        want = torch.arange(1, n + 1, device=device, dtype=torch.float32).repeat_interleave(chunk)
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor  # renamed in torch 2.13
        return Case(op, elems * 4, lambda: gather(out, inp), lambda: bool(torch.equal(out, want)))
    if op == "reduce_scatter":
        chunk = elems // n
        inp = torch.full((elems,), float(rank + 1), device=device)
        out = torch.full((chunk,), nan, device=device)
        scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor  # renamed in torch 2.13
        return Case(op, elems * 4, lambda: scatter(out, inp), lambda: bool((out == n * (n + 1) / 2).all()))
    if op == "all_to_all":
        chunk = elems // n
        # chunk k of rank r holds 1000 r + k; after the exchange chunk j of rank r holds 1000 j + r
        inp = (1000 * rank + torch.arange(n, device=device, dtype=torch.float32)).repeat_interleave(chunk)
        out = torch.full((elems,), nan, device=device)
        want = (1000 * torch.arange(n, device=device, dtype=torch.float32) + rank).repeat_interleave(chunk)
        return Case(op, elems * 4, lambda: dist.all_to_all_single(out, inp), lambda: bool(torch.equal(out, want)))
    if op == "sendrecv":
        x = torch.empty(max(1, nbytes // 4), device=device)

        def run():
            if rank == src:
                dist.send(x, dst)
            elif rank == dst:
                dist.recv(x, src)

        def prepare():
            if rank in (src, dst):
                x.fill_(src + 1 if rank == src else nan)
        return Case(op, x.numel() * 4, run, lambda: rank != dst or bool((x == src + 1).all()), prepare=prepare)
    raise ValueError(f"unknown collective '{op}': choose from {', '.join(COLLECTIVES)} or sendrecv.")


def run_comm(device: str, quick: bool, sink: Callable[[Measurement], None], progress=print,
             ops=COLLECTIVES, pairs: bool = True, max_bytes: int | None = None) -> list[Measurement]:
    """Run every collective (and send/recv between every ordered pair of ranks when pairs) over
    the message sizes, in lockstep; return the rows (on rank 0; other ranks return [])."""
    rank, n = dist.get_rank(), dist.get_world_size()
    backend = dist.get_backend()
    kind = "cuda" if device.startswith("cuda") else "cpu"
    die_after = (int(os.environ.get(DIE_ENV, "-1").split(":")[-1])
                 if os.environ.get(DIE_ENV, "").startswith(f"{rank}:") else -1)
    flag = torch.zeros(1, device=device)

    def reduce_max(vals):
        t = torch.tensor(vals, device=device, dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return t.tolist()

    def agree(ok: bool) -> bool:
        flag.fill_(0.0 if ok else 1.0)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return flag.item() == 0.0

    sweep = [s for s in sizes(kind, quick) if not max_bytes or s <= max_bytes]
    plan = [(op, s, None) for op in ops for s in sweep]
    if pairs and n > 1:  # every ordered pair: its latency (smallest size) and bandwidth (largest)
        plan += [("sendrecv", s, (i, j)) for i in range(n) for j in range(n) if i != j for s in (sweep[0], sweep[-1])]
    rows = []
    for count, (op, s, peer) in enumerate(plan):
        if count == die_after:
            os._exit(3)
        case = _case(op, s, rank, n, device, *(peer or (0, 1)))
        case.prepare()
        case.run()
        ok = agree(case.check())
        factor = bus_factor(op, n)
        name = op if op != "sendrecv" else f"sendrecv.{peer[0]}to{peer[1]}"
        base = dict(op=f"comm.{op}", family="comm", impl=f"comm.{op}/{backend}", backend=backend,
                    point={"dtype": "float32", "bytes": case.nbytes, "ranks": n,
                           **({"pair": f"{peer[0]}->{peer[1]}"} if peer else {})},
                    size=case.nbytes, shape=f"{n} ranks" + (f" {peer[0]}->{peer[1]}" if peer else ""),
                    working_set_bytes=case.nbytes, flops=0, bytes=case.nbytes, mode="warm", bus_factor=factor)
        if not ok:
            m = Measurement(**base, status="error",
                            reason=f"wrong result on at least one rank: {name} of {case.nbytes} bytes; not timed")
        else:
            samples = 20 if case.nbytes <= 2**20 else 5
            t = time_lockstep(case.run, device, 3, samples, dist.barrier, reduce_max, prepare=case.prepare)
            m = Measurement(**base, status="ok", samples_s=t.samples_s, reps=1, timer=t.method, stop=t.stop)
        if rank == 0:
            rows.append(m)
            sink(m)
            progress(f"[{count + 1}/{len(plan)}] {name} {case.nbytes} B x {n} ranks: "
                     + (f"algbw {m.gbps:.3g} GB/s, busbw {m.gbps * factor:.3g} GB/s, {m.median_s * 1e6:.1f} us"
                        if m.status == "ok" else m.reason))
    return rows
