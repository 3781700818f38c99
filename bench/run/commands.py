"""The subcommands that read run folders and write beside them: report, compare, fleet and
check, each its parser and its work, with run_bench.py dispatching to them (`X_main(argv)`,
the command's exit code). A bad option or folder ends with one sentence (exit code 2).
Their default output folders lie under the checkout's results/ (RESULTS)."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from bench.paths import CHECKOUT, existing
from bench.results import METHOD_VERSION, ResultsError, load_run, utc_stamp
from bench.run import options as opt
from bench.run.options import Parser, refuse
from bench.util import git_commit
from roofs.reports import check as chk
from roofs.reports.compare import compare
from roofs.reports.finish import rederive
from roofs.reports.fleet import FleetError, gather, write_fleet
from roofs.reports.summary import summary

RESULTS = CHECKOUT / "results"


def report_main(argv) -> int:
    """python run_bench.py report RUN_DIR [--out DIR | --in-place]: re-derive roofs, bounds,
    pictures and report from the run's files, into a derived folder beside them."""
    p = Parser(prog="run_bench.py report", description="rebuild a run's roofs, pictures and report from its files, "
               "into RUN_DIR/derived/m<method>-<commit>/ (the run's own files are never rewritten)")
    p.add_argument("run_dir", type=existing)  # relative: where it exists, here or in the checkout
    p.add_argument("--out", type=Path, help="folder to write the re-derived files into (default "
                   "RUN_DIR/derived/m<method version>-<commit>/)")
    p.add_argument("--in-place", action="store_true", help="re-derive over the run's own roofs.json, roof columns, "
                   "pictures and report (your own run only; its measurements and samples stay as they are)")
    p.add_argument("--no-charts", action="store_true", help="re-derive the roofs and report but draw no picture")
    args = p.parse_args(argv)
    if args.out and args.in_place:
        return refuse("--out and --in-place name two different places: give one of them.", "out_and_in_place")
    try:
        run = load_run(args.run_dir)  # refuses a folder whose files are cut or disagree, before anything is written
        if run.lost_note:
            print(f"roofbench: note: {run.lost_note}.", file=sys.stderr)
        if args.out:
            opt.writable_folder(args.out, "--out")
    except (ResultsError, opt.OptionError) as e:
        return refuse(e)
    out, problems = rederive(args.run_dir, args.out, args.in_place, charts=not args.no_charts)
    for problem in problems:
        print(f"roofbench: {problem}", file=sys.stderr)
    if problems:
        return 2
    print(summary(load_run(out)))
    print(f"\nreport: {out / 'report.md'} and report.html (derived by method {METHOD_VERSION}, commit {git_commit()})")
    return 0


def compare_main(argv) -> int:
    """python run_bench.py compare RUN_A RUN_B [...] [--out DIR]."""
    p = Parser(prog="run_bench.py compare", description="overlay the roofs and points of several runs")
    p.add_argument("runs", nargs="+", type=existing)
    p.add_argument("--out", type=Path,
                   help="folder for compare.png and compare.md (default results/compare-<UTC timestamp>)")
    args = p.parse_args(argv)
    if len(args.runs) < 2:
        return refuse("compare needs at least two run folders.", "too_few_runs")
    seen = [r.resolve() for r in args.runs]
    twice = next((r for i, r in enumerate(args.runs) if seen[i] in seen[:i]), None)
    if twice is not None:
        return refuse(f"run folder {twice} is given twice: compare needs two different runs.", "run_twice")
    try:
        if args.out:
            opt.writable_folder(args.out, "--out")
        text, out = compare(args.runs, args.out or RESULTS / f"compare-{utc_stamp()}")
    except (ResultsError, opt.OptionError) as e:
        return refuse(e)
    print(text)
    print(f"\ncompare: {out / 'compare.md'} and compare.png")
    return 0


