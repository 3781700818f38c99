"""The off-chip roof under a noisy host (ARCHITECTURE.md, rule 11): a neighbour's traffic
only ever slows a read, so every usable measurement is a floor of the ceiling: each size keeps
its best pass, and the roof is the Policy.roof_rank-th highest of those bests over the level's
sizes (roofs/analysis/model.py); revisit passes are spread over the run. Synthetic data with known
answers, each worked out in its test."""
import math

import pandas as pd
import pytest

from bench.hw.device import CacheLevel, DeviceInfo
from bench.measure.registry import load_all
from bench.measure.revisit import revisit_passes, revisit_stops
from bench.measure.runner import Plan, Task
from bench.policy import DEFAULT
from roofs.analysis.confirm import derive_roofs

MiB = 2**20
CPU = {"kind": "cpu", "caches": [{"name": "l3", "total_bytes": 32 * MiB}]}


def row(op, ws, gbps, pass_no=1, read=None, write=None, spread=0.0, samples=20, flag=""):
    """One warm stream row whose rate is gbps exactly (its p20 is its median, no samples kept)
    unless spread (p80 - p20 over the median) puts its p20 under the median: then its rate is
    gbps x median / p20, the figure at the fast end of its calls."""
    ms = ws / (gbps * 1e9) * 1e3
    read = ws if read is None else read
    write = 0 if write is None else write
    return {"point_id": f"{op}/torch[{ws}]@warm" + (f"#pass{pass_no}" if pass_no > 1 else ""), "op": op,
            "family": "stream", "impl": f"{op}/torch", "backend": "torch", "dtype": "float32",
            "working_set_bytes": ws, "bytes": ws, "flops": 0, "mode": "warm", "median_ms": ms,
            "p20_ms": ms * (1 - spread / 2), "p80_ms": ms * (1 + spread / 2), "samples": samples,
            "stop": "converged" if not spread else "budget", "gbps": gbps, "gflops": float("nan"), "status": "ok",
            "flag": flag, "pass": pass_no, "read_bytes": read, "write_bytes": write}


def dram(rows):
    roofs, notes = derive_roofs(pd.DataFrame(rows), CPU)
    return next((r for r in roofs if r.name == "dram"), None), notes


def test_a_quiet_revisit_pass_lifts_the_roof_and_no_lucky_one_sets_it():
    """A VM whose memory moves between about 30 and 57 GB/s: sizes 256 MiB-2 GiB, the sweep
    (pass 1) at 28, 50, 52, 51 and a revisit pass (pass 2) at 57, 30, 30, 56. All four sizes
    are one plateau (their bests 57, 50, 52, 56: no split leaves neighbours 15% apart), and no
    measured level lies inside it, so every size counts: the roof is the second highest of the
    sizes' best passes, 56, not the one lucky 57."""
    sweep = {256: 28, 512: 50, 1024: 52, 2048: 51}
    again = {256: 57, 512: 30, 1024: 30, 2048: 56}
    rows = [row("stream.read", s * MiB, v) for s, v in sweep.items()]
    rows += [row("stream.read", s * MiB, v, pass_no=2) for s, v in again.items()]
    roof, _ = dram(rows)
    assert roof.value == pytest.approx(56) and roof.op == "stream.read"
    assert roof.extra["pass_count"] == 2 and roof.extra["passes"] == pytest.approx([52, 57])
    # the roof's own spread: off chip the top reaches from the sizes at or past the roof's (a
    # smaller set may still hit in the last cache), here the 2 GiB size alone, so the gap term
    # ln(best / roof) is 0 and the passes' reach is all: pass_reach(2) x their median ln(max/min)
    # over its four sizes (ln 57/28, ln 50/30, ln 52/30, ln 56/51: the mean of the middle two; its
    # rows' p20 is their median: no jitter). The run's reach is one more of the same spread (each
    # size is a point of the run measured twice: any one of its passes may sit that far below the
    # truth), the larger, so its top is 56 x exp((1 + pass_reach(2)) x that). Its largest size's
    # best is the roof (56), so the low end is the roof itself.
    r = (1 + DEFAULT.pass_reach(2)) * (math.log(50 / 30) + math.log(52 / 30)) / 2
    assert roof.interval == pytest.approx((56, 56 * math.exp(r)))


def test_a_cpu_roof_measured_in_one_pass_says_its_interval_holds_one_minute():
    """The same four sizes measured once (no revisit pass): the dram roof's interval rests on one
    minute's spread, so the notes name it among the roofs measured in one pass; with the revisit
    pass it is in no such note, and a GPU (no passes by design: its clock does not drift between
    minutes) never gets one."""
    sweep = {256: 28, 512: 50, 1024: 52, 2048: 51}
    rows = [row("stream.read", s * MiB, v) for s, v in sweep.items()]
    roofs, notes = derive_roofs(pd.DataFrame(rows), CPU)
    one = [n for n in notes if "one pass" in n]
    assert len(one) == 1 and "dram" in one[0].split(":")[0].split(", ")
    again = rows + [row("stream.read", s * MiB, v, pass_no=2) for s, v in sweep.items()]
    assert not [n for n in derive_roofs(pd.DataFrame(again), CPU)[1] if "one pass" in n]
    gpu = {"kind": "cuda", "caches": [{"name": "l2", "total_bytes": 32 * MiB}]}
    assert not [n for n in derive_roofs(pd.DataFrame(rows), gpu)[1] if "one pass" in n]


