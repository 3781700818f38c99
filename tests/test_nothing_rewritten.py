"""In a copy of the repository, `report` on every
committed run, every Python example of README.md and REFERENCE.md as written (the API
example's add_to_run on a committed run included) and the custom-kernel example leave no
tracked file modified: what was measured, and the files derived from it, stay as committed.

The copy, the examples' runs and the reports are conftest.py's repo_copy and copy_runs (through
doc_examples, custom_kernel_example and committed_reports; tests/test_readme.py and
tests/test_api.py read the same runs), in a process of their own, once per session."""
import subprocess

import pytest
from conftest import CUSTOM_KERNEL_RUN

from bench.results import METHOD_VERSION

EXAMPLE_RUN = "cpu-amd-epyc-20261130T094352Z"  # the committed run REFERENCE.md's API example adds points to


@pytest.mark.slow
def test_reports_and_doc_examples_modify_no_tracked_file(repo_copy, doc_examples, committed_reports,
                                                         custom_kernel_example):
    repo = repo_copy
    for (doc, i), r in doc_examples.items():  # run as written, from outside the copy
        assert r.returncode == 0, f"{doc}, Python block {i}: " + r.stderr[-2000:]
    runs = sorted(str(p.parent.relative_to(repo)) for p in (repo / "results").glob("*/run.json"))
    assert len(runs) >= 6 and sorted(committed_reports) == runs
    r = custom_kernel_example  # conftest.py: `python -m bench.examples.custom_kernel RUN` in the copy
    assert r.returncode == 0, r.stderr[-2000:]
    for name, r in committed_reports.items():
        assert r.returncode == 0 and "report: " in r.stdout, f"{name}: " + r.stderr[-2000:]
    changed = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=repo, capture_output=True,
                             text=True, check=True).stdout
    assert changed == "", changed
    # add_to_run wrote beside the runs: REFERENCE.md's API example and the custom-kernel example
    for run in (EXAMPLE_RUN, CUSTOM_KERNEL_RUN.split("/")[-1]):
        derived = list((repo / "results" / run / "derived").iterdir())
        assert any(d.name.startswith(f"m{METHOD_VERSION}-") and "-user-" in d.name for d in derived), run
