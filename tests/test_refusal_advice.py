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
from bench.results import load_run
from bench.run import options

ROOT = Path(__file__).parent.parent
DATA = Path(__file__).parent / "data"


def refusal(argv, capsys) -> str:
    capsys.readouterr()
    try:
        rc = run_bench.main(argv)
    except SystemExit as e:   # argparse's errors end the parse with exit code 2
        rc = e.code
    assert rc == 2
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
    f"{QUICK} --dtype fp64": (r"they run (\w+)\.", f"{QUICK} --dtype {{0}} --dry-run"),
    f"{QUICK} --device cuda": (r"use --device (\w+)", f"{QUICK} --device {{0}} --dry-run"),
    f"{QUICK} --max-ws 10KiB": (r"(?:give at least --max-ws |give a larger --max-ws \(e\.g\. )([^,)\s]+)",
                                f"{QUICK} --max-ws {{0}} --dry-run"),
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
    refused = len(options.REFUSED)
    refusal(["report", str(run), "--no-charts"], capsys)  # the pictures: tests/test_report.py
    assert options.REFUSED[refused:] == ["cut_row"]
    raw = csv.read_bytes()
    csv.write_bytes(raw[:raw.rindex(b"\n") + 1])  # delete the partial last line, as it says
    out = works(["report", str(run), "--no-charts"], capsys)
    kept = load_run(run)
    assert (len(kept.measurements), kept.lost_points) == (rows - 1, 1)
    assert kept.lost_note in out and "report:" in out


@pytest.mark.parametrize("argv,meant", [
    ("--quik", "--quik (did you mean '--quick'?)"),
    ("--only strem", "unknown op or impl 'strem' (did you mean 'stream'?)"),
    ("--only stream.tirad", "(did you mean 'stream.triad'?)"),
    ("reprot x", "reprot (did you mean 'report'?)"),
    ("model lama-3-8b", "unknown model 'lama-3-8b' (did you mean 'llama-3-8b'?)"),
    ("model tiny --bach 2", "--bach (did you mean '--batch'?)"),
    ("--only stream.copy --quick --dtype fp33", "dtype fp33 (did you mean 'fp32'?)"),
])
def test_a_near_miss_is_named(argv, meant, capsys):
    assert meant in refusal(shlex.split(argv), capsys)


def test_dtypes_are_read_case_blind(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("ROOFBENCH_CACHE", str(tmp_path / "cache"))
    works(["--only", "stream.copy", "--quick", "--dtype", "FP32", "--dry-run"], capsys)
    from bench.util import precision_name
    assert precision_name("BFloat16") == "bf16"


def test_list_honours_only_and_says_a_family_reason_once(capsys):
    from bench.measure.registry import load_all
    out = works(["--list", "--only", "stream,gemm.square"], capsys)
    ops = [line.split()[0] for line in out.splitlines() if line and not line.startswith((" ", "device"))]
    assert ops[0] == "stream.copy" and "gemm.square" in ops and "fma.chains" not in ops and "gemv.decode" not in ops
    reg, said, op = load_all(), {}, None
    for line in out.splitlines():
        if line and not line.startswith(" ") and not line.startswith("device"):
            op = reg.ops[line.split()[0]]
        if not line.startswith("  impl ") or "  " not in line.split(")", 1)[-1]:
            continue
        text = line.split(")", 1)[1].strip()
        m = re.match(r"runs (\d+) of (\d+) points here; (.*)", text)
        parts = re.split(r"; (?=\d+ skipped: )", m.group(3)) if m else [text.removeprefix("skipped here: ")]
        skipped = sum(int(re.match(r"(\d+) skipped", p).group(1)) for p in parts) if m else 0
        if m:   # every point of the op is either run or skipped, counted once
            assert int(m.group(1)) + skipped == int(m.group(2)) == len(op.points(_device(), False))
        for p in parts:
            reason = re.sub(r"^\d+ skipped: ", "", p)
            if not reason.startswith("as "):
                assert (op.family, reason) not in said, (reason, "said twice in", op.family)
                said[(op.family, reason)] = line
    quick = works(["--list", "--only", "stream.scale", "--quick"], capsys)
    # stream.scale runs in full runs only: a quick --list shows it with no points and no impl lines of counts
    lines = quick.splitlines()
    empty = not any(line.startswith("  impl ") for line in lines) and \
        any(line.startswith("  no points") and "stream.scale/" in line for line in lines)
    assert "(quick: 0 values)" not in quick and empty or "cuda" in lines[0]


def _device():
    from bench.hw import detect
    return detect.resolve(None)


def test_the_apis_refusals_followed_work():
    """measure() refusing a precision the roofs have no roof for says to pass precision='';
    roofs= refusing a list of numbers says to give api.roofs_from(RUN_DIR): both, done, work."""
    import warnings

    import torch

    from bench import api
    x = torch.randn(64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", api.ForeignRoofsWarning)
        roofs = api.roofs_from(DATA / "run_a")
    with pytest.raises(api.APIError) as e:
        api.measure(lambda: x * 2, flops=64, bytes=512, precision="fp8e4m3", roofs=roofs, device="cpu")
    assert "pass precision=''" in str(e.value)
    assert api.measure(lambda: x * 2, flops=64, bytes=512, precision="", roofs=roofs, device="cpu",
                       budget_s=0.02).status == "ok"
    with pytest.raises(api.APIError) as e:
        api.measure(lambda: x * 2, flops=64, bytes=512, roofs=[1, 2], device="cpu")
    assert e.value.code == "not_a_roof"
    assert api.measure(lambda: x * 2, flops=64, bytes=512, roofs=roofs, device="cpu", budget_s=0.02).status == "ok"
