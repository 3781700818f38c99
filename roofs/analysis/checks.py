"""What a reader must be warned of before trusting a run's roofs, one line each: roofs that
rest on few sizes or unsteady rows, precisions bounded by a wider exact path, points
measured while the machine was busy (and the roofs they could not set), a loaded machine,
and how many points sit above their bound. Used by the end-of-run summary and the report."""
from __future__ import annotations

import json
import re

import pandas as pd

from bench.policy import DEFAULT
from bench.results import BUSY_PREFIX, JUMP_PREFIX, STEAL_PREFIX, text_column
from bench.util import fmt_bytes, fmt_halfwidth, fmt_num, plural
from roofs.analysis.model import device_levels
from roofs.analysis.roofline import Roofline

ABOVE_PREFIX = "above its attainable"  # the flag rule 12's check sets (roofs.analysis.bounds)


def is_above(flags: pd.Series) -> pd.Series:
    """Return, per flag text, whether one of its parts (joined by "; ") says the point is
    above its attainable bound; a runner flag alone (busy, a time jump) does not."""
    return pd.Series([any(part.startswith(ABOVE_PREFIX) for part in f.split("; ")) for f in flags],
                     index=flags.index, dtype=bool)


def above_bound(df: pd.DataFrame) -> tuple[int, int]:
    """Return (ok rows flagged above their attainable bound, ok rows with a bound)."""
    ok = df[df["status"] == "ok"]
    bounded = ok[ok["attainable_gflops"].notna()] if "attainable_gflops" in ok else ok.iloc[0:0]
    return int(is_above(text_column(bounded, "flag")).sum()), len(bounded)


def others_load(load: dict, compute_units=None) -> tuple[float | None, int | None]:
    """Return (the load other processes put on the machine, the cores): run.json's load
    "others", the cores they kept busy on average while the run ran (the machine's busy CPU
    time less the run's own); for a run written before it was recorded, the larger of the
    1-minute load average when the run started and when it ended less the run's own share
    (load "own": the cores it kept busy on average; a run that busies both cores of a 2-core
    machine ends at a load near 2 by itself; the start's reading still counts the minute
    before the run)."""
    cores = load.get("cores") or compute_units
    if load.get("others") is not None:
        return float(load["others"]), cores
    start, end = load.get("start"), load.get("end")
    readings = ([start[0]] if start else []) + ([max(0.0, end[0] - (load.get("own") or 0.0))] if end else [])
    return (max(readings) if readings else None), cores


STEAL_WARN = 0.1  # a run whose cores the hypervisor stole more than this share of is warned of


def run_warnings(run) -> list[str]:
    """Return the warning lines for a loaded run (bench.results.Run)."""
    df, out = run.measurements, []
    model = Roofline(run.roofs)
    for r in model.roofs:
        if r.source != "measured":
            continue
        if (r.kind == "bandwidth" and not r.name.startswith(("link.", "host."))
                and r.plateau_points and r.plateau_points < 2):
            out.append(f"the {r.name} roof rests on a single working-set size")
        half = (r.interval[1] / r.interval[0] - 1) / 2 if r.interval and r.interval[0] else None
        if half is not None and half > DEFAULT.target_halfwidth and r.kind != "latency":
            out.append(f"the {r.name} roof's interval is {fmt_halfwidth(half)}, wider than the "
                       f"{DEFAULT.target_halfwidth:.0%} target: the host's noise outran the run's passes")
        via, own = (r.extra or {}).get("via"), (r.extra or {}).get("own_gflops")
        if via and r.extra.get("line_of"):  # the extra line "fp16 via fp32" (rule 10): the roof stays its own unit's
            name = r.extra["line_of"]
            out.append(f"{name} runs at {own / r.value:.2f}x {via} here: {name} inputs convert exactly to {via}, "
                       f"drawn as the line '{r.name}'; {name}'s roof stays its own")
        elif via and own and r.extra.get("no_unit"):
            out.append(f"no {r.name} unit on this CPU: its GEMMs run through conversion ({own:,.4g} at best), so its "
                       f"roof is {via}'s ({r.name} inputs convert exactly to {via})")
        elif via and own:
            out.append(f"{r.name}'s own rows ({own:,.4g} at best) were too unsteady to set a roof: its roof is {via}'s "
                       f"({r.name} inputs convert exactly to {via})")
        elif via:
            out.append(f"{r.name} has no unit measured here: its roof is {via}'s "
                       f"({r.name} inputs convert exactly to {via})")
    flags = text_column(df, "flag")
    busy, jumped = int(flags.str.startswith(BUSY_PREFIX).sum()), int(flags.str.startswith(JUMP_PREFIX).sum())
    stolen = int(flags.str.contains(STEAL_PREFIX, regex=False).sum())
    if busy or jumped or stolen:
        notes, _ = split_notes(run)
        refused = [note_subject(n) for n in notes if note_subject(n)
                   and ("no plateau" in n or "no trustworthy" in n or "no compute roof" in n)]
        out.append(f"{busy} points measured while the machine was busy, {stolen} while the hypervisor stole its cores "
                   f"and {jumped} whose time jumped set no roof"
                   + (f"; levels or precisions without a roof: {', '.join(sorted(set(refused)))}" if refused else
                      "; every roof still rests on steady rows"))
    worst, cores = others_load(run.meta.get("load") or {}, run.device.get("compute_units"))
    if worst is not None and cores and worst > cores:
        out.append(f"the machine was loaded during the run (other processes kept {worst:.1f} of its {cores} cores "
                   "busy, the run's own threads left out)")
    steal = (run.meta.get("load") or {}).get("steal")
    if steal is not None and cores and steal > STEAL_WARN * cores:
        out.append(f"the hypervisor stole {steal:.2f} of the VM's {cores} cores on average during the run (steal "
                   "time: no process of this machine)")
    n_above, n_bounded = above_bound(df)
    out.append(f"{fmt_num(n_above)} of {plural(n_bounded, 'bounded point')} sit above their attainable bound beyond "
               "their spread" + (" (each listed with its causes)" if n_above else ""))
    missing = unbounded(df)
    if missing:
        out.append(f"{plural(sum(missing.values()), 'ok point')} have no bound: "
                   + ", ".join(f"{fmt_num(n)} because the {level} roof is missing" for level, n in missing.items()))
    return out


