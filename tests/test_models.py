"""Model presets: derived shapes against hand-worked numbers, bad names, and the model
command end to end on the CPU with the tiny preset and a recorded run's roofs."""
import json
from pathlib import Path

import pytest

from bench import models as m

DATA = Path(__file__).parent / "data"


def by(ops, phase):
    return {o.name: o for o in ops if o.phase == phase}


def test_presets_include_gqa_moe_and_sizes():
    presets = m.load_models()
    assert len([p for p in presets.values() if p.name != "tiny"]) >= 3
    assert any(p.kv_heads < p.heads for p in presets.values())           # grouped-query attention
    assert any(p.experts > 1 for p in presets.values() if p.name != "tiny")  # a mixture of experts
    assert all(p.source for p in presets.values())


def test_llama_3_8b_one_layer_hand_worked():
    ops = m.layer_ops(m.get_model("llama-3-8b"), batch=2, prompt=1024, context=8192)
    pre, dec = by(ops, "prefill"), by(ops, "decode")
    assert pre["qkv"].point["shape"] == (2048, (32 + 2 * 8) * 128, 4096)   # (6144 = 4096 + 2 x 1024)
    assert pre["o"].point["shape"] == (2048, 4096, 4096)
    assert pre["gate_up"].point["shape"] == (2048, 28672, 4096) and pre["gate_up"].count == 1
    assert pre["down"].point["shape"] == (2048, 4096, 14336)
    assert pre["attn"].point == {"dtype": "bf16", "causal": True, "head_dim": 128, "heads": (2, 32, 8), "seq": 1024}
    assert pre["lm_head"].point["shape"] == (2, 128256, 4096) and not pre["lm_head"].per_layer
    assert dec["qkv"].point["shape"] == (2, 6144, 4096)
    assert dec["attn"].point == {"dtype": "bf16", "length": 8192, "batch": 2, "heads": (32, 8, 128)}


def test_mixtral_experts_hand_worked():
    ops = m.layer_ops(m.get_model("mixtral-8x7b"), batch=1, prompt=2048, context=4096)
    pre, dec = by(ops, "prefill"), by(ops, "decode")
    # prefill: 2048 tokens x top 2 over 8 experts = 512 tokens each, all 8 active
    assert pre["gate_up"].point["shape"] == (512, 2 * 14336, 4096) and pre["gate_up"].count == 8
    # decode at batch 1: the token's 2 experts, one row each
    assert dec["down"].point["shape"] == (1, 4096, 14336) and dec["down"].count == 2


def test_unknown_model_and_bad_settings_are_one_sentence():
    with pytest.raises(m.ModelError) as e:
        m.get_model("llama-9")
    assert e.value.code == "unknown_model" and "'llama-9'" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(m.ModelError) as e:
        m.layer_ops(m.get_model("tiny"), 0, 10, 10)
    assert e.value.code == "not_positive" and "\n" not in str(e.value)


def test_prediction_sums_bounds_per_layer_and_step():
    from roofs.analysis.roofline import Roof
    cfg = m.get_model("tiny")
    ops = m.layer_ops(cfg, 1, 16, 32)
    roofs = [Roof("bandwidth", "dram", 10.0, "GB/s"), Roof("compute", "bf16", 100.0, "GFLOP/s")]
    m.register_model_ops()
    rows = {o: {"median_s": 1e-3, "impl": "x", "reason": ""} for o in ops}
    pred = m.place_model(ops, rows, roofs, cfg.layers)["decode"]
    from bench.measure.registry import REGISTRY
    expect = 0.0
    for o in [o for o in ops if o.phase == "decode" and o.per_layer]:
        f, b = REGISTRY.ops[o.op].flops(o.point), REGISTRY.ops[o.op].bytes(o.point)
        expect += o.count * f / (min(100.0, 10.0 * f / b) * 1e9)
    assert pred["bound_layer_s"] == pytest.approx(expect)
    assert pred["measured_layer_s"] == pytest.approx(
        1e-3 * sum(o.count for o in ops if o.phase == "decode" and o.per_layer))
    assert pred["tokens_per_s_measured"] == pytest.approx(1 / pred["step_measured_s"])


