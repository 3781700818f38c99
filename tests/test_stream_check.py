"""The outside yardstick for a CPU's DRAM roof (.ci/stream-check, .ci/stream_copy.c): the C copy
compiles, copies exactly and counts 2 x size bytes a trial; the table reads a run folder's
roofs and run.json and divides the copy roof by the STREAM copy's best."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / ".ci" / "stream-check"


def test_the_script_parses():
    assert subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True).returncode == 0


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_the_copy_compiles_checks_itself_and_says_what_it_counted(tmp_path):
    exe = tmp_path / "stream_copy"
    subprocess.run(["gcc", "-O3", "-fopenmp", str(ROOT / ".ci" / "stream_copy.c"), "-o", str(exe)], check=True)
    out = subprocess.run([str(exe), str(1 << 20), "2"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    words = out.stdout.split()
    assert words[:2] == ["copy", "best"] and float(words[2]) > 0 and float(words[5]) <= float(words[2])
    # what it counted: 2 x the size in bytes a trial, over the 2 trials asked for
    assert words[7:13] == ["(2", "x", str(1 << 20), "bytes,", "2", "trials,"]


def _run_folder(path, roofs, measure_wall_s=40.0, timed_s=24.0, predicted_s=50.0):
    path.mkdir()
    (path / "run.json").write_text(json.dumps({"measure_wall_s": measure_wall_s, "timed_s": timed_s,
                                               "predicted_s": predicted_s}))
    (path / "roofs.json").write_text(json.dumps({"roofs": roofs}))
    # two ok points, one bounded and one with no bound for a missing roof, and a skipped row
    (path / "measurements.csv").write_text("status,attainable_gflops,bound_note\nok,12.5,\n"
                                          "ok,,dram: no measured roof\nskipped,,\n")
    return path


def _roof(name, value, **extra):
    return {"name": name, "value": value, "source": "measured", "extra": extra}


@pytest.mark.slow
def test_the_table_divides_the_copy_roof_by_the_best_stream_copy(tmp_path):
    a = _run_folder(tmp_path / "cpu-a", [_roof("dram", 48.0, steady=True, passes=[36.0, 48.0]),
                                         _roof("dram.copy", 40.0), _roof("dram.read", 48.0),
                                         _roof("dram.write", 30.0), _roof("l3", 200.0)])
    b = _run_folder(tmp_path / "cpu-b", [_roof("l3", 200.0)])
    runs = tmp_path / "runs.txt"
    runs.write_text(f"{a} 45.500 30.0 32.0 31.0\n{b} 50.000 20.0 21.0 19.0\n")
    env = {**os.environ, "PYTHON": sys.executable}
    out = subprocess.run(["bash", str(SCRIPT), "--table", str(runs)], capture_output=True, text=True, env=env,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    rows = [line for line in out.stdout.splitlines() if line.startswith("| cpu-")]
    # 40 / 32 = 1.25; 24 s of 40 s timed = 60%
    assert rows[0] == ("| cpu-a | 48.0 (40.0 / 48.0 / 30.0) | yes | 36.0-48.0 | 32.0 (30.0, 32.0, 31.0) | 1.25 "
                       "| 45.5 | 60% | 50.0 | 1 |")
    assert rows[1].startswith("| cpu-b | no DRAM roof |") and "| 21.0 |" in rows[1]


def test_the_table_refuses_a_missing_file(tmp_path):
    out = subprocess.run(["bash", str(SCRIPT), "--table", str(tmp_path / "nope.txt")], capture_output=True, text=True,
                         env={**os.environ, "PYTHON": sys.executable}, timeout=60)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "runs.txt" in out.stderr
