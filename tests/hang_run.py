"""run_bench.py with a hung kernel, for the device check's rehearsal on a CPU
(tests/test_device_check.py): `python tests/hang_run.py RUN_BENCH_ARGS...` runs run_bench.py
as __main__, and after HANG_AFTER_ENV timed calls (default 2) the next one never returns and
never answers SIGINT or SIGTERM, as a kernel that hangs inside a CUDA synchronize: the main
thread blocks both signals and sleeps in C. Only SIGKILL ends it. The rows of the points
timed before it are in the run folder, as a real hang would leave them. Under torchrun, with
HANG_LOCAL_RANK_ENV set, only the worker of that LOCAL_RANK hangs (tests/test_fleet_nodes.py)."""
import os
import runpy
import signal
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HANG_AFTER_ENV = "ROOFBENCH_HANG_AFTER"
HANG_LOCAL_RANK_ENV = "ROOFBENCH_HANG_LOCAL_RANK"


def hang_forever() -> None:
    """Block SIGINT and SIGTERM in this thread and sleep in C for good."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    print(f"hang_run: pid {os.getpid()} hangs inside a timed call", flush=True)
    while True:
        time.sleep(3600)


def install(after: int) -> None:
    """Make the runner's timed call number after + 1 hang (bench.measure.runner.time_fn)."""
    from bench.measure import runner
    real, calls = runner.time_fn, [0]

    def timed(*args, **kwargs):
        calls[0] += 1
        if calls[0] > after:
            hang_forever()
        return real(*args, **kwargs)

    runner.time_fn = timed


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    if os.environ.get(HANG_LOCAL_RANK_ENV, os.environ.get("LOCAL_RANK")) == os.environ.get("LOCAL_RANK"):
        install(int(os.environ.get(HANG_AFTER_ENV, "2")))
    sys.argv = [str(ROOT / "run_bench.py"), *sys.argv[1:]]
    runpy.run_path(str(ROOT / "run_bench.py"), run_name="__main__")
