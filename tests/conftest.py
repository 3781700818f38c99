"""Test set-up. Without CUDA, Triton kernels run under its interpreter: TRITON_INTERPRET
must be set before triton is first imported, so it is set here, at collection time.

Shared here, so that the suite answers in minutes: each end-to-end run that several tests
read is made once per session (`quick_stream_run`, `device_check_dry`, `nodram`), and
`cli_in_process` runs the CLI's own entry point (run_bench.main) in this process, as a
user's shell would start it, where a fresh interpreter adds nothing to what a test checks
(a fresh interpreter costs seconds of CPU: torch, numpy, pandas, matplotlib and the
registry). The tests that need a real process (exit codes and signals, peak memory, imports
from another folder, several ranks) keep one.

The ahead-of-time compiles of the quick plans (tests/test_aot.py, minutes of CPU) start in a
pool of their own as soon as the tests are collected, and the tests that read them run last:
the compiles use the core the other tests leave idle (`aot_outcomes`)."""
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import torch

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"

import pytest  # noqa: E402
from noroof import run_without_dram

import run_bench
from bench.aot import plan as aot_plan
from bench.aot import pool as aot_pool

HAS_CUDA = torch.cuda.is_available()
INTERPRETING = os.environ.get("TRITON_INTERPRET") == "1"
ROOT = Path(run_bench.__file__).parent
# The shared quick stream run's options (tests/test_cli.py and tests/test_counters.py read them back).
QUICK_STREAM_ARGS = ("--quick", "--only", "stream.copy,stream.triad", "--dtype", "float32", "--counters", "3",
                     "--budget", "0.03")


# The arches whose quick plans tests/test_aot.py compiles (aot_outcomes).
AOT_ARCHES = ("sm_90", "sm_80", "sm_100", "gfx942", "gfx950")
_AOT = {}  # "future": the compiles under way (started once, by collection or by the fixture)


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected what will not run
def pytest_collection_modifyitems(config, items):
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords and not HAS_CUDA:
            item.add_marker(skip_gpu)
    # the tests that read the quick plans' compiles go last, and the compiles start now, beside the others
    reads = [item for item in items if "aot_outcomes" in getattr(item, "fixturenames", ())]
    if reads and not config.option.collectonly:
        last = {id(item) for item in reads}
        items[:] = [item for item in items if id(item) not in last] + reads
        _aot_compiles()


def _aot_compiles():
    """Return the future of the quick plans' compiles (aot_pool.compile_plans, in its own pool
    of processes, driven from a thread), starting them on the first call. The plans are built
    here, in the calling thread: building records launches, which the tests also do."""
    if "future" not in _AOT:
        plans = [aot_plan.build_plan(arch, quick=True) for arch in AOT_ARCHES]
        _AOT["future"] = ThreadPoolExecutor(1, thread_name_prefix="aot").submit(aot_pool.compile_plans, plans)
    return _AOT["future"]


@pytest.fixture(scope="session")
def aot_outcomes():
    """{arch: aot_pool.Outcome}: the quick plan of each of AOT_ARCHES compiled for it."""
    return dict(zip(AOT_ARCHES, _aot_compiles().result()))


@pytest.fixture
def dev():
    """The torch device the kernels under test run on: the GPU when present, else the CPU."""
    return "cuda" if HAS_CUDA else "cpu"


