#!/usr/bin/env python3
"""roofbench: measure this device's roofs and place kernels under them.

    python run_bench.py                 measure the first CUDA GPU, else the CPU (all ops)
    python run_bench.py --quick         a short pass (about a minute on a 2-core CPU)
    python run_bench.py --list          ops, impls and their axes on this device
    python run_bench.py report RUN_DIR  rebuild a run's roofs, pictures and report from its files
    python run_bench.py compare RUN_A RUN_B [...]   overlay several runs' roofs and points
    python run_bench.py model NAME --batch 1,8 --prompt 2048 --context 8192   a model on the roofline

Writes results/<device-slug>-<UTC timestamp>/ (see the README for every file).
"""
from __future__ import annotations

import argparse
import dataclasses
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
if str(ROOT) not in sys.path:  # run from anywhere; kernels/ bench/ roofs/ are never installed
    sys.path.insert(0, str(ROOT))

from bench import device as devmod  # noqa: E402
from bench.ops._tune import DeviceLost  # noqa: E402
from bench.registry import RegistryError, load_all  # noqa: E402
from bench.results import ResultsError, RunWriter, load_run, utc_stamp  # noqa: E402
from bench.runner import Runner, make_plan  # noqa: E402
from bench.timing import MODES, TimerConfig  # noqa: E402


def parse_size(text: str) -> int:
    """Return bytes for '64MiB', '1GiB', '512KiB', '4096' (binary units)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMG]i?B?|B)?\s*", text, re.IGNORECASE)
    if not m:
        raise argparse.ArgumentTypeError(f"cannot read size '{text}': write it like 64MiB, 1GiB or 4096.")
    unit = (m.group(2) or "B").upper()[0]
    return int(float(m.group(1)) * {"B": 1, "K": 2**10, "M": 2**20, "G": 2**30}[unit])


def csv_list(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="run_bench.py", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", help="cpu, cuda or cuda:N (default: the first CUDA GPU, else the CPU)")
    p.add_argument("--only", type=csv_list, help="comma-separated families, ops, impl ids or impl names "
                   "(e.g. stream, stream.triad, stream.copy/triton, torch)")
    p.add_argument("--dtype", type=csv_list, help="comma-separated dtypes to keep (e.g. float32,bfloat16)")
    p.add_argument("--mode", type=csv_list, help=f"timing modes, comma-separated: {', '.join(MODES)} (default: each op's own)")
    p.add_argument("--quick", action="store_true", help="fewer sizes and dtypes, shorter budgets")
    p.add_argument("--budget", type=float, help="seconds per point, warm-up included (default 0.5, quick 0.1)")
    p.add_argument("--max-ws", type=parse_size, help="skip working sets larger than this (e.g. 64MiB)")
    p.add_argument("--out", type=Path, default=ROOT / "results",
                   help="folder in which the run folder <device-slug>-<UTC timestamp>/ is created (default results/)")
    p.add_argument("--list", action="store_true", help="list ops, impls and their axes on this device, then exit")
    p.add_argument("--dry-run", action="store_true", help="list the planned points per family and predict the run's wall time, then exit")
    p.add_argument("--device-spec", help="with --dry-run: plan for a datasheet part instead of this machine (e.g. h200)")
    p.add_argument("--all-devices", action="store_true",
                   help="measure every local GPU at once, one process each (torch.distributed), and compare them")
    p.add_argument("--comm", action="store_true",
                   help="measure the interconnect: collectives and send/recv between every pair of ranks")
    p.add_argument("--procs", type=int, help="processes to launch (default: one per GPU; on a CPU-only machine, "
                   "gloo processes on loopback, for --comm or testing)")
    p.add_argument("--outlier-pct", type=float, default=5.0, help="flag a device this far below the median (default 5)")
    p.add_argument("--run-dir", type=Path, help=argparse.SUPPRESS)  # set by the launcher for its workers
    return p


def print_list(registry, device) -> None:
    from bench.runner import backend_skip
    print(f"device: {device.torch_device} ({device.name})")
    for op in registry.ordered():
        print(f"\n{op.name}  [{op.family}]  {op.doc}")
        for axis in op.axes:
            full, quick = axis.expand(device, False), axis.expand(device, True)
            vals = ", ".join(map(str, full)) if len(full) <= 8 else f"{full[0]} .. {full[-1]} ({len(full)} values)"
            print(f"  axis {axis.name}: {vals}" + (f"  (quick: {len(quick)} values)" if quick != full else "")
                  + (f"  -- {axis.doc}" if axis.doc else ""))
        for impl in registry.impls_of(op.name):
            why = backend_skip(impl, {}, device)
            print(f"  impl {impl.id}  ({impl.backend}){'  skipped here: ' + why if why else ''}")


def timer_config(args) -> TimerConfig:
    if args.quick:
        return TimerConfig(budget_s=args.budget or 0.1, warmup_s=0.01, min_samples=5, max_samples=200)
    return TimerConfig(budget_s=args.budget or 0.5, warmup_s=0.05)


def finalize(run_dir: Path) -> list[str]:
    """Derive roofs, draw and report from the run folder's files; return problems met."""
    from roofs.finish import finish_run
    return finish_run(run_dir)


