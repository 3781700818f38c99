"""The public API: measuring a torch function and a Triton kernel (under the interpreter),
the decorator's sweep, bad input, and adding points to a recorded run."""
import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
import torch
from conftest import INTERPRETING

from bench import api
from bench.results import METHOD_VERSION, load_run
from roofs.analysis.roofline import Roof

ROOFS = [Roof("bandwidth", "dram", 50.0, "GB/s"), Roof("bandwidth", "l1", 300.0, "GB/s"),
         Roof("compute", "fp32", 200.0, "GFLOP/s")]
DATA = Path(__file__).parent / "data"


def test_measure_a_torch_function_and_place_it():
    a, b, out = torch.randn(64, 64), torch.randn(64, 64), torch.empty(64, 64)
    r = api.measure(lambda: torch.mm(a, b, out=out), flops=2 * 64**3, bytes=3 * 64 * 64 * 4, name="mm64",
                    precision="fp32", roofs=ROOFS, device="cpu", budget_s=0.05, reference=a.double() @ b.double())
    assert r.status == "ok" and r.samples_s and r.error < 1e-5 and r.timer == "perf_counter_ns"
    assert r.intensity == pytest.approx(2 * 64 / 12)                     # 2 n^3 / (3 n^2 4)
    # 48 KiB, warm: the suite's boundary rule puts it in L1 on any CPU (under 4x its L1)
    assert r.boundary == "l1"
    assert r.attainable_gflops == pytest.approx(min(200.0, 300.0 * r.intensity))
    assert r.pct_of_attainable == pytest.approx(100 * r.gflops / r.attainable_gflops)
    assert r.attainable_gflops == 200.0 and r.bound == "compute"  # 300 GB/s x 10.7 FLOP/B > 200
    # the same point with no L1 roof: no level inside L1 has one, so the nearest level with one
    # (DRAM, the only one) bounds it, and its note names the missing l1 roof (never silently)
    import dataclasses
    bare = dataclasses.replace(r, roofs=(ROOFS[0], ROOFS[2]))
    assert bare.boundary == "dram" and bare.attainable_gflops == pytest.approx(min(200.0, 50.0 * r.intensity))
    assert bare.bound_note.code == "nearest_level" and "l1" in bare.bound_note and bare.bound_note.endswith("dram")
    # no bandwidth roof at all: no bound
    none = dataclasses.replace(r, roofs=(ROOFS[2],))
    assert none.attainable_gflops is None and none.boundary == "" and none.bound == "unknown"
    assert r.tflops == pytest.approx(r.gflops / 1000)
    assert r.gbps == pytest.approx(3 * 64 * 64 * 4 / r.median_s / 1e9)


def test_counts_may_be_functions_of_the_shape():
    x = torch.randn(1000)
    r = api.measure(lambda: x * 2, flops=lambda n: n, bytes=lambda n: 8 * n, shape=1000, device="cpu", budget_s=0.02)
    assert (r.flops, r.bytes, r.intensity) == (1000, 8000, 0.125)


@pytest.mark.skipif(not INTERPRETING, reason="checks the interpreter path")
def test_triton_kernel_under_the_interpreter_is_checked_not_timed():
    from kernels import stream
    a = torch.randn(5000)
    b = torch.empty(5000)
    r = api.measure(lambda: stream.copy(a, b, block=1024), flops=5000, bytes=2 * 5000 * 4, name="copy",
                    backend="triton", roofs=ROOFS, device="cpu", reference=a)
    assert r.status == "skipped" and "interpreter" in r.reason and r.samples_s == () and r.error == 0.0
    # 40 KB warm is L1's on any CPU: bounded by the L1 roof given
    assert r.intensity == 5000 / 40000 and r.attainable_gflops == 300.0 * 0.125 and r.pct_of_attainable is None


def test_wrong_result_is_not_timed():
    x = torch.ones(10)
    r = api.measure(lambda: x * 3, flops=10, bytes=80, reference=x * 2, device="cpu")
    assert r.status == "error" and "wrong result" in r.reason and r.samples_s == ()