def fleet_main(argv) -> int:
    """python run_bench.py fleet DIR [DIR ...] [--out DIR] [--mixed-methods]."""
    p = Parser(prog="run_bench.py fleet", description="combine run folders (searched under each DIR: job arrays, "
               "torchrun nodes, runs of any day) into fleet.csv, fleet.json, fleet.md and charts, reading only "
               "each run's run.json and roofs.json")
    p.add_argument("dirs", nargs="+", type=existing)
    p.add_argument("--out", type=Path, help="the fleet folder (default results/fleet-<UTC timestamp>)")
    p.add_argument("--mixed-methods", action="store_true",
                   help="combine runs of different method versions, each version its own labelled group")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    try:
        fleet = gather(args.dirs, args.mixed_methods)
    except FleetError as e:
        return refuse(e)
    out = args.out or RESULTS / f"fleet-{utc_stamp()}"
    try:
        md, result = write_fleet(fleet, out)
    except OSError as e:
        return refuse(f"cannot write the fleet folder {out} ({e.strerror or e}): give --out a folder you can write.",
                      "unwritable")
    slow = {(o["host"], o["id"]) for o in result["outliers"]}
    n = fleet.rows["id"].nunique()
    print(f"roofbench: {n} device{'' if n == 1 else 's'} in {len(fleet.rows)} runs, {len(result['groups'])} "
          f"model(s), {len(slow)} outlier device(s), {len(fleet.left_out)} left out; {time.perf_counter() - t0:.1f} s")
    for info in result["groups"].values():
        if info.get("no_outliers"):
            print(f"  {info['no_outliers']}")
    for dev, spread in result["spread"].items():
        said = ", ".join(f"{c} {s['spread_pct']:.1f}%" for c, s in spread.items()
                         if not c.endswith(".sustained") and s["spread_pct"] is not None)
        if said:
            print(f"  {dev}: run-to-run spread over {max(s['runs'] for s in spread.values())} runs: {said}")
    for host, dev in sorted(slow):
        print(f"  outlier: {dev} on {host}")
    for d, why in fleet.left_out:
        print(f"  left out: {d}: {why}")
    print(f"fleet: {md} and fleet.csv, fleet.json")
    return 0


def build_check_parser() -> argparse.ArgumentParser:
    p = Parser(prog="run_bench.py check", description="per roof SAME, SLOWER, FASTER or UNCLEAR of RUN against a "
               "baseline run, a fleet, or several earlier runs of its node, from both sides' intervals "
               "(ARCHITECTURE.md rule 18); exit 0 when no roof is SLOWER, 1 when one is, 2 for bad input")
    p.add_argument("run", type=existing, help="the run folder checked (a run's own folder or its derived folder)")
    p.add_argument("--baseline", type=existing, required=True, nargs="+", metavar="BASE",
                   help="a run folder, a fleet folder (`fleet`'s output: its median and p5-p95 per roof), or "
                   "several run folders of one node (per roof the median run's figure and the span of their "
                   "intervals: a shared machine's own history)")
    p.add_argument("--tolerance", type=float, default=chk.DEFAULT_TOLERANCE_PCT, metavar="PCT",
                   help=f"the change in %% that matters (default {chk.DEFAULT_TOLERANCE_PCT:g})")
    p.add_argument("--out", type=Path,
                   help="folder for check.md and check.json (default results/check-<UTC timestamp>)")
    p.add_argument("--mixed-methods", action="store_true", help="check against roofs derived by another method version")
    p.add_argument("--other-device", action="store_true", help="check against another device model's roofs")
    return p


def check_main(argv) -> int:
    """python run_bench.py check RUN --baseline BASE [BASE ...] [--tolerance PCT] [--out DIR] [--mixed-methods]
    [--other-device]: exit 0 when no roof is SLOWER, 1 when one is, 2 for bad input."""
    args = build_check_parser().parse_args(argv)
    out = args.out or RESULTS / f"check-{utc_stamp()}"
    try:
        result = chk.check(args.run, args.baseline, args.tolerance, args.mixed_methods, args.other_device)
        chk.refuse_out(out, result)
        opt.writable_folder(out, "--out")
        md = chk.write_check(result, out)
    except (chk.CheckError, opt.OptionError) as e:
        return refuse(e)
    except OSError as e:
        return refuse(f"cannot write the check folder {out} ({e.strerror or e}): give --out a folder you can write.",
                      "unwritable")
    print(chk.terminal_text(result))
    print(f"\ncheck: {md} and check.json")
    return result["exit_code"]
