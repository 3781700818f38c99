"""Whole models on the roofline: a transformer's real per-layer operator shapes, for
prefill and for decode, measured with the suite's kernels and summed into a time per
layer, per step and a bound on tokens per second.

Presets are data (bench/models.json). For one decoder layer with T tokens in flight
(prefill: T = batch x prompt; decode: T = batch):

    qkv      GEMM  M = T, N = (heads + 2 kv_heads) head_dim, K = hidden
    attn     prefill: causal fused attention over the prompt; decode: one token per
             sequence over a KV cache of `context` tokens
    o        GEMM  M = T, N = hidden, K = heads head_dim
    gate_up  GEMM  M = T, N = 2 ffn, K = hidden        (gate and up fused)
    down     GEMM  M = T, N = hidden, K = ffn
and once per step, lm_head: GEMM M = batch (the last token of each sequence), N = vocab,
K = hidden. A mixture of experts runs gate_up and down once per active expert:
active = experts in prefill, min(experts, T top_k) in decode, each over
M = ceil(T top_k / active) tokens (an even split of the routed tokens).

Each op's predicted time is its roofline bound, flops / min(P, BW x I), with the roofs of a
run folder or measured on the spot; its measured time is the best median over the impls.
An op faster than its bound even at its p80 time, and a phase whose measured tokens per
second beat the bound, are flagged with the likely causes.

The model.* ops that measure a model's own shapes are registered explicitly, by
register_model_ops(), never as a side effect of planning.
"""
from __future__ import annotations

import dataclasses
import json
import math
import re
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from bench.hw import detect
from bench.hw import device as devmod
from bench.measure.registry import REGISTRY, load_all
from bench.measure.runner import Plan, Task
from bench.measure.timing import STRETCH_CALLS, timer_config
from bench.paths import CHECKOUT, existing
from bench.results import ResultsError, utc_stamp
from bench.run import given_roofs, session
from bench.run import options as opt
from bench.run.options import Parser, refuse
from bench.run.session import execute, failing, finish, mark_failed, run_meta
from bench.util import Refusal, did_you_mean, fmt_bytes, fmt_num, plural, precision_name
from roofs.analysis.bounds import bound_at, point_bound
from roofs.analysis.roofline import Roofline

MODELS = Path(__file__).with_name("models.json")


class ModelError(Refusal):
    """An unknown model name or impossible model settings: one sentence, and its code
    (unknown_model, not_positive, ops_unregistered, no_batch)."""


@dataclass(frozen=True)
class ModelConfig:
    name: str
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    layers: int
    vocab: int
    experts: int
    top_k: int
    source: str = ""


def load_models(path: Path = MODELS) -> dict[str, ModelConfig]:
    return {k: ModelConfig(name=k, **v) for k, v in json.loads(Path(path).read_text())["models"].items()}


def get_model(name: str) -> ModelConfig:
    models = load_models()
    if name not in models:
        raise ModelError(f"unknown model '{name}'{did_you_mean(name, models)}: choose from {', '.join(models)}.",
                         "unknown_model")
    return models[name]


@dataclass(frozen=True, eq=False)  # hashed by identity: its point is a dict
class LayerOp:
    phase: str          # "prefill" or "decode"
    name: str           # "qkv", "attn", "o", "gate_up", "down", "lm_head"
    op: str             # the registry op that measures it
    point: dict
    count: int = 1      # times per layer (active experts), or per step for lm_head
    per_layer: bool = True


