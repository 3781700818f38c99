"""What the dry run learns from the runs before it on this machine.

The model of bench/aot/predict.py prices a plan from datasheet or computed roofs; how long a
family really takes here (its inputs, checks, slow paths, a VM's noisy memory) it cannot
know. Each finished run writes, per family and kind of run (quick or full), the ratio of
the wall seconds it measured to the seconds the model gave the same rows, and the seconds
the sustained phase and the finishing (roofs, charts, report) took. The next dry run or run
on the same machine scales the model's seconds by the median of the last LEARN_RUNS ratios.

The cache is one small JSON file per kind of machine (cache_key: the device's name, its cores
or SMs and memory, and the cores a CPU run measures with where fewer; not
bench.identity.machine_key, which tells two machines of one kind apart) under ROOFBENCH_CACHE,
else $XDG_CACHE_HOME/roofbench, else ~/.cache/roofbench. A cache that cannot be read or
written is ignored: a prediction never stops a measurement.
"""
from __future__ import annotations

import json
import os
import re
import statistics
from pathlib import Path

import torch

from bench.hw.device import affinity_cpus

LEARN_RUNS = 3          # the ratios a prediction takes the median of, newest first
FAMILY_RATIO = (0.05, 20.0)  # a ratio outside this range is a broken run, not a rate: not kept
CACHE_ENV = "ROOFBENCH_CACHE"


def cache_dir() -> Path:
    """Return the folder of the per-machine caches."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "roofbench"


def cores_used(device) -> int | None:
    """Return how many of a CPU's cores this process measures with, where fewer than it has:
    the fewer of its affinity's CPUs (`taskset`, a cpuset) and torch's threads; else None."""
    if device.kind != "cpu" or not device.compute_units:
        return None
    used = min(n for n in (affinity_cpus(), torch.get_num_threads(), device.compute_units) if n)
    return used if used < device.compute_units else None


def cache_key(device) -> str:
    """Return a file-name-safe key for this machine: device name, compute units and memory, and
    the cores a CPU run measures with where fewer (cores_used): a run on half the cores takes
    twice as long and teaches nothing about a run on all of them."""
    used = cores_used(device)
    raw = (f"{device.kind}-{device.name}-{device.compute_units}-{(device.memory_bytes or 0) >> 30}g"
           + (f"-on-{used}" if used else ""))
    return re.sub(r"[^a-z0-9.]+", "-", raw.lower()).strip("-")


def _path(device) -> Path:
    return cache_dir() / f"timing-{cache_key(device)}.json"


def load(device) -> dict:
    """Return the machine's cache ({} when there is none or it cannot be read)."""
    try:
        data = json.loads(_path(device).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def factors(device, quick: bool) -> dict:
    """Return {family (and "sustained"): the median of its last LEARN_RUNS ratios} and
    {"finish_s": seconds} for this machine and kind of run; {} on a datasheet part (a dry
    run for a device that is not here) or with nothing learned."""
    if (device.extra or {}).get("spec"):
        return {}
    kind = load(device).get("quick" if quick else "full", {})
    out = {}
    for name, values in kind.items():
        if isinstance(values, list) and values:
            out[name] = statistics.median(values[:LEARN_RUNS])
    return out


# The model's error per family on a CPU before this machine has taught it anything: the wall
# seconds over the model's seconds of the committed CPU runs (results/cpu-amd-epyc-20261201T103023Z,
# quick on a 2-core Zen 4, and results/cpu-amd-epyc-20261201T195923Z, full on a 2-core Zen 5),
# the geometric mean of the two where both agree within 15% of it (the probes, about a second,
# do not; tests/test_learned.py derives them again
# from those runs). The model prices timed samples well and misses the per-point work around
# them (inputs, checks, warm-up): GEMMs and GEMVs carry most of it, attention is over-priced.
CPU_PRIOR = {"stream": 1.07, "fma": 1.34, "gemm": 1.65, "gemv": 1.38, "attention": 0.53,
             "sustained": 0.77}
PRIOR_FINISH_S = {"quick": 1.0, "full": 5.1}   # the finishing seconds those two runs learned


def expected(device, quick: bool) -> dict:
    """Return the factors a prediction uses: factors() (this machine's runs), and for a family
    this machine has not taught yet, on a CPU, CPU_PRIOR (and PRIOR_FINISH_S); the families
    taken from the prior are listed under "prior". A GPU or a datasheet part gets factors()."""
    got = factors(device, quick)
    if device.kind != "cpu" or (device.extra or {}).get("spec"):
        return got
    prior = {k: v for k, v in CPU_PRIOR.items() if k not in got}
    if "finish_s" not in got:
        prior["finish_s"] = PRIOR_FINISH_S["quick" if quick else "full"]
    return {**prior, **got, **({"prior": sorted(k for k in prior if k != "finish_s")} if prior else {})}


def learn(device, quick: bool, predicted: dict, measured: dict, finish_s: float | None = None) -> dict | None:
    """Record one finished run: for each family (and "sustained") both predicted by the
    model (raw seconds) and measured (wall seconds), the ratio measured / predicted, newest
    first; and the finishing seconds. Return what was written, or None when it could not be."""
    if (device.extra or {}).get("spec"):
        return None
    data = load(device)
    kind = data.setdefault("quick" if quick else "full", {})
    for name, raw in predicted.items():
        wall = measured.get(name)
        if not raw or raw <= 0 or wall is None:
            continue
        ratio = wall / raw
        if FAMILY_RATIO[0] <= ratio <= FAMILY_RATIO[1]:
            kind[name] = ([round(ratio, 4)] + list(kind.get(name, [])))[:LEARN_RUNS]
    if finish_s is not None:
        kind["finish_s"] = ([round(finish_s, 3)] + list(kind.get("finish_s", [])))[:LEARN_RUNS]
    try:
        path = _path(device)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(data, indent=1))
        tmp.replace(path)
    except OSError:
        return None
    return data
