"""samples.jsonl, each point's raw record beside measurements.csv: the line a point writes
(sample_line), the file gzip-compressed once the run ends when it is large (compress_samples),
read back whole (load_samples) or for its point ids alone (load_point_ids), and appended to
(append_samples, the API's add_to_run). A derived folder without samples of its own reads its
run's (source_of: run.json's derived_from). Also the JSON a run folder holds, written
atomically with no NaN (_write_json, _clean) and read with one sentence for a missing or cut
file (_load_json). bench.results re-exports every name: import them from there."""
from __future__ import annotations

import gzip
import json
import math
import os
from pathlib import Path

from bench.paths import ResultsError


def _write_json(path: Path, obj) -> None:
    """Write obj as JSON atomically (a temporary file renamed), so a reader never sees half a file."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=1, default=_json_default, allow_nan=False))
    os.replace(tmp, path)


def _json_default(o):
    if isinstance(o, float) and not math.isfinite(o):
        return None
    if hasattr(o, "item"):
        return o.item()
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"cannot write {type(o).__name__} to JSON")


def _clean(obj):
    """Return obj with NaN/inf floats replaced by None (JSON has no NaN)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


def _load_json(path: Path, what: str) -> dict:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise ResultsError(f"{path.parent} has no {path.name}: it is not a roofbench run folder, "
                           f"or {what} was never written.", code="not_a_run") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ResultsError(f"{path} is corrupt ({e.__class__.__name__} at {getattr(e, 'pos', '?')}); "
                           "re-run the benchmark or restore the file.") from None


def source_of(run_dir) -> Path | None:
    """Return the run folder a derived folder was derived from (run.json's derived_from,
    relative to the derived folder), or None for a run's own folder."""
    try:
        meta = json.loads((Path(run_dir) / "run.json").read_text())
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return None
    src = meta.get("derived_from") if isinstance(meta, dict) else None
    return (Path(run_dir) / src).resolve() if src else None


SAMPLES = "samples.jsonl"
GZIP_SAMPLES_BYTES = 256 * 2**10  # a samples file larger than this is kept gzip-compressed


def sample_line(m) -> str:
    """Return a Measurement's line of samples.jsonl: its id, status, reps, timer, raw samples
    (seconds per call) and telemetry (what run.json's "points" held in older folders)."""
    return json.dumps(_clean({"point_id": m.point_id, "status": m.status, "reps": m.reps, "timer": m.timer,
                              "samples_s": list(m.samples_s), "telemetry": m.telemetry}),
                      default=_json_default, allow_nan=False)


def compress_samples(run_dir: Path) -> Path:
    """gzip run_dir's samples.jsonl into samples.jsonl.gz when it exceeds GZIP_SAMPLES_BYTES
    (the plain file is removed once the archive is whole); return the samples file kept."""
    plain, packed = Path(run_dir) / SAMPLES, Path(run_dir) / (SAMPLES + ".gz")
    if not plain.exists() or plain.stat().st_size <= GZIP_SAMPLES_BYTES:
        return plain
    tmp = packed.with_suffix(".gz.tmp")
    with open(plain, "rb") as src, gzip.open(tmp, "wb", compresslevel=9) as dst:
        dst.write(src.read())
    os.replace(tmp, packed)
    plain.unlink()
    return packed


def samples_path(run_dir) -> Path | None:
    """Return the folder's samples file (samples.jsonl.gz, else samples.jsonl), or None; a
    derived folder without samples of its own reads its source run's."""
    for name in (SAMPLES + ".gz", SAMPLES):
        if (Path(run_dir) / name).exists():
            return Path(run_dir) / name
    source = source_of(run_dir)
    return samples_path(source) if source is not None else None


def load_samples(run_dir, meta: dict | None = None) -> list[dict]:
    """Return every point's raw record, in row order: point_id, status, reps, timer,
    samples_s and telemetry. Folders written before samples left run.json keep them under
    run.json's "points" (read from there); newer ones in samples.jsonl(.gz). A last line
    cut by a killed process is left out."""
    return _read_samples(run_dir, meta, json.loads)


# sample_line writes each line's point_id first: its value alone is read where only the ids are
# needed (check_points, on every load_run), not the samples after it (most of the file's bytes)
_ID_FIRST = '{"point_id": '
_DECODER = json.JSONDecoder()


def _point_id(line: str):
    """Return the point_id of a samples line; raise json.JSONDecodeError if the line is not whole."""
    if line.startswith(_ID_FIRST) and line.endswith("}\n"):
        return _DECODER.raw_decode(line, len(_ID_FIRST))[0]
    return json.loads(line).get("point_id")


def load_point_ids(run_dir, meta: dict | None = None) -> list:
    """Return every point's point_id in row order, as load_samples's records hold them, reading
    no samples."""
    return _read_samples(run_dir, meta, _point_id, lambda record: record.get("point_id"))


def _read_samples(run_dir, meta: dict | None, parse, of_record=lambda record: record) -> list:
    """Return parse(line) of each whole line of run_dir's samples file (of_record(record) of
    each of run.json's "points" in an older folder), stopping at a line that is not whole."""
    if meta is None:
        meta = _load_json(Path(run_dir) / "run.json", "the run's metadata")
    if meta.get("points") is not None:
        return [of_record(r) for r in meta["points"]]
    path = samples_path(run_dir)
    if path is None:
        return []
    opener = gzip.open if path.suffix == ".gz" else open
    out = []
    try:
        with opener(path, "rt") as f:
            for line in f:
                try:
                    out.append(parse(line))
                except json.JSONDecodeError:  # a line cut by a killed process: the last one
                    break
    except (OSError, EOFError) as e:
        raise ResultsError(f"{path} is corrupt ({e.__class__.__name__}); "
                           "restore the file or re-run the benchmark.") from None
    return out


def append_samples(run_dir, measurements) -> None:
    """Add measurements' samples to a finished run folder (the API's add_to_run), in the
    current layout: an older folder's run.json "points" move into samples.jsonl(.gz) first,
    and run.json's point_count follows."""
    run_dir = Path(run_dir)
    meta = _load_json(run_dir / "run.json", "the run's metadata")
    records = load_samples(run_dir, meta)
    lines = [json.dumps(_clean(r), default=_json_default, allow_nan=False) for r in records]
    lines += [sample_line(m) for m in measurements]
    for name in (SAMPLES, SAMPLES + ".gz"):
        (run_dir / name).unlink(missing_ok=True)
    (run_dir / SAMPLES).write_text("".join(line + "\n" for line in lines))
    meta.pop("points", None)
    meta["point_count"] = len(lines)
    meta["samples_file"] = compress_samples(run_dir).name
    _write_json(run_dir / "run.json", _clean(meta))
