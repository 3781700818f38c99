"""The tuner keeps only a winner that passes the gate (bench/ops/_tune.py, bench/measure/gate.py):
a fast wrong candidate or one that crashes when checked is recorded with its error and the
next-best is kept. Plain torch launchers stand in for Triton tiles; a stand-in timer ranks the
candidates, so nothing here depends on how fast the machine is."""
import pytest
import torch
from helpers import toy_registry

from bench.hw import detect
from bench.measure.gate import verifier
from bench.measure.runner import Runner, make_plan
from bench.measure.timing import TimerConfig
from bench.ops import _tune

CPU = detect.resolve("cpu")
FAST = TimerConfig(budget_s=0.02, warmup_s=0.001, min_samples=3)
# candidate -> (its time in the stand-in timer, what it computes from a into b)
CANDIDATES = {
    "racy": (1.0, lambda a, b: torch.mul(a, 2.5, out=b)),       # fastest, wrong by 25%
    "crashy": (2.0, None),                                       # times, then crashes when checked
    "right": (3.0, lambda a, b: torch.mul(a, 2, out=b)),
    "slow": (4.0, lambda a, b: torch.mul(a, 2, out=b)),
}


class Stats:
    def __init__(self, s):
        self.median_s = s


class Timing:
    def __init__(self, s):
        self.stats = Stats(s)


@pytest.fixture
def fake_timer(monkeypatch):
    monkeypatch.setattr(_tune, "time_fn", lambda fn, *a, **k: Timing(CANDIDATES[fn.cfg][0]))
    monkeypatch.setattr(_tune, "_BEST", {})
    monkeypatch.setattr(_tune, "_REJECTED_HERE", {})


def make_fn_for(x, calls):
    def make_fn(cfg):
        op = CANDIDATES[cfg][1]

        def fn():
            calls.append(cfg)
            if op is None:
                if calls.count(cfg) > 1:  # the tuning call passes; the checked call does not
                    raise RuntimeError("unsupported layout in the epilogue\nmore")
                return torch.mul(x["a"], 2, out=x["b"])
            return op(x["a"], x["b"])
        fn.cfg = cfg
        return fn
    return make_fn


def inputs(n=1000):
    g = torch.Generator().manual_seed(0)
    return {"a": torch.randn(n, generator=g), "b": torch.empty(n)}


def test_the_fastest_candidate_that_passes_is_kept_and_the_rejected_named(fake_timer):
    x, calls = inputs(), []
    verify = verifier(2 * x["a"].double(), 1e-6, "cpu", x, ("b",))
    cfg, t, failures = _tune.autotune(("toy", "fp32"), list(CANDIDATES), make_fn_for(x, calls), "cpu", verify=verify)
    assert (cfg, t) == ("right", 3.0)
    # each candidate ran once before timing, then the checks in time order up to the first that passes
    assert calls == ["racy", "crashy", "right", "slow", "racy", "crashy", "right"]
    # the two faster candidates rejected, each with its code; "slow" was never checked
    assert [(c, why.code) for c, why in failures.rejected] == [("racy", "wrong_result"), ("crashy", "crashed")]
    assert "0.25" in failures.rejected[0][1]                      # racy's error: |2.5a - 2a| / |2a|
    assert "RuntimeError" in failures.rejected[1][1] and failures.failed == []
    assert "slow" not in failures


def test_when_every_candidate_is_wrong_the_point_fails_with_each_reason(fake_timer):
    x, calls = inputs(), []
    verify = verifier(2 * x["a"].double(), 1e-6, "cpu", x, ("b",))
    with pytest.raises(RuntimeError, match="racy: wrong result"):
        _tune.autotune(("toy", "fp32"), ["racy", "crashy"], make_fn_for(x, calls), "cpu", verify=verify)


def test_a_class_winner_wrong_at_another_size_is_dropped_there(fake_timer, monkeypatch):
    monkeypatch.setattr(_tune, "smem_limit", lambda dev: None)

    class FakeCuda:
        is_cuda = True
        device = "cuda:0"
    x, calls = inputs(), []
    ok = type("Ctx", (), {"verify": staticmethod(verifier(2 * x["a"].double(), 1e-6, "cpu", x, ("b",))),
                          "mode": "warm", "quick": False})
    fn, cfg = _tune.tuned(FakeCuda(), ("toy", "fp32", 4096), ["racy", "right", "slow"], None, make_fn_for(x, calls), ok)
    assert cfg == "right" and [(c, why.code) for c, why in fn.rejected] == [("racy", "wrong_result")]
    # at 5000 (the same octave) "right" is wrong (a stand-in for a tile that fails at that size)
    monkeypatch.setitem(CANDIDATES, "right", (3.0, lambda a, b: torch.mul(a, 3, out=b)))
    fn, cfg = _tune.tuned(FakeCuda(), ("toy", "fp32", 5000), ["racy", "right", "slow"], None, make_fn_for(x, calls), ok)
    assert cfg == "slow"
    # the class's best (right) rejected here first, then racy when this size was tuned on its own
    assert [(c, why.code) for c, why in fn.rejected] == [("right", "wrong_result"), ("racy", "wrong_result")]
    # a revisit of 5000 has no gate to ask (no reference): it gets the winner this size's own tuning kept
    unchecked = type("Ctx", (), {"verify": None, "mode": "warm", "quick": False})
    assert _tune.tuned(FakeCuda(), ("toy", "fp32", 5000), ["racy", "right", "slow"], None, make_fn_for(x, calls),
                       unchecked)[1] == "slow"


def test_the_runner_hands_the_gate_to_a_tuning_launcher(fake_timer):
    # an impl that tunes over the candidates through the launch context's verify: the row
    # is measured with the right candidate, and its detail names the rejected ones
    calls, tuned = [], []

    def launcher(x, ctx):
        cfg, _, failures = _tune.autotune(("toy.double", x["a"].numel()), list(CANDIDATES), make_fn_for(x, calls),
                                          "cpu", verify=ctx.verify)
        fn = make_fn_for(x, calls)(cfg)
        fn.tuning = failures
        tuned.append(failures)
        return fn
    ms = Runner(CPU, FAST).run(make_plan(toy_registry({"tuned": launcher}), CPU, quick=True))
    assert [m.status for m in ms] == ["ok"]
    assert ms[0].error == 0.0
    [failures] = tuned  # the gate (ctx.verify) rejected the two faster ones, and the row's detail says so
    assert [(c, why.code) for c, why in failures.rejected] == [("racy", "wrong_result"), ("crashy", "crashed")]
    assert failures in ms[0].detail


def test_a_rejection_keeps_its_code_across_processes():
    # a worker's result is pickled: the gate's Reason arrives with its code
    import pickle
    x = inputs()
    why = verifier(2 * x["a"].double(), 1e-6, "cpu", x, ("b",))(lambda: torch.mul(x["a"], 2.5, out=x["b"]))
    back = pickle.loads(pickle.dumps(why))
    assert back == why and back.code == "wrong_result"
