"""A run's progress lines, sized for a screen: one line per measured or failed point, the
skipped points of a family grouped at the family's end (one line per reason, with a count),
and a time-left estimate that does not jump.

The time left is the dry run's prediction for the rows still to run and for what follows
them (the sustained phase and the finishing: the tail), scaled by how the run keeps to it
so far; the scale starts from 1 and moves towards measured / predicted as the run covers
more of its predicted time (a prior worth PRIOR_SHARE of the plan), and the shown value
follows it smoothly (SMOOTHING per line, never rising by more than the time that passed).
"""
from __future__ import annotations

import re
from collections.abc import Callable

from bench.util import plural

PRIOR_SHARE = 0.05   # the prediction's weight, as a share of the plan's predicted seconds
SMOOTHING = 0.8      # the shown time left keeps this much of its last value (less the time passed)
MAX_IMPLS = 3        # impls named on a grouped skip line


def mmss(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    return f"{seconds // 60}:{seconds % 60:02d}"


def reason_key(reason: str) -> str:
    """Return the reason with its numbers blanked: skips that differ only in a size or a
    time ("predicted 3.2 s per call") group together."""
    return re.sub(r"\d[\d.,]*", "#", reason or "")


def time_left(elapsed: float, done: int, estimates: list[float], tail: float = 0.0) -> float:
    """Return the predicted seconds of the rows after the first done, and of the tail (what
    runs after the rows), scaled by (elapsed + prior) / (the done rows' predicted seconds +
    prior), prior = PRIOR_SHARE of the plan: early rows, often many quick skips, move the
    estimate little."""
    spent, left = sum(estimates[:done]), sum(estimates[done:])
    prior = PRIOR_SHARE * sum(estimates)
    scale = (elapsed + prior) / (spent + prior) if spent + prior > 0 else 1.0
    return (left + tail) * scale


class Ticker:
    """The progress lines of one run. row() for each point as it ends; close() at the end
    (or on Ctrl-C) prints the last family's grouped skips."""

    def __init__(self, total: int, estimates: list[float] | None, say: Callable[[str], None],
                 describe: Callable[[object], str], tail_s: float = 0.0):
        self.total, self.estimates, self.say, self.describe = total, estimates, say, describe
        self.tail_s = tail_s               # the predicted seconds after the rows (sustained phase, finishing)
        self.family = None
        self.skips: dict[str, list] = {}   # reason key -> [count, first reason, impls, first row]
        self.shown: float | None = None    # the time left last shown
        self.last = (0.0, 0)               # (elapsed, done) of the last line
        self.last_clock = ""
        self.reasons: dict[str, set] = {}  # reason key -> the distinct reasons grouped under it
        self.counted = 0                   # rows counted so far (row()'s counted)

    def clock(self, elapsed: float, done: int) -> str:
        """Return "m:ss" elapsed and, with predictions, the smoothed "~m:ss left"."""
        if not self.estimates or done > len(self.estimates):
            return mmss(elapsed)
        raw = time_left(elapsed, done, self.estimates, self.tail_s)
        if self.shown is None:
            self.shown = raw
        else:
            passed = max(0.0, elapsed - self.last[0])
            counted_down = max(0.0, self.shown - passed)
            self.shown = min(SMOOTHING * counted_down + (1 - SMOOTHING) * raw, self.shown + passed)
        if done >= len(self.estimates):
            self.shown = raw  # the tail alone: what runs after the last row
        return f"{mmss(elapsed)}, ~{mmss(self.shown)} left"

    def row(self, m, done: int, elapsed: float, counted: int | None = None) -> None:
        """Take the row that just ended: done rows of the plan so far (the estimates' index),
        counted of them the rows the counter counts (those no static skip rule left out; by
        default done), shown as [counted/total]."""
        if m.family != self.family:
            self._flush()
            self.family = m.family
        self.last_clock = self.clock(elapsed, done)
        self.last = (elapsed, done)
        self.counted = done if counted is None else counted
        if m.status == "skipped":
            entry = self.skips.setdefault(reason_key(m.reason), [0, m.reason, [], m])
            self.reasons.setdefault(reason_key(m.reason), set()).add(m.reason)
            entry[0] += 1
            name = m.impl.split(".", 1)[-1] if "." in m.impl else m.impl
            if name not in entry[2]:
                entry[2].append(name)
            return
        self.say(f"[{self.counted}/{self.total} {self.last_clock}] {self.describe(m)}")

    def _flush(self) -> None:
        done = self.counted
        for count, reason, impls, first in self.skips.values():
            if count == 1:
                self.say(f"[{done}/{self.total} {self.last_clock}] {self.describe(first)}")
                continue
            named = ", ".join(impls[:MAX_IMPLS]) + (f" and {len(impls) - MAX_IMPLS} more"
                                                    if len(impls) > MAX_IMPLS else "")
            self.say(f"[{done}/{self.total} {self.last_clock}] {self.family}: {plural(count, 'point')} SKIPPED "
                     f"({named}): " + (reason if len(self.reasons[reason_key(reason)]) == 1
                                       else f"e.g. {reason}"))
        self.skips, self.reasons = {}, {}

    def close(self) -> None:
        """Print the grouped skips still held (the last family's)."""
        if self.skips:
            self._flush()
