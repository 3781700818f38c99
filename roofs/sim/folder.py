"""A simulated run as a run folder in the real on-disk format, written by the run's own writer
(bench.results.RunWriter): measurements.csv, samples.jsonl (gzip-compressed past its size
rule) and run.json, not yet derived. `run_bench.py report`, `check` and `fleet` read it as any
run, so every branch of roofs/ that a GPU's rows reach runs on a CPU.

    write_run(run_dir, machine, noise, seed, scale=1.0) -> run_dir

run.json's "simulated" names the machine model, noise, seed and scale; its "load" is the
model's (no other process), not this host's while it wrote the files.

    write_run(run_dir, machine, noise, seed, extras=True, **extra_args)

adds a GPU model's extras (roofs.sim.extras.extra_run, extra_args its keywords: window_s,
counters, dram_ratio): every row's telemetry, the transfer rows and the sustained windows after
the sweep, counters.csv, and run.json's "sustain" and "counters", as `run_bench.py run
--sustain S --counters N` writes them. Without extras the folder is the sweep alone, as before."""
from __future__ import annotations

import json
from pathlib import Path

from bench.results import UNITS, RunWriter, append_counters
from roofs.sim.extras import extra_run, with_telemetry
from roofs.sim.generate import FAMILIES, as_machine, device_info, simulated
from roofs.sim.noise import NOISES, Noise


def write_run(run_dir, machine, noise, seed: int, scale: float = 1.0, quick: bool = True,
              families: tuple = FAMILIES, extras: bool = False, **extra_args) -> Path:
    """Write one simulated run of machine (simulate()'s arguments) into run_dir (which must not
    exist) as a finished run folder; return run_dir. extras: with the GPU extras (module
    docstring)."""
    m, nz = as_machine(machine), (noise if isinstance(noise, Noise) else NOISES[noise])
    info = device_info(m)
    sim = {"machine": m.key, "noise": nz.name, "seed": int(seed), "scale": float(scale),
           **({"extras": True} if extras else {})}
    rows = simulated(m, nz, seed, scale, quick=quick, families=tuple(families))
    more, options = None, {"quick": quick}
    if extras:
        more = extra_run(m, nz, seed, rows, scale, quick, **extra_args)
        rows = with_telemetry(rows + more.rows, more)
        options.update(sustain=more.sustain["window_s"], counters=more.counters.get("requested", 0))
    meta = {"device": info.to_dict(), "software": info.software, "options": options,
            "command": f"python -m roofs.sim ({m.key}, {nz.name} noise, seed {seed})", "run_kind": "device",
            "units": UNITS, "simulated": sim}
    w = RunWriter(Path(run_dir), meta)
    for x in rows:
        w.add(x)
    if more is None:
        w.finish("complete")
    else:
        for row in more.counter_rows:
            append_counters(run_dir, row)
        w.finish("complete", sustain=more.sustain, **({"counters": more.counters} if more.counters else {}))
    path = Path(run_dir) / "run.json"
    doc = json.loads(path.read_text())
    doc["load"] = {"cores": m.cores, "others": 0.0, "steal": 0.0}
    path.write_text(json.dumps(doc, indent=1))
    return Path(run_dir)
