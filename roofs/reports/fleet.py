"""A fleet: any number of run folders, made by any launch (one torchrun job across nodes, a
scheduler's job array, runs on different days), combined into one table and one verdict.

    table = gather([DIR, ...])               every run folder under the DIRs, read through
                                             run.json and roofs.json only (never the
                                             measurements or samples: a thousand devices
                                             combine in seconds); the runs left out and why
    write_fleet(table, out)                  fleet.csv, fleet.json, fleet.md and the charts

fleet.csv has one row per device and run: host, id, PCI bus id, model, every measured roof
(its burst figure under the roof's name, its interval's ends beside it under "<name>.low" and
"<name>.high", empty for a roof derived without one (ARCHITECTURE.md, rule 17), its sustained
figure under "<name>.sustained"), clocks, power limit, board state, driver, method version and
commit. fleet.md prints a roof of one run with its interval (band_text: "41.2, 39-42.1"), and
each group's table the median of its devices' interval ends beside the fleet's p5 and p95 (a
measurement's own width beside the devices' spread).

The statistics are kept apart per model (the device's name; and per method version when
mixed versions are allowed): per roof the median, the 5th and 95th percentiles, and the
median absolute deviation (MAD) over one value per device (its latest run). A run is an
outlier on a roof when its value is more than OUTLIER_MADS MADs AND more than OUTLIER_PCT %
below the median. Where the MAD is 0 (more than half the devices agree exactly) the first
test reads "below the median", so the 3% test alone decides: a fleet of identical values
never flags a device for a rounding difference, and a device 3% down is still named. Each
outlier is named with the recorded state that probably explains it (causes()). A device is
judged by its latest run, and only in a group of at least MIN_DEVICES devices: with fewer,
the group says why it cannot tell, and a device measured several times is one device with
its run-to-run spread (min, max, (max - min) / median per roof), never an outlier of itself.
Devices are told apart by their identity (bench.identity.device_identity: a GPU's UUID, a
CPU's host and machine key), so two VMs of one host name are two devices.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from bench.identity import device_identity
from bench.results import ResultsError, load_meta, load_small
from bench.util import Reason, Refusal, fmt_num, missing, number
from roofs.analysis.roofline import band_text
from roofs.charts.fleet import draw_distributions, draw_fleet_roofline
from roofs.reports.bands import as_interval
from roofs.reports.report import md_table

OUTLIER_MADS = 3.0
OUTLIER_PCT = 3.0
STATE_SHIFT = 0.03  # record_differences: a recorded clock or power limit this far from the other's is named
MIN_DEVICES = 3  # fewer devices of a model give no median to be an outlier of (one device is its own median)
RANKS_FILE = "ranks.json"  # written by a multi-node --all-devices run (bench/run/distributed.py)
STATE_COLUMNS = ["driver", "max_clock_mhz", "memory_clock_mhz", "power_limit_w", "default_power_limit_w",
                 "app_sm_clock_mhz", "app_mem_clock_mhz", "ecc", "mig", "persistence", "pcie_gen", "pcie_gen_max",
                 "pcie_width", "pcie_width_max"]
HEAD_COLUMNS = ["run", "host", "id", "pci_bus_id", "model", "method_version", "commit", "start_utc", "status"]


class FleetError(Refusal):
    """Runs that cannot be combined as asked (no run at all, or mixed method versions), or a fleet
    folder that cannot be read: one sentence, and its code (not_a_folder, no_complete_run,
    mixed_methods, no_fleet_file, corrupt, other_device, no_method, no_group)."""


@dataclass
class Fleet:
    rows: pd.DataFrame                      # one row per run kept
    roofs: dict[str, str]                   # roof name -> unit, in first-seen order
    left_out: list[tuple[str, str]] = field(default_factory=list)  # (folder, why)
    mixed: bool = False                     # method versions mixed, by the user's leave


def find_runs(dirs) -> tuple[list[Path], list[tuple[str, str]]]:
    """Return (every run folder under dirs: a folder holding run.json, not searched further;
    the ranks each ranks.json says never reported, as (rank, why))."""
    runs, missing = [], []
    for top in dirs:
        top = Path(top)
        if not top.is_dir():
            raise FleetError(f"{top} is not a folder: give run folders, or folders that hold them.", "not_a_folder")
        for here, subdirs, files in os.walk(top):
            if "run.json" in files:
                runs.append(Path(here))
                subdirs.clear()
                continue
            if RANKS_FILE in files:
                missing += _missing_ranks(Path(here) / RANKS_FILE)
            subdirs.sort()
    seen = {str(r.resolve()) for r in runs}  # a missing rank whose folder is here: the folder says why
    return runs, [(where, why) for where, why, d in missing if not d or str(Path(d).resolve()) not in seen]


def _missing_ranks(path: Path) -> list[tuple[str, str, str | None]]:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return [(str(path), "unreadable: the launch's record of its ranks is cut or corrupt", None)]
    return [(f"{path.parent} rank {r['rank']}" + (f" ({r['host']})" if r.get("host") else ""), r["why"], r.get("dir"))
            for r in doc.get("missing", [])]


def _state(dev: dict, meta: dict) -> dict:
    extra = dev.get("extra") or {}
    st = extra.get("state") or {}
    pick = lambda v: v.get("current") if isinstance(v, dict) else v  # noqa: E731  (current, pending) pairs
    return {"driver": (meta.get("software") or {}).get("driver"), "max_clock_mhz": dev.get("max_clock_mhz"),
            "memory_clock_mhz": dev.get("memory_clock_mhz"),
            "power_limit_w": extra.get("power_limit_w") or st.get("power_limit_w"),
            "default_power_limit_w": st.get("default_power_limit_w"), "app_sm_clock_mhz": st.get("app_sm_clock_mhz"),
            "app_mem_clock_mhz": st.get("app_mem_clock_mhz"), "ecc": pick(st.get("ecc_mode")),
            "mig": pick(st.get("mig_mode")), "persistence": st.get("persistence_mode"),
            **{k: st.get(k) for k in ("pcie_gen", "pcie_gen_max", "pcie_width", "pcie_width_max")}}


def run_row(run_dir: Path, meta: dict, roofs: list[dict], units: dict) -> dict:
    """Return fleet.csv's row of one run (units gets each measured roof's unit)."""
    dev = meta.get("device") or {}
    row = {"run": str(run_dir), **device_identity(dev, run_dir), "model": dev.get("name", "?"),
           "method_version": int(meta.get("method_version") or 1), "commit": meta.get("roofbench_commit"),
           "start_utc": meta.get("start_utc"), "status": meta.get("status"), **_state(dev, meta)}
    for r in roofs:
        if r.get("source") != "measured" or r.get("kind") not in ("bandwidth", "compute"):
            continue
        name, extra = r["name"], r.get("extra") or {}
        units.setdefault(name, r.get("unit", ""))
        row[name] = extra["burst"] if extra.get("burst") is not None else (None if "burst" in extra else r.get("value"))
        interval = as_interval(r.get("interval")) if row[name] is not None else None  # about the burst (rule 17)
        row[f"{name}.low"], row[f"{name}.high"] = interval or (None, None)
        sus = extra.get("sustained") or {}
        row[f"{name}.sustained"] = sus.get("value")
        row[f"{name}.clock_mhz"] = sus.get("clock_mhz")
        if "throttle_reasons" in sus:
            row[f"{name}.throttle"] = ", ".join(sus["throttle_reasons"] or [])
    return row


def gather(dirs, allow_mixed: bool = False) -> Fleet:
    """Return the Fleet of every run folder under dirs. Left out, each with why: unreadable
    folders, runs that did not complete, interconnect and model runs, and the ranks a launch
    recorded as missing. Raise FleetError with one sentence when nothing is left, or when the
    runs mix method versions and allow_mixed is false."""
    found, missing = find_runs(dirs)
    rows, units, left = [], {}, list(missing)
    for d in found:
        try:  # the status first: a run that did not complete has no roofs.json to read
            meta = load_meta(d)
            status, kind = str(meta.get("status")), meta.get("run_kind", "device")
            if kind != "device":
                left.append((str(d), Reason(f"a {kind} run: the fleet compares devices", "not_device")))
            elif status != "complete":
                why = ("still running, or its process died before it ended" if status == "running" else status)
                left.append((str(d), Reason(f"not complete ({why})", "not_complete")))
            else:
                rows.append(run_row(d, *load_small(d), units))
        except ResultsError as e:
            left.append((str(d), Reason(f"unreadable: {e}", "unreadable")))
    if not rows:
        raise FleetError(f"no complete device run under {', '.join(map(str, dirs))} ({len(found)} run folders found, "
                         f"{len(left)} left out): give folders that hold finished runs.", "no_complete_run")
    df = pd.DataFrame(rows)
    versions = sorted(df["method_version"].unique())
    if len(versions) > 1 and not allow_mixed:
        counts = ", ".join(f"version {v}: {(df['method_version'] == v).sum()} runs" for v in versions)
        raise FleetError(f"the runs were made by different method versions ({counts}), whose roofs are not comparable: "
                         "combine one version at a time, or give --mixed-methods to combine them, grouped and labelled "
                         "by version.", "mixed_methods")
    cols = HEAD_COLUMNS + STATE_COLUMNS
    value_cols = [c for c in df.columns if c not in cols]
    return Fleet(df[cols + value_cols], units, left, mixed=len(versions) > 1)


def _interval(row, col: str) -> list | None:
    """Return a fleet.csv row's interval of roof column col ("<col>.low", "<col>.high"), or None."""
    lo, hi = number(row.get(f"{col}.low")), number(row.get(f"{col}.high"))
    return [lo, hi] if lo is not None and hi is not None else None


