"""Identity in every run: host, device id and PCI bus id in run.json's device, a machine key
that tells two VMs of one host name apart, a derived identity for runs made before they were
recorded, and the one sentence that says roofs come from another machine."""
import dataclasses
import json
import socket
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest

from bench import api
from bench.hw.device import CacheLevel, DeviceInfo, cpu_info, pci_of
from bench.hw.nvidia import _pci_text
from bench.identity import OTHER_MACHINE, UNKNOWN_MACHINE, device_identity, differing_parts, machine_key, other_machine

DATA = Path(__file__).parent / "data"


def test_a_cpu_is_its_host_and_its_machine_key():
    info = cpu_info()
    d = info.to_dict()
    assert d["host"] == socket.gethostname() and d["pci_bus_id"] is None
    assert d["id"] == f"{socket.gethostname()}:cpu:{machine_key(d)}" and len(machine_key(d)) == 12
    assert "machine_id" in d and "cpu_signature" in d
    assert device_identity(d, "/r/x")["id"] == d["id"]  # a new run keeps the id it recorded


VM = DeviceInfo("cpu", "cpu", "AMD EPYC", 24 * 2**30, 2, "cores",
                (CacheLevel("l1", 32768, 2), CacheLevel("l2", 2**20, 2), CacheLevel("l3", 2**25)),
                cpu_flags=("avx2", "avx512f"), host="vm", machine_id="a" * 32, cpu_signature="25/17/1")


@pytest.mark.parametrize("change,what", [
    ({"machine_id": "b" * 32}, "machine id"),                      # two VMs of one image and host name
    ({"cpu_signature": "26/2/0"}, "CPU signature"),                # a Zen 5 beside a Zen 4, both "AMD EPYC"
    ({"cpu_flags": ("avx2",)}, "flags"),
    ({"caches": (CacheLevel("l1", 49152, 2), CacheLevel("l2", 2**20, 2), CacheLevel("l3", 2**25))}, "caches"),
])
def test_two_vms_named_alike_are_two_devices(change, what):
    other = dataclasses.replace(VM, **change)
    assert other.id != VM.id and other.id.startswith("vm:cpu:")
    w = other_machine(other.to_dict(), VM.to_dict())
    assert differing_parts(other.to_dict(), VM.to_dict()) == [what]
    assert w.code == OTHER_MACHINE and what in w and "\n" not in w
    # MemTotal moves by a few KiB between boots: the same machine still
    same = dataclasses.replace(VM, memory_bytes=VM.memory_bytes - 8192)
    assert same.id == VM.id and other_machine(same.to_dict(), VM.to_dict()) == ""


def test_a_gpu_is_its_uuid_and_else_its_host_and_index():
    gpu = DeviceInfo("cuda", "cuda:3", "NVIDIA H200", 2**37, 132, "SMs", (), host="n7",
                     uuid="GPU-1234", pci_bus_id="0000:3b:00.0")
    assert gpu.to_dict()["id"] == "GPU-1234" and gpu.to_dict()["pci_bus_id"] == "0000:3b:00.0"
    assert DeviceInfo("cuda", "cuda:3", "x", 1, 1, "SMs", (), host="n7").id.startswith("n7:cuda:3:")


def test_pci_bus_ids_spelled_one_way():
    assert pci_of(SimpleNamespace(pci_bus_id=0x3b, pci_device_id=0, pci_domain_id=0)) == "0000:3b:00.0"
    assert pci_of(SimpleNamespace()) is None
    assert _pci_text(b"00000000:3B:00.0") == "0000:3b:00.0" and _pci_text("00000001:C1:1F.0") == "0001:c1:1f.0"


def test_old_runs_get_an_identity_derived_from_what_they_recorded():
    old = {"torch_device": "cuda:1", "extra": {"uuid": "GPU-ab"}}
    assert device_identity(old, "/r/x") == {"host": "unknown", "id": "GPU-ab", "pci_bus_id": None}
    a = device_identity({"torch_device": "cpu"}, "/r/run-a")   # nothing recorded: never merged with another
    b = device_identity({"torch_device": "cpu"}, "/r/run-b")
    assert a["id"] == "run-a:cpu" and a["id"] != b["id"]
    # a run that recorded "<host>:cpu" (before the machine key): derived from its model, flags and caches
    rec = {k: v for k, v in VM.to_dict().items() if k not in ("machine_id", "cpu_signature")}
    zen4 = dict(rec, id="vm:cpu")
    zen5 = dict(rec, id="vm:cpu", caches=[dict(c, size_bytes=2 * c["size_bytes"]) for c in rec["caches"]])
    i4, i5 = device_identity(zen4, "/r/a")["id"], device_identity(zen5, "/r/b")["id"]
    assert i4.startswith("vm:cpu:") and i5.startswith("vm:cpu:") and i4 != i5
    assert device_identity(dict(zen4), "/r/c")["id"] == i4   # two runs of one old machine: one device
    # it recorded no machine id: one that matches in everything else cannot be told from this machine
    assert other_machine(zen4, VM.to_dict()).code == UNKNOWN_MACHINE and differing_parts(zen4, VM.to_dict()) == []


def test_roofs_from_another_machines_run_warn_in_one_sentence():
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        roofs = api.roofs_from(DATA / "run_a")   # a recorded run of some other machine
    foreign = [w for w in seen if issubclass(w.category, api.ForeignRoofsWarning)]
    assert len(foreign) == 1 and roofs.foreign and str(foreign[0].message).endswith(roofs.foreign)
    assert "\n" not in roofs.foreign


def test_the_machine_id_is_recorded_hashed_never_raw():
    from bench.hw.device import machine_id
    raw = Path("/etc/machine-id")
    mid = machine_id()
    if raw.exists() and raw.read_text().strip():
        assert mid and len(mid) == 32 and mid != raw.read_text().strip()
        assert raw.read_text().strip() not in json.dumps(cpu_info().to_dict())
