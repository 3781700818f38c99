"""The one timer.

ARCHITECTURE.md's rules 3, 4 and 6, as code: time_fn warms up by time, then samples until
min_samples span min_time_s with (p80 - p20) / median under rel_spread, or the budget is
spent (should_stop), and keeps every raw sample. Rule 4's first-sample rule
(FIRST_SAMPLE_FACTOR, FIRST_RULE_MIN_REST) is applied while sampling; a dropped first sample
is kept in Timing.dropped_s. A sustained window (TimerConfig.window_s > 0) samples back to
back until its samples span window_s, whatever their spread (stop reason "window"). A cold
sample is one call after a flush; a cold point under FLOOR_CHECK_S records rule 6's dispatch
floor (Timing.floor_s: cpu_floor, device_floor), an empty call timed in the same frame.

Modes:
- warm: back-to-back calls with the data left wherever the previous call put it (caches
  warm). A sample is `reps` consecutive calls, divided by reps, with reps chosen so one
  sample lasts at least target_sample_s (1 ms on a GPU).
- cold: the last-level cache is flushed before every sample, outside the timed region, and
  a sample is one call.

On a GPU (DeviceClock, CudaClock):
- the time of one call is first estimated from events around k back-to-back calls, with no
  host synchronize between them (a host-synchronized warm-up would count the launch and
  the sync, 15-30 us, and give a 3 us kernel far too few reps);
- warm samples replay the reps calls from a CUDA graph where the callable can be
  captured, so host launch overhead does not pad them; a graph whose replay lasts under
  half the target is captured again with more reps;
- before each sample's start event a short device-side delay is queued, so the launches
  are already waiting when timing starts and the start event does not fire early;
- samples are recorded in batches between synchronizes, each batch sized to what is left
  of the budget, so a point never runs far past it;
- a cold flush writes a buffer of at least 2x the last-level cache (256 MiB on a GPU) and
  then reads a clean buffer as large, so the dirty lines of the write are written back
  before the timed call, not during it.
`window(event)` (optional) is called with "start" just before the first timed sample and
"stop" after the last, so telemetry can read its counters around the samples alone.
"""
from __future__ import annotations

import bisect
import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from bench.util import is_fatal

MODES = ("warm", "cold")
GPU_TARGET_SAMPLE_S = 1e-3   # a warm GPU sample lasts at least this long
GPU_MAX_REPS = 10_000
DELAY_S = 50e-6              # device-side delay queued before each GPU sample's start event
ESTIMATE_SPAN_S = 2e-4       # the per-call estimate times back-to-back calls for at least this long
MAX_BATCH = 10               # samples recorded between two synchronizes
FIRST_SAMPLE_FACTOR = 1.5    # the first sample is a warm-up when it exceeds 1.5x the others' median
FIRST_RULE_MIN_REST = 4      # ... judged once at least 4 samples follow it
FLOOR_CHECK_S = 100e-6       # a cold point faster than this records the dispatch floor
FLOOR_SAMPLES = 21           # empty calls timed for the floor


STRETCH_CALLS = 3  # a stretched point's budget fits this many of its predicted calls (TimerConfig.stretch_s)


@dataclass(frozen=True)
class TimerConfig:
    budget_s: float = 0.5          # wall-clock limit for one point, warm-up included
    warmup_s: float = 0.05         # time spent calling before the first sample
    min_samples: int = 5
    max_samples: int = 500
    rel_spread: float = 0.05       # converged when (p80 - p20) / median is below this
    min_time_s: float = 0.0        # ... and the samples span this many seconds (rule 4)
    target_sample_s: float = 50e-6  # CPU warm mode batches calls until a sample lasts this long
    max_reps: int = 1000           # ... with at most this many calls per sample
    device_target_sample_s: float = GPU_TARGET_SAMPLE_S  # the same on a GPU
    device_max_reps: int = GPU_MAX_REPS
    window_s: float = 0.0          # > 0: a sustained window, sampled until its samples span this long
    stretch_s: float = 0.0         # > budget_s: a point whose predicted call needs more gets up to this (rule 7)

    def stretched(self, base_s: float, predicted_s: float) -> float:
        """Return the budget of a point predicted to take predicted_s a call whose own budget is
        base_s (rule 7): base_s, or where this timer allows a stretch and STRETCH_CALLS calls
        plus the warm-up need more, that need, at most stretch_s."""
        need = STRETCH_CALLS * predicted_s + self.warmup_s
        return min(max(self.stretch_s, base_s), max(base_s, need))


