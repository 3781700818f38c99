"""Progress output fits a screen: skips grouped per family with a count,
and a time-left estimate that does not jump."""
from types import SimpleNamespace

import pytest

from bench.measure.progress import Ticker, reason_key, time_left

TRITON = "Triton compiles for GPUs only; on a CPU it runs under TRITON_INTERPRET=1"


def row(family, impl, status="ok", reason=""):
    return SimpleNamespace(family=family, impl=impl, status=status, reason=reason)


def test_skips_are_grouped_at_the_end_of_their_family():
    lines = []
    t = Ticker(9, None, lines.append, lambda m: f"{m.impl} {m.status} {m.reason}")
    t.row(row("stream", "stream.copy/torch"), 1, 0.0)
    for i, impl in enumerate(("stream.copy/triton", "stream.add/triton", "stream.triad/triton")):
        t.row(row("stream", impl, "skipped", TRITON), 2 + i, 0.0)
    t.row(row("stream", "stream.add/torch", "skipped", "cut short: predicted 0.04 s per call"), 5, 0.0)
    t.row(row("stream", "stream.add/torch", "skipped", "cut short: predicted 0.5 s per call"), 6, 0.0)
    t.row(row("stream", "stream.read/torch", "skipped", "once"), 7, 0.0)
    assert lines == ["[1/9 0:00] stream.copy/torch ok "]  # nothing of the skips until the family ends
    t.row(row("transfer", "transfer.h2d/torch", "skipped", "host-device copies need a GPU"), 8, 0.0)
    t.row(row("transfer", "transfer.d2h/torch", "skipped", "host-device copies need a GPU"), 9, 0.0)
    t.close()
    assert lines[1:] == [
        f"[7/9 0:00] stream: 3 points SKIPPED (copy/triton, add/triton, triad/triton): {TRITON}",
        "[7/9 0:00] stream: 2 points SKIPPED (add/torch): e.g. cut short: predicted 0.04 s per call",
        "[7/9 0:00] stream.read/torch skipped once",     # a lone skip keeps its own line
        "[9/9 0:00] transfer: 2 points SKIPPED (h2d/torch, d2h/torch): host-device copies need a GPU"]
    assert reason_key("predicted 0.04 s, 1,024 calls") == reason_key("predicted 12 s, 3 calls")


def test_time_left_leans_on_the_prediction_early():
    est = [1.0] * 100   # 100 s predicted, one family: prior 5 s, future 40 s
    # 10 rows predicted 10 s took 1 s: the raw ratio says 9 s left. The run's ratio is
    # r = (1 + 40) / (10 + 40) = 0.82, the family's (1 + 5r) / (10 + 5) = 0.34: 90 * 0.34 = 30.6 s
    assert abs(time_left({"": 1.0}, 10, est) - 30.6) < 1e-9
    assert time_left({"": 100.0}, 100, est) == 0.0
    # late in the run the measured ratio dominates: 80 rows in 160 s, r = 200 / 120, so about 2x for
    # the last 20: 20 * (160 + 5r) / 85
    assert abs(time_left({"": 160.0}, 80, est) - 20 * (160 + 5 * 200 / 120) / 85) < 1e-9


def test_one_familys_pace_is_its_own_and_says_little_of_the_next():
    """50 stream rows then 50 gemm rows, 1 s each predicted (prior 5 s, future 40 s); stream runs 2x.
    Halfway through stream (25 rows in 50 s): r = (50 + 40) / (25 + 40) = 1.385, stream's own pace
    (50 + 5r) / (25 + 5) = 1.897, so 25 * 1.897 + 50 * 1.385 = 116.7 s, not the 150 s that 2x on
    everything says. At stream's end (50 in 100 s): gemm's 50 s at r = 140 / 90: 77.8 s."""
    est, fams = [1.0] * 100, ["stream"] * 50 + ["gemm"] * 50
    r = 90 / 65
    assert abs(time_left({"stream": 50.0}, 25, est, 0.0, fams) - (25 * (50 + 5 * r) / 30 + 50 * r)) < 1e-9
    assert abs(time_left({"stream": 100.0}, 50, est, 0.0, fams) - 50 * 140 / 90) < 1e-9
    # one gemm row later, at its predicted pace: the gemm rows left lean on r = 141 / 91 through the prior
    r = 141 / 91
    assert abs(time_left({"stream": 100.0, "gemm": 1.0}, 51, est, 0.0, fams) - 49 * (1 + 5 * r) / 6) < 1e-9


def test_shown_time_left_does_not_jump():
    """A run of 100 rows predicted at 3 s each whose first 20 rows are quick skips (0.01 s):
    the raw estimate falls from ~4:57 towards a small fraction within a second; the shown
    one never falls faster than a fifth of the gap per line, and never rises by more than
    the time that passed."""
    est = [3.0] * 100
    lines = []
    t = Ticker(100, est, lines.append, lambda m: "x")
    shown, elapsed = [], 0.0
    for done in range(1, 101):
        elapsed += 0.01 if done <= 20 else 3.0
        t.row(row("gemm", "gemm.square/torch"), done, elapsed)
        shown.append(t.shown)
    assert shown[0] > 240  # 297 s predicted, the prior holding it near
    for a, b in zip(shown, shown[1:21]):
        assert b >= 0.75 * a    # no drop from ~5 min to ~1.5 min in two seconds
    assert shown[-1] == 0.0 and lines[-1].startswith("[100/100 4:00, ~0:00 left]")


