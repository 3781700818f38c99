"""Many devices at once, on PyTorch's distributed runtime: the launcher re-runs run_bench.py
under torch.distributed.run (torchrun) with one process per GPU (NCCL), or N gloo processes
on a CPU-only machine; each worker measures its own device and/or takes part in the
interconnect benchmarks; rank 0 writes the combined results.

--all-devices loses nothing to one bad rank: each rank measures in a process of its own
(supervise), so a crash there ends that measurement only and the rank still reports; each
rank has a deadline from its plan's predicted duration (deadline_s: x DEADLINE_FACTOR +
DEADLINE_SLACK_S, or --deadline), past which its measurement is stopped and kept. No
barrier: each rank says in torchrun's store when it is done (KEY/done/<rank>); rank 0 waits
for them up to the slowest rank's deadline, then writes ranks.json (the missing ranks and
why), the fleet report of the folders it can read (roofs/reports/fleet.py) and devices.md.

Across nodes, start the workers with torchrun's standard rendezvous yourself, e.g.

    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint HOST0:29500 \\
        run_bench.py --comm --all-devices --run-dir results/cluster-run

(with --run-dir on a shared filesystem, or one per node).
"""
from __future__ import annotations

import json
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

from bench.aot import predict
from bench.hw import detect
from bench.hw import device as devmod
from bench.measure import memory
from bench.measure.registry import load_all
from bench.measure.runner import make_plan
from bench.measure.timing import timer_config
from bench.results import RunWriter, utc_stamp
from bench.run.comm import run_comm
from bench.run.session import finish, mark_failed, measure_into, options_record, run_meta
from bench.util import Refusal, environ_restored, exit_now, first_line
from roofs.reports.devices import write_devices_report
from roofs.reports.fleet import RANKS_FILE, FleetError, gather, write_fleet

ARGS_ENV = "ROOFBENCH_WORKER_ARGS"
COMM_TIMEOUT = timedelta(minutes=30)  # a collective of --comm waits this long for a peer
FALLBACK_DEADLINE = timedelta(hours=2)  # a rank's deadline when its plan cannot be predicted
DEADLINE_FACTOR = 3.0    # a rank may take this many times its predicted duration ...
DEADLINE_SLACK_S = 600.0  # ... plus this (start, compiles the dry run missed, finishing the folder)
KILL_GRACE_S = 60.0      # a measurement stopped at its deadline has this long to keep its points
STORE_TIMEOUT_S = 300.0
KEY = "roofbench"        # the keys this job sets in torchrun's store: KEY/start/<rank>, KEY/done/<rank>
# how a rank's run.json status starts when it did not finish (what callers and tests read, the rest says how)
DIED = "failed: its measuring process died"            # + " (signal 9)" or " (exit 1)"
PAST_DEADLINE = "failed: past its deadline"            # + " of 600 s (...)"
STOPPED = "failed: its rank was stopped before it could finish"  # + " (torchrun exited with 1)"


class LaunchError(Refusal):
    """Settings that cannot launch: no GPU to measure, too few ranks for the interconnect; one
    sentence, and its code (too_few_procs, no_gpu, procs_over_gpus, too_few_gpus)."""


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
        raise LaunchError(f"the interconnect benchmarks (--comm) need at least 2 ranks: "
                          f"give --procs 2 or more (got {args.procs})."
                          if args.comm else f"--procs must be 1 or more (got {args.procs}).", "too_few_procs")
    gpus = torch.cuda.device_count() if torch.cuda.is_available() and args.device != "cpu" else 0
    n = args.procs if args.procs is not None else gpus
    if n == 0:
        raise LaunchError("no CUDA GPU here: --all-devices and --comm launch one process per GPU; "
                          "give --procs N to run N gloo processes on this CPU instead.", "no_gpu")
    if gpus and n > gpus:
        raise LaunchError(f"--procs {n} asks for more processes than the {gpus} GPUs here.", "procs_over_gpus")
    if n < least:
        raise LaunchError(f"the interconnect benchmarks (--comm) need at least 2 ranks, and this machine has {n} GPU: "
                          "give --device cpu --procs 2 to run them on gloo over loopback.", "too_few_gpus")
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
        _mark_unfinished(run_dir, rc)
        told = " (ranks.json and fleet.md name the missing ranks; the others are combined there)" \
            if (run_dir / RANKS_FILE).exists() else ""
        print(f"roofbench: a rank failed (torchrun exited with {rc}); the points measured before it are kept in "
              f"{run_dir}{told}.", file=sys.stderr)
        return 1
    missing = _recorded_missing(run_dir)
    if missing:
        for m in missing:
            print(f"roofbench: rank {m['rank']} is missing: {m['why']}", file=sys.stderr)
        print(f"roofbench: {len(missing)} rank(s) missing; the others are combined in {run_dir / 'fleet.md'}.",
              file=sys.stderr)
        return 1
    for name in ("fleet.md", "devices.md", "comm/report.md"):
        if (run_dir / name).exists():
            print(f"results: {run_dir / name}")
    return 0


