"""Hardware counters beside counted bytes (--counters). On the CPU: ncu's raw
CSV as recorded on an H200 (tests/data/ncu/) parsed and summed with hand-worked ratios; a
faked ncu (an executable script in tmp_path) that prints the recorded table, or the failures
seen on real machines (gVisor's LibraryNotLoaded, the driver's ERR_NVGPUCTRPERM), each
ending in one sentence; the 10% flag; the phase writing counters.csv and the report listing
it; --counters on a CPU saying why it cannot run while the run completes. On a lent GPU with
ncu: one real replay."""
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

import run_bench
from bench.aot import predict
from bench.aot.targets import fake_device
from bench.hw import counters as hw
from bench.hw.device import cpu_info
from bench.results import COUNTER_COLUMNS, COUNTERS, Measurement, load_counters, load_run
from bench.run import counters_phase, replay
from roofs.analysis import confirm as confirm_mod
from roofs.reports.brief import brief
from roofs.reports.report import counter_lines, counters_section

ROOT = Path(__file__).parent.parent
DATA = ROOT / "tests" / "data" / "ncu"
GPU = dataclasses.replace(fake_device("sm_90"), torch_device="cuda:0", name="NVIDIA H200")

# the formulas' side of the two recorded points
COPY = {"point_id": "stream.copy/triton[dtype=float32,ws_bytes=268435456]@warm", "flops": 0, "bytes": 268_435_456,
        "read_bytes": 134_217_728, "write_bytes": 134_217_728, "l2_bytes": 268_435_456, "l1_bytes": 268_435_456}
N = 4096
GEMM = {"point_id": "gemm.square/torch[dtype=fp16,shape=(4096, 4096, 4096)]@warm", "flops": 2 * N ** 3,
        "bytes": 3 * N * N * 2, "read_bytes": 2 * N * N * 2, "write_bytes": N * N * 2, "l2_bytes": None,
        "l1_bytes": None}


def fake_ncu(tmp_path: Path, body: str, name: str = "ncu") -> Path:
    """Write an executable stand-in for ncu that ignores its arguments and runs body (sh)."""
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return path


def test_the_raw_csv_is_parsed_row_per_kernel_with_its_units():
    [k] = hw.parse_raw_csv((DATA / "copy.csv").read_text())
    assert k["id"] == 0 and k["kernel"] == "_stream_copy_kernel" and k["grid"] == "(32768, 1, 1)"
    assert k["dram__bytes_read.sum"] == 134_250_496 and k["dram__bytes_write.sum"] == 134_217_728
    assert k["lts__t_bytes.sum"] == 268_500_992 and k["sm__inst_executed_pipe_tensor_op_gmma.sum"] == 0
    gemm = hw.parse_raw_csv((DATA / "gemm.csv").read_text())
    assert [k["id"] for k in gemm] == [0, 1] and gemm[1]["sm__inst_executed_pipe_tensor_op_hmma.sum"] is None  # n/a


def test_scaled_units_are_read_in_base_units():
    text = ('"ID","Kernel Name","CC","dram__bytes_read.sum","lts__t_bytes.sum"\n"","","","Mbyte","Kbyte"\n'
            '"0","k","9.0","1.5","2,048"\n')
    [k] = hw.parse_raw_csv(text)
    assert k["dram__bytes_read.sum"] == 1_500_000 and k["lts__t_bytes.sum"] == 2_048_000


def test_output_without_a_table_is_refused_in_one_sentence():
    with pytest.raises(hw.CounterError, match="no raw CSV header"):
        hw.parse_raw_csv("==PROF== Connected to process 1\n==ERROR== something\n")