def _with_interval(value: float, interval) -> str:
    """Return a roof's figure in fleet.md: with its interval (band_text) where it has one, else to 0.1."""
    return band_text(value, interval) if interval else f"{value:,.1f}"


def group_key(row, mixed: bool) -> str:
    return f"{row['model']} (method {row['method_version']})" if mixed else str(row["model"])


def _latest(rows: pd.DataFrame) -> pd.DataFrame:
    """One run per device: its latest (by start time)."""
    return rows.sort_values("start_utc", na_position="first").drop_duplicates("id", keep="last")


def stats(values) -> dict | None:
    """Return the median, p5, p95, MAD and count of values (NaN dropped), or None when empty."""
    v = np.asarray(pd.Series(values, dtype=float).dropna())
    if not len(v):
        return None
    med = float(np.median(v))
    return {"n": int(len(v)), "median": med, "p5": float(np.percentile(v, 5)), "p95": float(np.percentile(v, 95)),
            "mad": float(np.median(np.abs(v - med)))}


def is_outlier(value: float, st: dict) -> bool:
    """The robust rule: more than OUTLIER_MADS MADs and more than OUTLIER_PCT % below the median
    (a MAD of 0 makes the first test "below the median")."""
    med = st["median"]
    return (value < med - OUTLIER_MADS * st["mad"]) and (value < (1 - OUTLIER_PCT / 100) * med)