def layer_ops(cfg: ModelConfig, batch: int, prompt: int, context: int, dtype: str = "bf16") -> list[LayerOp]:
    """Return every operator of one prefill step and one decode step (see the module docstring)."""
    if min(batch, prompt, context) < 1:
        raise ModelError(f"batch, prompt and context must be positive (got {batch}, {prompt}, {context}).",
                         "not_positive")
    h, hd = cfg.hidden, cfg.head_dim
    qkv_n = (cfg.heads + 2 * cfg.kv_heads) * hd
    ops = []
    for phase, tokens in (("prefill", batch * prompt), ("decode", batch)):
        g = lambda name, m, n, k, count=1, per_layer=True, phase=phase: LayerOp(  # noqa: E731
            phase, name, "model.gemm", {"dtype": dtype, "shape": (m, n, k)}, count, per_layer)
        if phase == "prefill":
            attn = LayerOp(phase, "attn", "model.attention.prefill",
                           {"dtype": dtype, "causal": True, "head_dim": hd,
                            "heads": (batch, cfg.heads, cfg.kv_heads), "seq": prompt})
            active = cfg.experts
        else:
            attn = LayerOp(phase, "attn", "model.attention.decode",
                           {"dtype": dtype, "length": context, "batch": batch, "heads": (cfg.heads, cfg.kv_heads, hd)})
            active = min(cfg.experts, tokens * cfg.top_k)
        per_expert = math.ceil(tokens * cfg.top_k / active) if cfg.experts > 1 else tokens
        ops += [g("qkv", tokens, qkv_n, h), attn, g("o", tokens, h, cfg.heads * hd),
                g("gate_up", per_expert, 2 * cfg.ffn, h, active), g("down", per_expert, h, cfg.ffn, active),
                g("lm_head", batch, cfg.vocab, h, 1, False)]
    return ops


MODEL_OPS = (("gemm.square", "model.gemm"), ("attention.prefill", "model.attention.prefill"),
             ("attention.decode", "model.attention.decode"))


def register_model_ops() -> None:
    """Register the model.* ops in the registry (after every family: load_all): the GEMM and
    attention ops without sweeps, for a model's own shapes, with their impls but numpy.
    Called explicitly by the model command (and the tests) before plan() and place_model();
    a second call changes nothing."""
    load_all()
    if MODEL_OPS[0][1] in REGISTRY.ops:
        return
    for src, dst in MODEL_OPS:
        op = REGISTRY.ops[src]
        REGISTRY.add_op(dataclasses.replace(op, name=dst, family="model", axes=(),
                                            doc=f"{op.doc} (a model's own shapes)"))
        for impl in REGISTRY.impls_of(src):
            if impl.name != "numpy":
                REGISTRY.add_impl(dataclasses.replace(impl, op=dst))


def _require_model_ops() -> None:
    if any(dst not in REGISTRY.ops for _, dst in MODEL_OPS):
        raise ModelError("the model.* ops are not registered: call bench.models.register_model_ops() first.",
                         "ops_unregistered")


def key(lo: LayerOp) -> tuple:
    """Return the identity of a measured point: its op and point."""
    return (lo.op, repr(lo.point))


def plan(op_lists):
    """Return the Plan measuring every distinct op of the given LayerOp lists once: prefill
    timed warm, decode cold (a decode step reads each layer's weights from memory once)."""
    _require_model_ops()
    tasks, seen = [], set()
    for ops in op_lists:
        for lo in ops:
            if key(lo) not in seen:
                seen.add(key(lo))
                tasks.append(Task(REGISTRY.ops[lo.op], lo.point, tuple(REGISTRY.impls_of(lo.op)),
                                  ("cold",) if lo.phase == "decode" else ("warm",)))
    return Plan(tasks)


def best_times(measurements) -> dict:
    """Return key -> {median_s, p80_s, impl, reason}: the fastest successful impl of each
    point, or the reason none succeeded."""
    best = {}
    for m in measurements:
        k = (m.op, repr(m.point))
        cur = best.get(k)
        if m.status == "ok" and (cur is None or cur["median_s"] is None or m.median_s < cur["median_s"]):
            best[k] = {"median_s": m.median_s, "p80_s": m._stat(80), "impl": m.impl, "reason": ""}
        elif cur is None:
            best[k] = {"median_s": None, "p80_s": None, "impl": m.impl, "reason": m.reason}
    return best


def beats_bound(lo: LayerOp, working_set: int, llc_bytes: int | None, roofs_from: str) -> tuple[list[str], str]:
    """Return the likely causes of an op measured faster than its roofline bound even at its
    slow end (the p80 time), as (codes, flag): a cache-resident working set ("cache_resident"),
    roofs lower than this machine reaches now ("roofs_low"), or a count that is too high
    ("count_high"), as roofs/bounds.above_roof_causes does for a run; flag is their sentence."""
    causes = []
    if llc_bytes and working_set <= 2 * llc_bytes and lo.phase == "prefill":
        causes.append(("cache_resident", f"its working set ({fmt_bytes(working_set)}) fits beside the "
                       f"{fmt_bytes(llc_bytes)} last-level cache and prefill is timed warm, so the memory roof does "
                       "not bound it"))
    causes.append(("roofs_low", f"the roofs {roofs_from or 'given'} are lower than this machine reached now "
                   "(measured under other load, at another clock, or on another machine)"))
    causes.append(("count_high", "a FLOP or byte count that is too high"))
    return [c for c, _ in causes], "faster than its roofline bound even at p80: " + "; ".join(t for _, t in causes)