def test_a_copy_counted_beside_its_formula_hand_worked():
    kernels = hw.parse_raw_csv((DATA / "copy.csv").read_text())
    row = hw.counter_row(COPY, hw.sum_kernels(kernels), kernels)
    # 134,250,496 + 134,217,728 measured against 2 x 134,217,728 counted: 32 KiB more, 1/8192
    assert row["hw_dram_bytes"] == 268_468_224
    assert row["dram_ratio"] == pytest.approx(1 + 1 / 8192, rel=1e-15)
    assert row["read_ratio"] == pytest.approx(1 + 1 / 4096, rel=1e-15) and row["write_ratio"] == 1.0
    assert row["l2_ratio"] == pytest.approx(268_500_992 / 268_435_456) and row["l1_ratio"] == 1.0
    assert row["hw_tensor_inst"] == 0 and row["flops_per_tensor_inst"] is None  # no FLOPs, no tensor pipe
    assert row["flag"] == "" and row["kernels"] == 1 and row["kernel_names"] == "_stream_copy_kernel"


def test_a_gemm_sums_its_kernels_and_is_flagged_hand_worked():
    kernels = hw.parse_raw_csv((DATA / "gemm.csv").read_text())
    totals = hw.sum_kernels(kernels)
    assert totals["hw_dram_read_bytes"] == 98_566_144 + 2_097_152 == 100_663_296
    assert totals["hw_dram_write_bytes"] == 33_587_200 + 32_768 == 33_619_968
    assert totals["hw_tensor_inst"] == 1_048_576  # wgmma + mma.sync (0, and n/a for the fill kernel)
    row = hw.counter_row(GEMM, totals, kernels)
    # B read 1.5 times over (an nn layout): 134,283,264 measured against 100,663,296 counted
    assert Fraction(row["dram_ratio"]).limit_denominator(10 ** 9) == Fraction(134_283_264, 100_663_296)
    assert row["read_ratio"] == 1.5 and row["write_ratio"] == 1 + 1 / 512
    assert row["flops_per_tensor_inst"] == 131_072  # 2 x 4096^3 / 2^20: 64x256x16 wgmma, 4 warps each
    assert row["l2_ratio"] is None and row["l1_ratio"] is None  # the formulas count no L2 or L1 bytes here
    assert row["flag"].code == "dram_beyond_formula" and row["flag"].startswith("DRAM bytes 1.33x")
    assert row["kernels"] == 2 and row["kernel_names"].startswith("sm90_xmma_gemm_f16f16")


@pytest.mark.parametrize("ratio,flagged", [(1.0, False), (1.10, False), (0.90, False), (1.1001, True),
                                           (0.8999, True), (2.0, True), (None, False)])
def test_the_flag_is_a_dram_difference_beyond_ten_percent(ratio, flagged):
    assert bool(hw.dram_flag(ratio)) is flagged
    if ratio == 0.8999:
        flag = hw.dram_flag(ratio)
        assert flag.code == "dram_beyond_formula" and flag.startswith("DRAM bytes 0.90x") and "10% fewer" in flag


def test_ratios_need_both_sides():
    assert hw.ratio(110, 100) == pytest.approx(1.1) and hw.ratio(None, 100) is None
    assert hw.ratio(5, 0) is None and hw.ratio(5, float("nan")) is None


def test_the_command_line_profiles_the_replay_range_at_the_run_clocks():
    cmd = hw.ncu_command("/opt/ncu", ["python", "-m", "bench.run.replay"], "9.0", kernel_regex="copy", launch_count=1)
    text = " ".join(cmd)
    for part in ("--csv", "--page raw", "--print-units base", "--clock-control none", "--cache-control all",
                 "--target-processes all", "--replay-mode kernel", "--nvtx --nvtx-include roofbench-counted/",
                 "-k regex:copy", "--launch-count 1"):
        assert part in text, part
    assert cmd[0] == "/opt/ncu" and cmd[-3:] == ["python", "-m", "bench.run.replay"]
    metrics = cmd[cmd.index("--metrics") + 1].split(",")
    assert {*hw.METRICS["hw_dram_read_bytes"], *hw.SM90_ONLY} <= set(metrics)
    assert hw.SM90_ONLY and not set(hw.SM90_ONLY) & set(hw.metrics_for("8.0"))  # no wgmma before sm_90


