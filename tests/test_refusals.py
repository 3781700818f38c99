"""Every refusal REFERENCE.md lists holds. The list under "Every option is
checked before anything is measured" is parsed for its examples (each backticked command
line of two or more words); each must be in EXAMPLES below (so a refusal added to the docs
without a test fails here), and each ends with one sentence naming the input, exit code 2,
no traceback, and nothing written."""
import re
import shlex
from pathlib import Path

import pytest
import torch

import run_bench

ROOT = Path(__file__).parent.parent
REFERENCE = (ROOT / "REFERENCE.md").read_text()
CUDA = torch.cuda.is_available()

# example as the docs write it -> a piece of the one sentence it must end with
EXAMPLES = {
    "--only nosuchop": "nosuchop",
    "--mode warm,hot": "unknown timing mode in --mode 'warm,hot': use warm, cold",
    "--device tpu": "tpu",
    "--device cuda": "no CUDA device on this machine",
    "--only stream.copy --dtype fp64": "none of the selected ops has dtype fp64",
    "--budget 0": "argument --budget: takes a positive number of seconds, like 0.5 (got '0')",
    "--max-ws 0": "argument --max-ws: a size must be above zero (got '0')",
    "--procs abc": "argument --procs: invalid int value: 'abc'",
    "model tiny --batch 1,0": "argument --batch: takes comma-separated whole numbers of 1 or more",
    "--min-time 5 --budget 1": "--min-time 5 is not below --budget 1",
    "--comm --procs 1": "need at least 2 ranks",
    "--procs 2": "--procs goes with --all-devices or --comm",
    "--counters --comm":
        "--counters replays points of a single-device run: it does not go with --all-devices or --comm",
    "--only transfer": "every selected point would be skipped on cpu (host-device copies need a GPU)",
    "--max-ws 10KiB": "--max-ws 10 KiB is below what any memory level needs",
    "--max-memory 10TB": "--max-memory 10TB is more than the",
    "--out README.md": "--out README.md is a file, not a folder",
    "--out /proc/nope": "--out /proc/nope cannot be written",
    "report results/README.md": "is a file, not a run folder",
    "report /nonexistent/run": "run folder /nonexistent/run does not exist",
    "compare tests/data/run_a": "compare needs at least two run folders",
}
NEEDS_NO_CUDA = {"--device cuda", "--only transfer"}


def listed() -> list[str]:
    start = REFERENCE.index("Every option is checked before anything is measured.")
    block = REFERENCE[start:REFERENCE.index("`report` and `compare` read a run folder's files", start)]
    spans = re.findall(r"`([^`]+)`", block)
    return [s for s in spans if " " in s and (s.startswith("--") or s.split()[0] in ("report", "compare", "model"))]


def test_every_listed_refusal_has_a_case():
    docs = listed()
    assert len(docs) >= 15 and set(docs) == set(EXAMPLES), (sorted(set(docs) - set(EXAMPLES)),
                                                            sorted(set(EXAMPLES) - set(docs)))


@pytest.mark.parametrize("example", sorted(EXAMPLES))
def test_listed_refusal_holds(example, capsys, tmp_path, monkeypatch):
    if CUDA and example in NEEDS_NO_CUDA:
        pytest.skip("checks a machine without CUDA")
    monkeypatch.chdir(ROOT)  # the examples name paths from the repository root, as the docs do
    argv = shlex.split(example)
    out = tmp_path / "out"
    if argv[0] not in ("report", "compare") and "--out" not in argv:
        argv += ["--out", str(out)]  # where a run would write: it must stay unmade
    before = sorted(p.name for p in ROOT.iterdir())
    try:
        rc = run_bench.main(argv)
    except SystemExit as e:  # argparse's type checks end the parse
        rc = e.code
    err = capsys.readouterr().err
    assert rc == 2, err
    assert EXAMPLES[example] in err, err
    assert err.count("\n") == 1 and "Traceback" not in err and "usage:" not in err
    assert not out.exists() and sorted(p.name for p in ROOT.iterdir()) == before
