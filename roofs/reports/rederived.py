"""A committed run's roofs as its newest recorded derivation gave them, next to this code's.

    python -m roofs.reports.rederived RUN_DIR [RUN_DIR ...]     a markdown table per run

The recorded figures are the newest `derived/m<method>-<commit>/roofs.json` an earlier method wrote beside the run, else
the run's own roofs.json; this code's are derived from the run's files (roofs.analysis.confirm).
Nothing is written into the runs: results/README.md keeps the table this prints.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from bench.results import METHOD_VERSION, ResultsError, load_run
from bench.util import fmt_num
from roofs.analysis.confirm import derive_roofs


def recorded(run_dir: Path) -> tuple[Path, dict]:
    """Return (the newest roofs.json an earlier method recorded, {name: its measured roof as a dict})."""
    method = lambda p: int(p.parent.name[1:].split("-")[0])  # noqa: E731
    derived = sorted((p for p in (run_dir / "derived").glob("m*/roofs.json") if method(p) < METHOD_VERSION), key=method)
    path = derived[-1] if derived else run_dir / "roofs.json"
    roofs = json.loads(path.read_text())["roofs"]
    return path, {r["name"]: r for r in roofs if r.get("source") == "measured"}


def table(run_dir) -> str:
    """Return one run's table: each level and precision roof, recorded and now, with its interval."""
    run_dir = Path(run_dir)
    run = load_run(run_dir)
    path, old = recorded(run_dir)
    samples = {str(p.get("point_id")): p.get("samples_s") or [] for p in (run.points or [])}
    new = {r.name: r for r in derive_roofs(run.measurements, run.device, samples)[0] if r.source == "measured"}
    names = [n for n in dict.fromkeys([*old, *new]) if not n.startswith(("host.", "link."))]
    lines = [f"### {run_dir.name}", "", f"recorded: `{path.relative_to(run_dir)}`", "",
             "| roof | recorded | now | now's interval |", "|---|---|---|---|"]
    for n in names:
        o, r = old.get(n), new.get(n)
        iv = f"{fmt_num(r.interval[0])}-{fmt_num(r.interval[1])}" if r is not None and r.interval else ""
        lines.append(f"| {n} | {fmt_num(o['value']) if o else '-'} | {fmt_num(r.value) if r else '-'} | {iv} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    try:
        print("\n".join(table(d) for d in (argv if argv is not None else sys.argv[1:])))
    except ResultsError as e:
        print(f"roofbench: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
