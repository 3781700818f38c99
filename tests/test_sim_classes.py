"""The simulator's kernel classes (roofs/sim/machines.py): each stream kernel's from its row of
bench/ops/stream.py (its arrays read and written), so a new row has one without an edit here,
and an op the simulator has no class for is an error that names it."""
import pytest

from bench.measure.registry import load_all
from roofs.sim.machines import CLASS_DIRECTION, KERNEL_CLASS, kernel_class, stream_class


def test_the_classes_follow_each_kernels_arrays():
    # (arrays read, arrays written): copy and scale (1, 1), add and triad (2, 1), read (1, 0), write (0, 1)
    assert [stream_class(r, w) for r, w in ((1, 1), (2, 1), (1, 0), (0, 1))] == ["copy", "triad", "read", "write"]
    # an in-place a += b + s c reads a, b and c and writes a: a mix writing 1/4 of its bytes
    assert stream_class(3, 1) == "triad" and CLASS_DIRECTION["triad"] == "copy"
    assert {op: KERNEL_CLASS[op] for op in ("stream.copy", "stream.scale", "stream.add", "stream.triad",
                                            "stream.read", "stream.write", "stream.reread", "probe.l1")} == {
        "stream.copy": "copy", "stream.scale": "copy", "stream.add": "triad", "stream.triad": "triad",
        "stream.read": "read", "stream.write": "write", "stream.reread": "reread", "probe.l1": "probe"}


def test_every_registered_stream_op_has_a_class():
    ops = [op for op in load_all().ops.values() if op.family == "stream"]
    assert len(ops) >= 7 and all(kernel_class(op.name) in CLASS_DIRECTION for op in ops)


def test_an_op_without_a_class_is_refused():
    with pytest.raises(ValueError) as e:
        kernel_class("stream.unknown")
    assert "stream.unknown" in str(e.value)
