"""The dry run on the new datasheet parts (--device-spec b200, gb200, mi300x, mi355x): the
right part is found, AMD parts plan as AMD GPUs, fp4 points run only where a unit exists,
and an fp4 call is timed at its own roof (hand-worked)."""
import pytest

from bench.aot import predict as pr
from bench.measure.registry import load_all
from bench.measure.runner import make_plan
from bench.measure.timing import TimerConfig

REG = load_all()


def test_spec_names_pick_one_part():
    assert pr.spec_device("b200").name == "NVIDIA B200"             # not "GB200" as well
    assert pr.spec_device("gb200").name == "NVIDIA GB200 (per GPU)"
    mi = pr.spec_device("mi300x")
    assert (mi.name, mi.vendor, mi.compute_units, mi.compute_unit_kind) == ("AMD Instinct MI300X", "amd", 304, "CUs")
    assert mi.llc.name == "l3" and mi.llc_bytes == 256 * 2**20        # the Infinity Cache
    assert pr.spec_device("h200").vendor == "nvidia"


def test_fp4_call_at_its_own_roof():
    b200 = pr.spec_device("b200")
    rates = pr.device_rates(b200)
    op = REG.ops["gemm.fp4"]
    # 2 x 8192^3 FLOP at 80% of 9 PFLOP/s = 0.1527 ms; its bytes (8192^2 x (1 + 1/16) + 2 x
    # 8192^2 = 205.5 MB at 80% of 8 TB/s = 0.032 ms): compute wins
    t = pr.call_seconds(op, {"dtype": "mxfp4", "shape": (8192, 8192, 8192)}, "warm", b200, rates)
    assert t == pytest.approx(2 * 8192**3 / (9e15 * 0.8))
    # a part without an fp32 figure (GB200) plans fp32 at its fp64 peak, not at 100 GFLOP/s
    gb = pr.device_rates(pr.spec_device("gb200"))
    assert gb.peak("fp32") == 45e12


@pytest.mark.parametrize("spec,runs", [("b200", {"mxfp4", "nvfp4"}), ("mi355x", {"mxfp4"}),
                                       ("mi300x", set()), ("h200", set())])
def test_fp4_rows_run_only_where_a_unit_exists(spec, runs):
    device = pr.spec_device(spec)
    plan = make_plan(REG, device, only=["gemm.fp4"], quick=True)
    planned = {t.point["dtype"] for t in plan.tasks if not t.op.skip(t.point, device)}
    assert planned == runs
    pred = pr.predict(plan, device, TimerConfig(), quick=True)
    assert pred.skipped == 2 * (2 - len(runs))   # two quick shapes per format skipped


def test_amd_parts_precompile_and_know_their_gfx():
    # an AMD part's gfx target picks its aot plan: the dry run charges a pool, as on NVIDIA;
    # an arch aot lacks compiles at first launch, one after another: the compiles' sum
    import dataclasses
    mi = pr.spec_device("mi300x")
    assert mi.extra["gfx"] == "gfx942" and pr.spec_device("mi355x").extra["gfx"] == "gfx950"
    assert "gfx" not in pr.spec_device("h200").extra
    plan = make_plan(REG, mi, only=["stream.copy", "gemm.square"], quick=True)
    pred = pr.predict(plan, mi, TimerConfig(), quick=True)
    assert pred.compiles > 0 and pred.workers == pr.HOST_CORES and pred.load_s > 0
    old = dataclasses.replace(mi, extra={"spec": "MI250X", "gfx": "gfx90a"})
    lazy = pr.predict(plan, old, TimerConfig(), quick=True)
    rows, counts = pr.row_seconds(plan, old, TimerConfig(), True)
    assert lazy.workers == 1 and lazy.load_s == 0 and lazy.compile_s == pytest.approx(sum(counts["compile_list"]))
    # an arch without a precompile compiles lazily: the text has a compile line and no pool's loading line
    assert pr.lazy_compiles(old) and not pr.lazy_compiles(mi)
    heads = [line.split()[0] for line in pr.prediction_text(lazy, old, True).splitlines() if line.startswith("  ")]
    assert "compile" in heads and "loading" not in heads
    # gfx950 has no tf32: the GEMM's tf32 points are skipped before running
    mi355 = pr.spec_device("mi355x")
    full = make_plan(REG, mi355, only=["gemm.square"], quick=False)
    tf32 = [t for t in full.tasks if t.point["dtype"] == "tf32"]
    assert tf32 and all(t.op.skip(t.point, mi355) for t in tf32)
