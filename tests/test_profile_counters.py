"""profile --counters (bench/run/profile_counters.py): the option and its refusals; on the CPU the one sentence
and a complete profile; the ncu command line over a script's replay; a synthetic ncu raw CSV attributed to
synthetic ops by the kernel names each launched, in order, with the sums and ratios worked by hand (directly and
through a faked ncu); the replay entry point; the report's counter columns from a hand-made ops.csv. On a lent
GPU with ncu: one real profile."""
import html
import json
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import torch
from test_counters import GPU, fake_ncu
from torch.autograd import DeviceType

import run_bench
from bench import api
from bench.hw import counters as hw
from bench.hw.device import cpu_info
from bench.run import profile as profile_mod
from bench.run import profile_counters as pc
from bench.run.counters_phase import replay_env
from roofs.analysis.roofline import Roof
from roofs.reports.profile import COUNTERS_TITLE, RANKED_HEAD, counters_lines, finish_profile

ROOT = Path(__file__).resolve().parent.parent
RUN = ROOT / "tests" / "data" / "run_a"
ROOFS = [Roof("bandwidth", "dram", 50.0, "GB/s"), Roof("compute", "fp32", 200.0, "GFLOP/s")]

# the kernel names as torch.profiler (CUPTI) spells them, and as ncu's raw CSV does: the same function apart
# from how their templates and parameters are printed
GEMM_K = "void gemm_kernel<float, 128>(float const*, float const*, float*, int)"
GEMM_N = "void gemm_kernel<float, 128>(const float *, const float *, float *, int)"
FILL_K = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char*, "
          "1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)")
FILL_N = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char *, "
          "1>>(int, T2, T3)")

OP = {"module": "m", "shapes": "8x8", "dtype": "float32", "precision": "fp32", "kind": "aten"}
ROWS = pd.DataFrame([
    {**OP, "op": "aten::mm", "calls": 1, "flops": 2e6, "read_bytes": 1200.0, "write_bytes": 400.0, "time_s": 0.5},
    {**OP, "op": "aten::add", "calls": 2, "flops": float("nan"), "read_bytes": 700.0, "write_bytes": 300.0,
     "time_s": 0.3},
    {**OP, "op": "aten::sum", "calls": 1, "flops": float("nan"), "read_bytes": 90.0, "write_bytes": 4.0,
     "time_s": 0.2},   # ran on the CPU: launched no kernel, so never chosen
    {**OP, "op": "aten::relu", "calls": 1, "flops": float("nan"), "read_bytes": 100.0, "write_bytes": 100.0,
     "time_s": 0.1}], columns=profile_mod.COLUMNS)
MM, ADD, SUM, RELU = (tuple(r[c] for c in pc.KEY) for _, r in ROWS.iterrows())
# the first captured step: mm's GEMM and its fill, add's first call, a kernel between ops, relu, add's second call
LAUNCHES = [(MM, GEMM_K), (MM, FILL_K), (ADD, FILL_K), (None, FILL_K), (RELU, FILL_K), (ADD, FILL_K)]
# what ncu read of those six kernels, in its order: (name, DRAM bytes read, written)
PROFILED = [(GEMM_N, 1000, 300), (FILL_N, 0, 200), (FILL_N, 400, 200), (FILL_N, 50, 50), (FILL_N, 70, 30),
            (FILL_N, 410, 190)]


def raw_csv(kernels) -> str:
    """Return ncu's --csv --page raw output (the format bench.hw.counters.parse_raw_csv reads) for kernels."""
    head = ['"ID"', '"Process ID"', '"Process Name"', '"Host Name"', '"Kernel Name"', '"Context"', '"Stream"',
            '"Block Size"', '"Grid Size"', '"Device"', '"CC"', '"dram__bytes_read.sum"', '"dram__bytes_write.sum"']
    lines = ["==PROF== Connected to process 7 (/usr/bin/python3)", ",".join(head),
             ",".join(['""'] * 11 + ['"byte"', '"byte"'])]
    for i, (name, r, w) in enumerate(kernels):
        lines.append(",".join(f'"{v}"' for v in (i, 7, "python3", "h", name, 1, 7, "(128, 1, 1)", "(16, 1, 1)", 0,
                                                  "9.0", f"{r:,}", f"{w:,}")))
    return "\n".join(lines) + "\n"


