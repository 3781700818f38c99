"""The timer's statistics and stopping rules on synthetic samples, and its CPU path on
callables whose duration is known."""
import dataclasses
import math
import time

import pytest

from bench.measure.timing import (
    FIRST_SAMPLE_FACTOR,
    DeviceClock,
    SampleSet,
    TimerConfig,
    batch_size,
    device_floor,
    estimate_per_call,
    make_flush,
    percentile_sorted,
    reps_for,
    should_stop,
    spread_sorted,
    stats,
    time_device,
    time_fn,
)


def test_stats_hand_worked():
    # 1..10: median 5.5; p20 at index 1.8 -> 2.8; p80 at index 7.2 -> 8.2 (linear)
    s = stats([3, 1, 2, 10, 9, 8, 7, 6, 5, 4])
    assert (s.median_s, s.p20_s, s.p80_s, s.n) == (5.5, pytest.approx(2.8), pytest.approx(8.2), 10)
    assert s.rel_spread == pytest.approx((8.2 - 2.8) / 5.5)


def test_stats_single_sample_and_empty():
    s = stats([2.0])
    assert (s.median_s, s.p20_s, s.p80_s, s.rel_spread) == (2.0, 2.0, 2.0, 0.0)
    with pytest.raises(ValueError):
        stats([])


def test_should_stop_rules():
    cfg = TimerConfig(budget_s=1.0, min_samples=5, max_samples=8, rel_spread=0.05)
    tight, loose = [1.0, 1.01, 0.99, 1.0, 1.0], [1.0, 2.0, 1.0, 2.0, 1.0]
    assert should_stop(tight[:4], cfg, 0.1) is None            # fewer than min_samples
    assert should_stop(tight, cfg, 0.1) == "converged"
    assert should_stop(loose, cfg, 0.1) is None                # spread 1.0 > 0.05, budget left
    assert should_stop(loose, cfg, 1.5) == "budget"
    assert should_stop(loose + [1.0, 2.0, 1.0], cfg, 0.1) == "max_samples"
    assert should_stop([], cfg, 5.0) is None                   # never stop without a sample


def test_converged_needs_the_minimum_span():
    cfg = TimerConfig(budget_s=1.0, min_samples=5, max_samples=8, rel_spread=0.05, min_time_s=0.02)
    tight = [1.0, 1.01, 0.99, 1.0, 1.0]
    assert should_stop(tight, cfg, 0.1, span_s=0.019) is None      # steady, but too short a span
    assert should_stop(tight, cfg, 0.1, span_s=0.02) == "converged"
    assert should_stop(tight * 2, cfg, 0.1, span_s=0.001) == "max_samples"
    assert should_stop(tight, cfg, 1.0, span_s=0.001) == "budget"  # the budget still ends it


def test_cpu_timer_measures_a_known_sleep():
    cfg = TimerConfig(budget_s=0.3, warmup_s=0.005, min_samples=5, rel_spread=0.5)
    t = time_fn(lambda: time.sleep(0.002), "cpu", "warm", cfg)
    assert t.method == "perf_counter_ns" and t.reps == 1
    assert 0.002 <= t.stats.median_s < 0.02
    assert len(t.samples_s) >= 1 and t.stop in ("converged", "budget", "max_samples")


def test_warm_mode_batches_fast_calls():
    calls = []
    cfg = TimerConfig(budget_s=0.2, warmup_s=0.005, target_sample_s=1e-3)
    t = time_fn(lambda: calls.append(1), "cpu", "warm", cfg)
    assert t.reps > 1
    assert len(calls) >= t.warmup_calls + t.reps * len(t.samples_s)


