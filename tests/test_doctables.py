"""REFERENCE.md's generated tables are the code's (bench/doctables.py): the options, the
measurements.csv columns, the pictures and the thresholds, each between its markers."""
from pathlib import Path

from bench import doctables

ROOT = Path(__file__).parent.parent


def test_every_generated_table_is_the_one_in_reference():
    stale = doctables.differing((ROOT / "REFERENCE.md").read_text(), doctables.tables())
    assert not stale, (f"REFERENCE.md's tables differ from the code: {', '.join(stale)}; "
                       "python -m bench.doctables --write rewrites them")
