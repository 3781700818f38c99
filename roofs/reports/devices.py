"""Every GPU of a node side by side: per roof, each device's value, the median and spread,
and the devices more than a set percentage below the median (a slow card in a fleet)."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from bench.results import load_run
from roofs.reports.compare import compare
from roofs.reports.report import md_table


def device_table(run_dirs, outlier_pct: float = 5.0) -> tuple[pd.DataFrame, list[str]]:
    """Return (one row per measured roof: each device's value, median, spread %, the devices
    flagged as more than outlier_pct below the median) and the flag sentences."""
    runs = [load_run(d) for d in run_dirs]
    names = [f"{r.device.get('torch_device', '?')} {r.dir.name.split('-')[0]}" for r in runs]
    keys = []
    vals = []
    for r in runs:
        v = {(x["kind"], x["name"]): x["value"] for x in r.roofs if x.get("source") == "measured"}
        vals.append(v)
        keys += [k for k in v if k not in keys]
    rows, flags = [], []
    for kind, name in keys:
        series = pd.Series([v.get((kind, name)) for v in vals], index=names, dtype=float)
        med = series.median()
        slow = series[series < (1 - outlier_pct / 100) * med]
        row = {"kind": kind, "roof": name, **series.to_dict(), "median": med,
               "spread %": 100 * (series.max() - series.min()) / med if med else None,
               f"> {outlier_pct:g}% below median": ", ".join(slow.index)}
        rows.append(row)
        for dev, value in slow.items():
            flags.append(f"{dev}: {name} {value:,.1f} is {100 * (1 - value / med):.1f}% below the median {med:,.1f}")
    return pd.DataFrame(rows), flags


def write_devices_report(node_dir: Path, run_dirs, outlier_pct: float = 5.0) -> Path:
    """Write devices.md, devices.json and compare.png into node_dir; return devices.md."""
    table, flags = device_table(run_dirs, outlier_pct)
    compare(run_dirs, node_dir)
    md = node_dir / "devices.md"
    md.write_text("# Every device of this node\n\n" + md_table(table) + "\n"
                  + ("".join(f"- {f}\n" for f in flags)
                     or f"- no device is more than {outlier_pct:g}% below the median\n")
                  + "\n![all devices](compare.png)\n")
    (node_dir / "devices.json").write_text(json.dumps({"outlier_pct": outlier_pct, "flags": flags,
                                                       "roofs": table.to_dict(orient="records")},
                                                      indent=1, default=str))
    return md
