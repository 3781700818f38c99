"""Which machine a run was made on: the identity of a device record (run.json's "device",
DeviceInfo.to_dict's fields), derived for older runs from what they recorded, and the one
sentence every reader of another run's roofs warns with. Pure functions of dicts (no files),
so every layer can ask them: bench.hw.device for a live device's id, bench.api, the model
command and the fleet report for recorded ones.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from bench.util import Reason


def machine_key(device: dict, with_machine_id: bool = True) -> str:
    """Return 12 hex digits that tell one machine from another, hashed from run.json's device:
    the machine id (/etc/machine-id, where recorded), the model name and CPU signature
    (family/model/stepping), the SIMD flags, every cache level (name, size, instances) and the
    memory in whole GiB (MemTotal moves by a few KiB between boots). Two VMs of one host name
    differ in the machine id, and a Zen 4 from a Zen 5 in the signature, flags and caches."""
    caches = [(c.get("name"), c.get("size_bytes"), c.get("instances")) for c in device.get("caches") or []]
    mem = device.get("memory_bytes")
    parts = {"name": device.get("name"), "signature": device.get("cpu_signature"),
             "flags": sorted(device.get("cpu_flags") or []), "caches": caches,
             "memory_gib": round(mem / 2**30) if mem else None}
    if with_machine_id:
        parts["machine_id"] = device.get("machine_id")
    return hashlib.sha1(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:12]


def device_id(device: dict) -> str:
    """Return the physical device's identity from a device record (DeviceInfo.to_dict's
    fields): a GPU's UUID; else "<host>:cpu:<machine_key>" for a CPU; else
    "<host>:<torch device>:<machine_key>" for a GPU that gave no UUID."""
    if device.get("uuid"):
        return device["uuid"]
    kind = "cpu" if device.get("kind", device.get("torch_device")) == "cpu" else device.get("torch_device", "?")
    return f"{device.get('host') or 'unknown'}:{kind}:{machine_key(device)}"


def device_identity(device: dict, run_dir) -> dict:
    """Return {"host", "id", "pci_bus_id"} of run.json's device. A run that recorded its
    machine (`machine_id`, possibly null) keeps its id. Older runs get theirs derived
    (device_id) from what they recorded: a GPU's UUID from `extra` where it was kept; else
    the host, model, flags and caches; a run that recorded none of these is
    "<run folder>:<torch device>", so two such runs are never taken for one device."""
    host = device.get("host") or "unknown"
    uid = device.get("id") if "machine_id" in device else None
    uid = uid or device.get("uuid") or (device.get("extra") or {}).get("uuid")
    if not uid and (device.get("name") or device.get("caches")):
        uid = device_id({**device, "host": host, "uuid": None})
    if not uid:
        uid = f"{Path(run_dir).name}:{device.get('torch_device', '?')}"
    return {"host": host, "id": uid, "pci_bus_id": device.get("pci_bus_id")}


# the codes of other_machine's sentences: measured on another machine; or it cannot be told from this one
OTHER_MACHINE = "other_machine"
UNKNOWN_MACHINE = "unknown_machine"


def differing_parts(recorded: dict, here: dict) -> list[str]:
    """Return the parts in which device record `recorded` differs from `here` (both
    DeviceInfo.to_dict records), as other_machine names them: ["GPU UUID"] when both have a UUID
    and they differ, else those of host name, machine id, model, CPU signature, flags, caches
    and memory (whole GiB) that differ; a part one side did not record (older runs) is not a
    difference."""
    if recorded.get("uuid") and here.get("uuid"):
        return [] if recorded["uuid"] == here["uuid"] else ["GPU UUID"]
    caches = lambda d: [(c.get("name"), c.get("size_bytes"), c.get("instances"))  # noqa: E731
                        for c in d.get("caches") or []]
    gib = lambda d: round(d["memory_bytes"] / 2**30) if d.get("memory_bytes") else None  # noqa: E731
    checks = [("host name", lambda d: d.get("host")), ("machine id", lambda d: d.get("machine_id")),
              ("model", lambda d: d.get("name")), ("CPU signature", lambda d: d.get("cpu_signature")),
              ("flags", lambda d: sorted(d.get("cpu_flags") or [])), ("caches", caches), ("memory", gib)]
    return [what for what, get in checks if get(recorded) not in (None, []) and get(here) not in (None, [])
            and get(recorded) != get(here)]


def other_machine(recorded: dict, here: dict) -> str:
    """Return one sentence when the roofs of a run whose device is `recorded` were measured on
    another machine than `here` (both DeviceInfo.to_dict records), else "": a bench.util.Reason
    with code OTHER_MACHINE naming the parts that differ (differing_parts); a run that recorded
    no machine id and matches in every other part cannot be told from this machine, and the
    sentence (code UNKNOWN_MACHINE) says so."""
    differ = differing_parts(recorded, here)
    both_uuids = recorded.get("uuid") and here.get("uuid")
    if not differ and not both_uuids and not recorded.get("machine_id"):
        return Reason("the roofs' run recorded no machine id, so it cannot be told from this machine (the same model, "
                      "flags and caches): if it ran on another machine, its bounds describe that one; re-measure here "
                      "(python run_bench.py --quick) to be sure", UNKNOWN_MACHINE)
    if not differ:
        return ""
    return Reason(f"the roofs were measured on another machine ({recorded.get('name', '?')} on "
                  f"{recorded.get('host') or 'an unrecorded host'}; {', '.join(differ)} differ from this "
                  f"{here.get('name', '?')} on {here.get('host', '?')}): its bounds describe that machine, so a "
                  "percentage of them says little here; measure this one (python run_bench.py --quick) and use its "
                  "run", OTHER_MACHINE)
