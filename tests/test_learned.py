"""The dry run learns from the runs before it on this machine (bench/aot/learned.py):
per family the ratio of measured to modelled seconds, the median of the last three
scaling the next prediction; the finishing seconds replace the model's guess."""
import json

import pytest

from bench.aot import learned, predict
from bench.hw.device import CacheLevel, DeviceInfo
from bench.measure.registry import load_all
from bench.measure.runner import make_plan
from bench.measure.timing import timer_config

CPU = DeviceInfo("cpu", "cpu", "AMD EPYC (test)", 24 * 2**30, 2, "cores", (CacheLevel("l3", 32 * 2**20),))


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(learned.CACHE_ENV, str(tmp_path))
    return tmp_path


def test_the_key_names_the_machine_and_is_a_file_name(monkeypatch):
    monkeypatch.setattr(learned, "affinity_cpus", lambda: 2)
    monkeypatch.setattr(learned.torch, "get_num_threads", lambda: 2)
    assert learned.cache_key(CPU) == "cpu-amd-epyc-test-2-24g"


@pytest.mark.parametrize("affinity,threads", [(1, 2), (2, 1), (None, 1)])
def test_a_run_on_fewer_cores_learns_apart(monkeypatch, affinity, threads):
    """`taskset -c 0` (an affinity of 1 CPU) or one torch thread on a 2-core VM: the quick run's
    GEMMs took twice as long, and their ratio, written under the machine's own key, would have
    made the next run on both cores predict 2x its time."""
    monkeypatch.setattr(learned, "affinity_cpus", lambda: affinity)
    monkeypatch.setattr(learned.torch, "get_num_threads", lambda: threads)
    assert learned.cache_key(CPU) == "cpu-amd-epyc-test-2-24g-on-1"


def test_a_run_writes_its_ratios_and_the_next_prediction_takes_the_median_of_the_last_three(cache):
    assert learned.factors(CPU, quick=True) == {}
    for stream_wall in (30.0, 10.0, 20.0, 40.0):   # modelled 20 s each time: ratios 1.5, 0.5, 1.0, 2.0
        learned.learn(CPU, True, {"stream": 20.0, "gemm": 10.0}, {"stream": stream_wall, "gemm": 5.0}, finish_s=3.0)
    f = learned.factors(CPU, quick=True)
    # newest first: 2.0, 1.0, 0.5 (1.5 dropped): median 1.0; gemm 0.5 each time
    assert f == {"stream": 1.0, "gemm": 0.5, "finish_s": 3.0}
    assert learned.factors(CPU, quick=False) == {}   # a full run learns apart from a quick one
    data = json.loads(next(cache.iterdir()).read_text())
    assert data["quick"]["stream"] == [2.0, 1.0, 0.5]


def test_nothing_is_learned_from_a_family_the_model_gave_nothing_or_a_broken_ratio():
    learned.learn(CPU, True, {"stream": 0.0, "gemm": 10.0, "gemv": 10.0}, {"stream": 5.0, "gemm": 500.0})
    assert learned.factors(CPU, True) == {}


def test_a_datasheet_part_learns_and_takes_nothing():
    spec = DeviceInfo("cuda", "meta", "H200", 141 * 2**30, 132, "SMs", (), extra={"spec": "h200"})
    assert learned.learn(spec, True, {"gemm": 1.0}, {"gemm": 2.0}) is None
    assert learned.factors(spec, True) == {}


def test_an_unreadable_cache_is_ignored(cache):
    (cache / f"timing-{learned.cache_key(CPU)}.json").write_text("{not json")
    assert learned.factors(CPU, True) == {}


def test_the_prediction_scales_each_family_and_the_sustained_phase_and_adds_the_finishing():
    plan = make_plan(load_all(), CPU, only=["stream.copy", "gemm.square/torch"], quick=True, max_ws_bytes=2**20)
    timer = timer_config(True)
    base = predict.predict(plan, CPU, timer, True, sustain_s=0.25)
    got = predict.predict(plan, CPU, timer, True, sustain_s=0.25,
                          factors={"stream": 2.0, "gemm": 0.5, "sustained": 3.0, "finish_s": 7.0})
    assert got.seconds_by_family["stream"] == pytest.approx(2 * base.seconds_by_family["stream"])
    assert got.seconds_by_family["gemm"] == pytest.approx(0.5 * base.seconds_by_family["gemm"])
    assert got.sustain_s == pytest.approx(3 * base.sustain_s) and base.finish_s == predict.DEFAULT_FINISH_S
    assert got.total_s == pytest.approx(base.total_s + base.seconds_by_family["stream"]
                                        - 0.5 * base.seconds_by_family["gemm"] + 2 * base.sustain_s + 7.0
                                        - predict.DEFAULT_FINISH_S)
    # the families the earlier runs scaled, named on the prediction's last line; none on the model's own
    families = ["gemm", "stream", "sustained"]
    assert sorted(k for k in got.learned if k not in ("finish_s", "prior")) == families
    scaled, alone = (predict.prediction_text(p, CPU, True).splitlines()[-1] for p in (got, base))
    assert all(f in scaled for f in families) and not any(f in alone for f in families)


def test_the_cpu_prior_is_the_committed_runs_measured_over_modelled_seconds():
    """CPU_PRIOR, derived again: per family the geometric mean of wall / model seconds over the
    two committed CPU runs it names (each run within 15% of it), to its two decimals."""
    import math
    from pathlib import Path
    root = Path(learned.__file__).resolve().parents[2] / "results"
    ratios = {}
    for name in ("cpu-amd-epyc-20261201T103023Z", "cpu-amd-epyc-20261201T195923Z"):
        meta = json.loads((root / name / "run.json").read_text())
        for fam, model_s in meta["predicted_raw_s"].items():
            wall = (meta["time_by_family"].get(fam) or {}).get("wall")
            if fam in learned.CPU_PRIOR and model_s and wall:
                ratios.setdefault(fam, []).append(wall / model_s)
    assert set(ratios) == set(learned.CPU_PRIOR)   # the probes' two ratios (1.27, 0.93) disagree: not in it
    for fam, rs in ratios.items():
        mean = math.exp(sum(map(math.log, rs)) / len(rs))
        assert learned.CPU_PRIOR[fam] == pytest.approx(mean, abs=0.006), fam
        assert all(abs(r / mean - 1) < 0.15 for r in rs), (fam, rs)


def test_a_fresh_cpu_takes_the_prior_and_its_own_runs_replace_it(cache):
    got = learned.expected(CPU, quick=True)
    assert got["gemm"] == learned.CPU_PRIOR["gemm"] and got["finish_s"] == learned.PRIOR_FINISH_S["quick"]
    assert "gemm" in got["prior"]
    learned.learn(CPU, True, {"gemm": 10.0}, {"gemm": 12.0}, finish_s=2.0)
    got = learned.expected(CPU, quick=True)
    assert got["gemm"] == 1.2 and got["finish_s"] == 2.0 and "gemm" not in got["prior"]
    gpu = DeviceInfo("cuda", "cuda:0", "NVIDIA H200", 2**37, 132, "SMs", ())
    assert learned.expected(gpu, quick=True) == {}
