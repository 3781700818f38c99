"""torch._int_mm's layout forms (bench/ops/gemm.py INT8_FORMS): each is exact against the
float64 product on the CPU, including shapes that are not multiples of anything, and the
CPU launcher uses the TN form (B column-major). A GPU run times the forms and keeps the
faster (checked by the gpu-marked test)."""
import pytest
import torch

from bench.measure.gate import poison
from bench.measure.registry import LaunchContext
from bench.ops import gemm as g


@pytest.mark.parametrize("form", g.INT8_FORMS)
@pytest.mark.parametrize("shape", [(32, 48, 64), (17, 24, 40), (100, 72, 88)])
def test_every_int8_form_is_exact(form, shape):
    x = g.make_inputs({"dtype": "int8", "shape": shape}, "cpu")
    ref = g.reference(x)
    poison(x, ["c"])
    out = g.int8_form(x, form)()
    assert out is x["c"] or out.data_ptr() == x["c"].data_ptr()
    assert torch.equal(x["c"].double(), ref)


def test_forms_differ_only_in_the_layout_of_b():
    x = g.make_inputs({"dtype": "int8", "shape": (32, 48, 64)}, "cpu")
    assert x["b"].stride() == (1, 64)           # TN: the (N, K) weight seen as (K, N)
    assert "TN" in g.int8_form(x, "TN").detail and "column-major" in g.int8_form(x, "TN").detail
    assert "row-major" in g.int8_form(x, "NN").detail


def test_cpu_launcher_uses_the_tn_form():
    point = {"dtype": "int8", "shape": (32, 48, 64)}
    x = g.make_inputs(point, "cpu")
    fn = g._torch_launcher(x, LaunchContext(point))
    assert fn.detail.startswith("torch._int_mm, TN") and fn.form == "TN" and not hasattr(fn, "compared")
    fn()
    assert torch.equal(x["c"].double(), g.reference(x))


@pytest.mark.gpu
def test_gpu_launcher_times_both_forms_and_keeps_one():
    point = {"dtype": "int8", "shape": (1024, 1024, 1024)}
    x = g.make_inputs(point, "cuda")
    fn = g._torch_launcher(x, LaunchContext(point))
    assert fn.compared == ("TN", "NN") and fn.form in fn.compared and fn.detail.startswith(f"torch._int_mm, {fn.form}")
    fn()
    torch.cuda.synchronize()
    assert torch.equal(x["c"].double(), g.reference(x))


def test_cpu_launcher_keeps_the_layout_the_point_stores():
    # the search's "nn" layout stores B (K, N) row-major: the CPU launcher uses it as stored
    point = {"dtype": "int8", "shape": (32, 48, 64), "layout": "nn"}
    x = g.make_inputs(point, "cpu")
    fn = g._torch_launcher(x, LaunchContext(point))
    assert fn.detail.startswith("torch._int_mm, NN")
    fn()
    assert torch.equal(x["c"].double(), g.reference(x))
