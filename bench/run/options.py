"""The command line's options, checked before anything is measured: a bad one ends the
command with one sentence that names it (exit code 2), never with a run that measures
nothing or a bare Python error.

The value types (size, names, whole_numbers, whole_number, seconds, percent) are argparse
types: argparse puts "argument --NAME:" before their sentence. check_run() checks what
depends on more than one value: the device, the names in --only, the dtypes the selected ops
have, the timing modes, the process count, and that something is left to run. Parser is
every command's argparse: a bad option ends with one sentence (exit code 2), never a usage block.
"""
from __future__ import annotations

import argparse
import math
import os
import re
import sys
import tempfile
from pathlib import Path

from bench.hw import counters as hw_counters
from bench.hw import detect
from bench.hw import device as devmod
from bench.measure import skip
from bench.measure.memory import BudgetError, Limit, available_bytes, read_limit
from bench.measure.registry import Registry, load_all
from bench.measure.runner import Plan, make_plan
from bench.measure.timing import MODES
from bench.run.distributed import nprocs
from bench.util import Refusal, did_you_mean, dtype_spellings, fmt_bytes, option_size, precision_name


class OptionError(Refusal):
    """An option whose value cannot run: one sentence naming it, and its code (out_is_file,
    out_under_file, out_unwritable, no_such_dtype, counters_multi, unknown_mode, procs_alone,
    run_dir_alone, min_time_budget, max_ws_below_all, nothing_selected, max_ws_all_skipped,
    all_skipped, max_ws_too_small, max_memory_too_large)."""


COMMANDS = ("model", "report", "compare", "fleet", "profile", "check")  # run_bench.py's subcommands
# the code of each refusal this process printed (refuse; Parser's: bad_argument), None where it had
# none: what a caller, or a test, reads instead of the sentence
REFUSED = []


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
        REFUSED.append("bad_argument")  # argparse's: an unknown option, or a value its type refused
        raise SystemExit(2)


def refuse(e, code: str | None = None) -> int:
    """Print a refusal's one sentence (an error, or a sentence) to stderr and record its code (the
    error's own `code`, else code) in REFUSED; return exit code 2."""
    print(f"roofbench: {e}", file=sys.stderr)
    REFUSED.append(getattr(e, "code", None) or code)
    return 2


def size(text: str) -> int:
    """Return bytes for '64MiB', '1GiB', '512KiB', '4096' (binary units); above zero."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMG]i?B?|B)?\s*", text, re.IGNORECASE)
    if not m:
        raise argparse.ArgumentTypeError(f"cannot read size '{text}': write it like 64MiB, 1GiB or 4096")
    unit = (m.group(2) or "B").upper()[0]
    n = int(float(m.group(1)) * {"B": 1, "K": 2**10, "M": 2**20, "G": 2**30}[unit])
    if n <= 0:
        raise argparse.ArgumentTypeError(f"a size must be above zero (got '{text}'): write it like 64MiB or 1GiB")
    return n


def memory_limit(text: str) -> Limit:
    """Return a --max-memory value ('8GiB', '512MiB', '50%') as a memory.Limit, read here
    once; the run resolves it against the memory available when it starts."""
    try:
        return read_limit(text)
    except BudgetError as e:
        raise argparse.ArgumentTypeError(str(e).replace("--max-memory ", "")) from None


def names(text: str) -> list[str]:
    """Return the comma-separated names of text, blanks dropped."""
    return [t.strip() for t in text.split(",") if t.strip()]


def whole_number(text: str) -> int:
    """Return text as a whole number of 1 or more."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"takes a whole number of 1 or more (got '{text}')") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"takes a whole number of 1 or more (got {n})")
    return n


def whole_numbers(text: str) -> list[int]:
    """Return comma-separated whole numbers of 1 or more ('1,8,64')."""
    try:
        values = [int(t) for t in names(text)]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"takes comma-separated whole numbers of 1 or more, like 1,8,64 "
                                         f"(got '{text}')")
    return values