def roof_notes(run) -> list[str]:
    """Return roofs.json's notes: the levels and precisions that got no roof, and why, each
    naming the option that caused it where one did (option_cause)."""
    path = run.dir / "roofs.json"
    notes = json.loads(path.read_text()).get("notes", []) if path.exists() else []
    return [n + option_cause(n, run) for n in notes]


def note_subject(note: str) -> str:
    """Return what a roofs.json note is about ("dram", "l1.write", "fp16"), or "" for a note
    about rows rather than one level or precision."""
    m = re.match(r"([a-z0-9_.]+): ", note)
    return m.group(1) if m else ""


def split_notes(run) -> tuple[list[str], list[str]]:
    """Return (the notes on levels, directions and precisions that have no roof in
    roofs.json; every other note: on a roof it has, such as a candidate that lost, or on
    rows), so that no reader prints "no roof" for a roof the file holds."""
    have = {r.get("name") for r in run.roofs if r.get("source") == "measured"}
    missing, about = [], []
    for n in roof_notes(run):
        subject = note_subject(n)
        (missing if subject and subject not in have else about).append(n)
    return missing, about


def option_cause(note: str, run) -> str:
    """Return ", because ..." when an option of the run explains a missing roof: a --max-ws
    below the sizes the off-chip roof needs (two of at least 4x the last-level cache), or
    below a cache level's window; else ""."""
    opts = run.meta.get("options") or {}
    max_ws = opts.get("max_ws")
    caches, memory = device_levels(run.device)
    level = note.split(":", 1)[0]
    if not max_ws or not caches:
        return ""
    factor = DEFAULT.offchip_factor
    if level == memory and max_ws < 2 * factor * caches[-1][1]:
        return (f" (because --max-ws {fmt_bytes(max_ws)} stops the sweep before two working sets of "
                f"{factor}x the last-level cache ({fmt_bytes(factor * caches[-1][1])}) or more: "
                f"drop it or give at least {fmt_bytes(2 * factor * caches[-1][1])})")
    size = dict(caches).get(level)
    if size and max_ws < size:
        return f" (because --max-ws {fmt_bytes(max_ws)} stops the sweep inside the {level} window)"
    return ""


def unbounded(df: pd.DataFrame) -> dict[str, int]:
    """Return, for the ok points that have no bound, how many per reason (the level whose
    roof is missing: "dram", "l3", ...); flop-free copies and links are not bounded points."""
    ok = df[df["status"] == "ok"]
    if "attainable_gflops" not in ok or "bound_note" not in ok:
        return {}
    none = ok[ok["attainable_gflops"].isna() & (text_column(ok, "bound_note") != "")]
    return none["bound_note"].astype(str).str.split(":").str[0].value_counts().to_dict()
