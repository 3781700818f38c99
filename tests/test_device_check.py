"""The device check (.ci/device-check, bench/devcheck): its plan fits one 6-minute call with
20% to spare, a step's limit leaves the later steps their predicted time, the watchdog stops a
step that ignores SIGINT, and a rehearsal on the CPU with a hung kernel writes per-case
verdicts and a partial run that `report` derives; every CUDA-only test of the suite is run by
the kernels step or left out with a reason (bench/devcheck/cuda_tests.py)."""
import json
import os
import re
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import test_gpu_paths
from conftest import session_run

from bench.aot.predict import spec_device
from bench.devcheck import cuda_tests as ct
from bench.devcheck import main as dc
from bench.devcheck import plan as dp
from bench.devcheck.watchdog import ENDED, INTERRUPTED, KILLED, run_bounded
from bench.measure.registry import load_all

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / ".ci" / "device-check"
H200 = spec_device("h200")
H100_SXM = spec_device("h100 sxm5").name


def test_the_script_parses_and_runs_the_check_module():
    assert subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True).returncode == 0
    # run with `echo` as its interpreter, the script says what it would run: the check module, with its arguments
    shown = subprocess.run(["bash", str(SCRIPT), "--dry", "--steps", "env"], capture_output=True, text=True,
                           env={**os.environ, "PYTHON": "echo"})
    assert shown.returncode == 0 and shown.stdout.split() == ["-m", "bench.devcheck", "--dry", "--steps", "env"]


@pytest.fixture
def gpu_planning(monkeypatch):
    """Plan as on the GPU host: no Triton interpreter (conftest.py sets it on a CPU, and the
    skip rules read it)."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)


@pytest.mark.parametrize("part", ["h200", "h100 sxm5"])
def test_the_required_steps_fit_one_call_with_a_fifth_to_spare(gpu_planning, part):
    """On the H200 the issue names, and on the H100 a device tool's first call may get."""
    device = spec_device(part)
    plan = dp.steps(device, "sm_90", Path("/nonexistent"))
    assert [s.name for s in plan] == ["env", "precompile", "gates", "kernels", "roofs-memory", "roofs-compute",
                                      "quick"]
    assert [s.name for s in plan if not s.required] == ["kernels", "quick"]
    # the device tool's call is 6 minutes at most; the check's own deadline is inside it
    assert dp.CHECK_S < dp.CALL_S <= 360
    need = dp.required_s(plan)
    assert need <= (1 - dp.SLACK) * dp.CHECK_S, dp.plan_text(plan)
    # the kernels step, after the gates and before the runs, fits in what the required steps leave
    kernels = plan[3]
    assert kernels.predicted_s == ct.predicted_s() and need + kernels.predicted_s <= dp.CHECK_S
    assert dp.optional_s(plan) == kernels.predicted_s and dp.fits(plan)
    assert kernels.kind == "gates" and kernels.argv[-len(ct.RUN):] == ct.selectors() and "gpu" not in kernels.argv
    # the run steps run what the issue asks of this GPU, and each is predicted from the dry run's model
    memory, compute = plan[4], plan[5]
    assert set(memory.only) == {"probe.l1/torch", "probe.l1/triton", "stream.reread/torch", "stream.reread/triton",
                                "stream.read/torch", "stream.read/triton"}
    assert {"gemm.square/triton_tma", "gemm.square/torch", "fma.chains/triton", "attention.prefill/triton"} \
        <= set(compute.only)
    assert memory.predicted_s == pytest.approx(dp.STEP_START_S + dp.run_prediction(device, memory.only, False,
                                                                                   dp.MEMORY_DTYPES))


@pytest.mark.parametrize("line, arch, part", [
    ("9.0, NVIDIA H100 80GB HBM3, 81559", "sm_90", H100_SXM),
    ("9.0, NVIDIA H200, 143771", "sm_90", H200.name),
    ("9.0, NVIDIA H100 PCIe, 81559", "sm_90", spec_device("h100 pcie").name),
    ("9.0, NVIDIA H100 NVL, 95830", "sm_90", None),        # a part the datasheet lacks: predicted as an H200
    ("9.0, NVIDIA H100 80GB HBM3, [N/A]", "sm_90", H100_SXM),   # no size: by name alone
    ("9.0, NVIDIA H200, rev. 2, 143771", "sm_90", H200.name),    # a comma in the name
    ("7.5, Tesla T4, 15360", None, None),                 # an arch with no aot target: no precompile
    ("", None, None),                                     # no GPU
])
def test_the_check_predicts_for_the_gpu_it_runs_on(line, arch, part):
    assert dc.gpu_here(line) == (arch, part)


