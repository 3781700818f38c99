"""The one results schema: Measurement records, and the run folder they are written to.

A run folder <device-slug>-<UTC timestamp>/ holds
    measurements.csv  one row per measured, skipped or failed point (COLUMNS, in order)
    samples.jsonl     each point's raw per-call samples, status, reps, timer and telemetry,
                      one line per point, appended as the run goes; gzip-compressed to
                      samples.jsonl.gz when the run ends if it is larger than GZIP_SAMPLES_BYTES
    run.json          device, software, command line and options, the kind of run, times,
                      status, schema and method versions, the roofbench commit, and (once
                      the run ends, even by Ctrl-C) how many points it recorded and in which
                      samples file: no raw samples, so it stays small (folders written before
                      this kept every point's samples in run.json under "points"; load_samples
                      reads both)
    roofs.json        the roofs derived from the measurements (written by roofs.analysis.model),
                      with derived_by: the method version and commit that derived them
    derived/          re-derivations (`report`, the API's add_to_run), one folder each, named
                      for the method version and commit that made it (derived_name): run.json
                      (with derived_from and derived_by), the annotated measurements.csv,
                      roofs.json, charts and report; the run's own files are never rewritten
Rows are appended and flushed as each point finishes, so an interrupted run leaves a
readable folder.
"""
from __future__ import annotations

import csv
import math
import os
import shutil
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd

from bench.paths import ResultsError, existing, no_such_run
from bench.policy import DEFAULT, Policy
from bench.results.samples import GZIP_SAMPLES_BYTES as GZIP_SAMPLES_BYTES  # samples.jsonl: importable from here
from bench.results.samples import (
    SAMPLES,
    _clean,
    _load_json,
    _write_json,
    compress_samples,
    load_point_ids,
    sample_line,
    source_of,
)
from bench.results.samples import append_samples as append_samples
from bench.results.samples import load_samples as load_samples
from bench.results.samples import samples_path as samples_path
from bench.util import cpu_seconds, git_commit, machine_cpu_seconds, others_cores

SCHEMA_VERSION = 1
# The version of the measuring method (ARCHITECTURE.md, rule 13). Bump it with any change
# to how points are counted, checked or timed or how roofs are derived, so that two runs
# made by different rules can be told apart: run.json records it (with the roofbench
# commit) and `compare` warns when runs differ in it. Runs that do not record it are 1.
METHOD_VERSION = 22
UNITS = {"gbps": "1e9 bytes/s", "gflops": "1e9 FLOP/s", "times": "ms in CSV, s in JSON"}  # run.json's "units"
# The flags the runner sets while measuring (the `flag` column; roof flags are added later).
BUSY_PREFIX = "measured while the machine was busy"
STEAL_PREFIX = "measured while the hypervisor stole its cores"  # a VM's steal time, apart from other processes' load
JUMP_PREFIX = "time jumped"
PASS_MARK = "#pass"  # a revisit's point id is its first pass's and this with its pass number (rule 11)
RUNNER_FLAGS = (BUSY_PREFIX, STEAL_PREFIX, JUMP_PREFIX)  # rows the runner flagged while measuring count toward nothing


def is_runner_flag(flag) -> bool:
    """Return whether a row's flag (parts joined by "; ") holds one the runner set while
    measuring: a busy machine, cores the hypervisor stole, or a time jump (ARCHITECTURE.md, rule 9)."""
    if flag is None or (isinstance(flag, float) and flag != flag):
        return False
    return any(part.startswith(RUNNER_FLAGS) for part in str(flag).split("; "))


def usable(rows: pd.DataFrame, policy: Policy = DEFAULT) -> pd.Series:
    """Return, per row, whether it may count toward a roof or a revisit pick: status ok,
    Policy.min_samples samples or more (a row of a run that kept no count counts), and no runner
    flag. The one rule the derivation and the revisit passes share."""
    ok = rows["status"].astype(str) == "ok" if "status" in rows else pd.Series(True, index=rows.index)
    if "samples" in rows:
        ok &= pd.to_numeric(rows["samples"], errors="coerce").fillna(policy.min_samples) >= policy.min_samples
    if "flag" in rows:
        ok &= ~rows["flag"].map(is_runner_flag)
    return ok

