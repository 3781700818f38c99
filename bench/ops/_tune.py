"""Autotuning with the suite's own timer (Triton's default autotune timer needs CUDA and
would be a second timer). Used by launchers, so tuning stays outside the timed region.

Before anything compiles, candidates are pruned: a tile whose shared memory (the kernel
module's own model) exceeds what one block may use on this GPU would only fail to launch
after a compile of seconds. Runs tune over at most QUICK_CANDIDATES (quick) or
FULL_CANDIDATES of the remaining ones, in the kernel module's order (its best guesses
first): each candidate costs a compile of seconds per integer specialization. Each candidate is
timed in the mode its point is measured in (a cold GEMV is tuned cold).

Tuning is once per shape class, not per point (ARCHITECTURE.md, rule 15): the launcher's key
with every size rounded to its octave (round(log2 n): 4096 and 5120 share a class, 6144 is
the next), the dtype, format, flags and the mode kept as they are. The first point of a class
times its candidates; the later ones launch the winner directly, as long as it is among their
own candidates (a size whose candidate list differs is tuned itself). The correctness gate
still checks every point, so a class never hides a wrong result, only a slower tile.

Every winner passes the gate before it is kept (the launch context's verify, built by
bench.measure.gate.verifier): the candidates are ranked by their time, and the fastest whose
result is right is kept; a wrong one (a warp-specialized tile that races) or one that crashes
when checked is recorded with its error in the row's detail and the next-best is taken. A
class's winner reused at another size is checked there too, and a size where it fails is tuned
on its own.

A candidate that fails to compile or run (out of resources, a compiler error) is a skipped
candidate with its reason; an error that leaves the CUDA context dead (an illegal address,
a launch failure) is not: it raises DeviceLost, and the run stops cleanly.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch

from bench.measure.timing import TimerConfig, time_fn
from bench.util import DeviceLost, Reason, first_line, is_fatal

TUNE_TIMER = TimerConfig(budget_s=0.03, warmup_s=0.005, min_samples=3, device_target_sample_s=2e-4)
QUICK_CANDIDATES = 3
FULL_CANDIDATES = 6   # a full run tunes over the first 6 that fit: the lists are ordered best first
_BEST: dict = {}     # shape class -> (config, median seconds, failures)
_REJECTED_HERE: dict = {}   # (shape class, key) -> why the gate rejected the class's winner at that key

# Shared memory one block may use (opt-in maximum), by compute capability, for when torch
# does not report it: sm_80 163 KiB, sm_86/89 99 KiB, sm_90/100 227 KiB.
SMEM_LIMIT = {(8, 0): 166912, (8, 6): 101376, (8, 7): 166912, (8, 9): 101376, (9, 0): 232448,
              (10, 0): 232448, (12, 0): 101376}
# AMD: the LDS one workgroup may use, by gfx target (CDNA2/3: 64 KiB; CDNA4: 160 KiB).
LDS_LIMIT = {"gfx90a": 65536, "gfx942": 65536, "gfx950": 163840}
# The compute capability AMD GPUs are modelled as: their matrix cores (MFMA) take operands
# from registers, as Ampere's mma does, and Triton's AMD pipeliner keeps num_stages - 1 LDS
# buffers, so sm_80's shared-memory models and tile lists fit them (bench/aot/table.py checks the
# models against the AMD compiler's LDS figures).
AMD_MODEL_CC = 80

def amd_gfx(ctx) -> str | None:
    """Return the gfx target ("gfx942") of the AMD GPU a launch context's point runs on, else None."""
    device = getattr(ctx, "device", None)
    return (getattr(device, "extra", None) or {}).get("gfx") if getattr(device, "vendor", None) == "amd" else None


def compute_capability(ctx) -> int | None:
    """Return the compute capability x 10 (90 for sm_90) of the GPU a launch context's point
    runs on (an AMD GPU: AMD_MODEL_CC), or None when it is not a GPU or unknown
    (shared-memory models then take the conservative figure)."""
    device = getattr(ctx, "device", None)
    if getattr(device, "vendor", None) == "amd":
        return AMD_MODEL_CC
    cc = getattr(device, "compute_capability", None) if getattr(device, "kind", None) == "cuda" else None
    if not cc:
        return None
    major, minor = (int(v) for v in cc.split("."))
    return 10 * major + minor