@pytest.mark.parametrize("kw,expect", [
    ({"flops": 0, "bytes": 8}, "flops of kernel 'k' must be a positive number (got 0)"),
    ({"flops": -5, "bytes": 8}, "must be a positive number (got -5)"),
    ({"flops": 1, "bytes": 0}, "bytes of kernel 'k' must be a positive number"),
    ({"flops": 1, "bytes": lambda s: float("nan")}, "must be a positive number (got nan)"),
])
def test_bad_counts_are_one_sentence(kw, expect):
    with pytest.raises(api.APIError) as e:
        api.measure(lambda: None, name="k", device="cpu", **kw)
    assert expect in str(e.value) and "\n" not in str(e.value)


def test_callable_that_raises_is_one_sentence():
    def boom():
        raise RuntimeError("CUDA error: illegal memory access\ntrace...")
    with pytest.raises(api.APIError) as e:
        api.measure(boom, flops=1, bytes=1, name="boom", device="cpu")
    # one sentence: the kernel's name and its error's first line, not the trace below it
    assert e.value.code == "kernel_raised" and "\n" not in str(e.value) and "trace" not in str(e.value)
    assert "'boom'" in str(e.value) and "RuntimeError" in str(e.value)


def test_decorator_sweep_keeps_going_past_a_failing_shape():
    @api.kernel(flops=lambda n: abs(n), bytes=lambda n: 8 * abs(n), shapes=[100, -1, 1000],
                make_inputs=lambda n, dev: (torch.randn(abs(n), device=dev), n))
    def scale(x, n):
        if n < 0:
            raise ValueError("negative size")
        return x * 2

    assert torch.equal(scale(torch.ones(2), 2), torch.full((2,), 2.0))  # still callable as itself
    rs = scale.sweep(device="cpu", roofs=ROOFS, budget_s=0.02)
    assert [r.status for r in rs] == ["ok", "error", "ok"] and rs[0].name == "scale"
    assert "negative size" in rs[1].reason and rs[2].flops == 1000


DIRECTED = [Roof("bandwidth", "l1", 300.0, "GB/s"), Roof("bandwidth", "l1.read", 300.0, "GB/s"),
            Roof("bandwidth", "l1.write", 100.0, "GB/s"), Roof("compute", "fp32", 1e6, "GFLOP/s")]


