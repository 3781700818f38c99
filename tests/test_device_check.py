"""The device check (.ci/device-check, bench/devcheck): its plan fits one 6-minute call with
20% to spare, a step's limit leaves the later steps their predicted time, the watchdog stops a
step that ignores SIGINT, and a rehearsal on the CPU with a hung kernel writes per-case
verdicts and a partial run that `report` derives."""
import json
import re
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
import test_gpu_paths

from bench.aot.predict import spec_device
from bench.devcheck import main as dc
from bench.devcheck import plan as dp
from bench.devcheck.watchdog import ENDED, INTERRUPTED, KILLED, run_bounded
from bench.measure.registry import load_all

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / ".ci" / "device-check"
H200 = spec_device("h200")


def test_the_script_parses_and_runs_the_check_module():
    assert subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True).returncode == 0
    assert 'exec "${PYTHON:-python3}" -m bench.devcheck "$@"' in SCRIPT.read_text()


@pytest.fixture
def gpu_planning(monkeypatch):
    """Plan as on the GPU host: no Triton interpreter (conftest.py sets it on a CPU, and the
    skip rules read it)."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)


def test_the_required_steps_fit_one_call_with_a_fifth_to_spare(gpu_planning):
    plan = dp.steps(H200, "sm_90", Path("/nonexistent"))
    assert [s.name for s in plan] == ["env", "precompile", "gates", "roofs-memory", "roofs-compute", "quick"]
    assert [s.name for s in plan if not s.required] == ["quick"]
    # the device tool's call is 6 minutes at most; the check's own deadline is inside it
    assert dp.CHECK_S < dp.CALL_S <= 360
    need = dp.required_s(plan)
    assert need <= (1 - dp.SLACK) * dp.CHECK_S, dp.plan_text(plan)
    # the run steps run what the issue asks of this GPU, and each is predicted from the dry run's model
    memory, compute = plan[3], plan[4]
    assert set(memory.only) == {"probe.l1/torch", "probe.l1/triton", "stream.reread/torch", "stream.reread/triton",
                                "stream.read/torch", "stream.read/triton"}
    assert {"gemm.square/triton_tma", "gemm.square/torch", "fma.chains/triton", "attention.prefill/triton"} \
        <= set(compute.only)
    assert memory.predicted_s == pytest.approx(dp.STEP_START_S + dp.run_prediction(H200, memory.only, False,
                                                                                   dp.MEMORY_DTYPES))


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


@pytest.mark.parametrize("code,how,rc", [("pass", ENDED, 0), ("import time; time.sleep(60)", INTERRUPTED, -2),
                                         (IGNORES_SIGINT, KILLED, -9)])
def test_the_watchdog_interrupts_then_kills_at_the_limit(tmp_path, code, how, rc):
    # rc: Python ends on an uncaught KeyboardInterrupt by SIGINT itself (-2), and SIGKILL is -9
    with open(tmp_path / "log", "w") as log:
        got = run_bounded([sys.executable, "-c", code], 3.0, 1.5, log)
    assert got.how == how and got.rc == rc
    assert got.seconds < 1.5 if how == ENDED else 1.5 <= got.seconds < 4.0


def _lines(path: Path) -> list[dict]:
    return [json.loads(raw) for raw in path.read_text().splitlines()]


@pytest.mark.slow
def test_a_rehearsal_with_a_hung_kernel_leaves_verdicts_and_a_derivable_partial_run(tmp_path):
    gates = dp.Step("gates", "gates", [sys.executable, "-m", "pytest", "--noconftest", "-p", "tests.gate_verdicts",
                                       "-p", "no:cacheprovider", "-q", "tests/devcheck_cases.py"], 10, 1,
                     case_s=3)
    run = dp.Step("roofs", "run", ["--quick", "--dtype", "float32", "--max-ws", "1MiB", "--budget", "0.03"], 20, 2,
                  only=("stream.copy/torch", "stream.triad/torch", "stream.read/torch"),
                  env={"ROOFBENCH_HANG_AFTER": "2"}, script="tests/hang_run.py", stall_s=6)
    out = tmp_path / "out"
    check = dc.run_check([gates, run], out, check_s=120, say=lambda s: None)

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
