"""The results schema: a run folder written, read back, and rejected when corrupt."""
import json
import math

import pytest

from bench.hw import detect
from bench.results import (
    AXIS_COLUMNS,
    COLUMNS,
    METHOD_VERSION,
    Measurement,
    ResultsError,
    RunWriter,
    load_run,
    write_roofs,
)


def meas(status="ok", samples=(0.001, 0.002, 0.003), **kw):
    base = dict(op="stream.copy", family="stream", impl="stream.copy/torch", backend="torch",
                point={"dtype": "float32", "ws_bytes": 8000}, size=1000, shape="(1000,)",
                working_set_bytes=8000, flops=0, bytes=8000, mode="warm", status=status,
                samples_s=samples if status == "ok" else (), reps=1, timer="perf_counter_ns",
                stop="converged", error=0.0, tolerance=1e-5)
    base.update(kw)
    return Measurement(**base)


def test_measurement_derived_fields():
    m = meas(flops=2000)
    assert m.median_s == 0.002
    assert m.gbps == pytest.approx(8000 / 0.002 / 1e9)
    assert m.gflops == pytest.approx(2000 / 0.002 / 1e9)
    assert m.intensity == 0.25
    assert m.point_id == "stream.copy/torch[dtype=float32,ws_bytes=8000]@warm"
    row = m.row()
    assert list(row) == COLUMNS and row["median_ms"] == pytest.approx(2.0) and row["samples"] == 3
    assert row["p20_ms"] == pytest.approx(1.4) and row["p80_ms"] == pytest.approx(2.6)


def test_round_trip(tmp_path):
    run_dir = tmp_path / "cpu-x-20260101T000000Z"
    w = RunWriter(run_dir, {"device": {"name": "x", "kind": "cpu"}, "command": "test"})
    w.add(meas())
    why = "Triton compiles for GPUs only"   # a reason round-trips as written
    w.add(meas(status="skipped", reason=why, impl="stream.copy/triton", backend="triton"))
    assert (run_dir / "measurements.csv").read_text().count("\n") == 3  # written as it goes
    w.finish("complete")
    write_roofs(run_dir, [{"kind": "bandwidth", "name": "dram", "value": 4.0, "unit": "GB/s", "x": math.nan}])
    run = load_run(run_dir)
    df = run.measurements
    assert list(df.columns) == COLUMNS and len(df) == 2
    assert df.loc[0, "gbps"] == pytest.approx(8000 / 0.002 / 1e9) and df.loc[0, "status"] == "ok"
    assert df.loc[1, "reason"] == why and math.isnan(df.loc[1, "median_ms"])
    assert run.meta["status"] == "complete" and run.meta["schema_version"] == 1
    assert run.meta["method_version"] == METHOD_VERSION and run.meta["roofbench_commit"]
    assert "points" not in run.meta and run.meta["point_count"] == 2 and run.meta["samples_file"] == "samples.jsonl"
    assert run.points[0]["samples_s"] == [0.001, 0.002, 0.003] and run.points[1]["status"] == "skipped"
    assert run.roofs[0]["value"] == 4.0 and run.roofs[0]["x"] is None
    assert run.device["name"] == "x" and run.meta["start_utc"] <= run.meta["end_utc"]


def test_partial_run_is_readable(tmp_path):
    w = RunWriter(tmp_path / "r", {"device": {}})
    w.add(meas())
    # no finish(): the process died; the CSV and run.json written so far still load
    run = load_run(tmp_path / "r")
    assert run.meta["status"] == "running" and len(run.measurements) == 1


