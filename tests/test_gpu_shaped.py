"""GPU-shaped runs through the whole roofs/ path on a CPU: the simulator's H200 and AMD MI300X
(roofs/sim) write run folders in the real on-disk format (roofs.sim.folder.write_run:
measurements.csv, samples.jsonl(.gz), run.json), each finished as a run finishes itself
(finish_run, no pictures) and re-derived as `report` does (rederive, with pictures); then
`check` of one run against another of the same truth and `fleet` over the two."""
import json

import pandas as pd
import pytest

from bench.policy import DEFAULT
from bench.results import load_run
from roofs.charts.registry import charts_for
from roofs.reports.finish import finish_run, rederive
from roofs.sim.folder import write_run
from roofs.sim.generate import truth

pytestmark = pytest.mark.slow
MACHINES = ("h200", "mi300x")
SEEDS = (1, 2)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    """Return {machine: {"runs": [run folder per seed], "derived": the first run's `report` folder,
    "problems": [each step's problems]}}."""
    out = {}
    for key in MACHINES:
        top = tmp_path_factory.mktemp(key)
        dirs = [write_run(top / f"run-{seed}", key, "gpu", seed) for seed in SEEDS]
        problems = [finish_run(d, charts=False) for d in dirs]
        derived, more = rederive(dirs[0])
        out[key] = {"runs": dirs, "derived": derived, "problems": problems + [more], "top": top}
    return out


def _roofs(folder) -> list[dict]:
    return json.loads((folder / "roofs.json").read_text())["roofs"]


def _halfwidth(r: dict) -> float:
    lo, hi = r["interval"]
    return (hi / lo - 1) / 2   # bench.measure.revisit.halfwidth's measure, of the roof's band


@pytest.mark.parametrize("key", MACHINES)
def test_a_simulated_gpu_run_is_derived_bounded_confirmed_reported_and_drawn(runs, key):
    r = runs[key]
    assert r["problems"] == [[], [], []]
    derived = r["derived"]
    roofs = {x["name"]: x for x in _roofs(derived) if x.get("source") == "measured"}
    # every roof the truth knows is derived (its value's accuracy: tests/test_sim.py's table)
    assert set(truth(key)["roofs"]) <= set(roofs)
    # bounds: every ok row that moves bytes or does work is placed under a roof (an empty launch,
    # probe.launch, does neither: its figure is a latency roof)
    rows = pd.read_csv(derived / "measurements.csv")
    ok = rows[(rows["status"] == "ok") & ((rows["bytes"] > 0) | (rows["flops"] > 0))]
    assert len(ok) > 200 and ok["bound_roof"].notna().all() and ok["pct_of_attainable"].gt(0).all()
    assert set(rows["op"]) - set(ok["op"]) == {"probe.launch"}
    # confirmation: each level and precision roof has a status
    judged = [x for n, x in roofs.items() if x["kind"] in ("bandwidth", "compute") and "." not in n and " " not in n]
    assert judged and all((x.get("confirmation") or {}).get("status") in ("confirmed", "disputed", "unconfirmed")
                          for x in judged)
    assert (derived / "report.md").stat().st_size > 0 and (derived / "report.html").stat().st_size > 0
    # its pictures are the chart table's for it (roofs/charts/registry.py): with stream, GEMM and
    # FMA-chain rows, their charts among them; each drawn with content
    charts = [c.file for c in charts_for(load_run(derived))]
    assert {"stream", "gemm", "fma"} <= set(ok["family"]) and len(charts) >= 6
    assert sorted(p.name for p in derived.glob("*.png")) == sorted(charts)
    for name in charts:
        assert (derived / name).stat().st_size > 10_000, name


@pytest.mark.parametrize("key", MACHINES)
def test_the_l1_probe_never_sets_or_checks_another_roof(runs, key):
    for run in runs[key]["runs"]:
        for x in _roofs(run):
            checks = (x.get("confirmation") or {}).get("checks") or []
            if x["name"].split(".")[0] != "l1":
                assert x.get("op") != "probe.l1", x["name"]
                assert all(c["op"] != "probe.l1" for c in checks), x["name"]


@pytest.mark.parametrize("seed", SEEDS)
def test_the_h200_l2_and_gemm_bands_are_within_the_policy_target(runs, seed):
    roofs = _roofs(runs["h200"]["runs"][SEEDS.index(seed)])
    bands = {x["name"]: _halfwidth(x) for x in roofs if x.get("source") == "measured" and x.get("interval")
             and (x["name"].split(".")[0] == "l2" or (x["kind"] == "compute" and x.get("family") != "fma"
                                                       and x.get("op") != "fma.chains"))}
    assert {"l2", "bf16", "fp8e4m3", "int8", "tf32"} <= set(bands)
    assert all(w <= DEFAULT.target_halfwidth for w in bands.values()), bands


@pytest.mark.xfail(strict=True, reason="a precision set by the FMA chains on a GPU (H200 fp32, fp64) has two "
                   "quick shapes at its plateau (k = 256, 1024) 2-3% apart: roofs.analysis.model.ceiling takes "
                   "the lower (roof_rank 2), reads the gap as spread and reaches 3x it past the best, past 5%")
def test_the_h200_vector_bands_are_within_the_policy_target(runs):
    roofs = _roofs(runs["h200"]["runs"][SEEDS.index(2)])
    bands = {x["name"]: _halfwidth(x) for x in roofs if x["name"] in ("fp32", "fp64")}
    assert len(bands) == 2 and all(w <= DEFAULT.target_halfwidth for w in bands.values()), bands


@pytest.mark.parametrize("key", MACHINES)
def test_check_of_two_runs_of_one_truth_finds_no_change_and_the_fleet_holds_both(runs, key, cli_in_process, tmp_path):
    a, b = runs[key]["runs"]
    out = cli_in_process("check", b, "--baseline", a, "--out", tmp_path / "check")
    assert out.returncode == 0, out.stderr
    doc = json.loads((tmp_path / "check" / "check.json").read_text())
    assert doc["counts"]["SLOWER"] == 0 and doc["counts"]["FASTER"] == 0
    assert doc["counts"]["SAME"] >= len(truth(key)["roofs"]) - 2
    out = cli_in_process("fleet", runs[key]["top"], "--out", tmp_path / "fleet")
    assert out.returncode == 0, out.stderr
    fleet = pd.read_csv(tmp_path / "fleet" / "fleet.csv")
    assert len(fleet) == 2 and fleet["l2"].notna().all() and fleet["hbm"].notna().all()