def _mark_unfinished(run_dir: Path, rc: int) -> None:
    """Mark failed every folder under run_dir still "running" once torchrun has exited with rc:
    its rank was killed before it could say so (torchrun sends SIGTERM when one rank dies, and
    SIGKILL to a rank that has not ended 30 s later, which a loaded machine can make it miss)."""
    for meta in run_dir.glob("*/run.json"):
        if _status(meta.parent) == "running":
            mark_failed(meta.parent, f"{STOPPED} (torchrun exited with {rc})".removeprefix("failed: "))


def _recorded_missing(run_dir: Path) -> list[dict]:
    try:
        return json.loads((run_dir / RANKS_FILE).read_text()).get("missing", [])
    except (OSError, ValueError):
        return []


def _raise_on_term(signum, frame):
    raise KeyboardInterrupt  # torchrun stops the other ranks with SIGTERM when one dies


def deadline_s(args, info: devmod.DeviceInfo) -> float:
    """Return how long one rank may take: the plan's predicted duration (bench/aot/predict.py)
    x DEADLINE_FACTOR + DEADLINE_SLACK_S (start, compiles the dry run missed, finishing the
    folder), or --deadline when given; FALLBACK_DEADLINE when the plan cannot be predicted."""
    if getattr(args, "deadline", None):
        return float(args.deadline)
    try:
        plan = make_plan(load_all(), info, args.only, args.quick, args.dtype, args.mode, args.max_ws)
        timer = timer_config(args.quick, args.budget, args.min_time)
        pred = predict.predict(plan, info, timer, args.quick, exact_compiles=False, sustain_s=args.sustain,
                               budget=memory.run_budget(info, getattr(args, "max_memory", None)))
    except Exception:  # noqa: BLE001  a prediction never stops a measurement
        return FALLBACK_DEADLINE.total_seconds()
    return DEADLINE_FACTOR * pred.total_s + DEADLINE_SLACK_S


def _store(rank: int):
    """Return the job's key-value store: torchrun's agent store (the c10d rendezvous the ranks
    already share), reached through MASTER_ADDR and MASTER_PORT as init_process_group would."""
    agent = os.environ.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true"
    return dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]),
                         is_master=rank == 0 and not agent, timeout=timedelta(seconds=STORE_TIMEOUT_S),
                         wait_for_workers=False)


def _measure_child(run_dir: Path, args, device: str) -> None:
    """The measuring process of one rank (spawned by supervise): measure, finish the folder, exit."""
    if device.startswith("cuda"):
        torch.cuda.set_device(device)
    exit_now(measure_into(run_dir, args, detect.resolve(device)))


def supervise(run_dir: Path, args, device: str, limit_s: float, say=print,
              grace_s: float = KILL_GRACE_S) -> tuple[str, int | None]:
    """Measure into run_dir in a process of its own, so that a crash there (a segfault, a lost
    GPU, kill -9) ends only that measurement, not this rank and the node's others with it;
    stop it at limit_s (SIGINT first, which keeps its points; SIGKILL grace_s later).
    Return (the folder's status, the process's exit code; None when it had to be killed)."""
    proc = mp.get_context("spawn").Process(target=_measure_child, args=(run_dir, args, device))
    with environ_restored() as env:  # the child records this rank's command line, not the spawn's
        env[devmod.COMMAND_ENV] = devmod.command_line()
        proc.start()
    try:
        proc.join(limit_s)
    except KeyboardInterrupt:  # torchrun's SIGTERM, or Ctrl-C: the measurement keeps what it has
        os.kill(proc.pid, signal.SIGINT)
        proc.join(grace_s)
        if proc.is_alive():
            proc.kill()
        raise
    late = proc.is_alive()
    if late:
        say(f"roofbench: {run_dir.name} is past its deadline of {limit_s:.0f} s; stopping it.")
        os.kill(proc.pid, signal.SIGINT)
        proc.join(grace_s)
        if proc.is_alive():
            proc.kill()
            proc.join()
    status = _status(run_dir)
    if late and status != "complete":  # stopped while measuring or finishing: the deadline is why
        status = f"{PAST_DEADLINE} of {limit_s:.0f} s (hung, or far slower than predicted)"
    elif status in ("running", None):
        code = proc.exitcode
        died = "signal " + str(-code) if code and code < 0 else f"exit {code}"
        status = f"{DIED} ({died})"
    if (run_dir / "run.json").exists() and status != _status(run_dir):
        mark_failed(run_dir, status.removeprefix("failed: "))
    return status, proc.exitcode


def _status(run_dir: Path) -> str | None:
    try:
        return json.loads((run_dir / "run.json").read_text()).get("status")
    except (OSError, ValueError):
        return None


