"""Every refusal that tells the user what to do, followed: the refusal first (one sentence,
exit 2), then the command as its advice says (the value it names, read from the sentence
itself where it names one), which must then work (exit 0). Options are checked the same way
before a dry run or --list as before a measured run, so the follow-up is a dry run (nothing
is measured) or --list."""
import re
import shlex
import shutil
from pathlib import Path

import pytest

import run_bench

ROOT = Path(__file__).parent.parent
DATA = Path(__file__).parent / "data"


def refusal(argv, capsys) -> str:
    capsys.readouterr()
    assert run_bench.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("roofbench: ") and "\n" not in err and "Traceback" not in err, err
    return err


def works(argv, capsys) -> str:
    capsys.readouterr()
    rc = run_bench.main(argv)
    out = capsys.readouterr()
    assert rc == 0, (argv, out.err)
    return out.out + out.err


# refused command -> (a pattern of its advice, the command that follows it: {0} is the pattern's first group).
# Both run with the rest of the command the same (a quick stream copy, so the dry run is short).
QUICK = "--only stream.copy --quick"
CASES = {
    "--only nosuchop --quick": (r"choose from families (\w+),", "--only {0} --quick --dry-run"),
    f"{QUICK} --dtype fp64": (r"they have (\w+)\.", f"{QUICK} --dtype {{0}} --dry-run"),
    f"{QUICK} --device cuda": (r"use --device (\w+)", f"{QUICK} --device {{0}} --dry-run"),
    f"{QUICK} --max-ws 10KiB": (r"(?:give at least --max-ws |give a larger --max-ws \(e\.g\. )([^,)\s]+)", f"{QUICK} --max-ws {{0}} --dry-run"),
    "--only stream --quick --max-ws 20KiB": (r"give at least --max-ws ([^,\s]+),",
                                             "--only stream --quick --max-ws {0} --dry-run"),
    f"{QUICK} --max-memory 10TB": (r"\(e\.g\. (\S+)\)", f"{QUICK} --max-memory {{0}} --dry-run"),
    f"{QUICK} --min-time 5 --budget 1": (r"\(e\.g\. ([\d.]+)\)", f"{QUICK} --min-time {{0}} --budget 1 --dry-run"),
    "--only transfer --quick": (r"(see --list)", "--only transfer --list"),
    "--comm --procs 1": (r"give --procs (\d+) or more", "--comm --procs {0} --list"),
    "--procs 2": (r"goes with (--all-devices or --comm)", "--comm --procs 2 --list"),
    f"{QUICK} --counters --comm": (r"run the device on its own with (--counters)", f"{QUICK} --counters --dry-run"),
    f"{QUICK} --out README.md": (r"\(e\.g\. (results/)\)", f"{QUICK} --out {{tmp}}/{{0}} --dry-run"),
}


@pytest.mark.parametrize("refused", sorted(CASES))
def test_a_refusals_advice_followed_works(refused, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("ROOFBENCH_CACHE", str(tmp_path / "cache"))
    if "--device cuda" in refused and __import__("torch").cuda.is_available():
        pytest.skip("this machine has CUDA: --device cuda is no refusal here")
    pattern, follow = CASES[refused]
    err = refusal(shlex.split(refused), capsys)
    m = re.search(pattern, err)
    assert m, (pattern, err)
    works(shlex.split(follow.format(*m.groups(), tmp=tmp_path)), capsys)


def test_a_cut_last_row_deleted_as_advised_keeps_the_rows_before_it(capsys, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(DATA / "run_a", run)
    csv = run / "measurements.csv"
    rows = csv.read_bytes().count(b"\n") - 1
    csv.write_bytes(csv.read_bytes()[:-40])       # the process died inside the last row
    err = refusal(["report", str(run)], capsys)
    assert "delete that partial last line to keep the rows before it" in err
    raw = csv.read_bytes()
    csv.write_bytes(raw[:raw.rindex(b"\n") + 1])  # done exactly as it says
    out = works(["report", str(run)], capsys)
    assert f"holds {rows - 1} of the {rows} points run.json records: the last 1 point (cut off its end) is lost" in out
    assert "report:" in out