def _mode(s: pd.Series):
    s = s.dropna()
    return s.mode().iloc[0] if len(s) and len(s.mode()) else None


def causes(row, group: pd.DataFrame, roof: str) -> list[str]:
    """Return the recorded state that probably explains a slow row, compared with its group:
    coded_causes' sentences. Empty when nothing recorded differs."""
    return [text for _, text in coded_causes(row, group, roof)]


def coded_causes(row, group: pd.DataFrame, roof: str) -> list[tuple[str, str]]:
    """Return (code, sentence) for each recorded state that probably explains a slow row,
    compared with its group: a clock held down ("clock"), a lower power limit ("power_limit"),
    ECC or MIG state ("ecc", "mig"), a PCIe link below its maximum ("pcie"), a different driver
    ("version"), throttle reasons ("throttle"). Empty when nothing recorded differs."""
    out = []
    clock = number(row.get(f"{roof}.clock_mhz"))
    med_clock = number(group.get(f"{roof}.clock_mhz", pd.Series()).median())
    if clock and med_clock and clock < 0.97 * med_clock:
        out.append(("clock", f"clock held down ({clock:,.0f} MHz in its sustained window vs the fleet's median "
                             f"{med_clock:,.0f})"))
    for key, what in (("app_sm_clock_mhz", "application SM clock"), ("max_clock_mhz", "maximum clock")):
        v, med = number(row.get(key)), number(group[key].median())
        if v and med and v < 0.97 * med:
            out.append(("clock", f"{what} {v:,.0f} MHz vs the fleet's {med:,.0f}"))
    pl, med_pl = number(row.get("power_limit_w")), number(group["power_limit_w"].median())
    if pl and med_pl and pl < 0.97 * med_pl:
        out.append(("power_limit", f"a lower power limit ({pl:,.0f} W vs the fleet's {med_pl:,.0f} W)"))
    for key, what in (("ecc", "ECC"), ("mig", "MIG")):
        v, usual = row.get(key), _mode(group[key])
        if v is not None and not missing(v) and usual is not None and bool(v) != bool(usual):
            said = f"{what} {'on' if v else 'off'} where most of the fleet has it {'on' if usual else 'off'}"
            out.append((key, said))
    gen, gmax = number(row.get("pcie_gen")), number(row.get("pcie_gen_max"))
    width, wmax = number(row.get("pcie_width")), number(row.get("pcie_width_max"))
    if (gen and gmax and gen < gmax) or (width and wmax and width < wmax):
        out.append(("pcie", f"PCIe link at gen {gen or '?':.0f} x{width or 0:.0f}, "
                            f"below its maximum gen {gmax or 0:.0f} x{wmax or 0:.0f}"))
    drv, usual = row.get("driver"), _mode(group["driver"])
    if drv and usual and not missing(drv) and drv != usual:
        out.append(("version", f"driver {drv} where most of the fleet runs {usual}"))
    thr = row.get(f"{roof}.throttle")
    if isinstance(thr, str) and thr:
        out.append(("throttle", f"throttled ({thr})"))
    return out


