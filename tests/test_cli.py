"""The CLI end to end on the CPU: a quick run into a temporary folder, bad input, Ctrl-C."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from conftest import session_run

import run_bench
from bench.policy import DEFAULT
from bench.results import COLUMNS, METHOD_VERSION, load_run
from bench.run.session import SPENT_NAMES

ROOT = Path(run_bench.__file__).parent
FILES = ["measurements.csv", "run.json", "roofs.json", "roofline.png", "bandwidth.png"]


@pytest.mark.slow
def test_quick_run_end_to_end(quick_stream_run):
    # conftest.py's shared run: --quick --only stream.copy,stream.triad --dtype float32 --counters 3
    # --budget 0.03 (tests/test_counters.py reads its counters note)
    r, tmp_path = quick_stream_run.result, quick_stream_run.out
    assert r.returncode == 0, r.stderr
    [run_dir] = list(tmp_path.iterdir())
    assert run_dir.name.startswith("cpu-") and run_dir.name.endswith("Z")
    for f in FILES:
        assert (run_dir / f).stat().st_size > 0, f
    from bench.results import load_samples, samples_path
    assert samples_path(run_dir).stat().st_size > 0  # samples.jsonl, or .gz when large
    df = pd.read_csv(run_dir / "measurements.csv")
    assert list(df.columns) == COLUMNS
    ok = df[df["status"] == "ok"]
    assert set(ok["impl"]) == {"stream.copy/torch", "stream.triad/torch"}
    assert (ok["gbps"] > 0).all() and (ok["error"] <= ok["tolerance"]).all()
    # bytes and GB/s agree with the formula: triad moves 3 arrays
    t = ok[ok["op"] == "stream.triad"].iloc[-1]
    assert t["bytes"] == 3 * 4 * t["size"]
    assert t["gbps"] == pytest.approx(t["bytes"] / (t["median_ms"] * 1e-3) / 1e9, rel=1e-9)
    skipped = df[df["backend"] == "triton"]
    assert (skipped["status"] == "skipped").all() and skipped["reason"].str.contains("TRITON_INTERPRET").all()
    # Structure, not speed: on a busy machine the 0.03 s budget cuts the largest working sets
    # short (or the runner flags them busy), and then no DRAM roof can be derived; either way the
    # run must say what it did.
    derived = json.loads((run_dir / "roofs.json").read_text())
    dram = [r for r in derived["roofs"] if r["name"] == "dram" and r["source"] == "measured"]
    if dram:
        d = dram[0]
        assert d["value"] > 1 and d["unit"] == "GB/s"
        assert d["interval"][0] <= d["value"] <= d["interval"][1]   # rule 17: the roof within its interval
        # rule 11: the off-chip sizes start at offchip_factor x the measured edge of the level
        # inside (its edge depends on this machine, so it is read back, not assumed), and the
        # roof is one of them; half a size bin of rounding (a triad's 3 arrays) either way
        edges = [(r.get("extra") or {}).get("edge_bytes") for r in derived["roofs"]
                 if r["source"] == "measured" and r["kind"] == "bandwidth" and "." not in r["name"]]
        edges = [e for e in edges if e]
        half_bin = 2 ** (0.5 / DEFAULT.bins_per_octave)
        if edges:
            assert d["extra"]["from_bytes"] >= DEFAULT.offchip_factor * max(edges) / half_bin
        assert d["working_set_bytes"] >= d["extra"]["from_bytes"] / half_bin
    else:
        # no roof: a note names the level and why (too few usable sizes off chip), unless the
        # runner flagged every stream row (a busy machine), when no level has a roof at all
        from bench.results import usable
        counted = df[(df["family"] == "stream") & usable(df)]
        assert any(n.startswith("dram") for n in derived["notes"]) or counted.empty, derived["notes"]
    assert (df["ws_bytes"] > 0).all()                           # the axis is its own column
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["status"] == "complete" and meta["software"]["torch"] and meta["device"]["caches"]
    assert meta["point_count"] == len(df) == len(load_samples(run_dir)) and "points" not in meta
    assert meta["command"].endswith("0.03 --out " + str(tmp_path))
    assert meta["method_version"] == METHOD_VERSION and meta["roofbench_commit"] and meta["run_kind"] == "device"
    assert meta["options"]["budget"] == 0.03 and meta["options"]["only"] == ["stream.copy", "stream.triad"]
    assert meta["timer"]["min_time_s"] == 0.015 and meta["timer"]["budget_s"] == 0.03  # half the budget
    # where the measuring time went: the phases add up to the wall time, none negative
    spent = meta["time_spent"]
    assert set(spent) == {"timed", "timer_other", "gate", "inputs", "other"}
    assert sum(spent.values()) == pytest.approx(meta["measure_wall_s"], abs=0.01)
    assert min(spent.values()) >= -0.01 and spent["timed"] == pytest.approx(meta["timed_s"], abs=1e-3)
    # the printed line of where the time went names each recorded phase (session.SPENT_NAMES)
    [line] = [x for x in r.stdout.splitlines() if SPENT_NAMES["timed"] in x]
    assert all(SPENT_NAMES[k] in line for k in spent)
    assert "roofs:" in r.stdout and "dram" in r.stdout  # a roof, or "no roof: dram: ..."
    # a progress line per measured point; the Triton rows skipped on a CPU grouped into one line
    import re
    assert re.search(r"^\[\d+/\d+ [\d:]+, ~[\d:]+ left\] stream\.copy/torch", r.stdout, re.M)
    assert len(re.findall(r"^\[.*\] stream: \d+ points SKIPPED \(copy/triton, triad/triton\)", r.stdout, re.M)) == 1


NO_CUDA = pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="checks a machine without CUDA")


# (arguments, the refusal's code, what its one sentence names); bad_argument: argparse refused the value
@pytest.mark.parametrize("args,code,named", [
    (["--only", "stream.cpy"], "unknown_name", "'stream.cpy'"),
    (["--device", "tpu"], "unknown_device", "'tpu'"),
    (["--only", "stream.copy", "--dtype", "float64"], "no_such_dtype", "float64"),
    (["--dtype", "nonsense"], "no_such_dtype", "nonsense"),
    (["--only", "stream", "--dtype", "float32,fp8"], "no_such_dtype", "fp8"),
    (["--only", "transfer", "--dtype", "float32"], "no_such_dtype", "float32"),
    (["--budget", "-1"], "bad_argument", "argument --budget"),
    (["--budget", "0"], "bad_argument", "argument --budget"),
    (["--min-time", "-0.1"], "bad_argument", "argument --min-time"),
    (["--max-ws", "0"], "bad_argument", "argument --max-ws"),
    (["--outlier-pct", "-5", "--all-devices", "--procs", "2"], "bad_argument", "argument --outlier-pct"),
    (["--mode", "warm,hot"], "unknown_mode", "'warm,hot'"),
    (["--comm", "--procs", "abc"], "bad_argument", "argument --procs"),
    (["--comm", "--procs", "0"], "too_few_procs", "(got 0)"),
    (["--all-devices", "--procs", "0"], "too_few_procs", "(got 0)"),
    (["--procs", "2"], "procs_alone", "--procs"),
    (["--run-dir", "/tmp/x"], "run_dir_alone", "--run-dir"),
    pytest.param(["--device", "cuda"], "no_cuda", "'cuda'", marks=NO_CUDA),
    pytest.param(["--all-devices", "--procs", "2", "--device", "cuda:1"], "no_cuda", "'cuda:1'", marks=NO_CUDA),
    (["model", "tiny", "--batch", "abc"], "bad_argument", "argument --batch"),
    (["model", "tiny", "--batch", "1,0"], "bad_argument", "argument --batch"),
    (["model", "tiny", "--prompt", "0"], "bad_argument", "argument --prompt"),
    (["model", "tiny", "--context", "many"], "bad_argument", "argument --context"),
    (["model", "tiny", "--budget", "-0.1"], "bad_argument", "argument --budget"),
    pytest.param(["model", "tiny", "--device", "cuda"], "no_cuda", "'cuda'", marks=NO_CUDA),
    (["model", "tiny", "--roofs", "/nonexistent/run"], "missing", "/nonexistent/run"),
    (["--min-time", "5", "--budget", "1"], "min_time_budget", "--min-time 5"),
    # below what any level needs, whatever else is selected
    (["--max-ws", "10KiB", "--only", "stream,gemm,gemv,attention,transfer"], "max_ws_too_small", "--max-ws 10 KiB"),
    (["--max-ws", "10KiB"], "max_ws_too_small", "--max-ws 10 KiB"),
    (["--max-memory", "10TB"], "max_memory_too_large", "--max-memory 10TB"),
    pytest.param(["--only", "transfer"], "all_skipped", "on cpu", marks=NO_CUDA),
    (["--only", "stream.copy", "--dtype", "fp64"], "no_such_dtype", "fp64"),
    (["model", "tiny", "--dtype", "fp32"], "bad_argument", "argument --dtype"),
    (["model", "tiny", "--roofs", str(ROOT / "tests" / "data" / "run_a" / "run.json")], "not_a_folder", "run.json"),
])
def test_every_bad_option_is_refused_before_anything_runs(args, code, named, cli_in_process, tmp_path):
    """Each bad option is one sentence naming it, exit code 2, and no run folder."""
    r = cli_in_process(*args, "--out", tmp_path)
    err = r.stderr
    assert r.returncode == 2 and r.code == code and named in err, (r.code, err)
    assert err.count("\n") == 1 and "Traceback" not in err and "usage:" not in err
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("args,kept", [
    (["--only", "stream.copy", "--dtype", "fp32,bf16"], {"float32", "bfloat16"}),
    (["--only", "gemm.square", "--dtype", "bfloat16,float32"], {"bf16", "fp32"}),
    (["--only", "stream.copy,gemm.square", "--dtype", "float32,float16"], {"float32", "float16", "fp32", "fp16"}),
])
def test_dtype_names_accept_both_spellings(args, kept):
    """Fp32/float32, bf16/bfloat16, fp16/float16, fp64/float64 are aliases."""
    from bench.run import options as opt
    a = run_bench.build_parser().parse_args(args)
    _, _, plan = opt.check_run(a)
    assert {t.point["dtype"] for t in plan.tasks} == kept


def test_help_names_the_subcommands_and_every_option(capsys):
    """--help lists report, compare and model, and hides no option."""
    with pytest.raises(SystemExit):
        run_bench.main(["--help"])
    out = capsys.readouterr().out
    for text in ("report RUN_DIR", "compare RUN_A RUN_B", "model NAME", "--run-dir", "--dry-run", "--device-spec"):
        assert text in out, text
    readme = (ROOT / "README.md").read_text()
    for action in run_bench.build_parser()._actions:
        for flag in action.option_strings:
            if flag.startswith("--") and flag != "--help":
                assert action.help != "==SUPPRESS==" and f"`{flag}`" in readme, flag


def test_list_shows_ops_impls_axes(capsys):
    assert run_bench.main(["--list"]) == 0
    out = capsys.readouterr().out
    for text in ("stream.triad", "stream.read/triton", "axis ws_bytes", "axis dtype", "bytes = 3 n w"):
        assert text in out


def test_bad_size_argument(capsys):
    with pytest.raises(SystemExit):
        run_bench.main(["--max-ws", "lots"])
    assert "64MiB" in capsys.readouterr().err


@session_run
def interrupted_run(tmp, env):
    """A run sent SIGINT (Ctrl-C) once it has written 3 rows, in a process of its own: return an
    object with csv (its measurements.csv, or None when it wrote no rows in a minute),
    returncode, out and err."""
    # stream copies, then fp16 GEMMs (a slow path on CPUs: tens of seconds in all), so the
    # run is still going when the signal comes, however fast this machine is
    p = subprocess.Popen([sys.executable, str(ROOT / "run_bench.py"), "--only", "stream.copy/torch,gemm.square/torch",
                          "--dtype", "float32,fp16", "--budget", "0.5", "--out", str(tmp)],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.time() + 60
    csv = None
    while time.time() < deadline:
        found = list(tmp.glob("*/measurements.csv"))
        if found and found[0].read_text().count("\n") >= 4:
            csv = found[0]
            break
        time.sleep(0.2)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    return SimpleNamespace(csv=csv, returncode=p.returncode, out=out, err=err)


@pytest.mark.slow
def test_ctrl_c_keeps_a_readable_partial_run(interrupted_run):
    csv, p, out, err = interrupted_run.csv, interrupted_run, interrupted_run.out, interrupted_run.err
    assert csv is not None, "the run wrote no rows"
    assert p.returncode == 130, err
    assert "interrupted" in out and "Traceback" not in err
    run = load_run(csv.parent)
    assert run.meta["status"] == "interrupted" and len(run.measurements) >= 3
    assert run.meta["point_count"] == len(run.points) == len(run.measurements)
    assert (csv.parent / "bandwidth.png").exists()


def test_sigterm_stops_the_measuring_as_ctrl_c_does():
    """A full run killed by a timeout's SIGTERM kept its rows but wrote no roofs.json: SIGTERM
    now raises KeyboardInterrupt while a run measures, and the old handler comes back after."""
    from bench.run.session import terminate_as_interrupt
    before = signal.getsignal(signal.SIGTERM)
    old = terminate_as_interrupt()
    try:
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)
    finally:
        signal.signal(signal.SIGTERM, old)
    assert old == before and signal.getsignal(signal.SIGTERM) == before


@pytest.mark.slow
def test_gemm_run_writes_compute_roofs_and_gemm_plot(tmp_path, cli_in_process):
    # in this process (conftest.py): the quick stream run and Ctrl-C above start their own
    r = cli_in_process("--quick", "--only", "gemm.square,gemm.skinny", "--max-ws", "2200KiB", "--budget", "0.02",
                       "--out", tmp_path)
    assert r.returncode == 0, r.stderr
    [run_dir] = list(tmp_path.iterdir())
    doc = json.loads((run_dir / "roofs.json").read_text())
    roofs = {x["name"]: x for x in doc["roofs"] if x["kind"] == "compute" and x["source"] == "measured"}
    # each precision measured has a roof, or a note saying why not, or (on a machine busy
    # enough that the runner flagged every one of its rows, or too slow for 5 samples in 0.02 s)
    # no row of it that could count: the verdict does not depend on the machine's speed
    from bench.results import usable
    df = pd.read_csv(run_dir / "measurements.csv")
    for precision in ("fp32", "bf16", "int8"):
        counted = df[(df["dtype"] == precision) & (df["mode"] != "sustained") & usable(df)]
        assert precision in roofs or any(n.startswith(f"{precision}: no compute roof") for n in doc["notes"]) \
            or counted.empty, precision
    assert "tf32" not in roofs
    for roof in roofs.values():
        assert roof["shape"] and roof["value"] > 0 and roof["impl"].split("/")[1] in ("torch", "numpy")
    assert (run_dir / "gemm.png").stat().st_size > 0
    skinny = df[(df["op"] == "gemm.skinny") & (df["status"] == "ok")]
    swept = skinny[skinny["mode"] != "sustained"]  # the sustained phase re-runs roof candidates after the sweeps
    assert not swept.empty and (swept["mode"] == "cold").all()
    tf32 = df[df["dtype"] == "tf32"]
    assert (tf32["status"] == "skipped").all() and tf32["reason"].str.contains("TF32").all()
    assert "best GFLOP/s" in r.stdout and "% attainable" in r.stdout   # the compute kernels' table's columns
