"""A CPU's clock, measured: a chain of dependent integer adds timed on every core at once.

Why measured: a VM without cpufreq reports in /proc/cpuinfo the nominal clock its host was
sold at, while its cores boost far above it, so a peak computed at that clock is exceeded by
the very units it counts. An add whose input is the previous
add's output takes one cycle on every x86 and Arm core, so n iterations of a chain of CHAIN
adds take n x CHAIN cycles and the clock is n x CHAIN over their seconds (the method of the
Cache-Aware Roofline Model's tools).

Why a C file compiled at run time (bench/hw/add_chain.c, with the system's `cc`): the chain
must be machine adds, one after another, with nothing between them. Python, numpy and
torch run no such loop (an interpreter step costs tens of cycles; numpy and torch reduce in
parallel lanes), ctypes can call compiled code but cannot make it, and counters of cycles
(perf_event_open) are mostly closed inside a VM. The same compiler the project's STREAM
check uses (.ci/stream-check) is on most Linux machines; where none is, or it fails, the
clock stays the one the OS reports and is labelled by where it came from ("cpufreq
maximum" or "nominal"), never passed off as measured.

Every core runs its own copy at once: the peaks multiply the cores by one clock, and a core
boosts higher alone than with all of them busy. The clock is the copies' mean. Each copy
times its chain in its thread's own CPU time, not wall time: on a busy machine the scheduler
sets a copy aside for other processes, and that time is no cycle of its chain.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

SOURCE = Path(__file__).with_name("add_chain.c")
MEASURED = "measured (dependent add chain)"   # the basis of a measured clock
CPUFREQ = "cpufreq maximum"                   # the kernel's cpuinfo_max_freq
NOMINAL = "nominal"                           # /proc/cpuinfo's MHz without cpufreq: a VM's sold clock
ITERATIONS = 1 << 19   # 64 x 2^19 adds: 34 million cycles, about 10 ms at 3.4 GHz
REPS = 5               # best of 5 at each length (noise only slows a run)
PLAUSIBLE_MHZ = (200.0, 8000.0)  # a figure outside this is a broken timing, not a clock
TIMEOUT_S = 30


def clock_from_timings(chain: int, iterations: int, short_s: float, long_s: float) -> float | None:
    """Return the clock in MHz of a chain of `chain` one-cycle adds run `iterations` times in
    short_s seconds and twice as many times in long_s: the extra iterations x chain cycles over
    the extra seconds (the fixed costs of a run cancel); None where the longer run was not
    longer (a timing broken by noise) or the figure is no clock a CPU runs at (PLAUSIBLE_MHZ)."""
    extra_s = long_s - short_s
    if extra_s <= 0 or chain <= 0 or iterations <= 0:
        return None
    mhz = chain * iterations / extra_s / 1e6
    return mhz if PLAUSIBLE_MHZ[0] <= mhz <= PLAUSIBLE_MHZ[1] else None


def parse_output(text: str) -> float | None:
    """Return the clock in MHz of one add_chain run's line ("CHAIN N short_s long_s checksum"),
    or None where the line cannot be read."""
    try:
        chain, iterations, short_s, long_s = text.split()[:4]
        return clock_from_timings(int(chain), int(iterations), float(short_s), float(long_s))
    except ValueError:
        return None


def compiler() -> str | None:
    """Return the C compiler to build add_chain.c with: $CC, else cc, gcc or clang on PATH; None
    where there is none."""
    names = [os.environ["CC"]] if os.environ.get("CC") else []
    return next((path for name in names + ["cc", "gcc", "clang"] if (path := shutil.which(name))), None)


def measure_clock(copies: int, iterations: int = ITERATIONS, reps: int = REPS) -> dict:
    """Return {"clock_mhz", "why"}: the mean clock in MHz of `copies` add_chain runs at once
    (one per core), or None with one sentence saying why it could not be measured (no
    compiler, a failed build, a run that failed or read no plausible clock)."""
    cc = compiler()
    if cc is None:
        return {"clock_mhz": None, "why": "no C compiler (cc, gcc or clang) on PATH to build the add chain"}
    with tempfile.TemporaryDirectory(prefix="roofbench-clock-") as tmp:
        binary = Path(tmp) / "add_chain"
        try:
            built = subprocess.run([cc, "-O2", "-o", str(binary), str(SOURCE)], capture_output=True, text=True,
                                   timeout=TIMEOUT_S)
        except (OSError, subprocess.SubprocessError) as e:
            return {"clock_mhz": None, "why": f"{Path(cc).name} could not build the add chain ({type(e).__name__})"}
        if built.returncode != 0:
            first = (built.stderr.strip().splitlines() or ["no message"])[0][:160]
            return {"clock_mhz": None, "why": f"{Path(cc).name} could not build the add chain ({first})"}
        runs = []
        try:
            for _ in range(max(1, copies)):
                runs.append(subprocess.Popen([str(binary), str(iterations), str(reps)], stdout=subprocess.PIPE,
                                             stderr=subprocess.DEVNULL, text=True))
            outputs = [r.communicate(timeout=TIMEOUT_S)[0] for r in runs]
        except (OSError, subprocess.SubprocessError) as e:
            for r in runs:
                r.kill()
                r.wait()
            return {"clock_mhz": None, "why": f"the add chain did not run ({type(e).__name__})"}
    clocks = [parse_output(out) for out in outputs]
    if not clocks or any(c is None for c in clocks):
        return {"clock_mhz": None, "why": "the add chain's timings gave no plausible clock (a run slowed by noise)"}
    return {"clock_mhz": sum(clocks) / len(clocks), "why": ""}


def clock_record(reported_mhz: float | None, has_cpufreq: bool, measured: dict | None) -> dict:
    """Return the device record's clock fields (run.json's device extra): "clock_mhz" (the clock
    a CPU's computed peaks use) and "clock_basis" (MEASURED, CPUFREQ or NOMINAL), with
    "measured_clock_mhz" and, where the measuring failed, "clock_not_measured" (why). A measured
    clock wins; else cpufreq's maximum; else the clock /proc/cpuinfo reports, labelled nominal."""
    measured = measured or {}
    out = {"measured_clock_mhz": measured.get("clock_mhz")}
    if measured.get("why"):
        out["clock_not_measured"] = measured["why"]
    if measured.get("clock_mhz"):
        return {**out, "clock_mhz": round(measured["clock_mhz"], 1), "clock_basis": MEASURED}
    return {**out, "clock_mhz": reported_mhz, "clock_basis": CPUFREQ if has_cpufreq and reported_mhz else NOMINAL}