def smem_limit(torch_device: str) -> int | None:
    """Return the shared memory one block may use on this CUDA device, in bytes."""
    props = torch.cuda.get_device_properties(torch.device(torch_device))
    limit = getattr(props, "shared_memory_per_block_optin", 0)
    if limit:
        return int(limit)
    if torch.version.hip:  # ROCm: by gfx target ("gfx942:sramecc+:xnack-")
        return LDS_LIMIT.get(str(getattr(props, "gcnArchName", "")).split(":")[0])
    return SMEM_LIMIT.get((props.major, props.minor))


@dataclass(frozen=True)
class Tuning:
    """What a launcher tunes over: the cache key, the candidates (best guesses first), the
    configuration for Triton's interpreter, make_fn(config) -> the zero-argument callable,
    smem(config) -> the kernel module's shared-memory model in bytes (None: no model), and
    fallback: small configurations tried only when none of the candidates fits (AMD's 64 KiB
    of LDS), so such a GPU still runs the kernel. The launcher hands it to tuned();
    bench/aot/table.py compiles the same candidates, pruned the same way, without a GPU."""
    key: tuple
    candidates: tuple
    interpreter_config: object
    make_fn: Callable
    smem: Callable | None = None
    fallback: tuple = ()


def launched(candidates: Iterable, smem: Callable | None, limit: int | None, quick: bool, fallback: Iterable = ()):
    """Return (the candidates a run launches, the number pruned): those that fit, at most
    QUICK_CANDIDATES of them in a quick run and FULL_CANDIDATES in a full one; when none
    fits, those of fallback that fit."""
    keep = QUICK_CANDIDATES if quick else FULL_CANDIDATES
    fits, pruned = prune(candidates, smem, limit, keep)
    if not fits and fallback:
        fits, more = prune(fallback, smem, limit, keep)
        pruned += more
    return fits, pruned


def prune(candidates: Iterable, smem: Callable | None, limit: int | None, keep: int | None = None):
    """Return (the candidates that fit, the number pruned): those whose modelled shared
    memory smem(cfg) is within limit, in order, at most keep of them."""
    fits, pruned = [], 0
    for cfg in candidates:
        if smem is not None and limit is not None and smem(cfg) > limit:
            pruned += 1
            continue
        fits.append(cfg)
    return (fits[:keep] if keep else fits), pruned


def octave(n: int) -> int:
    """Return the octave bucket of a size: round(log2 n) (1 -> 0, 3 -> 2, 4096 -> 12,
    5120 -> 12, 6144 -> 13); 0 and below -> -1."""
    return round(math.log2(n)) if n > 0 else -1


def shape_class(key):
    """Return a tuning key with every integer size (inside nested tuples too) replaced by
    its octave, ("oct", octave(n)); strings, dtypes, bools and floats unchanged."""
    if isinstance(key, tuple):
        return tuple(shape_class(k) for k in key)
    if isinstance(key, int) and not isinstance(key, bool):
        return ("oct", octave(key))
    return key


def autotune(key, candidates: Iterable, make_fn: Callable, torch_device: str, mode: str = "warm",
             flush: Callable | None = None, verify: Callable | None = None):
    """Return (config, median seconds, sentence) of the fastest candidate whose result passes
    verify (None: the fastest), timed in mode with a short budget; cached under key. The
    sentence names the candidates that failed to run or were rejected, each with its reason.
    Raises DeviceLost on a fatal CUDA error, and RuntimeError when no candidate runs and
    passes (each one's reason in the message)."""
    if key not in _BEST:
        timed, failed = [], []
        for cfg in candidates:
            try:
                fn = make_fn(cfg)
                fn()
                t = time_fn(fn, torch_device, mode, TUNE_TIMER, flush if mode == "cold" else None).stats.median_s
            except Exception as e:
                if is_fatal(e):
                    raise DeviceLost(f"{first_line(e)} (while tuning {key[0]} with {cfg})") from e
                failed.append((cfg, first_line(e, 120)))
                continue
            timed.append((t, len(timed), cfg, fn))
        best, rejected = None, []
        for t, _, cfg, fn in sorted(timed, key=lambda c: c[:2]):
            why = _rejected(fn, verify, key, cfg)
            if why is None:
                best = (cfg, t)
                break
            rejected.append((cfg, why))
        if best is None:
            raise RuntimeError(f"no candidate configuration runs and passes the gate for {key[:2]} on {torch_device}: "
                               + "; ".join(f"{cfg}: {why}" for cfg, why in (failed + rejected)[:3]))
        _BEST[key] = (best[0], best[1], Failures(failed, rejected))
    return _BEST[key]


