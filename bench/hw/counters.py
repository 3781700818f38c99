"""Hardware counters beside counted bytes (NVIDIA): what the device's profiler reads of one
replayed point, set beside the formulas' bytes and FLOPs (ARCHITECTURE.md, rule 1: the
formulas count; the counters check them).

    why = unavailable(device)                 "" where counters can be read, else one sentence
    cmd = ncu_command(ncu, program, cc)       Nsight Compute over a replay program
    got = run_profiler(cmd, timeout_s)        its raw CSV parsed: got.kernels, one dict per kernel
    totals = sum_kernels(got.kernels)         the point's counters, summed over its kernels
    row = counter_row(formula, totals, ...)   a counters.csv row (bench.results.COUNTER_COLUMNS)

The profiler is Nsight Compute's command line, `ncu`, run as a subprocess over a replay
program (bench/run/replay.py) that makes one point's inputs, launches it (setup, tuning and a
first call outside any range), then calls it once inside the NVTX push/pop range
REPLAY_RANGE; ncu profiles the kernels of that range only (`--nvtx --nvtx-include
roofbench-counted/`), with `--clock-control none` (the clocks as the run had them),
`--cache-control all` (caches flushed before each kernel: DRAM bytes are a cold call's, the
compulsory traffic the formulas count) and kernel replay (each kernel run as often as its
metrics need, its memory restored in between). Its `--csv --page raw --print-units base`
output is a header row of "ID", "Process ID", "Process Name", "Host Name", "Kernel Name",
"Context", "Stream", "Block Size", "Grid Size", "Device", "CC" and the metric names, a units
row, then one row per profiled kernel; values may carry thousands separators.

Metrics (Hopper names; all but the wgmma count are Ampere's too): dram__bytes_read.sum and
dram__bytes_write.sum (DRAM), lts__t_bytes.sum (every L2 slice's traffic), l1tex__t_bytes.sum
(L1/TEX), and the tensor pipe's
warp instructions: sm__inst_executed_pipe_tensor_op_hmma.sum (mma.sync), plus
sm__inst_executed_pipe_tensor_op_gmma.sum (warpgroup wgmma) on sm_90, where it exists.

A point is flagged when its DRAM bytes differ from the formula's by more than FLAG_FRACTION
(10%). The profiler replays a point after the run's timing is over and in its own process:
no timed sample is ever taken under it. Where ncu cannot run, one sentence says why
(classify): no GPU, no ncu, counters refused by the driver (ERR_NVGPUCTRPERM) or a profiler
that cannot load (LibraryNotLoaded, as under gVisor).
"""
from __future__ import annotations

import csv
import glob
import importlib.util
import io
import math
import os
import re
import shutil
import subprocess
from dataclasses import dataclass

from bench.util import Reason

REPLAY_RANGE = "roofbench-counted"   # the NVTX push/pop range the replay calls its point in
FLAG_FRACTION = 0.10                 # DRAM bytes this far from the formula's flag the point
NCU_ENV = "ROOFBENCH_NCU"            # an ncu to use instead of the one on PATH

# a counters.csv column -> the ncu metrics summed into it
METRICS = {
    "hw_dram_read_bytes": ("dram__bytes_read.sum",),
    "hw_dram_write_bytes": ("dram__bytes_write.sum",),
    "hw_l2_bytes": ("lts__t_bytes.sum",),
    "hw_l1_bytes": ("l1tex__t_bytes.sum",),
    "hw_tensor_inst": ("sm__inst_executed_pipe_tensor_op_hmma.sum", "sm__inst_executed_pipe_tensor_op_gmma.sum"),
}
SM90_ONLY = ("sm__inst_executed_pipe_tensor_op_gmma.sum",)
UNIT_SCALE = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}  # ncu's prefixes (decimal), e.g. "Mbyte"


class CounterError(RuntimeError):
    """The profiler could not read a point's counters: one sentence saying why, and `code`, a
    short name of the cause that callers and tests read."""

    def __init__(self, message: str, code: str):
        super().__init__(message)
        self.code = code

    @property
    def reason(self) -> Reason:
        """Return the sentence with its code, as a row's reason or a phase's why carries it."""
        return Reason(str(self), self.code)