def test_cold_mode_flushes_before_each_sample_outside_the_timed_region():
    flushes = []

    def flush():
        flushes.append(1)
        time.sleep(0.02)

    # the call itself takes microseconds, the flush 20 ms: a sample holding a flush would
    # read 20 ms however busy the machine, one without it far less
    cfg = TimerConfig(budget_s=0.5, warmup_s=0.001, min_samples=5, max_samples=10, rel_spread=0.5)
    t = time_fn(lambda: sum(range(100)), "cpu", "cold", cfg, flush=flush)
    assert t.reps == 1 and len(flushes) == len(t.samples_s) + len(t.dropped_s)  # an outlying first is kept aside
    assert t.stats.median_s < 0.01  # the 20 ms flush is not in any sample


def test_budget_cuts_a_slow_point_short():
    cfg = TimerConfig(budget_s=0.05, warmup_s=0.01, min_samples=50, rel_spread=0.0)
    t = time_fn(lambda: time.sleep(0.02), "cpu", "warm", cfg)
    # 50 samples of 20 ms would take 1 s: the 0.05 s budget stops it after a few
    assert t.stop == "budget" and len(t.samples_s) + len(t.dropped_s) < cfg.min_samples // 2


def test_bad_mode_and_missing_flush():
    with pytest.raises(ValueError, match="unknown timing mode"):
        time_fn(lambda: None, "cpu", "lukewarm")
    with pytest.raises(ValueError, match="flush"):
        time_fn(lambda: None, "cpu", "cold")


def test_flush_buffer_is_twice_the_llc():
    flush = make_flush("cpu", 4 * 2**20)
    buf = flush()
    assert buf.numel() * buf.element_size() == 8 * 2**20 and not math.isnan(float(buf[0]))


# ---- the device timing loop, on a simulated device ----------------------------------------

class FakeDevice(DeviceClock):
    """A simulated asynchronous device: each call queues `call_s` of device work, and the
    host needs `launch_s` to issue it (so host-synchronized timing would see launch + sync);
    markers read the device timeline; the host clock advances with what the host does."""

    def __init__(self, call_s, launch_s=5e-6, sync_s=20e-6, capturable=True):
        self.call_s, self.launch_s, self.sync_s, self.capturable = call_s, launch_s, sync_s, capturable
        self.host = 0.0      # host wall clock
        self.device = 0.0    # when the device finishes the work queued so far
        self.calls = self.syncs = self.delays = 0
        self.log = []        # (event, host time)

    def now(self):
        return self.host

    def _queue(self, seconds, launch):
        self.host += launch
        self.device = max(self.device, self.host) + seconds

    def fn(self):
        self.calls += 1
        self._queue(self.call_s, self.launch_s)

    def record(self):
        self._queue(0.0, 1e-6)
        return self.device

    def elapsed_s(self, start, end):
        return end - start

    def sync(self):
        self.syncs += 1
        self.host = max(self.host, self.device) + self.sync_s

    def delay(self, seconds):
        self.delays += 1
        self._queue(seconds, 1e-6)

    def capture(self, fn, reps):
        if not self.capturable:
            return None

        def replay():  # one launch for all reps: the device runs them back to back
            self.calls += reps
            self._queue(reps * self.call_s, self.launch_s)
        return replay


def test_per_call_estimate_ignores_host_launch_and_sync():
    dev = FakeDevice(call_s=3e-6, launch_s=5e-6, sync_s=20e-6)
    # launches (5 us) outpace the 3 us kernel here, so back-to-back calls measure the
    # launch rate at worst, never launch + sync (25 us)
    est = estimate_per_call(dev.fn, dev, max_reps=10_000)
    assert 3e-6 <= est <= 5.1e-6
    slow = FakeDevice(call_s=40e-6, launch_s=5e-6)
    assert estimate_per_call(slow.fn, slow, max_reps=10_000) == pytest.approx(40e-6, rel=0.01)


