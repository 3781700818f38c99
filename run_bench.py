#!/usr/bin/env python3
"""roofbench: measure this device's roofs and place kernels under them.

    python run_bench.py                 measure the first CUDA GPU, else the CPU (all ops)
    python run_bench.py --quick         a short pass (a minute or two on a 2-core CPU VM)
    python run_bench.py --list          ops, impls and their axes on this device
    python run_bench.py report RUN_DIR  rebuild a run's roofs, pictures and report from its files
    python run_bench.py compare RUN_A RUN_B [...]   overlay several runs' roofs and points
    python run_bench.py fleet DIR [...]   combine many runs (a cluster's devices) into a fleet's report
    python run_bench.py check RUN --baseline BASE   per roof SAME, SLOWER, FASTER or UNCLEAR against a run or fleet
    python run_bench.py model NAME --batch 1,8 --prompt 2048 --context 8192   a model on the roofline

Writes results/<device-slug>-<UTC timestamp>/ (REFERENCE.md, "What a run writes", lists every file). This file
only parses, dispatches and prints: running a plan is bench/run/session.py, checking options
bench/run/options.py, summaries roofs/reports/summary.py, models bench/models.py (see ARCHITECTURE.md).
"""
from __future__ import annotations

import argparse
import gc
import signal
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent
if str(ROOT) not in sys.path:  # run from anywhere; kernels/ bench/ roofs/ are never installed
    sys.path.insert(0, str(ROOT))

# the project's own imports come after that sys.path set-up, hence the noqa: E402 on each.
# They make about a million objects that live as long as the process: the cyclic collector is
# off while they load (it would walk them again and again, a tenth of a start's CPU)
gc.disable()
from bench import models as mdl  # noqa: E402
from bench.aot import learned, predict  # noqa: E402
from bench.api import APIError, ForeignRoofsWarning, RoofWarning, profile_script, quick_roofs, roofs_from  # noqa: E402
from bench.hw import detect  # noqa: E402
from bench.hw import device as devmod  # noqa: E402
from bench.measure.memory import run_budget  # noqa: E402
from bench.measure.registry import RegistryError, load_all  # noqa: E402
from bench.measure.runner import make_plan  # noqa: E402
from bench.measure.skip import static_reason  # noqa: E402
from bench.measure.timing import MODES, timer_config  # noqa: E402
from bench.paths import existing  # noqa: E402
from bench.results import METHOD_VERSION, ResultsError, load_run, utc_stamp  # noqa: E402
from bench.run import distributed as distrib  # noqa: E402
from bench.run import options as opt  # noqa: E402
from bench.run import session  # noqa: E402
from bench.run.counters_phase import DEFAULT_POINTS  # noqa: E402
from bench.run.distributed import worker_argv  # noqa: E402
from bench.run.profile_counters import DEFAULT_OPS  # noqa: E402
from bench.util import did_you_mean, exit_now, fmt_bytes, git_commit, precision_name  # noqa: E402
from roofs.reports import check as chk  # noqa: E402
from roofs.reports.compare import compare  # noqa: E402
from roofs.reports.finish import rederive  # noqa: E402
from roofs.reports.fleet import FleetError, gather, write_fleet  # noqa: E402
from roofs.reports.summary import summary  # noqa: E402

gc.enable()

SUBCOMMANDS = """subcommands (each with its own --help):
  report RUN_DIR                     rebuild a run's roofs, pictures and report from its files
  compare RUN_A RUN_B [...] [--out DIR]   overlay several runs' roofs and points, with a ratio table
  fleet DIR [DIR ...] [--out DIR] [--mixed-methods]   combine any number of run folders into a fleet's report
  check RUN --baseline BASE [BASE ...] [--tolerance PCT] [--out DIR] [--mixed-methods] [--other-device]
                                     per roof SAME, SLOWER, FASTER or UNCLEAR against a run, a fleet, or several
                                     earlier runs of its node (exit 1: SLOWER)
  model NAME [--batch 1,8] [--prompt N] [--context N] [--roofs RUN_DIR]   a model on the roofline
  profile SCRIPT.py [ARGS ...] [--roofs RUN_DIR] [--steps N] [--out DIR] [--counters [N]]
                                                  your own program's ops on the roofline"""