QUICK_TIMER = TimerConfig(budget_s=0.1, warmup_s=0.01, min_samples=5, max_samples=200, min_time_s=0.05,
                          target_sample_s=5e-4)
FULL_TIMER = TimerConfig(budget_s=0.5, warmup_s=0.05, min_samples=5, max_samples=500, min_time_s=0.1,
                         target_sample_s=5e-4)


def timer_config(quick: bool, budget_s: float | None = None, min_time_s: float | None = None,
                 **overrides) -> TimerConfig:
    """Return the timer of a run, a model run or an API measurement: budget_s per point
    (default 0.5 s; 0.1 s and fewer samples quick) and min_time_s, the span its samples
    must cover before it may stop as converged (0.1 s; 0.05 s quick; by default at most
    half the budget, so a short budget still leaves room to converge). A CPU's warm sample
    lasts target_sample_s (0.5 ms), so the span is reached within 100-200 samples.
    overrides: other TimerConfig fields (a warm-up)."""
    base = QUICK_TIMER if quick else FULL_TIMER
    budget = budget_s or base.budget_s
    span = min(base.min_time_s, budget / 2) if min_time_s is None else min_time_s
    return dataclasses.replace(base, budget_s=budget, min_time_s=span, **overrides)


SUSTAIN_WINDOW_S = 1.0         # a full run's sustained window per roof candidate (--sustain, rule 14)
QUICK_SUSTAIN_WINDOW_S = 0.25  # a quick run's


def default_window(quick: bool) -> float:
    """Return the sustained phase's window per candidate when --sustain is not given."""
    return QUICK_SUSTAIN_WINDOW_S if quick else SUSTAIN_WINDOW_S



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
    sampling_s: float = 0.0        # wall time spent in the timed samples' batches
    dropped_s: tuple[float, ...] = ()  # the first sample, when the first-sample rule set it aside
    floor_s: float | None = None   # cold points under FLOOR_CHECK_S: the timer's dispatch floor

    @property
    def stats(self) -> Stats:
        return stats(self.samples_s)


