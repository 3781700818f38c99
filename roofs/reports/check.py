"""Check a run's roofs against a baseline: per roof SAME, SLOWER, FASTER or UNCLEAR, decided
from both sides' intervals (ARCHITECTURE.md, rule 18), with the size of each change and what
the two records say differs. Made for a CI job that fails when a driver or a code change
lowers a ceiling, and for accepting a new node against a fleet.

    result = check(RUN, BASE, tolerance_pct=5)    BASE: a run folder (or its derived folder)
                                                  or a fleet folder (`run_bench.py fleet`)
    write_check(result, OUT)                      check.md and check.json

Reads only run folders' files (bench.results.load_run) and a fleet's fleet.json and
fleet.csv; writes nothing but OUT, which may lie in neither run folder. Compared: every
measured roof both sides have, by kind and name, the extra lines ("fp16 via fp32",
"<p>.elementwise") among them and labelled so; datasheet and computed references are not.
A fleet's group is the run's device model: its median and p5 to p95, widened by its
devices' run-to-run ratio (fleet.run_to_run), stand for the baseline's value and interval.
Latency roofs (lower is better) are judged on their rates.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from bench.results import BUSY_PREFIX, JUMP_PREFIX, ResultsError, load_run, load_small, measured_home, text_column
from bench.util import fmt_bytes, fmt_num, missing, number, plural
from roofs.analysis.checks import others_load
from roofs.analysis.roofline import Roof, band_text, is_pass_ceiling
from roofs.reports import fleet as fl
from roofs.reports.report import md_table

VERDICTS = ("SAME", "SLOWER", "FASTER", "UNCLEAR")
DEFAULT_TOLERANCE_PCT = 5.0
MAX_TOLERANCE_PCT = 100.0   # a tolerance of 100% or more could never call a roof SLOWER: refused
EPS = 1e-9                  # a figure within 1 part in 10^9 of a boundary is on it (decimal figures in floats)
STATE_SHIFT = 0.03          # a recorded clock or power limit this far from the baseline's is named (fleet.causes')
LOADED_SHARE = 0.5          # other processes' load past this share of the cores is named
ROOF_KINDS = ("bandwidth", "compute", "latency")
LOWER_IS_BETTER = ("latency",)
# fleet.csv's columns read as text (a driver "560.35" is no number, nor a commit "1234567")
TEXT = ("run", "host", "id", "pci_bus_id", "model", "commit", "start_utc", "status", "driver")


class CheckError(ValueError):
    """A check that cannot be made as asked: one sentence saying what was wrong and what would work."""


def _lt(a: float, b: float) -> bool:
    return a < b - EPS * abs(b)


def _le(a: float, b: float) -> bool:
    return a <= b + EPS * abs(b)


def verdict(v: float, interval, base: float, base_interval, tolerance: float,
            fleet: bool = False) -> tuple[str, str]:
    """Return (SAME | SLOWER | FASTER | UNCLEAR, why) for a roof whose run value is v with
    interval [lo, hi] against a baseline value V with [LO, HI] (a fleet's median and p5 to
    p95 when fleet), at tolerance t (a fraction: 0.05 for 5%), all as rates (higher is faster),
    by ARCHITECTURE.md rule 18:

        SLOWER   hi < LO and v < (1 - t) V
        FASTER   lo > HI and v > (1 + t) V
        SAME     |v - V| <= t V, and the intervals apart (a real change too small to matter)
                 or overlapping with (hi - lo) / 2v <= t, and (HI - LO) / 2V <= t too for a
                 run baseline (a fleet's band is its devices' spread: a value inside it is SAME,
                 past t or not, when the run's own interval is that narrow)
        UNCLEAR  otherwise, and whenever either side has no interval

    Each boundary is compared to 1 part in 10^9 (EPS): intervals that touch overlap, and a
    change of exactly t or a half-width of exactly t is within it."""
    if interval is None or base_interval is None:
        which = ("either side" if interval is None and base_interval is None else
                 "the run" if interval is None else "the baseline")
        return "UNCLEAR", f"no interval on {which} (roofs derived before intervals, method 8, have none)"
    lo, hi = interval
    low, high = base_interval
    change = v / base - 1
    said = f"{change:+.1%}"
    below, above = _lt(hi, low), _lt(high, lo)
    if below and _lt(v, (1 - tolerance) * base):
        return "SLOWER", f"{said}: every figure the run allows lies below every figure the baseline allows"
    if above and _lt((1 + tolerance) * base, v):
        return "FASTER", f"{said}: every figure the run allows lies above every figure the baseline allows"
    within = _le(abs(v - base), tolerance * base)
    if within and (below or above):
        return "SAME", f"{said}: the intervals are apart, but the change is within the {tolerance:.1%} tolerance"
    wide = []  # the intervals too wide to have shown a change of t: the run's, and a run baseline's
    if not _le(hi - lo, 2 * tolerance * v):
        wide.append(f"the run's (+/-{(hi - lo) / (2 * v):.1%})")
    if not fleet and not _le(high - low, 2 * tolerance * base):
        wide.append(f"the baseline's (+/-{(high - low) / (2 * base):.1%})")
    inside = fleet and _le(low, v) and _le(v, high)  # among the fleet's healthy spread, past t or not
    if (within or inside) and not wide:
        return "SAME", (f"{said}: the intervals overlap and are narrow enough to have shown a "
                        f"{tolerance:.1%} change" + (" (inside the fleet's p5-p95)" if fleet else ""))
    if not within:
        return "UNCLEAR", f"{said}: past the {tolerance:.1%} tolerance, but the intervals overlap"
    return "UNCLEAR", (f"{said}: the intervals overlap and {' and '.join(wide)} "
                       f"{'is' if len(wide) == 1 else 'are'} too wide to show a {tolerance:.1%} change")


def as_rates(kind: str, value: float, interval):
    """Return (value, interval) as rates, higher faster: a latency (us) as 1 / value, its
    interval [1 / hi, 1 / lo]; any other kind as it is."""
    if kind not in LOWER_IS_BETTER:
        return value, interval
    return 1 / value, (None if interval is None else (1 / interval[1], 1 / interval[0]))


def pass_ratio(r: dict) -> float:
    """Return how far a roof moved between its run's passes: highest / lowest of extra
    "passes" (the per-pass figures of its point or its level's window), 1 without passes."""
    span = (r.get("extra") or {}).get("passes")
    lo, hi = (number(span[0]), number(span[1])) if isinstance(span, (list, tuple)) and len(span) == 2 else (None, None)
    return hi / lo if lo and hi and 0 < lo <= hi and not math.isinf(hi) else 1.0


def moves_with(key: tuple) -> tuple:
    """Return the group of roofs a host's noise moves alike (rule 18): a bandwidth roof's memory
    level ("l2" for l2 and l2.read: whoever shares that level slows it), every compute or
    latency roof of its kind together (the core's time, which the hypervisor takes from all)."""
    kind, name = key
    return (kind, name.split(".", 1)[0]) if kind == "bandwidth" else (kind,)


def host_ratio(roofs: dict, group: tuple) -> tuple[float, str]:
    """Return (the highest pass_ratio among a side's roofs in group (moves_with), that roof's
    name; "" when none moved): the host's own movement within one run (rule 18). A VM held one
    quick run's L2 rereads at 61-70 GB/s over all three passes, where its l2.write moved 1.26x,
    and the next run read 90-111, its l2.write moving 1.57x."""
    best = max(((pass_ratio(r), key[1]) for key, r in roofs.items() if moves_with(key) == group),
               default=(1.0, ""), key=lambda m: m[0])
    return best if best[0] > 1 + EPS else (1.0, "")


def widened(value: float, interval, ratio: float):
    """Return interval (a rate's) with its top reaching at least value x ratio (rule 18: noise
    only slows a call, and a host seen moving a roof by ratio within one run may have slowed
    every pass of another by as much); interval itself when ratio is 1 or it has none."""
    if interval is None or not ratio > 1 + EPS:
        return interval
    top = max(interval[1], value * ratio)
    return interval if top == interval[1] else (interval[0], top)


def _interval(r: dict):
    """Return a roof dict's interval as (low, high), or None when it has none or a broken one."""
    iv = r.get("interval")
    if not isinstance(iv, (list, tuple)) or len(iv) != 2:
        return None
    lo, hi = number(iv[0]), number(iv[1])
    if lo is None or hi is None or not (0 < lo <= hi) or math.isinf(hi):
        return None
    return (lo, hi)


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


@dataclass
class Side:
    """One side of a check: a run (its records and roofs) or a fleet's group."""
    path: Path
    kind: str                       # "run" or "fleet"
    model: str
    method: int                     # the method version that derived its roofs (a fleet: its runs')
    roofs: dict                     # (kind, name) -> roof dict with "value", "interval", "unit"
    row: dict = field(default_factory=dict)   # fleet.run_row's record: clocks, power, driver, ...
    meta: dict = field(default_factory=dict)
    measured_method: int | None = None
    flags: dict = field(default_factory=dict)  # runner flags: {"busy": n, "jumped": n}
    group: str = ""                 # a fleet's group
    devices: int | None = None      # a fleet group's devices
    rows: pd.DataFrame | None = None  # a fleet group's fleet.csv rows


def load_run_side(path) -> Side:
    """Return a run folder (a run's own or a derived one) as a Side; raise CheckError with one
    sentence when it is missing, not a run, corrupt, or not a device run."""
    path = Path(path)
    if not path.exists():
        raise CheckError(f"{path} does not exist: give a run folder (results/<device>-<time>/).")
    try:
        meta, roofs = load_small(path)
        run = load_run(path)
    except ResultsError as e:
        raise CheckError(str(e)) from None
    kind = meta.get("run_kind", "device")
    if kind != "device":
        raise CheckError(f"{path} is a {kind} run: check compares device runs, whose roofs it measured.")
    measured = {(r.get("kind"), r.get("name")): r for r in roofs
                if r.get("source") == "measured" and r.get("kind") in ROOF_KINDS and (number(r.get("value")) or 0) > 0}
    flags = text_column(run.measurements, "flag")
    by = run.roofs_by or {}
    return Side(path, "run", str((meta.get("device") or {}).get("name", "?")),
                int(by.get("method_version") or meta.get("method_version") or 1), measured,
                row=fl.run_row(path, meta, roofs, {}), meta=meta, measured_method=int(meta.get("method_version") or 1),
                flags={"busy": int(flags.str.startswith(BUSY_PREFIX).sum()),
                       "jumped": int(flags.str.startswith(JUMP_PREFIX).sum())})


def load_fleet_side(path, run: Side, mixed_methods: bool, other_device: bool) -> Side:
    """Return the fleet folder's group for run's device model (its method version's group in a
    fleet of mixed versions) as a Side; raise CheckError when the fleet's files are missing or
    corrupt, it holds no device of the model (unless other_device and it holds one model), or
    its runs' method versions are not the run's (unless mixed_methods)."""
    path = Path(path)
    try:
        doc = json.loads((path / "fleet.json").read_text())
        table = pd.read_csv(path / "fleet.csv", usecols=lambda c: c in fl.HEAD_COLUMNS or c in fl.STATE_COLUMNS
                            or c.endswith((".clock_mhz", ".throttle")), dtype={c: str for c in TEXT})
        groups = doc["groups"]
        models, methods = table["model"].astype(str), pd.to_numeric(table["method_version"], errors="coerce")
        if not isinstance(groups, dict) or not all(isinstance(g, dict) for g in groups.values()):
            raise ValueError("groups")
    except FileNotFoundError as e:
        raise CheckError(f"{path} has no {Path(e.filename).name}: give the folder `run_bench.py fleet` wrote "
                         "(fleet.json and fleet.csv).") from None
    except (ValueError, KeyError, TypeError, pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError):
        raise CheckError(f"{path / 'fleet.json'} or fleet.csv is corrupt: write the fleet again "
                         "(`python run_bench.py fleet DIR --out " + str(path) + "`).") from None
    model = run.model
    if not (models == model).any():
        have = sorted(set(models))
        if not (other_device and len(have) == 1):
            raise CheckError(f"the fleet {path} holds no {model} (it holds {', '.join(have) or 'no device'}): give a "
                             "fleet of the run's model" + (", or --other-device with a fleet of one model"
                                                           if len(have) > 1 else ", or --other-device to check "
                                                           "against another model's") + ".")
        model = have[0]
    rows = table[models == model]
    versions = sorted(int(v) for v in methods[models == model].dropna().unique())
    if not versions:
        raise CheckError(f"{path / 'fleet.csv'} records no method version for its {model} runs: write the fleet again.")
    if run.method not in versions and not mixed_methods:
        raise CheckError(f"the run's roofs were derived by method {run.method} and the fleet's {model} runs by "
                         f"method {', '.join(map(str, versions))}, whose roofs are not comparable: check against a "
                         "fleet of the run's method, or give --mixed-methods to check anyway.")
    version = run.method if run.method in versions else max(versions)
    key = f"{model} (method {version})" if doc.get("mixed_methods") else model
    if key not in groups:
        raise CheckError(f"{path / 'fleet.json'} has no group {key!r} though fleet.csv holds its runs: write the "
                         "fleet again.")
    if doc.get("mixed_methods"):
        rows = rows[methods[models == model] == version]
    roofs = {}
    kinds = {name: kind for kind, name in run.roofs}
    for name, st in groups[key].get("roofs", {}).items():
        if name.endswith(".sustained") or not (number(st.get("median")) or 0) > 0:
            continue
        lo, hi = number(st.get("p5")), number(st.get("p95"))
        ratio = number((st.get("run_to_run") or {}).get("ratio"))
        if lo is not None and hi is not None and ratio and ratio > 1:  # one run may stray this far (rule 18)
            lo, hi = min(lo, float(st["median"]) / ratio), max(hi, float(st["median"]) * ratio)
        roofs[(kinds.get(name, "bandwidth" if str(st.get("unit")) == "GB/s" else "compute"), name)] = {
            "name": name, "value": float(st["median"]), "unit": st.get("unit", ""), "n": st.get("n"),
            "interval": [lo, hi] if lo is not None and hi is not None else None}
    return Side(path, "fleet", model, version, roofs, group=key, devices=groups[key].get("devices"), rows=rows)


def _same_number(a, b) -> bool:
    a, b = number(a), number(b)
    return a is None or b is None or abs(a - b) <= STATE_SHIFT * max(abs(a), abs(b))


def _loaded(meta: dict) -> tuple[float | None, int | None]:
    return others_load(meta.get("load") or {}, (meta.get("device") or {}).get("compute_units"))


def run_level_notes(run: Side, base: Side | None) -> list[str]:
    """Return what the run's records say of the machine while it ran, beside the baseline's
    when it is a run: other processes' load (run.json's load: the cores they kept busy while it
    ran, or for an older run its load averages less its own share; named past LOADED_SHARE of
    the cores) and the rows the runner flagged busy or whose time jumped."""
    out = []
    sides = [("the run", run)] + ([("the baseline", base)] if base is not None and base.kind == "run" else [])
    for who, side in sides:
        worst, cores = _loaded(side.meta)
        if worst is not None and cores and worst > LOADED_SHARE * cores:
            out.append(f"{who}'s machine was loaded by other processes ({worst:.1f} of its {cores} cores busy "
                       "with them)")
        if side.flags.get("busy") or side.flags.get("jumped"):
            out.append(f"{who} has {plural(side.flags['busy'], 'row')} the runner flagged busy and "
                       f"{fmt_num(side.flags['jumped'])} whose time jumped")
    return out


# (column of fleet.run_row, what it is, its unit or "" for a text value) compared run against run
STATE = [("max_clock_mhz", "maximum clock", "MHz"), ("memory_clock_mhz", "memory clock", "MHz"),
         ("app_sm_clock_mhz", "application SM clock", "MHz"), ("app_mem_clock_mhz", "application memory clock", "MHz"),
         ("power_limit_w", "power limit", "W"), ("ecc", "ECC", ""), ("mig", "MIG", ""),
         ("persistence", "persistence mode", ""), ("pcie_gen", "PCIe generation", ""),
         ("pcie_width", "PCIe width", ""), ("driver", "driver", "")]


def _show(v, unit: str) -> str:
    return f"{fmt_num(float(v))} {unit}" if unit else str(v)


def _differs(x, y, unit: str) -> bool:
    """Return whether two recorded values differ: numbers with a unit by more than
    STATE_SHIFT, other numbers (a PCIe generation, ECC as 0/1) at all, text as text."""
    if unit:
        return not _same_number(x, y)
    nx, ny = number(x), number(y)
    return nx != ny if nx is not None and ny is not None else str(x) != str(y)


def record_differences(a: dict, b: dict, roof: str, whose: str = "the baseline's") -> list[str]:
    """Return what two records (fleet.run_row's: clocks, power limit, state, driver; a fleet
    group's typical one) say differs: the clock in the roof's sustained window and the device's
    clocks and power limit more than STATE_SHIFT apart, ECC, MIG, persistence and PCIe state,
    the driver; and the run's throttling in that window."""
    out = []
    col = f"{roof}.clock_mhz"
    if not _same_number(a.get(col), b.get(col)):
        out.append(f"clock in its sustained window {fmt_num(a[col])} MHz vs {whose} {fmt_num(b[col])}")
    for key, what, unit in STATE:
        x, y = a.get(key), b.get(key)
        if not (missing(x) or missing(y)) and _differs(x, y, unit):
            out.append(f"{what} {_show(x, unit)} vs {whose} {_show(y, unit)}")
    thr = a.get(f"{roof}.throttle")
    if isinstance(thr, str) and thr:
        out.append(f"throttled in its sustained window ({thr})")
    return out


def machine_differences(run: Side, base: Side) -> list[str]:
    """Return what two runs' device records say differs in the machine itself: the device
    (its identity, bench.identity: a GPU's UUID, a CPU's host and machine key), a CPU's
    signature, SIMD flags (compute roofs follow the vector units), cache sizes and memory."""
    a, b = run.meta.get("device") or {}, base.meta.get("device") or {}
    out = []
    if run.row.get("id") != base.row.get("id"):
        out.append(f"another device ({run.row.get('id')} on {run.row.get('host')} vs the baseline's "
                   f"{base.row.get('id')} on {base.row.get('host')})")
    if a.get("cpu_signature") and b.get("cpu_signature") and a["cpu_signature"] != b["cpu_signature"]:
        out.append(f"CPU signature {a['cpu_signature']} vs the baseline's {b['cpu_signature']}")
    fa, fb = set(a.get("cpu_flags") or ()), set(b.get("cpu_flags") or ())
    if fa and fb and fa != fb:
        out.append("SIMD flags differ (" + "; ".join(f"{who} alone has {', '.join(sorted(f))}" for who, f in
                                                     (("the run", fa - fb), ("the baseline", fb - fa)) if f) + ")")
    caches = lambda d: {c.get("name"): (c.get("size_bytes"), c.get("instances") or 1)  # noqa: E731
                        for c in d.get("caches") or []}
    ca, cb = caches(a), caches(b)
    for name in [n for n in ca if n in cb and ca[n] != cb[n]]:
        show = lambda c: f"{fmt_bytes(c[0])}" + (f" x{c[1]}" if c[1] != 1 else "")  # noqa: E731
        out.append(f"{name} cache {show(ca[name])} vs the baseline's {show(cb[name])}")
    ma, mb = a.get("memory_bytes"), b.get("memory_bytes")
    if ma and mb and round(ma / 2**30) != round(mb / 2**30):
        out.append(f"memory {fmt_bytes(ma)} vs the baseline's {fmt_bytes(mb)}")
    return out


def software_differences(run: Side, base: Side) -> list[str]:
    """Return what two runs' run.json and roofs.json say differs in the code that made them:
    torch and Triton versions, the roofbench commit, the method versions that measured them
    and that derived their roofs."""
    out = []
    soft_a, soft_b = run.meta.get("software") or {}, base.meta.get("software") or {}
    for key, what in (("torch", "torch"), ("triton", "Triton")):
        x, y = soft_a.get(key), soft_b.get(key)
        if x and y and x != y:
            out.append(f"{what} {x} vs the baseline's {y}")
    x, y = run.meta.get("roofbench_commit"), base.meta.get("roofbench_commit")
    if x and y and x != y:
        out.append(f"roofbench commit {str(x)[:12]} vs the baseline's {str(y)[:12]}")
    if run.measured_method != base.measured_method:
        out.append(f"measured by method {run.measured_method} vs the baseline's {base.measured_method}")
    if run.method != base.method:
        out.append(f"roofs derived by method {run.method} vs the baseline's {base.method}")
    return out


# fleet.csv's columns a fleet group's typical record takes the median of (the others: their most common value)
NUMERIC = {key for key, _, unit in STATE if unit} | {"method_version"}


def _typical(rows: pd.DataFrame) -> dict:
    """Return a fleet group's typical record: the median of each number with a unit (clocks,
    power limits: NUMERIC and the sustained windows' clocks), the most common value of the rest."""
    out = {}
    for c in rows.columns:
        s = rows[c].dropna()
        if len(s):
            numeric = c in NUMERIC or c.endswith(".clock_mhz")
            out[c] = float(pd.to_numeric(s, errors="coerce").median()) if numeric else s.mode().iloc[0]
    return out


def fleet_differences(run: Side, base: Side, roof: str, slower: bool) -> list[str]:
    """Return what the run's records say differs from the fleet group's: for a slower roof,
    the fleet report's own causes (fleet.causes: a clock held down, a lower power limit, ECC,
    MIG, PCIe, driver, throttling); for a faster one, every clock, power limit or state that
    differs from the group's typical record (record_differences); both with the commit and
    method version most of the fleet ran."""
    typical = _typical(base.rows)
    out = (fl.causes(run.row, base.rows, roof) if slower
           else record_differences(run.row, typical, roof, "the fleet's typical"))
    commit = run.meta.get("roofbench_commit")
    if commit and typical.get("commit") and str(commit) != str(typical["commit"]):
        out.append(f"roofbench commit {str(commit)[:12]} where most of the fleet ran {str(typical['commit'])[:12]}")
    if typical.get("method_version") is not None and run.method != round(typical["method_version"]):
        out.append(f"roofs derived by method {run.method} where the fleet's median run's were "
                   f"{typical['method_version']:.0f}")
    return out


def check(run_dir, base_dir, tolerance_pct: float = DEFAULT_TOLERANCE_PCT, mixed_methods: bool = False,
          other_device: bool = False) -> dict:
    """Return the check of run_dir against base_dir (a run folder or a fleet folder): per roof
    both sides have its verdict (verdict(), rule 18), both sides' values and intervals, the
    change in % of the baseline's value and, for SLOWER and FASTER, what the records say
    differs; the roofs only one side has; what was compared and the rule's parameters.
    Raise CheckError (one sentence) for bad input: a missing folder, not a run, corrupt
    files, a fleet without the run's model, method versions or device models that differ
    (unless mixed_methods / other_device), a tolerance below 0 or of MAX_TOLERANCE_PCT or more."""
    t = number(tolerance_pct)
    if t is None or not (0 <= t < MAX_TOLERANCE_PCT):
        raise CheckError(f"--tolerance takes a percentage from 0 up to (not including) {MAX_TOLERANCE_PCT:g}, like "
                         f"{DEFAULT_TOLERANCE_PCT:g} (got {tolerance_pct!r}).")
    run = load_run_side(run_dir)
    base_dir = Path(base_dir)
    if not base_dir.exists():
        raise CheckError(f"the baseline {base_dir} does not exist: give a run folder or a fleet folder.")
    if (base_dir / "fleet.json").exists():
        base = load_fleet_side(base_dir, run, mixed_methods, other_device)
    elif (base_dir / "run.json").exists():
        if base_dir.resolve() == Path(run_dir).resolve():
            raise CheckError(f"{base_dir} is the run itself: give another run, or a fleet, as the baseline.")
        base = load_run_side(base_dir)
    else:
        raise CheckError(f"the baseline {base_dir} is neither a run folder (run.json) nor a fleet folder (fleet.json): "
                         "give one of them.")
    warnings = []
    if base.model != run.model:
        if not other_device:
            raise CheckError(f"the run is of {run.model} and the baseline of {base.model}: another model's roofs are "
                             "other ceilings; give --other-device to check one against the other anyway.")
        warnings.append(f"different device models (allowed by --other-device): the run's {run.model}, "
                        f"the baseline's {base.model}")
    if base.kind == "run" and base.method != run.method:
        if not mixed_methods:
            raise CheckError(f"the run's roofs were derived by method {run.method} and the baseline's by method "
                             f"{base.method}, whose roofs are not comparable: re-derive the older one "
                             "(`python run_bench.py report DIR`, then give its derived folder), or give "
                             "--mixed-methods to check anyway.")
    if base.method != run.method:
        warnings.append(f"different method versions (allowed by --mixed-methods): the run's roofs derived by "
                        f"method {run.method}, the baseline's by {base.method}; part of a change may be the method's")
    status = run.meta.get("status")
    if status != "complete":
        warnings.append(f"the run's status is {status!r}, not complete")
    tol = t / 100
    rows = []
    moved = {g: max([(*host_ratio(run.roofs, g), "the run's"), (*host_ratio(base.roofs, g), "the baseline's")],
                    key=lambda m: m[0]) for g in map(moves_with, run.roofs)}
    for key, r in run.roofs.items():
        b = base.roofs.get(key)
        if b is None:
            continue
        kind, name = key
        v, iv, bv, biv = float(r["value"]), _interval(r), float(b["value"]), _interval(b)
        stray, by, whose = moved[moves_with(key)]
        (rv, riv), (rb, rbiv) = as_rates(kind, v, iv), as_rates(kind, bv, biv)
        judged = widened(rv, riv, stray), widened(rb, rbiv, stray)
        said, why = verdict(rv, judged[0], rb, judged[1], tol, fleet=base.kind == "fleet")
        if judged != (riv, rbiv):
            what = "this roof" if by == name else f"{whose} {by} roof"
            why += (f" (each side's band reaching {stray:.3g}x faster than its value: the host moved {what} "
                    f"that much between one run's passes)")
        row = {"kind": kind, "roof": name, "what": roof_label(r), "unit": r.get("unit", ""), "verdict": said,
               "why": why, "change_pct": 100 * (v / bv - 1), "run": {"value": v, "interval": iv},
               "baseline": {"value": bv, "interval": biv, **({"devices": b["n"]} if "n" in b else {})},
               "pass_ratio": stray, "pass_ratio_roof": by}
        if said in ("SLOWER", "FASTER"):
            found = (machine_differences(run, base) + record_differences(run.row, base.row, name)
                     + software_differences(run, base)
                     if base.kind == "run" else fleet_differences(run, base, name, said == "SLOWER"))
            row["causes"] = found + run_level_notes(run, base)
        rows.append(row)
    counts = {v: sum(1 for r in rows if r["verdict"] == v) for v in VERDICTS}
    return {"run": str(run.path), "baseline": {"path": str(base.path), "kind": base.kind, "model": base.model,
                                               "method_version": base.method, "group": base.group or None,
                                               "devices": base.devices},
            "run_model": run.model, "run_method_version": run.method,
            "tolerance_pct": t, "rule": {"tolerance": tol, "rule": "ARCHITECTURE.md rule 18",
                                         "baseline_interval": "p5-p95 of the fleet's devices" if base.kind == "fleet"
                                         else "the baseline run's roof intervals",
                                         "baseline_width_judged": base.kind == "run", "eps": EPS},
            "verdicts": rows, "counts": counts,
            "only_in_run": [{"kind": k, "roof": n} for k, n in run.roofs if (k, n) not in base.roofs],
            "only_in_baseline": [{"kind": k, "roof": n} for k, n in base.roofs if (k, n) not in run.roofs],
            "without_interval": sum(1 for r in rows if r["run"]["interval"] is None),
            "warnings": warnings, "exit_code": 1 if counts["SLOWER"] else 0}


def refuse_out(out, result: dict) -> None:
    """Raise CheckError when out lies in the run folder or a run baseline's folder, or in the
    run a derived folder came from (measured_home): check writes beside nothing that was measured."""
    out = Path(out).resolve()
    folders = [("run", result["run"])] + ([("baseline", result["baseline"]["path"])]
                                          if result["baseline"]["kind"] == "run" else [])
    for who, d in folders + [(who, measured_home(d)) for who, d in folders]:
        d = Path(d).resolve()
        if out == d or d in out.parents:
            raise CheckError(f"--out {out} lies in the {who} folder {d}: check writes beside nothing that was "
                             "measured; give another folder (default results/check-<UTC timestamp>).")


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


def changes(result: dict, nothing: str) -> list[tuple[str, str]]:
    """Return, per set of SLOWER and FASTER roofs whose records say the same, ("SLOWER hbm -15.0%,
    l2 -15.1%", the causes joined, or nothing when none is recorded): a cause every roof shares
    is said once."""
    said: dict = {}
    for r in result["verdicts"]:
        if r.get("causes") is not None:
            said.setdefault((r["verdict"], tuple(r["causes"])), []).append(f"{r['roof']} {r['change_pct']:+.1f}%")
    return [(f"{verdict} {', '.join(roofs)}", "; ".join(causes) or nothing)
            for (verdict, causes), roofs in said.items()]


def terminal_text(result: dict) -> str:
    """Return the check for a terminal: what was compared, the table, the causes of each change."""
    b = result["baseline"]
    lines = [f"check {result['run']}", f"   vs {b['kind']} {b['path']}" + (f" (group {b['group']}, "
             f"{plural(b['devices'] or 0, 'device')})" if b["kind"] == "fleet" else ""),
             f"tolerance {result['tolerance_pct']:g}% (ARCHITECTURE.md rule 18)"]
    lines += [f"warning: {w}" for w in result["warnings"]]
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
           f"- baseline: {b['kind']} {b['path']} ({b['model']}, method {b['method_version']}"
           + (f"; group {b['group']}, {plural(b['devices'] or 0, 'device')}: its median and p5-p95 stand for the "
              "baseline's value and interval" if b["kind"] == "fleet" else "") + ")\n",
           f"- tolerance {result['tolerance_pct']:g}%. SLOWER: the run's interval wholly below the baseline's and its "
           "value more than the tolerance below; FASTER the same above; SAME: within the tolerance, with the "
           "intervals apart or narrow enough to have shown such a change; UNCLEAR otherwise, and for a roof "
           "without an interval (roofbench's ARCHITECTURE.md, rule 18).\n"]
    out += [f"- warning: {w}\n" for w in result["warnings"]]
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