def test_kernel_names_reduce_to_the_function_ncu_filters_by():
    assert pc.kernel_base(FILL_K) == pc.kernel_base(FILL_N) == "vectorized_elementwise_kernel"
    assert pc.kernel_base(GEMM_K) == pc.kernel_base(GEMM_N) == "gemm_kernel"
    lam = ("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::CUDAFunctor_add"
           "<float> >(at::TensorIteratorBase&, at::native::CUDAFunctor_add<float> const&)::{lambda(int)#1}>(int, "
           "at::native::gpu_kernel_impl_nocast<at::native::CUDAFunctor_add<float> >(at::TensorIteratorBase&, "
           "at::native::CUDAFunctor_add<float> const&)::{lambda(int)#1})")
    assert pc.kernel_base(lam) == "elementwise_kernel"
    assert pc.kernel_base("void (anonymous namespace)::softmax_warp_forward<float, float, 8>(T2 *, const T1 *, "
                          "int)") == "softmax_warp_forward"
    assert pc.kernel_base("triton_poi_fused_add_mul_0") == "triton_poi_fused_add_mul_0"
    assert pc.kernel_base("sm90_xmma_gemm_f16f16_f16f32_f32_nn_n_tilesize128x256x64_cublas") == \
        "sm90_xmma_gemm_f16f16_f16f32_f32_nn_n_tilesize128x256x64_cublas"


def test_each_kernel_of_the_step_belongs_to_the_counted_op_that_launched_it():
    def event(eid, *children):
        return SimpleNamespace(id=eid, cpu_children=list(children))

    def kernel(link, start, name, kind="kernel"):
        return SimpleNamespace(device_type=DeviceType.CUDA, linked_correlation_id=link, name=name,
                               time_range=SimpleNamespace(start=start), activity_type=kind)
    mm, add, between = event(2, event(3)), event(4), event(5)
    step = event(1, mm, add, between)
    calls = [profile_mod.Call("aten::mm", "m", "8x8", "float32", 1.0, 1.0, 1.0),
             profile_mod.Call("aten::add", "m", "8x8", "float32", None, 1.0, 1.0)]
    events = [kernel(4, 30, "add_k"), kernel(3, 10, "gemm_k"), kernel(5, 20, "gap_k"), kernel(99, 5, "other step"),
              kernel(4, 31, "Memcpy DtoD (Device -> Device)", "gpu_memcpy"),
              SimpleNamespace(device_type=DeviceType.CPU, linked_correlation_id=0, name="cudaLaunchKernel",
                              time_range=SimpleNamespace(start=9))]
    got = profile_mod.step_launches(step, [(calls[0], 1e-3, mm), (calls[1], 1e-3, add)], events)
    # by device start; the GEMM launched inside mm's own call; a kernel of no counted op keeps None
    assert got == [(profile_mod.row_key(calls[0]), "gemm_k"), (None, "gap_k"), (profile_mod.row_key(calls[1]), "add_k")]


def test_the_top_ops_by_time_share_that_launched_a_kernel_are_chosen():
    assert pc.choose(ROWS, LAUNCHES, 2) == [MM, ADD]
    assert pc.choose(ROWS, LAUNCHES, 3) == [MM, ADD, RELU]      # sum (0.2 s) launched nothing: passed over
    assert pc.choose(ROWS, [], 3) == []
    assert pc.kernel_names(LAUNCHES, [MM, ADD]) == ["gemm_kernel", "vectorized_elementwise_kernel"]
    assert pc.kernel_names(LAUNCHES, [RELU]) == ["vectorized_elementwise_kernel"]


