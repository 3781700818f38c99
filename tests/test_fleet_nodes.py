"""Faults across nodes: two torchrun launchers on this machine stand in for
two nodes (c10d rendezvous on loopback, gloo, two ranks on one and one on the other); the test's
own fixture kills the measuring process of a rank that shares its node (two_nodes, a session
fixture), and the fleet report names it and keeps the two others."""
import json
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import hang_run
import pandas as pd
import pytest
from conftest import session_run

from bench.run.distributed import DIED, PAST_DEADLINE

ROOT = Path(__file__).parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def status_of(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def local_rank(pid: int) -> str | None:
    """Return the LOCAL_RANK in process pid's environment (torchrun's, which its children inherit), or None."""
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    return next((v.split(b"=", 1)[1].decode() for v in env if v.startswith(b"LOCAL_RANK=")), None)


@session_run
def two_nodes(tmp, env):
    """Two torchrun launchers, of two ranks and of one (--all-devices, one tiny stream copy sweep),
    the measuring process of the two-rank node's local rank 1 killed mid-run from here. That rank
    runs through tests/hang_run.py and hangs after its second timed call, so the kill finds it
    running however busy the machine is (a polled kill of a free run could miss its few seconds).
    Return an object with run_dir, killed (its rank, or None when it never started measuring),
    returncodes, outs (what each launcher printed) and seconds."""
    run_dir = tmp / "cluster"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--rdzv-backend", "c10d",
           "--rdzv-endpoint", f"127.0.0.1:{free_port()}", "--rdzv-id", "issue30", "--max-restarts", "0"]
    args = [str(ROOT / "tests" / "hang_run.py"), "--all-devices", "--device", "cpu", "--quick", "--only",
            "stream.copy/torch", "--dtype", "float32", "--max-ws", "1MiB", "--sustain", "0", "--budget", "0.1",
            "--no-charts", "--run-dir", str(run_dir)]
    env = dict(env, OMP_NUM_THREADS="1", **{hang_run.HANG_LOCAL_RANK_ENV: "1"})
    nodes = [subprocess.Popen([*cmd, "--nproc-per-node", n, *args], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for n in ("2", "1")]
    t0, killed = time.monotonic(), None
    try:  # the kill: local rank 1's measuring process, mid-run (its node's local rank 0 goes on)
        while killed is None and time.monotonic() - t0 < 240:
            for path in run_dir.glob("rank*-*/run.json"):
                meta = status_of(path)
                if meta and meta.get("status") == "running" and meta.get("pid") and local_rank(meta["pid"]) == "1":
                    os.kill(meta["pid"], signal.SIGKILL)
                    killed = int(path.parent.name.split("-")[0].removeprefix("rank"))
                    break
            time.sleep(0.02)
        outs = [n.communicate(timeout=300)[0] for n in nodes]
    finally:
        for n in nodes:
            if n.poll() is None:
                n.kill()
    return SimpleNamespace(run_dir=run_dir, killed=killed, returncodes=[n.returncode for n in nodes], outs=outs,
                           seconds=time.monotonic() - t0)


@pytest.mark.slow
def test_two_nodes_lose_only_the_killed_rank(two_nodes):
    run_dir, killed, outs = two_nodes.run_dir, two_nodes.killed, two_nodes.outs
    assert killed is not None, "local rank 1 never started measuring"
    print(f"\ntwo nodes, one rank killed: {two_nodes.seconds:.1f} s")
    assert two_nodes.returncodes == [0, 0], outs
    ranks = json.loads((run_dir / "ranks.json").read_text())
    assert ranks["world"] == 3 and [m["rank"] for m in ranks["missing"]] == [killed]
    assert ranks["missing"][0]["why"] == f"{DIED} (signal 9)"
    dead = json.loads(next(run_dir.glob(f"rank{killed}-*/run.json")).read_text())
    assert dead["status"] == f"{DIED} (signal 9)"
    fleet = pd.read_csv(run_dir / "fleet.csv")
    survivors = sorted(f"rank{r}" for r in {0, 1, 2} - {killed})
    assert sorted(fleet["run"].map(lambda r: Path(r).name.split("-")[0])) == survivors
    assert (fleet["status"] == "complete").all() and fleet["id"].nunique() == 1   # one CPU, measured twice
    md = (run_dir / "fleet.md").read_text()
    left = md.split("## Left out")[1]
    assert f"rank{killed}-" in left and f"{DIED} (signal 9)" in left
    said = "".join(outs)
    assert f"roofbench: rank {killed} (" in said and DIED in said


def quick_args(**kw):
    from argparse import Namespace
    return Namespace(**dict(dict(deadline=None, only=["stream.copy/torch"], quick=True, dtype=["float32"], mode=None,
                                 max_ws=2**20, budget=None, min_time=None, sustain=0.0, max_memory=None), **kw))


def test_a_ranks_deadline_is_its_predicted_duration_with_a_margin():
    from bench.aot import predict
    from bench.hw.device import cpu_info
    from bench.measure.registry import load_all
    from bench.measure.runner import make_plan
    from bench.measure.timing import timer_config
    from bench.run import distributed as d
    cpu, args = cpu_info(), quick_args()
    plan = make_plan(load_all(), cpu, args.only, True, args.dtype, None, args.max_ws)
    pred = predict.predict(plan, cpu, timer_config(True, None, None), True, exact_compiles=False, sustain_s=0.0)
    assert 0 < pred.total_s < 60
    assert d.deadline_s(args, cpu) == pytest.approx(3 * pred.total_s + 600, rel=0.05)  # free memory may move the budget
    assert d.deadline_s(quick_args(deadline=42.0), cpu) == 42.0


class DeadlineOnCue:
    """A spawned process (as supervise makes one) whose first join(timeout), supervise's wait for
    its deadline, also ends when the test sets `cue`: the deadline comes once the test has hung
    the process, however long this machine took to start it, and the test waits out no clock."""
    cue = threading.Event()

    def __init__(self, *args, **kw):
        self._proc, self._waited = multiprocessing.get_context("spawn").Process(*args, **kw), False

    def __getattr__(self, name):
        return getattr(self._proc, name)

    def join(self, timeout=None):
        if self._waited:  # the grace after the SIGINT, and the reaping after the kill: as they are
            return self._proc.join(timeout)
        self._waited, end = True, time.monotonic() + timeout
        while self._proc.is_alive() and not self.cue.is_set() and time.monotonic() < end:
            self._proc.join(0.05)
        return None


@pytest.mark.slow
def test_a_hung_measurement_is_stopped_at_its_deadline_and_marked(tmp_path, monkeypatch):
    """The test hangs the measuring process itself (SIGSTOP, as a wedged driver call would):
    it ignores the SIGINT at the deadline, so it is killed grace_s later and marked."""
    from bench.run import distributed as d
    monkeypatch.setattr(d, "mp", SimpleNamespace(get_context=lambda kind: SimpleNamespace(Process=DeadlineOnCue)))
    DeadlineOnCue.cue.clear()
    args = quick_args(out=tmp_path, outlier_pct=5.0)
    got = {}
    t = threading.Thread(target=lambda: got.update(r=d.supervise(tmp_path / "rank0-cpu", args, "cpu", 600.0,
                                                                  say=lambda line: None, grace_s=1.0)))
    t0 = time.monotonic()
    t.start()
    stopped = None
    while stopped is None and t.is_alive():
        meta = status_of(tmp_path / "rank0-cpu" / "run.json")
        if meta and meta.get("status") == "running" and meta.get("pid"):
            os.kill(meta["pid"], signal.SIGSTOP)
            stopped = meta["pid"]
            DeadlineOnCue.cue.set()  # hung: its deadline comes now
        time.sleep(0.02)
    t.join(120)
    assert stopped, "the measurement ended before the test could hang it"
    status, code = got["r"]
    print(f"\nhung at {time.monotonic() - t0:.1f} s in, stopped: {status} (exit {code})")
    assert status.startswith(f"{PAST_DEADLINE} of 600 s") and code == -9
    assert status_of(tmp_path / "rank0-cpu" / "run.json")["status"] == status
