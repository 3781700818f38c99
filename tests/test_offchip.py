"""The off-chip roof under a noisy host (ARCHITECTURE.md, rule 11; issue 28): a neighbour's
traffic only ever slows a read, so each off-chip size keeps its best pass and the roof is
the ceiling of those bests; revisit passes are spread over the run. Synthetic data with
known answers."""
import pandas as pd

from bench.hw.device import CacheLevel, DeviceInfo
from bench.measure.registry import load_all
from bench.measure.runner import Plan, Task, revisit_passes, revisit_picks, revisit_stops
from bench.results import Measurement
from roofs.analysis.derive import bandwidth_roofs, offchip_roof, pass_range

MiB = 2**20
CACHES = [("l3", 32 * MiB)]


def row(op, ws, gbps, pass_no=1, read=None, write=None):
    ms = ws / (gbps * 1e9) * 1e3
    read = ws if read is None else read
    write = 0 if write is None else write
    return {"point_id": f"{op}/torch[{ws}]@warm#{pass_no}", "op": op, "family": "stream", "impl": f"{op}/torch",
            "dtype": "float32", "working_set_bytes": ws, "bytes": ws, "flops": 0, "mode": "warm",
            "median_ms": ms, "p20_ms": ms * 0.99, "p80_ms": ms * 1.01, "samples": 20, "stop": "converged",
            "gbps": gbps, "status": "ok", "flag": "", "pass": pass_no, "read_bytes": read, "write_bytes": write}


def bimodal_rows():
    """The issue's VM: off-chip rows at 31, 28, 50, 56, 51, 24 GB/s from 128 MiB to 4 GiB in
    the sweep (the host's memory moves between about 22 and 56 GB/s); two revisit passes
    that caught the quiet state at 128 and 256 MiB (55, 57) and the busy state elsewhere."""
    sweep = {128: 31, 256: 28, 512: 50, 1024: 56, 2048: 51, 4096: 24}
    out = [row("stream.read", s * MiB, v) for s, v in sweep.items()]
    out += [row("stream.read", 128 * MiB, 55, 2), row("stream.read", 256 * MiB, 25, 2)]
    out += [row("stream.read", 128 * MiB, 23, 3), row("stream.read", 256 * MiB, 57, 3)]
    return pd.DataFrame(out)


def test_each_size_keeps_its_best_pass_and_sizes_that_then_agree_set_a_steady_roof():
    roof, note = offchip_roof("dram.read", bimodal_rows(), 0.10)
    # best passes: 128 -> 55, 256 -> 57, 512 -> 50, 1024 -> 56, 2048 -> 51, 4096 -> 24;
    # the plateau within 10% of 57: 55, 57, 50? no (50 < 51.3): 128-256 MiB, the best 57
    assert roof.value == 57 and roof.extra["steady"] is True and roof.plateau_points == 2
    # the passes' bests: pass 1 56, pass 2 55, pass 3 57
    assert roof.extra["passes"] == [55, 57]


def test_sizes_that_never_agree_still_give_the_ceiling_labelled_unsteady():
    rows = pd.DataFrame([row("stream.read", s * MiB, v) for s, v in {128: 31, 256: 28, 512: 50, 1024: 56}.items()])
    roof, _ = offchip_roof("dram", rows, 0.10)
    assert roof.value == 56 and roof.extra["steady"] is False
    assert roof.extra["unsteady"].startswith("unsteady: sizes 28-56 GB/s at their best")
    assert "passes" not in roof.extra  # one pass only


def test_a_single_off_chip_size_gives_no_roof_and_says_why():
    roof, note = offchip_roof("dram", pd.DataFrame([row("stream.read", 128 * MiB, 31)]), 0.10)
    assert roof is None and "only one working-set size" in note


def test_a_run_with_two_or_more_off_chip_sizes_always_ends_with_a_dram_roof_per_direction():
    rows = pd.DataFrame([row("stream.read", s * MiB, v) for s, v in {128: 31, 256: 50, 512: 24}.items()]
                        + [row("stream.write", s * MiB, v, read=0, write=s * MiB) for s, v in {128: 40, 256: 22}.items()]
                        + [row("stream.copy", s * MiB, v, read=s * MiB // 2, write=s * MiB // 2)
                           for s, v in {128: 45, 256: 30, 512: 36}.items()])
    roofs, notes = bandwidth_roofs(rows, CACHES)
    got = {r.name: r.value for r in roofs}
    assert got == {"dram": 50, "dram.read": 50, "dram.write": 40, "dram.copy": 45}


def test_pass_range_is_the_spread_of_the_per_pass_bests():
    assert pass_range(bimodal_rows()) == (55, 57)
    assert pass_range(bimodal_rows().drop(columns="pass")) is None


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
    cpu = DeviceInfo("cpu", "cpu", "cpu", 2**34, 2, "cores", (CacheLevel("l3", 32 * MiB),))
    gpu = DeviceInfo("cuda", "cuda:0", "gpu", 2**37, 132, "SMs", (CacheLevel("l2", 50 * MiB),))
    assert (revisit_passes(cpu, False), revisit_passes(cpu, True)) == (3, 2)
    assert (revisit_passes(gpu, False), revisit_passes(gpu, True)) == (0, 0)


def _measured(op, ws, gbps, read, write):
    return Measurement(op=op, family="stream", impl=f"{op}/torch", backend="torch",
                       point={"dtype": "float32", "ws_bytes": ws}, size=ws // 4, shape="", working_set_bytes=ws,
                       flops=0, bytes=ws, mode="warm", status="ok", samples_s=(ws / (gbps * 1e9),) * 5,
                       stop="converged", columns={"read_bytes": read, "write_bytes": write})


def test_a_pass_revisits_the_fastest_sweep_of_each_direction_at_its_two_smallest_off_chip_sizes():
    cpu = DeviceInfo("cpu", "cpu", "cpu", 2**34, 2, "cores", (CacheLevel("l3", 32 * MiB),))
    rows = []
    for ws, v in ((16 * MiB, 180), (128 * MiB, 40), (256 * MiB, 38), (512 * MiB, 39)):
        rows.append(_measured("stream.read", ws, v, ws, 0))
        rows.append(_measured("stream.copy", ws, v + 5, ws // 2, ws // 2))
        rows.append(_measured("stream.triad", ws, v + 1, 2 * ws // 3, ws // 3))
    picks = revisit_picks(rows, cpu)
    # no measured L3 edge (one size at or under it): off chip from 4 x 32 MiB = 128 MiB
    assert [(op, p["ws_bytes"] // MiB) for op, _, p in picks] == \
        [("stream.read", 128), ("stream.read", 256), ("stream.copy", 128), ("stream.copy", 256)]
    assert revisit_picks([], cpu) == []

