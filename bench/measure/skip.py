"""Whether a point runs, and why not: the one place that decides it.

The runner, the dry run (bench/aot/predict.py), the ahead-of-time plan (bench/aot/plan.py),
the up-front option checks (bench/run/options.py), `--list` and the pytest-benchmark module
all ask here, so a point skipped by one is skipped by all with the same sentence.

The reasons, in the order they are asked (the first that applies is the row's reason):

1. the op's own rule for the point (`Op.skip`: a dtype the device lacks, a shape that
   cannot exist), which skips every impl of it;
2. the backend (rule 8: Triton needs a GPU or, for correctness only, its interpreter);
3. the quick plan (`Impl.quick_dtypes`);
4. the impl's own rule (`Impl.skip`: a kernel's arch or layout requirement);
5. the sweep's end (`Op.sweep_stop` on the sizes the same sweep measured: rule 5's settled
   off-chip rate, the GEMM search's plateau; rule 7);
6. memory (rule 16): what the point would hold at once against the budget and the
   device's free memory, decided before any input is made;
7. time (rule 7): a time per call, extrapolated from a smaller point, beyond the budget.

1-4 are static: they depend on the point, the device and the plan only (`static_reason`).
5-7 depend on what the run has measured and holds, so the runner passes its state in; the
dry run asks the same functions with its predicted rates.
"""
from __future__ import annotations

import dataclasses
import importlib.util

from bench.hw.device import DeviceInfo
from bench.measure.memory import FREE_PREFIX
from bench.measure.registry import Impl, Op
from bench.util import fmt_bytes, precision_name, triton_interpreting


def backend_reason(impl: Impl, point: dict, device: DeviceInfo) -> str | None:
    """Return why impl's backend cannot be timed on device, or None (ARCHITECTURE.md, rule 8).

    Triton needs a GPU; on a CPU it runs only under its interpreter, whose timings are
    not performance. Under the interpreter bf16 is silently wrong (upstream triton issue
    11584), so bf16 Triton points are not even checked there.
    """
    if impl.backend != "triton":
        return None
    if importlib.util.find_spec("triton") is None:
        return "triton is not installed"
    if device.kind == "cpu" and not triton_interpreting():
        return ("Triton compiles for GPUs only; on a CPU it runs under TRITON_INTERPRET=1, whose timings are "
                "never reported (the tests check its correctness)")
    return interpreter_bf16_reason(point, device)


INTERPRETER_BF16 = "bf16 is silently wrong in Triton's interpreter (triton issue 11584); checked on a GPU only"


def interpreter_bf16_reason(point: dict, device: DeviceInfo) -> str | None:
    """Return INTERPRETER_BF16 for a bf16 point (either spelling) on a CPU while Triton
    interprets (the interpreter runs CPU tensors; a GPU's plan compiles), else None."""
    if device.kind == "cpu" and triton_interpreting() and precision_name(str(point.get("dtype", ""))) == "bf16":
        return INTERPRETER_BF16
    return None


def quick_reason(impl: Impl, point: dict, quick: bool) -> str | None:
    """Return why a quick run leaves this impl's point out (Impl.quick_dtypes), or None."""
    if quick and impl.quick_dtypes and point.get("dtype") not in impl.quick_dtypes:
        return f"quick runs time {impl.id} at {', '.join(impl.quick_dtypes)} only"
    return None


def point_reason(op: Op, point: dict, device: DeviceInfo) -> str | None:
    """Return why no impl of op can run point on device (the op's own rule), or None."""
    return (op.skip(point, device) or None) if op.skip is not None else None


def own_reason(impl: Impl, point: dict, device: DeviceInfo) -> str | None:
    """Return the impl's own reason to skip point on device, or None.

    On a datasheet part (a dry run for a device that is not here, `extra.spec`) a rule that
    probes the device gives a different reason for another device (a probe's error names
    it): that is undecidable here, so the point counts as run."""
    if impl.skip is None:
        return None
    reason = impl.skip(point, device)
    if reason and (device.extra or {}).get("spec"):
        if impl.skip(point, dataclasses.replace(device, torch_device="meta")) != reason:
            return None
    return reason or None