COMMANDS = ("model", "report", "compare", "fleet", "profile", "check")


class Parser(argparse.ArgumentParser):
    """argparse, but a bad option ends with one sentence and exit code 2, not a usage block."""

    def error(self, message):
        if message.startswith("unrecognized arguments: "):  # name the option (or subcommand) meant, when one is close
            options = [o for a in self._actions for o in a.option_strings]
            words = message.split(": ", 1)[1].split()
            said = [w + (did_you_mean(w.split("=")[0], options) if w.startswith("-") else
                         did_you_mean(w, COMMANDS) if i == 0 and self.prog == "run_bench.py" else "")
                    for i, w in enumerate(words)]
            if said != words:
                message = f"unrecognized arguments: {' '.join(said)}; see --help"
        print(f"roofbench: {message.rstrip('.')}.", file=sys.stderr)
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="run_bench.py", description=__doc__.split("\n\n")[0],
               formatter_class=argparse.RawDescriptionHelpFormatter, epilog=SUBCOMMANDS)
    p.add_argument("--device", help="cpu, cuda or cuda:N (default: the first CUDA GPU, else the CPU)")
    p.add_argument("--only", type=opt.names, help="comma-separated families, ops, impl ids or impl names "
                   "(e.g. stream, stream.triad, stream.copy/triton, torch)")
    p.add_argument("--dtype", type=opt.names, help="comma-separated dtypes to keep (e.g. float32,bfloat16)")
    p.add_argument("--mode", type=opt.names,
                   help=f"timing modes, comma-separated: {', '.join(MODES)} (default: each op's own)")
    p.add_argument("--quick", action="store_true", help="fewer sizes and dtypes, shorter budgets")
    p.add_argument("--budget", type=opt.seconds, help="seconds per point, warm-up included (default 0.5, quick 0.1)")
    p.add_argument("--min-time", type=opt.seconds_or_zero,
                   help="seconds a point's samples must span before it may stop as converged "
                        "(default 0.1, quick 0.05; 0: off)")
    p.add_argument("--sustain", type=opt.seconds_or_zero,
                   help="seconds of each roof candidate's sustained window after the sweeps "
                        "(default 1, quick 0.25; 0: off)")
    p.add_argument("--max-ws", type=opt.size, help="skip working sets larger than this (e.g. 64MiB)")
    p.add_argument("--max-memory", type=opt.memory_limit,
                   help="memory the run may hold: a size (8GiB) or a share of what is available at start "
                        "(50%%; the default)")
    p.add_argument("--counters", nargs="?", type=opt.whole_number, const=DEFAULT_POINTS, default=0, metavar="N",
                   help=f"after the timing, replay N chosen points (default {DEFAULT_POINTS}) once each under a "
                   "hardware-counter profiler (NVIDIA's ncu) and write counters.csv: DRAM, L2 and L1 bytes and "
                   "tensor-pipe instructions beside the formulas'")
    p.add_argument("--out", type=Path, default=ROOT / "results",
                   help="folder in which the run folder <device-slug>-<UTC timestamp>/ is created (default results/)")
    p.add_argument("--no-charts", action="store_true",
                   help="write the roofs, measurements and report but draw no picture (seconds of CPU each run on a "
                        "small machine; `report RUN` draws them later)")
    p.add_argument("--list", action="store_true", help="list ops, impls and their axes on this device, then exit")
    p.add_argument("--dry-run", action="store_true",
                   help="print the planned rows, the predicted seconds per family and the predicted wall time, "
                        "then exit")
    p.add_argument("--device-spec",
                   help="with --dry-run: plan for a datasheet part instead of this machine (e.g. h200)")
    p.add_argument("--all-devices", action="store_true",
                   help="measure every local GPU at once, one process each (torch.distributed), and compare them")
    p.add_argument("--comm", action="store_true",
                   help="measure the interconnect: collectives and send/recv between every pair of ranks")
    p.add_argument("--procs", type=int, help="processes to launch (default: one per GPU; on a CPU-only machine, "
                   "gloo processes on loopback, for --comm or testing)")
    p.add_argument("--outlier-pct", type=opt.percent, default=5.0,
                   help="flag a device this far below the median (default 5)")
    p.add_argument("--deadline", type=opt.seconds, help="with --all-devices: seconds a rank may take before it is "
                   "stopped and rank 0 reports without it (default: its plan's predicted duration x 3 + 10 min)")
    p.add_argument("--run-dir", type=Path, help="with --all-devices/--comm: the node's run folder (default "
                   "results/node-<slug>-<UTC timestamp>); the same on every node of a torchrun launch")
    return p


