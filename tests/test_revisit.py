"""Revisit passes measure each one-row roof's row again (ARCHITECTURE.md, rule 11;
bench/measure/revisit.py): which row of each group a pass picks, in which mode, and that a
runner's pass measures it again with its pass number, uncut by a predicted time."""
import pandas as pd

from bench.hw import detect
from bench.measure.registry import load_all
from bench.measure.revisit import cache_picks, revisit_picks, roof_picks
from bench.measure.runner import Plan, Runner, Task
from bench.results import Measurement, best_passes, first_pass_id

STEADY = (1e-3,) * 10                              # converged: trusted (rule 10)
NOISY = (1e-3, 1.3e-3, 0.7e-3, 1.3e-3, 0.7e-3)     # spread 60% and not converged: untrusted


def _row(op, family, impl, point, flops, samples=STEADY, mode="warm", pass_no=1, timer="perf_counter_ns"):
    return Measurement(op=op, family=family, impl=impl, backend=impl.split("/")[1], point=point, size=1, shape="",
                       working_set_bytes=0, flops=flops, bytes=1e6, mode=mode, status="ok", samples_s=samples,
                       stop="converged" if samples == STEADY else "budget", timer=timer, pass_no=pass_no)


def test_a_pass_picks_each_one_row_roofs_trusted_best_in_its_own_mode():
    gemm = lambda op, impl, n, gf, samples=STEADY, mode="warm", dtype="fp32": _row(  # noqa: E731
        op, "gemm", f"{op}/{impl}", {"dtype": dtype, "shape": (n, n, n)}, gf * 1e6, samples, mode)
    chain = lambda k, gf, samples=STEADY: _row(  # noqa: E731
        "fma.chains", "fma", "fma.chains/torch", {"dtype": "fp32", "k": k}, gf * 1e6, samples)
    rows = [
        _row("probe.launch", "probe", "probe.launch/torch", {"form": "call"}, 0.0),
        _row("probe.l1", "probe", "probe.l1/torch", {"span": 1}, 0.0, samples=(2e-3,) * 10),
        _row("probe.l1", "probe", "probe.l1/torch", {"span": 2}, 0.0),          # the faster read: 1 GB/s
        gemm("gemm.square", "torch", 512, 150.0), gemm("gemm.search", "numpy", 1536, 180.0),
        gemm("gemm.search", "numpy", 3072, 184.0, samples=NOISY),   # faster, but it may not set the roof
        gemm("gemm.skinny", "torch", 16, 6.2, mode="cold", dtype="int8"), gemm("gemm.square", "torch", 256, 6.0,
                                                                               dtype="int8"),
        gemm("gemm.square", "torch", 1024, 20.0, samples=NOISY, dtype="bf16"),  # no trusted bf16 row: its best
        chain(256, 26.0, samples=NOISY), chain(1024, 24.0), chain(16, 15.0),
        _row("stream.copy", "stream", "stream.copy/torch", {"dtype": "float32", "ws_bytes": 1}, 0.0),
        _row("probe.launch", "probe", "probe.launch/torch", {"form": "call"}, 0.0, pass_no=2),  # a pass: never
    ]
    picks = {(op, tuple(sorted(point.items())), mode) for op, _, point, mode in roof_picks(rows)}
    assert picks == {
        ("probe.launch", (("form", "call"),), "warm"),
        ("probe.l1", (("span", 2),), "warm"),
        ("gemm.search", (("dtype", "fp32"), ("shape", (1536, 1536, 1536))), "warm"),
        ("gemm.skinny", (("dtype", "int8"), ("shape", (16, 16, 16))), "cold"),
        ("gemm.square", (("dtype", "bf16"), ("shape", (1024, 1024, 1024))), "warm"),
        ("fma.chains", (("dtype", "fp32"), ("k", 1024)), "warm"),
    }
    assert roof_picks([]) == []


KiB, MiB = 2**10, 2**20


def _stream(op, ws, gbps, read_share, dtype="float32", pass_no=1):
    """A warm stream row of ws bytes at gbps (its samples 10 steady ms), read_share of them read."""
    nbytes = int(gbps * 1e9 * 1e-3)
    return Measurement(op=op, family="stream", impl=f"{op}/torch", backend="torch",
                       point={"dtype": dtype, "ws_bytes": ws}, size=ws // 4, shape="", working_set_bytes=ws, flops=0,
                       bytes=nbytes, mode="warm", status="ok", samples_s=STEADY, stop="converged",
                       timer="perf_counter_ns", pass_no=pass_no,
                       columns={"read_bytes": int(nbytes * read_share),
                                "write_bytes": nbytes - int(nbytes * read_share)})