def user_env(**extra) -> dict:
    """Return the environment a user runs roofbench in: this one without the Triton interpreter, plus extra."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(extra)
    return env


@pytest.fixture
def cli_in_process(monkeypatch, capsys):
    """Return run(*args): `python run_bench.py ARGS` run through run_bench.main in this process,
    started as a user's shell would start it (sys.argv its command line, which run.json
    records; no Triton interpreter). run returns an object with returncode, stdout and stderr
    (this call's only), like subprocess.run's; an argparse refusal's SystemExit is its code."""
    def run(*args):
        args = [str(a) for a in args]
        capsys.readouterr()
        with monkeypatch.context() as m:
            m.setattr(sys, "argv", [str(ROOT / "run_bench.py"), *args])
            m.delenv("TRITON_INTERPRET", raising=False)
            try:
                rc = run_bench.main(args)
            except SystemExit as e:
                rc = e.code
        out = capsys.readouterr()
        return SimpleNamespace(returncode=rc, stdout=out.out, stderr=out.err)
    return run


@pytest.fixture(scope="session")
def quick_stream_run(tmp_path_factory):
    """The quick stream run end to end, in a process of its own: `run_bench.py QUICK_STREAM_ARGS
    --out OUT`, once per session. Return an object with result (the CompletedProcess) and out
    (the --out folder)."""
    out = tmp_path_factory.mktemp("quick-stream")
    r = subprocess.run([sys.executable, str(ROOT / "run_bench.py"), *QUICK_STREAM_ARGS, "--out", str(out)],
                       capture_output=True, text=True, env=user_env(), timeout=300, check=False)
    return SimpleNamespace(result=r, out=out)


@pytest.fixture(scope="session")
def device_check_dry():
    """The device check's dry mode (.ci/device-check --dry), once per session per mode: return
    {"full": CompletedProcess, "quick": CompletedProcess}."""
    def dry(**env):
        # PYTHON: the script's steps run the interpreter the tests run in, however pytest was started
        return subprocess.run(["bash", str(ROOT / ".ci" / "device-check"), "--dry"], cwd=ROOT, capture_output=True,
                              text=True, timeout=300, env=user_env(PYTHON=sys.executable, **env), check=False)
    return {"full": dry(), "quick": dry(MODE="quick")}


GIT = ["git", "-c", "user.email=t@example.invalid", "-c", "user.name=t", "-c", "commit.gpgsign=false"]
DOCS = ("README.md", "REFERENCE.md")  # the docs whose Python examples run as written (doc_examples)


def doc_blocks(root: Path) -> list[tuple[str, int, str]]:
    """Return (doc, index, code) for every ```python block of DOCS under root, in order."""
    return [(name, i, code) for name in DOCS
            for i, code in enumerate(re.findall(r"```python\n(.*?)```", (root / name).read_text(), re.S))]


@pytest.fixture(scope="session")
def repo_copy(tmp_path_factory) -> Path:
    """Return a folder with the tracked files of this checkout as they are now, committed in a
    fresh repository (tests/test_nothing_rewritten.py reads its `git status` at the end)."""
    dest = tmp_path_factory.mktemp("repo") / "repo"
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    for name in filter(None, files.split("\0")):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    for args in (["init", "-q"], ["add", "-A", "-f"], ["commit", "-q", "-m", "copy"]):
        subprocess.run(GIT + args, cwd=dest, check=True, capture_output=True)
    return dest


@pytest.fixture(scope="session")
def doc_examples(repo_copy, tmp_path_factory) -> dict:
    """Return {(doc, index): CompletedProcess}: every Python block of DOCS run as written, each in
    a process of its own (side by side: one example's add_to_run writes a folder of its own),
    from a folder outside the checkout (PYTHONPATH the copy, as the README says; results/ the
    copy's committed runs, which the examples name), on the CPU."""
    outside = tmp_path_factory.mktemp("outside")
    (outside / "results").symlink_to(repo_copy / "results")
    env = user_env(PYTHONPATH=str(repo_copy), CUDA_VISIBLE_DEVICES="")
    started = {(doc, i): subprocess.Popen([sys.executable, "-c", code], cwd=outside, env=env, text=True,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
               for doc, i, code in doc_blocks(repo_copy)}
    done = {}
    for key, proc in started.items():
        out, err = proc.communicate(timeout=600)
        done[key] = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    return done


@pytest.fixture(scope="session")
def _nodram_made(tmp_path_factory):
    return run_without_dram(tmp_path_factory.mktemp("nodram-made") / "run")


@pytest.fixture(scope="module")
def nodram(_nodram_made, tmp_path_factory):
    """A run folder without an off-chip roof (tests/noroof.py), derived once per session; each
    test module gets a copy of its own, as reports rewrite the files they derive."""
    return Path(shutil.copytree(_nodram_made, tmp_path_factory.mktemp("nodram") / "run"))