# A point's axis values, one column each (empty where an op has no such axis), so that
# nothing has to parse the display string in `shape`: GEMM M, N, K; GEMV and attention
# batch; the GEMV layer and its N, K; attention sequence, KV length, query and KV heads and
# head dimension, causal; the stream working set; the host memory kind of a copy; ranks
# and the send/recv pair of a collective; the GEMM search's layout of B (nt, nn).
AXIS_COLUMNS = ["m", "n", "k", "batch", "layer", "seq", "length", "heads_q", "heads_kv", "head_dim", "causal",
                "ws_bytes", "memory", "ranks", "pair", "layout"]
# A point's bytes by direction and by level (ARCHITECTURE.md, rules 1 and 12): read_bytes +
# write_bytes = bytes (the compulsory, off-chip traffic; Op.write_bytes); l2_bytes and
# l1_bytes are what a Triton kernel's tiles move through L2 and read from L1/shared memory
# (bench/ops/traffic.py). Empty where unknown, and in runs written before they existed.
TRAFFIC_COLUMNS = ["read_bytes", "write_bytes", "l2_bytes", "l1_bytes"]
LEVEL_BYTE_COLUMNS = {"l2": "l2_bytes", "l1": "l1_bytes"}
# A point's bound at the lows and highs of the roofs' intervals (ARCHITECTURE.md, rule 17).
BAND_COLUMNS = ["attainable_low", "attainable_high", "pct_of_attainable_low", "pct_of_attainable_high"]
COLUMNS = [
    "point_id", "op", "family", "impl", "backend", "dtype", "size", "shape",
    "working_set_bytes", "flops", "bytes", "intensity", "mode",
    "median_ms", "p20_ms", "p80_ms", "samples", "reps", "timer", "stop",
    "gbps", "gflops", "error", "tolerance", "status", "reason", "detail",
    "precision", "boundary", "bound_note", "attainable_gflops", "pct_of_bw_roof", "pct_of_attainable",
    "clock_mhz", "power_w", "joules", "throttled", "flag", "bus_gbps",
    *AXIS_COLUMNS,
    *TRAFFIC_COLUMNS, "bound_roof", "pass",
    *BAND_COLUMNS,
]
# Filled when the run ends, from the roofs derived from the run itself; empty until then.
ROOF_COLUMNS = ["boundary", "bound_note", "attainable_gflops", "pct_of_bw_roof", "pct_of_attainable", "flag",
                "bound_roof", *BAND_COLUMNS]
TEXT_COLUMNS = ["point_id", "op", "family", "impl", "backend", "dtype", "shape", "mode", "timer", "stop", "status",
                "reason", "detail", "precision", "boundary", "bound_note", "flag", "layer", "memory", "pair",
                "bound_roof", "layout"]


def text_column(df: pd.DataFrame, name: str) -> pd.Series:
    """Return df's text column name as strings, "" where empty or where df lacks the column
    (a frame built from rows whose every value is None holds it as float NaN)."""
    if name not in df:
        return pd.Series("", index=df.index, dtype=object)
    return df[name].astype(object).where(df[name].notna(), "").astype(str)


def axis_columns(point: dict) -> dict:
    """Return the AXIS_COLUMNS a point fills by itself: its scalar axes of those names, and a
    3-tuple "shape" axis as m, n, k. An op whose axes hold more (a GEMV layer's N and K, an
    attention op's heads) adds its own through Op.columns."""
    out = {k: v for k, v in point.items() if k in AXIS_COLUMNS and not isinstance(v, (tuple, list, dict))}
    shape = point.get("shape")
    if isinstance(shape, (tuple, list)) and len(shape) == 3:
        out.update(zip(("m", "n", "k"), shape))
    return out


