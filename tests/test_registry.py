import pytest
import torch
from helpers import toy_registry

from bench import precisions
from bench.measure.registry import REGISTRY, Axis, Impl, RegistryError, geometric, load_all
from bench.ops.stream import KINDS as STREAM_KINDS


def test_duplicate_op_and_impl_ids_are_errors():
    reg = toy_registry()
    with pytest.raises(RegistryError) as e:
        reg.add_op(reg.ops["toy.double"])
    assert e.value.code == "op_registered"
    with pytest.raises(RegistryError) as e:
        reg.add_impl(Impl("toy.double", "torch", "torch", lambda x, ctx: None))
    assert e.value.code == "impl_registered"
    with pytest.raises(RegistryError) as e:
        reg.add_impl(Impl("toy.nothing", "torch", "torch", lambda x, ctx: None))
    assert e.value.code == "op_unregistered"


def test_points_are_the_product_of_axes_and_quick_values_apply():
    op = toy_registry().ops["toy.double"]
    assert op.points(None) == [{"dtype": "float32", "n": 1000}, {"dtype": "float32", "n": 4000}]
    assert op.points(None, quick=True) == [{"dtype": "float32", "n": 1000}]
    assert Axis("x", sweep=lambda d, q: [d, q]).expand("dev", True) == ("dev", True)


def test_select_by_family_op_impl_id_and_impl_name():
    reg = load_all()
    assert {op.family for op, _ in reg.select(["stream"])} == {"stream"}
    [(op, impls)] = reg.select(["stream.copy/triton"])
    assert op.name == "stream.copy" and [i.name for i in impls] == ["triton"]
    by_name = reg.select(["torch"])
    with_torch = [op.name for op in reg.ordered() if f"{op.name}/torch" in reg.impls]
    assert [op.name for op, _ in by_name] == with_torch
    assert all(i.name == "torch" for _, impls in by_name for i in impls)
    assert reg.ordered()[0].name == "stream.copy"  # bandwidth roofs are measured first, whatever was imported first
    assert len(reg.select(None)) == len(reg.ops)


def test_unknown_name_is_one_sentence_listing_what_exists():
    with pytest.raises(RegistryError) as e:
        load_all().select(["stream.cpy"])
    msg = str(e.value)
    assert "stream.cpy" in msg and "stream.copy" in msg and "triton" in msg and "\n" not in msg


def test_geometric_sizes():
    assert geometric(4096, 32768, 1) == [4096, 8192, 16384, 32768]
    two = geometric(16384, 65536, 2)
    assert two[0] == 16384 and two[-1] == 65536 and len(two) == 5
    assert all(v % 4096 == 0 for v in two)


def test_every_family_registers_its_impls():
    load_all()
    stream = [i for i in REGISTRY.impls.values() if i.op.startswith("stream.")]
    gemm = [i for i in REGISTRY.impls.values() if i.op.startswith("gemm.")]
    # each stream kernel and reread: torch + triton; torch + numpy + triton, and triton_tma on the square
    # sweep; one triton impl for each other GEMM op of the precisions' table (gemm.fp4's)
    others = {p.gemm for p in precisions.ROWS if p.gemm} - {"gemm"}
    assert len(stream) == (len(STREAM_KINDS) + 1) * 2 and len(gemm) == 3 * 3 + 1 + len(others)
    assert {i.op for i in gemm if i.op in others} == others
    assert {i.op for i in stream} == {f"stream.{k.name}" for k in STREAM_KINDS} | {"stream.reread"}
    assert all(i.op in REGISTRY.ops for i in REGISTRY.impls.values())


def test_launchers_are_lazy_about_allocation():
    # a launcher returns a zero-argument callable; calling the launcher must not run the kernel
    reg = toy_registry()
    x = {"a": torch.ones(4), "b": torch.zeros(4)}
    fn = reg.impls["toy.double/torch"].launcher(x, None)
    assert (x["b"] == 0).all()
    fn()
    assert (x["b"] == 2).all()