def test_warm_samples_last_a_millisecond_from_a_graph_and_measure_the_kernel():
    dev = FakeDevice(call_s=3e-6)
    t = time_device(dev.fn, dev, "warm", TimerConfig(budget_s=0.5, warmup_s=0.001))
    assert t.method == "cuda_graph"
    # the graph replays back to back: the sample is the kernel's time, not the launch rate
    assert t.stats.median_s == pytest.approx(3e-6, rel=0.01)
    assert t.reps * 3e-6 >= 0.5e-3 and t.reps <= 10_000
    assert dev.delays >= len(t.samples_s)  # a delay queued before every start marker


def test_uncapturable_callable_falls_back_to_events():
    dev = FakeDevice(call_s=100e-6, capturable=False)
    t = time_device(dev.fn, dev, "warm", TimerConfig(budget_s=0.5, warmup_s=0.001))
    assert t.method == "cuda_event" and t.reps == 10  # 1 ms / 100 us
    assert t.stats.median_s == pytest.approx(100e-6, rel=0.01)


def test_cold_mode_flushes_outside_the_timed_region_one_call_per_sample():
    dev = FakeDevice(call_s=50e-6)
    flushes = []

    def flush():
        flushes.append(1)
        dev._queue(2e-3, 5e-6)  # a long flush queued before the start marker

    t = time_device(dev.fn, dev, "cold", TimerConfig(budget_s=0.5, warmup_s=0.001), flush)
    assert t.reps == 1 and len(flushes) == len(t.samples_s) + len(t.dropped_s)
    assert t.stats.median_s == pytest.approx(50e-6, rel=0.01)


@pytest.mark.parametrize("mode", ["warm", "cold"])
def test_a_steady_point_samples_for_the_minimum_span(mode):
    # a perfectly steady kernel converges at 5 samples without a minimum span; with one,
    # it keeps sampling until its samples span min_time_s of the host's clock (flushes and
    # synchronizes included), and no longer than a batch past it
    dev = FakeDevice(call_s=50e-6)
    flush = (lambda: dev._queue(0.5e-3, 5e-6)) if mode == "cold" else None
    short = time_device(dev.fn, dev, mode, TimerConfig(budget_s=0.5, warmup_s=0.001), flush)
    assert short.stop == "converged" and len(short.samples_s) <= 11 and short.sampling_s < 0.02  # batches of 1, then 10
    dev = FakeDevice(call_s=50e-6)
    flush = (lambda: dev._queue(0.5e-3, 5e-6)) if mode == "cold" else None
    t = time_device(dev.fn, dev, mode, TimerConfig(budget_s=0.5, warmup_s=0.001, min_time_s=0.02), flush)
    assert t.stop == "converged" and len(t.samples_s) > len(short.samples_s)
    sample_wall = t.sampling_s / len(t.samples_s)
    assert 0.02 <= t.sampling_s <= 0.02 + 10 * sample_wall + 1e-3
    assert t.stats.median_s == pytest.approx(50e-6, rel=0.01)


def test_cpu_point_samples_for_the_minimum_span():
    cfg = TimerConfig(budget_s=5.0, warmup_s=0.001, rel_spread=1.0, max_samples=100_000, min_time_s=0.02)
    t = time_fn(lambda: None, "cpu", "warm", cfg)
    assert t.stop == "converged" and t.sampling_s >= 0.02


@pytest.mark.parametrize("call_s", [1e-3, 30e-3])
def test_budget_is_checked_per_batch(call_s):
    # a noisy point never converges: it must stop within about one sample of its budget
    dev = FakeDevice(call_s=call_s)
    noise = iter([1.0, 3.0] * 10_000)
    orig = dev.elapsed_s
    dev.elapsed_s = lambda a, b: orig(a, b) * next(noise)
    cfg = TimerConfig(budget_s=0.2, warmup_s=0.001, rel_spread=0.0, max_samples=10_000)
    t = time_device(dev.fn, dev, "cold", cfg, flush=lambda: None)
    assert t.stop == "budget"
    assert t.wall_s <= cfg.budget_s + 2 * 3 * call_s + 1e-3


