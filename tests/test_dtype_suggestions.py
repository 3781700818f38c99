"""--dtype's suggestions (bench.run.options.check_dtypes): a name none of the selected ops has is
refused in one sentence offering the precisions they run on the device (precisions_here: what the
static skip rules leave, so no tf32, mxfp4 or nvfp4 on a CPU), each in one spelling (fp32, not
float32 beside it), on this CPU and on a datasheet H200 (`--dry-run --device-spec h200`)."""
import re
from argparse import Namespace

import pytest

from bench.aot.predict import spec_device
from bench.hw import detect
from bench.measure.registry import load_all
from bench.run import options as opt
from bench.util import did_you_mean, dtype_spellings, precision_name

GPU_ONLY = {"tf32", "mxfp4", "nvfp4"}  # their Precision rows in bench/ops/gemm.py need a GPU (and fp4 a Blackwell)


def args(dtype: str, quick: bool = False) -> Namespace:
    return Namespace(dtype=[dtype], only=None, quick=quick)


@pytest.fixture
def registry(monkeypatch):
    """The registry, and a user's environment: without Triton's interpreter (the tests' default on a
    CPU: under it a CPU runs the Triton impls, GPU-only precisions too, for correctness only)."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    return load_all()


@pytest.mark.parametrize("quick", [False, True])
def test_a_cpus_precisions_are_its_own_in_one_spelling(registry, quick):
    cpu = detect.resolve("cpu")
    here = opt.precisions_here(registry, None, cpu, quick)
    axes = {precision_name(d) for d in opt.dtypes_of(registry, None, cpu, quick)}
    assert here and len(here) == len(set(here)) and all(precision_name(p) == p for p in here)
    assert "fp32" in here and "float32" not in here and not GPU_ONLY & set(here)
    assert GPU_ONLY <= axes and set(here) <= axes  # the axes list them; the skip rules leave them out here


@pytest.mark.parametrize("quick", [False, True])
def test_an_h200s_precisions_are_hoppers(registry, quick):
    h200 = spec_device("h200")
    here = opt.precisions_here(registry, None, h200, quick)
    assert len(here) == len(set(here)) and all(precision_name(p) == p for p in here)
    assert {"fp32", "tf32", "bf16", "fp16", "fp8e4m3", "fp8e5m2", "int8"} <= set(here)
    assert not {"mxfp4", "nvfp4"} & set(here)  # block-scaled fp4 is Blackwell's (sm_100)


@pytest.mark.parametrize("device,typo,meant", [("cpu", "flaot32", "fp32"), ("cpu", "tf33", None),
                                               ("h200", "tf33", "tf32"), ("h200", "bfloat61", "bf16")])
def test_an_unknown_dtype_is_offered_the_devices_own_precisions(registry, device, typo, meant):
    dev = detect.resolve("cpu") if device == "cpu" else spec_device(device)
    here = opt.precisions_here(registry, None, dev, False)
    with pytest.raises(opt.OptionError) as e:
        opt.check_dtypes(args(typo), registry, dev)
    text = str(e.value)
    assert text.count("\n") == 0 and text.endswith(f" run {', '.join(here)}.")  # one sentence; precisions_here's list
    suggested = re.findall(r"'([^']+)'\?", text)
    assert suggested == ([meant] if meant else [])


def test_did_you_mean_names_the_choice_as_shown():
    spellings = [s for p in ("fp32", "bf16") for s in dtype_spellings(p)]
    assert "'float32'" in did_you_mean("flaot32", spellings) and "'fp32'" not in did_you_mean("flaot32", spellings)
    assert "'fp32'" in did_you_mean("flaot32", spellings, precision_name)
    assert did_you_mean("int8", spellings, precision_name) == ""


def test_either_spelling_still_selects_a_dtype(registry):
    a = args("float32")
    opt.check_dtypes(a, registry, detect.resolve("cpu"))
    assert a.dtype == ["float32", "fp32"]


def test_a_datasheet_dry_run_refuses_an_unknown_dtype(cli_in_process, tmp_path):
    r = cli_in_process("--dry-run", "--device-spec", "h200", "--dtype", "fp33", "--out", tmp_path)
    assert r.returncode == 2 and r.stdout == "" and r.stderr.count("\n") == 1, r.stderr
