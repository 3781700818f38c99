"""The pytest-benchmark entry point records rates and intensity in extra_info."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import session_run

ROOT = Path(__file__).parent.parent


@session_run
def benchmark_run(tmp, env):
    """Return (the CompletedProcess, its --benchmark-json file) of pytest-benchmark on the torch
    float32 stream copy of tests/bench_ops.py, in a process of its own."""
    out = tmp / "b.json"
    r = subprocess.run([sys.executable, "-m", "pytest", "tests/bench_ops.py", "-q", "--benchmark-enable", "-k",
                        "stream.copy/torch and float32", f"--benchmark-json={out}", "-p", "no:cacheprovider"],
                       capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    return r, out


@pytest.mark.slow
def test_benchmarks_record_rates(benchmark_run):
    r, out = benchmark_run
    assert r.returncode == 0, r.stdout[-2000:]
    [b] = json.loads(out.read_text())["benchmarks"]
    info = b["extra_info"]
    assert info["op"] == "stream.copy" and info["intensity"] == 0
    assert info["gbps"] == pytest.approx(info["bytes"] / b["stats"]["median"] / 1e9)