def test_clock_without_predictions_and_at_the_end():
    t = Ticker(5, None, lambda line: None, str)
    assert t.clock(65.0, 3) == "1:05"
    t = Ticker(5, [10, 10, 10, 10, 10], lambda line: None, str)
    assert t.clock(5.0, 5) == "0:05, ~0:00 left"


def test_the_time_left_counts_the_tail_after_the_rows():
    """A tail (the sustained phase and the finishing, 20 s predicted) after five 10 s rows: at
    the start 70 s left; after the last row, run at the predicted pace, the tail's 20 s, not
    0 (hand-worked: future 20 s, the run's ratio (50 + 20) / (50 + 20) = 1)."""
    assert time_left({}, 0, [10.0] * 5, 20.0) == 70.0
    assert time_left({"": 50.0}, 5, [10.0] * 5, 20.0) == 20.0
    t = Ticker(5, [10.0] * 5, lambda line: None, str, tail_s=20.0)
    assert t.clock(50.0, 5) == "0:50, ~0:20 left"


def test_the_counter_counts_the_rows_that_may_run():
    """A bf16 GEMM with the torch and numpy impls: numpy's own rule (fp32 and fp64 only)
    skips its row before the run, so the counter counts 1 row, not 2, and ends at 1/1."""
    from bench.hw import detect
    from bench.measure.registry import load_all
    from bench.measure.runner import Plan, Runner, Task, counted_rows
    from bench.measure.timing import timer_config
    reg, dev = load_all(), detect.resolve("cpu")
    task = Task(reg.ops["gemm.square"], {"dtype": "bf16", "shape": (64, 64, 64)},
                (reg.impls["gemm.square/torch"], reg.impls["gemm.square/numpy"]), ("warm",))
    plan = Plan([task])
    assert counted_rows(plan, dev, False) == (1, {(0, "gemm.square/numpy")})
    lines = []
    rows = Runner(dev, timer_config(True, 0.05), progress=lines.append).run(plan)
    assert len(rows) == 2 and {r.status for r in rows if r.impl.endswith("numpy")} == {"skipped"}
    assert lines and all(line.startswith("[1/1 ") for line in lines), lines


def paced(*families):
    """Return (families, predicted, actual) per row for families given as (name, rows, predicted
    seconds per row, actual seconds per row)."""
    rows = [(name, pred, act) for name, n, pred, act in families for _ in range(n)]
    return [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]


@pytest.mark.parametrize("rows,tail", [
    (paced(("gemm", 100, 3.0, 4.5)), (0.0, 0.0)),                       # every row 1.5x slower than predicted
    (paced(("gemm", 100, 3.0, 2.1)), (0.0, 0.0)),                       # 0.7x
    (paced(("stream", 300, 0.01, 0.01), ("gemm", 100, 3.0, 4.5)), (0.0, 0.0)),  # quick skips first, then 1.5x
    (paced(("gemm", 50, 3.0, 3.0), ("gemv", 50, 3.0, 4.8)), (0.0, 0.0)),  # on time, then a family 1.6x
    (paced(("gemm", 100, 3.0, 4.5)), (200.0, 300.0)),                   # 1.5x, then a long tail 1.5x
    (paced(*((f, 25, 3.0, 4.5) for f in ("stream", "gemm", "gemv", "attention"))), (0.0, 0.0)),  # all 1.5x
    # a full CPU run as it went (a 2-core Zen 3 VM, predicted with no learned cache): the DRAM
    # sweeps 1.66x their prediction, then families on time or faster; elapsed + the time left
    # overshot the end by 24-35% while every family left was scaled by the stream's pace
    (paced(("stream", 152, 1.0, 1.66), ("gemm", 121, 1.0, 0.95), ("gemv", 152, 1.0, 0.79),
           ("attention", 80, 1.0, 1.19)), (22.0, 26.0)),
])
def test_the_eta_is_within_a_quarter_of_the_truth_from_the_first_minute(rows, tail):
    """From the first minute on, elapsed + the shown time left is within 25% of the run's
    true end (its tail after the rows included: predicted, then taken), on runs whose rows are
    off the prediction by a factor, the same in every family or one family's own (the ETA can
    be no better than the prediction of the families not yet run: a family 1.6x after one on
    time is the edge)."""
    families, predicted, actual = rows
    t = Ticker(len(predicted), predicted, lambda line: None, lambda m: "x", tail_s=tail[0], families=families)
    elapsed, end, worst = 0.0, sum(actual) + tail[1], 0.0
    for done, (fam, sec) in enumerate(zip(families, actual), 1):
        elapsed += sec
        t.row(row(fam, f"{fam}.x/torch"), done, elapsed)
        if elapsed >= 60 and done < len(actual):
            worst = max(worst, abs((elapsed + t.shown) / end - 1))
    assert worst <= 0.25, worst