@dataclass(frozen=True)
class Profile:
    """What one profiler run read: its kernels (parse_raw_csv) and its whole output (the
    profiler's and the replayed program's stdout and stderr)."""
    kernels: list
    output: str = ""


def metrics_for(compute_capability: str | None) -> list[str]:
    """Return the ncu metrics to ask a GPU of this compute capability ("9.0") for: every
    metric of METRICS, the wgmma count only on sm_90 (other parts have no such metric, and
    ncu refuses a metric it does not know)."""
    major = str(compute_capability or "").split(".")[0]
    return [m for names in METRICS.values() for m in names if major == "9" or m not in SM90_ONLY]


def find_ncu() -> str | None:
    """Return the path of Nsight Compute's command line: $ROOFBENCH_NCU, else `ncu` on PATH,
    else the CUDA toolkit's or a standalone install's; None when there is none."""
    given = os.environ.get(NCU_ENV)
    if given:
        return given if os.access(given, os.X_OK) else None
    found = shutil.which("ncu")
    if found:
        return found
    for pattern in ("/usr/local/cuda/bin/ncu", "/usr/local/cuda-*/bin/ncu", "/opt/nvidia/nsight-compute/*/ncu"):
        hits = sorted(glob.glob(pattern))
        if hits and os.access(hits[-1], os.X_OK):
            return hits[-1]
    return None


def cupti_installed() -> bool:
    """Return whether CUPTI's Python binding (the cupti-python package) is importable."""
    return importlib.util.find_spec("cupti") is not None


def unavailable(device) -> str:
    """Return "" when this device's counters can be read by ncu, else one sentence saying
    why not (a bench.util.Reason, its code no_gpu, not_nvidia or no_ncu): not an NVIDIA GPU,
    or no ncu. Without ncu there is no fallback yet: CUPTI's Python binding (cupti-python 13.x)
    wraps the activity, callback, PM sampling and profiler host APIs but not the range profiler,
    and PM sampling (device-wide counters sampled over time) is not driven by this suite; the
    sentence says whether the binding is installed."""
    if getattr(device, "kind", "cpu") != "cuda":
        return Reason(f"hardware counters need an NVIDIA GPU, and this run is on "
                      f"{getattr(device, 'torch_device', 'the CPU')} ({getattr(device, 'name', 'a CPU')})", "no_gpu")
    if getattr(device, "vendor", "nvidia") not in ("nvidia", None):
        return Reason(f"hardware counters are read with NVIDIA's Nsight Compute, and {device.name} is an "
                      f"{device.vendor} GPU", "not_nvidia")
    if find_ncu() is None:
        extra = ("; CUPTI's Python binding is installed, but it has no range profiler and its PM sampling is not "
                 "driven by this suite" if cupti_installed() else "")
        return Reason(f"no profiler: Nsight Compute's ncu is not on PATH nor under /usr/local/cuda/bin "
                      f"(set {NCU_ENV})" + extra, "no_ncu")
    return ""


def ncu_command(ncu: str, program: list[str], compute_capability: str | None = None,
                kernel_regex: str | None = None, launch_count: int | None = None,
                name_base: str | None = None) -> list[str]:
    """Return the ncu command line that profiles the kernels program launches inside
    REPLAY_RANGE (module docstring), optionally only those whose name matches kernel_regex
    (against ncu's name_base of each kernel: function, demangled or mangled; ncu's default
    where None) and at most launch_count of them."""
    cmd = [ncu, "--csv", "--page", "raw", "--print-units", "base",
           "--metrics", ",".join(metrics_for(compute_capability)),
           "--target-processes", "all", "--clock-control", "none", "--cache-control", "all",
           "--replay-mode", "kernel", "--nvtx", "--nvtx-include", f"{REPLAY_RANGE}/"]
    if kernel_regex:
        cmd += (["--kernel-name-base", name_base] if name_base else []) + ["-k", f"regex:{kernel_regex}"]
    if launch_count:
        cmd += ["--launch-count", str(launch_count)]
    return cmd + list(program)