def test_ops_and_steps_faster_than_their_bounds_are_flagged_with_causes():
    """A line like "at most 2,831 tokens/s by the roofs, 2,878 measured" with no flag."""
    from roofs.analysis.roofline import Roof
    cfg = m.get_model("tiny")
    ops = m.layer_ops(cfg, 1, 16, 32)
    m.register_model_ops()
    roofs = [Roof("bandwidth", "dram", 10.0, "GB/s"), Roof("compute", "bf16", 100.0, "GFLOP/s")]
    fast = {o: {"median_s": 1e-9, "p80_s": 1e-9, "impl": "x", "reason": ""} for o in ops}
    pred = m.place_model(ops, fast, roofs, cfg.layers, llc_bytes=32 * 2**20, roofs_from="of RUN")
    pre = pred["prefill"]
    assert pre["tokens_per_s_measured"] > pre["tokens_per_s_bound"] and pre["flag_code"] == "faster_than_roofs"
    qkv = next(line for line in pre["ops"] if line["op"] == "qkv")
    # its working set fits beside the 32 MiB cache (prefill is timed warm); the roofs it names are the given ones
    assert qkv["causes"] == ["cache_resident", "roofs_low", "count_high"] and "of RUN" in qkv["flag"]
    # decode is timed cold: a cache holds no cause of it
    assert all(line["causes"] == ["roofs_low", "count_high"] for line in pred["decode"]["ops"] if line["flag"])
    text = m.summary_text(cfg, 16, 32, "bf16", {1: pred})
    assert "FLAG: measured" in text and "FLAG qkv: " in text
    slow = {o: {"median_s": 1.0, "p80_s": 1.0, "impl": "x", "reason": ""} for o in ops}
    calm = m.place_model(ops, slow, roofs, cfg.layers)
    assert not any(p["flag"] or p["flag_code"] or any(line["flag"] or line["causes"] for line in p["ops"])
                   for p in calm.values())


@pytest.mark.slow
def test_model_command_end_to_end(tmp_path, cli_in_process):
    # in this process (conftest.py); tests/test_missing_roof.py runs the model command in one of its own
    r = cli_in_process("model", "tiny", "--batch", "1,2", "--prompt", "64", "--context", "256",
                       "--roofs", DATA / "run_a", "--budget", "0.02", "--out", tmp_path)
    assert r.returncode == 0, r.stderr
    [run_dir] = list(tmp_path.iterdir())
    report = json.loads((run_dir / "model.json").read_text())
    for b in ("1", "2"):
        for phase in ("prefill", "decode"):
            p = report["per_batch"][b][phase]
            assert p["tokens_per_s_bound"] > 0 and p["step_bound_s"] > 0
            assert {o["op"] for o in p["ops"]} == {"qkv", "attn", "o", "gate_up", "down", "lm_head"}
    assert "tokens/s: at most" in r.stdout and (run_dir / "roofline.png").exists()
    roofs = json.loads((run_dir / "roofs.json").read_text())["roofs"]
    assert any(x["name"] == "dram" and x["source"] == "measured" for x in roofs)  # the roofs it was placed under
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["run_kind"] == "model" and meta["command"].endswith("--budget 0.02 --out " + str(tmp_path))
    assert meta["options"]["batch"] == [1, 2] and meta["options"]["roofs"] == str(DATA / "run_a")
    md = (run_dir / "report.md").read_text()
    assert str(DATA / "run_a") in md and str(DATA / "run_a") in meta["roofs_from"]  # the roofs it was placed under
    # it uses the roofs it was given: no section on levels of its own sweep
    from bench.results import load_run
    from roofs.reports.report import NO_ROOF_LEVELS, sections
    assert NO_ROOF_LEVELS not in [title for title, _ in sections(load_run(run_dir))]
    assert "bandwidth.png" not in md  # no stream points: no bandwidth chart in the report