def test_the_ncu_command_line_over_a_scripts_replay(tmp_path):
    script = tmp_path / "prog.py"
    program = pc.script_target(script, ["--dim", "64"])(tmp_path, GPU)
    assert program == [sys.executable, "-m", "bench.run.profile_counters", "--device", "cuda:0", "--script",
                       str(script.resolve()), "--", "--dim", "64"]
    cmd = pc.command("/opt/ncu", program, GPU, ["gemm_kernel", "vectorized_elementwise_kernel"])
    assert cmd == ["/opt/ncu", "--csv", "--page", "raw", "--print-units", "base",
                   "--metrics", ",".join(hw.metrics_for("9.0")), "--target-processes", "all",
                   "--clock-control", "none", "--cache-control", "all", "--replay-mode", "kernel",
                   "--nvtx", "--nvtx-include", "roofbench-counted/", "--kernel-name-base", "function",
                   "-k", "regex:^(gemm_kernel|vectorized_elementwise_kernel)$", *program]


def test_a_synthetic_raw_csv_is_attributed_to_the_ops_in_order_by_name():
    kernels = hw.parse_raw_csv(raw_csv(PROFILED))
    assigned, expected, lost = pc.attribute(kernels, LAUNCHES, ["gemm_kernel", "vectorized_elementwise_kernel"])
    assert expected == 6 and lost == 0
    assert [k["id"] for k in assigned[MM]] == [0, 1] and [k["id"] for k in assigned[ADD]] == [2, 5]
    assert [k["id"] for k in assigned[RELU]] == [4] and None not in assigned   # the kernel between ops: dropped
    # a kernel the capture never launched (one more GEMM at the end) matches nothing and is counted
    more = hw.parse_raw_csv(raw_csv(PROFILED + [(GEMM_N, 5, 5)]))
    assert pc.attribute(more, LAUNCHES, ["gemm_kernel", "vectorized_elementwise_kernel"])[1:] == (6, 1)
    # told to profile the GEMM alone, ncu's one kernel is the capture's one GEMM
    only = hw.parse_raw_csv(raw_csv(PROFILED[:1]))
    assert pc.attribute(only, LAUNCHES, ["gemm_kernel"]) == ({MM: only}, 1, 0)

    rows = pc.add_columns(ROWS, [MM, ADD], assigned).set_index("op")
    mm, add = rows.loc["aten::mm"], rows.loc["aten::add"]
    # mm: 1000 + 0 read, 300 + 200 written = 1,500 against 1,200 + 400 = 1,600 counted: 0.9375, within 10%
    assert (mm["hw_dram_read_bytes"], mm["hw_dram_write_bytes"], mm["hw_dram_bytes"]) == (1000, 500, 1500)
    assert mm["dram_ratio"] == 0.9375 and mm["read_ratio"] == pytest.approx(1000 / 1200) and mm["write_ratio"] == 1.25
    assert mm["dram_flag"] == "" and mm["hw_kernels"] == 2
    # add, two calls: 400 + 410 read, 200 + 190 written = 1,200 against 700 + 300 = 1,000: 1.2, flagged
    assert (add["hw_dram_read_bytes"], add["hw_dram_write_bytes"], add["hw_dram_bytes"]) == (810, 390, 1200)
    assert add["dram_ratio"] == pytest.approx(1.2) and add["write_ratio"] == pytest.approx(1.3)
    assert add["dram_flag"].startswith("DRAM bytes 1.20x") and "20% more" in add["dram_flag"] and add["hw_kernels"] == 2
    assert rows.loc[["aten::sum", "aten::relu"], pc.COLUMNS].isna().all().all()   # not chosen: no counters


def _capture(launches=LAUNCHES):
    return profile_mod.Capture(ROWS.copy(), 1.2, [1.2], 2e6, "cuda:0", launches=list(launches))


