"""The correctness gate (ARCHITECTURE.md, rule 2): nothing is timed before its result is
checked.

    poison the outputs (NaN, or the largest integer) -> launch (setup and autotuning, outside
    any timed region) -> call once -> synchronize the device -> compare with the float64
    reference -> pass when the error is within the tolerance

An output the kernel never writes keeps its poison and fails; a NaN error fails. The runner,
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


def sync(device) -> None:
    """Wait for the device's queued work: device is a DeviceInfo or a torch device name."""
    name = getattr(device, "torch_device", device)
    if name is not None and str(name).startswith("cuda"):
        torch.cuda.synchronize(torch.device(name))


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
          inputs: dict | None = None, outputs=(), error: Callable = relative_norm_error) -> Checked:
    """Poison inputs[outputs], launch() the zero-argument callable, call it once, synchronize
    device and compare its output with reference (float64) by error(out, reference, inputs).
    reference None: the call is run and synchronized but not compared."""
    poison(inputs or {}, outputs)
    fn = launch()
    t0 = time.perf_counter()
    out = fn()
    sync(device)
    call_s = time.perf_counter() - t0
    if reference is None:
        return Checked(fn, out, None, None, call_s)
    return Checked(fn, out, float(error(out, reference, inputs)), tolerance, call_s)


def verifier(reference, tolerance: float | None, device, inputs: dict | None = None, outputs=(),
             error: Callable = relative_norm_error) -> Callable | None:
    """Return verify(fn) -> None when fn's result passes the gate, else the reason (one
    sentence): the outputs poisoned, fn called once, the device synchronized and the output
    compared with reference as check() does. None when there is no reference to compare with
    (a tuner then keeps its fastest candidate unchecked, and check() still runs)."""
    if reference is None or tolerance is None:
        return None

    def verify(fn) -> str | None:
        poison(inputs or {}, outputs)
        out = fn()
        sync(device)
        got = Checked(fn, out, float(error(out, reference, inputs)), tolerance)
        return None if got.passed else f"wrong result: error {got.error:.3g} exceeds tolerance {tolerance:g}"
    return verify