def summary(run_dir: Path) -> str:
    """Return the end-of-run summary: row counts, the roofs (with ridge points), each stream
    kernel's best GB/s and each GEMM's best GFLOP/s, and the errors."""
    import pandas as pd
    from roofs.model import Roofline
    run = load_run(run_dir)
    df = run.measurements
    counts = df["status"].value_counts().to_dict()
    lines = [f"\n{len(df)} rows: " + ", ".join(f"{v} {k}" for k, v in counts.items())]
    model = Roofline(run.roofs)
    if run.roofs:
        rows = []
        for r in model.roofs:
            ridge = model.ridge(r.name) if r.kind == "compute" else None
            where = (f"{_fmt(r.plateau_bytes[0])} .. {_fmt(r.plateau_bytes[1])} ({r.plateau_points} sizes)"
                     if r.plateau_bytes else r.shape)
            rows.append({"roof": r.name, "value": f"{r.value:,.1f} {r.unit}", "source": r.source,
                         "from": f"{r.impl} {r.dtype}", "plateau or shape": where,
                         "ridge FLOP/B": f"{ridge:.3g}" if ridge else ""})
        lines += ["\nroofs:", pd.DataFrame(rows).to_string(index=False)]
    ok = df[df["status"] == "ok"]
    stream = ok[ok["family"] == "stream"]
    if not stream.empty:
        best = stream.loc[stream.groupby(["impl", "dtype", "mode"])["gbps"].idxmax()]
        t = best[["impl", "dtype", "mode", "gbps", "working_set_bytes"]].copy()
        t["working_set_bytes"] = t["working_set_bytes"].map(_fmt)
        t = t.rename(columns={"gbps": "best GB/s", "working_set_bytes": "at working set"})
        lines += ["\nstream, best point per kernel:", t.to_string(index=False, float_format=lambda v: f"{v:,.1f}")]
    flops = ok[ok["family"] != "stream"]
    if not flops.empty:
        best = flops.loc[flops.groupby(["op", "impl", "dtype"])["gflops"].idxmax()]
        t = best[["impl", "dtype", "shape", "gflops", "gbps", "intensity", "pct_of_attainable"]].rename(
            columns={"gflops": "best GFLOP/s", "gbps": "GB/s", "intensity": "FLOP/B", "pct_of_attainable": "% attainable"})
        lines += ["\ncompute kernels, best point per impl and precision:",
                  t.to_string(index=False, float_format=lambda v: f"{v:,.1f}")]
    lines += gemv_summary(df, model)
    errors = df[df["status"] == "error"]
    if not errors.empty:
        lines += [f"\n{len(errors)} errors (first 20):"] + [f"  {r.point_id}: {r.reason}" for r in errors.itertuples()][:20]
    from roofs.checks import warnings
    lines += ["\nwarnings:"] + [f"  {w}" for w in warnings(run)]
    return "\n".join(lines)


