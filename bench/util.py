"""Small helpers shared across the suite: element sizes, byte sizes and numbers for people
(fmt_bytes, fmt_num, plural), a refusal with its code (Refusal), the first line of an error,
whether Triton is interpreting, the roofbench commit, and a finished command's exit (exit_now)."""
from __future__ import annotations

import atexit
import contextlib
import difflib
import math
import os
import resource
import subprocess
import sys
from pathlib import Path

import torch

from bench import precisions

ROOT = Path(__file__).resolve().parent.parent

# each precision's torch dtype name (bench/precisions.py); a packed format (fp4) has none of its own
TORCH_NAMES = {p.name: p.storage for p in precisions.ROWS if p.storage and p.storage != "uint8"}


# the two spellings of a dtype: a precision's short name and torch's name, accepted alike
DTYPE_SPELLINGS = tuple((p.name, p.long) for p in precisions.ROWS if p.long)


def exit_now(code: int | None):
    """End this process with exit code `code` (None: 0), its work done and its files closed: the exit
    handlers run (atexit: multiprocessing's, logging's, tempfile's), the standard streams are
    flushed, and the interpreter's teardown is skipped. Freeing, one by one, the million objects
    that torch, pandas and matplotlib made costs 0.8 s of CPU, a third of a short command's."""
    atexit._run_exitfuncs()  # what a normal exit runs before the teardown (no public name for it)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a reader that went away, a stream closed
            stream.flush()
    os._exit(code or 0)


def did_you_mean(word: str, choices, show=str) -> str:
    """Return " (did you mean 'X'?)" for the choice closest to word (difflib's ratio of at
    least 0.6, case-blind), X that choice as show() names it (precision_name: one spelling), or
    "" when none is close."""
    choices = [str(c) for c in choices]
    lower = {c.lower(): c for c in choices}
    close = difflib.get_close_matches(str(word).lower(), list(lower), n=1, cutoff=0.6)
    return f" (did you mean '{show(lower[close[0]])}'?)" if close else ""


def dtype_spellings(name: str) -> tuple[str, ...]:
    """Return name (lower-cased: dtypes are read case-blind) and its other spelling ("FP32" ->
    ("fp32", "float32"), "bfloat16" -> ("bfloat16", "bf16")), or (name,) for a dtype with one
    spelling ("int8", "fp8e4m3")."""
    name = name.lower()
    for pair in DTYPE_SPELLINGS:
        if name in pair:
            return (name, pair[1 - pair.index(name)])
    return (name,)


def precision_name(name: str) -> str:
    """Return the precision's short name for either spelling, case-blind ("Float32" -> "fp32")."""
    return precisions.short_name(name)


def offchip_level(device_kind: str) -> str:
    """Return the name of a device's off-chip memory level: "hbm" on a GPU (kind "cuda", which
    ROCm's torch shares), "dram" on anything else."""
    return "hbm" if device_kind == "cuda" else "dram"


def missing(v) -> bool:
    """Return True when v is no number: None, a float or numpy NaN, or pandas' NA."""
    if v is None:
        return True
    try:
        return bool(v != v)
    except TypeError:  # pandas' NA has no truth value
        return True


