"""Every Python example in the README and in
REFERENCE.md runs as written, from outside the checkout (PYTHONPATH, as the README says), on
the CPU, in a few seconds.

The examples name the committed CPU reference run; here that name points at a copy of a
small recorded run (tests/data/run_a), in a scratch folder, so nothing committed changes."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
DOCS = ("README.md", "REFERENCE.md")
TEXT = {name: (ROOT / name).read_text() for name in DOCS}
README = TEXT["README.md"]
BLOCKS = [(name, i, code) for name in DOCS
          for i, code in enumerate(re.findall(r"```python\n(.*?)```", TEXT[name], re.S))]


def test_the_readme_has_python_examples_and_says_how_to_import_from_elsewhere():
    assert any(name == "README.md" for name, _, _ in BLOCKS)
    assert "PYTHONPATH=/path/to/roofbench" in README and 'sys.path.insert(0, "/path/to/roofbench")' in README


def test_the_readme_links_to_the_reference_and_its_sections_exist():
    assert "(REFERENCE.md)" in README
    headings = {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
                for h in re.findall(r"^#+ (.+)$", TEXT["REFERENCE.md"], re.M)}
    anchors = set(re.findall(r"\(REFERENCE\.md#([\w\-]+)\)", README))
    anchors |= set(re.findall(r"\]\(#([\w\-]+)\)", TEXT["REFERENCE.md"]))
    assert anchors and anchors <= headings, sorted(anchors - headings)


@pytest.mark.parametrize("doc,i,code", BLOCKS, ids=[f"{name}-{i}" for name, i, _ in BLOCKS])
def test_doc_example_runs_as_written(doc, i, code, tmp_path):
    for name in set(re.findall(r'"results/([^"/]+)"', code)):
        shutil.copytree(ROOT / "tests" / "data" / "run_a", tmp_path / "results" / name)
    env = dict(os.environ, PYTHONPATH=str(ROOT), CUDA_VISIBLE_DEVICES="")
    env.pop("TRITON_INTERPRET", None)
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, f"{doc}, Python block {i}: " + r.stderr[-3000:]
