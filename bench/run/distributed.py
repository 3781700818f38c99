"""Many devices at once, on PyTorch's distributed runtime: the launcher re-runs run_bench.py
under torch.distributed.run (torchrun) with one process per GPU (NCCL), or N gloo processes
on a CPU-only machine; each worker measures its own device and/or takes part in the
interconnect benchmarks; rank 0 writes the combined results.

Across nodes, start the workers with torchrun's standard rendezvous yourself, e.g.

    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint HOST0:29500 \\
        run_bench.py --comm --all-devices --run-dir results/cluster-run

(with --run-dir on a shared filesystem, or one per node).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

from bench.hw import detect
from bench.hw import device as devmod
from bench.results import RunWriter, utc_stamp
from bench.run.comm import run_comm
from bench.run.session import finish, measure_into, options_record, run_meta
from bench.util import first_line
from roofs.reports.devices import write_devices_report

WORKER_TIMEOUT = timedelta(hours=2)
ARGS_ENV = "ROOFBENCH_WORKER_ARGS"  # a barrier waits for the slowest device's whole sweep


class LaunchError(ValueError):
    """Settings that cannot launch: no GPU to measure, too few ranks for the interconnect."""


def in_worker() -> bool:
    return "LOCAL_RANK" in os.environ and "WORLD_SIZE" in os.environ


def worker_argv() -> list[str] | None:
    """Return the arguments the launcher passed to its workers, or None outside a launched worker."""
    raw = os.environ.get(ARGS_ENV)
    return json.loads(raw) if raw and in_worker() else None


def nprocs(args) -> int:
    """Return how many worker processes to launch, or raise LaunchError with one sentence."""
    least = 2 if args.comm else 1
    if args.procs is not None and args.procs < least:
        raise LaunchError(f"the interconnect benchmarks (--comm) need at least 2 ranks: give --procs 2 or more (got {args.procs})."
                          if args.comm else f"--procs must be 1 or more (got {args.procs}).")
    gpus = torch.cuda.device_count() if torch.cuda.is_available() and args.device != "cpu" else 0
    n = args.procs if args.procs is not None else gpus
    if n == 0:
        raise LaunchError("no CUDA GPU here: --all-devices and --comm launch one process per GPU; "
                          "give --procs N to run N gloo processes on this CPU instead.")
    if gpus and n > gpus:
        raise LaunchError(f"--procs {n} asks for more processes than the {gpus} GPUs here.")
    if n < least:
        raise LaunchError(f"the interconnect benchmarks (--comm) need at least 2 ranks, and this machine has {n} GPU: "
                          "give --device cpu --procs 2 to run them on gloo over loopback.")
    return n


def launch(args, argv, script: Path) -> int:
    """Run the workers under torch.distributed.run on this node; return the exit code.
    A failed rank ends the run with one sentence; what was measured stays in the run folder."""
    try:
        n = nprocs(args)
    except LaunchError as e:
        print(f"roofbench: {e}", file=sys.stderr)
        return 2
    first = detect.resolve("cuda:0" if torch.cuda.is_available() and args.device != "cpu" else "cpu")
    run_dir = args.run_dir or args.out / f"node-{first.slug}-{utc_stamp()}"
    run_dir.mkdir(parents=True, exist_ok=True)
    # the workers' arguments travel in the environment: torchrun's own parser would take
    # abbreviations of its options out of the script's arguments
    env = dict(os.environ, **{ARGS_ENV: json.dumps([*argv, "--run-dir", str(run_dir)]),
                              devmod.COMMAND_ENV: devmod.command_line()})
    if n > 1:  # what torchrun sets for several processes anyway, said here so that it prints no banner about it
        env.setdefault("OMP_NUM_THREADS", "1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={n}", str(script)]
    print(f"roofbench: {n} processes ({'NCCL' if first.kind == 'cuda' else 'gloo'}) -> {run_dir}", flush=True)
    rc = subprocess.run(cmd, env=env).returncode
    if rc != 0:
        print(f"roofbench: a rank failed (torchrun exited with {rc}); the points measured before it are kept in {run_dir}.",
              file=sys.stderr)
        return 1
    for name in ("devices.md", "comm/report.md"):
        if (run_dir / name).exists():
            print(f"results: {run_dir / name}")
    return 0


def _raise_on_term(signum, frame):
    raise KeyboardInterrupt  # torchrun stops the other ranks with SIGTERM when one dies


def worker(args) -> int:
    """One rank: measure this process's device (--all-devices) and/or run the interconnect
    benchmarks (--comm); rank 0 writes the combined results. Returns the exit code."""

    rank, local = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    world = int(os.environ["WORLD_SIZE"])
    cuda = torch.cuda.is_available() and args.device != "cpu"
    device = f"cuda:{local}" if cuda else "cpu"
    if cuda:
        torch.cuda.set_device(local)
    on_term = signal.signal(signal.SIGTERM, _raise_on_term)  # restored when the rank ends
    run_dir = args.run_dir
    try:
        dist.init_process_group("nccl" if cuda else "gloo", timeout=WORKER_TIMEOUT)
        if args.all_devices:
            info = detect.resolve(device)
            mine = run_dir / f"rank{rank}-{info.slug}"
            rc = measure_into(mine, args, info)
            if rc:
                return rc
            dist.barrier()
            if rank == 0:
                dirs = sorted(p for p in run_dir.glob("rank*-*") if (p / "run.json").exists())
                print(open(write_devices_report(run_dir, dirs, args.outlier_pct)).read())
        if args.comm:
            info = detect.resolve(device)
            meta = run_meta(info, options_record(args), "comm", ranks=world, backend=dist.get_backend())
            writer = RunWriter(run_dir / "comm", meta) if rank == 0 else None
            status = "complete"
            try:
                run_comm(device, args.quick, sink=writer.add if writer else (lambda m: None),
                         progress=lambda line: print(line, flush=True), max_bytes=args.max_ws)
            except KeyboardInterrupt:
                status = "interrupted"
                raise
            except Exception as e:  # a peer that died surfaces here as a broken connection
                status = f"failed: {type(e).__name__}"
                raise
            finally:
                if writer is not None:
                    writer.finish(status)
                    finish(run_dir / "comm")
        return 0
    except KeyboardInterrupt:
        print(f"roofbench: rank {rank} stopped; what it measured is in {run_dir}.", file=sys.stderr)
        return 130
    except Exception as e:
        print(f"roofbench: rank {rank} failed ({first_line(e)}); what was measured is in {run_dir}.",
              file=sys.stderr)
        return 1
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
        signal.signal(signal.SIGTERM, on_term)