@pytest.mark.parametrize("damage,code,named", [
    (lambda d: (d / "run.json").write_text("{not json"), "corrupt", "run.json"),
    (lambda d: (d / "run.json").unlink(), "not_a_run", "run.json"),
    (lambda d: (d / "measurements.csv").write_text("op,impl\nx,y\n"), "schema", "measurements.csv"),
    (lambda d: (d / "roofs.json").write_text("]"), "corrupt", "roofs.json"),
    (lambda d: (d / "run.json").write_text(json.dumps({"schema_version": 99})), "schema", "99"),
])
def test_corrupt_files_give_one_sentence(tmp_path, damage, code, named):
    d = tmp_path / "r"
    w = RunWriter(d, {"device": {}})
    w.add(meas())
    w.finish()
    write_roofs(d, [])
    damage(d)
    with pytest.raises(ResultsError) as e:
        load_run(d)
    assert e.value.code == code and named in str(e.value) and "\n" not in str(e.value)


def test_missing_folder(tmp_path):
    with pytest.raises(ResultsError) as e:
        load_run(tmp_path / "nope")
    assert e.value.code == "missing"


def test_axis_values_are_columns_and_shape_is_for_display():
    """M, n, k (and the other axes) are columns; nothing needs to parse shape."""
    at = COLUMNS.index(AXIS_COLUMNS[0])  # appended after the columns that were there (traffic columns after them)
    assert COLUMNS[at:at + len(AXIS_COLUMNS)] == AXIS_COLUMNS
    gemm = meas(op="gemm.square", family="gemm", point={"dtype": "bf16", "shape": (64, 128, 256)}, shape="64x128x256")
    row = gemm.row()
    assert (row["m"], row["n"], row["k"]) == (64, 128, 256) and row["batch"] is None
    assert meas().row()["ws_bytes"] == 8000
    gemv = meas(point={"dtype": "int4", "layer": "llama8b.o", "batch": 4}, columns={"n": 4096, "k": 4096})
    assert {c: gemv.row()[c] for c in ("layer", "batch", "n", "k")} == {"layer": "llama8b.o", "batch": 4,
                                                                       "n": 4096, "k": 4096}


def test_registered_ops_fill_their_axis_columns():
    from bench.measure.registry import load_all
    from bench.measure.runner import Runner
    cpu, reg = detect.resolve("cpu"), load_all()
    runner = Runner(cpu)
    rows = {}
    for op in reg.ordered():
        for point in op.points(cpu, quick=True)[:1]:
            rows[op.name] = runner._base(op, reg.impls_of(op.name)[0], point, "warm", status="skipped").row()
    assert rows["gemm.skinny"]["m"] == 1 and rows["gemm.skinny"]["n"] == rows["gemm.skinny"]["k"]
    assert (rows["gemv.decode"]["n"], rows["gemv.decode"]["k"], rows["gemv.decode"]["batch"]) == (4096, 4096, 1)
    p = rows["attention.prefill"]
    assert (p["batch"], p["heads_q"], p["heads_kv"], p["head_dim"], p["seq"]) == (1, 8, 2, 128, 512)
    d = rows["attention.decode"]
    assert (d["heads_q"], d["heads_kv"], d["head_dim"], d["length"], d["batch"]) == (32, 8, 128, 1024, 1)
    assert rows["transfer.h2d"]["memory"] == "pinned" and rows["stream.copy"]["ws_bytes"] > 0


@pytest.mark.parametrize("n,text", [(512, "512 B"), (999.6 * 1024, "0.976 MiB"), (2**20, "1 MiB"),
                                    (1.5 * 2**30, "1.5 GiB"), (5000 * 2**30, "5000 GiB")])
def test_byte_sizes_for_people(n, text):
    """The progress line printed "ws=1.02e+03 KiB"."""
    from bench.util import fmt_bytes
    assert fmt_bytes(n) == text


