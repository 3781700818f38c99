"""Test set-up. Without CUDA, Triton kernels run under its interpreter: TRITON_INTERPRET
must be set before triton is first imported, so it is set here, at collection time.

Tiers, by plain markers (pyproject.toml names them):
- `python -m pytest -m "not slow"`: the unit, formula, property and simulator tests (a minute
  on a 2-core VM); run it on every change.
- `python -m pytest` (the README's command): everything, the tests marked slow too (end-to-end
  runs of the CLI in processes of their own, real measurements, the docs' examples).
- gpu: needs a CUDA GPU, skipped without one. aot_arches: compiles the GPU arches' quick plans
  (minutes of CPU each), run with --aot-arches (.ci/run's second step).

Shared here, so that each costly thing is made once per session and only when a selected test
reads it: the end-to-end runs several tests read (`session_run` fixtures: `quick_stream_run`,
`copy_runs`..., made in a background lane of one thread from the end of collection on, while the
other tests run), the pictures of a run (`run_figures`), the run without an off-chip roof
(`nodram`). `cli_in_process` runs the CLI's own entry point (run_bench.main) in this process,
as a user's shell would start it, where a fresh interpreter adds nothing to what a test checks
(a fresh interpreter costs seconds of CPU); the tests that need a real process (exit codes and
signals, peak memory, imports from another folder, several ranks) keep one."""
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import torch

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from noroof import run_without_dram
from synthetic import banded, make_synthetic_run

import run_bench
from bench.aot import learned
from bench.aot import plan as aot_plan
from bench.aot import pool as aot_pool
from bench.results import load_run
from bench.run import options as run_options
from roofs.charts import plot

# The tests' runs are tiny and many: they learn into this session's own timing cache
# (bench/aot/learned.py; their processes inherit it), never into the one a user's next
# prediction on this machine reads.
_LEARNED = tempfile.mkdtemp(prefix="roofbench-test-learned-")
os.environ[learned.CACHE_ENV] = _LEARNED

HAS_CUDA = torch.cuda.is_available()
INTERPRETING = os.environ.get("TRITON_INTERPRET") == "1"
ROOT = Path(run_bench.__file__).parent
# The shared quick stream run's options (tests/test_cli.py and tests/test_counters.py read them back).
QUICK_STREAM_ARGS = ("--quick", "--only", "stream.copy,stream.triad", "--dtype", "float32", "--counters", "3",
                     "--budget", "0.03")

# The arches whose quick plans tests/test_aot.py compiles (aot_outcomes): over a minute of CPU
# each, so its tests that read them are marked aot_arches and run with --aot-arches (.ci/run's
# second step).
AOT_ARCHES = ("sm_90", "sm_80", "sm_100", "gfx942", "gfx950")
_AOT_NEEDED = set()  # the arches the selected tests read (aot_needs), gathered at collection


def pytest_addoption(parser):
    parser.addoption("--aot-arches", action="store_true",
                     help="also compile the quick plans of " + ", ".join(AOT_ARCHES)
                          + " (tests/test_aot.py's tests marked aot_arches: minutes of CPU; .ci/run runs them)")


def interpreter_refusal() -> str | None:
    """Return one sentence when Triton's interpreter cannot run a kernel on this numpy, else None:
    Triton 3.6's interpreter reads a scalar argument with int() of a one-element array, which
    numpy 2.4 refuses (triton issue 9171), so every interpreted kernel would fail alike."""
    if not INTERPRETING:
        return None
    import triton
    import triton.language as tl

    @triton.jit
    def count(out_ptr, n):
        for i in range(0, n):   # a loop bound read from a scalar argument
            tl.store(out_ptr + i, i)

    out = torch.zeros(2, dtype=torch.int32)
    try:
        count[(1,)](out, 2)
    except Exception as e:  # noqa: BLE001  (the interpreter wraps what failed)
        import numpy
        major, minor = (int(v) for v in numpy.__version__.split(".")[:2])
        fix = (f" on numpy {numpy.__version__}: install numpy<2.4 or a newer Triton (triton issue 9171)"
               if (major, minor) >= (2, 4) else "")
        return (f"Triton {triton.__version__}'s interpreter, which runs the Triton kernels in these tests on a "
                f"CPU, failed a two-step loop{fix} ({type(e).__name__}: {e}).")
    return None if out.tolist() == [0, 1] else "Triton's interpreter ran a two-step loop wrong on this machine."


