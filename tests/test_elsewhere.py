"""roofbench from another folder (REFERENCE.md, Installing: the checkout on PYTHONPATH, or
`python /path/to/roofbench/run_bench.py`): a relative path that does not exist where the
command runs but does in the checkout is the checkout's (bench.paths.existing), so the docs'
examples, which name committed runs as `results/<run>`, run as written from any folder; one
that exists nowhere is refused in one sentence whose ResultsError says why in its `code`.

Every `python run_bench.py ...` line of README.md and REFERENCE.md is run here from an empty
folder (COMMANDS), or is a synopsis, or is named in NOT_RUN with why; the Python blocks of both
run from an empty folder in conftest.py's copy_runs (tests/test_readme.py)."""
import json
import re
import shlex
from pathlib import Path

import pytest
from conftest import DOCS

from bench import api
from bench.paths import CHECKOUT, CODES, ResultsError, existing
from bench.results import load_meta, load_run, load_small

ROOT = Path(__file__).parent.parent
RUN = "results/cpu-amd-epyc-20261201T195923Z"      # the README's CPU run
OLDER = "results/cpu-amd-epyc-20261130T111616Z"    # REFERENCE.md's worked example of `check`: its baseline


def test_the_checkout_is_this_repository():
    assert CHECKOUT == ROOT.resolve()