def _number(text: str, fits, what: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = math.nan
    if not (math.isfinite(v) and fits(v)):
        raise argparse.ArgumentTypeError(f"takes {what} (got '{text}')")
    return v


def seconds(text: str) -> float:
    """Return a positive, finite number of seconds."""
    return _number(text, lambda v: v > 0, "a positive number of seconds, like 0.5")


def seconds_or_zero(text: str) -> float:
    """Return a finite number of seconds, 0 or more."""
    return _number(text, lambda v: v >= 0, "a number of seconds of 0 or more, like 0.05")


def percent(text: str) -> float:
    """Return a percentage of 0 or more."""
    return _number(text, lambda v: v >= 0, "a percentage of 0 or more, like 5")


def writable_folder(path, option: str = "--out") -> Path:
    """Return path when it is a folder this process can write into, or one it can create;
    raise OptionError with one sentence otherwise. Probes with a temporary folder, removed
    at once, in the nearest folder that exists: nothing is left behind."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise OptionError(f"{option} {path} is a file, not a folder: give a folder to write into (e.g. results/).",
                          "out_is_file")
    parent = path
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise OptionError(f"{option} {path} lies under {parent}, which is a file: give a folder to write into "
                          "(e.g. results/).", "out_under_file")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".roofbench-probe-", dir=parent))
    except OSError as e:
        raise OptionError(f"{option} {path} cannot be written ({parent}: {e.strerror or e.__class__.__name__}): "
                          "give a folder you can write into (e.g. results/).", "out_unwritable") from None
    return path


def dtypes_of(registry: Registry, only, device, quick: bool) -> list[str]:
    """Return the dtypes (or precisions) the ops selected by only have on device, in order."""
    out = []
    for op, _ in registry.select(only):
        for axis in op.axes:
            if axis.name == "dtype":
                out += [str(v) for v in axis.expand(device, quick) if str(v) not in out]
    return out


def precisions_here(registry: Registry, only, device, quick: bool) -> list[str]:
    """Return the dtypes (precisions) of the ops only selects that one of their impls runs on
    device (no static skip rule leaves every impl out: tf32, mxfp4 and nvfp4 on a CPU), in order,
    each in one spelling (precision_name: fp32, bf16, fp16, fp64)."""
    out = []
    for task in make_plan(registry, device, only, quick).tasks:
        name = precision_name(str(task.point.get("dtype", "")))
        if name and name not in out and any(skip.static_reason(task.op, impl, task.point, device, quick) is None
                                            for impl in task.impls):
            out.append(name)
    return out


def check_dtypes(args, registry: Registry, device) -> None:
    """Refuse a --dtype name none of the selected ops has (either spelling selects a dtype:
    fp32/float32, bf16/bfloat16, ...), suggesting the precisions they run on device
    (precisions_here); else set args.dtype to every spelling of the names given."""
    if not args.dtype:
        return
    have = dtypes_of(registry, args.only, device, args.quick)
    unknown = [d for d in args.dtype if not set(dtype_spellings(d)) & set(have)]
    if unknown:
        here = precisions_here(registry, args.only, device, args.quick)
        raise OptionError(("nothing to run: " if len(unknown) == len(args.dtype) else "")
                          + f"none of the selected ops has dtype {', '.join(unknown)}"
                          + did_you_mean(unknown[0], [s for h in here for s in dtype_spellings(h)], precision_name)
                          + (" in a quick run" if args.quick else "")
                          + (f"; on this device they run {', '.join(here) or 'none'}." if have else
                             "; they have no dtype axis."), "no_such_dtype")
    args.dtype = list(dict.fromkeys(s for d in args.dtype for s in dtype_spellings(d)))


def check_run(args) -> tuple[Registry, devmod.DeviceInfo, Plan]:
    """Check the options of a measuring command before anything runs; return the registry,
    the device and the plan. Raises OptionError, DeviceError, RegistryError or
    distributed.LaunchError with one sentence."""
    if getattr(args, "counters", 0) and (args.all_devices or args.comm):
        raise OptionError("--counters replays points of a single-device run: it does not go with --all-devices or "
                          "--comm; run the device on its own with --counters.", "counters_multi")
    if args.mode and not set(args.mode) <= set(MODES):
        raise OptionError(f"unknown timing mode in --mode '{','.join(args.mode)}': use {', '.join(MODES)}.",
                          "unknown_mode")
    if args.all_devices or args.comm:
        nprocs(args)
    elif args.procs is not None:
        raise OptionError("--procs goes with --all-devices or --comm, which launch that many processes.",
                          "procs_alone")
    elif getattr(args, "run_dir", None) is not None:
        raise OptionError("--run-dir goes with --all-devices or --comm (a node's run folder); a single-device run "
                          "is written under --out.", "run_dir_alone")
    if args.min_time is not None and args.budget is not None and args.min_time >= args.budget:
        raise OptionError(f"--min-time {args.min_time:g} is not below --budget {args.budget:g}: no point could span "
                          f"its minimum time within its budget and converge; give a --min-time under half the budget "
                          f"(e.g. {args.budget / 2:g}) or a larger --budget.", "min_time_budget")
    device = detect.resolve(args.device)
    registry = load_all()
    check_dtypes(args, registry, device)
    plan = make_plan(registry, device, args.only, args.quick, args.dtype, args.mode, args.max_ws)
    if not plan.tasks and not (args.comm and not args.all_devices) and not args.list:
        if args.max_ws and make_plan(registry, device, args.only, args.quick, args.dtype, args.mode).tasks:
            raise OptionError(f"nothing to run: --max-ws {fmt_bytes(args.max_ws)} is below every selected working set; "
                              "give a larger --max-ws (e.g. 64MiB).", "max_ws_below_all")
        raise OptionError("nothing to run: the filters (--only, --dtype, --max-ws) leave no point; see --list.",
                          "nothing_selected")
    _check_max_ws(args, plan, device)
    _check_max_memory(args.max_memory, device)
    why = _all_skipped(plan, device, args.quick)
    if why and not args.list and not args.dry_run and not (args.comm or args.all_devices):
        if args.max_ws and not _all_skipped(make_plan(registry, device, args.only, args.quick, args.dtype, args.mode),
                                            device, args.quick):
            raise OptionError(f"nothing to run: --max-ws {fmt_bytes(args.max_ws)} leaves only points that are skipped "
                              f"on {device.torch_device} ({why}); give a larger --max-ws (e.g. 64MiB).",
                              "max_ws_all_skipped")
        raise OptionError(f"nothing to run here: every selected point would be skipped on {device.torch_device} "
                          f"({why}); select other ops with --only (see --list).", "all_skipped")
    if not args.list:
        writable_folder(args.out, "--out")
        if getattr(args, "run_dir", None) is not None:
            writable_folder(args.run_dir, "--run-dir")
    return registry, device, plan


def counters_note(args, device, goes_on: str = "the run measures as usual") -> str:
    """Return the note a run (or a profile: goes_on "the profile runs as usual") with --counters prints up
    front when this machine cannot read hardware counters (bench.hw.counters.unavailable: a CPU, no
    profiler), else "": not a refusal, the command goes on and records why counters were not collected."""
    if not getattr(args, "counters", 0) or getattr(args, "list", False) or getattr(args, "dry_run", False):
        return ""
    why = hw_counters.unavailable(device)
    return f"--counters: no counters will be collected: {why}; {goes_on}." if why else ""


def _check_max_ws(args, plan: Plan, device) -> None:
    """Refuse a --max-ws below what any memory level needs: the innermost cache's window
    (rule 11) starts at its reported size's lowest sizes, and a roof needs two sizes, so
    with stream points selected, a --max-ws that leaves fewer than two of their working
    sets up to 3/4 of the innermost level sets no bandwidth roof at all."""
    if not args.max_ws:
        return
    def stream_sizes(tasks):
        return sorted({int(t.point["ws_bytes"]) for t in tasks if t.op.family == "stream" and t.point.get("ws_bytes")})
    sizes = stream_sizes(plan.tasks)
    every = stream_sizes(make_plan(load_all(), device, args.only, args.quick, args.dtype, args.mode).tasks)
    if len(sizes) < 2 <= len(every):
        raise OptionError(f"--max-ws {fmt_bytes(args.max_ws)} is below what any memory level needs: it leaves "
                          f"{len(sizes)} stream working set{'' if len(sizes) == 1 else 's'} and a level's roof needs "
                          f"two sizes on its plateau; give at least --max-ws {option_size(every[1], up=True)}, "
                          "or leave stream out with --only.", "max_ws_too_small")


def _check_max_memory(limit: Limit | None, device) -> None:
    """Refuse a --max-memory size above the device's memory (DeviceInfo.memory_bytes) or
    above the memory available now: the budget could never bind, and a run sized to it
    would swap or fail."""
    if limit is None or limit.bytes is None:
        return
    total = getattr(device, "memory_bytes", None)
    avail = available_bytes(device)
    for have, what in ((total, "this device has"), (avail, "is available now")):
        if have and limit.bytes > have:
            raise OptionError(f"--max-memory {limit.text} is more than the {fmt_bytes(have)} {what}: give a size "
                              f"below it (e.g. {option_size(have // 2)}) or a share like 50%.", "max_memory_too_large")


def _all_skipped(plan: Plan, device, quick: bool) -> str:
    """Return the first skip reason when no (point, impl) of plan can run on device (the
    op's, the backend's or the impl's own rule), else ""."""
    first = ""
    for task in plan.tasks:
        reason = skip.point_reason(task.op, task.point, device)
        if reason:
            first = first or reason
            continue
        for impl in task.impls:
            reason = skip.impl_reason(impl, task.point, device, quick)
            if not reason:
                return ""
            first = first or reason
    return first
