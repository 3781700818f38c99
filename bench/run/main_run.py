"""The main command (run_bench.py without a subcommand) once its options are parsed: every
option checked before anything is measured or launched, then --list, --dry-run, the
distributed launch (--all-devices, --comm) or a run into a new run folder. Returns the
command's exit code; a bad option ends with one sentence (exit code 2)."""
from __future__ import annotations

import sys
from pathlib import Path

from bench.aot import learned, predict
from bench.hw import device as devmod
from bench.measure.memory import run_budget
from bench.measure.registry import RegistryError, load_all
from bench.measure.runner import make_plan
from bench.measure.skip import static_reason
from bench.measure.timing import timer_config
from bench.results import utc_stamp
from bench.run import distributed as distrib
from bench.run import options as opt
from bench.run import session
from bench.run.options import refuse
from bench.util import fmt_bytes


def run_main(args, argv, script: Path) -> int:
    """Run the main command with its parsed args (argv as given, for the launcher's workers;
    script: run_bench.py, which the launcher starts once per rank)."""
    if args.device_spec and not args.dry_run:
        return refuse("--device-spec plans a run that cannot happen here: use it with --dry-run.", "device_spec_alone")
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
        return distrib.launch(args, argv, script)
    return session.measure_into(args.out / f"{device.slug}-{utc_stamp()}", args, device, plan)


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
