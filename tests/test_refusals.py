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
from bench.run.options import REFUSED

ROOT = Path(__file__).parent.parent
REFERENCE = (ROOT / "REFERENCE.md").read_text()
CUDA = torch.cuda.is_available()

# example as the docs write it -> (the reason code of its refusal, the input its one sentence names);
# bad_argument: argparse refused the option's value (its sentence starts "argument --NAME:")
EXAMPLES = {
    "--only nosuchop": ("unknown_name", "nosuchop"),
    "--mode warm,hot": ("unknown_mode", "warm,hot"),
    "--device tpu": ("unknown_device", "tpu"),
    "--device cuda": ("no_cuda", "cuda"),
    "--only stream.copy --dtype fp64": ("no_such_dtype", "fp64"),
    "--budget 0": ("bad_argument", "argument --budget"),
    "--max-ws 0": ("bad_argument", "argument --max-ws"),
    "--procs abc": ("bad_argument", "argument --procs"),
    "model tiny --batch 1,0": ("bad_argument", "argument --batch"),
    "--min-time 5 --budget 1": ("min_time_budget", "--min-time 5"),
    "--comm --procs 1": ("too_few_procs", "--procs 2"),
    "--procs 2": ("procs_alone", "--procs"),
    "--counters --comm": ("counters_multi", "--counters"),
    "--only transfer": ("all_skipped", "cpu"),
    "--max-ws 10KiB": ("max_ws_too_small", "--max-ws 10 KiB"),
    "--max-memory 10TB": ("max_memory_too_large", "--max-memory 10TB"),
    "--out README.md": ("out_is_file", "--out README.md"),
    "--out /proc/nope": ("out_unwritable", "--out /proc/nope"),
    "report results/README.md": ("not_a_folder", "results/README.md"),
    "report /nonexistent/run": ("missing", "/nonexistent/run"),
    "compare tests/data/run_a": ("too_few_runs", "compare"),
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
    REFUSED.clear()
    try:
        rc = run_bench.main(argv)
    except SystemExit as e:  # argparse's type checks end the parse
        rc = e.code
    err = capsys.readouterr().err
    code, named = EXAMPLES[example]
    assert rc == 2 and REFUSED == [code], (REFUSED, err)
    assert named in err, err
    assert err.count("\n") == 1 and "Traceback" not in err and "usage:" not in err
    assert not out.exists() and sorted(p.name for p in ROOT.iterdir()) == before