def _rejected(fn, verify: Callable | None, key, cfg) -> str | None:
    """Return why fn (candidate cfg) fails verify (a wrong result, or the exception its
    checked call raised), a bench.util.Reason whose code is wrong_result or crashed; None when it
    passes or there is no verify; DeviceLost on a fatal error."""
    if verify is None:
        return None
    try:
        why = verify(fn)
    except Exception as e:
        if is_fatal(e):
            raise DeviceLost(f"{first_line(e)} (while checking {key[0]} with {cfg})") from e
        return Reason(f"crashed when checked: {first_line(e, 120)}", "crashed")
    return None if why is None else why if isinstance(why, Reason) else Reason(why, "wrong_result")


class Failures(str):
    """The sentence on the candidates that failed to run and those the gate rejected (every
    rejected one named with its error: the reason a faster tile was not kept), a str as a
    launcher's detail carries it, with `failed` and `rejected`: [(config, why)] in the order
    met, a rejection's why a bench.util.Reason (_rejected)."""

    def __new__(cls, failed: list, rejected: list):
        parts = []
        if failed:
            parts.append(f"{len(failed)} failed ({failed[0][0]}: {failed[0][1]})")
        if rejected:
            parts.append(f"{len(rejected)} rejected by the gate ({'; '.join(f'{c}: {w}' for c, w in rejected)})")
        out = super().__new__(cls, ", ".join(parts))
        out.failed, out.rejected = list(failed), list(rejected)
        return out

    def __reduce__(self):  # pickled as its sentence: a config need not pickle
        return (str, (str(self),))


def tuned(tensor, key: tuple, candidates: Iterable, interpreter_config, make_fn: Callable, ctx=None,
          smem: Callable | None = None, fallback: Iterable = ()):
    """Return (fn, config): on a GPU the fastest of the candidates that fit its shared memory
    (at most QUICK_CANDIDATES of them in a quick run), tuned once per shape class of key in
    ctx's mode (see the module docstring); on a
    CPU (Triton's interpreter, where timing means nothing) interpreter_config. fn.tuning
    says how many candidates were pruned, timed and failed; fn.rejected is [(config, Reason)]
    of those the gate rejected (the shape class's winner first where it failed here)."""
    if not tensor.is_cuda:
        fn = make_fn(interpreter_config)
        fn.tuning, fn.rejected = "interpreter configuration", []
        return fn, interpreter_config
    dev = str(tensor.device)
    mode = getattr(ctx, "mode", "warm")
    fits, pruned = launched(candidates, smem, smem_limit(dev), getattr(ctx, "quick", False), fallback)
    if not fits:
        raise RuntimeError(f"every candidate for {key[:2]} exceeds this GPU's shared memory ({pruned} pruned)")
    verify = getattr(ctx, "verify", None)
    cls = shape_class(key) + (dev, mode)
    hit = _BEST.get(cls)
    note = ""
    if hit is not None and hit[0] in fits:
        fn = make_fn(hit[0])
        # a call without verify (a revisit re-times a point its sweep checked) trusts no winner the
        # gate rejected at this size before
        why = _REJECTED_HERE.get((cls, key)) or _rejected(fn, verify, key, hit[0])
        if why is None:
            fn.tuning, fn.rejected = f"the best of its shape class (tuned {mode} at another size)", []
            return fn, hit[0]
        # wrong at this size: tuned on its own, without the class's winner
        _REJECTED_HERE[(cls, key)] = why
        note = f"the shape class's best {hit[0]} rejected by the gate here ({why})"
        fits = [c for c in fits if c != hit[0]]
        if not fits:
            raise RuntimeError(f"no candidate configuration passes the gate for {key[:2]} on {dev}: {note}")
    if hit is not None:  # this size's candidates differ, or the class's winner fails here: tune it on its own
        cls = key + (dev, mode, len(fits))
    cfg, _, failures = autotune(cls, fits, make_fn, dev, mode, getattr(ctx, "flush", None), verify)
    said = ", ".join(p for p in (note, failures) if p)
    fn = make_fn(cfg)
    fn.tuning = f"best of {len(fits)} timed {mode}" + (f", {pruned} pruned by shared memory" if pruned else "") + (
        f", {said}" if said else "")
    fn.rejected = ([(hit[0], why)] if note else []) + failures.rejected  # [(config, Reason)]: the gate's
    return fn, cfg


def run_tuning(tensor, t: Tuning, ctx=None):
    """Return (fn, config) for a launcher's Tuning: tuned() over its candidates."""
    return tuned(tensor, t.key, t.candidates, t.interpreter_config, t.make_fn, ctx, smem=t.smem, fallback=t.fallback)
