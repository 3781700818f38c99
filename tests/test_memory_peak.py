"""The memory budget bounds the real peak (ARCHITECTURE.md, rule 16): each counted term by
hand, the half-of-RAM cap, and a small plan run in a process of its own whose resident peak
(VmHWM) is measured against the peak the budget predicted for it."""
import dataclasses
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from conftest import session_run

from bench.hw import detect
from bench.measure import memory
from bench.measure.inputs import PERIOD, cached_bytes, making_bytes
from bench.measure.memory import ALLOCATOR_SLACK, RAM_SHARE, Budget, Limit, ram_cap, run_budget
from bench.measure.registry import F64_BLOCK_BYTES
from bench.ops import gemv, stream

ROOT = Path(__file__).resolve().parents[1]
MiB, GiB = 2**20, 2**30
KINDS = {k.name: k for k in stream.KINDS}


@pytest.fixture(autouse=True)
def no_pools():
    memory.release()
    yield
    memory.release()


def test_a_write_makes_only_its_output_pool():
    """A write reads nothing: its point makes n x w bytes of output pool and no random pool
    (stream_pools counts none, so one made would be memory the budget never saw)."""
    n = 2**20
    stream.make_stream_inputs(KINDS["write"], {"dtype": "bfloat16", "ws_bytes": 2 * n}, "cpu")
    assert memory.held() == {("stream.out", "bfloat16", "cpu"): 2 * n}


def _peak_growth(fn) -> int:
    """Return how far fn lifts this process's resident peak above its resident bytes before it."""
    try:
        Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    except OSError:
        pytest.skip("this kernel does not let a process reset its resident peak (/proc/self/clear_refs)")
    before = memory.resident_bytes()
    fn()
    return memory.resident_peak_bytes() - before


def test_a_16_bit_read_check_stays_within_its_counted_block():
    """The read's check of 32 Mi bf16 values (64 MiB): its reference (block_sum) and its scale
    (block_norm) widen SUM_BLOCK values at a time, 8 MiB at most (_sum_check_memory); a norm
    in fp32 in one call made a 128 MiB fp32 copy of the whole array, more than the count and
    the allocator's slack."""
    n = 32 * 2**20
    x = {"a": stream.random_pool(n, torch.bfloat16, "cpu")}
    x["a"].add_(0)  # every page resident before the peak is reset
    out = torch.sum(x["a"], dim=0)
    counted = stream.stream_memory(KINDS["read"], {"dtype": "bfloat16", "ws_bytes": 2 * n})
    assert counted == 8 * stream.SUM_BLOCK == 8 * MiB
    grew = _peak_growth(lambda: KINDS["read"].error(out, KINDS["read"].reference(x), x))
    # the budget's transients allow the C allocator's slack beside it (ALLOCATOR_SLACK, 64 MiB)
    assert grew <= counted + ALLOCATOR_SLACK, f"the check grew the peak by {grew / MiB:.1f} MiB"


def test_block_norm_is_the_norm():
    a = torch.arange(-5, 5, dtype=torch.float32).repeat(300_000)  # 3 M values: three blocks
    assert stream.block_norm(a.to(torch.bfloat16)) == pytest.approx(float(a.double().norm()), rel=1e-6)


def test_stream_check_terms_by_hand():
    """n = 2^20: an fp32 scale holds its fp32 reference and the difference (2 x 4n), a bf16 one
    also its output widened (3 x 4n); a copy and a write check against the input and a 0-d
    constant (0); a read its float64 block (8 x SUM_BLOCK, n past it)."""
    n = 2**20
    assert stream.stream_memory(KINDS["scale"], {"dtype": "float32", "ws_bytes": 2 * 4 * n}) == 8 * MiB
    assert stream.stream_memory(KINDS["scale"], {"dtype": "bfloat16", "ws_bytes": 2 * 2 * n}) == 12 * MiB
    assert stream.stream_memory(KINDS["copy"], {"dtype": "float32", "ws_bytes": 2 * 4 * n}) == 0
    assert stream.stream_memory(KINDS["read"], {"dtype": "bfloat16", "ws_bytes": 2 * 4 * n}) == 8 * MiB