def test_a_faked_ncu_is_read_into_the_chosen_ops(tmp_path, monkeypatch):
    (tmp_path / "out.csv").write_text(raw_csv(PROFILED))
    ncu = fake_ncu(tmp_path, f"printf '%s\\n' \"$@\" > '{tmp_path / 'args.txt'}'\ncat '{tmp_path / 'out.csv'}'")
    monkeypatch.setenv(hw.NCU_ENV, str(ncu))
    cap, said = _capture(), []
    info = pc.attach(cap, 2, GPU, pc.script_target(tmp_path / "prog.py", ["--x"]), said.append, "prog.py")
    assert {k: info[k] for k in ("requested", "tool", "ops", "flagged", "kernels", "expected", "unmatched", "why")} \
        == {"requested": 2, "tool": str(ncu), "ops": 2, "flagged": 1, "kernels": 6, "expected": 6, "unmatched": 0,
            "why": ""}
    args = (tmp_path / "args.txt").read_text().splitlines()
    assert args[args.index("-k") + 1] == "regex:^(gemm_kernel|vectorized_elementwise_kernel)$"
    assert args[-4:] == ["--script", str((tmp_path / "prog.py").resolve()), "--", "--x"]
    assert said == [f"roofbench: counters: replaying one step of prog.py under {ncu} for the DRAM bytes of its top "
                    "2 ops (2 kernel names)"]
    got = cap.rows.set_index("op")
    assert got.loc["aten::mm", "hw_dram_bytes"] == 1500 and got.loc["aten::add", "dram_ratio"] == pytest.approx(1.2)


def test_a_refusing_machine_leaves_the_rows_and_says_why(tmp_path, monkeypatch):
    ncu = fake_ncu(tmp_path, "echo '==ERROR== ERR_NVGPUCTRPERM - The user does not have permission'\nexit 1")
    monkeypatch.setenv(hw.NCU_ENV, str(ncu))
    cap = _capture()
    info = pc.attach(cap, 2, GPU, pc.script_target(tmp_path / "prog.py"), lambda line: None)
    assert info["why"] == dict(hw.FAILURES)["ERR_NVGPUCTRPERM"] and info["ops"] == 0
    assert info["why"].code == "profiler_failed"
    assert list(cap.rows.columns) == profile_mod.COLUMNS
    assert pc.attach(_capture([]), 2, GPU, pc.script_target(tmp_path / "p.py"), print)["why"].code == "no_kernel"
    assert pc.attach(_capture(), 2, cpu_info(), pc.script_target(tmp_path / "p.py"), print)["why"] == \
        hw.unavailable(cpu_info())


def test_a_callable_that_cannot_be_sent_says_why(tmp_path):
    with pytest.raises(hw.CounterError) as e:
        pc.call_target(lambda: torch.ones(3).sum(), name="<lambda>")(tmp_path, GPU)
    assert e.value.code == "not_sendable" and "<lambda>" in str(e.value) and "\n" not in str(e.value)


def scaled_sum(x, k):
    return (x * k).sum()


@pytest.mark.slow
def test_a_module_level_callable_is_replayed_in_a_process_of_its_own(tmp_path):
    argv = pc.call_target(scaled_sum, (torch.ones(8),), {"k": 3.0}, "scaled_sum")(tmp_path, cpu_info())
    assert argv == [sys.executable, "-m", "bench.run.profile_counters", "--device", "cpu", "--call", str(tmp_path)]
    assert pc.received_call(tmp_path)() == 24.0
    r = subprocess.run(argv, capture_output=True, text=True, env=replay_env(), timeout=180, check=False)
    assert r.returncode == 0, r.stderr
    done = json.loads(r.stderr.strip().splitlines()[-1].removeprefix("roofbench-replay: "))
    assert done["device"] == "cpu" and done["warm_up_calls"] >= 2


