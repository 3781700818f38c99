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
only parses the run's options and dispatches: the run itself is bench/run/main_run.py (then session.py), the
options' types and checks bench/run/options.py, and each subcommand its parser and work: report, compare,
fleet and check bench/run/commands.py, model bench/models.py, profile bench/api.py (see ARCHITECTURE.md).
"""
from __future__ import annotations

import argparse
import gc
import signal
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
if str(ROOT) not in sys.path:  # run from anywhere; kernels/ bench/ roofs/ are never installed
    sys.path.insert(0, str(ROOT))

# the project's own imports come after that sys.path set-up, hence the noqa: E402 on each.
# They make about a million objects that live as long as the process: the cyclic collector is
# off while they load (it would walk them again and again, a tenth of a start's CPU)
gc.disable()
from bench.api import profile_main  # noqa: E402
from bench.measure.timing import MODES  # noqa: E402
from bench.models import model_main  # noqa: E402
from bench.run import options as opt  # noqa: E402
from bench.run.commands import check_main, compare_main, fleet_main, report_main  # noqa: E402
from bench.run.counters_phase import DEFAULT_POINTS  # noqa: E402
from bench.run.distributed import worker_argv  # noqa: E402
from bench.run.main_run import run_main  # noqa: E402
from bench.run.options import COMMANDS, Parser  # noqa: E402
from bench.util import exit_now  # noqa: E402

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
# each subcommand's parser and work, in the order of options.COMMANDS
MAINS = dict(zip(COMMANDS, (model_main, report_main, compare_main, fleet_main, profile_main, check_main), strict=True))


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


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv:
        argv = worker_argv() or argv
    if argv[:1] and argv[0] in MAINS:
        return MAINS[argv[0]](argv[1:])
    return run_main(build_parser().parse_args(argv), argv, ROOT / "run_bench.py")


if __name__ == "__main__":
    # A shell starts background jobs with SIGINT ignored, and Python then never raises
    # KeyboardInterrupt: Ctrl-C or `kill -INT` (the device check's time limit) must still
    # stop the run and keep what it measured.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    exit_now(main())