# (column of run_row, what it is, its unit or "" for a text value, its code) record_differences compares
STATE = [("max_clock_mhz", "maximum clock", "MHz", "clock"), ("memory_clock_mhz", "memory clock", "MHz", "clock"),
         ("app_sm_clock_mhz", "application SM clock", "MHz", "clock"),
         ("app_mem_clock_mhz", "application memory clock", "MHz", "clock"),
         ("power_limit_w", "power limit", "W", "power_limit"), ("ecc", "ECC", "", "ecc"), ("mig", "MIG", "", "mig"),
         ("persistence", "persistence mode", "", "persistence"), ("pcie_gen", "PCIe generation", "", "pcie"),
         ("pcie_width", "PCIe width", "", "pcie"), ("driver", "driver", "", "version")]


def _show(v, unit: str) -> str:
    return f"{fmt_num(float(v))} {unit}" if unit else str(v)


def _differs(x, y, unit: str) -> bool:
    """Return whether two recorded values differ: numbers with a unit by more than
    STATE_SHIFT, other numbers (a PCIe generation, ECC as 0/1) at all, text as text."""
    if unit:
        return not _same_number(x, y)
    nx, ny = number(x), number(y)
    return nx != ny if nx is not None and ny is not None else str(x) != str(y)


def record_differences(a: dict, b: dict, roof: str, whose: str = "the baseline's") -> list[tuple[str, str]]:
    """Return (code, sentence) for what two records (run_row's: clocks, power limit, state,
    driver; a fleet group's typical one, typical_record) say differs: the clock in the roof's sustained
    window and the device's clocks ("clock") and power limit ("power_limit") more than
    STATE_SHIFT apart, ECC, MIG, persistence and PCIe state, the driver ("version"); and the
    run's throttling in that window ("throttle")."""
    out = []
    col = f"{roof}.clock_mhz"
    if not _same_number(a.get(col), b.get(col)):
        out.append(("clock", f"clock in its sustained window {fmt_num(a[col])} MHz vs {whose} {fmt_num(b[col])}"))
    for key, what, unit, code in STATE:
        x, y = a.get(key), b.get(key)
        if not (missing(x) or missing(y)) and _differs(x, y, unit):
            out.append((code, f"{what} {_show(x, unit)} vs {whose} {_show(y, unit)}"))
    thr = a.get(f"{roof}.throttle")
    if isinstance(thr, str) and thr:
        out.append(("throttle", f"throttled in its sustained window ({thr})"))
    return out