def pytest_sessionstart(session):
    why = interpreter_refusal()
    if why:
        pytest.exit(why, returncode=pytest.ExitCode.USAGE_ERROR)


def pytest_unconfigure(config):
    _LANE_POOL.shutdown(wait=True, cancel_futures=True)
    shutil.rmtree(_LEARNED, ignore_errors=True)
    shutil.rmtree(_LANE_TMP, ignore_errors=True)


def aot_needs(item) -> set:
    """Return the arches whose quick-plan compiles a test reads: those its aot_arches marker names,
    and its parameter arch."""
    marker = item.get_closest_marker("aot_arches")
    arches = set(marker.args) if marker else set()
    callspec = getattr(item, "callspec", None)
    if callspec is not None and "arch" in callspec.params:
        arches.add(callspec.params["arch"])
    assert arches, f"{item.nodeid} reads aot_outcomes naming no arch (an aot_arches marker or an arch parameter)"
    return arches


@pytest.hookimpl(trylast=True)  # after -k and -m have deselected what will not run
def pytest_collection_modifyitems(config, items):
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU")
    skip_arches = pytest.mark.skip(reason="compiles GPU arches' quick plans (minutes of CPU): "
                                          "python -m pytest --aot-arches -m aot_arches tests/test_aot.py (.ci/run)")
    for item in items:
        if "gpu" in item.keywords and not HAS_CUDA:
            item.add_marker(skip_gpu)
        if "aot_arches" in item.keywords and not config.getoption("aot_arches"):
            item.add_marker(skip_arches)
        elif "aot_outcomes" in getattr(item, "fixturenames", ()):
            _AOT_NEEDED.update(aot_needs(item))
    items[:] = lane_last(items)
    _start_lane(config, items)


def reads_the_lane(item) -> bool:
    """Return whether item will run and reads a session_run fixture (directly or through another)."""
    if item.get_closest_marker("skip") or any(
            any(a is True for a in m.args) for m in item.iter_markers("skipif")):
        return False
    return any(name in _SESSION_RUNS for name in getattr(item, "fixturenames", ()))


def lane_last(items: list) -> list:
    """Return items with the modules whose tests read the lane's values moved after the others,
    each module's tests kept together and in order: the lane works from the end of collection
    on while the others run, so a test that reads its value finds it made instead of waiting."""
    late = {item.path for item in items if reads_the_lane(item)}
    return sorted(items, key=lambda item: item.path in late)   # stable: the order within each group stays


@pytest.fixture(scope="session")
def aot_outcomes():
    """{arch: aot_pool.Outcome}: the quick plan of each arch the selected tests read (aot_needs)
    compiled for it, in one pool of processes (none in the README's test command: they are marked
    aot_arches)."""
    arches = sorted(_AOT_NEEDED, key=AOT_ARCHES.index)
    plans = [aot_plan.build_plan(arch, quick=True) for arch in arches]
    return dict(zip(arches, aot_pool.compile_plans(plans)))


