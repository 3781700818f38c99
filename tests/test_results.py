"""The results schema: a run folder written, read back, and rejected when corrupt."""
import json
import math

import pytest

from bench.results import COLUMNS, Measurement, ResultsError, RunWriter, load_run, write_roofs


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
    w.add(meas(status="skipped", reason="Triton compiles for GPUs only", impl="stream.copy/triton", backend="triton"))
    assert (run_dir / "measurements.csv").read_text().count("\n") == 3  # written as it goes
    w.finish("complete")
    write_roofs(run_dir, [{"kind": "bandwidth", "name": "dram", "value": 4.0, "unit": "GB/s", "x": math.nan}])
    run = load_run(run_dir)
    df = run.measurements
    assert list(df.columns) == COLUMNS and len(df) == 2
    assert df.loc[0, "gbps"] == pytest.approx(8000 / 0.002 / 1e9) and df.loc[0, "status"] == "ok"
    assert df.loc[1, "reason"] == "Triton compiles for GPUs only" and math.isnan(df.loc[1, "median_ms"])
    assert run.meta["status"] == "complete" and run.meta["schema_version"] == 1
    assert run.meta["points"][0]["samples_s"] == [0.001, 0.002, 0.003]
    assert run.roofs[0]["value"] == 4.0 and run.roofs[0]["x"] is None
    assert run.device["name"] == "x" and run.meta["start_utc"] <= run.meta["end_utc"]


def test_partial_run_is_readable(tmp_path):
    w = RunWriter(tmp_path / "r", {"device": {}})
    w.add(meas())
    # no finish(): the process died; the CSV and run.json written so far still load
    run = load_run(tmp_path / "r")
    assert run.meta["status"] == "running" and len(run.measurements) == 1


@pytest.mark.parametrize("damage,expect", [
    (lambda d: (d / "run.json").write_text("{not json"), "run.json is corrupt"),
    (lambda d: (d / "run.json").unlink(), "has no run.json"),
    (lambda d: (d / "measurements.csv").write_text("op,impl\nx,y\n"), "lacks the columns"),
    (lambda d: (d / "roofs.json").write_text("]"), "roofs.json is corrupt"),
    (lambda d: (d / "run.json").write_text(json.dumps({"schema_version": 99})), "schema version 99"),
])
def test_corrupt_files_give_one_sentence(tmp_path, damage, expect):
    d = tmp_path / "r"
    w = RunWriter(d, {"device": {}})
    w.add(meas())
    w.finish()
    write_roofs(d, [])
    damage(d)
    with pytest.raises(ResultsError, match=expect) as e:
        load_run(d)
    assert "\n" not in str(e.value)


def test_missing_folder(tmp_path):
    with pytest.raises(ResultsError, match="does not exist"):
        load_run(tmp_path / "nope")