def _number(text: str, unit: str) -> float | None:
    """Return a raw CSV value as a number in base units ("1,048,576" byte; "1.5" Mbyte), or
    None for "n/a" and other text."""
    t = text.strip().replace(",", "")
    try:
        v = float(t)
    except ValueError:
        return None
    m = re.fullmatch(r"([KMGT]?)(byte|B)", unit.strip())
    return v * UNIT_SCALE[m.group(1)] if m else v


def parse_raw_csv(text: str) -> list[dict]:
    """Return the kernels of ncu's `--csv --page raw` output, in order: {"id", "kernel",
    "grid", "block", metric name: value in base units (None where ncu wrote n/a)}. The
    profiler's own lines ("==PROF== ...") and the program's output around the table are
    ignored; output without the table raises CounterError."""
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("==")]
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID",')), None)
    if start is None:
        raise CounterError("ncu printed no table of counters (no raw CSV header in its output)", "no_counters_table")
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    header = rows[0]
    width = len(header)
    body = [r for r in rows[1:] if len(r) == width]
    units = body[0] if body and not body[0][0].strip() else [""] * width
    first_metric = header.index("CC") + 1 if "CC" in header else header.index("Kernel Name") + 1
    kernels = []
    for r in body:
        if not r[0].strip().isdigit():  # the units row
            continue
        rec = {"id": int(r[0]), "kernel": r[header.index("Kernel Name")],
               "grid": r[header.index("Grid Size")] if "Grid Size" in header else "",
               "block": r[header.index("Block Size")] if "Block Size" in header else ""}
        for j in range(first_metric, width):
            rec[header[j]] = _number(r[j], units[j])
        kernels.append(rec)
    return kernels


def sum_kernels(kernels: list[dict]) -> dict:
    """Return the point's counters (METRICS' columns), each the sum over its kernels of its
    metrics; a column none of whose metrics any kernel reported is None (an sm_90-only
    metric counts as 0 where it was not asked)."""
    out = {}
    for column, names in METRICS.items():
        values = [k[n] for k in kernels for n in names if k.get(n) is not None]
        out[column] = float(sum(values)) if values else None
    read, write = out["hw_dram_read_bytes"], out["hw_dram_write_bytes"]
    out["hw_dram_bytes"] = read + write if read is not None and write is not None else None
    return out


# what ncu's failure says -> why counters cannot be read, one sentence each
FAILURES = (
    ("ERR_NVGPUCTRPERM", "the driver refuses access to the GPU's performance counters (ERR_NVGPUCTRPERM): run as root, "
                         "or load the NVIDIA driver with NVreg_RestrictProfilingToAdminUsers=0"),
    ("LibraryNotLoaded", "the profiler cannot load here (ncu: Failed to initialize the profiler: LibraryNotLoaded), "
                         "as in "
                         "a sandbox such as gVisor that does not pass GPU counters through"),
    ("Failed to initialize the profiler", "ncu failed to initialize the profiler on this machine"),
    ("Failed to find metric", "ncu does not know a metric this suite asks for on this GPU"),
    ("No kernels were profiled", "ncu profiled no kernel: the replay launched none inside its NVTX range"),
    ("ERR_NVGPUCTRBUSY", "the GPU's performance counters are in use by another profiler (ERR_NVGPUCTRBUSY)"),
)


def classify(output: str, returncode: int | None = None) -> str:
    """Return one sentence saying why ncu read no counters, from its output and exit code:
    the known failures (FAILURES), else the replayed program's own error (its last
    "roofbench-replay:" sentence or the exception a traceback ends with), else ncu's first
    ==ERROR== line, else its exit code."""
    for needle, why in FAILURES:
        if needle in output:
            return why
    lines = [line.strip() for line in output.splitlines()]
    raised = [line for line in lines if re.match(r"^[A-Za-z_.]*(Error|Exception|Interrupt)\b.*", line)]
    said = [line.split(": ", 1)[1] for line in lines if line.startswith("roofbench-replay: ")
            and not line.startswith("roofbench-replay: {")]
    if said or raised:  # the replayed program failed: its own last word says why
        return f"the replayed program failed: {(said or raised)[-1].rstrip('.')}"
    err = next((line.split("==ERROR==", 1)[1].strip() for line in output.splitlines() if "==ERROR==" in line), "")
    if err:
        return f"ncu failed: {err.rstrip('.')}"
    if returncode == 0:
        return "ncu printed no table of counters"
    return f"ncu exited with status {returncode} without a table of counters"


