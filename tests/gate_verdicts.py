"""A pytest plugin that writes each case's verdict the moment it is reached, so a check cut
short keeps every verdict before the cut (`python -m pytest -p tests.gate_verdicts`, from the
repository root: the device check's gates, bench/devcheck/plan.py).

It appends JSON lines to the file named by VERDICTS_ENV, flushed and synced one by one:
    {"event": "collected", "cases": {NODEID: IMPL, ...}}     the cases this session runs
    {"event": "start", "case": NODEID, "impl": IMPL}         as a case begins
    {"event": "verdict", "case": NODEID, "impl": IMPL, "outcome": "passed" | "failed" | "skipped",
     "seconds": S, "why": the failure's first line}            as it ends
A case with a start and no verdict is the one a kill stopped (bench/devcheck/main.py writes it
"hung").
IMPL is the registry impl the case gates: its "op" and "impl" parameters ("gemv.decode",
"triton_rows" -> "gemv.decode/triton_rows"), else the test module's IMPL_OF[test name], else
null (a case that gates no impl)."""
from __future__ import annotations

import json
import os

import pytest

VERDICTS_ENV = "ROOFBENCH_VERDICTS"   # bench/devcheck/main.py sets it
_IMPLS: dict = {}   # nodeid -> impl id, from the collected items


def impl_of(item) -> str | None:
    """Return the impl id a collected case gates, or None."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    if "op" in params and "impl" in params:
        return f"{params['op']}/{params['impl']}"
    name = getattr(item, "originalname", None) or item.name
    return getattr(item.module, "IMPL_OF", {}).get(name)


def write(line: dict) -> None:
    path = os.environ.get(VERDICTS_ENV)
    if not path:
        return
    with open(path, "a") as f:
        f.write(json.dumps(line) + "\n")
        f.flush()
        os.fsync(f.fileno())


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    _IMPLS.update({item.nodeid: impl_of(item) for item in items})
    write({"event": "collected", "cases": {item.nodeid: _IMPLS[item.nodeid] for item in items}})


def pytest_runtest_logstart(nodeid, location):
    write({"event": "start", "case": nodeid, "impl": _IMPLS.get(nodeid)})


@pytest.hookimpl(trylast=True)
def pytest_runtest_logreport(report):
    # the call's report, or the set-up's when it failed or skipped (no call follows)
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        why = None
        if report.failed and report.longrepr:
            crash = getattr(getattr(report.longrepr, "reprcrash", None), "message", None)
            why = (crash or str(report.longrepr)).strip().splitlines()[0]
        write({"event": "verdict", "case": report.nodeid, "impl": _IMPLS.get(report.nodeid),
               "outcome": report.outcome, "seconds": round(report.duration, 3), "why": why})
