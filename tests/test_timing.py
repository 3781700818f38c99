"""The timer's statistics and stopping rules on synthetic samples, and its CPU path on
callables whose duration is known."""
import math
import time

import pytest

from bench.timing import TimerConfig, make_flush, should_stop, stats, time_fn


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
        time.sleep(0.004)

    cfg = TimerConfig(budget_s=0.3, warmup_s=0.001, min_samples=5, max_samples=10, rel_spread=0.5)
    t = time_fn(lambda: time.sleep(0.001), "cpu", "cold", cfg, flush=flush)
    assert t.reps == 1 and len(flushes) == len(t.samples_s)
    assert t.stats.median_s < 0.004  # the 4 ms flush is not in any sample


def test_budget_cuts_a_slow_point_short():
    cfg = TimerConfig(budget_s=0.05, warmup_s=0.01, min_samples=50, rel_spread=0.0)
    t0 = time.perf_counter()
    t = time_fn(lambda: time.sleep(0.02), "cpu", "warm", cfg)
    assert t.stop == "budget" and time.perf_counter() - t0 < 0.5


def test_bad_mode_and_missing_flush():
    with pytest.raises(ValueError, match="unknown timing mode"):
        time_fn(lambda: None, "cpu", "lukewarm")
    with pytest.raises(ValueError, match="flush"):
        time_fn(lambda: None, "cpu", "cold")


def test_flush_buffer_is_twice_the_llc():
    flush = make_flush("cpu", 4 * 2**20)
    buf = flush()
    assert buf.numel() * buf.element_size() == 8 * 2**20 and not math.isnan(float(buf[0]))
