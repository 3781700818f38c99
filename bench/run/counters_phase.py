"""The counters phase (--counters): after the sweeps and the sustained phase, a few chosen
points are replayed once each under a hardware-counter profiler (bench/hw/counters.py), in a
process of their own (bench/run/replay.py), and their DRAM, L2 and L1 bytes and tensor-pipe
instructions are written beside the formulas' to counters.csv (bench.results.COUNTER_COLUMNS).

    info = run_phase(measurements, device, most, quick, run_dir, say)

No timed sample is taken under the profiler: the phase starts once the timing is over, and
the replays time nothing. Which points (choose): the best row of each roof's candidates (the
sustained phase's rule, roofs.analysis.confirm, one a roof), then each family's fastest
point (GFLOP/s, or GB/s for a family without FLOPs), each point once, at most `most` of them
(host-device copies launch no kernel, and are left out). Where counters cannot be read
(bench.hw.counters.unavailable before the first replay, or a failure that is the machine's,
not the point's: counters refused, a profiler that cannot load), the phase records why in
run.json's "counters" and stops, and the run goes on; a point whose replay fails alone is a
row with status error and its reason.
"""
from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from bench.hw import counters as hw
from bench.hw import device as devmod
from bench.results import Measurement, append_counters
from bench.util import Reason, first_line
from roofs.analysis.confirm import counted_choice

DEFAULT_POINTS = 6        # --counters without a number
REPLAY_TIMEOUT_S = 240.0  # one point's replay under ncu (its import, setup, tuning and kernel replays)
# failures of the machine, not of a point: every later replay would fail alike
MACHINE_FAILURES = tuple(why for needle, why in hw.FAILURES if needle != "No kernels were profiled")


def choose(measurements: list[Measurement], device: devmod.DeviceInfo, most: int = DEFAULT_POINTS
           ) -> list[tuple[str, Measurement]]:
    """Return [(why it was chosen, the sweep's measurement)]: each roof's best candidate, then
    each family's fastest point, each point once, at most `most` (module docstring;
    roofs.analysis.confirm.counted_choice)."""
    return counted_choice(measurements, device.to_dict(), most)


def formula_of(m: Measurement, why: str) -> dict:
    """Return the counted side of a counters.csv row: the point's identity and its formulas'
    FLOPs and bytes (by direction and by level where known), from its measurement."""
    row = m.row()
    keys = ("point_id", "op", "impl", "dtype", "shape", "flops", "bytes", "read_bytes", "write_bytes", "l2_bytes",
            "l1_bytes")
    return {**{k: row.get(k) for k in keys}, "chosen_as": why}


def replay_argv(m: Measurement, device: devmod.DeviceInfo, quick: bool) -> list[str]:
    """Return the replay program of one point (bench/run/replay.py), run by this interpreter."""
    return [sys.executable, "-m", "bench.run.replay", "--op", m.op, "--impl", m.impl, "--point", json.dumps(m.point),
            "--device", device.torch_device] + (["--quick"] if quick else [])


def replay_env() -> dict:
    """Return the replay's environment: this one, with the checkout first on PYTHONPATH (a run
    started from another folder still finds bench.run.replay; nothing here is installed)."""
    root = str(Path(__file__).resolve().parents[2])
    path = os.environ.get("PYTHONPATH", "")
    return dict(os.environ, PYTHONPATH=root + (os.pathsep + path if path else ""))


def _replay_detail(output: str) -> str:
    """Return what the replayed impl chose (its "roofbench-replay: {...}" line), "" if it said nothing."""
    for line in reversed(output.splitlines()):
        if line.startswith("roofbench-replay: {"):
            try:
                return str(json.loads(line.split(": ", 1)[1]).get("detail", ""))
            except ValueError:
                return ""
    return ""


def run_phase(measurements: list[Measurement], device: devmod.DeviceInfo, most: int, quick: bool, run_dir,
              say: Callable[[str], None] = print, profile: Callable | None = None) -> dict:
    """Replay the chosen points under ncu, one row each into run_dir's counters.csv; return
    run.json's "counters": the tool, the points, how many were flagged, the seconds spent, or
    why no counters were read. profile(cmd) -> bench.hw.counters.Profile defaults to
    bench.hw.counters.run_profiler."""
    t0 = time.perf_counter()
    info = {"requested": most, "tool": None, "points": 0, "flagged": 0, "why": ""}
    why = hw.unavailable(device)
    if why:
        info["why"] = why
        say(f"roofbench: counters: not collected: {why}.")
        return info
    ncu = hw.find_ncu()
    info["tool"] = ncu
    chosen = choose(measurements, device, most)
    if not chosen:
        info["why"] = "no point ran to be replayed"
        say("roofbench: counters: no point ran to be replayed.")
        return info
    profile = profile or (lambda cmd: hw.run_profiler(cmd, REPLAY_TIMEOUT_S, replay_env()))
    say(f"roofbench: counters: replaying {len(chosen)} points once each under {ncu} (after the timing)")
    for k, (label, m) in enumerate(chosen, 1):
        formula = formula_of(m, label)
        try:
            got = profile(hw.ncu_command(ncu, replay_argv(m, device, quick), device.compute_capability))
        except (hw.CounterError, TypeError, ValueError, OSError) as e:  # TypeError: axes JSON cannot carry
            reason = e.reason if isinstance(e, hw.CounterError) else \
                Reason(f"the replay could not start: {first_line(e)}", "replay_not_started")
            append_counters(run_dir, {**formula, "status": "error", "reason": reason, "tool": "ncu"})
            info["points"] += 1
            say(f"[counters {k}/{len(chosen)}] {m.impl} {m.shape}: no counters ({reason})")
            if reason in MACHINE_FAILURES:  # the machine refuses counters: every other point would too
                info["why"] = reason
                say(f"roofbench: counters: not collected: {reason}.")
                break
            continue
        kernels = got.kernels
        row = hw.counter_row(formula, hw.sum_kernels(kernels), kernels)
        row.update(tool="ncu", replay_detail=_replay_detail(got.output))
        append_counters(run_dir, row)
        info["points"] += 1
        info["flagged"] += bool(row["flag"])
        dram = f"DRAM {row['dram_ratio']:.2f}x the formula's" if row["dram_ratio"] is not None else "DRAM bytes unknown"
        say(f"[counters {k}/{len(chosen)}] {m.impl} {m.shape}: {len(kernels)} kernel(s), {dram}"
            + (" (flagged)" if row["flag"] else ""))
    info["seconds"] = round(time.perf_counter() - t0, 1)
    return info