def test_the_check_plans_for_the_part_it_found_unless_told(monkeypatch, capsys, gpu_planning):
    monkeypatch.setattr(dc, "gpu_here", lambda: ("sm_90", H100_SXM))
    assert dc.main(["--dry", "--steps", "env,roofs-memory"]) == 0
    assert H100_SXM in capsys.readouterr().out.splitlines()[0]   # the plan's header names its part
    assert dc.main(["--dry", "--steps", "env,roofs-memory", "--device-spec", "h200"]) == 0
    assert H200.name in capsys.readouterr().out.splitlines()[0]
    monkeypatch.setattr(dc, "gpu_here", lambda: (None, None))   # no GPU, or a part the datasheet lacks
    assert dc.main(["--dry", "--steps", "env,roofs-memory"]) == 0
    assert H200.name in capsys.readouterr().out.splitlines()[0]


@pytest.mark.slow
def test_the_dry_mode_prints_the_plan_and_exit_1_when_it_does_not_fit(device_check_dry):
    out = device_check_dry  # conftest.py: `bash .ci/device-check --dry`, once per session
    assert out.returncode == 0, out.stderr
    m = re.search(r"required steps and packing: (\d+) s predicted of (\d+) s", out.stdout)
    assert int(m.group(1)) <= int(m.group(2)) == round(0.8 * dp.CHECK_S)
    assert dc.main(["--dry", "--check-s", "200"]) == 1   # 80% of 200 s is less than the required steps
    # a rerun names its steps; a name that is no step is refused, exit 2
    assert dc.main(["--dry", "--steps", "roofs-compute,roofs"]) == 2
    assert dc.main(["--dry", "--steps", "roofs-compute,quick"]) == 0


def test_a_run_steps_prediction_is_what_the_dry_run_prints(cli_in_process, gpu_planning):
    only = dp.impl_ids(dp.MEMORY_ROOFS)
    r = cli_in_process("--dry-run", "--device-spec", "h200", "--only", ",".join(only),
                       "--dtype", ",".join(dp.MEMORY_DTYPES))
    printed = int(re.search(r"predicted wall time: (\d+) s", r.stdout).group(1))
    assert printed == round(dp.run_prediction(H200, only, False, dp.MEMORY_DTYPES))


def test_a_steps_limit_leaves_the_later_required_steps_their_prediction(tmp_path):
    plan = [dp.Step("a", "cmd", [], 20, 1), dp.Step("b", "cmd", [], 30, 1), dp.Step("c", "cmd", [], 50, 1),
            dp.Step("q", "run", [], 80, 1, required=False)]
    check = dc.Check(tmp_path, 200, t0=time.monotonic())
    # a: its cap 2 x 20 = 40 s; 200 - 10 (packing) - 30 - 50 = 110 s would be left
    assert dc.limit_of(check, plan, 0) == 40
    # as if 150 s had passed: 50 left, less 10 and c's 50: b would get nothing (not started under 10 s)
    check.deadline -= 150
    assert dc.limit_of(check, plan, 1) == pytest.approx(-10, abs=0.1)
    # c, with 50 s left: min(100, 40); q, not required, every second but the packing's
    assert dc.limit_of(check, plan, 2) == pytest.approx(40, abs=0.1)
    assert dc.limit_of(check, plan, 3) == pytest.approx(40, abs=0.1)