def test_batch_size_hand_worked():
    assert batch_size(1.0, None) == 1          # the first batch: one sample, to learn its wall time
    assert batch_size(0.05, 0.01) == 5         # five more fit
    assert batch_size(5.0, 0.01) == 10         # never more than 10 between synchronizes
    assert batch_size(-0.1, 0.01) == 1         # over budget: one, then the rule stops it
    assert reps_for(3e-6, 1e-3, 10_000) == 334 and reps_for(0.0, 1e-3, 7) == 7 and reps_for(1.0, 1e-3, 9) == 1


def test_window_brackets_the_timed_samples():
    events = []
    t = time_fn(lambda: None, "cpu", "warm", TimerConfig(budget_s=0.05, warmup_s=0.005), window=events.append)
    assert events == ["start", "stop"] and 0 < t.sampling_s <= t.wall_s


def test_sorted_percentiles_match_numpy():
    import numpy as np
    rng = np.random.default_rng(3)
    for n in (1, 2, 5, 10, 37):
        xs = list(rng.random(n))
        ordered = sorted(xs)
        for q in (20, 50, 80):
            assert percentile_sorted(ordered, q) == pytest.approx(float(np.percentile(xs, q)), rel=1e-12)
        assert spread_sorted(ordered) == pytest.approx(stats(xs).rel_spread, rel=1e-9)


def test_the_gates_call_counts_toward_the_warm_up():
    calls = []
    cfg = TimerConfig(budget_s=0.2, warmup_s=0.01)
    t = time_fn(lambda: calls.append(1) or time.sleep(0.002), "cpu", "warm", cfg, warmed_s=0.02)
    assert t.warmup_calls == 0           # the 20 ms it just ran cover the 10 ms warm-up
    t = time_fn(lambda: None, "cpu", "warm", cfg, warmed_s=0.001)
    assert t.warmup_calls >= 1           # 1 ms does not


def test_run_timers_span_hand_worked():
    from bench.measure.timing import timer_config
    assert timer_config(True).min_time_s == 0.05 and timer_config(False).min_time_s == 0.1
    assert timer_config(True).budget_s == 0.1 and timer_config(False).budget_s == 0.5
    assert timer_config(False, 0.08).min_time_s == 0.04         # at most half a short budget
    assert timer_config(True, 0.03, 0.2).min_time_s == 0.2      # unless asked for
    assert timer_config(False, 0.3, warmup_s=0.02).warmup_s == 0.02


# ---- the first-sample rule, sustained windows, the dispatch floor -------------------------

def test_first_sample_rule_hand_worked():
    got = SampleSet()
    for x in (2.0, 1.0, 1.1, 0.9, 1.0):   # the others' median is 1.0; 2.0 > 1.5 x 1.0
        got.add(x)
    assert got.first_stands_out() and got.dropped() == (2.0,)
    kept, ordered = got.kept()
    assert kept == [1.0, 1.1, 0.9, 1.0] and ordered == [0.9, 1.0, 1.0, 1.1]
    edge = SampleSet()
    for x in (1.5, 1.0, 1.1, 0.9, 1.0):   # exactly 1.5x: not above it, kept
        edge.add(x)
    assert not edge.first_stands_out() and edge.kept()[0] == [1.5, 1.0, 1.1, 0.9, 1.0]
    few = SampleSet()
    for x in (9.0, 1.0, 1.0, 1.0):        # only 3 samples after it: too few to judge, kept
        few.add(x)
    assert not few.first_stands_out() and few.dropped() == ()
    assert FIRST_SAMPLE_FACTOR == 1.5