def gemv_summary(df, model) -> list[str]:
    """Return the decode lines: measured batch-1 points as % of the memory roof (best impl per
    format and layer), and the batch of the sweep at which each format's intensity (a
    formula, so every planned row counts) crosses its ridge point."""
    import pandas as pd
    g = df[df["family"] == "gemv"].drop_duplicates("point_id")
    bw = model.bandwidth()
    if g.empty or bw is None:
        return []
    b1 = g[(g["size"] == 1) & (g["status"] == "ok")]
    lines = []
    if not b1.empty:
        best = b1.loc[b1.groupby(["dtype", "shape"])["gbps"].idxmax()]
        t = best[["dtype", "shape", "impl", "gbps", "pct_of_bw_roof", "pct_of_attainable"]].rename(
            columns={"gbps": "GB/s", "pct_of_bw_roof": f"% of {bw.name}", "pct_of_attainable": "% of attainable"})
        lines += [f"\ndecode GEMV at batch 1 against the measured {bw.name} roof ({bw.value:,.1f} GB/s):",
                  t.to_string(index=False, float_format=lambda v: f"{v:,.1f}")]
    rows = []
    for (dtype, shape_k), sub in g.assign(nk=g["shape"].str.split("x", n=1).str[1]).groupby(["dtype", "nk"]):
        ridge = model.ridge(sub["precision"].iloc[0] or None)
        if ridge is None:
            continue
        sub = sub.sort_values("size")
        over = sub[sub["intensity"] >= ridge]
        rows.append({"format": dtype, "layer NxK": shape_k, "ridge FLOP/B": f"{ridge:.3g}",
                     "crosses at batch": int(over["size"].iloc[0]) if not over.empty else f"> {int(sub['size'].max())}",
                     "intensity at batch 1": f"{sub['intensity'].iloc[0]:.3g}"})
    if rows:
        lines += ["\ndecode GEMV: where each format crosses its ridge point (intensity >= P / BW):",
                  pd.DataFrame(rows).to_string(index=False)]
    return lines


def _fmt(n) -> str:
    from bench.runner import fmt_bytes
    return fmt_bytes(float(n))


def report_main(argv) -> int:
    """python run_bench.py report RUN_DIR: re-derive roofs, redraw, rewrite the report, from the run's files."""
    p = argparse.ArgumentParser(prog="run_bench.py report", description="rebuild a run's roofs, pictures and report from its files")
    p.add_argument("run_dir", type=Path)
    args = p.parse_args(argv)
    try:
        load_run(args.run_dir)
    except ResultsError as e:
        print(f"roofbench: {e}", file=sys.stderr)
        return 2
    problems = finalize(args.run_dir)
    for msg in problems:
        print(f"roofbench: {msg}", file=sys.stderr)
    if problems:
        return 2
    print(summary(args.run_dir))
    print(f"\nreport: {args.run_dir / 'report.md'} and report.html")
    return 0


def compare_main(argv) -> int:
    """python run_bench.py compare RUN_A RUN_B [...] [--out DIR]."""
    from roofs.compare import compare
    p = argparse.ArgumentParser(prog="run_bench.py compare", description="overlay the roofs and points of several runs")
    p.add_argument("runs", nargs="+", type=Path)
    p.add_argument("--out", type=Path, help="folder for compare.png and compare.md (default results/compare-<UTC timestamp>)")
    args = p.parse_args(argv)
    if len(args.runs) < 2:
        print("roofbench: compare needs at least two run folders.", file=sys.stderr)
        return 2
    try:
        table, out = compare(args.runs, args.out or ROOT / "results" / f"compare-{utc_stamp()}")
    except ResultsError as e:
        print(f"roofbench: {e}", file=sys.stderr)
        return 2
    print(table.to_string(index=False, float_format=lambda v: f"{v:,.3g}"))
    print(f"\ncompare: {out / 'compare.md'} and compare.png")
    return 0