def impl_reason(impl: Impl, point: dict, device: DeviceInfo, quick: bool) -> str | None:
    """Return the first static reason (2-4 above) that impl does not run point, or None."""
    return backend_reason(impl, point, device) or quick_reason(impl, point, quick) or own_reason(impl, point, device)


def static_reason(op: Op, impl: Impl, point: dict, device: DeviceInfo, quick: bool) -> str | None:
    """Return the first of reasons 1-4 that impl does not run point on device, or None."""
    return point_reason(op, point, device) or impl_reason(impl, point, device, quick)


def sweep_key(impl: Impl, point: dict, mode: str) -> tuple:
    """Return what a point shares with its neighbours in one sweep: the impl, the mode and
    every axis but the innermost (the size it sweeps: ws_bytes, shape, batch, seq, ...).
    The first batch of the next GEMV layer is a new sweep, not a 100x drop."""
    fixed = tuple((k, repr(v)) for k, v in list(point.items())[:-1])
    return (impl.id, mode) + fixed


def sweep_reason(op: Op, history: list, device: DeviceInfo) -> str | None:
    """Return why a sweep grows no further (Op.sweep_stop on the [(point, rate)] its
    earlier sizes measured), or None."""
    if op.sweep_stop is None or not history:
        return None
    return op.sweep_stop(history, device) or None


def memory_reason(need: int, pools: dict, extra: dict, budget, free: int | None, held: dict,
                  torch_device: str) -> str | None:
    """Return why a point does not fit (rule 16), or None: need is its own peak (inputs,
    outputs, reference), pools the shared pools it would grow, extra other buffers it
    would add (the cold flush); against the budget, then 90% of the device's free memory
    (free: None where it cannot be read), counting only the growth of pools already held."""
    reason = budget.shortfall(need, pools, extra)
    if reason:
        return reason
    growth = sum(max(0, b - held.get(k, 0)) for k, b in pools.items()) + sum(extra.values())
    if free is not None and need + growth > 0.9 * free:
        return (f"{FREE_PREFIX}: needs about {fmt_bytes(need + growth)} (inputs, pools and the reference) "
                f"but {fmt_bytes(free)} is free on {torch_device}")
    return None


def call_estimate(seen: list, flops: int, nbytes: int) -> tuple[float, float] | None:
    """Return (predicted seconds per call, the seconds it was scaled from) for a point of
    flops and nbytes, or None; seen: the same cost group's last calls (a sequence), oldest first, each
    ((flops, bytes), seconds per call), at most two used (rule 7). The estimate stays below
    the call's true time whether FLOPs and bytes cost in turn or overlap: it is the larger of
    the last call scaled by the smaller growth of the two, and, where the last two calls grew
    them by ratios more than 5% apart and so fix a cost per FLOP and per byte (t = a F + b B,
    a, b >= 0), the larger of a F and b B for this point. The second catches a path slow in
    one term that the first misses: a batch-16 GEMV that took 16x batch 1's time on FLOPs
    alone predicts batch 256 from its FLOPs, not from its barely grown bytes."""
    if not seen:
        return None
    (f1, b1), t1 = seen[-1]
    ratios = [new / old for new, old in ((flops, f1), (nbytes, b1)) if new and old]
    if not ratios:
        return None
    predicted = t1 * min(ratios)
    if len(seen) >= 2 and flops and nbytes:
        (f0, b0), t0 = seen[-2]
        det = f0 * b1 - f1 * b0
        if f0 and b0 and f1 and b1 and abs(det) > 0.05 * f0 * b1:
            a, b = (t0 * b1 - t1 * b0) / det, (f0 * t1 - f1 * t0) / det
            if a >= 0 and b >= 0:
                predicted = max(predicted, a * flops, b * nbytes)
    return predicted, t1


CUT_PREFIX = "cut short"  # a row cut short (time_reason's, the runner's): its reason starts so


def time_reason(predicted_s: float, budget_s: float, basis_s: float | None = None) -> str | None:
    """Return why a point is cut short before it runs (rule 7): one call predicted to take
    longer than the whole point budget; basis_s, the time per call it was scaled from."""
    if predicted_s <= budget_s:
        return None
    basis = f" (from {basis_s:.3g} s at a smaller size)" if basis_s is not None else ""
    return f"{CUT_PREFIX}: predicted {predicted_s:.3g} s per call{basis} exceeds the {budget_s:g} s point budget"