LAYER_SUMS = ("complete", "incomplete", "none")  # how many per-layer ops a phase's measured sum holds


def place_model(ops: list[LayerOp], rows, roofs, layers: int, llc_bytes: int | None = None, roofs_from: str = "",
            caches=(), memory_level: str = "dram") -> dict:
    """Return per phase: each op's bound and measured time (flagged when it beats the bound
    even at its p80 time, with its `causes`' codes, beats_bound) and the totals per layer, per
    step and in tokens per second, flagged when the measured rate beats the bound (`flag_code`
    "faster_than_roofs", else ""); `layer_sum` says which of LAYER_SUMS the measured per-layer
    sum is. rows: LayerOp -> best_times() entry.
    Each op is bounded by the roof of the memory level its bytes cross (ARCHITECTURE.md,
    rule 12: prefill is timed warm, decode cold), given the device's caches
    ([(name, total bytes)], innermost first); without caches, by the off-chip roof."""
    _require_model_ops()
    model = Roofline(roofs)
    model_top = model.at("high")
    out = {}
    for phase in ("prefill", "decode"):
        lines, totals = [], {"bound_layer_s": 0.0, "measured_layer_s": 0.0, "bound_head_s": 0.0, "measured_head_s": 0.0}
        missing, unbounded = [], {}   # ops without a time; missing roof -> ops without a bound
        counts = {"ops": 0, "measured": 0, "bounded": 0}  # per-layer ops, and how many have a time and a bound
        for lo in [o for o in ops if o.phase == phase]:
            r = rows[lo]
            op = REGISTRY.ops[lo.op]
            flops, nbytes = op.flops(lo.point), op.bytes(lo.point)
            mode = "cold" if lo.phase == "decode" else "warm"
            level, note, att, _ = point_bound(model, op.working_set(lo.point), mode, flops / nbytes, lo.point["dtype"],
                                              list(caches), memory_level)
            bound = flops / (att * 1e9) if att and math.isfinite(att) else None
            top = bound_at(model_top, level, lo.point["dtype"], flops / nbytes) if bound else None
            bound_top = flops / (top[0] * 1e9) if top and top[0] else bound  # its band's top (rule 17)
            if bound is None:
                unbounded.setdefault(note.split(":")[0] + " roof", []).append(lo.name)
            measured = r["median_s"] if r else None
            slow_end = (r.get("p80_s") or measured) if r else None
            if measured is None:
                missing.append(lo.name)
            key = "layer" if lo.per_layer else "head"
            totals[f"bound_{key}_s"] += lo.count * (bound or 0.0)
            totals[f"measured_{key}_s"] += lo.count * (measured or 0.0)
            if key == "layer":  # how complete each per-layer sum is
                counts["ops"] += 1
                counts["measured"] += measured is not None
                counts["bounded"] += bound is not None
            size, shape = op.describe(lo.point)
            causes, flag = (beats_bound(lo, op.working_set(lo.point), llc_bytes, roofs_from)
                            if bound and slow_end and slow_end < bound_top else ([], ""))
            lines.append({"op": lo.name, "shape": shape, "count": lo.count, "gflop": flops / 1e9,
                          "mbytes": nbytes / 1e6, "intensity": flops / nbytes,
                          "bound_us": bound * 1e6 if bound else None,
                          "measured_us": measured * 1e6 if measured else None,
                          "pct_of_attainable": 100 * bound / measured if bound and measured else None,
                          "impl": r["impl"] if r else "",
                          "note": (r["reason"] if r and not measured else "") or note,  # a missing roof, named
                          "flag": flag, "causes": causes})
        # a sum that leaves out an op is no bound on the step: say which roof is missing instead
        step_bound = None if unbounded else layers * totals["bound_layer_s"] + totals["bound_head_s"]
        step_measured = layers * totals["measured_layer_s"] + totals["measured_head_s"]
        tokens = next(o for o in ops if o.phase == phase and o.name == "qkv").point["shape"][0]
        rate_bound = tokens / step_bound if step_bound else None
        rate = tokens / step_measured if step_measured and not missing else None
        fast = [line["op"] for line in lines if line["flag"]]
        flag = ""
        faster = bool(rate and rate_bound and rate > rate_bound)
        if faster:
            flag = (f"measured {rate / rate_bound - 1:.1%} faster than the roofs allow"
                    + (f": {', '.join(fast)} beat their bounds even at p80 (causes in the op table's flag)" if fast
                       else ", within the ops' own spread (no op beats its bound at p80)"))
        # what the roofs it has do bound: the bounded ops' sum, a lower bound on the step's time
        partial = (layers * totals["bound_layer_s"] + totals["bound_head_s"]) if unbounded else None
        out[phase] = {"ops": lines, **totals, "step_bound_s": step_bound, "step_bound_partial_s": partial or None,
                      "layer_ops": counts["ops"], "layer_measured": counts["measured"],
                      "layer_bounded": counts["bounded"],
                      "layer_sum": ("none" if counts["measured"] == 0 else
                                    "incomplete" if counts["measured"] < counts["ops"] else "complete"),
                      "step_measured_s": step_measured if not missing else None,
                      "tokens_per_step": tokens, "tokens_per_s_bound": rate_bound, "tokens_per_s_measured": rate,
                      "missing": missing, "unbounded": unbounded, "flag": flag,
                      "flag_code": "faster_than_roofs" if faster else ""}
    return out


