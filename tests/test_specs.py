"""Datasheet database: SKU matching, clock correction and the CPU's computed peak."""
import json

import pytest

from roofs import specs
from roofs.model import Roof


def dev(name, sms, mem_gib):
    return {"kind": "cuda", "name": name, "compute_units": sms, "memory_bytes": int(mem_gib * 2**30)}


def test_every_row_has_a_source_and_positive_peaks():
    data = json.loads(specs.SPECS.read_text())
    names = {p["part"] for p in data["parts"]}
    for want in ("H100 SXM5", "H100 PCIe", "H200", "A100 SXM4 40GB", "A100 SXM4 80GB", "L40S", "L4",
                 "RTX 4090", "B200", "MI300X"):
        assert any(want in n for n in names), want
    for p in specs.load_parts():
        assert p.source and p.memory_tbps > 0 and all(v > 0 for v in p.peaks_tflops.values())


@pytest.mark.parametrize("device,part", [
    (dev("NVIDIA H200", 132, 139.8), "NVIDIA H200 SXM 141GB"),           # torch reports ~140 GiB
    (dev("NVIDIA H100 80GB HBM3", 132, 79.1), "NVIDIA H100 SXM5 80GB"),
    (dev("NVIDIA H100 PCIe", 114, 79.1), "NVIDIA H100 PCIe 80GB"),
    (dev("NVIDIA A100-SXM4-40GB", 108, 39.4), "NVIDIA A100 SXM4 40GB"),
    (dev("NVIDIA A100-SXM4-80GB", 108, 79.2), "NVIDIA A100 SXM4 80GB"),
    (dev("NVIDIA L4", 58, 22.0), "NVIDIA L4"),                          # 23.6e9 bytes: "24 GB"
    (dev("AMD Instinct MI300X", 304, 191.5), "AMD Instinct MI300X"),
])
def test_sku_matching(device, part):
    assert specs.match(device).part == part


def test_near_misses_match_nothing():
    assert specs.match(dev("NVIDIA H100 80GB HBM3", 114, 79.1)) is None   # SM count of a PCIe part
    assert specs.match(dev("NVIDIA H200", 132, 80)) is None               # H200 name, H100 memory
    assert specs.match(dev("NVIDIA A100-SXM4-80GB", 108, 60)) is None
    assert specs.match(dev("NVIDIA H100 NVL", 132, 93)) is None           # not in the database
    assert specs.match(dev("Some Future GPU", 200, 300)) is None
    assert specs.match({"kind": "cpu", "name": "AMD EPYC"}) is None


def test_h200_gets_its_own_bandwidth_not_the_h100s():
    roofs = specs.datasheet_roofs(specs.match(dev("NVIDIA H200", 132, 139.8)))
    bw = [r for r in roofs if r.kind == "bandwidth"][0]
    assert (bw.name, bw.value, bw.source) == ("hbm", 4800.0, "datasheet")
    assert {r.name: r.value for r in roofs if r.kind == "compute"}["bf16"] == 989000


def test_clock_correction():
    roof = Roof("compute", "bf16", 989000.0, "GFLOP/s", source="datasheet", extra={"clock_mhz": 1830})
    fixed = specs.clock_corrected(roof, 1647.0)                            # 90% of the assumed clock
    assert fixed.value == pytest.approx(989000 * 0.9) and fixed.source == "datasheet@clock"
    assert specs.clock_corrected(roof, None) is None
    assert specs.clock_corrected(Roof("bandwidth", "hbm", 4800.0, "GB/s"), 1500) is None


def test_cpu_computed_peak_hand_worked():
    # 2 cores x 2.5 GHz x 16 fp32 lanes x 2 pipes x 2 = 320 GFLOP/s
    p = specs.cpu_peaks_gflops(2, 2500, ["avx512f", "avx512_bf16", "avx512_vnni"])
    assert p == {"fp32": 320.0, "fp64": 160.0, "bf16": 640.0, "int8": 1280.0}
    assert specs.cpu_peaks_gflops(4, 3000, ["avx2", "fma"])["fp32"] == 4 * 3 * 8 * 2 * 2
    roofs, why = specs.reference_roofs({"kind": "cpu", "compute_units": 2, "max_clock_mhz": 2500,
                                        "cpu_flags": ["avx512f"]})
    assert {r.source for r in roofs} == {"computed"} and "computed" in why
    assert specs.reference_roofs(dev("Mystery", 1, 1))[1] == "no datasheet entry for Mystery"