@dataclass(frozen=True)
class Measurement:
    """One (impl, point, mode) outcome. Rates and intensity are derived, never stored:
    gbps = bytes / median / 1e9, gflops = flops / median / 1e9, intensity = flops / bytes."""
    op: str
    family: str
    impl: str
    backend: str
    point: dict
    size: int
    shape: str
    working_set_bytes: int
    flops: int
    bytes: int
    mode: str
    status: str
    reason: str = ""
    samples_s: tuple = ()
    reps: int = 0
    timer: str = ""
    stop: str = ""
    error: float | None = None
    tolerance: float | None = None
    detail: str = ""               # what the impl chose, e.g. the autotuned tile configuration
    precision: str = ""            # the compute roof that bounds this point ("" for none)
    bus_factor: float | None = None  # collectives: bus bandwidth / algorithm bandwidth
    telemetry: dict = field(default_factory=dict)
    flag: str = ""                 # set while measuring: the machine was busy (the roof flags come later)
    columns: dict = field(default_factory=dict)  # axis columns beyond axis_columns(point) (Op.columns), and
                                                 # TRAFFIC_COLUMNS where known
    pass_no: int = 1               # 1: the sweep; 2, 3, ...: a revisit of an off-chip size (rule 11)

    @property
    def dtype(self) -> str:
        return str(self.point.get("dtype", ""))

    @property
    def point_id(self) -> str:
        axes = ",".join(f"{k}={v}" for k, v in self.point.items())
        return f"{self.impl}[{axes}]@{self.mode}" + (f"{PASS_MARK}{self.pass_no}" if self.pass_no > 1 else "")

    def _stat(self, q):
        return float(np.percentile(self.samples_s, q)) if self.samples_s else math.nan

    @property
    def median_s(self) -> float:
        return self._stat(50)

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else math.nan

    @property
    def gbps(self) -> float:
        return self.bytes / self.median_s / 1e9 if self.samples_s else math.nan

    @property
    def gflops(self) -> float:
        return self.flops / self.median_s / 1e9 if self.samples_s else math.nan

    def row(self) -> dict:
        """Return the CSV row, keys in COLUMNS order."""
        ms = lambda q: self._stat(q) * 1e3  # noqa: E731
        row = {
            "point_id": self.point_id, "op": self.op, "family": self.family, "impl": self.impl,
            "backend": self.backend, "dtype": self.dtype, "size": self.size, "shape": self.shape,
            "working_set_bytes": self.working_set_bytes, "flops": self.flops, "bytes": self.bytes,
            "intensity": self.intensity, "mode": self.mode,
            "median_ms": ms(50), "p20_ms": ms(20), "p80_ms": ms(80),
            "samples": len(self.samples_s), "reps": self.reps, "timer": self.timer, "stop": self.stop,
            "gbps": self.gbps, "gflops": self.gflops,
            "error": self.error, "tolerance": self.tolerance,
            "status": self.status, "reason": self.reason, "detail": self.detail,
            "precision": self.precision, **{c: None for c in ROOF_COLUMNS},
            "clock_mhz": self.telemetry.get("clock_mhz"), "power_w": self.telemetry.get("power_w"),
            "joules": self.telemetry.get("joules_per_call"),
            "throttled": self.telemetry.get("throttled") if self.telemetry else None,
            "bus_gbps": self.gbps * self.bus_factor if self.bus_factor else None,
            **{c: None for c in AXIS_COLUMNS + TRAFFIC_COLUMNS}, **axis_columns(self.point), **self.columns,
            "pass": self.pass_no,
        }
        row["flag"] = self.flag or None
        return {c: row[c] for c in COLUMNS}


def first_pass_id(point_id) -> str:
    """Return the point id of a row's first pass: its own, less a revisit's PASS_MARK suffix
    (rule 11: every pass of a point shares it)."""
    return str(point_id).split(PASS_MARK, 1)[0]