def test_noisy_rows_count_toward_the_off_chip_ceiling_a_host_that_speeds_up_late_is_not_lost():
    """The run of 2026-12-01 T195133Z: the host's memory doubled for the last revisit pass,
    whose rows spread 10-30% (the budget stopped them, not converged), while the sweep ran
    about 32-38 GB/s. A spread row with 5 or more samples counts (a neighbour only slows a
    call): its rate is its figure at its p20, gbps / (1 - spread / 2). Sweep: 128 MiB 31 (spread
    0.30: 31 / 0.85), 256 MiB 37.6, 512 MiB 33.9, 1 GiB 36.0; pass 3: 128 MiB 68.0 (0.24: 68 /
    0.88), 256 MiB 60.7 (0.10: 60.7 / 0.95), 512 MiB 66.0, 1 GiB 64.0. One plateau (bests
    77.3, 63.9, 66.0, 64.0 within 15%) with no measured level inside it: every size counts, each
    at its best pass, and the roof is the second highest, 66.0, with the fast pass, not the
    sweep's 36."""
    copy = lambda ws, v, p=1, spread=0.0: row("stream.copy", ws * MiB, v, p, read=ws * MiB // 2,  # noqa: E731
                                              write=ws * MiB // 2, spread=spread)
    rows = [copy(128, 31.0, spread=0.30), copy(256, 37.6), copy(512, 33.9), copy(1024, 36.0),
            copy(128, 68.0, 3, 0.24), copy(256, 60.7, 3, 0.10), copy(512, 66.0, 3), copy(1024, 64.0, 3)]
    roofs, _ = derive_roofs(pd.DataFrame(rows), CPU)
    got = {r.name: r for r in roofs}
    assert got["dram"].value == pytest.approx(66.0) and got["dram.copy"].value == pytest.approx(66.0)
    # the noisy 128 MiB row sets the plateau's start and is one of its sizes
    assert got["dram"].plateau_bytes == (128 * MiB, 1024 * MiB) and got["dram"].plateau_points == 4


def test_rows_with_too_few_samples_or_a_runner_flag_set_no_off_chip_roof():
    """Reads at 128 MiB 39 and 1 GiB 40 GB/s count; a 256 MiB row of 4 samples (90) and a
    512 MiB row the runner flagged busy (95) set nothing. The roof is the second highest of
    39 and 40: 39, its top 40 x exp(reach x ln(40/39))."""
    read = lambda ws, v, **kw: row("stream.read", ws * MiB, v, **kw)  # noqa: E731
    roof, _ = dram([read(128, 39.0), read(1024, 40.0), read(256, 90.0, samples=4),
                    read(512, 95.0, flag="measured while the machine was busy: load 3.1")])
    assert roof.value == pytest.approx(39.0)
    assert roof.interval == pytest.approx((39.0, 40.0 * (40.0 / 39.0) ** DEFAULT.interval_reach))
    assert roof.plateau_points == 2


def _plan(families):
    reg = load_all()
    ops = {"stream": reg.ops["stream.copy"], "gemm": reg.ops["gemm.square"], "gemv": reg.ops["gemv.decode"],
           "attention": reg.ops["attention.prefill"]}
    return Plan([Task(ops[f], {}, ()) for f in families])


def test_revisit_passes_spread_over_the_families_after_stream():
    plan = _plan(["stream", "stream", "gemm", "gemm", "gemv", "attention"])
    # the ends of gemm (3), gemv (4) and attention (5): 3 passes one after each, 2 after gemv and attention
    assert revisit_stops(plan, 3) == {3: [2], 4: [3], 5: [4]}
    assert revisit_stops(plan, 2) == {4: [2], 5: [3]}
    assert revisit_stops(plan, 0) == {}
    # stream alone: the passes back to back at the end
    assert revisit_stops(_plan(["stream", "stream"]), 2) == {1: [2, 3]}
    assert revisit_stops(_plan(["gemm"]), 2) == {}


def test_revisits_run_on_a_cpu_only():
    """A CPU run has the Policy's fewest passes at its planned stops (2, quick 2); a GPU none."""
    cpu = DeviceInfo("cpu", "cpu", "cpu", 2**34, 2, "cores", (CacheLevel("l3", 32 * MiB),))
    gpu = DeviceInfo("cuda", "cuda:0", "gpu", 2**37, 132, "SMs", (CacheLevel("l2", 50 * MiB),))
    assert (revisit_passes(cpu, False), revisit_passes(cpu, True)) == (DEFAULT.passes(False)[0],
                                                                       DEFAULT.passes(True)[0]) == (2, 2)
    assert (revisit_passes(gpu, False), revisit_passes(gpu, True)) == (0, 0)