def test_an_optional_step_before_a_required_one_leaves_it_its_prediction(tmp_path):
    plan = [dp.Step("a", "cmd", [], 20, 1), dp.Step("k", "gates", [], 30, 1, required=False),
            dp.Step("c", "cmd", [], 50, 1), dp.Step("q", "run", [], 80, 1, required=False)]
    check = dc.Check(tmp_path, 200, t0=time.monotonic())
    # k: its cap 2 x 30 = 60 s; 200 - 10 (packing) - 50 (c) = 140 s would be left
    assert dc.limit_of(check, plan, 1) == 60
    # as if 120 s had passed: 80 - 10 - 50 = 20 s for k; q, with no required step after it, all 70 s
    check.deadline -= 120
    assert dc.limit_of(check, plan, 1) == pytest.approx(20, abs=0.1)
    assert dc.limit_of(check, plan, 3) == pytest.approx(70, abs=0.1)
    # the budget: 20 + 50 + 10 = 80 s required of 80% of 200 s, and k's 30 s in the 120 s left
    assert dp.required_s(plan) == 80 and dp.optional_s(plan) == 30 and dp.fits(plan, 200)
    assert not dp.fits(plan, 105)   # 80 <= 84, but 80 + 30 > 105


def test_the_kernels_steps_prediction_counts_compiles_and_cases():
    # 8 s of pytest's start, 3 GEMM compiles of 1.6 s, 2 stream compiles of 0.35 s, 5 cases of 0.15 s
    entries = [ct.Entry("tests/a.py::t", 2, 3, "gemm"), ct.Entry("tests/a.py::u[x]", 3, 2, "stream")]
    assert ct.predicted_s(entries) == pytest.approx(8 + 3 * 1.6 + 2 * 0.35 + 5 * 0.15)


def test_a_case_takes_its_most_specific_selector():
    run = [ct.Entry("tests/a.py::t[1]", 1, 1, "gemm"), ct.Entry("tests/b.py::v", 2, 1, "gemm")]
    left_out = {"tests/a.py::t": "budget", "tests/c.py": "no kernel"}
    assert ct.placed("tests/a.py::t[1]", run, left_out) == ("run", "tests/a.py::t[1]")
    assert ct.placed("tests/a.py::t[2]", run, left_out) == ("left out", "tests/a.py::t")
    assert ct.placed("tests/b.py::v[fp16]", run, left_out) == ("run", "tests/b.py::v")
    assert ct.placed("tests/c.py::w", run, left_out) == ("left out", "tests/c.py")
    assert ct.placed("tests/d.py::x", run, left_out) is None


def _item(keywords=(), fixtures=(), skipifs=()):
    marks = [SimpleNamespace(args=(cond,), kwargs={"reason": why}) for cond, why in skipifs]
    return SimpleNamespace(keywords=set(keywords), fixturenames=list(fixtures), iter_markers=lambda name: marks)


def test_a_test_is_cuda_only_by_its_marker_fixture_or_skip():
    assert ct.cuda_only(_item(keywords={"gpu"})) and ct.cuda_only(_item(fixtures={"dev", "tmp_path"}))
    assert ct.cuda_only(_item(skipifs=[(True, "bf16 is silently wrong in Triton's interpreter")]))
    assert ct.cuda_only(_item(skipifs=[(True, "needs a CUDA GPU")]))
    assert not ct.cuda_only(_item(skipifs=[(True, "needs gcc")]))            # skipped here for another reason
    assert not ct.cuda_only(_item(skipifs=[(False, "checks a machine without CUDA")]))   # runs here
    assert not ct.cuda_only(_item(keywords={"slow"}, fixtures={"tmp_path"}))
    # an interpreter check skipped here (its Triton's interpreter lacks what it checks) runs on no GPU either
    assert not ct.cuda_only(_item(keywords={"interpreter_only"}, skipifs=[(True, "needs an interpreter that ...")]))


@session_run
def cuda_only_listing(tmp, env):
    """(CompletedProcess, the listing's path): the suite collected on this CPU in a process of its
    own, with cuda_tests as a plugin listing the CUDA-only cases."""
    listing = tmp / "cuda_only.json"
    return subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "-p", "bench.devcheck.cuda_tests", "tests"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env={**env, ct.LIST_ENV: str(listing)}), listing


@pytest.mark.slow
def test_every_cuda_only_test_is_run_by_the_kernels_step_or_left_out_with_a_reason(cuda_only_listing):
    r, listing = cuda_only_listing
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    cases = json.loads(listing.read_text())
    gates = [c for c in cases if c.startswith(dp.GATES_FILE + "::")]
    assert gates and {c.split("[")[0].split("::")[1] for c in gates} >= set(test_gpu_paths.IMPL_OF)
    others = [c for c in cases if c not in gates]
    unplaced = [c for c in others if ct.placed(c) is None]
    assert not unplaced, "CUDA-only tests neither run by the kernels step nor left out (cuda_tests.py): " \
                         + ", ".join(unplaced)
    by = {}
    for c in others:
        by.setdefault(ct.placed(c), []).append(c)
    # each entry selects the cases it says, and every selector (run or left out) names some case
    assert {e.selector: e.cases for e in ct.RUN} == {sel: len(cs) for (how, sel), cs in by.items() if how == "run"}
    assert {sel for how, sel in by if how == "left out"} == set(ct.LEFT_OUT)
    assert all(why.strip() for why in ct.LEFT_OUT.values())