def best_passes(rows: pd.DataFrame) -> pd.DataFrame:
    """Return rows with each point's fastest pass only (the lowest median time; rule 11: a
    neighbour only ever slows a call), in rows' order: what a chart draws of a point."""
    if rows.empty or "point_id" not in rows or "median_ms" not in rows:
        return rows
    first = rows["point_id"].map(first_pass_id)
    if first.equals(rows["point_id"].astype(str)):
        return rows
    order = rows.assign(_first=first, _ms=rows["median_ms"].astype(float)).sort_values("_ms", na_position="last")
    keep = order.drop_duplicates("_first").index
    return rows.loc[rows.index.isin(keep)]


def _loadavg() -> list | None:
    """Return the 1, 5 and 15-minute load averages, or None where the OS has none."""
    return list(os.getloadavg()) if hasattr(os, "getloadavg") else None


def utc_stamp(t: datetime | None = None) -> str:
    return (t or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")


class RunWriter:
    """Writes one run folder as the run goes. Use as a context manager or call finish()."""

    def __init__(self, run_dir: Path, meta: dict):
        self.dir = Path(run_dir)
        self.dir.mkdir(parents=True, exist_ok=False)
        self.meta = dict(meta, schema_version=SCHEMA_VERSION, method_version=METHOD_VERSION,
                         roofbench_commit=git_commit(), status="running",
                         start_utc=datetime.now(UTC).isoformat(timespec="seconds"),
                         load={"cores": os.cpu_count(), "start": _loadavg()})
        self.measurements: list[Measurement] = []
        self._t0, self._cpu0, self._times0 = time.monotonic(), cpu_seconds(), machine_cpu_seconds()
        self._csv_file = open(self.dir / "measurements.csv", "w", newline="")
        self._csv = csv.DictWriter(self._csv_file, fieldnames=COLUMNS)
        self._csv.writeheader()
        self._csv_file.flush()
        self._samples = open(self.dir / "samples.jsonl", "w")
        _write_json(self.dir / "run.json", _clean(self.meta))

    def add(self, m: Measurement) -> None:
        self.measurements.append(m)
        self._csv.writerow(m.row())
        self._csv_file.flush()
        self._samples.write(sample_line(m) + "\n")
        self._samples.flush()

    def finish(self, status: str = "complete", **extra) -> None:
        """Close the files (compressing samples.jsonl when it is large) and write run.json
        with the end time, the status and how many points samples.jsonl records."""
        if self._csv_file.closed:
            return
        self._csv_file.close()
        self._samples.close()
        self.meta.update(extra, status=status, end_utc=datetime.now(UTC).isoformat(timespec="seconds"))
        load = self.meta.setdefault("load", {})
        load["end"] = _loadavg()
        # the run's own share of that load: the cores it kept busy on average (its CPU
        # seconds over its wall time), so a reader can tell other processes' load from its own
        wall, own_s = time.monotonic() - self._t0, cpu_seconds() - self._cpu0
        load["own"] = round(own_s / wall, 2) if wall > 0 else None
        # the cores other processes kept busy, measured: the machine's busy CPU seconds over the
        # run less the run's own (the load averages above still count the minute before the
        # run started); absent where the OS has no /proc/stat. Apart from it, "steal": the cores
        # the hypervisor took from a VM on average (no process of this machine)
        times = machine_cpu_seconds()
        if times is not None and self._times0 is not None and wall > 0:
            load["others"] = round(others_cores(times[0] - self._times0[0], own_s, wall), 2)
            load["steal"] = round(max(0.0, times[1] - self._times0[1]) / wall, 2)
        self.meta["point_count"] = len(self.measurements)
        self.meta["samples_file"] = compress_samples(self.dir).name
        _write_json(self.dir / "run.json", _clean(self.meta))


DERIVED = "derived"


def derived_by() -> dict:
    """Return who derives files now: {method_version, commit} (roofs.json's derived_by)."""
    return {"method_version": METHOD_VERSION, "commit": git_commit()}


def derived_name(by: dict | None = None) -> str:
    """Return the name of a derived folder made by `by` (default: this code): m<method
    version>-<first 12 digits of the commit>, "-dirty" for uncommitted changes."""
    by = by or derived_by()
    commit = str(by["commit"])
    return f"m{by['method_version']}-{commit.split('+')[0][:12]}" + ("-dirty" if commit.endswith("+dirty") else "")


def measured_home(run_dir) -> Path:
    """Return the folder whose measurements a re-derivation of run_dir starts from: run_dir
    itself when it holds its samples (a run's own folder, or a derived folder with points
    added by add_to_run), else the run a derived folder came from."""
    d = Path(run_dir).resolve()
    own = any((d / n).exists() for n in (SAMPLES, SAMPLES + ".gz"))
    source = source_of(d)  # a derived folder's copied run.json may hold an older run's "points": still the run's
    return d if own or source is None else source


def start_derived(run_dir, out) -> Path:
    """Create the derived folder `out` of run_dir: run.json with derived_from (out's path to
    the folder holding the samples, measured_home) and derived_by, and a copy of run_dir's
    measurements.csv for the roof columns; the samples are read through derived_from. Nothing
    in the run's own folder is written. Returns out."""
    given, home = Path(run_dir).resolve(), measured_home(run_dir)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if out.resolve() == home and source_of(home) is None:
        raise ResultsError(f"{out} is the run folder itself: give another folder, "
                           "or re-derive in place with --in-place.", code="same_folder")
    meta = _load_json(given / "run.json", "the run's metadata")
    if out.resolve() != home:
        meta["derived_from"] = os.path.relpath(home, out.resolve())
    meta["derived_by"] = derived_by()
    if out.resolve() != given:
        for name in (SAMPLES, SAMPLES + ".gz"):  # a folder re-used for another derivation reads the run's
            (out / name).unlink(missing_ok=True)
        shutil.copyfile(given / "measurements.csv", out / "measurements.csv")
        if (given / "notes.md").exists():  # a person's notes on the run appear in every report of it
            shutil.copyfile(given / "notes.md", out / "notes.md")
    _write_json(out / "run.json", _clean(meta))
    return out


# counters.csv (--counters; bench/hw/counters.py): chosen points replayed once under a counter
# profiler after the timing, a file of its own (they are not timed points): the formulas' counts
# from the point's row, the counters' (hw_*), measured / counted ratios, a DRAM ratio's flag.
COUNTERS = "counters.csv"
COUNTER_COLUMNS = ["point_id", "op", "impl", "dtype", "shape", "chosen_as", "status", "reason", "tool", "kernels",
                   "flops", "bytes", "read_bytes", "write_bytes", "l2_bytes", "l1_bytes",
                   "hw_dram_read_bytes", "hw_dram_write_bytes", "hw_dram_bytes", "hw_l2_bytes", "hw_l1_bytes",
                   "hw_tensor_inst", "dram_ratio", "read_ratio", "write_ratio", "l2_ratio", "l1_ratio",
                   "flops_per_tensor_inst", "flag", "replay_detail", "kernel_names"]
COUNTER_TEXT = {"point_id", "op", "impl", "dtype", "shape", "chosen_as", "status", "reason", "tool", "flag",
                "replay_detail", "kernel_names"}


def append_counters(run_dir, row: dict) -> Path:
    """Append one counters.csv row (COUNTER_COLUMNS; missing ones empty), the header first."""
    path = Path(run_dir) / COUNTERS
    new = not path.exists()
    with open(path, "a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COUNTER_COLUMNS, extrasaction="ignore")
        if new:
            w.writeheader()
        w.writerow({c: row.get(c) for c in COUNTER_COLUMNS})
    return path


def load_counters(run_dir) -> pd.DataFrame | None:
    """Return the folder's counters.csv (a derived folder reads its run's), or None without one."""
    d = Path(run_dir)
    path = d / COUNTERS
    if not path.exists():
        source = source_of(d)
        return load_counters(source) if source is not None else None
    try:
        df = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise ResultsError(f"{path} is corrupt ({str(e).splitlines()[0]}); "
                           "delete it or re-run with --counters.") from None
    for c in COUNTER_COLUMNS:
        df[c] = text_column(df, c) if c in COUNTER_TEXT else df.get(c, pd.Series(None, index=df.index, dtype=float))
    return df


def rewrite_measurements(run_dir: Path, df: pd.DataFrame) -> Path:
    """Replace measurements.csv with df (same columns, e.g. with ROOF_COLUMNS filled), atomically."""
    path = Path(run_dir) / "measurements.csv"
    tmp = path.with_suffix(".csv.tmp")
    df[COLUMNS].to_csv(tmp, index=False)
    os.replace(tmp, path)
    return path


def write_roofs(run_dir: Path, roofs: list[dict], notes=()) -> Path:
    """Write roofs.json: the roofs, notes on the levels that got none and why, and
    derived_by (the method version and commit that derived them)."""
    path = Path(run_dir) / "roofs.json"
    _write_json(path, _clean({"schema_version": SCHEMA_VERSION, "derived_by": derived_by(), "roofs": roofs,
                              "notes": list(notes)}))
    return path


@dataclass
class Run:
    """A run folder read back: its metadata, its measurement rows and its roofs."""
    dir: Path
    meta: dict
    measurements: pd.DataFrame
    roofs: list[dict]
    _points: list[dict] | None = field(default=None, repr=False)
    # roofs.json's derived_by: the method and commit that derived them (None: not recorded)
    roofs_by: dict | None = None
    lost_points: int = 0  # points run.json records that measurements.csv lost from its end (check_points)

    @property
    def device(self) -> dict:
        return self.meta.get("device", {})

    @property
    def points(self) -> list[dict]:
        """Every point's raw record in row order (load_samples), read once when first asked."""
        if self._points is None:
            self._points = load_samples(self.dir, self.meta)[:len(self.measurements)]
        return self._points

    @property
    def lost_note(self) -> str:
        """Return the sentence saying how many points the CSV lost from its end, or ""."""
        if not self.lost_points:
            return ""
        return (f"{self.dir / 'measurements.csv'} holds {len(self.measurements)} of the "
                f"{len(self.measurements) + self.lost_points} points run.json records: the last "
                f"{self.lost_points} point{'' if self.lost_points == 1 else 's'} (cut off its end) "
                f"{'is' if self.lost_points == 1 else 'are'} lost, the rows before stand")


STATUSES = ("ok", "skipped", "error")


def load_measurements(path: Path) -> pd.DataFrame:
    """Return measurements.csv as a DataFrame; raise ResultsError if it lacks a schema
    column, its last row is cut, or a row has no valid status."""
    raw = path.read_bytes() if path.exists() else b""
    if raw and not raw.endswith(b"\n"):  # before parsing: a cut inside a quoted field fails the parser first
        raise ResultsError(f"{path} ends in the middle of a row (cut at byte {len(raw)}): restore the file, or delete "
                           "that partial last line to keep the rows before it; nothing was read or rewritten.",
                           code="cut_row")
    try:
        df = pd.read_csv(path, dtype={c: str for c in TEXT_COLUMNS})
    except FileNotFoundError:
        raise ResultsError(f"{path.parent} has no measurements.csv: it is not a roofbench run folder.",
                           code="not_a_run") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise ResultsError(f"{path} is corrupt ({str(e).splitlines()[0]}); "
                           "re-run the benchmark or restore the file.") from None
    missing = [c for c in COLUMNS[:COLUMNS.index("reason") + 1] if c not in df.columns]
    if missing:
        raise ResultsError(f"{path} lacks the columns {', '.join(missing)}: "
                           f"it was not written by this roofbench schema (version {SCHEMA_VERSION}).", code="schema")
    for c in COLUMNS:  # columns added after a folder was written read as empty
        if c not in df.columns:
            df[c] = None
    for c in TEXT_COLUMNS:
        df[c] = text_column(df, c)
    bad = df.index[~df["status"].isin(STATUSES)]
    if len(bad):
        raise ResultsError(f"{path} line {bad[0] + 2} has status '{df.at[bad[0], 'status']}' (expected "
                           f"{', '.join(STATUSES)}; {len(bad)} such rows): the file was cut or edited; restore it "
                           "or re-run the benchmark.")
    return df


def check_points(df: pd.DataFrame, meta: dict, path: Path) -> int:
    """Return how many of the points run.json records are missing from the end of
    measurements.csv (0 when it has them all; a CSV whose cut last row was deleted keeps the
    rows before it); raise ResultsError unless its rows are those points (its point_count,
    with the ids of the samples file; or an older folder's "points"), in the same order, or
    their first ones (a run still running, or killed, has not recorded them: nothing to check)."""
    if meta.get("points") is None and meta.get("point_count") is None:
        return 0
    ids = load_point_ids(path.parent, meta)
    count = len(ids) if meta.get("points") is not None else int(meta["point_count"])
    where = "run.json" if meta.get("points") is not None else "run.json (with its samples file)"
    if count == len(ids) and len(df) < count and list(df["point_id"]) == ids[:len(df)]:
        return count - len(df)  # the CSV lost its tail (a cut row deleted as advised): the rows before it stand
    if count != len(df) or len(ids) != len(df):
        got = count if count != len(df) else len(ids)
        raise ResultsError(f"{path} has {len(df)} rows but {where} records {got} points: one of the files was "
                           "cut or edited; restore it or re-run the benchmark.", code="mismatch")
    for i, (row, point) in enumerate(zip(df["point_id"], ids)):
        if row != point:
            raise ResultsError(f"row {i + 1} of {path} is '{row}' but {where} records '{point}' there: the files come "
                               "from different runs or one was edited.", code="mismatch")


def load_meta(run_dir) -> dict:
    """Return run_dir's run.json alone; raise ResultsError with one sentence when it is
    missing, corrupt or of another schema version."""
    d = existing(run_dir)
    meta = _load_json(d / "run.json", "the run's metadata")
    if meta.get("schema_version") != SCHEMA_VERSION:
        raise ResultsError(f"{d / 'run.json'} has schema version {meta.get('schema_version')!r}; "
                           f"this roofbench reads version {SCHEMA_VERSION}.", code="schema")
    return meta


def load_small(run_dir) -> tuple[dict, list[dict]]:
    """Return (run.json, roofs.json's roofs) of run_dir, reading neither measurements.csv nor
    the samples (a fleet of a thousand runs reads a few KiB each); raise ResultsError with
    one sentence when run.json or roofs.json is missing or corrupt."""
    d = existing(run_dir)
    meta = load_meta(d)
    doc = _load_json(d / "roofs.json", "its roofs (the run did not finish)")
    if not isinstance(doc.get("roofs"), list):
        raise ResultsError(f"{d / 'roofs.json'} holds no list of roofs; re-run `python run_bench.py report {d}`.")
    return meta, doc["roofs"]


def load_run(run_dir) -> Run:
    """Return the Run stored in run_dir; raise ResultsError with one sentence if it is
    unreadable, or if measurements.csv and run.json disagree (a cut row, a blank status, a
    different point count or point ids): callers refuse such a run and rewrite nothing."""
    d = existing(run_dir)  # a relative path missing here but present in the checkout is the checkout's
    if d.is_file():
        raise ResultsError(f"{d} is a file, not a run folder: give the folder that holds it ({d.parent}).",
                           code="not_a_folder")
    if not d.is_dir():
        raise no_such_run(d)
    meta = load_meta(d)
    df = load_measurements(d / "measurements.csv")
    lost = check_points(df, meta, d / "measurements.csv")
    doc = _load_json(d / "roofs.json", "its roofs") if (d / "roofs.json").exists() else {}
    return Run(d, meta, df, doc.get("roofs", []), roofs_by=doc.get("derived_by"), lost_points=lost)