@pytest.mark.parametrize("mode", ["warm", "cold"])
def test_an_outlying_first_sample_is_dropped_and_kept_aside(mode):
    flush = (lambda: None) if mode == "cold" else None
    cfg = TimerConfig(budget_s=0.5, warmup_s=0.001)
    steady = FakeDevice(call_s=50e-6)
    assert time_device(steady.fn, steady, mode, cfg, flush).dropped_s == ()   # nothing stands out
    dev = FakeDevice(call_s=50e-6)
    armed = {"on": False, "left": 1}
    orig = dev.elapsed_s

    def elapsed(a, b):  # the first timed sample (after window("start")) reads 4x slower
        span = orig(a, b)
        if armed["on"] and armed["left"]:
            armed["left"] = 0
            return 4 * span
        return span
    dev.elapsed_s = elapsed
    t = time_device(dev.fn, dev, mode, cfg, flush, lambda event: armed.update(on=event == "start"))
    assert t.dropped_s and t.dropped_s[0] == pytest.approx(4 * 50e-6, rel=0.01)
    assert t.stop == "converged" and t.stats.median_s == pytest.approx(50e-6, rel=0.01)
    assert max(t.samples_s) == pytest.approx(50e-6, rel=0.01)   # the outlier is in no kept sample


def test_a_sustained_window_samples_for_its_span_whatever_the_spread():
    dev = FakeDevice(call_s=1e-3)
    noise = iter([1.0, 1.3] * 100_000)
    orig = dev.elapsed_s
    dev.elapsed_s = lambda a, b: orig(a, b) * next(noise)
    cfg = TimerConfig(budget_s=2.0, warmup_s=0.001, min_samples=1, max_samples=1_000_000, window_s=0.25)
    t = time_device(dev.fn, dev, "warm", cfg)
    assert t.stop == "window"
    sample_wall = t.sampling_s / len(t.samples_s)
    assert 0.25 <= t.sampling_s <= 0.25 + 10 * sample_wall + 1e-3
    assert should_stop([1.0], cfg, 0.1, span_s=0.3) == "window"
    assert should_stop([1.0, 9.0] * 9, cfg, 0.1, span_s=0.2) is None
    # a window of long calls goes on past its span until it holds min_samples (or its budget ends)
    five = dataclasses.replace(cfg, min_samples=5, budget_s=3.0)
    assert should_stop([0.5] * 4, five, 2.1, span_s=2.0) is None
    assert should_stop([0.5] * 5, five, 2.6, span_s=2.5) == "window"
    assert should_stop([0.9] * 3, five, 2.99, span_s=2.7) is None
    assert should_stop([0.9] * 3, five, 3.01, span_s=2.7) == "budget"


def test_cold_points_of_a_few_microseconds_record_the_dispatch_floor():
    class FloorDevice(FakeDevice):
        def empty(self):  # an empty kernel: 2 us of device time
            self._queue(2e-6, 5e-6)
    dev = FloorDevice(call_s=3e-6)
    assert device_floor(dev) == pytest.approx(2e-6, rel=1e-6)  # the empty call's device time between the markers
    t = time_device(dev.fn, dev, "cold", TimerConfig(budget_s=0.5, warmup_s=0.001), flush=lambda: None)
    assert t.reps == 1 and t.floor_s == pytest.approx(2e-6, rel=1e-6)
    slow = FloorDevice(call_s=200e-6)  # far above FLOOR_CHECK_S: no floor needed
    assert time_device(slow.fn, slow, "cold", TimerConfig(budget_s=0.5, warmup_s=0.001),
                       flush=lambda: None).floor_s is None
    warm = FloorDevice(call_s=3e-6)
    assert time_device(warm.fn, warm, "warm", TimerConfig(budget_s=0.5, warmup_s=0.001)).floor_s is None
    cpu = time_fn(lambda: None, "cpu", "cold", TimerConfig(budget_s=0.05, warmup_s=0.001), flush=lambda: None)
    # an empty call's perf_counter_ns delta: 0 where the clock ticks coarser than the call
    assert cpu.floor_s is not None and 0 <= cpu.floor_s < 1e-3
