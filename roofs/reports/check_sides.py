"""The two sides of a check (roofs/reports/check.py) and what their records say differs: a run
folder, a fleet's group or a node's history of runs as a Side, and per SLOWER or FASTER roof the
causes, each with a code (ARCHITECTURE.md rule 18). Reads only run folders' files and a fleet's
fleet.json and fleet.csv; no verdicts here.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from bench.results import BUSY_PREFIX, JUMP_PREFIX, STEAL_PREFIX, ResultsError, load_run, load_small, text_column
from bench.util import Refusal, fmt_bytes, fmt_num, number, plural
from roofs.analysis.checks import others_load
from roofs.reports import fleet as fl

LOADED_SHARE = 0.5          # other processes' load past this share of the cores is named
ROOF_KINDS = ("bandwidth", "compute", "latency")
LOWER_IS_BETTER = ("latency",)


class CheckError(Refusal):
    """A check that cannot be made as asked: one sentence saying what was wrong and what would work,
    and its code ("other_device", "mixed_methods", "itself", "repeated", "fleet_in_history",
    "missing", "not_device_run", "no_baseline", "not_a_baseline", "bad_tolerance", "out_inside";
    a run folder that cannot be read keeps bench.paths.ResultsError's, a fleet folder FleetError's)."""


def warning(code: str, text: str) -> dict:
    """Return a check's warning as check.json holds it: {"code", "text"} (a check made anyway
    by the user's leave: "other_device", "mixed_methods"; a run that did not complete:
    "not_complete"). Callers read the code; the sentence is free to change."""
    return {"code": code, "text": text}


def interval_of(r: dict):
    """Return a roof dict's interval as (low, high), or None when it has none or a broken one."""
    iv = r.get("interval")
    if not isinstance(iv, (list, tuple)) or len(iv) != 2:
        return None
    lo, hi = number(iv[0]), number(iv[1])
    if lo is None or hi is None or not (0 < lo <= hi) or math.isinf(hi):
        return None
    return (lo, hi)


@dataclass
class Side:
    """One side of a check: a run (its records and roofs), a fleet's group, or a node's history
    (several runs: their roofs' hulls, the newest run's records)."""
    path: Path
    kind: str                       # "run", "fleet" or "history"
    model: str
    method: int                     # the method version that derived its roofs (a fleet: its runs')
    roofs: dict                     # (kind, name) -> roof dict with "value", "interval", "unit"
    row: dict = field(default_factory=dict)   # fleet.run_row's record (a fleet's: fleet.typical_record)
    meta: dict = field(default_factory=dict)
    measured_method: int | None = None
    flags: dict = field(default_factory=dict)  # runner flags: {"busy": n, "steal": n, "jumped": n}
    group: str = ""                 # a fleet's group
    devices: int | None = None      # a fleet group's devices
    rows: pd.DataFrame | None = None  # a fleet group's fleet.csv rows
    paths: list = field(default_factory=list)  # a history's run folders, as given


def load_run_side(path) -> Side:
    """Return a run folder (a run's own or a derived one) as a Side; raise CheckError with one
    sentence when it is missing, not a run, corrupt, or not a device run."""
    path = Path(path)
    if not path.exists():
        raise CheckError(f"{path} does not exist: give a run folder (results/<device>-<time>/).", "missing")
    try:
        meta, roofs = load_small(path)
        run = load_run(path)
    except ResultsError as e:
        raise CheckError(str(e), e.code) from None
    kind = meta.get("run_kind", "device")
    if kind != "device":
        raise CheckError(f"{path} is a {kind} run: check compares device runs, whose roofs it measured.",
                         "not_device_run")
    measured = {(r.get("kind"), r.get("name")): r for r in roofs
                if r.get("source") == "measured" and r.get("kind") in ROOF_KINDS and (number(r.get("value")) or 0) > 0}
    flags = text_column(run.measurements, "flag")
    by = run.roofs_by or {}
    return Side(path, "run", str((meta.get("device") or {}).get("name", "?")),
                int(by.get("method_version") or meta.get("method_version") or 1), measured,
                row=fl.run_row(path, meta, roofs, {}), meta=meta, measured_method=int(meta.get("method_version") or 1),
                flags=flag_counts(flags))