def test_model_command_unknown_name(cli_in_process):
    r = cli_in_process("model", "gpt-7")
    assert r.returncode == 2 and r.code == "unknown_model" and "'gpt-7'" in r.stderr


def test_model_ops_are_bounded_by_the_level_their_bytes_cross():
    """The model command applies the boundary rule: warm prefill ops that fit in a
    cache take that cache's roof, cold decode ops the off-chip roof; an op whose level has no
    roof is bounded by the nearest level with one (roofs.analysis.bounds: no op is left without
    a bound while a level has a roof), and with no bandwidth roof at all it has none."""
    from bench.measure.registry import REGISTRY
    from roofs.analysis.roofline import Roof
    cfg = m.get_model("tiny")
    ops = m.layer_ops(cfg, 1, 16, 32)
    m.register_model_ops()
    dram = Roof("bandwidth", "dram", 10.0, "GB/s")
    l2 = Roof("bandwidth", "l2", 40.0, "GB/s")
    roofs = [dram, l2, Roof("compute", "bf16", 1e6, "GFLOP/s")]
    caches = [("l2", 64 * 2**20)]   # the tiny model's working sets all fit
    rows = {o: {"median_s": 1.0, "p80_s": 1.0, "impl": "x", "reason": ""} for o in ops}
    pred = m.place_model(ops, rows, roofs, cfg.layers, caches=caches, memory_level="dram")
    for phase, bw in (("prefill", 40.0), ("decode", 10.0)):
        for o, line in zip([o for o in ops if o.phase == phase], pred[phase]["ops"]):
            f, b = REGISTRY.ops[o.op].flops(o.point), REGISTRY.ops[o.op].bytes(o.point)
            assert line["bound_us"] == pytest.approx(f / (bw * f / b * 1e9) * 1e6), (phase, line["op"])
    # no L2 roof: no level inside L2 has one, so DRAM's, the nearest level with one, bounds the
    # warm prefill ops as it bounds decode's
    bare = m.place_model(ops, rows, [dram, roofs[2]], cfg.layers, caches=caches, memory_level="dram")
    for o, line in zip([o for o in ops if o.phase == "prefill"], bare["prefill"]["ops"]):
        f, b = REGISTRY.ops[o.op].flops(o.point), REGISTRY.ops[o.op].bytes(o.point)
        assert line["bound_us"] == pytest.approx(f / (10.0 * f / b * 1e9) * 1e6), line["op"]
    # no bandwidth roof at all: no op has a bound
    none = m.place_model(ops, rows, [roofs[2]], cfg.layers, caches=caches, memory_level="dram")
    assert all(line["bound_us"] is None for phase in ("prefill", "decode") for line in none[phase]["ops"])


