"""One bounded step of the device check: a command in a process group of its own, stopped at
its limit however it hangs.

A kernel that hangs inside a CUDA synchronize never returns to the interpreter, so a SIGINT
never lands and the process must be killed. The watchdog sends SIGINT to the whole group at
limit - grace, or when the step says it is stuck (a gate case past its own limit), then
SIGKILL a grace later if it is still there (a run keeps its rows, derives its roofs and
writes its report on the SIGINT; pytest writes its summary). A killed run leaves its
folder as it was: measurements.csv and samples.jsonl are appended and flushed per point
(bench/results.py), so `run_bench.py report RUN_DIR` derives it later."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass

ENDED, INTERRUPTED, KILLED = "ended", "interrupted", "killed"   # how a step stopped


@dataclass
class Outcome:
    """How one bounded command ended: its exit code (a negative signal number when a signal
    ended it), its wall seconds, and `how`: ENDED by itself, INTERRUPTED (SIGINT at
    limit - grace, then it ended) or KILLED (SIGKILL at the limit)."""
    rc: int
    seconds: float
    how: str


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _wait(proc, until: float, stalled, poll_s: float) -> int | None:
    """Return proc's exit code once it ends, or None at `until` or as soon as stalled() says so."""
    while True:
        rc = proc.poll()
        if rc is not None:
            return rc
        now = time.monotonic()
        if now >= until or (stalled is not None and stalled()):
            return None
        time.sleep(min(poll_s, until - now))


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_bounded(argv: list[str], limit_s: float, grace_s: float, log=None, env: dict | None = None,
                cwd: str | None = None, stalled=None, poll_s: float = 0.2) -> Outcome:
    """Run argv in a new session (its own process group), output to log (an open file, or
    inherited), for at most limit_s seconds: SIGINT to the group at limit_s - grace_s, or as
    soon as stalled() (polled every poll_s) says it is stuck, then SIGKILL grace_s later or at
    limit_s, whichever comes first. Whatever of the group outlives the command is killed too,
    so no compile worker or stray child holds the GPU into the next step."""
    t0 = time.monotonic()
    end = t0 + limit_s
    # a process started in the background (`cmd &`, nohup) ignores SIGINT, and its children
    # inherit that: the command gets SIGINT's default back, or the interrupt would never land
    ignored = signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT if log is not None else None,
                            env=env, cwd=cwd, start_new_session=True,
                            preexec_fn=_default_sigint if ignored else None)
    how = ENDED
    try:
        rc = _wait(proc, end - grace_s, stalled, poll_s)
        if rc is None:
            how = INTERRUPTED
            _signal_group(proc.pid, signal.SIGINT)
            rc = _wait(proc, min(end, time.monotonic() + grace_s), None, poll_s)
            if rc is None:
                how = KILLED
                _signal_group(proc.pid, signal.SIGKILL)
                rc = proc.wait()
    finally:
        if proc.poll() is None:  # the parent itself interrupted: take the step down with it
            _signal_group(proc.pid, signal.SIGKILL)
            proc.wait()
        _signal_group(proc.pid, signal.SIGKILL)
    return Outcome(rc, time.monotonic() - t0, how)
