"""A run without an off-chip roof (as `--max-ws`
leaves one) never crashes a command; each says which roof is missing and goes on."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import session_run
from noroof import DATA, run_without_dram  # conftest.py's nodram fixture: tests/noroof.py's run without a dram roof

import run_bench
from bench import api
from bench.hw import detect
from bench.measure.timing import timer_config
from bench.results import load_run
from roofs.analysis.checks import note_subject, option_cause
from roofs.analysis.roofline import Roof

ROOT = Path(run_bench.__file__).parent


def test_fixture_has_no_dram_roof(nodram):
    doc = json.loads((nodram / "roofs.json").read_text())
    names = {r["name"] for r in doc["roofs"] if r["source"] == "measured"}
    assert "dram" not in names and {"l3", "fp32", "bf16"} <= names
    assert any(n.startswith("dram:") for n in doc["notes"])


def test_report_and_brief_say_which_roof_is_missing(nodram, capsys):
    assert run_bench.main(["report", str(nodram), "--no-charts"]) == 0
    out = capsys.readouterr().out
    # the option that removed the roof is named
    assert "no roof: dram:" in out and "--max-ws 64 MiB" in out and "Traceback" not in out
    # no point is left without a bound while a level has a roof (roofs.analysis.bounds): the
    # points whose bytes cross DRAM are bounded by l3, the nearest level in (never slower than
    # DRAM), and each one's note names the missing dram roof
    import pandas as pd
    [derived] = (nodram / "derived").glob("*/measurements.csv")
    df = pd.read_csv(derived)
    crossing = df[(df["status"] == "ok") & df["bound_note"].fillna("").str.contains("dram has no measured roof")]
    assert not crossing.empty and (crossing["boundary"] == "l3").all() and crossing["attainable_gflops"].notna().all()
    from roofs.reports.brief import brief
    text = brief(nodram)
    assert "no roof: dram:" in text


def test_compare_with_a_run_missing_a_roof(nodram, tmp_path, capsys):
    assert run_bench.main(["compare", str(DATA / "run_a"), str(nodram), "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "dram" in out and (tmp_path / "compare.png").stat().st_size > 0
    assert "max-ws" in out  # the runs differ in --max-ws: warned


def test_api_names_the_missing_roof(nodram):
    roofs = api.roofs_from(nodram)
    assert any(m.startswith("dram:") for m in roofs.missing)
    a = torch.randn(64, 64)
    # cold: its bytes cross DRAM, which has no roof here: bounded by l3, the nearest level in
    # with a roof (a cache is never slower than the level outside it), the note naming dram
    r = api.measure(lambda: a.sum(), flops=64 * 64, bytes=64 * 64 * 4, precision="fp32", roofs=roofs,
                    device="cpu", mode="cold", budget_s=0.02)
    l3 = next(x for x in roofs if x.name == "l3" and x.source == "measured")
    assert r.boundary == "l3" and r.attainable_gflops == pytest.approx(l3.value * r.intensity)
    assert r.bound_note.code == "nearest_level" and "dram" in r.bound_note and r.bound_note.endswith("l3")
    with pytest.raises(api.APIError) as e:
        api.measure(lambda: a.sum(), flops=1, bytes=1, precision="fp8e4m3", roofs=roofs, device="cpu")
    assert e.value.code == "no_compute_roof" and "fp8e4m3" in str(e.value)
    with pytest.raises(api.APIError) as e:
        api.measure(lambda: a.sum(), flops=1, bytes=1, precision="fp33", device="cpu")
    assert e.value.code == "unknown_precision" and "'fp33'" in str(e.value)
    # either spelling of a precision
    assert api.measure(lambda: a.sum(), flops=1, bytes=4, precision="float32", roofs=roofs, device="cpu",
                       budget_s=0.02).precision == "fp32"


@session_run
def model_without_dram(tmp, env):
    """(CompletedProcess, --out folder): `run_bench.py model tiny` placed under a run without a dram
    roof (tests/noroof.py, derived here without pictures), in a process of its own: what it prints
    once per warning is a fresh process's."""
    out = tmp / "out"
    r = subprocess.run([sys.executable, str(ROOT / "run_bench.py"), "model", "tiny", "--batch", "1", "--prompt", "64",
                        "--context", "256", "--roofs", str(run_without_dram(tmp / "nodram")), "--budget", "0.02",
                        "--out", str(out)], capture_output=True, text=True, timeout=300, env=env, cwd=ROOT, check=False)
    return r, out


