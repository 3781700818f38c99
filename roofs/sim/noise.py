"""Noise models for the simulator: noise only ever slows a call.

A sample is the call's true time x a factor >= 1. Each model turns a run's rows, in the order
they were measured (true seconds per call, samples per row, each row's pass), into per-row
sample lists and the runner's flags:

    quiet    a one-sided lognormal per sample: exp(|N(0, 0.02)|)
    gpu      the same at sigma 0.01, and each row's first sample slow (a cold launch, x1.2-2)
    switch   a host that switches between a fast state and a ~1.9x slow one for stretches of
             samples (a VM's launch floors), jitter 0.02 on top
    drift    each pass slowed as a whole by 1 + 0.25 U (U uniform, one draw per pass: the
             machine at another minute), jitter 0.03 on top
    busy     drift, and busy stretches of a few rows each read 2-8x slow; the runner flags half
             of those stretches (its flag text starts with bench.results.BUSY_PREFIX), the
             other half pass unflagged
    minutes  a host whose memory switches between a fast state and a ~1.9x slow one for
             stretches of rows (a neighbour's memory traffic minute to minute): the slow state
             slows the share of a call's time spent off chip, jitter 0.02 on top (not a
             row of the default table: `--noises minutes` writes its rows)

draw(noise, rng, seconds, counts, passes, cores, memory) -> (samples per row, flag per row).
Every sample is >= its row's true time.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bench.results import BUSY_PREFIX

MIN_SAMPLES, MAX_SAMPLES = 10, 40


@dataclass(frozen=True)
class Noise:
    name: str
    jitter: float = 0.02                 # sigma of the one-sided lognormal per sample
    first_slow: tuple = ()               # (low, high): the first sample of a row x U(low, high)
    switch_slow: float = 1.0             # the slow state's factor (1: no switching)
    switch_stay: tuple = (60.0, 25.0)    # mean samples spent in the fast and in the slow state
    drift: float = 0.0                   # each pass x (1 + drift U)
    busy_rows: float = 0.0               # share of rows inside busy stretches
    busy_factor: tuple = (2.0, 8.0)      # a busy stretch's rows x U(low, high)
    busy_stretch: tuple = (2, 6)         # rows per busy stretch (inclusive)
    busy_flagged: float = 0.5            # share of busy stretches the runner flags
    memory_slow: float = 1.0             # the memory's slow state: its share of a call x this (1: none)
    memory_stay: tuple = (30.0, 15.0)    # mean rows spent in the memory's fast and slow state


NOISES = {n.name: n for n in (
    Noise("quiet", jitter=0.02),
    Noise("gpu", jitter=0.01, first_slow=(1.2, 2.0)),
    Noise("switch", jitter=0.02, switch_slow=1.9),
    Noise("drift", jitter=0.03, drift=0.25),
    Noise("busy", jitter=0.03, drift=0.25, busy_rows=0.08),
    Noise("minutes", jitter=0.02, memory_slow=1.9),
)}


def sample_count(seconds) -> np.ndarray:
    """Return samples per row from its true time per call: 40 for a 0.1 ms call, 10 past 0.1 s."""
    t = np.maximum(np.asarray(seconds, float), 1e-9)
    return np.clip(np.round(40 - 10 * np.log10(t / 1e-4)), MIN_SAMPLES, MAX_SAMPLES).astype(int)


def _two_state(rng: np.random.Generator, total: int, factor: float, stay: tuple) -> np.ndarray:
    """Return a factor per item of a two-state host: stretches of fast (1) and slow (factor)
    items, geometric lengths with stay's (fast, slow) means, starting in the stationary state."""
    out = np.ones(total)
    if factor == 1.0 or total == 0:
        return out
    fast, slow = stay
    state = rng.random() < slow / (fast + slow)
    i = 0
    while i < total:
        n = int(rng.geometric(1.0 / (slow if state else fast)))
        if state:
            out[i:i + n] = factor
        i += n
        state = not state
    return out


def _busy(noise: Noise, rng: np.random.Generator, rows: int, cores: int) -> tuple[np.ndarray, list]:
    """Return (a factor per row, a flag per row): busy stretches over about busy_rows of the rows."""
    factor, flags = np.ones(rows), [""] * rows
    if noise.busy_rows <= 0:
        return factor, flags
    lo, hi = noise.busy_stretch
    start_p = noise.busy_rows / ((lo + hi) / 2)
    i = 0
    while i < rows:
        if rng.random() >= start_p:
            i += 1
            continue
        n = int(rng.integers(lo, hi + 1))
        f = rng.uniform(*noise.busy_factor)
        factor[i:i + n] = f
        if rng.random() < noise.busy_flagged:
            share = min(0.95, 1 - 1 / f + 0.2)
            text = (f"{BUSY_PREFIX}: other processes used {share:.0%} of its {cores} cores "
                    f"(load average {share * cores + 0.3:.1f})")
            for j in range(i, min(i + n, rows)):
                flags[j] = text
        i += n
    return factor, flags


def draw(noise: Noise, rng: np.random.Generator, seconds, counts, passes, cores: int = 2,
         memory=None) -> tuple[list, list]:
    """Return ([samples in seconds per row], [the runner's flag per row, "" for none]) for rows
    measured in this order: seconds their true times per call, counts their sample counts,
    passes their pass numbers (drift draws one slowdown per pass), memory the share of each
    row's time spent off chip (None: 0; the minutes model slows that share)."""
    seconds = np.asarray(seconds, float)
    counts = np.asarray(counts, int)
    passes = np.asarray(passes, int)
    total = int(counts.sum())
    factor = np.exp(np.abs(rng.normal(0.0, noise.jitter, total))) if noise.jitter > 0 else np.ones(total)
    factor *= _two_state(rng, total, noise.switch_slow, noise.switch_stay)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(int)
    if noise.first_slow and total:
        factor[starts] *= rng.uniform(*noise.first_slow, len(starts))
    row_factor = np.ones(len(seconds))
    if noise.drift > 0:
        uniq = np.unique(passes)
        per_pass = dict(zip(uniq.tolist(), (1 + noise.drift * rng.random(len(uniq))).tolist()))
        row_factor *= np.array([per_pass[p] for p in passes.tolist()])
    if noise.memory_slow != 1.0:
        share = np.zeros(len(seconds)) if memory is None else np.asarray(memory, float)
        row_factor *= 1 + share * (_two_state(rng, len(seconds), noise.memory_slow, noise.memory_stay) - 1)
    busy, flags = _busy(noise, rng, len(seconds), cores)
    row_factor *= busy
    per_sample = np.repeat(seconds * row_factor, counts) * factor
    return np.split(per_sample, starts[1:]) if len(seconds) else [], flags