def test_a_faked_ncu_printing_the_recorded_table_is_read(tmp_path):
    ncu = fake_ncu(tmp_path, f"cat '{DATA / 'gemm.csv'}'\necho 'roofbench-replay: {{\"detail\": \"BLOCK 128\"}}' >&2")
    got = hw.run_profiler(hw.ncu_command(str(ncu), ["python", "-c", "pass"], "9.0"), timeout_s=30)
    assert len(got.kernels) == 2 and "roofbench-replay" in got.output


@pytest.mark.parametrize("printed,rc,why", [
    ("==ERROR== Failed to initialize the profiler: LibraryNotLoaded", 1,
     "the profiler cannot load here (ncu: Failed to initialize the profiler: LibraryNotLoaded), as in a sandbox "
     "such as gVisor that does not pass GPU counters through"),
    ("==PROF== Connected to process 9 (/usr/bin/python3)\n==ERROR== ERR_NVGPUCTRPERM - The user does not have "
     "permission to access NVIDIA GPU Performance Counters on the target device 0.", 0,
     "the driver refuses access to the GPU's performance counters (ERR_NVGPUCTRPERM): run as root, or load the "
     "NVIDIA driver with NVreg_RestrictProfilingToAdminUsers=0"),
    ("==WARNING== No kernels were profiled.", 0,
     "ncu profiled no kernel: the replay launched none inside its NVTX range"),
    ("==ERROR== The application returned an error code (1).", 1,
     "ncu failed: The application returned an error code (1)"),
    ("", 3, "ncu exited with status 3 without a table of counters"),
    ("Traceback (most recent call last):\n  File x, line 1\ntorch.OutOfMemoryError: CUDA out of memory. "
     "Tried to allocate "
     "2.00 GiB\n==ERROR== The application returned an error code (1).", 1,
     "the replayed program failed: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"),
    ("roofbench-replay: unknown op 'x' or impl 'y': see python run_bench.py --list.\n"
     "==ERROR== The application returned "
     "an error code (2).", 2,
     "the replayed program failed: unknown op 'x' or impl 'y': see python run_bench.py --list"),
])
def test_a_faked_ncu_that_fails_says_why_in_one_sentence(tmp_path, printed, rc, why):
    (tmp_path / "printed.txt").write_text(printed + "\n")
    ncu = fake_ncu(tmp_path, f"cat '{tmp_path / 'printed.txt'}'\nexit {rc}")
    with pytest.raises(hw.CounterError) as e:
        hw.run_profiler([str(ncu), "--csv"], timeout_s=30)
    assert str(e.value) == why and "\n" not in str(e.value)