def flag_counts(flags: pd.Series) -> dict:
    """Return {"busy", "steal", "jumped": rows whose flag holds it} of a run's flag column (a
    flag's parts are joined by "; ")."""
    def count(prefix):
        return int(sum(any(part.startswith(prefix) for part in str(f).split("; ")) for f in flags.fillna("")))
    return {"busy": count(BUSY_PREFIX), "steal": count(STEAL_PREFIX), "jumped": count(JUMP_PREFIX)}


def load_fleet_side(path, run: Side, mixed_methods: bool, other_device: bool) -> Side:
    """Return the fleet folder's group for run's device model as a Side (fleet.baseline_group);
    raise CheckError with its sentence where baseline_group refuses it."""
    try:
        g = fl.baseline_group(path, run.model, run.method, {name: kind for kind, name in run.roofs}, mixed_methods,
                              other_device)
    except fl.FleetError as e:
        raise CheckError(str(e), e.code) from None
    return Side(Path(path), "fleet", g["model"], g["method"], g["roofs"], row=g["typical"], group=g["group"],
                devices=g["devices"], rows=g["rows"])


def _rate(kind: str, value: float) -> float:
    return 1 / value if kind in LOWER_IS_BETTER else value


def hull(kind: str, roofs: list[dict]) -> dict:
    """Return the roof that several runs' roof dicts of one roof stand for as a baseline: the
    median run's (of an even count the slower of the middle two, as rates), its interval the
    hull of theirs, [lowest low, highest top] (None when any has none), and extra
    "history_runs": how many runs had it (from 2, a span check does not judge by its width)."""
    ranked = sorted(roofs, key=lambda r: _rate(kind, number(r["value"])))
    mid = ranked[(len(ranked) - 1) // 2]
    ivs = [interval_of(r) for r in roofs]
    span = None if None in ivs else [min(iv[0] for iv in ivs), max(iv[1] for iv in ivs)]
    return {**mid, "interval": span, "runs": len(roofs), "extra": {**(mid.get("extra") or {}),
                                                                   "history_runs": len(roofs)}}


def load_history_side(paths, run: Side, mixed_methods: bool, other_device: bool) -> tuple[Side, list[dict]]:
    """Return (the baseline, warnings) for several run folders of one node: per roof any of them
    has, hull()'s figure and interval; the newest run's (by start time) records for the causes.
    Raise CheckError (one sentence, a code) for a fleet folder among them ("fleet_in_history"),
    the run itself ("itself"), a folder given twice ("repeated"), runs of more than one device
    unless other_device ("other_device") and of more than one method version unless
    mixed_methods ("mixed_methods"); the run's own model and method are check's to compare."""
    paths, seen = [Path(p) for p in paths], {}
    for p in paths:
        if (p / "fleet.json").exists():
            raise CheckError(f"{p} is a fleet folder: a fleet is a baseline on its own; give it alone, or give "
                             "several run folders of one node.", "fleet_in_history")
        if p.exists() and p.resolve() == Path(run.path).resolve():
            raise CheckError(f"{p} is the run itself: give earlier runs of its node as the baseline.", "itself")
        if p.resolve() in seen:
            raise CheckError(f"{p} is given twice: give each earlier run once.", "repeated")
        seen[p.resolve()] = p
    sides = sorted((load_run_side(p) for p in paths), key=lambda s: str(s.meta.get("start_utc") or ""))
    warnings = []
    ids = sorted({str(s.row.get("id")) for s in sides})
    if len(ids) > 1:
        said = f"the baseline runs are of {len(ids)} devices ({', '.join(ids)})"
        if not other_device:
            raise CheckError(f"{said}: a node's history is one device's runs (`fleet` makes a baseline of many "
                             "devices); give --other-device to take their span anyway.", "other_device")
        warnings.append(warning("other_device", f"{said}, allowed by --other-device: their span holds the "
                                                "devices' differences too"))
    methods = sorted({s.method for s in sides})
    if len(methods) > 1:
        said = f"the baseline runs' roofs were derived by methods {', '.join(map(str, methods))}"
        if not mixed_methods:
            raise CheckError(f"{said}, whose roofs are not comparable: re-derive the older ones (`python run_bench.py "
                             "report DIR`, then give their derived folders), or give --mixed-methods to check "
                             "anyway.", "mixed_methods")
        warnings.append(warning("mixed_methods", f"{said} (allowed by --mixed-methods); part of their span may be "
                                                 "the methods'"))
    newest = sides[-1]
    keys = list(dict.fromkeys(k for s in sides for k in s.roofs))
    roofs = {k: hull(k[0], [s.roofs[k] for s in sides if k in s.roofs]) for k in keys}
    models = {s.model for s in sides}
    return Side(newest.path, "history", newest.model if len(models) == 1 else " / ".join(sorted(models)),
                newest.method, roofs, row=newest.row, meta=newest.meta, measured_method=newest.measured_method,
                flags=newest.flags, paths=[str(p) for p in paths]), warnings


def _loaded(meta: dict) -> tuple[float | None, int | None]:
    return others_load(meta.get("load") or {}, (meta.get("device") or {}).get("compute_units"))


def run_level_notes(run: Side, base: Side | None) -> list[tuple[str, str]]:
    """Return (code, sentence) for what the run's records say of the machine while it ran,
    beside the baseline's when it is a run: other processes' load ("load": run.json's load, the
    cores they kept busy while it ran, or for an older run its load averages less its own share;
    named past LOADED_SHARE of the cores) and the rows the runner flagged busy, measured while
    the hypervisor stole cores, or whose time jumped ("flags")."""
    out = []
    sides = [("the run", run)] + ([("the baseline", base)] if base is not None and base.kind != "fleet" else [])
    for who, side in sides:
        worst, cores = _loaded(side.meta)
        if worst is not None and cores and worst > LOADED_SHARE * cores:
            out.append(("load", f"{who}'s machine was loaded by other processes ({worst:.1f} of its {cores} cores "
                                "busy with them)"))
        if side.flags.get("busy") or side.flags.get("steal") or side.flags.get("jumped"):
            out.append(("flags", f"{who} has {plural(side.flags['busy'], 'row')} the runner flagged busy, "
                                 f"{fmt_num(side.flags.get('steal', 0))} measured while the hypervisor stole its "
                                 f"cores and {fmt_num(side.flags['jumped'])} whose time jumped"))
    return out


def machine_differences(run: Side, base: Side) -> list[tuple[str, str]]:
    """Return (code, sentence) for what two runs' device records say differs in the machine
    itself: the device ("device": its identity, bench.identity: a GPU's UUID, a CPU's host and
    machine key), a CPU's signature ("cpu"), SIMD flags ("simd": compute roofs follow the
    vector units), cache sizes ("cache") and memory ("memory")."""
    a, b = run.meta.get("device") or {}, base.meta.get("device") or {}
    out = []
    if run.row.get("id") != base.row.get("id"):
        out.append(("device", f"another device ({run.row.get('id')} on {run.row.get('host')} vs the baseline's "
                              f"{base.row.get('id')} on {base.row.get('host')})"))
    if a.get("cpu_signature") and b.get("cpu_signature") and a["cpu_signature"] != b["cpu_signature"]:
        out.append(("cpu", f"CPU signature {a['cpu_signature']} vs the baseline's {b['cpu_signature']}"))
    fa, fb = set(a.get("cpu_flags") or ()), set(b.get("cpu_flags") or ())
    if fa and fb and fa != fb:
        out.append(("simd", "SIMD flags differ (" + "; ".join(
            f"{who} alone has {', '.join(sorted(f))}" for who, f in (("the run", fa - fb), ("the baseline", fb - fa))
            if f) + ")"))
    caches = lambda d: {c.get("name"): (c.get("size_bytes"), c.get("instances") or 1)  # noqa: E731
                        for c in d.get("caches") or []}
    ca, cb = caches(a), caches(b)
    for name in [n for n in ca if n in cb and ca[n] != cb[n]]:
        show = lambda c: f"{fmt_bytes(c[0])}" + (f" x{c[1]}" if c[1] != 1 else "")  # noqa: E731
        out.append(("cache", f"{name} cache {show(ca[name])} vs the baseline's {show(cb[name])}"))
    ma, mb = a.get("memory_bytes"), b.get("memory_bytes")
    if ma and mb and round(ma / 2**30) != round(mb / 2**30):
        out.append(("memory", f"memory {fmt_bytes(ma)} vs the baseline's {fmt_bytes(mb)}"))
    return out


def software_differences(run: Side, base: Side) -> list[tuple[str, str]]:
    """Return (code, sentence) for what two runs' run.json and roofs.json say differs in the
    code that made them: torch, Triton and CUDA versions ("version"), the roofbench commit
    ("commit"), the method versions that measured them and that derived their roofs ("method")."""
    out = []
    soft_a, soft_b = run.meta.get("software") or {}, base.meta.get("software") or {}
    for key, what in (("torch", "torch"), ("triton", "Triton"), ("cuda_runtime", "CUDA")):
        x, y = soft_a.get(key), soft_b.get(key)
        if x and y and x != y:
            out.append(("version", f"{what} {x} vs the baseline's {y}"))
    x, y = run.meta.get("roofbench_commit"), base.meta.get("roofbench_commit")
    if x and y and x != y:
        out.append(("commit", f"roofbench commit {str(x)[:12]} vs the baseline's {str(y)[:12]}"))
    if run.measured_method != base.measured_method:
        out.append(("method", f"measured by method {run.measured_method} vs the baseline's {base.measured_method}"))
    if run.method != base.method:
        out.append(("method", f"roofs derived by method {run.method} vs the baseline's {base.method}"))
    return out


def thread_differences(run: Side, base: Side) -> list[tuple[str, str, bool]]:
    """Return (code, sentence, whether the run had fewer) for the CPUs two runs' software
    records say they were given, causes a user sets: torch's threads ("threads") and the
    CPUs the process's affinity allowed ("affinity", bench.hw.device.affinity_cpus)."""
    out = []
    soft_a, soft_b = run.meta.get("software") or {}, base.meta.get("software") or {}
    for key, code, what in (("torch_threads", "threads", "threads"), ("affinity_cpus", "affinity", "affinity CPUs")):
        x, y = number(soft_a.get(key)), number(soft_b.get(key))
        if x and y and x != y:
            out.append((code, f"{what} {x:g} vs {y:g} (the run's vs the baseline's)", x < y))
    return out


def fleet_differences(run: Side, base: Side, roof: str, slower: bool) -> list[tuple[str, str]]:
    """Return (code, sentence) for what the run's records say differs from the fleet group's:
    for a slower roof, the fleet report's own causes (fleet.coded_causes: a clock held down, a
    lower power limit, ECC, MIG, PCIe, driver, throttling); for a faster one, every clock,
    power limit or state that differs from the group's typical record (fleet.record_differences);
    both with the commit and method version most of the fleet ran."""
    typical = base.row
    out = (fl.coded_causes(run.row, base.rows, roof) if slower
           else fl.record_differences(run.row, typical, roof, "the fleet's typical"))
    commit = run.meta.get("roofbench_commit")
    if commit and typical.get("commit") and str(commit) != str(typical["commit"]):
        out.append(("commit", f"roofbench commit {str(commit)[:12]} where most of the fleet ran "
                              f"{str(typical['commit'])[:12]}"))
    if typical.get("method_version") is not None and run.method != round(typical["method_version"]):
        out.append(("method", f"roofs derived by method {run.method} where the fleet's median run's were "
                              f"{typical['method_version']:.0f}"))
    return out


def causes(run: Side, base: Side, compared: dict) -> list[dict]:
    """Return [{"code", "text"}] for a SLOWER or FASTER roof (a compare_roofs row): what the
    records say differs. First, a slower compute roof's fewer threads or affinity CPUs (a cause
    the user sets), then a change that is the same per cycle ("clock"), then the rest (other
    thread and affinity differences after the machine's, its state's and its software's)."""
    name, slower = compared["name"], compared["verdict"] == "SLOWER"
    if base.kind != "fleet":  # a run, or a history's newest run
        found = machine_differences(run, base) + fl.record_differences(run.row, base.row, name)
        found += software_differences(run, base)
        threads = thread_differences(run, base)
    else:
        found, threads = fleet_differences(run, base, name, slower), []
    cpus = slower and compared["kind"] == "compute"
    first = [(code, text) for code, text, fewer in threads if fewer and cpus]
    rest = [(code, text) for code, text, fewer in threads if not (fewer and cpus)]
    if compared["reason"] == "clock":
        cr, cb = compared["clock_mhz"]
        first.append(("clock", f"the same per cycle: the clock moved from {fmt_num(cb)} to {fmt_num(cr)} MHz"))
    return [{"code": c, "text": t} for c, t in first + found + rest + run_level_notes(run, base)]