@pytest.mark.slow
def test_model_placed_under_roofs_without_dram(model_without_dram):
    r, tmp_path = model_without_dram
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    for line in {x for x in (r.stdout + r.stderr).splitlines() if "warning" in x.lower()}:  # once each
        body = line.split("warning: ", 1)[-1].split("WARNING: ", 1)[-1]
        assert (r.stdout + r.stderr).count(body) == 1, line
    [run_dir] = list(tmp_path.iterdir())
    md = (run_dir / "model.md").read_text()
    # decode is timed cold: every op crosses DRAM, which has no roof; no op is left without a
    # bound while a level has one (roofs.analysis.bounds): l3's, the nearest level in, bounds them
    assert "NO BOUND" not in md and "tokens/s: at most" in md and "(1 token per step)" in md and "e+0" not in md
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["status"] == "complete"
    report = json.loads((run_dir / "model.json").read_text())["per_batch"]["1"]["decode"]
    assert report["unbounded"] == {} and report["step_bound_s"] > 0 and report["tokens_per_s_bound"] > 0
    assert all(line["bound_us"] for line in report["ops"])


@pytest.mark.slow
def test_model_output_names_the_missing_dram_roof(model_without_dram):
    r, tmp_path = model_without_dram
    [run_dir] = list(tmp_path.iterdir())
    ops = json.loads((run_dir / "model.json").read_text())["per_batch"]["1"]["decode"]["ops"]
    assert ops and all("dram" in line["note"] for line in ops)


def test_roofs_of_another_machine_warn_in_the_model_output(tmp_path):
    from bench import models
    from bench.identity import other_machine
    here = detect.resolve("cpu").to_dict()
    other = dict(here, name="Some Other CPU", machine_id="0" * 32)
    w = other_machine(other, here)
    # one line naming the other machine and the parts that differ; each part alone is another machine
    assert "Some Other CPU" in w and "machine id" in w and "model" in w and "\n" not in w
    assert other_machine(dict(here, machine_id="0" * 32), here) and other_machine(dict(here, name="X"), here)
    assert other_machine(here, here) == ""
    cfg = models.get_model("tiny")
    text = models.summary_text(cfg, 8, 16, "bf16", {}, [w])
    assert f"WARNING: {w}" in text


def test_a_failing_model_marks_its_folder_failed(tmp_path, monkeypatch):
    from bench import models
    cfg = models.get_model("tiny")
    per_batch = models.layers_per_batch(cfg, [1], 8, 16, "bf16")
    monkeypatch.setattr(models, "summary_text", lambda *a, **k: 1 / 0)
    monkeypatch.setattr(models, "plan", lambda op_lists: __import__("bench.measure.runner").measure.runner.Plan([]))
    with pytest.raises(ZeroDivisionError):
        models.measure_model(cfg, per_batch, detect.resolve("cpu"), api.roofs_from(DATA / "run_a"), "given",
                             0.02, tmp_path, {}, 8, 16, "bf16")
    [run_dir] = list(tmp_path.iterdir())
    assert json.loads((run_dir / "run.json").read_text())["status"].startswith("failed: ZeroDivisionError")
    assert not (run_dir / "model.md").exists()


def test_a_run_whose_runner_raises_is_marked_failed(tmp_path, monkeypatch):
    """An error inside the measuring loop leaves run.json saying failed."""
    from bench.measure.runner import Plan, Runner
    from bench.run import session
    monkeypatch.setattr(Runner, "run", lambda self, plan, *rest: {}["boom"])
    info = detect.resolve("cpu")
    timer = timer_config(True)
    with pytest.raises(KeyError):
        session.execute(tmp_path / "run", session.run_meta(info, {}, "device", timer), info, Plan([]), timer)
    assert json.loads((tmp_path / "run" / "run.json").read_text())["status"].startswith("failed: KeyError")


@pytest.mark.slow
def test_run_command_without_an_off_chip_roof_names_the_option(tmp_path, cli_in_process, monkeypatch):
    """The run command itself, with a --max-ws that leaves no DRAM roof (no row flagged busy, so
    the verdict does not depend on the machine's load)."""
    from bench.measure import runner as runner_mod
    monkeypatch.setattr(runner_mod, "busy_flag", lambda tel, device: "")
    r = cli_in_process("--quick", "--only", "stream.copy/torch", "--dtype", "fp32", "--max-ws", "256KiB",
                       "--budget", "0.02", "--out", tmp_path)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    [run_dir] = list(tmp_path.iterdir())
    # the dram note, with the option that caused it (option_cause), is printed as a missing roof
    [note] = [n for n in json.loads((run_dir / "roofs.json").read_text())["notes"] if note_subject(n) == "dram"]
    cause = option_cause(note, load_run(run_dir))
    assert "--max-ws" in cause and f"no roof: {note}{cause}" in r.stdout
    assert json.loads((run_dir / "run.json").read_text())["status"] == "complete"