def test_incomplete_sums_say_so_and_the_roofs_it_has_still_bound():
    """No per-layer "measured" total of an incomplete set without "3 of 5
    layer ops", no "measured 0 ms" for nothing measured; a missing DRAM roof leaves the ops
    that cross DRAM bounded by the level inside it, and with no bandwidth roof at all the step
    has no bound and the text says which roof is missing."""
    from roofs.analysis.roofline import Roof
    cfg = m.get_model("tiny")
    ops = m.layer_ops(cfg, 1, 16, 32)
    m.register_model_ops()
    roofs = [Roof("bandwidth", "dram", 10.0, "GB/s"), Roof("compute", "bf16", 100.0, "GFLOP/s")]
    layer = [o.name for o in ops if o.phase == "prefill" and o.per_layer]
    assert len(layer) == 5
    rows = {o: ({"median_s": 1e-3, "p80_s": 1e-3, "impl": "x", "reason": ""} if o.name not in ("gate_up", "down")
                else None) for o in ops}
    pre = m.place_model(ops, rows, roofs, cfg.layers)["prefill"]
    assert (pre["layer_ops"], pre["layer_measured"], pre["layer_bounded"]) == (5, 3, 5)
    assert pre["layer_sum"] == "incomplete" and pre["missing"] == ["gate_up", "down"]
    text = m.summary_text(cfg, 16, 32, "bf16", {1: {"prefill": pre}})
    assert "3 of 5" in text and "gate_up, down" in text  # the sum names what it holds and what it lacks
    nothing = m.place_model(ops, {o: None for o in ops}, roofs, cfg.layers)["prefill"]
    assert nothing["layer_sum"] == "none" and nothing["step_measured_s"] is None
    text = m.summary_text(cfg, 16, 32, "bf16", {1: {"prefill": nothing}})
    assert "measured 0 ms" not in text
    # an L2 roof only (no DRAM) of 64 KiB: prefill's attn (24 KiB) and o (144 KiB, under 4x it) are served by L2;
    # qkv, gate_up, down and lm_head cross DRAM, which has no roof: L2's, never slower, bounds them too
    l2_only = [Roof("bandwidth", "l2", 100.0, "GB/s"), Roof("compute", "bf16", 100.0, "GFLOP/s")]
    full = {o: {"median_s": 1.0, "p80_s": 1.0, "impl": "x", "reason": ""} for o in ops}
    pre = m.place_model(ops, full, l2_only, cfg.layers, caches=[("l2", 64 * 2**10)])["prefill"]
    assert all(line["bound_us"] for line in pre["ops"]) and pre["unbounded"] == {} and pre["layer_sum"] == "complete"
    assert pre["layer_bounded"] == 5 and pre["step_bound_s"] == pytest.approx(
        cfg.layers * pre["bound_layer_s"] + pre["bound_head_s"])
    # no bandwidth roof: no op has a bound, and the text names the missing roof
    compute_only = [Roof("compute", "bf16", 100.0, "GFLOP/s")]
    pre = m.place_model(ops, full, compute_only, cfg.layers)["prefill"]
    assert pre["step_bound_s"] is None and pre["layer_bounded"] == 0
    assert pre["unbounded"] == {"dram roof": layer + ["lm_head"]}
    text = m.summary_text(cfg, 16, 32, "bf16", {1: {"prefill": pre}})
    assert "NO BOUND: " in text and "dram roof" in text


@pytest.mark.parametrize("predicted,budget", [
    (0.05, 0.2),            # fits the budget: unchanged
    (1.2, 3 * 1.2 + 0.02),  # 3 calls and the warm-up: 3.62 s, under the cap
    (5.0, 10.0),            # 15.02 s needed: the cap
])
def test_an_ops_budget_stretches_to_its_predicted_calls_within_the_cap(predicted, budget):
    """Rule 7 with the model command's stretch: budget = min(cap, max(budget, 3 x predicted + warm-up))."""
    from bench.hw import detect
    from bench.measure.registry import load_all
    from bench.measure.runner import Runner
    from bench.measure.timing import timer_config
    op = load_all().ops["gemm.square"]
    runner = Runner(detect.resolve("cpu"), timer_config(False, 0.2, warmup_s=0.02, stretch_s=10.0))
    assert runner.stretched_budget(op, predicted) == pytest.approx(max(budget, op.budget_floor(False)))
    plain = Runner(detect.resolve("cpu"), timer_config(False, 0.2, warmup_s=0.02))
    assert plain.stretched_budget(op, predicted) == pytest.approx(plain.timer_for(op).budget_s)


def test_an_op_still_cut_names_the_option_that_measures_it():
    note = "cut short: predicted 12 s per call (from 0.5 s at a smaller size) exceeds the 10 s point budget"
    assert "--op-cap 37 " in m.cut_advice(note)   # ceil(3 x 12 + 1)
    advice = m.cut_advice("cut short: slow")
    assert "--budget" in advice and "--op-cap" not in advice
