"""The derivation scored against the truth: does it find every level, land each roof near the
truth, cover the truth with its interval, and keep `check` quiet between two runs of one truth
while catching a truth 15% slower?

    derive(rows, device, samples, policy)      roofs.analysis.confirm.derive_roofs, the derivation under test
    score_roofs(roofs, truth, policy)          one run's roofs against the truth: a dict of tallies
    compare(run_roofs, base_roofs, policy)     roofs.reports.check.compare_roofs (or the interval rule)
    evaluate(machine, noise, seeds, policy)    every criterion over seeds: a Tally (merge with +)
    TARGETS                                    what passes

Per seed s: run A_s (scale 1) is derived and scored; A_s is checked against A_{s+1} (the same
truth: any SLOWER or FASTER is a false verdict) and a run C_s at scale 0.85 against A_s (each of
the truth's roofs should read SLOWER). Roofs are matched to the truth by name; the derivation's
extra lines ("fp16 via fp32", a precision borrowing a wider one's roof) are neither scored nor
counted as extra roofs.
"""
from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass, field

from bench.policy import DEFAULT, Policy
from roofs.analysis.confirm import derive_roofs
from roofs.reports import check as check_mod
from roofs.sim.generate import as_machine, simulate, truth
from roofs.sim.noise import NOISES, Noise

SLOW_SCALE = 0.85
LEVEL_NAMES = ("l1", "l2", "l3", "dram", "hbm")
EDGE_FACTOR = 2.0          # one sweep step: an edge within a factor of 2 of the truth's
VERDICTS = ("SAME", "SLOWER", "FASTER", "UNCLEAR")
# what passes: shares of (seed, level) found with their edge, (seed, roof) within the policy's
# target, (seed, roof) intervals covering the truth, pairs of one truth with any SLOWER or
# FASTER (at most), and truth roofs read SLOWER against a truth 0.85x as fast (under SLOWER_NOISES)
TARGETS = {"levels": 0.95, "within": 0.90, "named": 0.90, "covered": 0.95, "false_pairs": 0.05, "slower": 0.90}
SLOWER_NOISES = ("quiet", "gpu")


def derive(rows, device, samples, policy: Policy = DEFAULT):
    """Return (roofs, notes) of the derivation under test (ARCHITECTURE.md, "How a roof is made")."""
    return derive_roofs(rows, device, samples, policy=policy)


def scored(roofs) -> dict:
    """Return {name: roof} of the measured roofs the truth may know (extra "via" lines left out)."""
    out = {}
    for r in roofs:
        if r.source != "measured" or " via " in r.name or (r.extra or {}).get("via"):
            continue
        out.setdefault(r.name, r)
    return out


@dataclass
class Tally:
    """Counts over runs; shares are count / total. Tallies add."""
    runs: int = 0
    levels: int = 0
    levels_ok: int = 0
    roofs: int = 0
    within: int = 0
    within2: int = 0
    named: int = 0        # within the target, or left wide (interval past the target) and covering the truth
    covered: int = 0
    extra: int = 0
    pairs: int = 0
    false_pairs: int = 0
    compared: int = 0
    false_verdicts: int = 0
    slower: int = 0
    slower_total: int = 0
    seconds: float = 0.0
    derivations: int = 0
    misses: Counter = field(default_factory=Counter)     # "<roof>: <what failed>" -> count
    extras: Counter = field(default_factory=Counter)     # extra roof names -> count
    false_names: Counter = field(default_factory=Counter)  # roofs a same-truth check called SLOWER or FASTER

    def __add__(self, other: Tally) -> Tally:
        out = Tally()
        for f in self.__dataclass_fields__:
            setattr(out, f, getattr(self, f) + getattr(other, f))
        return out

    def share(self, what: str) -> float:
        total = {"levels_ok": self.levels, "within": self.roofs, "within2": self.roofs, "named": self.roofs,
                 "covered": self.roofs,
                 "false_pairs": self.pairs, "false_verdicts": self.compared, "slower": self.slower_total}[what]
        return getattr(self, what) / total if total else math.nan