def test_samples_live_in_samples_jsonl_compressed_when_large(tmp_path):
    """Raw samples only in samples.jsonl (gzip when large), run.json small."""
    import gzip

    from bench.results import GZIP_SAMPLES_BYTES, load_samples
    d = tmp_path / "r"
    w = RunWriter(d, {"device": {}})
    many = tuple(1e-3 + i * 1e-7 for i in range(500))
    n = GZIP_SAMPLES_BYTES // 4000 + 10  # each line holds ~500 numbers: past the threshold
    for i in range(n):
        w.add(meas(samples=many, point={"dtype": "float32", "ws_bytes": 4096 * (i + 1)}))
    w.finish()
    assert not (d / "samples.jsonl").exists() and (d / "samples.jsonl.gz").exists()
    assert (d / "run.json").stat().st_size < 16 * 2**10
    with gzip.open(d / "samples.jsonl.gz", "rt") as f:
        assert sum(1 for _ in f) == n
    run = load_run(d)
    assert run.meta["samples_file"] == "samples.jsonl.gz" and len(run.points) == n == len(run.measurements)
    assert run.points[-1]["samples_s"] == list(many)
    assert run.points[-1]["point_id"] == run.measurements["point_id"].iloc[-1]
    assert load_samples(d) == run.points


def test_old_folders_keep_their_samples_in_run_json():
    """Older folders (before samples.jsonl) hold every point's samples in run.json: still read."""
    from pathlib import Path
    run = load_run(Path(__file__).parent / "data" / "run_a")
    assert "points" in run.meta and len(run.points) == len(run.measurements) > 0
    assert list(run.measurements["point_id"]) == [p["point_id"] for p in run.points]


def test_samples_and_rows_must_agree(tmp_path):
    d = tmp_path / "r"
    w = RunWriter(d, {"device": {}})
    w.add(meas())
    w.add(meas(point={"dtype": "float32", "ws_bytes": 16000}))
    w.finish()
    lines = (d / "samples.jsonl").read_text().splitlines()
    (d / "samples.jsonl").write_text(lines[1] + "\n" + lines[0] + "\n")
    with pytest.raises(ResultsError) as e:
        load_run(d)
    # the row and the point it records instead of its own
    swapped = meas(point={"dtype": "float32", "ws_bytes": 16000}).point_id
    assert e.value.code == "mismatch" and repr(swapped) in str(e.value)
    (d / "samples.jsonl").write_text(lines[0] + "\n")
    with pytest.raises(ResultsError) as e:
        load_run(d)
    assert e.value.code == "mismatch" and "has 2 rows" in str(e.value)


def test_a_killed_run_reads_the_samples_written_so_far(tmp_path):
    from bench.results import load_samples
    d = tmp_path / "r"
    w = RunWriter(d, {"device": {}})
    w.add(meas())
    w._samples.write('{"point_id": "cut')  # the process died inside a line
    w._samples.flush()
    assert [p["samples_s"] for p in load_samples(d)] == [[0.001, 0.002, 0.003]]
    assert load_run(d).meta["status"] == "running"


def test_point_ids_are_read_without_the_samples_and_agree_with_them(tmp_path):
    """load_point_ids (what every load_run checks) reads each line's id alone; a line in
    another key order is parsed whole, and a line cut inside its samples ends the list, as
    load_samples's records do."""
    from bench.results import load_point_ids, load_samples
    d = tmp_path / "r"
    w = RunWriter(d, {"device": {}})
    w.add(meas())
    w.add(meas(point={"dtype": "float32", "ws_bytes": 16000}))
    w.finish()
    first, second = (d / "samples.jsonl").read_text().splitlines()
    reordered = json.dumps(dict(reversed(list(json.loads(second).items()))))
    assert not reordered.startswith('{"point_id"')
    cut = second[:second.index('"samples_s"') + 16]  # whole id, samples cut (the process died there)
    (d / "samples.jsonl").write_text(first + "\n" + reordered + "\n" + cut)
    ids = load_point_ids(d)
    assert ids == [p["point_id"] for p in load_samples(d)] == [json.loads(first)["point_id"],
                                                                 json.loads(second)["point_id"]]
    assert json.loads(second)["point_id"] in cut and len(ids) == 2