def layers_per_batch(cfg: ModelConfig, batches, prompt: int, context: int, dtype: str) -> dict:
    """Return batch -> layer_ops(); raises ModelError for impossible settings (before anything runs)."""
    if not batches:
        raise ModelError("give at least one batch size (--batch 1,8,64).", "no_batch")
    return {b: layer_ops(cfg, b, prompt, context, dtype) for b in batches}


def _ms(seconds) -> str:
    return f"{fmt_num(seconds * 1e3)} ms"


def _no_bound(r: dict) -> str:
    """Return which roofs are missing for a phase's bound, and the ops they leave unbounded."""
    return "; ".join(f"the {roof} is missing ({', '.join(ops)} have no bound)" for roof, ops in r["unbounded"].items())


def _totals_text(cfg: ModelConfig, r: dict) -> str:
    """Return a phase's totals: per layer and per step, each sum saying how many of the
    layer's ops it holds ("3 of 5 layer ops measured") when it is incomplete, never an
    incomplete sum alone; a phase with an op unbounded gets the bound of the ops the roofs
    do bound, as a lower bound on the step; then tokens per second."""
    n, got, bounded = r.get("layer_ops", 0), r.get("layer_measured", 0), r.get("layer_bounded", 0)
    missing = r["missing"]
    if r["layer_sum"] == "none":
        measured_layer = f"no layer op measured (none of {n})"
    elif r["layer_sum"] == "incomplete":
        measured_layer = f"measured {_ms(r['measured_layer_s'])} for {got} of {n} layer ops (incomplete: no time for " \
                         f"{', '.join(missing)})"
    else:
        measured_layer = f"measured {_ms(r['measured_layer_s'])}"
    bound_layer = (f"bound {_ms(r['bound_layer_s'])}, " if bounded == n else
                   f"bound {_ms(r['bound_layer_s'])} for the {bounded} of {n} layer ops the roofs bound, " if bounded
                   else "")
    step = r["step_bound_s"]
    partial = r.get("step_bound_partial_s")
    step_bound = (f"bound {_ms(step)}, " if step is not None else
                  f"at least {_ms(partial)} by the ops the roofs bound, " if partial else "")
    step_measured = (f"measured {_ms(r['step_measured_s'])}" if r["step_measured_s"]
                     else f"measured incomplete (no time for {', '.join(missing)})" if missing else "measured nothing")
    rate = ("at most " + fmt_num(r["tokens_per_s_bound"]) + " by the roofs" if r["tokens_per_s_bound"] else
            f"at most {fmt_num(r['tokens_per_step'] / partial)} by the ops the roofs bound" if partial else
            "no bound by the roofs")
    return (f"per layer: {bound_layer}{measured_layer}; per step ({cfg.layers} layers + lm_head): {step_bound}"
            f"{step_measured}\ntokens/s: {rate}"
            + (f", {fmt_num(r['tokens_per_s_measured'])} measured" if r["tokens_per_s_measured"] else ""))