def wait_for_ranks(store, world: int, until: float, poll_s: float = 0.5) -> tuple[dict, list[int]]:
    """Rank 0: wait until every rank has said it is done, or until (a time.time()) passes, the
    later of it and every rank's own posted deadline. Return ({rank: its record}, the ranks
    that never said)."""
    done = {}
    while True:
        for r in range(world):
            if r not in done and store.check([f"{KEY}/done/{r}"]):
                done[r] = json.loads(store.get(f"{KEY}/done/{r}"))
        if len(done) == world:
            return done, []
        posted = [json.loads(store.get(f"{KEY}/start/{r}"))["until"] for r in range(world)
                  if store.check([f"{KEY}/start/{r}"])]
        if time.time() > max([until, *posted]):
            return done, [r for r in range(world) if r not in done]
        time.sleep(poll_s)


def report_ranks(run_dir: Path, world: int, done: dict, silent: list[int], outlier_pct: float) -> list[dict]:
    """Rank 0: write ranks.json (every rank's record; the missing: silent by the deadline, or
    not complete) and, from the folders it can read, the fleet report (fleet.md ...) and the
    node's devices.md; return the missing ranks."""
    missing = [{"rank": r, "host": None, "dir": None,
                "why": "no word by the deadline (the rank hung, or its node or process died)"} for r in silent]
    missing += [{"rank": r, "host": d["host"], "dir": d["dir"], "why": d["status"]}
                for r, d in sorted(done.items()) if d["status"] != "complete"]
    (run_dir / RANKS_FILE).write_text(json.dumps({"world": world, "ranks": [done[r] for r in sorted(done)],
                                                  "missing": missing}, indent=1))
    try:
        md, _ = write_fleet(gather([run_dir]), run_dir)
        print(md.read_text())
    except FleetError as e:
        print(f"roofbench: no fleet report: {e}", file=sys.stderr)
    complete = [Path(d["dir"]) for r, d in sorted(done.items())
                if d["status"] == "complete" and (Path(d["dir"]) / "run.json").exists()]
    if len(complete) >= 2:
        write_devices_report(run_dir, complete, outlier_pct)
    for m in missing:
        print(f"roofbench: rank {m['rank']}" + (f" ({m['host']})" if m["host"] else "") + f" is missing: {m['why']}",
              file=sys.stderr)
    return missing


def all_devices(args, rank: int, world: int, device: str) -> int:
    """One rank of --all-devices: measure its device in a supervised process, say when it is
    done through the job's store; rank 0 then waits for the others up to the slowest
    deadline and reports whoever finished. A rank other than 0 returns 0 whatever its
    measurement did (recorded in its folder and by rank 0): a non-zero exit would make
    torchrun stop the node's other ranks. Rank 0 returns 0 once its report is written, the
    missing ranks named in it (the launcher, launch(), turns them into exit code 1)."""
    if args.run_dir is None:
        print("roofbench: a worker started by torchrun needs --run-dir DIR (the same on every node; on a shared "
              "filesystem, or one per node combined later with `run_bench.py fleet`).", file=sys.stderr)
        return 2
    info = detect.resolve(device)
    mine = args.run_dir / f"rank{rank}-{info.slug}"
    limit = deadline_s(args, info)
    store = _store(rank)
    store.set(f"{KEY}/start/{rank}", json.dumps({"host": info.host, "until": time.time() + limit + KILL_GRACE_S}))
    status, _ = supervise(mine, args, device, limit)
    store.set(f"{KEY}/done/{rank}", json.dumps({"rank": rank, "host": info.host, "id": info.id, "status": status,
                                                "dir": str(mine)}))
    if rank != 0:
        return 0
    done, silent = wait_for_ranks(store, world, time.time() + limit + KILL_GRACE_S)
    report_ranks(args.run_dir, world, done, silent, args.outlier_pct)
    return 0  # the missing ranks are in ranks.json; a failed exit would keep the other nodes' agents waiting


def worker(args) -> int:
    """One rank: measure this process's device (--all-devices, all_devices()) and/or run the
    interconnect benchmarks (--comm); rank 0 writes the combined results. Returns the exit code."""

    rank, local = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    world = int(os.environ["WORLD_SIZE"])
    cuda = torch.cuda.is_available() and args.device != "cpu"
    device = f"cuda:{local}" if cuda else "cpu"
    on_term = signal.signal(signal.SIGTERM, _raise_on_term)  # restored when the rank ends
    run_dir = args.run_dir
    try:
        if args.all_devices:
            rc = all_devices(args, rank, world, device)
            if rc:
                return rc
        if args.comm:
            if cuda:
                torch.cuda.set_device(local)
            dist.init_process_group("nccl" if cuda else "gloo", timeout=COMM_TIMEOUT)
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
                    finish(run_dir / "comm", not args.no_charts)
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