def test_a_cpu_or_a_machine_without_ncu_says_why(tmp_path, monkeypatch):
    assert hw.unavailable(cpu_info()).code == "no_gpu" and "cpu" in hw.unavailable(cpu_info())
    monkeypatch.delenv(hw.NCU_ENV, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(hw.glob, "glob", lambda pattern: [])
    assert hw.unavailable(GPU).code == "no_ncu" and hw.NCU_ENV in hw.unavailable(GPU)
    fake_ncu(tmp_path, "exit 0")
    assert hw.find_ncu() == str(tmp_path / "ncu") and hw.unavailable(GPU) == ""
    amd = dataclasses.replace(fake_device("gfx942"), torch_device="cuda:0")
    assert hw.unavailable(amd).code == "not_nvidia" and "amd" in hw.unavailable(amd)


def measurement(op, family, impl, point, flops, nbytes, gbps_s, **columns):
    return Measurement(op=op, family=family, impl=impl, backend=impl.split("/")[1], point=point, size=1,
                       shape=str(point.get("shape", "(n,)")), working_set_bytes=nbytes, flops=flops, bytes=nbytes,
                       mode="warm", status="ok", samples_s=(gbps_s,) * 5, reps=1, columns=columns)


COPY_M = measurement("stream.copy", "stream", "stream.copy/triton", {"dtype": "float32", "ws_bytes": 268435456}, 0,
                     268_435_456, 1e-4, read_bytes=134_217_728, write_bytes=134_217_728, l2_bytes=268_435_456,
                     l1_bytes=268_435_456)
SLOW_COPY = measurement("stream.copy", "stream", "stream.copy/torch", {"dtype": "float32", "ws_bytes": 268435456}, 0,
                        268_435_456, 2e-4)
GEMM_M = measurement("gemm.square", "gemm", "gemm.square/torch", {"dtype": "fp16", "shape": (N, N, N)}, 2 * N ** 3,
                     3 * N * N * 2, 2e-4, read_bytes=2 * N * N * 2, write_bytes=N * N * 2)
COPY_H2D = measurement("transfer.h2d", "transfer", "transfer.h2d/torch", {"bytes": 2 ** 20}, 0, 2 ** 20, 1e-4)


def test_the_chosen_points_are_each_roofs_best_then_each_familys_fastest(monkeypatch):
    monkeypatch.setattr(confirm_mod, "phase_candidates", lambda rows, device, per_roof: [("hbm", SLOW_COPY)])
    chosen = counters_phase.choose([SLOW_COPY, COPY_M, GEMM_M, COPY_H2D], GPU)
    assert [(why, m.impl) for why, m in chosen] == [("hbm roof", "stream.copy/torch"),
                                                     ("stream's fastest point", "stream.copy/triton"),
                                                     ("gemm's fastest point", "gemm.square/torch")]
    assert len(counters_phase.choose([SLOW_COPY, COPY_M, GEMM_M], GPU, most=2)) == 2
    monkeypatch.setattr(confirm_mod, "phase_candidates", lambda rows, device, per_roof: [("hbm", COPY_M)])
    assert counters_phase.choose([COPY_M], GPU)[0][0].split(", ") == ["hbm roof", "stream's fastest point"]


@pytest.mark.renders
def test_the_phase_replays_under_a_faked_ncu_into_counters_csv_and_the_report(tmp_path, monkeypatch):
    run = tmp_path / "run"
    shutil.copytree(ROOT / "tests" / "data" / "run_a", run)
    ncu = fake_ncu(tmp_path, f"""case "$*" in *gemm.square*) f=gemm ;; *) f=copy ;; esac
cat "{DATA}/$f.csv"
echo 'roofbench-replay: {{"op": "x", "impl": "y", "detail": "BLOCK_SIZE=1024"}}' >&2""")
    monkeypatch.setenv(hw.NCU_ENV, str(ncu))
    monkeypatch.setattr(confirm_mod, "phase_candidates", lambda rows, device, per_roof: [])
    said = []
    info = counters_phase.run_phase([COPY_M, GEMM_M], GPU, 6, True, run, said.append)
    assert info["tool"] == str(ncu) and info["points"] == 2 and info["flagged"] == 1 and info["why"] == ""
    df = load_counters(run)
    assert list(df.columns) == COUNTER_COLUMNS and list(df["impl"]) == ["stream.copy/triton", "gemm.square/torch"]
    assert df["dram_ratio"].iloc[0] == pytest.approx(1 + 1 / 8192) and df["flag"].iloc[1].startswith("DRAM bytes 1.33x")
    assert set(df["replay_detail"]) == {"BLOCK_SIZE=1024"} and set(df["tool"]) == {"ncu"}
    assert any("(flagged)" in line for line in said)
    meta = json.loads((run / "run.json").read_text())
    meta["counters"] = info
    (run / "run.json").write_text(json.dumps(meta))
    [(title, lines), (_, table), (flag_title, flagged)] = counters_section(load_run(run))
    assert title == "Counters beside counted bytes"
    assert GEMM_M.point_id in lines[0] and COPY_M.point_id not in lines[0]  # the one flagged point is named
    assert list(table["DRAM ratio"]) == ["1.0001", "1.3340"] and list(table["read ratio"]) == ["1.0002", "1.5000"]
    assert flag_title.startswith("### DRAM bytes beyond 10% of the formula's: 1 point")
    assert list(flagged["point"]) == [GEMM_M.point_id]
    text = brief(run)  # the one screen the device check brings back
    assert set(counter_lines(load_run(run))) <= set(text.splitlines())
    [summary, copy_line, gemm_line] = counter_lines(load_run(run))
    assert str(ncu) in summary and [int(n) for n in re.findall(r"\b(\d+) points?\b", summary)] == [2, 1]
    assert COPY_M.point_id in copy_line and "1.000x" in copy_line and not copy_line.endswith("FLAGGED")
    assert GEMM_M.point_id in gemm_line and "1.334x" in gemm_line and gemm_line.endswith("FLAGGED")


@pytest.mark.slow
def test_the_replay_finds_the_checkout_from_any_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    env = counters_phase.replay_env()
    assert env["PYTHONPATH"] == f"{ROOT}{os.pathsep}/elsewhere"
    r = subprocess.run([sys.executable, "-m", "bench.run.replay", "--op", "no.such", "--impl", "x/y", "--point", "{}",
                        "--device", "cpu"], capture_output=True, text=True, env=env, timeout=120)
    # exit code 2 is the replay's own refusal of the op: an import that failed would exit 1 with a traceback
    assert r.returncode == 2 and "no.such" in r.stderr and "Traceback" not in r.stderr


def test_a_refusing_machine_stops_the_phase_after_one_point(tmp_path, monkeypatch):
    ncu = fake_ncu(tmp_path, "echo '==ERROR== ERR_NVGPUCTRPERM - The user does not have permission'\nexit 1")
    monkeypatch.setenv(hw.NCU_ENV, str(ncu))
    monkeypatch.setattr(confirm_mod, "phase_candidates", lambda rows, device, per_roof: [])
    info = counters_phase.run_phase([COPY_M, GEMM_M], GPU, 6, False, tmp_path, lambda line: None)
    assert info["points"] == 1 and "ERR_NVGPUCTRPERM" in info["why"]
    df = load_counters(tmp_path)
    assert list(df["status"]) == ["error"] and "ERR_NVGPUCTRPERM" in df["reason"].iloc[0]


def test_a_point_the_replay_cannot_carry_is_an_error_row(tmp_path, monkeypatch):
    monkeypatch.setenv(hw.NCU_ENV, str(fake_ncu(tmp_path, f"cat '{DATA / 'copy.csv'}'")))
    monkeypatch.setattr(confirm_mod, "phase_candidates", lambda rows, device, per_roof: [])
    odd = dataclasses.replace(COPY_M, point={"dtype": "float32", "ws_bytes": object()})
    info = counters_phase.run_phase([odd], GPU, 6, False, tmp_path, lambda line: None)
    df = load_counters(tmp_path)
    assert info["points"] == 1 and info["why"] == "" and list(df["status"]) == ["error"]
    assert "TypeError" in df["reason"].iloc[0]   # the axes' JSON could not carry the point


def test_a_counters_phase_that_crashes_costs_no_measurement(tmp_path, monkeypatch):
    from helpers import toy_registry

    from bench.hw import detect
    from bench.measure.runner import make_plan
    from bench.measure.timing import TimerConfig
    from bench.run import session

    def crash(*args, **kw):
        raise RuntimeError("a bug in the phase")
    monkeypatch.setattr(session.counters_phase, "run_phase", crash)
    cpu = detect.resolve("cpu")
    timer = TimerConfig(budget_s=0.2, warmup_s=0.01, min_samples=3)
    said = []
    status, ms = session.execute(tmp_path / "run", session.run_meta(cpu, {}, "device", timer), cpu,
                                 make_plan(toy_registry(), cpu, quick=True), timer, quick=True, say=said.append,
                                 counters=2)
    assert status == "complete" and [m.status for m in ms] == ["ok"]
    meta = load_run(tmp_path / "run").meta
    assert meta["status"] == "complete"
    assert meta["counters"] == {"requested": 2, "why": "the counters phase failed: RuntimeError: a bug in the phase"}
    assert [line for line in said if meta["counters"]["why"] in line] != []  # the run says why, and goes on


def test_the_replay_rebuilds_a_tuple_axis_from_json():
    from bench.measure.registry import load_all
    op = load_all().ops["gemm.square"]
    device = cpu_info()
    planned = op.points(device, True)[0]
    given = replay._as_axes(json.loads(json.dumps(planned)))
    assert replay.find_point(op, given, device, True) == planned and isinstance(planned["shape"], tuple)
    assert replay.main(["--op", "no.such", "--impl", "x/y", "--point", "{}", "--device", "cpu"]) == 2


def test_the_dry_run_counts_the_replays(capsys):
    assert run_bench.main(["--dry-run", "--device-spec", "h200", "--quick", "--only", "stream.copy",
                           "--counters", "2"]) == 0
    [line] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("with --counters")]
    # --counters 2: 2 replays of a guessed 30 s each, 60 s in all
    assert [float(n) for n in re.findall(r"\d+(?:\.\d+)?", line)] == [2, 2 * predict.COUNTER_REPLAY_S, 2,
                                                                      predict.COUNTER_REPLAY_S]