def test_a_relative_path_missing_here_is_the_checkouts(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert existing(RUN) == CHECKOUT / RUN
    (tmp_path / "results").mkdir()  # one that exists here wins, whatever the checkout holds
    assert existing("results") == Path("results")
    assert existing("results/nope") == Path("results/nope")  # nowhere: as given, for its reader to refuse
    assert existing(tmp_path / "nope") == tmp_path / "nope"


@pytest.mark.filterwarnings("ignore::bench.api.ForeignRoofsWarning")  # a committed run: another machine's
def test_the_readers_find_a_committed_run_from_another_folder(tmp_path, monkeypatch):
    rows = (ROOT / RUN / "measurements.csv").read_text().count("\n") - 1
    monkeypatch.chdir(tmp_path)
    run = load_run(RUN)
    assert run.dir == CHECKOUT / RUN and len(run.measurements) == rows
    meta, roofs = load_small(RUN)
    assert meta == load_meta(RUN) and len(roofs) == len(run.roofs) > 0
    assert [r.name for r in api.roofs_from(RUN)] == [r["name"] for r in run.roofs]


def one_sentence(text: str) -> bool:
    return text.count("\n") == 0 and text.endswith(".") and "Traceback" not in text


def _run_folder(d: Path) -> Path:
    """Make d a readable run folder of one row: tests/data/run_a's run.json, roofs.json and first row."""
    d.mkdir(parents=True)
    for name in ("run.json", "roofs.json"):
        (d / name).write_text((ROOT / "tests/data/run_a" / name).read_text())
    (d / "measurements.csv").write_text("".join((ROOT / "tests/data/run_a/measurements.csv").open().readlines()[:2]))
    return d


@pytest.mark.parametrize("damage,code", [
    (lambda d: d.rename(d.parent / "elsewhere"), "missing"),
    (lambda d: (d / "run.json").unlink(), "not_a_run"),
    (lambda d: (d / "measurements.csv").unlink(), "not_a_run"),
    (lambda d: (d / "run.json").write_text("{"), "corrupt"),
    (lambda d: (d / "measurements.csv").write_text("op,family\nx,"), "cut_row"),
    (lambda d: (d / "run.json").write_text('{"schema_version": 99}'), "schema"),
    (lambda d: (d / "measurements.csv").write_text("op,family\nx,y\n"), "schema"),
])
def test_a_run_that_cannot_be_read_says_why_in_its_code(tmp_path, monkeypatch, damage, code):
    d = _run_folder(tmp_path / "results" / "r")
    load_run(d)  # readable before the damage
    damage(d)
    monkeypatch.chdir(tmp_path / "results")
    with pytest.raises(ResultsError) as e:
        load_run("r")
    assert e.value.code == code and code in CODES and one_sentence(str(e.value)), str(e.value)


def test_a_file_given_for_a_run_folder_is_not_a_folder(tmp_path):
    with pytest.raises(ResultsError) as e:
        load_run(ROOT / RUN / "run.json")
    assert e.value.code == "not_a_folder" and one_sentence(str(e.value))


def test_the_api_refuses_a_run_found_nowhere_in_one_sentence(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ResultsError) as e:
        api.roofs_from("results/nope")
    assert e.value.code == "missing" and one_sentence(str(e.value)) and e.value.__cause__ is None
    with pytest.raises(api.APIError) as e:  # roofs= a folder: its one sentence inside the API's
        api.measure(lambda: None, flops=1, bytes=1, roofs="results/nope", device="cpu")
    assert one_sentence(str(e.value)) and "results/nope" in str(e.value) and e.value.__cause__ is None


@pytest.mark.parametrize("argv", [
    ["report", "results/nope"],
    ["compare", "results/nope", RUN],
    ["model", "qwen2.5-0.5b", "--roofs", "results/nope"],
    ["profile", "bench/examples/profile_transformer.py", "--roofs", "results/nope"],
    ["check", "results/nope", "--baseline", RUN],
    ["fleet", "results/nope"],
])
def test_every_subcommand_refuses_a_run_found_nowhere_in_one_sentence(argv, tmp_path, monkeypatch, cli_in_process):
    monkeypatch.chdir(tmp_path)
    r = cli_in_process(*argv)
    assert r.returncode == 2 and r.stderr.startswith("roofbench: ") and "results/nope" in r.stderr, r.stderr
    assert one_sentence(r.stderr.removeprefix("roofbench: ").strip()) and r.stderr.count("\n") == 1, r.stderr
    assert list(tmp_path.iterdir()) == []


def doc_commands() -> list[str]:
    """Return every `python run_bench.py ...` command of DOCS: lines of their code blocks (from
    the command to a comment or the line's end) and inline code spans (a span broken across
    lines joined), each once, in order."""
    out = []
    for name in DOCS:
        text = (ROOT / name).read_text()
        for block in re.findall(r"^ *```[a-z]*\n(.*?)^ *```", text, re.S | re.M):
            out += [m.group(0) for line in block.splitlines() if (m := re.search(r"python run_bench\.py[^#&]*", line))]
        spans = re.findall(r"`([^`]+)`", re.sub(r"^ *```.*?^ *```", "", text, flags=re.S | re.M))
        out += [m.group(0) for s in spans if (m := re.search(r"python run_bench\.py[^#&]*", " ".join(s.split())))]
    return list(dict.fromkeys(" ".join(c.split()) for c in out))


# a synopsis, not a command: an option in brackets, or a PLACEHOLDER or <placeholder> to fill in
SYNOPSIS = re.compile(r"\[|<[^>]+>|\b(RUN|RUN_DIR|RUN_A|RUN_B|BASE|DIR|NAME|PCT|OUT|SCRIPT)\b")
# synopses doc_commands must read whole: an inline span with options in brackets and a "|" between them
SYNOPSES = ("python run_bench.py report RUN_DIR [--out DIR | --in-place]",)
# command as the docs write it -> (the arguments added: the smallest plan, or what keeps the checkout
# unwritten and a run's pictures undrawn, {} in a path standing for this test's folder; the exit codes
# it may end with)
COMMANDS = {
    "python run_bench.py": (["--dry-run"], (0,)),
    "python run_bench.py --quick --dry-run --device-spec h200": ([], (0,)),
    "python run_bench.py --quick --only stream,gemm": (["--dry-run"], (0,)),
    f"python run_bench.py report {RUN}": (["--out", "{}/report", "--no-charts"], (0,)),
    f"python run_bench.py profile bench/examples/profile_transformer.py --roofs {RUN}":
        (["--out", "{}/profile"], (0,)),
    f"python run_bench.py report {RUN} --out /tmp/new": (["--no-charts"], (0,)),
    f"python run_bench.py report {OLDER} --out /tmp/old": (["--no-charts"], (0,)),
    "python run_bench.py check /tmp/new --baseline /tmp/old": (["--out", "{}/check"], (0, 1)),  # 1: a roof SLOWER
}
NOT_RUN = {  # command -> why this test does not run it
    "python run_bench.py --all-devices --comm": "it launches one process per GPU",
    "python run_bench.py --all-devices --out /shared/fleet1/$SLURM_ARRAY_TASK_ID": "a job array's scheduler runs it",
    "python run_bench.py fleet /shared/fleet1 --out results/fleet1": "it reads the job array's folders",
    "python run_bench.py model llama-3-8b --batch 1,8,64 --prompt 2048 --context 8192":
        "it measures every layer op of the model (minutes of CPU) and has no smaller plan; it names no path",
}


def test_every_command_of_the_docs_is_run_here_or_says_why_not():
    written = doc_commands()
    assert len(written) >= 15 and set(SYNOPSES) <= set(written)
    left = [c for c in written if c not in COMMANDS and c not in NOT_RUN and not SYNOPSIS.search(c)]
    assert left == [] and set(COMMANDS) | set(NOT_RUN) <= set(written), (left, set(COMMANDS) - set(written))


def argv_of(command: str, tmp: Path) -> list[str]:
    args, code = COMMANDS[command]
    return [a.replace("/tmp/", f"{tmp}/").replace("{}", str(tmp)) for a in shlex.split(command)[2:] + args]


@pytest.mark.slow
def test_the_docs_commands_run_as_written_from_another_folder(tmp_path, monkeypatch, cli_in_process):
    """In order: the worked example's two reports come before its check, whose exit code is 1
    when a roof is SLOWER, else 0 (check.json's counts and exit_code)."""
    here = tmp_path / "elsewhere"
    here.mkdir()
    monkeypatch.chdir(here)
    for command in COMMANDS:
        r = cli_in_process(*argv_of(command, tmp_path))
        assert r.returncode in COMMANDS[command][1], f"{command}: {r.stderr[-3000:]}"
        assert "Traceback" not in r.stderr, r.stderr
    checked = json.loads((tmp_path / "check" / "check.json").read_text())
    assert checked["exit_code"] == r.returncode == int(checked["counts"]["SLOWER"] > 0)
    assert (tmp_path / "report" / "report.md").is_file() and (tmp_path / "profile" / "profile.md").is_file()
    assert (tmp_path / "new" / "roofs.json").is_file() and list(here.iterdir()) == []