def test_gemv_peak_by_hand():
    """llama8b.o (N = K = 4096), int4 at batch 1: 17 bytes a weight (fp32 raw and dequantized
    weights 8, packed 0.5, torch's CPU packing's int32 copies 8.5), the float64 block (8 MiB),
    float64 rows of 1 x K and 256 x N, 16-bit activations of 256 x K and outputs of 1 x N."""
    n, k = gemv.LAYERS["llama8b.o"]
    assert (n, k) == (4096, 4096)
    want = 17 * n * k + 8 * MiB + 8 * (k + 256 * n) + 2 * (256 * k + n)
    assert gemv.gemv_memory({"layer": "llama8b.o", "dtype": "int4", "batch": 1}) == want
    assert gemv.gemv_memory({"layer": "llama8b.o", "dtype": "bf16", "batch": 1}) == want - 11 * n * k
    assert F64_BLOCK_BYTES == 8 * MiB


def test_budget_total_adds_every_term():
    """held (pools, fixed, cached blocks) + the pools' growth + the point's own + extra + transients."""
    memory.pool(("stream", "float32"), MiB // 4, lambda n: torch.empty(n, dtype=torch.float32))
    b = Budget(None, fixed={"flush buffer": 2 * MiB}, transient=3 * MiB)
    counted = b.counted()
    assert counted == MiB + 2 * MiB + cached_bytes()
    assert b.total(5 * MiB, {("stream", "float32"): 4 * MiB}, {"x": 7 * MiB}) == counted + 3 * MiB + 5 * MiB \
        + 7 * MiB + 3 * MiB
    b.note(5 * MiB, {}, {})
    assert b.peak == counted + 8 * MiB


def test_memory_held_beyond_the_base_counts_as_held():
    """With a base, what the process holds past it counts when more than the counted holdings:
    a base 100 MiB under the resident bytes now holds at least those 100 MiB."""
    rss = memory.resident_bytes()
    if rss is None:
        pytest.skip("no /proc/self/status")
    assert Budget(None, base=rss - 100 * MiB).held() >= 100 * MiB
    assert Budget(None, base=rss + GiB).held() == Budget(None).held()  # never less than counted


def test_budget_is_at_most_half_of_ram_less_the_base():
    assert ram_cap(24 * GiB, 400 * MiB) == int(RAM_SHARE * 24 * GiB) - 400 * MiB == 12 * GiB - 400 * MiB
    assert ram_cap(GiB, 600 * MiB) == 0 and ram_cap(None, 1) is None
    cpu = detect.resolve("cpu")
    rss = memory.resident_bytes()
    if rss is None or memory.available_bytes(cpu) is None:
        pytest.skip("no /proc")
    # a machine whose RAM is 4x what this process holds: half of it less the base is one base
    small = dataclasses.replace(cpu, memory_bytes=4 * rss)
    b = run_budget(small)
    assert b.base is not None and abs(b.limit - rss) < 64 * MiB
    assert b.transient == making_bytes() + ALLOCATOR_SLACK == 12 * PERIOD + 64 * MiB
    assert run_budget(small, Limit(share=1.0)).limit == b.limit  # a share is capped too
    assert run_budget(small, Limit(bytes=8 * rss)).limit == 8 * rss  # a size is the user's own


def test_a_gpus_budget_is_its_share_of_what_cuda_reports_free(monkeypatch):
    """On a GPU the budget is a share of torch.cuda.mem_get_info's free bytes, with no base (a
    process's resident bytes are not the device's) and no allocator slack; a point in the
    budget is still refused past 90% of the free memory. H200-shaped: 100 GiB of 141 GB free."""
    from bench.hw import device as devmod
    from bench.hw.device import DeviceInfo
    from bench.measure import skip
    free, total = 100 * GiB, 141 * 10**9
    asked = []
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda dev=None: asked.append(str(dev)) or (free, total))
    gpu = DeviceInfo("cuda", "cuda:1", "NVIDIA H200", total, 132, "SMs", ())
    assert devmod.free_memory_bytes(gpu) == free and asked == ["cuda:1"]   # the run's own GPU
    b = run_budget(gpu)
    assert (b.limit, b.base, b.transient) == (free // 2, None, making_bytes())
    assert run_budget(gpu, Limit(share=0.25)).limit == free // 4
    assert run_budget(gpu, Limit(bytes=120 * GiB)).limit == 120 * GiB   # a size is the user's own, even past free
    # a 60 GiB point is past the default budget (50 GiB): the budget's skip
    assert skip.memory_reason(60 * GiB, {}, {}, b, free, {}, "cuda:1").startswith(memory.SKIP_PREFIX)
    # at --max-memory 100% a 95 GiB point is in the budget but past 90% of the free 100 GiB; 80 GiB fits
    whole = run_budget(gpu, Limit(share=1.0))
    assert whole.shortfall(95 * GiB, {}) is None
    why = skip.memory_reason(95 * GiB, {}, {}, whole, free, {}, "cuda:1")
    assert why is not None and why.startswith(memory.FREE_PREFIX)
    assert skip.memory_reason(80 * GiB, {}, {}, whole, free, {}, "cuda:1") is None


# ---- a small plan in a process of its own: the predicted peak bounds the measured one -------

PLAN = textwrap.dedent("""
    import json, sys
    from bench.hw import detect
    from bench.measure import memory
    from bench.measure.registry import load_all
    from bench.measure.runner import Plan, Runner, Task
    from bench.measure.timing import TimerConfig
    reg, cpu = load_all(), detect.resolve("cpu")
    budget = memory.run_budget(cpu, memory.Limit(bytes=int(sys.argv[1])))
    tasks = [Task(reg.ops[op], {"dtype": "bfloat16", "ws_bytes": ws * 2**20}, (reg.impls[op + "/torch"],))
             for op in ("stream.read", "stream.write") for ws in (16, 160, 512)]
    rows = Runner(cpu, TimerConfig(budget_s=0.5), budget=budget).run(Plan(tasks))
    print(json.dumps({"memory": budget.record(), "peak": memory.resident_peak_bytes(),
                      "rows": [[m.op, m.working_set_bytes, m.status, m.reason] for m in rows]}))
""")
PLAN_BUDGET = 448 * MiB


@session_run
def small_plan_run(env):
    """Return what the PLAN process printed: bf16 reads and writes of 16, 160 and 512 MiB under
    a 448 MiB budget."""
    out = subprocess.run([sys.executable, "-c", PLAN, str(PLAN_BUDGET)], cwd=ROOT, capture_output=True,
                         text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_predicted_peak_bounds_the_measured_one(small_plan_run):
    """The 160 MiB read's fp32 norm copy (320 MiB) and the 160 MiB write's random pool were
    memory no term counted: the process peaked above the peak its budget predicted."""
    mem, rows = small_plan_run["memory"], small_plan_run["rows"]
    assert mem["budget_bytes"] == PLAN_BUDGET and mem["base_bytes"] > 0
    assert mem["measured_peak_bytes"] == small_plan_run["peak"]
    ran = [r for r in rows if r[2] == "ok"]
    assert {(op, ws // MiB) for op, ws, _, _ in ran} == {("stream.read", 16), ("stream.read", 160),
                                                         ("stream.write", 16), ("stream.write", 160)}
    # the peak beyond the base is within what the budget predicted, and that within the budget
    assert mem["measured_peak_bytes"] - mem["base_bytes"] <= mem["predicted_peak_bytes"] - mem["base_bytes"]
    assert mem["predicted_peak_bytes"] - mem["base_bytes"] <= PLAN_BUDGET
    # the 512 MiB points do not fit: skipped before their inputs, the budget's reason
    big = [r for r in rows if r[1] >= 512 * MiB]
    assert len(big) == 2 and all(r[2] == "skipped" and r[3].startswith(memory.SKIP_PREFIX) for r in big)
