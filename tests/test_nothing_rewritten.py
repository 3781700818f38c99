"""In a copy of the repository, `report` on every
committed run, every Python example of README.md and REFERENCE.md as written (the API
example's add_to_run on a committed run included) and the custom-kernel example leave no
tracked file modified: what was measured, and the files derived from it, stay as committed.

The copy and the examples' runs are conftest.py's repo_copy and doc_examples (tests/test_readme.py
reads the same runs); the reports run beside the custom-kernel example, in a process of their own."""
import subprocess
import sys

import pytest
from conftest import user_env

from bench.results import METHOD_VERSION

EXAMPLE_RUN = "cpu-amd-epyc-20261130T094352Z"  # the committed run REFERENCE.md's API example adds points to
# each argument's `run_bench.py report RUN` in turn, through the CLI's entry point in one process
# (a fresh interpreter per run would add seconds of imports each and check nothing more); the
# exit code is the first one that is not 0
REPORT_EACH = """
import sys
import run_bench
codes = []
for run in sys.argv[1:]:
    codes.append(run_bench.main(["report", run]))
    print(f"report {run}: {codes[-1]}", flush=True)
sys.exit(next((c for c in codes if c), 0))
"""


@pytest.mark.slow
def test_reports_and_doc_examples_modify_no_tracked_file(repo_copy, doc_examples):
    repo = repo_copy
    for (doc, i), r in doc_examples.items():  # run as written, from outside the copy
        assert r.returncode == 0, f"{doc}, Python block {i}: " + r.stderr[-2000:]
    env = user_env(PYTHONPATH=str(repo), CUDA_VISIBLE_DEVICES="")
    runs = sorted(p.parent for p in (repo / "results").glob("*/run.json"))
    assert len(runs) >= 6
    names = [str(run.relative_to(repo)) for run in runs]
    # the reports (seconds of charts each) in two processes, every other run each, beside the example
    reports = [subprocess.Popen([sys.executable, "-c", REPORT_EACH, *names[k::2]], cwd=repo, env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE) for k in (0, 1)]
    try:
        r = subprocess.run([sys.executable, "-m", "bench.examples.custom_kernel", f"results/{EXAMPLE_RUN}"], cwd=repo,
                           env=env, capture_output=True, text=True, timeout=600, check=False)
        done = [p.communicate(timeout=600) for p in reports]
    finally:
        for p in reports:
            if p.poll() is None:
                p.kill()
    assert r.returncode == 0, r.stderr[-2000:]
    for p, (_, err) in zip(reports, done):
        assert p.returncode == 0, err[-2000:]
    said = sorted(line for out, _ in done for line in out.splitlines() if line.startswith("report results/"))
    assert said == sorted(f"report {name}: 0" for name in names), said
    changed = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=repo, capture_output=True,
                             text=True, check=True).stdout
    assert changed == "", changed
    derived = list((repo / "results" / EXAMPLE_RUN / "derived").iterdir())
    # add_to_run wrote beside the run
    assert any(d.name.startswith(f"m{METHOD_VERSION}-") and "-user-" in d.name for d in derived)
