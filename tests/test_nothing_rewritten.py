"""In a copy of the repository, `report` on every
committed run, every Python example of README.md and REFERENCE.md as written (the API
example's add_to_run on a committed run included) and the custom-kernel example leave no
tracked file modified: what was measured, and the files derived from it, stay as committed.

The copy and the examples' runs are conftest.py's repo_copy, doc_examples and custom_kernel_example
(tests/test_readme.py and tests/test_api.py read the same runs); the reports run in processes of
their own, beside the tests (committed_reports)."""
import subprocess
import sys

import pytest
from conftest import CUSTOM_KERNEL_RUN, background

from bench.results import METHOD_VERSION

EXAMPLE_RUN = "cpu-amd-epyc-20261130T094352Z"  # the committed run REFERENCE.md's API example adds points to
# each argument's `run_bench.py report RUN` after the first in turn, through the CLI's entry point
# in one process (a fresh interpreter per run would add seconds of imports each and check nothing
# more), with --no-charts but for the run the first argument names (the pictures, written into the
# derived folder only, cost seconds of CPU each run; tests/test_plot.py draws the committed runs'
# charts); the exit code is the first one that is not 0
REPORT_EACH = """
import sys
import run_bench
codes = []
for run in sys.argv[2:]:
    codes.append(run_bench.main(["report", run, *([] if run == sys.argv[1] else ["--no-charts"])]))
    print(f"report {run}: {codes[-1]}", flush=True)
sys.exit(next((c for c in codes if c), 0))
"""


@background(seconds=130)
def committed_reports(repo_copy, env):
    """Return [(returncode, stdout, stderr)] of `report` on every committed run of the copy, in
    two processes, every other run each, the newest H200 run's with its pictures; and the runs' names."""
    runs = sorted(p.parent for p in (repo_copy / "results").glob("*/run.json"))
    names = [str(run.relative_to(repo_copy)) for run in runs]
    drawn = max((n for n in names if "nvidia-h200" in n), default="-")
    env = dict(env, PYTHONPATH=str(repo_copy), CUDA_VISIBLE_DEVICES="")
    reports = [subprocess.Popen([sys.executable, "-c", REPORT_EACH, drawn, *names[k::2]], cwd=repo_copy, env=env,
                                text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for k in (0, 1)]
    try:
        done = [(p, *p.communicate(timeout=600)) for p in reports]
    finally:
        for p in reports:
            if p.poll() is None:
                p.kill()
    return [(p.returncode, out, err) for p, out, err in done], names


@pytest.mark.slow
def test_reports_and_doc_examples_modify_no_tracked_file(repo_copy, doc_examples, committed_reports,
                                                         custom_kernel_example):
    repo = repo_copy
    for (doc, i), r in doc_examples.items():  # run as written, from outside the copy
        assert r.returncode == 0, f"{doc}, Python block {i}: " + r.stderr[-2000:]
    done, names = committed_reports
    assert len(names) >= 6
    r = custom_kernel_example  # conftest.py: `python -m bench.examples.custom_kernel RUN` in the copy
    assert r.returncode == 0, r.stderr[-2000:]
    for code, _, err in done:
        assert code == 0, err[-2000:]
    said = sorted(line for _, out, _ in done for line in out.splitlines() if line.startswith("report results/"))
    assert said == sorted(f"report {name}: 0" for name in names), said
    changed = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=repo, capture_output=True,
                             text=True, check=True).stdout
    assert changed == "", changed
    # add_to_run wrote beside the runs: REFERENCE.md's API example and the custom-kernel example
    for run in (EXAMPLE_RUN, CUSTOM_KERNEL_RUN.split("/")[-1]):
        derived = list((repo / "results" / run / "derived").iterdir())
        assert any(d.name.startswith(f"m{METHOD_VERSION}-") and "-user-" in d.name for d in derived), run