def cut_advice(note: str) -> str:
    """Return the option that measures an op cut short (rule 7): --op-cap with seconds for
    STRETCH_CALLS of the calls its note predicts, rounded up, else --budget."""
    m = re.search(r"predicted ([\d.e+-]+) s per call", note)
    if not m:
        return "give it a larger --budget"
    need = math.ceil(STRETCH_CALLS * float(m.group(1)) + 1)
    return f"give --op-cap {need} (seconds an op may take) to measure it"


def summary_text(cfg: ModelConfig, prompt: int, context: int, dtype: str, report: dict, warnings=()) -> str:
    """Return the model command's text (model.md): the warnings first (roofs of another
    machine), then per batch and phase each op's bound and measured time, the totals per
    layer and per step, tokens per second, and every flag. A phase whose ops lack a roof
    says which roof is missing instead of a bound."""
    out = [f"# {cfg.name}: {cfg.layers} layers, hidden {cfg.hidden}, "
           f"{cfg.heads}/{cfg.kv_heads} heads of {cfg.head_dim}, "
           f"FFN {cfg.ffn}" + (f", {cfg.experts} experts (top {cfg.top_k})" if cfg.experts > 1 else "")
           + f"; prompt {prompt}, context {context}, {dtype}\n"]
    out += [f"WARNING: {w}" for w in warnings]
    for b, phases in report.items():
        for phase, r in phases.items():
            t = pd.DataFrame(r["ops"])[["op", "shape", "count", "gflop", "mbytes", "intensity", "bound_us",
                                        "measured_us", "pct_of_attainable", "impl"]]
            out.append(f"\n## batch {b}, {phase} ({plural(r['tokens_per_step'], 'token')} per step)\n")
            out.append(t.to_string(index=False, float_format=fmt_num))
            unbounded = r.get("unbounded") or {}
            out.append("\n" + _totals_text(cfg, r))
            if unbounded:
                out.append(f"NO BOUND: {_no_bound(r)}.")
            if r["flag"]:
                out.append(f"FLAG: {r['flag']}.")
            out += [f"FLAG {line['op']}: {line['flag']}." for line in r["ops"] if line["flag"]]
            out += [f"CUT {line['op']}: {line['note']}; {cut_advice(line['note'])}." for line in r["ops"]
                    if line["measured_us"] is None and str(line["note"]).startswith("cut short")]
    return "\n".join(out) + "\n"


OP_CAP_S = 10.0  # seconds an op's point may stretch to so that its predicted calls fit (model --op-cap)


def measure_model(cfg: ModelConfig, per_batch: dict, device, roofs, roofs_from: str, budget_s: float,
                  out: Path, options: dict, prompt: int, context: int, dtype: str,
                  warnings=(), op_cap_s: float = OP_CAP_S) -> tuple[str, Path, str]:
    """Measure every distinct op of per_batch (layers_per_batch) on device into a new run
    folder out/model-<name>-<device>-<time>/, place it under roofs, write model.json and
    model.md (warnings, such as roofs of another machine, first), finish the folder; return
    (status, run folder, the model's text). Each op's point has budget_s, stretched up to
    op_cap_s where its predicted calls need more (rule 7, bench.measure.timing.STRETCH_CALLS);
    an op still cut is named in the summary with the --op-cap that would measure it. Return
    (status, run folder, the model's text). An error after the measuring marks the folder
    failed and propagates."""
    register_model_ops()
    run_dir = Path(out) / f"model-{cfg.name}-{device.slug}-{utc_stamp()}"
    timer = timer_config(False, budget_s, warmup_s=0.02, stretch_s=max(op_cap_s, budget_s))
    meta = run_meta(device, options, "model", timer, model=dataclasses.asdict(cfg), roofs_from=roofs_from,
                    base_roofs=[r.to_dict() for r in roofs if r.source == "measured"])
    status, measured = execute(run_dir, meta, device, plan(per_batch.values()), timer)
    with failing(run_dir):  # a model that cannot be placed marks its folder failed, never complete
        best = best_times(measured)
        report = {b: place_model(ops, {lo: best.get(key(lo)) for lo in ops}, roofs, cfg.layers, device.llc_bytes,
                                 roofs_from, [(c.name, c.total_bytes) for c in device.caches], device.memory_level)
                  for b, ops in per_batch.items()}
        (run_dir / "model.json").write_text(json.dumps({"model": dataclasses.asdict(cfg), "prompt": prompt,
                                                        "context": context, "roofs_from": roofs_from,
                                                        "warnings": list(warnings), "per_batch": report},
                                                       indent=1, default=str))
        text = summary_text(cfg, prompt, context, dtype, report, warnings)
        (run_dir / "model.md").write_text(text)
        problems = finish(run_dir)
    if problems:
        status = f"failed: finishing the folder: {problems[0]}"
        mark_failed(run_dir, status.removeprefix("failed: "))
    return status, run_dir, text