def user_env(**extra) -> dict:
    """Return the environment a user runs roofbench in: this one without the Triton interpreter, plus extra."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(extra)
    return env


# The background lane: one thread that makes the session_run values the selected tests read, one
# after another in the order the tests first read them, from the end of collection on. Each waits
# on processes of its own, so the tests in this process run on the other core meanwhile; a test
# that reads one waits for it. A fixed lane of one: no more processes at once on a 2-core machine.
_SESSION_RUNS = {}   # name: (fn, its parameters), every session_run fixture
_LANE = {}           # name: the Future of its value, the ones the lane makes
_LANE_POOL = ThreadPoolExecutor(1, thread_name_prefix="session-run-lane")
_LANE_TMP = tempfile.mkdtemp(prefix="roofbench-test-lane-")


def session_run(fn):
    """Return a session fixture named as fn whose value fn returns, made once: by the background
    lane when a selected test reads it (_start_lane), else when a test first reads it. fn's
    parameters: `tmp` (a new temporary folder), `env` (user_env(), for the processes it starts: a
    test may change this process's) and the names of other fixtures (their values; in the lane,
    only other session_run fixtures)."""
    name = fn.__name__
    params = list(inspect.signature(fn).parameters)
    _SESSION_RUNS[name] = (fn, params)

    @pytest.fixture(scope="session", name=name)
    def value(request, tmp_path_factory):
        if name in _LANE:
            return _LANE[name].result()
        given = {p: request.getfixturevalue(p) for p in params if p not in ("tmp", "env")}
        if "tmp" in params:
            given["tmp"] = tmp_path_factory.mktemp(name)
        if "env" in params:
            given["env"] = user_env()
        return fn(**given)
    value.__doc__ = fn.__doc__
    return value


def _lane_make(name: str, env: dict):
    fn, params = _SESSION_RUNS[name]
    given = {p: _LANE[p].result() for p in params if p not in ("tmp", "env")}
    if "tmp" in params:
        given["tmp"] = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=_LANE_TMP))
    if "env" in params:
        given["env"] = env
    return fn(**given)


def _lane_submit(name: str, env: dict) -> None:
    """Submit name to the lane after the session_run fixtures it reads (a session_run fixture
    reading any other fixture is made in the test's own time)."""
    if name in _LANE:
        return
    fn, params = _SESSION_RUNS[name]
    deps = [p for p in params if p not in ("tmp", "env")]
    if any(p not in _SESSION_RUNS for p in deps):
        return
    for p in deps:
        _lane_submit(p, env)
    _LANE[name] = _LANE_POOL.submit(_lane_make, name, env)


def _start_lane(config, items) -> None:
    """Submit to the lane every session_run fixture the tests that will run read, in the order
    they first read them (none for --collect-only)."""
    if config.option.collectonly:
        return
    env = user_env()
    for item in items:
        if not reads_the_lane(item):
            continue
        for name in getattr(item, "fixturenames", ()):
            if name in _SESSION_RUNS:
                _lane_submit(name, env)


@pytest.fixture(scope="session")
def run_figures():
    """Return figures(run_dir): roofs.charts.plot.figures of that run folder (every chart it has
    data for), drawn once per session and shared by the tests that only read them
    (tests/test_plot.py, tests/test_bands.py: seconds of drawing each run); closed at the end."""
    drawn = {}
    plt.rcParams["figure.max_open_warning"] = 0  # held open on purpose, a few runs' worth

    def figures(run_dir) -> dict:
        key = Path(run_dir).resolve()
        if key not in drawn:
            drawn[key] = plot.figures(load_run(key))
        return drawn[key]
    yield figures
    for figs in drawn.values():
        for fig in figs.values():
            plt.close(fig)


@pytest.fixture(scope="session")
def banded_synthetic(tmp_path_factory) -> Path:
    """The synthetic GPU run (tests/synthetic.py) with every measured roof banded: one session-wide
    folder, so that run_figures draws its charts once for the layout, band and worker tests."""
    root = tmp_path_factory.mktemp("synthetic")
    return banded(make_synthetic_run(root / "plain"), root / "banded")


@pytest.fixture
def dev():
    """The torch device the kernels under test run on: the GPU when present, else the CPU."""
    return "cuda" if HAS_CUDA else "cpu"


@pytest.fixture
def cli_in_process(monkeypatch, capsys):
    """Return run(*args): `python run_bench.py ARGS` run through run_bench.main in this process,
    started as a user's shell would start it (sys.argv its command line, which run.json
    records; no Triton interpreter). run returns an object with returncode, stdout and stderr
    (this call's only), like subprocess.run's (an argparse refusal's SystemExit is its code), and
    code: the reason code of the refusal it printed (bench.run.options.REFUSED), else None."""
    def run(*args):
        args = [str(a) for a in args]
        capsys.readouterr()
        with monkeypatch.context() as m:
            m.setattr(sys, "argv", [str(ROOT / "run_bench.py"), *args])
            m.delenv("TRITON_INTERPRET", raising=False)
            run_options.REFUSED.clear()
            try:
                rc = run_bench.main(args)
            except SystemExit as e:
                rc = e.code
            refused = list(run_options.REFUSED)
        out = capsys.readouterr()
        return SimpleNamespace(returncode=rc, stdout=out.out, stderr=out.err, code=refused[-1] if refused else None)
    return run


@session_run
def quick_stream_run(tmp, env):
    """The quick stream run end to end, in a process of its own: `run_bench.py QUICK_STREAM_ARGS
    --out OUT`, once per session. Return an object with result (the CompletedProcess) and out
    (the --out folder)."""
    r = subprocess.run([sys.executable, str(ROOT / "run_bench.py"), *QUICK_STREAM_ARGS, "--out", str(tmp)],
                       cwd=ROOT, capture_output=True, text=True, env=env, timeout=300, check=False)
    return SimpleNamespace(result=r, out=tmp)


@session_run
def device_check_dry(env):
    """The device check's dry mode (`bash .ci/device-check --dry`), once per session: return its CompletedProcess."""
    # PYTHON: the script's steps run the interpreter the tests run in, however pytest was started
    return subprocess.run(["bash", str(ROOT / ".ci" / "device-check"), "--dry"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env=dict(env, PYTHON=sys.executable), check=False)


GIT = ["git", "-c", "user.email=t@example.invalid", "-c", "user.name=t", "-c", "commit.gpgsign=false"]
DOCS = ("README.md", "REFERENCE.md")  # the docs whose Python examples run as written (doc_examples)


def doc_blocks(root: Path) -> list[tuple[str, int, str]]:
    """Return (doc, index, code) for every ```python block of DOCS under root, in order."""
    return [(name, i, code) for name in DOCS
            for i, code in enumerate(re.findall(r"```python\n(.*?)```", (root / name).read_text(), re.S))]


@session_run
def repo_copy(tmp) -> Path:
    """Return a folder with the tracked files of this checkout as they are now, committed in a
    fresh repository (tests/test_nothing_rewritten.py reads its `git status` at the end)."""
    dest = tmp / "repo"
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    for name in filter(None, files.split("\0")):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    for args in (["init", "-q"], ["add", "-A", "-f"], ["commit", "-q", "-m", "copy"]):
        subprocess.run(GIT + args, cwd=dest, check=True, capture_output=True)
    return dest


# Runs the jobs of the JSON file argv[1] one after another in this one process (an interpreter
# start costs seconds of CPU: torch, numpy, pandas, matplotlib), each as `python -c CODE ARGS` or
# `python -m MODULE ARGS` would run it from its folder (a fresh namespace, its own sys.argv); writes
# [[returncode, stdout, stderr], ...] to the JSON file argv[2]. A job's exception is printed as
# Python would print it and is its exit code 1.
RUN_EACH = """
import contextlib, io, json, os, runpy, sys, traceback
jobs, results, done = json.load(open(sys.argv[1])), sys.argv[2], []
for job in jobs:
    os.chdir(job["cwd"])
    sys.argv = [job.get("module") or "-c", *job.get("args", [])]
    out, err, code = io.StringIO(), io.StringIO(), 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            if "module" in job:
                runpy.run_module(job["module"], run_name="__main__", alter_sys=True)
            else:
                exec(compile(job["code"], "<string>", "exec"), {"__name__": "__main__"})
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if isinstance(e.code, str):
                print(e.code, file=sys.stderr)
        except BaseException:
            traceback.print_exc()
            code = 1
    done.append([code, out.getvalue(), err.getvalue()])
json.dump(done, open(results, "w"))
"""


def run_each(jobs: list[dict], tmp: Path, env: dict) -> list[subprocess.CompletedProcess]:
    """Return a CompletedProcess for each job ({"cwd", "code" or "module", "args"}), run one after
    another in one process of its own (RUN_EACH) with env."""
    (tmp / "jobs.json").write_text(json.dumps([dict(job, cwd=str(job["cwd"])) for job in jobs]))
    r = subprocess.run([sys.executable, "-c", RUN_EACH, str(tmp / "jobs.json"), str(tmp / "done.json")], cwd=tmp,
                       env=env, capture_output=True, text=True, timeout=900, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    return [subprocess.CompletedProcess(job.get("module") or "-c", *done)
            for job, done in zip(jobs, json.loads((tmp / "done.json").read_text()))]


# the committed run the custom-kernel example adds its points to (custom_kernel_example): the
# smallest CPU run, as the example measures on the CPU
CUSTOM_KERNEL_RUN = "results/cpu-amd-epyc-20261201T103023Z"


@session_run
def copy_runs(repo_copy, tmp, env) -> dict:
    """Run, in one process of their own (run_each), on the CPU, with the copy on PYTHONPATH:
    every Python block of DOCS as written, from an empty folder outside the copy (the committed
    runs they name, results/<run>, are the copy's: a relative path missing where it runs is the
    checkout's, bench.paths.existing); `python -m bench.examples.custom_kernel CUSTOM_KERNEL_RUN`
    in the copy, as REFERENCE.md shows it; and `run_bench.py report results/<run>` on every
    committed run of the copy, from that empty folder too, with --no-charts but for the H200 run
    with the fewest rows (a
    GPU run's charts, energy.png among them, written beside its files: the pictures of a full
    run cost tens of seconds of CPU; tests/test_plot.py draws the committed runs' charts). Return
    {"docs": {(doc, index): CompletedProcess}, "custom": CompletedProcess, "reports": {run's
    name: CompletedProcess}}."""
    outside = tmp / "outside"
    outside.mkdir()
    blocks = doc_blocks(repo_copy)
    names = [str(p.parent.relative_to(repo_copy)) for p in sorted((repo_copy / "results").glob("*/run.json"))]
    rows = lambda n: (repo_copy / n / "measurements.csv").read_bytes().count(b"\n")  # noqa: E731
    drawn = min((n for n in names if "nvidia-h200" in n), key=rows, default=None)
    report = "import sys, run_bench\nsys.exit(run_bench.main(['report', *sys.argv[1:]]))"
    jobs = [{"cwd": outside, "code": code} for _, _, code in blocks]
    jobs.append({"cwd": repo_copy, "module": "bench.examples.custom_kernel", "args": [CUSTOM_KERNEL_RUN]})
    jobs += [{"cwd": outside, "code": report, "args": [n, *([] if n == drawn else ["--no-charts"])]} for n in names]
    done = run_each(jobs, tmp, dict(env, PYTHONPATH=str(repo_copy), CUDA_VISIBLE_DEVICES=""))
    return {"docs": {(doc, i): r for (doc, i, _), r in zip(blocks, done)}, "custom": done[len(blocks)],
            "reports": dict(zip(names, done[len(blocks) + 1:]))}


@pytest.fixture(scope="session")
def doc_examples(copy_runs) -> dict:
    """{(doc, index): CompletedProcess}: every Python block of DOCS run as written (copy_runs)."""
    return copy_runs["docs"]


@pytest.fixture(scope="session")
def custom_kernel_example(copy_runs):
    """The CompletedProcess of `python -m bench.examples.custom_kernel CUSTOM_KERNEL_RUN` in the
    repository copy (copy_runs; tests/test_api.py reads what it prints, tests/test_nothing_rewritten.py
    that it leaves the copy's tracked files)."""
    return copy_runs["custom"]


@pytest.fixture(scope="session")
def committed_reports(copy_runs) -> dict:
    """{run's name: CompletedProcess}: `run_bench.py report` of every committed run of the copy (copy_runs)."""
    return copy_runs["reports"]


@session_run
def thousands(tmp, env) -> Path:
    """Return the folder of the fleets of a thousand synthetic H200s (helpers.write_thousands),
    written in a process of its own: it sets the commit its runs record (abc1234) in that process."""
    code = "import sys, helpers; from pathlib import Path; helpers.write_thousands(Path(sys.argv[1]))"
    r = subprocess.run([sys.executable, "-c", code, str(tmp)], cwd=ROOT / "tests", env=dict(env, PYTHONPATH=str(ROOT)),
                       capture_output=True, text=True, timeout=600, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    return tmp


@pytest.fixture(scope="session")
def _nodram_made(tmp_path_factory):
    return run_without_dram(tmp_path_factory.mktemp("nodram-made") / "run")


@pytest.fixture(scope="module")
def nodram(_nodram_made, tmp_path_factory):
    """A run folder without an off-chip roof (tests/noroof.py), derived once per session; each
    test module gets a copy of its own, as reports rewrite the files they derive."""
    return Path(shutil.copytree(_nodram_made, tmp_path_factory.mktemp("nodram") / "run"))