def test_an_impl_is_run_only_when_every_case_of_it_passed():
    state = {"cases": {"a1": "x/triton", "a2": "x/triton", "b": "y/triton", "c": "z/triton", "d": "w/triton",
                       "e": None},
             "started": ["a1", "a2", "b", "c"],
             "verdicts": {"a1": "passed", "a2": "failed", "b": "passed", "c": "hung", "e": "failed"}}
    assert dc.excluded_impls(state) == {"x/triton": "failed: a2", "z/triton": "hung: c", "w/triton": "not reached: d"}


def test_every_gate_test_names_the_impl_it_gates():
    impls = load_all().impls
    tests = [n for n in dir(test_gpu_paths) if n.startswith("test_")]
    for name in tests:
        fn = getattr(test_gpu_paths, name)
        params = {a for m in getattr(fn, "pytestmark", []) if m.name == "parametrize" for a in m.args[0].split(",")}
        if not {"op", "impl"} <= params:
            assert test_gpu_paths.IMPL_OF[name] in impls, name
    for op, impl, _ in test_gpu_paths.gpu_cases("sm_90"):
        assert f"{op}/{impl}" in impls
    assert set(test_gpu_paths.IMPL_OF) <= set(tests)
    assert dp.TMA_PRECISIONS == test_gpu_paths.TMA_PRECISIONS  # the gates' prediction counts those compiles


IGNORES_SIGINT = "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); print('up', flush=True); " \
                 "time.sleep(60)"


# the interrupted and killed cases wait out a real process's limit and grace (seconds): slow
@pytest.mark.parametrize("code,how,rc", [("pass", ENDED, 0),
                                         pytest.param("import time; time.sleep(60)", INTERRUPTED, -2,
                                                      marks=pytest.mark.slow),
                                         pytest.param(IGNORES_SIGINT, KILLED, -9, marks=pytest.mark.slow)])
def test_the_watchdog_interrupts_then_kills_at_the_limit(tmp_path, code, how, rc):
    """rc: Python ends on an uncaught KeyboardInterrupt by SIGINT itself (-2), and SIGKILL is -9."""
    limit, grace = 2.0, 1.0   # a second for the child to start and take its signals' settings
    with open(tmp_path / "log", "w") as log:
        got = run_bounded([sys.executable, "-c", code], limit, grace, log)
    assert got.how == how and got.rc == rc
    assert got.seconds < limit - grace if how == ENDED else limit - grace <= got.seconds < limit + 1


def test_the_interrupt_lands_when_the_checks_own_process_ignores_it(tmp_path):
    """`nohup bash .ci/run &` starts its processes with SIGINT ignored, and a child inherits
    that: the watchdog's SIGINT never landed, and each interrupted case came out 'killed'. The
    command gets SIGINT's default back."""
    import signal
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with open(tmp_path / "log", "w") as log:
            got = run_bounded([sys.executable, "-c", "import time; time.sleep(60)"], 2.0, 1.0, log)
    finally:
        signal.signal(signal.SIGINT, before)
    assert got.how == INTERRUPTED and got.rc == -2


def _lines(path: Path) -> list[dict]:
    return [json.loads(raw) for raw in path.read_text().splitlines()]


