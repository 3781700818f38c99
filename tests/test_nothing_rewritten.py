"""Issue 31, items 1 and 2 ("done means"): in a copy of the repository, `report` on every
committed run, every Python example of README.md and REFERENCE.md as written (the API
example's add_to_run on a committed run included) and the custom-kernel example leave no
tracked file modified: what was measured, and the files derived from it, stay as committed."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.results import METHOD_VERSION

ROOT = Path(__file__).parent.parent
# each argument's `run_bench.py report RUN` in turn; the exit code is the first one that is not 0
REPORT_EACH = """
import sys
import run_bench
codes = []
for run in sys.argv[1:]:
    codes.append(run_bench.main(["report", run]))
    print(f"report {run}: {codes[-1]}", flush=True)
sys.exit(next((c for c in codes if c), 0))
"""
GIT = ["git", "-c", "user.email=t@example.invalid", "-c", "user.name=t", "-c", "commit.gpgsign=false"]


def _copy_of_the_repository(dest: Path) -> Path:
    """Return dest: the tracked files of this checkout as they are now, committed in a fresh repository."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    for name in filter(None, files.split("\0")):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    for args in (["init", "-q"], ["add", "-A", "-f"], ["commit", "-q", "-m", "copy"]):
        subprocess.run(GIT + args, cwd=dest, check=True, capture_output=True)
    return dest


@pytest.mark.slow
def test_reports_and_doc_examples_modify_no_tracked_file(tmp_path):
    repo = _copy_of_the_repository(tmp_path / "repo")
    env = dict(os.environ, PYTHONPATH=str(repo), CUDA_VISIBLE_DEVICES="")
    env.pop("TRITON_INTERPRET", None)
    runs = sorted(p.parent for p in (repo / "results").glob("*/run.json"))
    assert len(runs) >= 6
    # `run_bench.py report RUN` on each, through the CLI's entry point in one process of the copy
    # (a fresh interpreter per run would add seconds of imports each and check nothing more)
    r = subprocess.run([sys.executable, "-c", REPORT_EACH, *(str(run.relative_to(repo)) for run in runs)], cwd=repo,
                       env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    said = [line for line in r.stdout.splitlines() if line.startswith("report results/")]
    assert said == [f"report {run.relative_to(repo)}: 0" for run in runs], said
    for doc in ("README.md", "REFERENCE.md"):
        for i, code in enumerate(re.findall(r"```python\n(.*?)```", (repo / doc).read_text(), re.S)):
            r = subprocess.run([sys.executable, "-c", code], cwd=repo, env=env, capture_output=True, text=True,
                               timeout=600)
            assert r.returncode == 0, f"{doc}, Python block {i}: " + r.stderr[-2000:]
    r = subprocess.run([sys.executable, "-m", "bench.examples.custom_kernel", "results/cpu-amd-epyc-20261130T094352Z"],
                       cwd=repo, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    changed = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=repo, capture_output=True,
                             text=True, check=True).stdout
    assert changed == "", changed
    derived = list((repo / "results" / "cpu-amd-epyc-20261130T094352Z" / "derived").iterdir())
    assert any(d.name.startswith(f"m{METHOD_VERSION}-") and "-user-" in d.name for d in derived)  # add_to_run wrote beside the run