def model_main(argv) -> int:
    """python run_bench.py model NAME --batch 1,8,64 --prompt 2048 --context 8192 [--roofs RUN_DIR]."""
    import json

    from bench import models as mdl
    from bench.api import quick_roofs
    from roofs.finish import finish_run
    from roofs.model import Roof
    p = argparse.ArgumentParser(prog="run_bench.py model", description="a model's prefill and decode on the roofline")
    p.add_argument("name", help="a preset: " + ", ".join(mdl.load_models()))
    p.add_argument("--batch", default="1", help="comma-separated batch sizes (default 1)")
    p.add_argument("--prompt", type=int, default=2048, help="prompt tokens per sequence (prefill)")
    p.add_argument("--context", type=int, default=8192, help="KV cache length during decode")
    p.add_argument("--dtype", default="bf16", choices=["bf16", "fp16"])
    p.add_argument("--roofs", type=Path, help="a run folder whose roofs to use (default: measure them now, quick)")
    p.add_argument("--device")
    p.add_argument("--budget", type=float, default=0.2, help="seconds per point")
    p.add_argument("--out", type=Path, default=ROOT / "results")
    args = p.parse_args(argv)
    try:
        cfg = mdl.get_model(args.name)
        batches = [int(b) for b in args.batch.split(",") if b.strip()]
        device = devmod.resolve(args.device)
        per_batch = {b: mdl.layer_ops(cfg, b, args.prompt, args.context, args.dtype) for b in batches}
        roofs = ([Roof.from_dict(r) for r in load_run(args.roofs).roofs] if args.roofs else None)
    except (mdl.ModelError, devmod.DeviceError, ResultsError, ValueError) as e:
        print(f"roofbench: {e}", file=sys.stderr)
        return 2
    if roofs is None:
        print("roofbench: measuring this device's roofs first (quick; pass --roofs RUN_DIR to reuse a run's)")
        roofs = quick_roofs(device.torch_device)
    run_dir = args.out / f"model-{cfg.name}-{device.slug}-{utc_stamp()}"
    meta = {"device": device.to_dict(), "software": device.software, "command": devmod.command_line(),
            "model": dataclasses.asdict(cfg), "options": {k: str(v) for k, v in vars(args).items()},
            "base_roofs": [r.to_dict() for r in roofs if r.source == "measured"]}
    status, measured = execute(run_dir, meta, device, mdl.plan(per_batch.values()),
                               TimerConfig(budget_s=args.budget, warmup_s=0.02))
    best = mdl.best_times(measured)
    report = {b: mdl.predict(ops, {lo: best.get(mdl.key(lo)) for lo in ops}, roofs, cfg.layers)
              for b, ops in per_batch.items()}
    (run_dir / "model.json").write_text(json.dumps({"model": dataclasses.asdict(cfg), "prompt": args.prompt,
                                                    "context": args.context, "per_batch": report}, indent=1, default=str))
    text = model_summary(cfg, args, report)
    (run_dir / "model.md").write_text(text)
    for msg in finish_run(run_dir):
        print(f"roofbench: {msg}", file=sys.stderr)
    print(text)
    print(f"\nresults: {run_dir}")
    return 130 if status == "interrupted" else 0


def model_summary(cfg, args, report) -> str:
    """Return the model command's text: per batch and phase, each op's bound and measured
    time, the totals per layer and per step, and tokens per second."""
    import pandas as pd
    out = [f"# {cfg.name}: {cfg.layers} layers, hidden {cfg.hidden}, {cfg.heads}/{cfg.kv_heads} heads of {cfg.head_dim}, "
           f"FFN {cfg.ffn}" + (f", {cfg.experts} experts (top {cfg.top_k})" if cfg.experts > 1 else "")
           + f"; prompt {args.prompt}, context {args.context}, {args.dtype}\n"]
    for b, phases in report.items():
        for phase, r in phases.items():
            t = pd.DataFrame(r["ops"])[["op", "shape", "count", "gflop", "mbytes", "intensity", "bound_us",
                                        "measured_us", "pct_of_attainable", "impl"]]
            out.append(f"\n## batch {b}, {phase} ({r['tokens_per_step']} tokens per step)\n")
            out.append(t.to_string(index=False, float_format=lambda v: f"{v:,.4g}"))
            meas = r["step_measured_s"]
            out.append(f"\nper layer: bound {r['bound_layer_s'] * 1e3:.4g} ms, measured {r['measured_layer_s'] * 1e3:.4g} ms; "
                       f"per step ({cfg.layers} layers + lm_head): bound {r['step_bound_s'] * 1e3:.4g} ms, "
                       + (f"measured {meas * 1e3:.4g} ms" if meas else f"measured incomplete (no time for {', '.join(r['missing'])})")
                       + f"\ntokens/s: at most {r['tokens_per_s_bound']:,.1f} by the roofs"
                       + (f", {r['tokens_per_s_measured']:,.1f} measured" if r["tokens_per_s_measured"] else ""))
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv:
        from bench.distributed import worker_argv
        argv = worker_argv() or argv
    if argv[:1] == ["model"]:
        return model_main(argv[1:])
    if argv[:1] == ["report"]:
        return report_main(argv[1:])
    if argv[:1] == ["compare"]:
        return compare_main(argv[1:])
    args = build_parser().parse_args(argv)
    if (args.all_devices or args.comm) and not args.list:
        from bench import distributed as distrib
        if distrib.in_worker():
            return distrib.worker(args, measure_device=run_plan_into, finish=finalize)
        return distrib.launch(args, argv, ROOT / "run_bench.py")
    try:
        registry = load_all()
        if args.device_spec and not args.dry_run:
            raise ValueError("--device-spec plans a run that cannot happen here: use it with --dry-run.")
        if args.dry_run:
            from bench import predict
            device = predict.spec_device(args.device_spec) if args.device_spec else devmod.resolve(args.device)
            plan = make_plan(registry, device, args.only, args.quick, args.dtype, args.mode, args.max_ws)
            print(predict.describe(predict.predict(plan, device, timer_config(args), args.quick), device, args.quick))
            return 0
        device = devmod.resolve(args.device)
        if args.list:
            print_list(registry, device)
            return 0
        if args.mode and not set(args.mode) <= set(MODES):
            raise ValueError(f"unknown timing mode in '{','.join(args.mode)}': use {', '.join(MODES)}.")
        plan = make_plan(registry, device, args.only, args.quick, args.dtype, args.mode, args.max_ws)
        if not plan.tasks:
            raise ValueError("nothing to run: the filters (--only, --dtype, --max-ws) leave no point; see --list.")
    except (devmod.DeviceError, RegistryError, ValueError) as e:
        print(f"roofbench: {e}", file=sys.stderr)
        return 2
    return run_plan_into(args.out / f"{device.slug}-{utc_stamp()}", args, device, plan)