def axis_values(axis, values) -> str:
    """Return an axis's values as --list prints them, from the sweep itself: sizes in binary
    units, long sweeps as "first .. last (N values)"."""
    show = [fmt_bytes(v) if axis.name.endswith("bytes") and isinstance(v, (int, float)) else str(v) for v in values]
    return ", ".join(show) if len(show) <= 8 else f"{show[0]} .. {show[-1]} ({len(show)} values)"


def impl_skips(op, impl, device, quick: bool, points) -> dict:
    """Return reason -> how many of points the skip rules (bench.measure.skip.static_reason)
    leave impl out of on device, and None -> how many it runs."""
    out = {}
    for point in points:
        why = static_reason(op, impl, point, device, quick)
        out[why] = out.get(why, 0) + 1
    return out


def print_list(registry, device, only=None, quick: bool = False) -> None:
    """Print the ops --only selects, each axis's values on this device (full and quick, from
    the sweeps), and per impl what the skip rules say over the op's points; a reason said
    once in a family is named again by the impl that said it first."""
    print(f"device: {device.torch_device} ({device.name})" + ("; a quick run" if quick else ""))
    said = {}  # (family, reason) -> the impl that said it first
    for op, impls in registry.select(only):
        print(f"\n{op.name}  [{op.family}]  {op.doc}")
        for axis in op.axes:
            full, fast = axis.expand(device, False), axis.expand(device, True)
            other = ("" if fast == full else "  (quick runs: none)" if not fast else
                     f"  (quick runs: {axis_values(axis, fast)})")
            print(f"  axis {axis.name}: {axis_values(axis, full)}{other}" + (f"  -- {axis.doc}" if axis.doc else ""))
        points = op.points(device, quick)
        if not points:
            print(f"  no points {'in a quick run' if quick else 'on this device'}: "
                  + ", ".join(impl.id for impl in impls))
            continue
        for impl in impls:
            counts = impl_skips(op, impl, device, quick, points)
            runs = counts.pop(None, 0)
            head = f"  impl {impl.id}  ({impl.backend})"
            if not counts:
                print(head)
                continue
            parts = [f"runs {runs} of {len(points)} points here" if runs else ""]
            for why, n in counts.items():
                first = said.setdefault((op.family, why), impl.id)
                text = why if first == impl.id else f"as {first} above"
                parts.append(f"{n} skipped: {text}" if runs else text)
            print(head + "  " + ("; ".join(parts) if runs else f"skipped here: {parts[1]}" if len(parts) == 2 else
                                 "skipped here: " + "; ".join(parts[1:])))


def refuse(e) -> int:
    print(f"roofbench: {e}", file=sys.stderr)
    return 2


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
        return refuse("--out and --in-place name two different places: give one of them.")
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
        return refuse("compare needs at least two run folders.")
    seen = [r.resolve() for r in args.runs]
    twice = next((r for i, r in enumerate(args.runs) if seen[i] in seen[:i]), None)
    if twice is not None:
        return refuse(f"run folder {twice} is given twice: compare needs two different runs.")
    try:
        if args.out:
            opt.writable_folder(args.out, "--out")
        text, out = compare(args.runs, args.out or ROOT / "results" / f"compare-{utc_stamp()}")
    except (ResultsError, opt.OptionError) as e:
        return refuse(e)
    print(text)
    print(f"\ncompare: {out / 'compare.md'} and compare.png")
    return 0