def test_two_test_steps_share_the_verdicts_file_and_each_counts_its_own(tmp_path):
    # the gates and then the kernels step, both under the verdicts plugin into gates.jsonl
    case = "tests/devcheck_cases.py::test_gate[{}]"
    pytest_argv = [sys.executable, "-m", "pytest", "--noconftest", "-p", "tests.gate_verdicts", "-p",
                   "no:cacheprovider", "-q"]
    gates = dp.Step("gates", "gates", pytest_argv + [case.format("stream.copy-torch-pass"),
                                                     case.format("stream.triad-torch-fail")], 10, 1, case_s=20)
    kernels = dp.Step("kernels", "gates", pytest_argv + [case.format("stream.write-torch-pass")], 25, 1,
                      required=False, case_s=20)
    out = tmp_path / "out"
    dc.run_check([gates, kernels, dp.Step("last", "cmd", ["true"], 1, 1)], out, check_s=120, say=lambda s: None)
    ends = {e["step"]: e for e in _lines(out / "steps.jsonl") if e["event"] == "end"}
    assert ends["gates"]["cases"] == {"passed": 1, "failed": 1} and ends["kernels"]["cases"] == {"passed": 1}
    assert ends["kernels"]["how"] == ENDED
    verdicts = [v["outcome"] for v in _lines(out / "gates.jsonl") if v["event"] == "verdict"]
    assert verdicts == ["passed", "failed", "passed"]


@session_run
def rehearsal(tmp):
    """(its $OUT, the check): a rehearsal of the device check on this CPU, its processes under the
    check's own watchdog: a gate case that hangs, and a run that hangs after 2 rows."""
    gates = dp.Step("gates", "gates", [sys.executable, "-m", "pytest", "--noconftest", "-p", "tests.gate_verdicts",
                                       "-p", "no:cacheprovider", "-q", "tests/devcheck_cases.py"], 10, 1,
                     case_s=3)
    run = dp.Step("roofs", "run", ["--quick", "--dtype", "float32", "--max-ws", "1MiB", "--budget", "0.03"], 20, 2,
                  only=("stream.copy/torch", "stream.triad/torch", "stream.read/torch"),
                  env={"ROOFBENCH_HANG_AFTER": "2"}, script="tests/hang_run.py", stall_s=6)
    out = tmp / "out"
    return out, dc.run_check([gates, run], out, check_s=120, say=lambda s: None)


@pytest.mark.slow
def test_a_rehearsal_with_a_hung_kernel_leaves_verdicts_and_a_derivable_partial_run(rehearsal, tmp_path):
    out, check = rehearsal

    # the gate cases' verdicts, one line each as reached; the hung one written by the check,
    # and the case after it reached by a second pytest
    verdicts = {v["case"].split("[")[1].rstrip("]"): v["outcome"] for v in _lines(out / "gates.jsonl")
                if v["event"] == "verdict"}
    assert verdicts == {"stream.copy-torch-pass": "passed", "stream.triad-torch-fail": "failed",
                        "stream.read-torch-hang": "hung", "stream.write-torch-pass": "passed"}
    steps = {e["step"]: e for e in _lines(out / "steps.jsonl") if e["event"] == "end"}
    assert steps["gates"]["cases"] == {"passed": 2, "failed": 1, "hung": 1}
    # the hung case was stopped 3 s in (its case limit) and killed 1 s later, long before the step's 20 s
    assert steps["gates"]["how"] == KILLED and steps["gates"]["seconds"] < 15
    # the run kept only the impl that passed; 6 s with no new row, the watchdog sent SIGINT,
    # which the hung call never saw, and killed it 2 s later, before its 40 s limit
    assert steps["roofs"]["left_out"] == ["stream.read/torch", "stream.triad/torch"]
    assert steps["roofs"]["how"] == KILLED and 8 <= steps["roofs"]["seconds"] < 40
    [made] = steps["roofs"]["runs"]
    assert made["rows"] == 2 and made["status"] == "running" and made["archive"] == "roofs.tar.gz"
    assert sorted(p.name for p in out.iterdir()) == ["console.log", "gates.jsonl", "live", "roofs.tar.gz",
                                                     "steps.jsonl"]
    assert not list((out / "live").iterdir()) and check.excluded.keys() == {"stream.read/torch", "stream.triad/torch"}

    # offline: the archive's partial run is derived by `report`
    with tarfile.open(out / "roofs.tar.gz") as tar:
        tar.extractall(tmp_path / "back", filter="data")
    folder = tmp_path / "back" / made["folder"]
    r = subprocess.run([sys.executable, str(ROOT / "run_bench.py"), "report", str(folder)],
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr
    [derived] = (folder / "derived").iterdir()
    roofs = json.loads((derived / "roofs.json").read_text())
    assert roofs["roofs"] and (derived / "report.md").exists() and (derived / "bandwidth.png").exists()
