"""Every Python example in the README and in
REFERENCE.md runs as written, from outside the checkout (PYTHONPATH, as the README says), on
the CPU, in a few seconds.

The examples name committed runs; they run in conftest.py's doc_examples, from a folder outside
a copy of the checkout whose results/ are the copy's (tests/test_nothing_rewritten.py checks that
they leave its tracked files as committed), so nothing committed here changes."""
import re
from pathlib import Path

import pytest
from conftest import DOCS, doc_blocks

ROOT = Path(__file__).parent.parent
TEXT = {name: (ROOT / name).read_text() for name in DOCS}
README = TEXT["README.md"]
BLOCKS = doc_blocks(ROOT)


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


@pytest.mark.slow
@pytest.mark.parametrize("doc,i", [(name, i) for name, i, _ in BLOCKS], ids=[f"{name}-{i}" for name, i, _ in BLOCKS])
def test_doc_example_runs_as_written(doc, i, doc_examples):
    r = doc_examples[(doc, i)]  # conftest.py: each block run once, as written, from outside the checkout
    assert r.returncode == 0, f"{doc}, Python block {i}: " + r.stderr[-3000:]