def _same_number(a, b) -> bool:
    a, b = number(a), number(b)
    return a is None or b is None or abs(a - b) <= STATE_SHIFT * max(abs(a), abs(b))


def run_spread(rows: pd.DataFrame, columns) -> dict:
    """Return per device measured more than once, per roof column: its runs' count, min,
    max and spread (max - min) / median in %."""
    out = {}
    for dev, runs in rows[rows.duplicated("id", keep=False)].groupby("id"):
        per = {}
        for col in columns:
            v = pd.to_numeric(runs[col], errors="coerce").dropna()
            if len(v) >= 2:
                med = float(v.median())
                per[col] = {"runs": int(len(v)), "min": float(v.min()), "max": float(v.max()),
                            "spread_pct": 100 * float(v.max() - v.min()) / med if med else None}
        out[dev] = per
    return out


def run_to_run(spread: dict, col: str) -> dict | None:
    """Return the run-to-run spread of col over the devices of spread (run_spread's answer):
    how many, and the median of their max / min ratios (a factor, 1.0 for runs that agree),
    or None when no device has two runs of it. A device slow in every run keeps a small
    ratio: the spread says how far one healthy run may stray, not where the devices sit."""
    ratios = [s["max"] / s["min"] for per in spread.values() if (s := per.get(col)) and s["min"] > 0]
    return {"devices": len(ratios), "ratio": float(np.median(ratios))} if ratios else None


def analyse(fleet: Fleet) -> dict:
    """Return per group (model) and per roof column (burst and sustained) the statistics over
    one run per device (its latest) with the run-to-run spread of its devices measured more
    than once (run_to_run), the outliers among those runs (each with its probable
    causes; none, and `no_outliers` saying why, in a group of under MIN_DEVICES devices), each
    device's run-to-run spread, the devices measured more than once, and the runs left out."""
    df = fleet.rows
    keys = df.apply(lambda r: group_key(r, fleet.mixed), axis=1)
    columns = [c for name in fleet.roofs for c in (name, f"{name}.sustained") if c in df.columns]
    groups, outliers = {}, []
    for g, rows in df.groupby(keys, sort=True):
        devices = _latest(rows)
        spread = run_spread(rows, columns)
        n = int(devices["id"].nunique())
        per = {}
        for col in columns:
            st = stats(devices[col])
            if st is None:
                continue
            per[col] = dict(st, unit=fleet.roofs[col.split(".sustained")[0]])
            ends = [stats(devices[f"{col}.{end}"]) if f"{col}.{end}" in devices else None for end in ("low", "high")]
            if all(ends):  # the median of the devices' interval ends (rule 17): one measurement's width
                per[col]["interval_median"] = [ends[0]["median"], ends[1]["median"]]
            strays = run_to_run(spread, col)
            if strays:  # how far one run of a device strays from another (check widens its band by it, rule 18)
                per[col]["run_to_run"] = strays
            if n < MIN_DEVICES:
                continue
            values = pd.to_numeric(devices[col], errors="coerce")
            slow = values < min(st["median"] - OUTLIER_MADS * st["mad"], (1 - OUTLIER_PCT / 100) * st["median"])
            for _, row in devices[slow.fillna(False)].iterrows():  # is_outlier, for the whole column at once
                v = float(row[col])
                coded = coded_causes(row, rows, col.split(".sustained")[0])
                outliers.append({"group": g, "roof": col, "host": row["host"], "id": row["id"],
                                 "run": row["run"], "value": v, "interval": _interval(row, col), "median": st["median"],
                                 "below_pct": 100 * (1 - v / st["median"]) if st["median"] else None,
                                 "causes": [text for _, text in coded], "cause_codes": [code for code, _ in coded]})
        groups[g] = {"devices": n, "runs": int(len(rows)), "roofs": per}
        if n < MIN_DEVICES:
            groups[g]["no_outliers"] = (f"{n} device{'' if n == 1 else 's'} of {g}: an outlier needs at least "
                                        f"{MIN_DEVICES} devices of the model to stand out from their median, so none "
                                        "is named (a device measured several times shows its run-to-run spread)")
    twice = df[df.duplicated("id", keep=False)]
    return {"groups": groups, "outliers": outliers,
            "measured_twice": {i: r["run"].tolist() for i, r in twice.groupby("id")},
            "spread": run_spread(df, columns),
            "left_out": [{"run": d, "why": w} for d, w in fleet.left_out], "mixed_methods": fleet.mixed,
            "rule": {"mads": OUTLIER_MADS, "pct": OUTLIER_PCT, "min_devices": MIN_DEVICES}}


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-")[:48] or "model"