def model_main(argv) -> int:
    """python run_bench.py model NAME --batch 1,8,64 --prompt 2048 --context 8192 [--roofs RUN_DIR]."""
    p = Parser(prog="run_bench.py model", description="a model's prefill and decode on the roofline")
    p.add_argument("name", help="a preset: " + ", ".join(mdl.load_models()))
    p.add_argument("--batch", type=opt.whole_numbers, default=[1], help="comma-separated batch sizes (default 1)")
    p.add_argument("--prompt", type=opt.whole_number, default=2048, help="prompt tokens per sequence (prefill)")
    p.add_argument("--context", type=opt.whole_number, default=8192, help="KV cache length during decode")
    p.add_argument("--dtype", default="bf16", type=precision_name, choices=["bf16", "fp16"],
                   help="bf16 (bfloat16) or fp16 (float16)")
    p.add_argument("--roofs", type=existing, help="a run folder whose roofs to use (default: measure them now, quick)")
    p.add_argument("--device")
    p.add_argument("--budget", type=opt.seconds, default=0.2, help="seconds per point")
    p.add_argument("--op-cap", type=opt.seconds, default=mdl.OP_CAP_S,
                   help="seconds an op's point may stretch to so that its predicted calls fit "
                   f"(default {mdl.OP_CAP_S:g})")
    p.add_argument("--out", type=Path, default=ROOT / "results")
    args = p.parse_args(argv)
    try:
        opt.writable_folder(args.out, "--out")
        cfg = mdl.get_model(args.name)
        per_batch = mdl.layers_per_batch(cfg, args.batch, args.prompt, args.context, args.dtype)
        device = detect.resolve(args.device)
        with warnings.catch_warnings():  # another machine's roofs are printed once, below, with the others
            warnings.simplefilter("ignore", ForeignRoofsWarning)
            roofs = roofs_from(args.roofs, device.torch_device) if args.roofs else None
        warned = [roofs.foreign] if roofs is not None and roofs.foreign else []
    except (mdl.ModelError, devmod.DeviceError, ResultsError, opt.OptionError) as e:
        return refuse(e)
    if roofs is None:
        print("roofbench: measuring this device's roofs first (quick; pass --roofs RUN_DIR to reuse a run's)")
        with warnings.catch_warnings():  # its RoofWarnings are printed once, below, with the others
            warnings.simplefilter("ignore", RoofWarning)
            roofs, given = quick_roofs(device.torch_device), "measured on the spot before it (api.quick_roofs)"
        warned = [f"quick_roofs set no {m}" for m in roofs.missing]
    else:
        given = f"of {args.roofs} (given with --roofs)"
    for w in warned:
        print(f"roofbench: warning: {w}", file=sys.stderr)
    status, run_dir, text = mdl.measure_model(cfg, per_batch, device, roofs, given, args.budget, args.out,
                                              session.options_record(args), args.prompt, args.context, args.dtype,
                                              warned, args.op_cap)
    # each warning once: printed above, before the measuring; model.md keeps them at its top
    print("\n".join(line for line in text.splitlines() if not (line.startswith("WARNING: ") and line[9:] in warned)))
    print(f"\nresults: {run_dir}")
    return session.exit_code(status)


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
    out = args.out or ROOT / "results" / f"fleet-{utc_stamp()}"
    try:
        md, result = write_fleet(fleet, out)
    except OSError as e:
        return refuse(f"cannot write the fleet folder {out} ({e.strerror or e}): give --out a folder you can write.")
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
    out = args.out or ROOT / "results" / f"check-{utc_stamp()}"
    try:
        result = chk.check(args.run, args.baseline, args.tolerance, args.mixed_methods, args.other_device)
        chk.refuse_out(out, result)
        opt.writable_folder(out, "--out")
        md = chk.write_check(result, out)
    except (chk.CheckError, opt.OptionError) as e:
        return refuse(e)
    except OSError as e:
        return refuse(f"cannot write the check folder {out} ({e.strerror or e}): give --out a folder you can write.")
    print(chk.terminal_text(result))
    print(f"\ncheck: {md} and check.json")
    return result["exit_code"]


def dry_run(args, device=None, plan=None) -> int:
    """Print the planned points per family and the predicted wall time (bench/aot/predict.py),
    for this machine or for a datasheet part (--device-spec)."""
    try:
        if device is None:
            registry, device = load_all(), predict.spec_device(args.device_spec)
            opt.check_dtypes(args, registry, device)  # the datasheet part's precisions, as a run's check_run
            plan = make_plan(registry, device, args.only, args.quick, args.dtype, args.mode, args.max_ws)
    except (ValueError, RegistryError) as e:
        return refuse(e)
    timer = timer_config(args.quick, args.budget, args.min_time)
    budget = run_budget(device, args.max_memory)
    pred = predict.predict(plan, device, timer, args.quick, sustain_s=args.sustain, budget=budget,
                           factors=learned.expected(device, args.quick))
    print(predict.prediction_text(pred, device, args.quick))
    if args.counters:
        print(f"with --counters {args.counters}: about {args.counters * predict.COUNTER_REPLAY_S:.0f} s more "
              f"after the timing ({args.counters} replays under ncu, a guessed {predict.COUNTER_REPLAY_S:.0f} s "
              "each), none where counters cannot be read")
    return 0


