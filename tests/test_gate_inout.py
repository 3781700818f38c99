"""An in-out array (read and written, as nstream's a in a += b + s c) through the gate
(bench/measure/gate.py): it is never poisoned, the reference made before the gate meets one
call on the inputs it was made from, however many calls a tuner made first, and the timed
calls start from the original values."""
import torch

from bench.hw import detect
from bench.measure.gate import Snapshot, check, verifier
from bench.measure.registry import Axis, Impl, Op, Registry
from bench.measure.runner import Runner, make_plan
from bench.measure.timing import TimerConfig

CPU = detect.resolve("cpu")


def inputs(n=1000):
    g = torch.Generator().manual_seed(1)
    return {"a": torch.randn(n, generator=g), "b": torch.randn(n, generator=g)}


def accumulate(x):
    return lambda: x["a"].add_(x["b"])   # a += b, in place: a is read and written


def test_one_call_on_the_original_in_out_passes_and_leaves_it_as_it_was():
    x = inputs()
    a0 = x["a"].clone()
    ref = x["a"].double() + x["b"].double()
    got = check(lambda: accumulate(x), ref, 1e-6, CPU, x, (), inouts=("a",))
    assert got.passed and got.error <= 1e-7
    assert torch.equal(x["a"], a0)   # restored for the timed calls


def test_a_launcher_that_calls_its_kernel_first_is_checked_on_the_original_values():
    # a tuner calls the kernel before the gate's call (here twice): without the restore the
    # checked call would compute a0 + 3 b against the reference a0 + b and fail
    x = inputs()
    ref = x["a"].double() + x["b"].double()

    def tuning_launch():
        fn = accumulate(x)
        fn(), fn()
        return fn
    assert check(tuning_launch, ref, 1e-6, CPU, x, (), inouts=("a",)).passed
    x = inputs()
    assert not check(tuning_launch, x["a"].double() + x["b"].double(), 1e-6, CPU, x, ()).passed


def test_poisoning_an_in_out_as_an_output_destroys_its_input():
    # the reason an in-out is its own role: poisoned like an output, a += b is NaN everywhere
    x = inputs()
    got = check(lambda: accumulate(x), x["a"].double() + x["b"].double(), 1e-6, CPU, x, ("a",))
    assert not got.passed and torch.isnan(x["a"]).all()


def test_an_in_out_the_kernel_leaves_unchanged_fails():
    x = inputs()
    got = check(lambda: (lambda: x["a"]), x["a"].double() + x["b"].double(), 1e-6, CPU, x, (), inouts=("a",))
    assert not got.passed and got.error > 0.5


def test_the_verifier_checks_each_candidate_on_the_original_values():
    x = inputs()
    a0 = x["a"].clone()
    verify = verifier(x["a"].double() + x["b"].double(), 1e-6, CPU, x, (), inouts=("a",))
    fn = accumulate(x)
    assert verify(fn) is None and verify(fn) is None and verify(fn) is None
    assert torch.equal(x["a"], a0)
    wrong = verifier(x["a"].double() + x["b"].double(), 1e-6, CPU, x, (), inouts=())
    assert wrong(fn) is None and wrong(fn) is not None   # no snapshot: the second call starts from a0 + b


def test_a_snapshot_is_shared_and_released():
    x = inputs()
    a0 = x["a"].clone()
    saved = Snapshot(x, ("a", "s"))   # a name that is no tensor is no array to keep
    assert list(saved.saved) == ["a"]
    x["a"].fill_(7.0)
    saved.restore()
    assert torch.equal(x["a"], a0)
    saved.release()
    x["a"].fill_(7.0)
    saved.restore()
    assert (x["a"] == 7.0).all()


def test_the_runner_gates_and_times_an_in_place_op():
    # a += b, from a launcher that calls its kernel once first (as a tuner does): the runner
    # hands the op's in-outs to the gate, so the row passes with no error and is timed
    reg = Registry()
    reg.add_op(Op(
        name="toy.accumulate", family="toy", doc="a += b",
        axes=(Axis("dtype", ("float32",)), Axis("n", (4096,))),
        make_inputs=lambda p, d: inputs(p["n"]), reference=lambda x: x["a"].double() + x["b"].double(),
        flops=lambda p: p["n"], bytes=lambda p: 12 * p["n"], working_set=lambda p: 8 * p["n"],
        describe=lambda p: (p["n"], f"({p['n']},)"), tolerance=lambda p: 1e-6, inouts=("a",),
        write_bytes=lambda p: 4 * p["n"]))

    def launcher(x, ctx):
        fn = accumulate(x)
        fn()
        return fn
    reg.add_impl(Impl("toy.accumulate", "torch", "torch", launcher))
    ms = Runner(CPU, TimerConfig(budget_s=0.02, warmup_s=0.001, min_samples=3)).run(make_plan(reg, CPU, quick=True))
    assert [m.status for m in ms] == ["ok"] and ms[0].error <= 1e-7