def model_main(argv) -> int:
    """python run_bench.py model NAME --batch 1,8,64 --prompt 2048 --context 8192 [--roofs RUN_DIR]."""
    p = Parser(prog="run_bench.py model", description="a model's prefill and decode on the roofline")
    p.add_argument("name", help="a preset: " + ", ".join(load_models()))
    p.add_argument("--batch", type=opt.whole_numbers, default=[1], help="comma-separated batch sizes (default 1)")
    p.add_argument("--prompt", type=opt.whole_number, default=2048, help="prompt tokens per sequence (prefill)")
    p.add_argument("--context", type=opt.whole_number, default=8192, help="KV cache length during decode")
    p.add_argument("--dtype", default="bf16", type=precision_name, choices=["bf16", "fp16"],
                   help="bf16 (bfloat16) or fp16 (float16)")
    p.add_argument("--roofs", type=existing, help="a run folder whose roofs to use (default: measure them now, quick)")
    p.add_argument("--device")
    p.add_argument("--budget", type=opt.seconds, default=0.2, help="seconds per point")
    p.add_argument("--op-cap", type=opt.seconds, default=OP_CAP_S,
                   help="seconds an op's point may stretch to so that its predicted calls fit "
                   f"(default {OP_CAP_S:g})")
    p.add_argument("--out", type=Path, default=CHECKOUT / "results")
    args = p.parse_args(argv)
    try:
        opt.writable_folder(args.out, "--out")
        cfg = get_model(args.name)
        per_batch = layers_per_batch(cfg, args.batch, args.prompt, args.context, args.dtype)
        device = detect.resolve(args.device)
        with warnings.catch_warnings():  # another machine's roofs are printed once, below, with the others
            warnings.simplefilter("ignore", given_roofs.ForeignRoofsWarning)
            roofs = given_roofs.roofs_from(args.roofs, device.torch_device) if args.roofs else None
        warned = [roofs.foreign] if roofs is not None and roofs.foreign else []
    except (ModelError, devmod.DeviceError, ResultsError, opt.OptionError) as e:
        return refuse(e)
    if roofs is None:
        print("roofbench: measuring this device's roofs first (quick; pass --roofs RUN_DIR to reuse a run's)")
        with warnings.catch_warnings():  # its RoofWarnings are printed once, below, with the others
            warnings.simplefilter("ignore", given_roofs.RoofWarning)
            roofs = given_roofs.quick_roofs(device.torch_device)
        given = "measured on the spot before it (api.quick_roofs)"
        warned = [f"quick_roofs set no {m}" for m in roofs.missing]
    else:
        given = f"of {args.roofs} (given with --roofs)"
    for w in warned:
        print(f"roofbench: warning: {w}", file=sys.stderr)
    status, run_dir, text = measure_model(cfg, per_batch, device, roofs, given, args.budget, args.out,
                                          session.options_record(args), args.prompt, args.context, args.dtype,
                                          warned, args.op_cap)
    # each warning once: printed above, before the measuring; model.md keeps them at its top
    print("\n".join(line for line in text.splitlines() if not (line.startswith("WARNING: ") and line[9:] in warned)))
    print(f"\nresults: {run_dir}")
    return session.exit_code(status)