@pytest.mark.parametrize("kw,bw,roof", [
    ({}, 300.0, "l1"),                                             # unknown: the level's best, and the note says so
    ({"direction": "read"}, 300.0, "l1.read"),
    ({"direction": "write"}, 100.0, "l1.write"),
    ({"read_bytes": 3000}, 4000 / (3000 / 300 + 1000 / 100), "l1.read+write"),   # 4000 / (R/BWr + W/BWw) = 200
    ({"write_bytes": lambda n: n // 4}, 200.0, "l1.read+write"),   # a function of the shape, as the counts
])
def test_measure_takes_the_direction_and_gets_the_direction_bound(kw, bw, roof):
    """The bound of rule 12, as the suite's own kernels get it (hand-worked:
    4,000 bytes, 3,000 read at 300 GB/s and 1,000 written at 100 GB/s take 20 ns: 200 GB/s)."""
    x = torch.randn(250)
    r = api.measure(lambda: x * 2, flops=1, bytes=4000, shape=4000, roofs=DIRECTED, device="cpu", budget_s=0.02, **kw)
    assert r.boundary == "l1"
    assert r.attainable_gflops == pytest.approx(bw * 1 / 4000)
    assert r._bound()[3].extra["bound_roof"] == roof
    assert (r.bound_note != "") == (not kw)  # a note only where the level's best roof stands in
    if kw:
        assert r.read_bytes + r.write_bytes == 4000
        assert r.measurement().row()["read_bytes"] == r.read_bytes


@pytest.mark.parametrize("kw,expect", [
    ({"read_bytes": 5000}, "read_bytes 5000 and write_bytes -1000 of kernel 'k' do not add up to its bytes 4000"),
    ({"direction": "sideways"}, "unknown direction 'sideways' for kernel 'k': use read, write or copy"),
])
def test_bad_directions_are_one_sentence(kw, expect):
    with pytest.raises(api.APIError) as e:
        api.measure(lambda: None, name="k", flops=1, bytes=4000, device="cpu", **kw)
    assert expect in str(e.value) and "\n" not in str(e.value)


def test_errors_in_count_functions_name_the_function_and_the_point():
    def flops_of(shape):
        m, n, k = shape  # a shape typo: two numbers given
        return 2 * m * n * k
    with pytest.raises(api.APIError) as e:
        api.measure(lambda: None, name="mm", flops=flops_of, bytes=8, shape=(64, 64), device="cpu")
    assert e.value.code == "count_raised"
    assert all(w in str(e.value) for w in ("flops_of", "'mm'", "ValueError", "(64, 64)"))

    @api.kernel(flops=1, bytes=8, shapes=[4, "4x"], make_inputs=lambda n, dev: (torch.randn(n, device=dev),))
    def double(x):
        return x * 2
    with pytest.raises(api.APIError) as e:
        double.sweep(device="cpu", budget_s=0.02)
    assert e.value.code == "input_raised" and all(w in str(e.value) for w in ("make_inputs", "'double'", "'4x'"))


def test_a_run_folder_given_for_roofs_is_read_and_anything_else_refused():
    a = torch.randn(64)
    r = api.measure(lambda: a * 2, flops=64, bytes=512, precision="fp32", roofs=DATA / "run_a", device="cpu",
                    budget_s=0.02)
    assert r.roofs and r.roofs == tuple(api.roofs_from(DATA / "run_a"))
    assert api.measure(lambda: a * 2, flops=64, bytes=512, precision="fp32", roofs=str(DATA / "run_a"), device="cpu",
                       budget_s=0.02).attainable_gflops is not None
    with pytest.raises(api.APIError) as e:
        api.measure(lambda: a * 2, flops=64, bytes=512, roofs="/nonexistent/run", device="cpu")
    assert e.value.code == "roofs_unreadable" and "'/nonexistent/run'" in str(e.value)
    with pytest.raises(api.APIError) as e:
        api.measure(lambda: a * 2, flops=64, bytes=512, roofs=[1, 2], device="cpu")
    assert e.value.code == "not_a_roof" and "int" in str(e.value)


class _Busy:
    """A machine whose other processes used `share` of the cores while the point was timed."""
    share = 0.0

    def start(self):
        return self

    def stop(self):
        return {"others_cpu": self.share, "load1": 2.0}


def test_measure_warns_when_the_machine_was_busy(monkeypatch):
    """The runner's busy flag (bench.results.BUSY_PREFIX), warned of."""
    from bench.results import BUSY_PREFIX
    x = torch.randn(64)
    busy = type("Busy", (_Busy,), {"share": 0.9})
    monkeypatch.setattr(api, "LoadProbe", busy)
    with pytest.warns(api.BusyWarning, match="90%"):
        r = api.measure(lambda: x * 2, flops=64, bytes=512, name="dbl", device="cpu", budget_s=0.02)
    assert r.flag.startswith(BUSY_PREFIX) and r.measurement().flag == r.flag
    monkeypatch.setattr(api, "LoadProbe", _Busy)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error", api.BusyWarning)
        assert api.measure(lambda: x * 2, flops=64, bytes=512, device="cpu", budget_s=0.02).flag == ""


def test_add_to_run_puts_the_points_on_its_chart_and_report(tmp_path):
    run_dir = Path(shutil.copytree(DATA / "run_a", tmp_path / "run"))
    x = torch.randn(4096)
    # timed cold, so its bytes cross DRAM, which has a roof in run_a (its L1 has none)
    r = api.measure(lambda: x * 2, flops=4096, bytes=8 * 4096, name="double", shape="4096", precision="fp32",
                    device="cpu", budget_s=0.02, mode="cold")
    before = {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()}
    # without pictures: the example's add_to_run draws them (test_example_file_runs reads its roofline.png)
    out = api.add_to_run(run_dir, [r], charts=False)
    # the run's own files are untouched; the points and the re-derivation are beside them
    assert {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()} == before
    assert out.parent == run_dir / "derived" and out.name.startswith(f"m{METHOD_VERSION}-")
    df = pd.read_csv(out / "measurements.csv")
    mine = df[df["family"] == "user"]
    assert len(mine) == 1 and mine.iloc[0]["impl"] == "user.double/torch" and mine.iloc[0]["attainable_gflops"] > 0
    assert mine.iloc[0]["boundary"] == "dram"
    assert "user.double/torch" in (out / "report.md").read_text() and not (out / "roofline.png").exists()
    run = load_run(out)  # the derived folder reads as a run: its own samples, the run's points and the new one
    assert len(run.points) == len(run.measurements) == len(load_run(run_dir).measurements) + 1
    assert json.loads((out / "roofs.json").read_text())["derived_by"]["method_version"] == METHOD_VERSION
    assert api.add_to_run(run_dir, [r], in_place=True, charts=False) == run_dir  # asked for: the run's own folder
    assert len(pd.read_csv(run_dir / "measurements.csv")) == len(df)


def test_add_to_run_appends_to_an_earlier_user_folder(tmp_path):
    """A second sweep given the first one's folder as out joins it: both points in one folder."""
    run_dir = Path(shutil.copytree(DATA / "run_a", tmp_path / "run"))
    x = torch.randn(1024)
    first = api.measure(lambda: x * 2, flops=1024, bytes=8 * 1024, name="double", shape="1024", precision="fp32",
                        device="cpu", budget_s=0.01)
    second = api.measure(lambda: x * 3, flops=1024, bytes=8 * 1024, name="triple", shape="1024", precision="fp32",
                         device="cpu", budget_s=0.01)
    folder = api.add_to_run(run_dir, [first], charts=False)
    assert api.add_to_run(run_dir, [second], out=folder, charts=False) == folder
    df = pd.read_csv(folder / "measurements.csv")
    assert sorted(df.loc[df["family"] == "user", "impl"]) == ["user.double/torch", "user.triple/torch"]
    assert len(df) == len(load_run(run_dir).measurements) + 2 and len(load_run(folder).points) == len(df)


@pytest.mark.slow
def test_example_file_runs(custom_kernel_example):
    # conftest.py: `python -m bench.examples.custom_kernel RUN_DIR` on a committed run, in a process
    # of its own (tests/test_nothing_rewritten.py checks that it leaves the committed files as they are)
    r = custom_kernel_example
    assert r.returncode == 0, r.stderr[-2000:]
    assert "axpy" in r.stdout and "% of attainable" in r.stdout and "added to" in r.stdout
    # its points on the run's chart and in its report, in the folder it names
    out = Path(re.search(r", in (\S+): see roofline.png", r.stdout).group(1))
    assert (out / "roofline.png").stat().st_size > 0 and "user.axpy" in (out / "report.md").read_text()


@pytest.mark.gpu
def test_cuda_graph_captured_callable():
    x = torch.randn(1 << 20, device="cuda")
    y = torch.empty_like(x)
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        y.copy_(x)
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(g):
        y.copy_(x)
    r = api.measure(g.replay, flops=1, bytes=8 * (1 << 20), device="cuda", budget_s=0.1)
    assert r.status == "ok" and r.gbps > 0


@pytest.mark.parametrize("kw,total,read", [
    ({"bytes": 4000}, 4000, None),                                   # bytes alone
    ({"bytes": 4000, "read_bytes": 3000}, 4000, 3000),               # either part gives the other
    ({"bytes": 4000, "write_bytes": 1000}, 4000, 3000),
    ({"read_bytes": 3000, "write_bytes": 1000}, 4000, 3000),         # together they are bytes
    ({"read_bytes": lambda n: 3 * n, "write_bytes": lambda n: n}, 4000, 3000),
    ({"bytes": 4000, "direction": "copy"}, 4000, 2000),
])
def test_every_documented_byte_form_of_measure_and_kernel(kw, total, read):
    """REFERENCE.md's forms: bytes=, read_bytes=/write_bytes= with or without bytes=, direction=;
    the same through @api.kernel's sweep (shape 1000: 3 n read, n written)."""
    x = torch.randn(250)
    r = api.measure(lambda: x * 2, flops=1, shape=1000, device="cpu", budget_s=0.02, **kw)
    assert r.status == "ok" and r.bytes == total and r.read_bytes == read
    k = api.kernel(flops=1, shapes=[1000], make_inputs=lambda n, dev: (torch.randn(n // 4),), **kw)(lambda a: a * 2)
    (s,) = k.sweep(device="cpu", budget_s=0.02)
    assert s.status == "ok" and s.bytes == total and s.read_bytes == read


@pytest.mark.parametrize("kw,expect", [
    ({"read_bytes": 3000}, "kernel 'kernel' has no byte count (only read_bytes, which without bytes= does not give"),
    ({}, "kernel 'kernel' has no byte count: give bytes="),
])
def test_a_byte_count_missing_is_one_sentence(kw, expect):
    with pytest.raises(api.APIError) as e:
        api.measure(lambda: None, flops=1, device="cpu", **kw)
    assert str(e.value).startswith(expect) and "\n" not in str(e.value)