def fleet_markdown(fleet: Fleet, result: dict, charts: dict) -> str:
    df = fleet.rows
    n = df["id"].nunique()
    lines = [f"# A fleet of {n} device{'' if n == 1 else 's'} ({len(df)} run{'' if len(df) == 1 else 's'})\n\n"]
    if fleet.mixed:
        lines.append("**Mixed method versions** (allowed by --mixed-methods): each version is its own group below; "
                     "roofs of different versions are not comparable.\n\n")
    lines.append(f"Outlier rule: more than {OUTLIER_MADS:g} median absolute deviations (MAD) and more than "
                 f"{OUTLIER_PCT:g}% below the group's median; a MAD of 0 leaves the {OUTLIER_PCT:g}% test alone. "
                 f"Statistics over one run per device (its latest); outliers only among at least {MIN_DEVICES} devices "
                 "of a model.\n\n")
    by_group = {}
    for o in result["outliers"]:
        by_group.setdefault(o["group"], []).append(o)
    for g, info in result["groups"].items():
        lines.append(f"## {g}: {info['devices']} devices, {info['runs']} runs\n\n")
        table = pd.DataFrame([{"roof": c, "unit": s["unit"], "devices": s["n"], "median": s["median"],
                               "p5": s["p5"], "p95": s["p95"], "MAD": s["mad"],
                               "devices' interval (median low-high)": "-".join(map(fmt_num, s["interval_median"]))
                               if s.get("interval_median") else "",
                               "outliers": sum(1 for o in by_group.get(g, []) if o["roof"] == c)}
                              for c, s in info["roofs"].items()])
        lines.append(md_table(table))
        slow = by_group.get(g, [])
        lines.append(f"\n### Outliers ({len({o['id'] for o in slow})} devices)\n\n")
        if info.get("no_outliers"):
            lines.append(f"- none named: {info['no_outliers']}\n")
        elif not slow:
            lines.append("- none\n")
        per_dev = {}
        for o in slow:
            per_dev.setdefault((o["host"], o["id"], o["run"]), []).append(o)
        for (host, dev, run), items in per_dev.items():
            roofs = "; ".join(f"{o['roof']} {_with_interval(o['value'], o.get('interval'))} "
                              f"({o['below_pct']:.1f}% below {o['median']:,.1f})" for o in items)
            why = list(dict.fromkeys(c for o in items for c in o["causes"]))  # in causes() order, once each
            lines.append(f"- **{dev}** on {host}: {roofs}. Probable cause: "
                         + ("; ".join(why) if why else "nothing recorded differs from the fleet (check cooling, "
                            "the board, or re-run it)") + f". Run: {run}\n")
        for name in charts.get(g, []):
            lines.append(f"\n![{g}]({name})\n")
    lines.append("\n## Devices measured more than once\n\n")
    if not result["measured_twice"]:
        lines.append("- none\n")
    cols = [c for c in fleet.roofs if c in df.columns]
    for dev in result["measured_twice"]:
        sub = df[df["id"] == dev]
        sub = sub[["run", "start_utc"]].assign(**{c: [None if missing(v) else band_text(v, _interval(r, c))
                                                      for v, (_, r) in zip(sub[c], sub.iterrows())] for c in cols})
        spread = result.get("spread", {}).get(dev, {})
        said = "; ".join(f"{c} {s['min']:,.1f}-{s['max']:,.1f} ({s['spread_pct']:.1f}%)" for c, s in spread.items()
                         if c in cols and s["spread_pct"] is not None)
        lines.append(f"\n**{dev}**" + (f": run-to-run spread {said}" if said else "") + "\n\n" + md_table(sub))
    lines.append("\n## Left out\n\n")
    lines += [f"- {d}: {w}\n" for d, w in fleet.left_out] or ["- none\n"]
    return "".join(lines)