def test_a_pass_picks_the_rows_each_cache_roof_rests_on():
    """An L2 of 1 MiB and an L3 of 32 MiB: rereads on each plateau (L2 200 GB/s from 128 to 512
    KiB, L3 150 from 2 to 16 MiB) and copies beside them; DRAM at 40 from 128 MiB. Each cache's
    roof rests on its best reread, its copy roof on its best copy; a pass measures those rows
    again, each once, beside the off-chip sizes."""
    from bench.hw.device import CacheLevel, DeviceInfo
    dev = DeviceInfo("cpu", "cpu", "AMD EPYC", 2**34, 2, "cores", (CacheLevel("l2", MiB), CacheLevel("l3", 32 * MiB)))
    rows = [_stream("stream.reread", ws, g, 1.0) for ws, g in
            ((128 * KiB, 198.0), (256 * KiB, 201.0), (512 * KiB, 199.0),
             (2 * MiB, 149.0), (4 * MiB, 152.0), (8 * MiB, 150.0), (16 * MiB, 148.0))]
    rows += [_stream("stream.copy", ws, g, 0.5) for ws, g in
             ((256 * KiB, 120.0), (512 * KiB, 121.0), (4 * MiB, 100.0), (8 * MiB, 101.0),
              (128 * MiB, 40.0), (256 * MiB, 39.0))]
    rows.append(_stream("stream.reread", 4 * MiB, 180.0, 1.0, pass_no=2))  # a pass's row: never a pick
    picks = {(op, p["ws_bytes"]) for op, _, p, mode in cache_picks(rows, dev) if mode == "warm"}
    assert picks == {("stream.reread", 256 * KiB), ("stream.copy", 512 * KiB),
                     ("stream.reread", 4 * MiB), ("stream.copy", 8 * MiB)}
    every = revisit_picks(rows, dev)
    assert len(every) == len({(op, str(sorted(p.items())), m) for op, _, p, m in every})  # each once
    assert {("stream.copy", 128 * MiB), ("stream.copy", 256 * MiB)} <= {(op, p["ws_bytes"]) for op, _, p, _ in every}
    assert cache_picks(rows, DeviceInfo("cpu", "cpu", "x", 2**34, 2, "cores", ())) == [] and cache_picks([], dev) == []


def test_a_runners_pass_measures_the_launch_floor_and_the_gemm_again_uncut_by_a_predicted_time():
    reg = load_all()
    cpu = detect.resolve("cpu")
    copy, launch, square = reg.ops["stream.copy"], reg.ops["probe.launch"], reg.ops["gemm.square"]
    torch_of = lambda op: (reg.impls[f"{op.name}/torch"],)  # noqa: E731
    plan = Plan([Task(copy, {"dtype": "float32", "ws_bytes": 64 * 2**10}, torch_of(copy)),
                 Task(launch, {"form": "call"}, torch_of(launch)),
                 Task(square, {"dtype": "fp32", "shape": (32, 32, 32)}, torch_of(square))])
    runner = Runner(cpu, quick=True, revisits=1)
    asked = []  # a pass repeats a point whose time is known: the predicted-time rule (rule 7) is not asked
    runner._predict_skip = lambda impl, op, point, mode: asked.append((op.name, runner._pass))
    out = runner.run(plan)
    again = [m for m in out if m.pass_no == 2]
    assert sorted((m.op, m.mode, m.status) for m in again) == [("gemm.square", "warm", "ok"),
                                                              ("probe.launch", "warm", "ok")]
    assert all(m.point_id.endswith("#pass2") and first_pass_id(m.point_id) + "#pass2" == m.point_id for m in again)
    assert {first_pass_id(m.point_id) for m in again} <= {m.point_id for m in out if m.pass_no == 1}
    assert {p for _, p in asked} == {1} and len(asked) == 3


def test_a_chart_draws_each_points_fastest_pass():
    rows = pd.DataFrame({"point_id": ["a@warm", "b@warm", "a@warm#pass2", "a@warm#pass3"],
                         "median_ms": [2.0, 1.0, 1.5, 3.0]})
    assert best_passes(rows)["point_id"].tolist() == ["b@warm", "a@warm#pass2"]
    assert best_passes(rows.iloc[:2]).equals(rows.iloc[:2])
    assert first_pass_id("a@warm#pass12") == "a@warm" and first_pass_id("a@warm") == "a@warm"
