"""The profiler's own log lines (Kineto's "USDT:... profiler_start") stay out of what profile prints, while
every other line written to stderr, the program's own included, still appears."""
import os

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from bench.run.profile import capture
from bench.run.quiet import is_profiler_line, profiler_quiet, quietly

START = "USDT:2026-12-05 06:39:41 31916:31916 SyncActivityProfilerHandler.cpp:52] profiler_start\n"
STAGE = "STAGE:2024-01-02 03:04:05 77:77 ActivityProfilerController.cpp:314] Completed Stage: Warm Up\n"
WARNED = "WARNING:2026-12-05 06:39:41 31916:31916 CuptiActivityProfiler.cpp:100] no CUPTI\n"


def _profiler_lines(err: str) -> list[str]:
    return [ln for ln in err.splitlines(keepends=True) if is_profiler_line(ln)]


def test_the_profilers_lines_are_dropped_and_the_rest_kept_in_order(capfd):
    with profiler_quiet():
        for line in (START, "the program's own line\n", STAGE, WARNED, "last\n"):
            os.write(2, line.encode())             # C-level, as Kineto writes: below sys.stderr
    assert capfd.readouterr().err == "the program's own line\n" + WARNED + "last\n"
    assert [is_profiler_line(x) for x in (START, STAGE, WARNED, "USDT: not a log line\n")] == [True, True,
                                                                                               False, False]


def test_quietly_leaves_the_profiler_when_the_body_raises():
    seen = []

    class Recorder:
        def __enter__(self):
            seen.append("enter")
            return self

        def __exit__(self, *exc):
            seen.append(exc[0])
            return False
    with pytest.raises(ValueError), quietly(Recorder()):
        raise ValueError("boom")
    assert seen == ["enter", ValueError]


def test_capture_prints_none_of_the_profilers_lines_and_all_of_the_programs(capfd):
    with profile(activities=[ProfilerActivity.CPU]):       # this torch's profiler, unquieted
        torch.ones(4).sum()
    if not _profiler_lines(capfd.readouterr().err):
        pytest.skip("this torch's profiler writes no log lines of its own to stderr")
    x = torch.randn(64, 64)

    def step():
        os.write(2, b"step\n")
        return x @ x
    cap = capture(step, steps=2)
    err = capfd.readouterr().err
    assert _profiler_lines(err) == []
    # warm-up (at least two), two timed steps and the counting pass: each call's own line passes through
    assert err.count("step\n") >= 5 and err.replace("step\n", "") == ""
    assert len(cap.steps_s) == 2