def write_fleet(fleet: Fleet, out: Path) -> tuple[Path, dict]:
    """Write fleet.csv, fleet.json, fleet.md and, per group, the distribution and roofline
    charts into out; return (fleet.md, the analysis)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    result = analyse(fleet)
    fleet.rows.to_csv(out / "fleet.csv", index=False)
    keys = fleet.rows.apply(lambda r: group_key(r, fleet.mixed), axis=1)
    charts = {}
    for g, info in result["groups"].items():
        rows = fleet.rows[keys == g]
        names = []
        slow = [o for o in result["outliers"] if o["group"] == g]
        dist = f"fleet-{_slug(g)}-roofs.png"
        draw_distributions(rows, info["roofs"], slow, g, out / dist)
        names.append(dist)
        line = f"fleet-{_slug(g)}-roofline.png"
        if draw_fleet_roofline(info["roofs"], g, out / line):
            names.append(line)
        charts[g] = names
    (out / "fleet.json").write_text(json.dumps(dict(result, charts=charts), indent=1, default=str))
    md = out / "fleet.md"
    md.write_text(fleet_markdown(fleet, result, charts))
    return md, result


# fleet.csv's columns read as text (a driver "560.35" is no number, nor a commit "1234567")
TEXT_COLUMNS = ("run", "host", "id", "pci_bus_id", "model", "commit", "start_utc", "status", "driver")
# the columns a group's typical record takes the median of (the others: their most common value)
MEDIAN_COLUMNS = {key for key, _, unit, _ in STATE if unit} | {"method_version"}


def typical_record(rows: pd.DataFrame) -> dict:
    """Return a fleet group's typical record: the median of each number with a unit (clocks,
    power limits: MEDIAN_COLUMNS and the sustained windows' clocks), the most common value of the rest."""
    out = {}
    for c in rows.columns:
        s = rows[c].dropna()
        if len(s):
            numeric = c in MEDIAN_COLUMNS or c.endswith(".clock_mhz")
            out[c] = float(pd.to_numeric(s, errors="coerce").median()) if numeric else s.mode().iloc[0]
    return out


