"""Identity in every run: host, device id and PCI bus id in run.json's
device, and a fallback for runs made before they were recorded."""
import socket
from types import SimpleNamespace

from bench.hw.device import DeviceInfo, cpu_info, pci_of
from bench.hw.nvidia import _pci_text
from bench.results import device_identity


def test_a_cpu_is_its_host():
    d = cpu_info().to_dict()
    assert d["host"] == socket.gethostname() and d["id"] == f"{socket.gethostname()}:cpu" and d["pci_bus_id"] is None


def test_a_gpu_is_its_uuid_and_else_its_host_and_index():
    gpu = DeviceInfo("cuda", "cuda:3", "NVIDIA H200", 2**37, 132, "SMs", (), host="n7",
                     uuid="GPU-1234", pci_bus_id="0000:3b:00.0")
    assert gpu.to_dict()["id"] == "GPU-1234" and gpu.to_dict()["pci_bus_id"] == "0000:3b:00.0"
    assert DeviceInfo("cuda", "cuda:3", "x", 1, 1, "SMs", (), host="n7").id == "n7:cuda:3"


def test_pci_bus_ids_spelled_one_way():
    assert pci_of(SimpleNamespace(pci_bus_id=0x3b, pci_device_id=0, pci_domain_id=0)) == "0000:3b:00.0"
    assert pci_of(SimpleNamespace()) is None
    assert _pci_text(b"00000000:3B:00.0") == "0000:3b:00.0" and _pci_text("00000001:C1:1F.0") == "0001:c1:1f.0"


def test_old_runs_get_an_identity_that_never_merges_two_runs():
    old = {"torch_device": "cuda:1", "extra": {"uuid": "GPU-ab"}}
    assert device_identity(old, "/r/x") == {"host": "unknown", "id": "GPU-ab", "pci_bus_id": None}
    a = device_identity({"torch_device": "cpu"}, "/r/run-a")
    b = device_identity({"torch_device": "cpu"}, "/r/run-b")
    assert a["id"] == "run-a:cpu" and a["id"] != b["id"]
    new = {"torch_device": "cpu", "host": "h", "id": "h:cpu"}
    assert device_identity(new, "/r/z") == {"host": "h", "id": "h:cpu", "pci_bus_id": None}
