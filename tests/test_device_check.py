"""The device check (.ci/device-check): it parses, its dry mode prints the plan of a run that
fits its call, and its limits agree with the predictor's (bench/aot/predict.py CHECK_STEPS)."""
import os
import re
import subprocess
import sys
from pathlib import Path

from bench.aot import predict as pr

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / ".ci" / "device-check"


def _run(*args, **env):
    e = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    e["PYTHON"] = sys.executable  # the script's steps run the interpreter the tests run in, however pytest was started
    e.update(env)
    return subprocess.run(["bash", str(SCRIPT), *args], cwd=ROOT, env=e, capture_output=True, text=True, timeout=300)


def test_the_script_parses():
    assert subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True).returncode == 0


def test_its_limits_are_the_predictors():
    text = SCRIPT.read_text()
    assert int(re.search(r"CHECK_S=\$\{CHECK_S:-(\d+)\}", text).group(1)) == pr.CHECK_S
    assert int(re.search(r"GPU_TESTS_S=\$\{GPU_TESTS_S:-(\d+)\}", text).group(1)) == pr.CHECK_STEPS["gpu tests"][0]
    assert int(re.search(r"\nKILL_S=(\d+)", text).group(1)) == pr.CHECK_STEPS["kill grace"][0]
    assert int(re.search(r"\nPACK_S=(\d+)", text).group(1)) == pr.CHECK_STEPS["pack"][0]
    # at most 8 files come back from the device tool: the script names 7 under $OUT
    outs = set(re.findall(r'\$OUT/([A-Za-z0-9_.-]+)', text))
    assert outs == {"env.txt", "precompile.log", "precompile.json", "gpu-tests.log", "run.log", "check.txt",
                    "brief.txt", "run.tar.gz"}
    assert 'rm -f "$OUT/precompile.json"' in text  # handed to the run, then removed: 7 files stay


def test_dry_mode_prints_a_full_check_that_fits_nine_minutes(device_check_dry):
    out = device_check_dry["full"]  # conftest.py: `--dry`, once per session
    assert out.returncode == 0, out.stderr
    assert ("precompile (bench.aot.precompile, background) | paths (pytest tests/test_gpu_paths.py, <= 60 s) "
            "then pytest -m gpu") in out.stdout
    total = re.search(r"total\s+limit\s+(\d+)\s+predicted\s+(\d+)", out.stdout)
    assert int(total.group(1)) == 530 and int(total.group(2)) <= 530
    run = re.search(r"run \(full\) \+ finish\s+limit\s+(\d+)\s+predicted\s+(\d+)", out.stdout)
    assert int(run.group(2)) <= int(run.group(1))  # the full run is predicted to end before its SIGINT
    quick = device_check_dry["quick"]  # `MODE=quick ... --dry`
    assert quick.returncode == 0 and "run (quick) + counters + finish" in quick.stdout
    assert "pytest -m gpu" not in quick.stdout


def test_a_bad_mode_is_one_sentence_and_exit_2():
    out = _run("--dry", MODE="fast")
    assert out.returncode == 2 and out.stderr.strip() == "MODE must be full or quick, not 'fast'."
