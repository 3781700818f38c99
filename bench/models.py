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
"""
from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path

from bench.registry import REGISTRY, load_all

MODELS = Path(__file__).with_name("models.json")


class ModelError(ValueError):
    """An unknown model name or impossible model settings."""


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
        raise ModelError(f"unknown model '{name}': choose from {', '.join(models)}.")
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
        raise ModelError(f"batch, prompt and context must be positive (got {batch}, {prompt}, {context}).")
    h, hd = cfg.hidden, cfg.head_dim
    qkv_n = (cfg.heads + 2 * cfg.kv_heads) * hd
    ops = []
    for phase, tokens in (("prefill", batch * prompt), ("decode", batch)):
        g = lambda name, m, n, k, count=1, per_layer=True, phase=phase: LayerOp(  # noqa: E731
            phase, name, "model.gemm", {"dtype": dtype, "shape": (m, n, k)}, count, per_layer)
        if phase == "prefill":
            attn = LayerOp(phase, "attn", "model.attention.prefill",
                           {"dtype": dtype, "causal": True, "head_dim": hd, "heads": (batch, cfg.heads, cfg.kv_heads), "seq": prompt})
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


def _register_model_ops():
    """Register model.* ops: the GEMM and attention ops without sweeps, for arbitrary shapes."""
    load_all()
    if "model.gemm" in REGISTRY.ops:
        return
    for src, dst in (("gemm.square", "model.gemm"), ("attention.prefill", "model.attention.prefill"),
                     ("attention.decode", "model.attention.decode")):
        op = REGISTRY.ops[src]
        REGISTRY.add_op(dataclasses.replace(op, name=dst, family="model", axes=(),
                                            doc=f"{op.doc} (a model's own shapes)"))
        for impl in REGISTRY.impls_of(src):
            if impl.name != "numpy":
                REGISTRY.add_impl(dataclasses.replace(impl, op=dst))


def key(lo: LayerOp) -> tuple:
    """Return the identity of a measured point: its op and point."""
    return (lo.op, repr(lo.point))


def plan(op_lists):
    """Return the Plan measuring every distinct op of the given LayerOp lists once: prefill
    timed warm, decode cold (a decode step reads each layer's weights from memory once)."""
    from bench.runner import Plan, Task
    _register_model_ops()
    tasks, seen = [], set()
    for ops in op_lists:
        for lo in ops:
            if key(lo) not in seen:
                seen.add(key(lo))
                tasks.append(Task(REGISTRY.ops[lo.op], lo.point, tuple(REGISTRY.impls_of(lo.op)),
                                  ("cold",) if lo.phase == "decode" else ("warm",)))
    return Plan(tasks)


def best_times(measurements) -> dict:
    """Return key -> {median_s, impl, reason}: the fastest successful impl of each point, or
    the reason none succeeded."""
    best = {}
    for m in measurements:
        k = (m.op, repr(m.point))
        cur = best.get(k)
        if m.status == "ok" and (cur is None or cur["median_s"] is None or m.median_s < cur["median_s"]):
            best[k] = {"median_s": m.median_s, "impl": m.impl, "reason": ""}
        elif cur is None:
            best[k] = {"median_s": None, "impl": m.impl, "reason": m.reason}
    return best


def predict(ops: list[LayerOp], rows, roofs, layers: int) -> dict:
    """Return per phase: each op's bound and measured time and the totals per layer, per
    step and in tokens per second. rows: the run's measurement rows (point_id keyed)."""
    from roofs.model import Roofline
    model = Roofline(roofs)
    out = {}
    for phase in ("prefill", "decode"):
        lines, totals = [], {"bound_layer_s": 0.0, "measured_layer_s": 0.0, "bound_head_s": 0.0, "measured_head_s": 0.0}
        missing = []
        for lo in [o for o in ops if o.phase == phase]:
            r = rows[lo]
            op = REGISTRY.ops[lo.op]
            flops, nbytes = op.flops(lo.point), op.bytes(lo.point)
            att = model.attainable_gflops(flops / nbytes, lo.point["dtype"])
            bound = flops / (att * 1e9) if att and math.isfinite(att) else None
            measured = r["median_s"] if r else None
            if measured is None:
                missing.append(lo.name)
            key = "layer" if lo.per_layer else "head"
            totals[f"bound_{key}_s"] += lo.count * (bound or 0.0)
            totals[f"measured_{key}_s"] += lo.count * (measured or 0.0)
            size, shape = op.describe(lo.point)
            lines.append({"op": lo.name, "shape": shape, "count": lo.count, "gflop": flops / 1e9,
                          "mbytes": nbytes / 1e6, "intensity": flops / nbytes,
                          "bound_us": bound * 1e6 if bound else None,
                          "measured_us": measured * 1e6 if measured else None,
                          "pct_of_attainable": 100 * bound / measured if bound and measured else None,
                          "impl": r["impl"] if r else "", "note": r["reason"] if r and not measured else ""})
        step_bound = layers * totals["bound_layer_s"] + totals["bound_head_s"]
        step_measured = layers * totals["measured_layer_s"] + totals["measured_head_s"]
        tokens = next(o for o in ops if o.phase == phase and o.name == "qkv").point["shape"][0]
        out[phase] = {"ops": lines, **totals, "step_bound_s": step_bound,
                      "step_measured_s": step_measured if not missing else None,
                      "tokens_per_step": tokens,
                      "tokens_per_s_bound": tokens / step_bound if step_bound else None,
                      "tokens_per_s_measured": tokens / step_measured if step_measured and not missing else None,
                      "missing": missing}
    return out