def test_counters_do_not_go_with_several_ranks(cli_in_process):
    r = cli_in_process("--counters", "--comm")
    assert r.returncode == 2 and r.code == "counters_multi" and "Traceback" not in r.stderr


@pytest.mark.slow
def test_counters_on_the_cpu_say_why_and_the_run_completes(quick_stream_run):
    # conftest.py's shared quick stream run, made with --counters 3 (tests/test_cli.py reads the rest of it)
    r, tmp_path = quick_stream_run.result, quick_stream_run.out
    assert r.returncode == 0, r.stderr
    why = hw.unavailable(cpu_info())
    assert why.code == "no_gpu"
    [note] = [line for line in r.stderr.splitlines() if "--counters" in line]  # said once, up front
    assert why in note
    [run_dir] = list(tmp_path.iterdir())
    run = load_run(run_dir)
    assert run.meta["status"] == "complete" and run.meta["options"]["counters"] == 3
    assert run.meta["counters"]["why"] == why
    assert not (run_dir / COUNTERS).exists() and (run.measurements["status"] == "ok").any()
    [(_, said)] = counters_section(run)  # the report's section says why, and nothing more
    assert why in said[0] and said[0] in (run_dir / "report.md").read_text()
    assert set(counter_lines(run)) <= set(r.stdout.splitlines()) and why in counter_lines(run)[0]  # the summary


@pytest.mark.gpu
def test_a_real_replay_under_ncu_reads_a_copys_dram_bytes(tmp_path):
    from bench.hw import detect
    device = detect.resolve("cuda")
    if hw.unavailable(device):
        pytest.skip(hw.unavailable(device))
    ws = 256 * 2 ** 20
    m = measurement("stream.copy", "stream", "stream.copy/torch", {"dtype": "float32", "ws_bytes": ws}, 0, ws, 1e-4,
                    read_bytes=ws // 2, write_bytes=ws // 2)
    cmd = hw.ncu_command(hw.find_ncu(), counters_phase.replay_argv(m, device, True), device.compute_capability,
                         launch_count=1)
    try:
        got = hw.run_profiler(cmd, timeout_s=240, env=counters_phase.replay_env())
    except hw.CounterError as e:
        pytest.skip(f"counters cannot be read on this machine: {e}")
    row = hw.counter_row(counters_phase.formula_of(m, "test"), hw.sum_kernels(got.kernels), got.kernels)
    assert row["dram_ratio"] == pytest.approx(1.0, abs=0.1), row
