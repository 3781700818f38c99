"""GPU paths: the CUDA timer, and the runner measuring Triton and torch kernels on a GPU.
Marked `gpu`: skipped without CUDA (conftest.py)."""
import pytest
import torch

from bench.hw import detect
from bench.measure.registry import load_all
from bench.measure.runner import Runner, make_plan
from bench.measure.timing import TimerConfig, make_flush, time_fn

pytestmark = pytest.mark.gpu


def test_cuda_timer_warm_uses_a_graph_and_cold_flushes():
    x = torch.randn(1 << 20, device="cuda")
    y = torch.empty_like(x)
    cfg = TimerConfig(budget_s=0.2, warmup_s=0.02)
    warm = time_fn(lambda: y.copy_(x), "cuda:0", "warm", cfg)
    assert warm.method == "cuda_graph" and warm.reps > 1 and warm.stats.median_s > 0
    info = detect.resolve("cuda")
    cold = time_fn(lambda: y.copy_(x), "cuda:0", "cold", cfg, flush=make_flush("cuda:0", info.llc_bytes))
    assert cold.method == "cuda_event" and cold.reps == 1
    # a cold copy of 8 MiB cannot be faster than the warm one by much
    assert cold.stats.median_s > 0.8 * warm.stats.median_s


def test_cuda_timer_measures_known_work():
    # 4 GiB copied at < 10 TB/s takes > 0.4 ms: events must not report host-side launch time
    x = torch.empty(1 << 29, dtype=torch.float32, device="cuda")
    y = torch.empty_like(x)
    t = time_fn(lambda: y.copy_(x), "cuda:0", "warm", TimerConfig(budget_s=0.3))
    assert t.stats.median_s > 4 * 2**30 / 10e12


def test_runner_on_gpu_checks_and_times_triton_and_torch_stream():
    info = detect.resolve("cuda")
    plan = make_plan(load_all(), info, only=["stream.triad", "stream.read"], quick=True, max_ws_bytes=64 * 2**20)
    ms = Runner(info, TimerConfig(budget_s=0.05, warmup_s=0.01)).run(plan)
    assert ms and all(m.status == "ok" for m in ms), [m.reason for m in ms if m.status != "ok"]
    assert all(m.error <= m.tolerance for m in ms)
    assert {m.backend for m in ms} == {"torch", "triton"}


def test_runner_on_gpu_autotunes_the_triton_gemm():
    info = detect.resolve("cuda")
    plan = make_plan(load_all(), info, only=["gemm.square/triton"], dtypes=["bf16", "int8"], quick=True,
                     max_ws_bytes=30 * 2**20)
    ms = Runner(info, TimerConfig(budget_s=0.1, warmup_s=0.01), quick=True).run(plan)
    assert ms and all(m.status == "ok" and m.detail.startswith("tile ") for m in ms), [m.reason for m in ms]
    assert all("best of" in m.detail for m in ms)  # tuned on the GPU, not the interpreter's tile


def test_reread_reads_l2_faster_than_hbm():
    # the cache-roof kernel on a buffer well inside L2 and one 8x past it, checked against its
    # reference by the runner; inside L2 it must beat the off-chip bandwidth it sees outside
    info = detect.resolve("cuda")
    reg = load_all()
    from bench.measure.runner import Task
    op, impl = reg.ops["stream.reread"], reg.impls["stream.reread/triton"]
    small = {"dtype": "float32", "ws_bytes": 8 * 2**20, "call_bytes": 2**30}
    big = dict(small, ws_bytes=8 * info.llc_bytes)
    runner = Runner(info, TimerConfig(budget_s=0.2, warmup_s=0.01), quick=True)
    [inside] = runner.run_task(Task(op, small, (impl,)), ("warm",))
    [outside] = runner.run_task(Task(op, big, (impl,)), ("warm",))
    assert inside.status == outside.status == "ok", (inside.reason, outside.reason)
    assert inside.gbps > 1.2 * outside.gbps


def test_device_timer_short_kernel_gets_a_millisecond_graph_sample():
    x = torch.randn(1 << 12, device="cuda")
    y = torch.empty_like(x)
    t = time_fn(lambda: y.copy_(x), "cuda:0", "warm", TimerConfig(budget_s=0.2, warmup_s=0.01))
    assert t.method == "cuda_graph" and t.reps * t.stats.median_s >= 0.5e-3
    assert t.stats.median_s < 20e-6  # a 16 KiB copy is a few microseconds, not launch + sync