def test_quick_roofs_says_which_roofs_it_could_not_set(monkeypatch):
    """On a machine where nothing converges, quick_roofs returns what it has and names each
    missing roof, every cache level, the off-chip level and each precision of its quick
    GEMMs, with its reason (and warns); it never raises."""
    from bench.hw import detect
    from bench.measure.runner import Runner

    def too_slow(self, task, modes):
        return [self._base(task.op, task.impls[0], task.point, "warm", status="skipped", reason="cut short: slow")]
    monkeypatch.setattr(Runner, "run_task", too_slow)
    with pytest.warns(api.RoofWarning) as caught:
        roofs = api.quick_roofs("cpu")
    info = detect.resolve("cpu")
    names = [c.name for c in info.caches] + ["dram", "fp32", "bf16", "int8"]
    assert [str(w.message).split(":")[0] for w in caught] == [f"quick_roofs could not set the {r} roof" for r in names]
    assert [r for r in roofs if r.source == "measured"] == []
    assert [m.split(":")[0] for m in roofs.missing] == [f"{r} roof" for r in names]
    assert roofs.missing[-3:] == [f"{p} roof: cut short: slow" for p in ("fp32", "bf16", "int8")]


def test_a_point_above_its_bound_is_flagged_and_one_under_is_not():
    """Hand-worked: 1e6 FLOPs over 1 MB (I = 1) under a 100 GB/s dram roof and a 1,000
    GFLOP/s fp32 roof: attainable 100 GFLOP/s. Samples of 5 us (200 GFLOP/s even at p80) beat
    it by 100%; samples of 20 us (50 GFLOP/s) do not."""
    roofs = (Roof("bandwidth", "dram", 100.0, "GB/s"), Roof("compute", "fp32", 1000.0, "GFLOP/s"))
    base = dict(name="k", shape="", flops=1e6, bytes=1e6, device="cpu", mode="cold", backend="torch",
                precision="fp32", roofs=roofs, caches=(("l3", 2**25),))
    fast = api.Result(**base, samples_s=(5e-6,) * 9)
    assert fast.attainable_gflops == pytest.approx(100.0)
    assert fast.above_bound.code == "above_bound" and fast.above_bound.startswith("100% ")
    assert "100.0 GFLOP/s" in fast.above_bound
    assert api.Result(**base, samples_s=(2e-5,) * 9).above_bound == ""


def test_quick_roofs_sets_every_level_and_precision_from_a_quick_runs_rows(monkeypatch):
    """The rows a quick run on a 2-core Zen 4 VM measured (committed), for quick_roofs' ops
    only, given back by the runner: quick_roofs derives a roof for every cache level, the
    off-chip level and each precision of its quick GEMMs (fp32, bf16, int8), and misses none."""
    from types import SimpleNamespace

    from bench.hw.device import CacheLevel, DeviceInfo
    from bench.measure.runner import Runner
    run = load_run(ROOT / "results" / "cpu-amd-epyc-20261201T103023Z")
    d = run.device
    dev = DeviceInfo("cpu", "cpu", d["name"], d["memory_bytes"], d["compute_units"], "cores",
                     tuple(CacheLevel(c["name"], c["size_bytes"], c["instances"]) for c in d["caches"]),
                     max_clock_mhz=d.get("max_clock_mhz"), cpu_flags=tuple(d.get("cpu_flags") or ()))
    rows = run.measurements[run.measurements["op"].isin(api.QUICK_ROOF_OPS) & (run.measurements["mode"] != "sustained")]
    monkeypatch.setattr(api.detect, "resolve", lambda device=None: dev)
    samples = {p["point_id"]: tuple(p.get("samples_s") or ()) for p in run.points}
    monkeypatch.setattr(Runner, "run", lambda self, plan, estimates=None: [
        SimpleNamespace(row=lambda r=r: r, point_id=r["point_id"], samples_s=samples.get(r["point_id"], ()))
        for r in rows.to_dict("records")])
    roofs = api.quick_roofs()
    measured = {r.name for r in roofs if r.source == "measured"}
    assert {"l1", "l2", "l3", "dram", "fp32", "bf16", "int8"} <= measured, (measured, roofs.missing)
    assert roofs.missing == []
    # each with its interval (rule 17), around its figure, as the run's own roofs.json has them
    assert all(r.interval and r.interval[0] <= r.value <= r.interval[1] for r in roofs if r.source == "measured")
