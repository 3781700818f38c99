"""A tiny op family for testing the runner and results without real kernels."""
import torch

from bench.measure.registry import Axis, Impl, Op, Registry


def toy_registry(impls=None, working_set=lambda p: p["n"] * 4, skip=None) -> Registry:
    """Return a Registry with op 'toy.double' (b = 2 a over n fp32 elements; bytes 8n,
    flops n) and the given impls (name -> launcher); by default one correct torch impl."""
    reg = Registry()
    reg.add_op(Op(
        name="toy.double", family="toy", doc="b = 2 a",
        axes=(Axis("dtype", ("float32",)), Axis("n", (1000, 4000), quick_values=(1000,))),
        make_inputs=lambda p, d: {"a": torch.randn(p["n"], device=d), "b": torch.empty(p["n"], device=d)},
        reference=lambda x: 2 * x["a"].double(),
        flops=lambda p: p["n"], bytes=lambda p: 8 * p["n"], working_set=working_set,
        describe=lambda p: (p["n"], f"({p['n']},)"), tolerance=lambda p: 1e-6,
        outputs=("b",), skip=skip))
    impls = impls or {"torch": lambda x, ctx: (lambda: torch.mul(x["a"], 2, out=x["b"]))}
    for name, launcher in impls.items():
        reg.add_impl(Impl("toy.double", name, "triton" if name.startswith("triton") else "torch", launcher))
    return reg
