"""Check a run's roofs against a baseline: per roof SAME, SLOWER, FASTER or UNCLEAR from that
roof's two intervals alone (ARCHITECTURE.md, rule 18), with the size of each change, what would
decide an UNCLEAR one, and what the two records say differs, each with a code. Made for a CI job
that fails when a driver or a code change lowers a ceiling, and for accepting a new node.

    result = check(RUN, BASE, tolerance_pct=5)    BASE: a run folder (or its derived folder)
                                                  or a fleet folder (`run_bench.py fleet`)
    write_check(result, OUT)                      check.md and check.json
    compare_roofs(run_roofs, base_roofs)          the verdicts over two lists of Roof, no files

One model of a ceiling: noise only slows a call, so a roof's ceiling lies at or above its
interval's low end, and below its high end unless every measurement was slowed more than the
run's own spread shows; one roof's noise never widens another's band. A half-width shrinks
like 1 / sqrt(passes): so an UNCLEAR roof's passes needed are estimated (passes_needed).

Reads only run folders' files (bench.results.load_run) and a fleet's fleet.json and fleet.csv,
through roofs/reports/check_sides.py (each side, and what the two records say differs);
writes nothing but OUT, which may lie in no baseline or run folder. Compared: every measured
roof both sides have, by kind and name, the extra lines ("fp16 via fp32", "<p>.elementwise")
labelled so; not datasheet or computed references. A fleet's group of the run's model stands
for the baseline: its median, and its p5 to p95 widened by its devices' run-to-run ratio. Latency roofs
(lower is better) are judged on their rates.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from bench.policy import DEFAULT, Policy
from bench.results import measured_home
from bench.util import fmt_halfwidth, fmt_num, number, plural
from roofs.analysis.roofline import Roof, band_text, is_pass_ceiling
from roofs.reports import fleet as fl
from roofs.reports.check_sides import (
    LOWER_IS_BETTER,
    ROOF_KINDS,
    CheckError,
    causes,
    interval_of,
    load_fleet_side,
    load_history_side,
    load_run_side,
    warning,
)
from roofs.reports.report import md_table

VERDICTS = ("SAME", "SLOWER", "FASTER", "UNCLEAR")
DEFAULT_TOLERANCE_PCT = round(100 * DEFAULT.check_tolerance, 9)
MAX_TOLERANCE_PCT = 100.0   # a tolerance of 100% or more could never call a roof SLOWER: refused
EPS = 1e-9                  # a figure within 1 part in 10^9 of a boundary is on it (decimal figures in floats)
STATE_SHIFT = fl.STATE_SHIFT  # a recorded clock or power limit this far from the baseline's is named
SPAN = {"fleet": "the fleet's p5-p95", "history": "the span of the node's runs"}  # a baseline that is a spread


def _lt(a: float, b: float) -> bool:
    return a < b - EPS * abs(b)


def _le(a: float, b: float) -> bool:
    return a <= b + EPS * abs(b)


def passes_needed(n: int, h: float, h_needed: float, policy: Policy = DEFAULT) -> int | None:
    """Return about how many passes would narrow a half-width h, measured over n passes, to
    h_needed (fractions of the value): ceil(n (h / h_needed)^2), as a half-width shrinks like
    1 / sqrt(passes); n when h is already that narrow. None when no number of passes would:
    h_needed under policy.min_halfwidth (no interval is narrower) or the estimate past
    policy.decide_max_passes (the host's noise is larger than the change)."""
    if _le(h, h_needed):
        return n
    if not h_needed >= policy.min_halfwidth:
        return None
    need = math.ceil(n * (h / h_needed) ** 2 - EPS)
    return need if need <= policy.decide_max_passes else None


def _decide(needed: dict) -> tuple[dict, str]:
    """Return (decide, what to do) from {side: passes needed, or None}: the side ("run",
    "baseline" or "both") whose interval is too wide and about how many passes would narrow it."""
    side = "both" if len(needed) > 1 else next(iter(needed), None)
    passes = None if None in needed.values() or not needed else max(needed.values())
    return {"side": side, "passes": passes}, (f"rerun with more passes (about {passes})" if passes is not None else
                                              "no number of passes: the host's noise is larger than the change")


def verdict(v: float, interval, base: float, base_interval, tolerance: float, fleet: bool = False,
            passes: tuple = (1, 1), policy: Policy = DEFAULT, *, shown: float | None = None,
            band: str = "fleet") -> dict:
    """Return {"verdict", "why", "reason", "decide"} for a roof whose run value is v with interval
    [lo, hi] against a baseline V with [LO, HI] (a fleet's median and p5 to p95 when fleet), at
    tolerance t (0.05 for 5%), all as rates (higher is faster), from these two intervals alone:

        SLOWER   hi < LO and v < (1 - t) V; FASTER lo > HI and v > (1 + t) V     reason "apart"
        SAME     |v - V| <= t V with the intervals apart ("within"), or overlapping and both
                 half-widths (hi - lo) / 2v, (HI - LO) / 2V <= t ("narrow"; a fleet's band is its
                 devices' spread, not judged: a value inside it is SAME, past t or not, "inside_fleet";
                 band "history": a node's runs' hull, the same, "inside_history")
        UNCLEAR  "no_interval" (either side has none), "too_wide" (a change within t that a wider
                 interval could hide), "not_separated" (a change past t the intervals overlap)

    decide (UNCLEAR only): {"side": "run", "baseline" or "both", whose interval is too wide,
    "passes": about how many passes (passes_needed; passes = the sides' pass counts) would
    narrow it to the half-width that decides, None when none would}. That half-width is t to
    confirm a change within t; to separate one past t, each side's reach toward the other (in
    logs) must fit the gap between the values: a side inside half the gap leaves the other the
    rest, else each gets half (a fleet's band leaves the run what it does not cover).
    Boundaries are compared to 1 part in 10^9 (EPS): intervals that touch overlap. The why opens
    with the change as the roof's own figure shows it, shown ((new - old) / old of a latency's
    time, as check.json's change and the table's column), v / V - 1 when None."""
    t = tolerance
    if interval is None or base_interval is None:
        side = "both" if interval is None and base_interval is None else "run" if interval is None else "baseline"
        which = {"both": "either side", "run": "the run", "baseline": "the baseline"}[side]
        return {"verdict": "UNCLEAR", "reason": "no_interval", "decide": {"side": side, "passes": None},
                "why": f"no interval on {which} (roofs derived before intervals, method 8, have none): re-derive it "
                       "(`python run_bench.py report RUN`)"}
    lo, hi = interval
    low, high = base_interval
    said = f"{v / base - 1 if shown is None else shown:+.1%}"
    below, above = _lt(hi, low), _lt(high, lo)

    def done(got: str, reason: str, why: str) -> dict:
        return {"verdict": got, "reason": reason, "why": f"{said}: {why}", "decide": None}

    if below and _lt(v, (1 - t) * base):
        return done("SLOWER", "apart", "every figure the run allows lies below every figure the baseline allows")
    if above and _lt((1 + t) * base, v):
        return done("FASTER", "apart", "every figure the run allows lies above every figure the baseline allows")
    within = _le(abs(v - base), t * base)
    if within and (below or above):
        return done("SAME", "within", f"the intervals are apart, but the change is within the {t:.1%} tolerance")
    halves = {"run": (hi - lo) / (2 * v), "baseline": (high - low) / (2 * base)}
    wide = {s: h for s, h in halves.items() if not _le(h, t) and not (fleet and s == "baseline")}
    inside = fleet and _le(low, v) and _le(v, high)  # among the fleet's healthy spread, past t or not
    n = dict(zip(("run", "baseline"), (max(1, int(k or 1)) for k in passes)))
    if within or inside:
        if not wide:
            return done("SAME", "narrow" if within else f"inside_{band}",
                        f"the intervals overlap and are narrow enough to have shown a {t:.1%} change"
                        + (f" (inside {SPAN[band]})" if fleet else ""))
        named = " and ".join(f"the {s}'s ({fmt_halfwidth(h, 1)})" for s, h in wide.items())
        decide, todo = _decide({s: passes_needed(n[s], h, t, policy) for s, h in wide.items()})
        return {**done("UNCLEAR", "too_wide", f"the intervals overlap and {named} {'is' if len(wide) == 1 else 'are'} "
                                              f"too wide to show a {t:.1%} change: {todo}"), "decide": decide}
    gap = abs(math.log(base / v))  # the values' distance, in logs; each side's reach toward the other below
    reach = ({"run": math.log(hi / v), "baseline": math.log(base / low)} if v < base else
             {"run": math.log(v / lo), "baseline": math.log(high / base)})
    reach = {s: max(r, 0.0) for s, r in reach.items()}
    if fleet:
        room = {"run": gap - reach["baseline"]}
    elif reach["baseline"] <= gap / 2:
        room = {"run": gap - reach["baseline"]}
    elif reach["run"] <= gap / 2:
        room = {"baseline": gap - reach["run"]}
    else:
        room = {"run": gap / 2, "baseline": gap / 2}
    needed = {}  # touching intervals overlap: a side that only reaches its room needs a pass more too
    for s, r in ((s, r) for s, r in room.items() if not _lt(reach[s], r)):
        got = passes_needed(n[s], halves[s], halves[s] * r / reach[s], policy) if r > 0 else None
        needed[s] = None if got is None else max(got, n[s] + 1)
    decide, todo = _decide(needed)
    whose = {"run": "the run's is", "baseline": "the baseline's is", "both": "both are", None: "they touch"}
    return {**done("UNCLEAR", "not_separated", f"past the {t:.1%} tolerance, but the intervals overlap "
                                               f"({whose[decide['side']]} too wide to separate them): {todo}"),
            "decide": decide}


def as_rates(kind: str, value: float, interval):
    """Return (value, interval) as rates, higher faster: a latency (us) as 1 / value, its
    interval [1 / hi, 1 / lo]; any other kind as it is."""
    if kind not in LOWER_IS_BETTER:
        return value, interval
    return 1 / value, (None if interval is None else (1 / interval[1], 1 / interval[0]))


def pass_count(roof: Roof) -> int:
    """Return how many revisit passes measured a roof: extra "pass_count", 1 when it does not say."""
    n = number((roof.extra or {}).get("pass_count"))
    return max(1, int(n)) if n and not math.isinf(n) else 1


def roof_clock(roof: Roof) -> float | None:
    """Return the clock (MHz) a roof's sustained window recorded (extra "sustained"), or None."""
    c = number(((roof.extra or {}).get("sustained") or {}).get("clock_mhz"))
    return c if c and c > 0 and not math.isinf(c) else None


def _compared(r: Roof) -> bool:
    return r.source == "measured" and r.kind in ROOF_KINDS and (number(r.value) or 0) > 0


def compare_roofs(run_roofs, base_roofs, policy: Policy = DEFAULT, tolerance: float | None = None, *,
                  fleet: bool = False, clocks: tuple = (None, None)) -> list[dict]:
    """Return, per measured roof (Roof with a value) both lists have, by kind and name in
    run_roofs' order, {"name", "kind", "value" (the run's), "base" (the baseline's), "verdict",
    "why", "decide" (with "roof"; None unless UNCLEAR), "reason" (verdict()'s), "change" (v / V - 1),
    "clock_mhz" ([run's, baseline's]), "per_cycle" (change at one clock, or None)}, at
    tolerance (a fraction; policy.check_tolerance when None). No files, no records.

    Confirmed in cycles as well as time (nvbench's rule): where both sides have a clock for the
    roof (its sustained window's, else clocks: the run records'), a SLOWER or FASTER whose
    figures per clock lie within t of each other keeps its verdict (the ceiling moved) with
    reason "clock": the same per cycle, the clock moved. fleet: the baseline is a fleet's band; a
    baseline roof whose extra "history_runs" is 2 or more is the span of a node's runs (check_sides.hull)."""
    t = policy.check_tolerance if tolerance is None else tolerance
    base = {(r.kind, r.name): r for r in base_roofs if _compared(r)}
    out = []
    for r in run_roofs:
        b = base.get((r.kind, r.name))
        if b is None or not _compared(r):
            continue
        (rv, riv), (bv, biv) = as_rates(r.kind, r.value, r.interval), as_rates(b.kind, b.value, b.interval)
        change = r.value / b.value - 1  # the figure's as shown (a latency's time): the why states the same
        history = (number((b.extra or {}).get("history_runs")) or 0) >= 2
        got = verdict(rv, riv, bv, biv, t, fleet or history, (pass_count(r), pass_count(b)), policy, shown=change,
                      band="fleet" if fleet else "history")
        cr, cb = roof_clock(r) or number(clocks[0]), roof_clock(b) or number(clocks[1])
        rate = (rv / cr) / (bv / cb) - 1 if cr and cb else None  # per cycle, as a rate: what the rule judges
        per_cycle = None if rate is None else (rate if r.kind not in LOWER_IS_BETTER else 1 / (1 + rate) - 1)
        row = {"name": r.name, "kind": r.kind, "value": float(r.value), "base": float(b.value), **got,
               "decide": None if got["decide"] is None else {"roof": r.name, **got["decide"]},
               "change": change, "clock_mhz": [cr, cb], "per_cycle": per_cycle}
        if got["verdict"] in ("SLOWER", "FASTER") and rate is not None and _le(abs(rate), t):
            row["reason"] = "clock"
            row["why"] += (f"; the same per cycle ({per_cycle:+.1%}): the clock moved from {fmt_num(cb)} to "
                           f"{fmt_num(cr)} MHz")
        out.append(row)
    return out


def roof_label(r: dict) -> str:
    """Return what a measured roof is: "roof", "roof via <wider>" (a precision without its
    own unit, bounded by an exact wider path), "extra line" ("fp16 via fp32", "<p>.vector"),
    or "elementwise passes' ceiling" ("<p>.elementwise"; rule 10)."""
    extra = r.get("extra") or {}
    if is_pass_ceiling(Roof.from_dict(r)):
        return "elementwise passes' ceiling"
    if extra.get("line_of"):
        return "extra line"
    if extra.get("via"):
        return f"roof via {extra['via']}"
    return "roof"


BASELINE_INTERVAL = {"run": "the baseline run's roof intervals", "fleet": "p5-p95 of the fleet's devices",
                     "history": "the hull of the baseline runs' intervals (lowest low to highest top), the median "
                                "run's figure"}
WIDTH_JUDGED = {"run": True, "fleet": False, "history": "only of a roof one baseline run alone has"}


def baseline_side(run, base_dir, mixed_methods: bool = False, other_device: bool = False) -> tuple:
    """Return (the baseline as a Side, warnings) for base_dir: a run folder, a fleet folder, or a
    list of several run folders of one node (load_history_side); raise CheckError for one that
    is missing, the run itself, or neither a run nor a fleet."""
    dirs = [Path(d) for d in ([base_dir] if isinstance(base_dir, (str, Path)) else base_dir)]
    for d in dirs:
        if not d.exists():
            raise CheckError(f"the baseline {d} does not exist: give a run folder or a fleet folder.", "no_baseline")
        if not (d / "fleet.json").exists() and not (d / "run.json").exists():
            raise CheckError(f"the baseline {d} is neither a run folder (run.json) nor a fleet folder (fleet.json): "
                             "give one of them.", "not_a_baseline")
    if len(dirs) > 1:
        return load_history_side(dirs, run, mixed_methods, other_device)
    if (dirs[0] / "fleet.json").exists():
        return load_fleet_side(dirs[0], run, mixed_methods, other_device), []
    if dirs[0].resolve() == Path(run.path).resolve():
        raise CheckError(f"{dirs[0]} is the run itself: give another run, or a fleet, as the baseline.", "itself")
    return load_run_side(dirs[0]), []


def check(run_dir, base_dir, tolerance_pct: float | None = None, mixed_methods: bool = False,
          other_device: bool = False, policy: Policy = DEFAULT) -> dict:
    """Return the check of run_dir against base_dir (a run or fleet folder): per roof both have,
    compare_roofs' verdict, reason and decide, both sides' values and intervals, the change in %
    (and per cycle) and, for SLOWER and FASTER, causes ({"code", "text"}); the roofs one side has;
    the rule's parameters. tolerance_pct: in %, policy.check_tolerance's when None. Raise
    CheckError (one sentence) for bad input: a missing folder, not a run, corrupt files, a fleet
    without the run's model, other method versions or models (unless mixed_methods /
    other_device), a tolerance below 0 or of MAX_TOLERANCE_PCT or more."""
    if tolerance_pct is None:
        tolerance_pct = round(100 * policy.check_tolerance, 9)
    t = number(tolerance_pct)
    if t is None or not (0 <= t < MAX_TOLERANCE_PCT):
        raise CheckError(f"--tolerance takes a percentage from 0 up to (not including) {MAX_TOLERANCE_PCT:g}, like "
                         f"{DEFAULT_TOLERANCE_PCT:g} (got {tolerance_pct!r}).", "bad_tolerance")
    run = load_run_side(run_dir)
    base, warnings = baseline_side(run, base_dir, mixed_methods, other_device)
    if base.model != run.model:
        if not other_device:
            raise CheckError(f"the run is of {run.model} and the baseline of {base.model}: another model's roofs are "
                             "other ceilings; give --other-device to check one against the other anyway.",
                             "other_device")
        warnings.append(warning("other_device", f"different device models (allowed by --other-device): the run's "
                                                f"{run.model}, the baseline's {base.model}"))
    if base.kind != "fleet" and base.method != run.method:
        if not mixed_methods:
            raise CheckError(f"the run's roofs were derived by method {run.method} and the baseline's by method "
                             f"{base.method}, whose roofs are not comparable: re-derive the older one "
                             "(`python run_bench.py report DIR`, then give its derived folder), or give "
                             "--mixed-methods to check anyway.", "mixed_methods")
    if base.method != run.method:
        warnings.append(warning("mixed_methods", f"different method versions (allowed by --mixed-methods): the run's "
                                                 f"roofs derived by method {run.method}, the baseline's by "
                                                 f"{base.method}; part of a change may be the method's"))
    status = run.meta.get("status")
    if status != "complete":
        warnings.append(warning("not_complete", f"the run's status is {status!r}, not complete"))
    tol, fleet = t / 100, base.kind == "fleet"
    as_roof = lambda key, r: Roof.from_dict({**r, "kind": key[0], "name": key[1], "interval": interval_of(r)})  # noqa: E731
    record_clock = lambda side: number(side.row.get("app_sm_clock_mhz"))  # noqa: E731  (a roof's own window's first)
    rows = []
    for c in compare_roofs([as_roof(k, r) for k, r in run.roofs.items()],
                           [as_roof(k, r) for k, r in base.roofs.items()], policy, tol, fleet=fleet,
                           clocks=(record_clock(run), record_clock(base))):
        r, b = run.roofs[(c["kind"], c["name"])], base.roofs[(c["kind"], c["name"])]
        row = {"kind": c["kind"], "roof": c["name"], "what": roof_label(r), "unit": r.get("unit", ""),
               "verdict": c["verdict"], "reason": c["reason"], "why": c["why"], "decide": c["decide"],
               "change_pct": 100 * c["change"],
               "per_cycle_pct": None if c["per_cycle"] is None else 100 * c["per_cycle"],
               "clock_mhz": dict(zip(("run", "baseline"), c["clock_mhz"])),
               "run": {"value": c["value"], "interval": interval_of(r)},
               "baseline": {"value": c["base"], "interval": interval_of(b),
                            **{k: b[m] for k, m in (("devices", "n"), ("runs", "runs")) if m in b}}}
        if c["verdict"] in ("SLOWER", "FASTER"):
            row["causes"] = causes(run, base, c)
        rows.append(row)
    counts = {v: sum(1 for r in rows if r["verdict"] == v) for v in VERDICTS}
    return {"run": str(run.path), "baseline": {"path": str(base.path), "kind": base.kind, "model": base.model,
                                               "method_version": base.method, "group": base.group or None,
                                               "devices": base.devices,
                                               **({"paths": base.paths} if base.paths else {})},
            "run_model": run.model, "run_method_version": run.method,
            "tolerance_pct": t, "rule": {"tolerance": tol, "rule": "ARCHITECTURE.md rule 18",
                                         "baseline_interval": BASELINE_INTERVAL[base.kind],
                                         "baseline_width_judged": WIDTH_JUDGED[base.kind], "eps": EPS,
                                         "min_halfwidth": policy.min_halfwidth,
                                         "decide_max_passes": policy.decide_max_passes},
            "verdicts": rows, "counts": counts,
            "only_in_run": [{"kind": k, "roof": n} for k, n in run.roofs if (k, n) not in base.roofs],
            "only_in_baseline": [{"kind": k, "roof": n} for k, n in base.roofs if (k, n) not in run.roofs],
            "without_interval": sum(1 for r in rows if r["run"]["interval"] is None),
            "warnings": warnings, "exit_code": 1 if counts["SLOWER"] else 0}


def refuse_out(out, result: dict) -> None:
    """Raise CheckError when out lies in the run folder or a run baseline's folder, or in the
    run a derived folder came from (measured_home): check writes beside nothing that was measured."""
    out = Path(out).resolve()
    b = result["baseline"]
    folders = [("run", result["run"])] + [("baseline", d) for d in b.get("paths") or [b["path"]]
                                          if b["kind"] != "fleet"]
    for who, d in folders + [(who, measured_home(d)) for who, d in folders]:
        d = Path(d).resolve()
        if out == d or d in out.parents:
            raise CheckError(f"--out {out} lies in the {who} folder {d}: check writes beside nothing that was "
                             "measured; give another folder (default results/check-<UTC timestamp>).", "out_inside")


def _band(side: dict, unit: str) -> str:
    return band_text(side["value"], side["interval"], unit)


def table(result: dict) -> pd.DataFrame:
    """Return the verdicts as a table: roof, what it is, both sides' figures with their intervals, change, verdict."""
    return pd.DataFrame([{"roof": f"{r['kind']} {r['roof']}", "what": r["what"], "run": _band(r["run"], r["unit"]),
                          "baseline": _band(r["baseline"], r["unit"]), "change": f"{r['change_pct']:+.1f}%",
                          "verdict": r["verdict"]} for r in result["verdicts"]])


def headline(result: dict) -> str:
    """Return the one-line outcome: the verdicts' counts and the roofs one side alone has."""
    c = result["counts"]
    one = len(result["only_in_run"]) + len(result["only_in_baseline"])
    return (f"{plural(len(result['verdicts']), 'roof')} compared: " + ", ".join(f"{c[v]} {v}" for v in VERDICTS)
            + (f"; {plural(one, 'roof')} on one side only" if one else ""))


def change_groups(result: dict) -> list[dict]:
    """Return the SLOWER and FASTER roofs grouped by what their records say differs, in the
    verdicts' order: [{"verdict", "roofs": [their check.json rows], "causes": [{"code", "text"}]}],
    so that a cause every roof of a group shares is said once."""
    groups: dict = {}
    for r in result["verdicts"]:
        if r.get("causes") is not None:
            key = (r["verdict"], tuple(c["text"] for c in r["causes"]))
            groups.setdefault(key, {"verdict": r["verdict"], "roofs": [], "causes": r["causes"]})["roofs"].append(r)
    return list(groups.values())


def changes(result: dict, nothing: str) -> list[tuple[str, str]]:
    """Return, per change_groups' group, ("SLOWER hbm -15.0%, l2 -15.1%", the causes joined, or
    nothing when none is recorded)."""
    return [(f"{g['verdict']} " + ", ".join(f"{r['roof']} {r['change_pct']:+.1f}%" for r in g["roofs"]),
             "; ".join(c["text"] for c in g["causes"]) or nothing) for g in change_groups(result)]


def baseline_text(b: dict) -> str:
    """Return what the baseline was: "run PATH", "fleet PATH (group G, N devices)" or "history of
    N runs: PATH, PATH, ..."."""
    if b["kind"] == "history":
        return f"history of {plural(len(b['paths']), 'run')}: {', '.join(b['paths'])}"
    return f"{b['kind']} {b['path']}" + (f" (group {b['group']}, {plural(b['devices'] or 0, 'device')})"
                                         if b["kind"] == "fleet" else "")


def terminal_text(result: dict) -> str:
    """Return the check for a terminal: what was compared, the table, the causes of each change."""
    lines = [f"check {result['run']}", f"   vs {baseline_text(result['baseline'])}",
             f"tolerance {result['tolerance_pct']:g}% (ARCHITECTURE.md rule 18)"]
    lines += [f"warning: {w['text']}" for w in result["warnings"]]
    t = table(result)
    lines += ["", t.to_string(index=False) if not t.empty else "(no roof both sides have)", "", headline(result)]
    lines += [f"  {head}: {said}" for head, said in changes(result, "nothing recorded differs")]
    return "\n".join(lines)


def markdown(result: dict) -> str:
    """Return check.md: what was compared and by which rule, the verdicts with why, the causes
    of each change, the roofs one side alone has."""
    b = result["baseline"]
    out = [f"# roofbench check: {headline(result)}\n\n",
           f"- run: {result['run']} ({result['run_model']}, roofs derived by method {result['run_method_version']})\n",
           f"- baseline: {baseline_text(b)} ({b['model']}, method {b['method_version']}"
           + ("; its median and p5-p95 stand for the baseline's value and interval" if b["kind"] == "fleet" else "")
           + ("; per roof the median run's figure and the span of their intervals stand for the baseline's value "
              "and interval, and what differs is read from the newest run's records" if b["kind"] == "history"
              else "") + ")\n",
           f"- tolerance {result['tolerance_pct']:g}%. SLOWER: the run's interval wholly below the baseline's and its "
           "value more than the tolerance below; FASTER the same above; SAME: within the tolerance, with the "
           "intervals apart or narrow enough to have shown such a change; UNCLEAR otherwise, and for a roof "
           "without an interval, its why saying which interval is too wide and about how many passes would "
           "decide it (roofbench's ARCHITECTURE.md, rule 18).\n"]
    out += [f"- warning: {w['text']}\n" for w in result["warnings"]]
    if result["without_interval"]:
        out.append(f"- {plural(result['without_interval'], 'roof')} of the run have no interval (derived before "
                   "method 8): `python run_bench.py report RUN` re-derives them into its derived folder.\n")
    out.append("\n## Verdicts\n\n")
    rows = table(result)
    if not rows.empty:
        rows["why"] = [r["why"] for r in result["verdicts"]]
    out.append(md_table(rows))
    out.append("\n## What the records say differs, for each change\n\n")
    out += [f"- **{head}**: {said}\n" for head, said in
            changes(result, "nothing recorded differs (check cooling, the board, or re-run it)")] or [
        "- no roof changed\n"]
    out.append("\n## On one side only (no verdict)\n\n")
    out += [f"- {r['kind']} {r['roof']}: only in the {who}\n" for who, key in (("run", "only_in_run"),
                                                                                 ("baseline", "only_in_baseline"))
            for r in result[key]] or ["- none\n"]
    return "".join(out)


def write_check(result: dict, out) -> Path:
    """Write check.md and check.json into out (refuse_out first); return check.md's path."""
    refuse_out(out, result)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "check.json").write_text(json.dumps(result, indent=1, default=str, allow_nan=False))
    md = out / "check.md"
    md.write_text(markdown(result))
    return md
