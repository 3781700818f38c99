"""A run's progress lines, sized for a screen: one line per measured or failed point, the
skipped points of a family grouped at the family's end (one line per reason, with a count),
and a time-left estimate that does not jump.

The time left is the dry run's prediction for the rows still to run and for what follows
them (the sustained phase and the finishing: the tail), each part scaled by how the run
keeps to it so far. The rest of the family under way is scaled by that family's own ratio
(measured / predicted over its rows so far, with a prior worth PRIOR_SHARE of the plan); the
families not yet started and the tail by the run's ratio over every row so far, with a prior
worth FUTURE_SHARE of the plan: one family off its prediction (a DRAM sweep 1.7x slow) says
little of the next, a machine slow in every family soon moves it. The shown value follows
the estimate smoothly (SMOOTHING per line, never rising by more than the time that passed).
"""
from __future__ import annotations

import re
from collections.abc import Callable

from bench.util import plural

PRIOR_SHARE = 0.05   # the prediction's weight in the family under way, as a share of the plan's predicted seconds
FUTURE_SHARE = 0.4   # its weight in the ratio carried onto the families not yet started and the tail
SMOOTHING = 0.8      # the shown time left keeps this much of its last value (less the time passed)
MAX_IMPLS = 3        # impls named on a grouped skip line


def mmss(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    return f"{seconds // 60}:{seconds % 60:02d}"


def reason_key(reason: str) -> str:
    """Return the reason with its numbers blanked: skips that differ only in a size or a
    time ("predicted 3.2 s per call") group together."""
    return re.sub(r"\d[\d.,]*", "#", reason or "")


def time_left(taken: dict[str, float], done: int, estimates: list[float], tail: float = 0.0,
              families: list[str] | None = None) -> float:
    """Return the predicted seconds of the rows after the first done, and of the tail (what
    runs after the rows), scaled by how the run keeps to its prediction. taken: the measured
    seconds so far per family (of the first done rows); families: each row's family (None:
    one family). The rows left of the family under way (the done-th row's) are scaled by
    (its taken + prior * r) / (its predicted so far + prior), prior = PRIOR_SHARE of the plan;
    the other rows and the tail by r = (all taken + future) / (all predicted so far + future),
    future = FUTURE_SHARE of the plan: early rows, often many quick skips, move it little."""
    families = families or [""] * len(estimates)
    plan = sum(estimates)
    spent: dict[str, float] = {}
    for fam, sec in zip(families[:done], estimates[:done]):
        spent[fam] = spent.get(fam, 0.0) + sec
    future = FUTURE_SHARE * plan
    overall = sum(taken.values()), sum(spent.values())
    r = (overall[0] + future) / (overall[1] + future) if overall[1] + future > 0 else 1.0
    current = families[done - 1] if done else None
    own = sum(sec for fam, sec in zip(families[done:], estimates[done:]) if fam == current)
    rest = sum(estimates[done:]) - own + tail
    if current is None or own == 0:
        return rest * r
    prior = PRIOR_SHARE * plan
    mine = (taken.get(current, 0.0) + prior * r) / (spent.get(current, 0.0) + prior)
    return own * mine + rest * r


class Ticker:
    """The progress lines of one run. row() for each point as it ends; close() at the end
    (or on Ctrl-C) prints the last family's grouped skips."""

    def __init__(self, total: int, estimates: list[float] | None, say: Callable[[str], None],
                 describe: Callable[[object], str], tail_s: float = 0.0, families: list[str] | None = None):
        self.total, self.estimates, self.say, self.describe = total, estimates, say, describe
        self.tail_s = tail_s               # the predicted seconds after the rows (sustained phase, finishing)
        self.families = families           # each estimate's family (None: the rows are one family)
        self.taken: dict[str, float] = {}  # family -> the seconds its rows have taken so far
        self.family = None
        self.skips: dict[str, list] = {}   # reason key -> [count, first reason, impls, first row]
        self.shown: float | None = None    # the time left last shown
        self.last = (0.0, 0)               # (elapsed, done) of the last line
        self.last_clock = ""
        self.reasons: dict[str, set] = {}  # reason key -> the distinct reasons grouped under it
        self.counted = 0                   # rows counted so far (row()'s counted)

    def clock(self, elapsed: float, done: int, family: str = "") -> str:
        """Return "m:ss" elapsed and, with predictions, the smoothed "~m:ss left"; the time since
        the last line counts to family (the row that just ended; the one family by default)."""
        if not self.estimates or done > len(self.estimates):
            return mmss(elapsed)
        key = family if self.families else ""
        self.taken[key] = self.taken.get(key, 0.0) + max(0.0, elapsed - self.last[0])
        raw = time_left(self.taken, done, self.estimates, self.tail_s, self.families)
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
        self.last_clock = self.clock(elapsed, done, m.family)
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
