"""Where a path the user names lies, and the error a run folder that cannot be read raises.

roofbench runs from any folder (`python /path/to/roofbench/run_bench.py`, or a script with the
checkout on PYTHONPATH), and its docs name committed runs relative to the checkout
(`results/<run>`). A relative path that does not exist where the command runs, but does in
the checkout, is the checkout's (`existing`); one that exists in neither is refused in one
sentence that says where it was looked for (`no_such_run`)."""
from __future__ import annotations

from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent.parent  # the folder holding run_bench.py, bench/ and results/

# ResultsError.code: why a run folder or a results file cannot be read
CODES = {
    "missing": "the folder does not exist, here or in the checkout",
    "not_a_folder": "a file was given for a run folder",
    "not_a_run": "the folder lacks a file every run writes (run.json, measurements.csv, roofs.json)",
    "corrupt": "a file cannot be parsed, or a row has no status",
    "cut_row": "measurements.csv ends inside a row (a run stopped while writing it)",
    "schema": "a file of another schema version, or lacking the schema's columns",
    "mismatch": "measurements.csv and run.json name different points",
    "same_folder": "a derived folder named as the run folder itself",
}


class ResultsError(ValueError):
    """A run folder or results file that cannot be read: one sentence (str), and `code`, one of
    CODES, saying which kind of fault it is."""

    def __init__(self, message: str, code: str = "corrupt"):
        assert code in CODES, code
        super().__init__(message)
        self.code = code


def existing(path) -> Path:
    """Return path as a Path: as given when it exists here (relative to the working folder) or
    is absolute; the checkout's when it is relative, missing here and present there; else as
    given (its reader refuses it, with `no_such_run`'s sentence)."""
    p = Path(path)
    if p.is_absolute() or p.exists() or not (CHECKOUT / p).exists():
        return p
    return CHECKOUT / p


def no_such_run(path) -> ResultsError:
    """Return the refusal of a run folder that exists nowhere: one sentence naming both places looked in."""
    p = Path(path)
    where = "" if p.is_absolute() else f" here ({Path.cwd()}) or in the checkout ({CHECKOUT})"
    return ResultsError(f"run folder {p} does not exist{where}.", code="missing")


def clause(e: BaseException) -> str:
    """Return an error's one sentence as a clause of another (its final period dropped)."""
    return str(e).strip().rstrip(".")
