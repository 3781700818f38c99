"""Test set-up. Without CUDA, Triton kernels run under its interpreter: TRITON_INTERPRET
must be set before triton is first imported, so it is set here, at collection time.

Shared here, so that the suite answers in minutes: each end-to-end run that several tests
read is made once per session (`quick_stream_run`, `device_check_dry`, `nodram`), and
`cli_in_process` runs the CLI's own entry point (run_bench.main) in this process, as a
user's shell would start it, where a fresh interpreter adds nothing to what a test checks
(a fresh interpreter costs seconds of CPU: torch, numpy, pandas, matplotlib and the
registry). The tests that need a real process (exit codes and signals, peak memory, imports
from another folder, several ranks) keep one."""
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import torch

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"

import pytest  # noqa: E402
from noroof import run_without_dram

import run_bench

HAS_CUDA = torch.cuda.is_available()
INTERPRETING = os.environ.get("TRITON_INTERPRET") == "1"
ROOT = Path(run_bench.__file__).parent
# The shared quick stream run's options (tests/test_cli.py and tests/test_counters.py read them back).
QUICK_STREAM_ARGS = ("--quick", "--only", "stream.copy,stream.triad", "--dtype", "float32", "--counters", "3",
                     "--budget", "0.03")


def pytest_collection_modifyitems(config, items):
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords and not HAS_CUDA:
            item.add_marker(skip_gpu)


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


@pytest.fixture(scope="session")
def _nodram_made(tmp_path_factory):
    return run_without_dram(tmp_path_factory.mktemp("nodram-made") / "run")


@pytest.fixture(scope="module")
def nodram(_nodram_made, tmp_path_factory):
    """A run folder without an off-chip roof (tests/noroof.py), derived once per session; each
    test module gets a copy of its own, as reports rewrite the files they derive."""
    return Path(shutil.copytree(_nodram_made, tmp_path_factory.mktemp("nodram") / "run"))
