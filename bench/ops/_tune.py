"""Autotuning with the suite's own timer (Triton's default autotune timer needs CUDA and
would be a second timer). Used by launchers, so tuning stays outside the timed region."""
from __future__ import annotations

from typing import Callable, Iterable

from bench.timing import TimerConfig, time_fn

TUNE_TIMER = TimerConfig(budget_s=0.05, warmup_s=0.01, min_samples=3)
_BEST: dict = {}


def autotune(key, candidates: Iterable, make_fn: Callable, torch_device: str):
    """Return (config, median seconds) of the fastest candidate, timed warm with a short
    budget; cached under key. A candidate that fails to compile or run (a tile too big for
    this GPU's shared memory, say) is not a candidate."""
    if key not in _BEST:
        best = None
        for cfg in candidates:
            try:
                fn = make_fn(cfg)
                fn()
                t = time_fn(fn, torch_device, "warm", TUNE_TIMER).stats.median_s
            except Exception:
                continue
            if best is None or t < best[1]:
                best = (cfg, t)
        if best is None:
            raise RuntimeError(f"no candidate configuration runs for {key} on {torch_device}")
        _BEST[key] = best
    return _BEST[key]


def tuned(tensor, key: tuple, candidates: Iterable, interpreter_config, make_fn: Callable):
    """Return (fn, config): on a GPU the fastest candidate for key (tuned once, cached), on a
    CPU (Triton's interpreter, where timing means nothing) interpreter_config."""
    if tensor.is_cuda:
        dev = str(tensor.device)
        cfg, _ = autotune(key + (dev,), candidates, make_fn, dev)
    else:
        cfg = interpreter_config
    return make_fn(cfg), cfg