def score_roofs(roofs, tru: dict, policy: Policy = DEFAULT) -> Tally:
    """Return one run's tally: each truth level found (a cache's edge within EDGE_FACTOR of the
    truth's), each truth roof within policy.target_halfwidth (and twice it), within it or named
    wide (its interval wider than the target, so the run says it is unresolved, and covering the
    truth), and inside its interval, and the measured roofs the truth has no name for (extra)."""
    got, t = scored(roofs), Tally(runs=1)
    for name, value in tru["roofs"].items():
        r = got.get(name)
        if name in LEVEL_NAMES:
            t.levels += 1
            edge = tru["edges"].get(name)
            found = (r.extra or {}).get("edge_bytes") if r is not None else None
            if r is None:
                t.misses[f"{name}: not found"] += 1
            elif edge and not (found and 1 / EDGE_FACTOR <= found / edge <= EDGE_FACTOR):
                t.misses[f"{name}: edge off"] += 1
            else:
                t.levels_ok += 1
        t.roofs += 1
        if r is None:
            t.misses[f"{name}: missing"] += 1
            continue
        err = abs(r.value / value - 1)
        t.within += err <= policy.target_halfwidth
        t.within2 += err <= 2 * policy.target_halfwidth
        if err > policy.target_halfwidth:
            t.misses[f"{name}: {'high' if r.value > value else 'low'}"] += 1
        iv = r.interval
        ok = iv is not None and iv[0] * (1 - 1e-9) <= value <= iv[1] * (1 + 1e-9)
        t.covered += ok
        wide = iv is not None and (iv[1] - iv[0]) / (2 * r.value) > policy.target_halfwidth
        t.named += err <= policy.target_halfwidth or (wide and ok)
        if not ok:
            t.misses[f"{name}: not covered"] += 1
    extra = [n for n in got if n not in tru["roofs"] and got[n].kind in ("bandwidth", "compute", "latency")]
    t.extra += len(extra)
    t.extras.update(extra)
    return t


def _interval_rule(run_roofs, base_roofs, policy: Policy) -> list[dict]:
    """Rule 18's core where check has no compare_roofs: SLOWER when the run's interval lies
    wholly below the baseline's and its value is past the tolerance, FASTER alike, else SAME."""
    t = policy.check_tolerance
    base = {(r.kind, r.name): r for r in base_roofs if r.interval and r.source == "measured"}
    out = []
    for r in run_roofs:
        b = base.get((r.kind, r.name))
        if b is None or not r.interval:
            continue
        flip = r.kind == "latency"
        v, (lo, hi), V, (LO, HI) = r.value, r.interval, b.value, b.interval
        if flip:
            v, lo, hi, V, LO, HI = 1 / v, 1 / hi, 1 / lo, 1 / V, 1 / HI, 1 / LO
        verdict = ("SLOWER" if hi < LO and v < (1 - t) * V else "FASTER" if lo > HI and v > (1 + t) * V else "SAME")
        out.append({"name": r.name, "kind": r.kind, "verdict": verdict})
    return out


def compare(run_roofs, base_roofs, policy: Policy = DEFAULT) -> list[dict]:
    """Return check's verdicts of run_roofs against base_roofs: [{"name", "verdict", ...}]."""
    fn = getattr(check_mod, "compare_roofs", None)
    return (fn or _interval_rule)(run_roofs, base_roofs, policy)


def _checked(t: Tally, run, base, policy: Policy, truth_names=None) -> None:
    verdicts = compare(run, base, policy)
    if truth_names is None:
        wrong = [v["name"] for v in verdicts if v["verdict"] in ("SLOWER", "FASTER")]
        t.pairs += 1
        t.false_pairs += bool(wrong)
        t.compared += len(verdicts)
        t.false_verdicts += len(wrong)
        t.false_names.update(wrong)
        return
    by_name = {v["name"]: v["verdict"] for v in verdicts}
    t.slower_total += len(truth_names)
    t.slower += sum(by_name.get(n) == "SLOWER" for n in truth_names)


def _run(m, nz: Noise, seed: int, scale: float, policy: Policy, t: Tally):
    rows, device, samples = simulate(m, nz, seed, scale=scale, policy=policy)
    start = time.perf_counter()
    roofs, _ = derive(rows, device, samples, policy)
    t.seconds += time.perf_counter() - start
    t.derivations += 1
    return roofs


def evaluate(machine, noise, seeds, policy: Policy = DEFAULT, slower: bool = True) -> Tally:
    """Return the tally of every criterion for machine under noise over seeds (module
    docstring); seeds pair in order, the last with the first."""
    m, nz = as_machine(machine), (noise if isinstance(noise, Noise) else NOISES[noise])
    seeds = list(seeds)
    tru = truth(m, policy)
    total, runs = Tally(), {}
    for s in seeds:
        t = Tally()
        runs[s] = _run(m, nz, s, 1.0, policy, t)
        total = total + t + score_roofs(runs[s], tru, policy)
    for i, s in enumerate(seeds):
        if len(seeds) > 1:
            _checked(total, runs[s], runs[seeds[(i + 1) % len(seeds)]], policy)
        if slower:
            slow = _run(m, nz, s, SLOW_SCALE, policy, total)
            _checked(total, slow, runs[s], policy, truth_names=list(tru["roofs"]))
    return total