def profile_main(argv) -> int:
    """python run_bench.py profile SCRIPT.py [ARGS ...] [--roofs RUN_DIR] [--steps N] [--out DIR] [--counters [N]]
    [-- ARGS]."""
    p = Parser(prog="run_bench.py profile", description="run SCRIPT.py as __main__, capture its ops with "
               "torch.profiler and place each under the roofs (bench/run/profile.py); arguments it does not know "
               "go to the script, and everything after -- does")
    p.add_argument("script", type=existing)
    p.add_argument("--roofs", type=existing, help="a run folder whose roofs to use (default: measure them now, quick)")
    p.add_argument("--steps", type=int, default=5, help="steps captured after the warm-up (default 5)")
    p.add_argument("--out", type=Path, help="the profile folder (default results/profile-<script>-<UTC timestamp>)")
    p.add_argument("--device")
    p.add_argument("--counters", nargs="?", type=opt.whole_number, const=DEFAULT_OPS, metavar="N",
                   help=f"after the capture, the top N ops' (default {DEFAULT_OPS}) DRAM bytes read under a "
                   "hardware-counter profiler (NVIDIA's ncu) over one more step, beside their counted bytes")
    split = argv.index("--") if "--" in argv else len(argv)
    args, rest = p.parse_known_args(argv[:split])
    try:
        if args.out:
            opt.writable_folder(args.out, "--out")
        if args.counters:  # the run's up-front note where counters cannot be read: the profile still runs
            note = opt.counters_note(args, detect.resolve(args.device), "the profile runs as usual")
            if note:
                print(f"roofbench: {note}", file=sys.stderr)
        with warnings.catch_warnings():  # another machine's roofs, a roof quick_roofs missed: in the printed text
            warnings.simplefilter("ignore", ForeignRoofsWarning)
            warnings.simplefilter("ignore", RoofWarning)
            result = profile_script(args.script, rest + argv[split + 1:], args.roofs, args.steps, args.out,
                                    args.device, args.counters)
    except (APIError, opt.OptionError, devmod.DeviceError) as e:
        return refuse(e)
    print(result.text)
    print(f"\nprofile: {result.folder / 'profile.md'} and profile.html, roofline.svg")
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv:
        argv = worker_argv() or argv
    commands = dict(zip(COMMANDS, (model_main, report_main, compare_main, fleet_main, profile_main, check_main)))
    if argv[:1] and argv[0] in commands:
        return commands[argv[0]](argv[1:])
    args = build_parser().parse_args(argv)
    if args.device_spec and not args.dry_run:
        return refuse("--device-spec plans a run that cannot happen here: use it with --dry-run.")
    if args.dry_run and args.device_spec:
        return dry_run(args)
    if (args.all_devices or args.comm) and distrib.in_worker():
        return distrib.worker(args)  # the launcher checked the options before starting the workers
    try:  # every option, before anything is measured or launched
        registry, device, plan = opt.check_run(args)
    except (opt.OptionError, devmod.DeviceError, RegistryError, distrib.LaunchError) as e:
        return refuse(e)
    note = opt.counters_note(args, device)
    if note:
        print(f"roofbench: {note}", file=sys.stderr)
    if args.list:
        print_list(registry, device, args.only, args.quick)
        return 0
    if args.dry_run:
        return dry_run(args, device, plan)
    if args.all_devices or args.comm:
        return distrib.launch(args, argv, ROOT / "run_bench.py")
    return session.measure_into(args.out / f"{device.slug}-{utc_stamp()}", args, device, plan)


if __name__ == "__main__":
    # A shell starts background jobs with SIGINT ignored, and Python then never raises
    # KeyboardInterrupt: Ctrl-C or `kill -INT` (the device check's time limit) must still
    # stop the run and keep what it measured.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    exit_now(main())