def run_profiler(cmd: list[str], timeout_s: float = 300.0, env: dict | None = None) -> Profile:
    """Run an ncu command line; return its kernels (parse_raw_csv) and output. Raises CounterError with
    one sentence (classify) when it fails, prints no table, profiled no kernel or runs past
    timeout_s."""
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:
        raise CounterError(f"ncu ran past its limit of {timeout_s:.0f} s and was stopped", "profiler_timeout") from None
    except OSError as e:
        raise CounterError(f"ncu could not be started ({e.strerror or e})", "profiler_not_started") from None
    both = done.stdout + "\n" + done.stderr
    kernels = []
    if done.returncode == 0:
        try:
            kernels = parse_raw_csv(done.stdout)
        except CounterError:
            kernels = []
    if not kernels:  # a refusal, a profiler that did not load, or nothing profiled: say which
        raise CounterError(classify(both, done.returncode), "profiler_failed")
    return Profile(kernels, both)


def ratio(measured, counted) -> float | None:
    """Return measured / counted, or None where either is unknown or counted is not above 0."""
    if measured is None or counted is None:
        return None
    try:
        measured, counted = float(measured), float(counted)
    except (TypeError, ValueError):
        return None
    if not (math.isfinite(measured) and math.isfinite(counted)) or counted <= 0:
        return None
    return measured / counted


def dram_flag(dram_ratio: float | None, fraction: float = FLAG_FRACTION) -> str:
    """Return the flag of a point whose measured DRAM bytes differ from the formula's by more
    than fraction ("DRAM bytes 1.23x the formula's", code dram_beyond_formula), else ""."""
    if dram_ratio is None or abs(dram_ratio - 1.0) <= fraction + 1e-12:
        return ""
    more = "more" if dram_ratio > 1 else "fewer"
    return Reason(f"DRAM bytes {dram_ratio:.2f}x the formula's ({abs(dram_ratio - 1):.0%} {more}, beyond "
                  f"{fraction:.0%})", "dram_beyond_formula")


def counter_row(formula: dict, totals: dict, kernels: list[dict] | None = None) -> dict:
    """Return a counters.csv row: formula (the measurement row's point_id, op, impl, dtype,
    shape, flops, bytes, read_bytes, write_bytes, l2_bytes, l1_bytes and what else it carries)
    beside the counters' totals (sum_kernels), with the ratios (measured / counted) and the
    DRAM flag."""
    row = dict(formula)
    row.update(totals)
    row["dram_ratio"] = ratio(totals.get("hw_dram_bytes"), formula.get("bytes"))
    row["read_ratio"] = ratio(totals.get("hw_dram_read_bytes"), formula.get("read_bytes"))
    row["write_ratio"] = ratio(totals.get("hw_dram_write_bytes"), formula.get("write_bytes"))
    row["l2_ratio"] = ratio(totals.get("hw_l2_bytes"), formula.get("l2_bytes"))
    row["l1_ratio"] = ratio(totals.get("hw_l1_bytes"), formula.get("l1_bytes"))
    row["flops_per_tensor_inst"] = ratio(formula.get("flops"), totals.get("hw_tensor_inst"))
    row["flag"] = dram_flag(row["dram_ratio"])
    if kernels is not None:
        row["kernels"] = len(kernels)
        names = list(dict.fromkeys(k["kernel"] for k in kernels))
        row["kernel_names"] = "; ".join(names[:4]) + (f"; +{len(names) - 4} more" if len(names) > 4 else "")
    row.setdefault("status", "ok")
    return row
