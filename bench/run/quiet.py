"""The profiler's own log lines kept out of what the suite prints.

torch.profiler's Kineto writes log lines straight to the process's stderr (file descriptor 2, below Python's
sys.stderr) as it starts and stops: "USDT:2026-12-05 06:39:41 31916:31916
SyncActivityProfilerHandler.cpp:52] profiler_start", "STAGE:... ActivityProfilerController.cpp:...]
Completed Stage: Warm Up". They say nothing about the program profiled.

    profiler_quiet()        a context manager: file descriptor 2 goes to a temporary file while it is open;
                            on leaving, every line but the profiler's own is written back to it, in order
    quietly(cm)             a context manager: cm (a torch.profiler.profile) entered and left under
                            profiler_quiet, what runs inside it not
    is_profiler_line(line)  whether a line is one of the profiler's own (PROFILER_LINE, severity in QUIET)

Only the profiler's starting and stopping run inside it, never the program's steps, so what the program
writes to stderr while it runs still appears as it runs. A line of the profiler's at WARNING or ERROR
severity is passed on: it may say why the profile lacks something.
"""
from __future__ import annotations

import os
import re
import sys
import tempfile
from contextlib import contextmanager

# Kineto's log line: SEVERITY:YYYY-MM-DD HH:MM:SS PID:TID FILE.cpp:LINE] message
PROFILER_LINE = re.compile(r"^([A-Z]+):\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \d+:\d+ [\w./-]+\.(?:cpp|h|cc):\d+\] ")
QUIET = {"USDT", "STAGE", "INFO", "VERBOSE", "LOG", "DEBUG"}


def is_profiler_line(line: str) -> bool:
    """Return whether line is a log line of the profiler's own at a quiet severity (the module docstring)."""
    m = PROFILER_LINE.match(line)
    return bool(m) and m.group(1) in QUIET


@contextmanager
def profiler_quiet():
    """Send file descriptor 2 to a temporary file while open; on leaving, write back every line of it that
    is_profiler_line does not drop."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            kept = [ln for ln in held.read().decode(errors="replace").splitlines(keepends=True)
                    if not is_profiler_line(ln)]
            data = "".join(kept).encode()
            while data:
                data = data[os.write(2, data):]


@contextmanager
def quietly(cm):
    """Enter cm under profiler_quiet, run the body with stderr as it was, and leave cm under profiler_quiet
    (even when the body raises); yield what cm's __enter__ returned."""
    with profiler_quiet():
        entered = cm.__enter__()
    try:
        yield entered
    except BaseException:
        with profiler_quiet():
            if not cm.__exit__(*sys.exc_info()):
                raise
    else:
        with profiler_quiet():
            cm.__exit__(None, None, None)