def execute(run_dir: Path, meta: dict, device, plan, timer: TimerConfig, quick: bool = False, estimates=None):
    """Run plan on device into a new run folder, rows written as they finish; Ctrl-C stops
    it and keeps them. Return (status, measurements)."""
    writer = RunWriter(run_dir, meta)
    print(f"roofbench: {len(plan)} points on {device.torch_device} ({device.name}) -> {run_dir}")
    runner = Runner(device, timer, quick=quick, sink=writer.add, progress=lambda line: print(line, flush=True))
    status = "complete"
    t0 = time.perf_counter()
    try:
        runner.run(plan, estimates)
    except KeyboardInterrupt:
        status = "interrupted"
        print(f"\nroofbench: interrupted; the {len(writer.measurements)} points measured so far are kept in {run_dir}.")
    except DeviceLost as e:
        status = f"failed: {e}"
        print(f"\nroofbench: the device failed ({e}); its context is unusable, so the run stops here. "
              f"The {len(writer.measurements)} points measured before it are kept in {run_dir}.", file=sys.stderr)
    finally:
        wall = time.perf_counter() - t0
        writer.finish(status, timed_s=runner.timed_s, measure_wall_s=wall)
    print(f"roofbench: {wall:.0f} s measuring, {runner.timed_s:.0f} s of it ({runner.timed_s / max(wall, 1e-9):.0%}) in timed samples")
    return status, writer.measurements


def run_plan_into(run_dir: Path, args, device, plan=None) -> int:
    """Run plan (by default the one args select) on device into run_dir; finish and summarize it."""
    if plan is None:
        plan = make_plan(load_all(), device, args.only, args.quick, args.dtype, args.mode, args.max_ws)
    from bench import predict
    try:  # the dry run's prediction, kept so the run's duration can be checked against it
        estimates = [sec for _, sec in predict.row_seconds(plan, device, timer_config(args), args.quick)[0]]
    except Exception:  # a prediction must never stop a measurement
        estimates = None
    predicted = sum(estimates) if estimates else None
    meta = {"device": device.to_dict(), "software": device.software, "command": devmod.command_line(),
            "predicted_s": predicted,
            "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
            "timer": dataclasses.asdict(timer_config(args)),
            "units": {"gbps": "1e9 bytes/s", "gflops": "1e9 FLOP/s", "times": "ms in CSV, s in JSON"}}
    status, _ = execute(run_dir, meta, device, plan, timer_config(args), args.quick, estimates)
    problems = finalize(run_dir)
    for p in problems:
        print(f"roofbench: {p}", file=sys.stderr)
    print(summary(run_dir))
    print(f"\nresults: {run_dir}")
    return 130 if status == "interrupted" else (1 if status.startswith("failed") else 0)


if __name__ == "__main__":
    sys.exit(main())
