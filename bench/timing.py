"""The one timer.

Rules (ARCHITECTURE.md, rules 3, 4 and 6): time on the device (CUDA events per sample on a GPU,
perf_counter_ns around a finished call on a CPU); warm up by time, not by count; stop a
point once it has min_samples and a relative spread (p80 - p20) / median under
rel_spread, or once its budget is spent; keep every raw sample.

Modes:
- warm: back-to-back calls with the data left wherever the previous call put it (caches
  warm). A sample is `reps` consecutive calls, divided by reps, with reps chosen so one
  sample lasts at least target_sample_s; on a GPU those calls are replayed from a CUDA
  graph when the callable can be captured, so host launch overhead does not pad them.
- cold: the last-level cache is flushed (by writing a buffer at least twice its size)
  before every sample, outside the timed region, and a sample is one call.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

MODES = ("warm", "cold")


@dataclass(frozen=True)
class TimerConfig:
    budget_s: float = 0.5          # wall-clock limit for one point, warm-up included
    warmup_s: float = 0.05         # time spent calling before the first sample
    min_samples: int = 5
    max_samples: int = 500
    rel_spread: float = 0.05       # converged when (p80 - p20) / median is below this
    target_sample_s: float = 50e-6  # warm mode batches calls until a sample lasts this long
    max_reps: int = 1000


@dataclass(frozen=True)
class Stats:
    """Order statistics of per-call times, in seconds."""
    median_s: float
    p20_s: float
    p80_s: float
    n: int

    @property
    def rel_spread(self) -> float:
        """Return (p80 - p20) / median, the timer's convergence measure."""
        return (self.p80_s - self.p20_s) / self.median_s if self.median_s > 0 else math.inf


def stats(samples_s) -> Stats:
    """Return median, 20th and 80th percentiles (linear interpolation) and count of samples."""
    a = np.asarray(samples_s, dtype=float)
    if a.size == 0:
        raise ValueError("no samples to summarize")
    p20, med, p80 = np.percentile(a, [20, 50, 80])
    return Stats(float(med), float(p20), float(p80), int(a.size))


@dataclass(frozen=True)
class Timing:
    samples_s: tuple[float, ...]   # per-call seconds, one entry per sample
    reps: int                      # calls averaged into each sample
    method: str                    # "perf_counter_ns", "cuda_event" or "cuda_graph"
    mode: str
    warmup_calls: int
    stop: str                      # "converged", "budget" or "max_samples"
    wall_s: float

    @property
    def stats(self) -> Stats:
        return stats(self.samples_s)


def should_stop(samples, config: TimerConfig, elapsed_s: float) -> str | None:
    """Return why sampling stops now ("converged", "max_samples", "budget"), or None to go on.

    Converged needs min_samples and a spread under rel_spread; the budget stops a point
    whatever it has, as long as it has at least one sample.
    """
    n = len(samples)
    if n >= config.min_samples and stats(samples).rel_spread < config.rel_spread:
        return "converged"
    if n >= config.max_samples:
        return "max_samples"
    if n >= 1 and elapsed_s >= config.budget_s:
        return "budget"
    return None


def time_fn(fn: Callable[[], object], device: str, mode: str = "warm",
            config: TimerConfig = TimerConfig(), flush: Callable[[], object] | None = None) -> Timing:
    """Return the Timing of fn() on device ("cpu" or "cuda:N") in mode "warm" or "cold".

    fn must be a zero-argument callable whose inputs are already allocated; cold mode
    needs flush, a callable that evicts the last-level cache.
    """
    if mode not in MODES:
        raise ValueError(f"unknown timing mode '{mode}': use one of {', '.join(MODES)}.")
    if mode == "cold" and flush is None:
        raise ValueError("cold mode needs a cache flush callable.")
    if device.startswith("cuda"):
        return _time_cuda(fn, torch.device(device), mode, config, flush)
    return _time_cpu(fn, mode, config, flush)


def _warmup(fn, config, sync) -> tuple[int, float]:
    """Call fn until warmup_s has passed (at least once); return (calls, seconds per call)."""
    t0 = time.perf_counter()
    calls = 0
    while True:
        fn()
        sync()
        calls += 1
        elapsed = time.perf_counter() - t0
        if elapsed >= config.warmup_s or elapsed >= config.budget_s / 2:
            return calls, elapsed / calls