def number(v) -> float | None:
    """Return v as a float, or None when it is missing (missing) or not a number ("", "abc")."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if f != f else f


def itemsize(dtype) -> int:
    """Return the bytes of one element of dtype: a torch.dtype, a torch name ("bfloat16")
    or a precision name ("bf16", "fp8e4m3")."""
    if isinstance(dtype, torch.dtype):
        return dtype.itemsize
    return getattr(torch, TORCH_NAMES.get(dtype, dtype)).itemsize


def fmt_bytes(n: float) -> str:
    """Return n bytes in binary units with 3 significant digits, in the smallest unit that
    keeps the number under 1000: "512 B", "0.996 MiB" (not "1.02e+03 KiB"), "1.5 GiB"."""
    if n < 1000:
        return f"{int(n)} B"
    units = (("KiB", 2**10), ("MiB", 2**20), ("GiB", 2**30))
    # the first unit whose rounded number stays under 1000, else the last one
    unit, scale = next(((u, s) for u, s in units if float(f"{n / s:.3g}") < 1000), units[-1])
    v = n / scale
    return f"{v:.3g} {unit}" if v < 999.5 else f"{v:.0f} {unit}"  # past 1000 GiB: whole GiB


def option_size(n: float, up: bool = False) -> str:
    """Return n bytes as a size option takes it, with no space ("24KiB", "11.8GiB"), so advice
    can be typed as written; up=True rounds the 3 significant digits up (an "at least" figure
    never rounds below what is needed)."""
    if up and n >= 1000:
        for scale in (2**10, 2**20, 2**30):
            if n / scale < 999.5:
                break
        v = n / scale
        step = 10 ** (math.floor(math.log10(v)) - 2)
        n = math.ceil(v / step - 1e-9) * step * scale
    return fmt_bytes(n).replace(" ", "")


def fmt_halfwidth(half: float, digits: int = 0) -> str:
    """Return an interval's half-width as people read it: "+/-12%" (digits after the point),
    or "over +/-999%" past that (a top many times its roof is no bound a reader can use,
    whatever its digits)."""
    return f"+/-{half:.{digits}%}" if half < 9.995 else "over +/-999%"


def fmt_num(v, digits: int = 4) -> str:
    """Return a number as people write it: thousands separated and whole from 1,000 up
    ("21,890", not "2.189e+04"), else digits significant digits ("12.35", "0.09375");
    "" for None or NaN."""
    if missing(v):
        return ""
    if isinstance(v, bool) or not isinstance(v, (int, float)) and not hasattr(v, "__float__"):
        return str(v)
    v = float(v)
    if v in (float("inf"), float("-inf")):
        return "inf" if v > 0 else "-inf"
    if abs(v) >= 1000 or v == int(v):
        return f"{v:,.0f}"
    return f"{v:.{digits}g}"


def plural(n: int, word: str, many: str | None = None) -> str:
    """Return "1 token", "2 tokens", "21,890 rows": a count with its noun."""
    return f"{fmt_num(n)} {word if n == 1 else (many or word + 's')}"


class Refusal(ValueError):
    """Input that cannot be used: one sentence for people (str), naming what was wrong and what
    would work, and `code`, a short name of the fault that callers and tests read (the sentence's
    wording is free to change; the code is not). Each module's own error subclasses it."""

    def __init__(self, message: str, code: str | None = None):
        super().__init__(message)
        self.code = code


class Reason(str):
    """A sentence saying why something was not done (a str, read and written as one) that also
    carries `code`, a short name of the cause that callers and tests read."""

    def __new__(cls, sentence: str, code: str):
        out = super().__new__(cls, sentence)
        out.code = code
        return out

    def __reduce__(self):  # pickled (a worker's result) with its code
        return (Reason, (str(self), self.code))


def first_line(e: BaseException, limit: int = 200) -> str:
    """Return "ExceptionType: first line of its message", cut to limit characters."""
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:limit] if text else ''}".strip().rstrip(":")


