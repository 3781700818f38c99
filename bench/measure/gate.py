"""The correctness gate (ARCHITECTURE.md, rule 2): nothing is timed before its result is
checked.

    poison the outputs (NaN, or the largest integer) and snapshot the in-outs -> launch (setup
    and autotuning, outside any timed region) -> restore the in-outs -> call once ->
    synchronize the device -> compare with the float64 reference -> restore the in-outs ->
    pass when the error is within the tolerance

An output the kernel never writes keeps its poison and fails; a NaN error fails. An in-out
array (read and written by the kernel, as nstream's a in a += b + s c) cannot be poisoned:
its values are an input. The gate keeps a copy of it instead and puts it back before each
checked call and after it, so the reference (made from the inputs before the gate) meets the
result of one call on the inputs it was made from, and the timed calls start from them too. The runner,
the pytest-benchmark entry point (tests/bench_ops.py) and the API (bench/api.py) all
call check(); exceptions from the launcher or the call propagate to the caller, which
decides whether they end a point or the whole run.

A launcher that tunes (bench/ops/_tune.py) gets the same comparison as verifier(): each
candidate that wins the timing is checked before it is kept, so a fast wrong candidate (a
warp-specialized tile that races) is recorded with its error and the next-best taken, and the
point is not lost.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from bench.measure.registry import relative_norm_error
from bench.util import Reason


def sync(device) -> None:
    """Wait for the device's queued work: device is a DeviceInfo or a torch device name."""
    name = getattr(device, "torch_device", device)
    if name is not None and str(name).startswith("cuda"):
        torch.cuda.synchronize(torch.device(name))


class Snapshot:
    """Copies of a point's in-out arrays, taken once; restore() writes them back in place."""

    def __init__(self, inputs: dict | None, names=()):
        self.inputs = inputs if isinstance(inputs, dict) else {}   # a launcher's lone tensor has no in-outs
        self.saved = {n: self.inputs[n].clone() for n in names if isinstance(self.inputs.get(n), torch.Tensor)}

    def restore(self) -> None:
        for name, t in self.saved.items():
            self.inputs[name].copy_(t)

    def release(self) -> None:
        """Drop the copies: the gate has restored the in-outs, and the timed calls need none."""
        self.saved = {}


def snapshot(inputs: dict | None, inouts) -> Snapshot:
    """Return inouts when it is a Snapshot already (a runner shares one between its verifier and
    its check), else a Snapshot of the named in-out arrays of inputs."""
    return inouts if isinstance(inouts, Snapshot) else Snapshot(inputs, inouts)


def poison(inputs: dict, names) -> None:
    """Fill the named output tensors with NaN (or the largest integer), so an output the
    kernel never writes fails the gate."""
    for name in names:
        t = inputs.get(name)
        if isinstance(t, torch.Tensor):
            t.fill_(math.nan if t.is_floating_point() else torch.iinfo(t.dtype).max)


@dataclass(frozen=True)
class Checked:
    """What the gate saw: the launched callable (the one to time), its first output, and
    the error against the reference with the tolerance it had to meet (both None when no
    reference was given)."""
    fn: Callable
    out: object
    error: float | None
    tolerance: float | None
    call_s: float = 0.0     # the checked call's wall time, synchronize included (part of a warm-up)

    @property
    def passed(self) -> bool:
        # a NaN error (an output never written) compares False, so it fails
        return self.error is None or (self.error <= self.tolerance)

    @property
    def reason(self) -> str:
        """Return the row's reason when it failed, "" when it passed."""
        if self.passed:
            return ""
        return f"wrong result: error {self.error:.3g} exceeds tolerance {self.tolerance:g}; not timed"


def check(launch: Callable[[], Callable], reference, tolerance: float | None, device,
          inputs: dict | None = None, outputs=(), error: Callable = relative_norm_error,
          inouts=()) -> Checked:
    """Poison inputs[outputs], snapshot inputs[inouts] (names, or a Snapshot), launch() the
    zero-argument callable, restore the in-outs (a launcher that tunes has called it), call it
    once, synchronize device, compare its output with reference (float64) by
    error(out, reference, inputs), and restore the in-outs again for the timed calls.
    reference None: the call is run and synchronized but not compared."""
    poison(inputs or {}, outputs)
    saved = snapshot(inputs, inouts)
    fn = launch()
    saved.restore()
    t0 = time.perf_counter()
    out = fn()
    sync(device)
    call_s = time.perf_counter() - t0
    err = None if reference is None else float(error(out, reference, inputs))
    saved.restore()
    if reference is None:
        return Checked(fn, out, None, None, call_s)
    return Checked(fn, out, err, tolerance, call_s)


def verifier(reference, tolerance: float | None, device, inputs: dict | None = None, outputs=(),
             error: Callable = relative_norm_error, inouts=()) -> Callable | None:
    """Return verify(fn) -> None when fn's result passes the gate, else the reason (one
    sentence, a bench.util.Reason whose code is wrong_result): the outputs poisoned, the in-outs
    restored from their snapshot (names, taken now, or a Snapshot), fn called once, the device
    synchronized, the output compared with reference as check() does, and the in-outs restored
    again. None when there is no reference to compare with (a tuner then keeps its fastest
    candidate unchecked, and check() still runs)."""
    if reference is None or tolerance is None:
        return None
    saved = snapshot(inputs, inouts)

    def verify(fn) -> str | None:
        poison(inputs or {}, outputs)
        saved.restore()
        out = fn()
        sync(device)
        got = Checked(fn, out, float(error(out, reference, inputs)), tolerance)
        saved.restore()
        return None if got.passed else Reason(f"wrong result: error {got.error:.3g} exceeds tolerance {tolerance:g}",
                                              "wrong_result")
    return verify