def _reps_for(per_call_s: float, config: TimerConfig) -> int:
    if per_call_s <= 0:
        return config.max_reps
    return int(min(config.max_reps, max(1, math.ceil(config.target_sample_s / per_call_s))))


def _time_cpu(fn, mode, config, flush) -> Timing:
    t_start = time.perf_counter()
    calls, per_call = _warmup(fn, config, lambda: None)
    reps = _reps_for(per_call, config) if mode == "warm" else 1
    samples: list[float] = []
    while True:
        if flush is not None and mode == "cold":
            flush()
        t0 = time.perf_counter_ns()
        for _ in range(reps):
            fn()
        t1 = time.perf_counter_ns()
        samples.append((t1 - t0) * 1e-9 / reps)
        stop = should_stop(samples, config, time.perf_counter() - t_start)
        if stop:
            return Timing(tuple(samples), reps, "perf_counter_ns", mode, calls, stop,
                          time.perf_counter() - t_start)


def _capture_graph(fn, reps: int, device):
    """Return a CUDA graph replaying fn reps times, or None when fn cannot be captured."""
    try:
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            fn()
        torch.cuda.current_stream(device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(reps):
                fn()
        torch.cuda.synchronize(device)
        return graph
    except Exception:  # a host sync or an uncapturable op inside fn: fall back to events
        torch.cuda.synchronize(device)
        return None


def _time_cuda(fn, device, mode, config, flush) -> Timing:
    sync = lambda: torch.cuda.synchronize(device)  # noqa: E731
    t_start = time.perf_counter()
    calls, per_call = _warmup(fn, config, sync)
    reps = _reps_for(per_call, config) if mode == "warm" else 1
    graph = _capture_graph(fn, reps, device) if reps > 1 else None
    method = "cuda_graph" if graph is not None else "cuda_event"
    run = graph.replay if graph is not None else (lambda: [fn() for _ in range(reps)])
    samples: list[float] = []
    batch = 10  # event pairs recorded before one synchronize
    while True:
        events = []
        for _ in range(batch):
            if mode == "cold":
                flush()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            run()
            end.record()
            events.append((start, end))
        sync()
        for start, end in events:
            samples.append(start.elapsed_time(end) * 1e-3 / reps)
            stop = should_stop(samples, config, time.perf_counter() - t_start)
            if stop:
                return Timing(tuple(samples), reps, method, mode, calls, stop,
                              time.perf_counter() - t_start)


def make_flush(device: str, llc_bytes: int) -> Callable[[], object]:
    """Return a callable that evicts the last-level cache by writing a buffer of
    max(2 x llc_bytes, 256 MiB on a GPU) bytes."""
    size = 2 * llc_bytes
    if device.startswith("cuda"):
        size = max(size, 256 * 2**20)
    buf = torch.empty(size // 4, dtype=torch.int32, device=device)
    return lambda: buf.fill_(1)  # a fill, not zero_: no memset shortcut


def time_lockstep(fn: Callable[[], object], device: str, warmup: int, samples: int,
                  barrier: Callable[[], object], reduce_max: Callable) -> Timing:
    """Return the Timing of a collective fn() run in lockstep by every rank: fixed warm-up
    and sample counts (a per-rank stopping rule would leave ranks waiting on each other),
    a barrier before each sample outside the timed region, each sample timed on the device
    (CUDA events, or perf_counter_ns around the blocking call on a CPU), and each sample's
    maximum over the ranks (reduce_max: a list of floats -> the same list, maxed), since a
    collective has finished only when its slowest rank has."""
    cuda = device.startswith("cuda")
    sync = (lambda: torch.cuda.synchronize(torch.device(device))) if cuda else (lambda: None)
    t_start = time.perf_counter()
    for _ in range(warmup):
        fn()
    sync()
    own = []
    for _ in range(samples):
        barrier()
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            own.append(start.elapsed_time(end) * 1e-3)
        else:
            t0 = time.perf_counter_ns()
            fn()
            own.append((time.perf_counter_ns() - t0) * 1e-9)
    return Timing(tuple(reduce_max(own)), 1, "cuda_event" if cuda else "perf_counter_ns", "warm", warmup,
                  "fixed_count", time.perf_counter() - t_start)