def baseline_group(path, model: str, method: int, kinds: dict, mixed_methods: bool, other_device: bool) -> dict:
    """Return the group of a fleet folder that stands for a check's baseline (roofs/reports/
    check.py): the group of the device model (its method version's in a fleet of mixed
    versions), as {"model", "method", "group", "devices", "rows" (its fleet.csv rows),
    "typical" (typical_record), "roofs": {(kind, name): {"name", "value": the median, "unit",
    "n", "interval": p5 to p95 widened by the devices' run-to-run ratio (rule 18), "extra":
    {"sustained": {"clock_mhz": the devices' median}}}}}; kinds: a roof's name -> kind (else
    by its unit). Raise FleetError (one sentence) when the fleet's files are missing or
    corrupt, it holds no device of the model (unless other_device and it holds one model), or
    its runs' method versions are not method (unless mixed_methods)."""
    path = Path(path)
    try:
        doc = json.loads((path / "fleet.json").read_text())
        table = pd.read_csv(path / "fleet.csv", usecols=lambda c: c in HEAD_COLUMNS or c in STATE_COLUMNS
                            or c.endswith((".clock_mhz", ".throttle")), dtype={c: str for c in TEXT_COLUMNS})
        groups = doc["groups"]
        models, methods = table["model"].astype(str), pd.to_numeric(table["method_version"], errors="coerce")
        if not isinstance(groups, dict) or not all(isinstance(g, dict) for g in groups.values()):
            raise ValueError("groups")
    except FileNotFoundError as e:
        raise FleetError(f"{path} has no {Path(e.filename).name}: give the folder `run_bench.py fleet` wrote "
                         "(fleet.json and fleet.csv).", "no_fleet_file") from None
    except (ValueError, KeyError, TypeError, pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError):
        raise FleetError(f"{path / 'fleet.json'} or fleet.csv is corrupt: write the fleet again "
                         "(`python run_bench.py fleet DIR --out " + str(path) + "`).", "corrupt") from None
    if not (models == model).any():
        have = sorted(set(models))
        if not (other_device and len(have) == 1):
            raise FleetError(f"the fleet {path} holds no {model} (it holds {', '.join(have) or 'no device'}): give a "
                             "fleet of the run's model" + (", or --other-device with a fleet of one model"
                                                           if len(have) > 1 else ", or --other-device to check "
                                                           "against another model's") + ".", "other_device")
        model = have[0]
    rows = table[models == model]
    versions = sorted(int(v) for v in methods[models == model].dropna().unique())
    if not versions:
        raise FleetError(f"{path / 'fleet.csv'} records no method version for its {model} runs: write the fleet again.",
                         "no_method")
    if method not in versions and not mixed_methods:
        raise FleetError(f"the run's roofs were derived by method {method} and the fleet's {model} runs by "
                         f"method {', '.join(map(str, versions))}, whose roofs are not comparable: check against a "
                         "fleet of the run's method, or give --mixed-methods to check anyway.",
                         "mixed_methods")
    version = method if method in versions else max(versions)
    key = f"{model} (method {version})" if doc.get("mixed_methods") else model
    if key not in groups:
        raise FleetError(f"{path / 'fleet.json'} has no group {key!r} though fleet.csv holds its runs: write the "
                         "fleet again.", "no_group")
    if doc.get("mixed_methods"):
        rows = rows[methods[models == model] == version]
    roofs = {}
    for name, st in groups[key].get("roofs", {}).items():
        if name.endswith(".sustained") or not (number(st.get("median")) or 0) > 0:
            continue
        lo, hi = number(st.get("p5")), number(st.get("p95"))
        ratio = number((st.get("run_to_run") or {}).get("ratio"))
        if lo is not None and hi is not None and ratio and ratio > 1:  # one run may stray this far (rule 18)
            lo, hi = min(lo, float(st["median"]) / ratio), max(hi, float(st["median"]) * ratio)
        clock = pd.to_numeric(rows.get(f"{name}.clock_mhz", pd.Series(dtype=float)), errors="coerce").median()
        roofs[(kinds.get(name, "bandwidth" if str(st.get("unit")) == "GB/s" else "compute"), name)] = {
            "name": name, "value": float(st["median"]), "unit": st.get("unit", ""), "n": st.get("n"),
            "interval": [lo, hi] if lo is not None and hi is not None else None,
            "extra": {"sustained": {"clock_mhz": number(clock)}}}
    return {"model": model, "method": version, "group": key, "devices": groups[key].get("devices"), "rows": rows,
            "typical": typical_record(rows), "roofs": roofs}