def cpu_seconds() -> float:
    """Return the CPU seconds this process and its waited-for children (ptxas, a pool's
    workers once joined) have used."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


# the kernel's clock tick (USER_HZ), the unit of /proc/stat and /proc/<pid>/stat's CPU times
CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


# /proc/stat's cpu line (proc(5)): user nice system idle iowait irq softirq steal guest guest_nice,
# in clock ticks. Busy is the time the cores ran work of this machine: user, nice, system, irq and
# softirq (guest and guest_nice are already counted inside user and nice). Steal is apart: time
# a VM's cores were runnable but the hypervisor ran something else on them.
BUSY_FIELDS = (0, 1, 2, 5, 6)
STEAL_FIELD = 7


def cpu_times(stat_text: str) -> tuple[float, float] | None:
    """Return (busy seconds, steal seconds) that all of a machine's cores have spent since boot,
    read from the text of /proc/stat (its first line, the "cpu" total; see BUSY_FIELDS); steal
    is 0 where the line is too short to have it (kernels before 2.6.11); None where the text
    has no such line."""
    first = (stat_text or "").split("\n", 1)[0].split()
    if not first or first[0] != "cpu":
        return None
    try:
        ticks = [int(v) for v in first[1:]]
    except ValueError:
        return None
    if len(ticks) <= max(BUSY_FIELDS):
        return None
    steal = ticks[STEAL_FIELD] if len(ticks) > STEAL_FIELD else 0
    return sum(ticks[i] for i in BUSY_FIELDS) / CLOCK_TICKS, steal / CLOCK_TICKS


def machine_cpu_seconds(proc: str = "/proc") -> tuple[float, float] | None:
    """Return (busy seconds, steal seconds) of all this machine's cores since boot (cpu_times of
    /proc/stat), or None where there is no /proc/stat."""
    try:
        with open(os.path.join(proc, "stat")) as f:
            return cpu_times(f.readline())
    except OSError:
        return None


def machine_busy_seconds(proc: str = "/proc") -> float | None:
    """Return the CPU seconds all of this machine's cores have spent busy since boot, steal
    left out (machine_cpu_seconds); None where there is no /proc/stat."""
    times = machine_cpu_seconds(proc)
    return times[0] if times else None


def others_cores(busy_s: float, own_s: float, wall_s: float) -> float:
    """Return how many cores other processes kept busy on average over wall_s seconds in which
    the machine's cores were busy busy_s seconds and this process (and its waited-for children)
    own_s of them; never below 0 (the two clocks tick at different grains)."""
    return max(0.0, (busy_s - own_s) / wall_s) if wall_s > 0 else 0.0


def triton_interpreting() -> bool:
    """Return whether Triton kernels run under its CPU interpreter (TRITON_INTERPRET=1)."""
    return os.environ.get("TRITON_INTERPRET", "") == "1"


def git_commit(root: Path = ROOT) -> str:
    """Return the roofbench commit this code runs from (with "+dirty" when the work tree
    has changes), or "unknown" outside a git checkout. ROOFBENCH_COMMIT, when set, wins: a
    copy of the work tree shipped to another machine may carry a stale .git."""
    if os.environ.get("ROOFBENCH_COMMIT"):
        return os.environ["ROOFBENCH_COMMIT"]
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                             timeout=5).stdout.strip()
        if not sha:
            return "unknown"
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return sha + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


# Messages of CUDA errors after which the context is unusable (every later call fails).
FATAL_MARKERS = ("illegal memory access", "an illegal instruction", "unspecified launch failure",
                 "misaligned address", "device-side assert", "invalid program counter",
                 "hardware stack error", "uncorrectable ecc", "launch timed out", "cudaerrorlaunchfailure",
                 "illegal address")


class DeviceLost(RuntimeError):
    """The device's context is dead after a CUDA error; nothing more can run on it."""


def is_fatal(e: BaseException) -> bool:
    """Return whether e is a CUDA error that poisons the context (see FATAL_MARKERS)."""
    text = f"{type(e).__name__}: {e}".lower()
    return any(m in text for m in FATAL_MARKERS)


@contextlib.contextmanager
def swapped(obj, **values):
    """Set obj's attributes to values for the duration of a with block, then restore each
    (the ahead-of-time plan records kernel launches and makes inputs on the meta device this
    way; nothing stays changed)."""
    saved = {name: getattr(obj, name) for name in values}
    try:
        for name, value in values.items():
            setattr(obj, name, value)
        yield obj
    finally:
        for name, value in saved.items():
            setattr(obj, name, value)


@contextlib.contextmanager
def environ_restored():
    """Restore os.environ to what it was when the with block began."""
    saved = dict(os.environ)
    try:
        yield os.environ
    finally:
        os.environ.clear()
        os.environ.update(saved)


def low_time(samples_s, q: float) -> float | None:
    """Return the q-quantile (linear interpolation) of a row's sample times, or None without
    samples: noise only ever slows a call, so a low quantile sits nearest the call's own time
    (ARCHITECTURE.md, "How a roof is made")."""
    vals = sorted(float(t) for t in (samples_s or ()) if t == t and t is not None and float(t) > 0)
    if not vals:
        return None
    pos = q * (len(vals) - 1)
    i = int(pos)
    frac = pos - i
    return vals[i] if i + 1 >= len(vals) else vals[i] * (1 - frac) + vals[i + 1] * frac