def test_the_replay_entry_point_runs_a_script_and_refuses_in_one_sentence(tmp_path, capsys):
    good, bad = tmp_path / "good.py", tmp_path / "bad.py"
    good.write_text("import sys, torch\nassert sys.argv[1:] == ['--n', '3']\ntorch.ones(3).sum()\n")
    bad.write_text("raise RuntimeError('boom')\n")
    assert pc.main(["--device", "cpu", "--script", str(good), "--", "--n", "3"]) == 0
    assert capsys.readouterr().err.startswith('roofbench-replay: {"warm_up_calls": ')
    assert pc.main(["--device", "cpu", "--script", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("roofbench-replay:") and f"{bad}" in err and "RuntimeError: boom" in err
    assert err.count("\n") == 1   # one sentence
    assert pc.main(["--device", "cpu"]) == 2
    err = capsys.readouterr().err  # one sentence naming the two ways to give the program
    assert err.count("\n") == 1 and "--script" in err and "--call" in err


@pytest.mark.parametrize("value, got", [("0", "0"), ("-1", "-1"), ("x", "'x'")])
def test_counters_below_one_are_refused_in_one_sentence(tmp_path, cli_in_process, value, got):
    script = tmp_path / "prog.py"
    script.write_text("import torch\ntorch.ones(3).sum()\n")
    r = cli_in_process("profile", script, "--roofs", RUN, "--counters", value, "--out", tmp_path / "o")
    # argparse's refusal of the value: one line naming the option and the value given
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and r.code == "bad_argument" and len(lines) == 1
    assert "--counters" in lines[0] and f"(got {got})" in lines[0]
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("value", [0, -2, True, 1.5])
def test_the_apis_counters_below_one_are_refused(tmp_path, value):
    with pytest.raises(api.APIError) as e:
        api.profile(scaled_sum, torch.ones(4), 2.0, roofs=ROOFS, steps=1, out=tmp_path / "p", device="cpu",
                    counters=value)
    assert e.value.code == "bad_counters" and f"counters={value!r}" in str(e.value)
    assert not (tmp_path / "p").exists()


@pytest.mark.slow
def test_on_the_cpu_the_profile_completes_with_one_sentence_why(tmp_path, capsys):
    script = tmp_path / "prog.py"
    script.write_text("import torch\nx = torch.randn(32, 32)\ndef profile_step():\n    return (x @ x).sum()\n")
    out = tmp_path / "out"
    assert run_bench.main(["profile", str(script), "--roofs", str(RUN), "--steps", "1", "--counters", "--out",
                           str(out)]) == 0
    said = capsys.readouterr()
    why = hw.unavailable(cpu_info())
    assert why.code == "no_gpu"
    [note] = [line for line in said.err.splitlines() if "--counters" in line]  # said once, up front
    assert why in note
    record = json.loads((out / "profile.json").read_text())
    assert record["counters"]["requested"] == pc.DEFAULT_OPS and record["counters"]["why"] == why
    [line] = counters_lines(record)  # the record's one line of why no counters were read
    assert why in line and line in said.out.splitlines() and RANKED_HEAD in said.out.splitlines()
    assert f"- {line}\n" in (out / "profile.md").read_text()
    assert f"<li>{html.escape(line)}</li>" in (out / "profile.html").read_text()
    assert not set(pc.COLUMNS) & set(pd.read_csv(out / "ops.csv").columns)
    p = api.profile(scaled_sum, torch.ones(64), 2.0, roofs=ROOFS, steps=1, out=tmp_path / "api", device="cpu",
                    counters=2)
    assert counters_lines(p.record) == [line] and line in p.text.splitlines() and p.record["counters"]["requested"] == 2
    assert "aten::mul" in set(p.ops["op"])


@pytest.mark.slow
@pytest.mark.renders
def test_the_report_shows_the_counter_columns_of_a_hand_made_ops_csv(tmp_path):
    rows = pc.add_columns(ROWS, [MM, ADD], pc.attribute(hw.parse_raw_csv(raw_csv(PROFILED)), LAUNCHES,
                                                         ["gemm_kernel", "vectorized_elementwise_kernel"])[0])
    rows.to_csv(tmp_path / "ops.csv", index=False)
    info = {"requested": 2, "tool": "/opt/ncu", "ops": 2, "flagged": 1, "kernels": 6, "expected": 7, "unmatched": 1,
            "why": ""}
    (tmp_path / "profile.json").write_text(json.dumps({
        "kind": "profile", "step_s": 1.2, "steps_s": [1.2], "steps": 1, "flop_counter_total": 2e6, "notes": [],
        "device": {"name": "NVIDIA H200"}, "roofs": [r.to_dict() for r in ROOFS], "program": "prog.py",
        "roofs_from": "given", "counters": info}))
    text, _ = finish_profile(tmp_path)
    [summary, unmatched] = counters_lines({"counters": info})
    assert {summary, unmatched} <= set(text.splitlines()) and "/opt/ncu" in summary
    assert re.findall(r"\d+", summary) == ["2", "6", "1", "10"]  # top 2 ops, 6 kernels, 1 flagged beyond 10%
    assert re.findall(r"\d+", unmatched) == ["1"]                 # 1 kernel of the replay matched none
    lines = {line.split("aten::", 1)[1].split(" [")[0]: line for line in text.splitlines() if " aten::" in line}
    assert lines["mm"].endswith("; DRAM 0.94x its counted bytes")                # ranked (a FLOP formula)
    assert lines["add"].endswith("; DRAM 1.20x its counted bytes (flagged)")     # a bandwidth point
    assert "; DRAM" not in lines["relu"] and "; DRAM" not in lines["sum"]
    md = (tmp_path / "profile.md").read_text()
    section = md.split(f"## {COUNTERS_TITLE}\n\n")[1]
    lines = section.split("\n\n")[0].splitlines()
    assert lines[0] == ("| op | in | shapes | read | written | DRAM read | DRAM written | DRAM ratio | read ratio | "
                        "write ratio | kernels | flag |")
    assert len(lines) == 4                                                   # the two counted ops
    def cells(line):
        return [c.strip() for c in line.strip().strip("|").split("|")]
    rows = {row["op"]: row for row in (dict(zip(cells(lines[0]), cells(line))) for line in lines[2:])}
    ratios = ["DRAM ratio", "read ratio", "write ratio", "kernels"]
    assert [rows["aten::mm"][c] for c in ratios] == ["0.9375", "0.8333", "1.2500", "2"]
    assert rows["aten::mm"]["flag"] == ""
    assert [rows["aten::add"][c] for c in ratios] == ["1.2000", "1.1571", "1.3000", "2"]
    assert rows["aten::add"]["flag"] == hw.dram_flag(1.2) != ""                # 20% more than counted: flagged
    page = (tmp_path / "profile.html").read_text()
    assert f"<h2>{html.escape(COUNTERS_TITLE)}</h2><table>" in page
    assert "<td>0.9375</td>" in page
    placed = pd.read_csv(tmp_path / "ops.csv").set_index("op")      # ops.csv rewritten placed, counters kept
    assert placed.loc["aten::add", "hw_dram_bytes"] == 1200 and pd.isna(placed.loc["aten::relu", "hw_dram_bytes"])


@pytest.mark.gpu
def test_a_real_profile_reads_an_elementwise_ops_dram_bytes(tmp_path):
    from bench.hw import detect
    device = detect.resolve("cuda")
    if hw.unavailable(device):
        pytest.skip(hw.unavailable(device))
    script = tmp_path / "prog.py"
    script.write_text("import torch\nx = torch.randn(2 ** 25, device='cuda')\ny = torch.empty_like(x)\n"
                      "def profile_step():\n    torch.mul(x, 2.0, out=y)\n")
    p = api.profile_script(script, roofs=[Roof("bandwidth", "hbm", 4000.0, "GB/s")], steps=2, out=tmp_path / "p",
                           device="cuda", counters=1)
    info = p.record["counters"]
    if info["why"]:
        pytest.skip(f"counters cannot be read on this machine: {info['why']}")
    mul = p.ops.set_index("op").loc["aten::mul"]
    assert info["ops"] == 1 and info["unmatched"] == 0 and mul["hw_kernels"] == 1
    assert mul["dram_ratio"] == pytest.approx(1.0, abs=0.1), mul.to_dict()    # 128 MiB read, 128 MiB written