def percentile_sorted(ordered, q: float) -> float:
    """Return the q-th percentile of an ascending list by linear interpolation between the
    two nearest ranks (numpy's default method)."""
    pos = q / 100 * (len(ordered) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def spread_sorted(ordered) -> float:
    """Return (p80 - p20) / median of an ascending list."""
    med = percentile_sorted(ordered, 50)
    return (percentile_sorted(ordered, 80) - percentile_sorted(ordered, 20)) / med if med > 0 else math.inf


def should_stop(samples, config: TimerConfig, elapsed_s: float, ordered=None,
                span_s: float | None = None) -> str | None:
    """Return why sampling stops now ("converged", "max_samples", "budget"), or None to go on.

    Converged needs min_samples, a spread under rel_spread and, when span_s (the wall
    seconds since the first sample began) is given, a span of at least min_time_s, so that
    a point's samples are spread over that much of the machine's time (its timer ticks,
    clock and power changes) rather than one quiet instant; the budget stops a point
    whatever it has, as long as it has at least one sample. ordered, when given, is samples
    kept sorted as they come (bisect.insort), so the check costs no sort per sample.
    """
    n = len(samples)
    if config.window_s > 0:  # a sustained window: its span and min_samples decide, not its spread
        if n >= max(1, config.min_samples) and span_s is not None and span_s >= config.window_s:
            return "window"
        if n >= config.max_samples:
            return "max_samples"
        return "budget" if n >= 1 and elapsed_s >= config.budget_s else None
    if n >= config.min_samples and (span_s is None or span_s >= config.min_time_s):
        spread = spread_sorted(ordered if ordered is not None else sorted(samples))
        if spread < config.rel_spread:
            return "converged"
    if n >= config.max_samples:
        return "max_samples"
    if n >= 1 and elapsed_s >= config.budget_s:
        return "budget"
    return None


class SampleSet:
    """A point's samples as they come, kept sorted twice (all of them, and all but the
    first), so the first-sample rule and the stopping rule cost no sort per sample."""

    def __init__(self):
        self.all: list[float] = []
        self._sorted_all: list[float] = []
        self._sorted_rest: list[float] = []

    def add(self, sample: float) -> None:
        if self.all:
            bisect.insort(self._sorted_rest, sample)
        self.all.append(sample)
        bisect.insort(self._sorted_all, sample)

    def first_stands_out(self) -> bool:
        """Return whether the first sample is a warm-up: at least FIRST_RULE_MIN_REST samples
        follow it and it exceeds FIRST_SAMPLE_FACTOR x their median."""
        rest = self._sorted_rest
        return len(rest) >= FIRST_RULE_MIN_REST and self.all[0] > FIRST_SAMPLE_FACTOR * percentile_sorted(rest, 50)

    def kept(self) -> tuple[list[float], list[float]]:
        """Return (the samples that count, the same sorted): all but an outlying first."""
        if self.first_stands_out():
            return self.all[1:], self._sorted_rest
        return self.all, self._sorted_all

    def dropped(self) -> tuple[float, ...]:
        return (self.all[0],) if self.first_stands_out() else ()


def time_fn(fn: Callable[[], object], device: str, mode: str = "warm",
            config: TimerConfig = TimerConfig(), flush: Callable[[], object] | None = None,
            window: Callable[[str], object] | None = None, warmed_s: float = 0.0) -> Timing:
    """Return the Timing of fn() on device ("cpu" or "cuda:N") in mode "warm" or "cold".

    fn must be a zero-argument callable whose inputs are already allocated; cold mode
    needs flush, a callable that evicts the last-level cache. window, when given, is told
    "start" and "stop" around the timed samples. warmed_s: seconds fn has just been running
    (the correctness gate's call): they count toward the warm-up.
    """
    if mode not in MODES:
        raise ValueError(f"unknown timing mode '{mode}': use one of {', '.join(MODES)}.")
    if mode == "cold" and flush is None:
        raise ValueError("cold mode needs a cache flush callable.")
    window = window or (lambda event: None)
    if device.startswith("cuda"):
        return time_device(fn, CudaClock(torch.device(device)), mode, config, flush, window, warmed_s)
    return _time_cpu(fn, mode, config, flush, window, warmed_s)


def _warmup(fn, config, sync, now=time.perf_counter, warmed_s: float = 0.0) -> tuple[int, float]:
    """Call fn until warmup_s has passed (at least once, unless fn already ran for warmup_s
    just before: warmed_s); return (calls, seconds per call)."""
    if warmed_s >= config.warmup_s:
        return 0, warmed_s
    t0 = now() - warmed_s
    calls, before = 0, 1 if warmed_s > 0 else 0
    while True:
        fn()
        sync()
        calls += 1
        elapsed = now() - t0
        if elapsed >= config.warmup_s or elapsed >= config.budget_s / 2:
            return calls, elapsed / (calls + before)


def reps_for(per_call_s: float, target_s: float, max_reps: int) -> int:
    """Return the calls per sample that make a sample last at least target_s: ceil(target /
    per call), between 1 and max_reps."""
    if per_call_s <= 0:
        return max_reps
    return int(min(max_reps, max(1, math.ceil(target_s / per_call_s))))


def _time_cpu(fn, mode, config, flush, window, warmed_s=0.0) -> Timing:
    t_start = time.perf_counter()
    calls, per_call = _warmup(fn, config, lambda: None, warmed_s=warmed_s)
    reps = reps_for(per_call, config.target_sample_s, config.max_reps) if mode == "warm" else 1
    got = SampleSet()
    window("start")
    t_sampling = time.perf_counter()
    while True:
        if flush is not None and mode == "cold":
            flush()
        t0 = time.perf_counter_ns()
        for _ in range(reps):
            fn()
        t1 = time.perf_counter_ns()
        got.add((t1 - t0) * 1e-9 / reps)
        now = time.perf_counter()
        samples, ordered = got.kept()
        stop = should_stop(samples, config, now - t_start, ordered, now - t_sampling)
        if stop:
            window("stop")
            now = time.perf_counter()
            floor = cpu_floor() if mode == "cold" and percentile_sorted(ordered, 50) < FLOOR_CHECK_S else None
            return Timing(tuple(samples), reps, "perf_counter_ns", mode, calls, stop,
                          now - t_start, now - t_sampling, got.dropped(), floor)


def cpu_floor(n: int = FLOOR_SAMPLES) -> float:
    """Return the CPU timer's dispatch floor: the median of perf_counter_ns around a call
    that does nothing."""
    nothing = lambda: None  # noqa: E731
    times = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        nothing()
        times.append((time.perf_counter_ns() - t0) * 1e-9)
    return float(np.median(times))


# ---- device clocks -----------------------------------------------------------------------

class DeviceClock:
    """What the device timing loop needs from a device: markers recorded in its stream and
    the seconds between two of them, a synchronize, a device-side delay, graph capture,
    and the host's wall clock (for the budget). CudaClock implements it with CUDA events,
    HostClock with perf_counter_ns around blocking calls; the tests implement it with a
    simulated device. bracket and span_s are the one place a sample is framed."""
    method = ""   # the Timing.method of its samples

    def now(self) -> float:
        return time.perf_counter()

    def bracket(self, run, delay_s: float = DELAY_S) -> tuple:
        """Return (start, end) markers around run(), with no synchronize (a batch of samples
        synchronizes once): a device-side delay of delay_s first, so that run's launches
        queue up behind it and the start marker waits for the device, not for the host; then
        the start marker, run(), the end marker."""
        if delay_s:
            self.delay(delay_s)
        start = self.record()
        run()
        return start, self.record()

    def span_s(self, run, delay_s: float = DELAY_S) -> float:
        """Return the seconds between the markers of one bracketed run(), synchronized."""
        start, end = self.bracket(run, delay_s)
        self.sync()
        return self.elapsed_s(start, end)

    def record(self):
        raise NotImplementedError

    def elapsed_s(self, start, end) -> float:
        raise NotImplementedError

    def sync(self) -> None:
        raise NotImplementedError

    def delay(self, seconds: float) -> None:
        """Queue seconds of device-side waiting (no host wait)."""

    def capture(self, fn, reps: int):
        """Return a callable replaying fn reps times without host launches, or None."""
        return None

    def empty(self) -> None:
        """Queue the emptiest call the device has (the dispatch floor's call); by default
        nothing, so the floor is the two markers' own cost."""


class HostClock(DeviceClock):
    """A device whose calls block until done (a CPU): markers are perf_counter_ns readings."""
    method = "perf_counter_ns"

    def record(self):
        return time.perf_counter_ns()

    def elapsed_s(self, start, end) -> float:
        return (end - start) * 1e-9

    def sync(self) -> None:
        """Nothing to wait for: every call has finished when it returns."""


class CudaClock(DeviceClock):
    method = "cuda_event"

    def __init__(self, device: torch.device):
        self.device = device
        props = torch.cuda.get_device_properties(device)
        khz = getattr(props, "clock_rate", 0) or 1_500_000  # clock_rate is in kHz; absent in some builds
        self.cycles_per_s = khz * 1e3

    def record(self):
        e = torch.cuda.Event(enable_timing=True)
        e.record()
        return e

    def elapsed_s(self, start, end) -> float:
        return start.elapsed_time(end) * 1e-3

    def sync(self) -> None:
        torch.cuda.synchronize(self.device)

    def delay(self, seconds: float) -> None:
        sleep = getattr(torch.cuda, "_sleep", None)
        if sleep is not None:
            sleep(int(seconds * self.cycles_per_s))

    def empty(self) -> None:
        sleep = getattr(torch.cuda, "_sleep", None)
        if sleep is not None:
            sleep(0)  # a kernel that spins for no cycles: an empty launch

    def capture(self, fn, reps: int):
        graph = _capture_graph(fn, reps, self.device)
        return graph.replay if graph is not None else None


def estimate_per_call(fn, clock: DeviceClock, max_reps: int, span_s: float = ESTIMATE_SPAN_S) -> float:
    """Return the seconds of one call, from markers around k back-to-back calls with no
    synchronize between them; k grows until the calls span at least span_s (or k reaches
    max_reps)."""
    k = 1
    while True:
        span = clock.span_s(lambda k=k: [fn() for _ in range(k)])
        if span >= span_s or k >= max_reps:
            return span / k
        grow = math.ceil(span_s / span) if span > 0 else 16
        k = min(max_reps, k * max(2, grow))


def batch_size(remaining_s: float, sample_wall_s: float | None) -> int:
    """Return how many samples to record before the next synchronize: as many as fit in what
    is left of the budget (at least 1, at most MAX_BATCH); 1 until a sample's wall time is
    known."""
    if sample_wall_s is None or sample_wall_s <= 0:
        return 1
    return int(max(1, min(MAX_BATCH, math.floor(remaining_s / sample_wall_s))))


def time_device(fn, clock: DeviceClock, mode: str, config: TimerConfig, flush=None,
                window=lambda event: None, warmed_s: float = 0.0) -> Timing:
    """Return the Timing of fn on an asynchronous device (see the module docstring)."""
    t_start = clock.now()
    calls, _ = _warmup(fn, config, clock.sync, clock.now, warmed_s)
    target, max_reps = config.device_target_sample_s, config.device_max_reps
    reps, run, method = 1, fn, "cuda_event"
    if mode == "warm":
        per_call = estimate_per_call(fn, clock, max_reps)
        reps = reps_for(per_call, target, max_reps)
        run = lambda: [fn() for _ in range(reps)]  # noqa: E731
        if reps > 1:
            replay = clock.capture(fn, reps)
            if replay is not None:
                run, method = replay, "cuda_graph"
                run()  # the first replay uploads the graph: not a sample
                span = clock.span_s(run)
                if span < target / 2 and reps < max_reps:  # the host estimate ran slower than the graph
                    more = reps_for(span / reps, target, max_reps)
                    replay = clock.capture(fn, more)
                    if replay is not None:
                        run, reps = replay, more
    got = SampleSet()
    sample_wall = None
    window("start")
    t_sampling = clock.now()
    while True:
        batch = batch_size(config.budget_s - (clock.now() - t_start), sample_wall)
        t_batch = clock.now()
        pairs = []
        for _ in range(batch):
            if mode == "cold":
                flush()
            pairs.append(clock.bracket(run))
        clock.sync()
        sample_wall = (clock.now() - t_batch) / batch
        for start, end in pairs:  # all measured: all kept (an outlying first in dropped_s)
            got.add(clock.elapsed_s(start, end) / reps)
        now = clock.now()
        samples, ordered = got.kept()
        stop = should_stop(samples, config, now - t_start, ordered, span_s=now - t_sampling)
        if stop:
            window("stop")
            floor = device_floor(clock) if mode == "cold" and percentile_sorted(ordered, 50) < FLOOR_CHECK_S else None
            now = clock.now()
            return Timing(tuple(samples), reps, method, mode, calls, stop, now - t_start, now - t_sampling,
                          got.dropped(), floor)


def device_floor(clock: DeviceClock, n: int = FLOOR_SAMPLES) -> float:
    """Return the device timer's dispatch floor: the median time of an empty call
    (clock.empty) in a cold sample's frame: the delay, the start marker, the call, the end
    marker."""
    pairs = [clock.bracket(clock.empty) for _ in range(n)]
    clock.sync()
    return float(np.median([clock.elapsed_s(a, b) for a, b in pairs]))


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
    except Exception as e:  # a host sync or an uncapturable op inside fn: fall back to events
        if is_fatal(e):
            raise
        torch.cuda.synchronize(device)
        return None


def make_flush(device: str, llc_bytes: int) -> Callable[[], object]:
    """Return a callable that evicts the last-level cache: it writes a buffer of
    max(2 x llc_bytes, 256 MiB on a GPU) bytes and, on a GPU, then reads a clean buffer as
    large, so the written lines are written back before the timed call."""
    size = 2 * llc_bytes
    if device.startswith("cuda"):
        size = max(size, 256 * 2**20)
    buf = torch.empty(size // 4, dtype=torch.int32, device=device)
    if not device.startswith("cuda"):
        return lambda: buf.fill_(1)  # a fill, not zero_: no memset shortcut
    clean = torch.ones(size // 4, dtype=torch.float32, device=device)
    total = torch.empty((), dtype=torch.float32, device=device)

    def flush():
        buf.fill_(1)
        torch.sum(clean, dim=0, out=total)
        return buf
    return flush


def time_lockstep(fn: Callable[[], object], device: str, warmup: int, samples: int,
                  barrier: Callable[[], object], reduce_max: Callable,
                  prepare: Callable[[], object] = lambda: None) -> Timing:
    """Return the Timing of a collective fn() run in lockstep by every rank: fixed warm-up
    and sample counts (a per-rank stopping rule would leave ranks waiting on each other),
    prepare() (refilling the buffers) and a barrier before each sample, outside the timed
    region, each sample framed by the device's clock (clock_for: CUDA events, or
    perf_counter_ns around the blocking call on a CPU) with no delay in front (the barrier
    lines the ranks up), and each sample's maximum over the ranks (reduce_max: a list of
    floats -> the same list, maxed), since a collective has finished only when its slowest
    rank has."""
    clock = clock_for(device)
    t_start = time.perf_counter()
    for _ in range(warmup):
        prepare()
        fn()
    clock.sync()
    own = []
    for _ in range(samples):
        prepare()
        clock.sync()
        barrier()
        own.append(clock.span_s(fn, delay_s=0))
    return Timing(tuple(reduce_max(own)), 1, clock.method, "warm", warmup,
                  "fixed_count", time.perf_counter() - t_start)


def clock_for(device: str) -> DeviceClock:
    """Return the clock that frames a sample on device: CudaClock on a GPU, else HostClock."""
    return CudaClock(torch.device(device)) if device.startswith("cuda") else HostClock()
