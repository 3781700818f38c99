"""Datasheet database: SKU matching, clock correction and the CPU's computed peak."""
import json

import pytest

from roofs.analysis import specs
from roofs.analysis.roofline import Roof


def dev(name, sms, mem_gib):
    return {"kind": "cuda", "name": name, "compute_units": sms, "memory_bytes": int(mem_gib * 2**30)}


def test_every_row_has_a_source_and_positive_peaks():
    data = json.loads(specs.SPECS.read_text())
    names = {p["part"] for p in data["parts"]}
    for want in ("H100 SXM5", "H100 PCIe", "H200", "A100 SXM4 40GB", "A100 SXM4 80GB", "L40S", "L4",
                 "RTX 4090", "B200", "GB200", "MI300X", "MI325X", "MI355X", "MI350X"):
        assert any(want in n for n in names), want
    for p in specs.load_parts():
        assert p.source and p.memory_tbps > 0 and all(v > 0 for v in p.peaks_tflops.values())
        # a clock for every precision (null only where it cannot be derived), and how it was found
        assert set(p.clocks_mhz) == set(p.peaks_tflops) and p.clock_basis, p.part
        assert all(c is None or 1000 < c < 3000 for c in p.clocks_mhz.values()), p.part


def test_peaks_follow_from_units_and_clocks():
    # peak = units x FLOP per unit per clock x the clock it assumes, to the datasheet's rounding
    parts = {p.part: p for p in specs.load_parts()}
    h200, mi300x, mi355x = parts["NVIDIA H200 SXM 141GB"], parts["AMD Instinct MI300X"], parts["AMD Instinct MI355X"]
    assert 132 * 4096 * h200.clock_for("bf16") * 1e6 / 1e12 == pytest.approx(989, rel=0.002)
    assert 132 * 256 * h200.clock_for("fp64") * 1e6 / 1e12 == pytest.approx(67, rel=0.002)
    assert 304 * 2048 * mi300x.clock_for("bf16") * 1e6 / 1e12 == pytest.approx(1307.4, rel=0.001)
    assert 256 * 16384 * mi355x.clock_for("mxfp4") * 1e6 / 1e12 == pytest.approx(10066.3, rel=0.001)
    assert "nvfp4" not in mi355x.peaks_tflops and parts["NVIDIA B200"].peaks_tflops["nvfp4"] == 9000


def test_h200_fp64_is_corrected_with_its_own_clock():
    # The H200 run (results/nvidia-h200-20261130T010900Z): fp64 measured 63,627 GFLOP/s at 1,980 MHz.
    # With the tensor clock (1,830) the corrected datasheet roof was 67,000 x 1980 / 1830 =
    # 72,492 and the row read 87.8%; fp64's 67 TFLOP/s assumes 1,980 MHz: 67,000, 94.97%.
    part = specs.match(dev("NVIDIA H200", 132, 139.8))
    roofs = {r.name: r for r in specs.datasheet_roofs(part)}
    assert roofs["fp64"].extra["clock_mhz"] == 1980 and roofs["fp32"].extra["clock_mhz"] == 1980
    assert roofs["bf16"].extra["clock_mhz"] == 1830
    fixed = specs.clock_corrected(roofs["fp64"], 1980.0)
    assert fixed.value == pytest.approx(67000)
    assert 63627.38 / fixed.value == pytest.approx(0.9497, abs=5e-5)
    bf16 = specs.clock_corrected(roofs["bf16"], 1980.0)                   # tensor peaks keep 1,830
    assert bf16.value == pytest.approx(989000 * 1980 / 1830)


def test_an_unknown_clock_means_no_correction():
    gb200 = next(p for p in specs.load_parts() if "GB200" in p.part)
    fp64 = next(r for r in specs.datasheet_roofs(gb200) if r.name == "fp64")
    assert fp64.extra["clock_mhz"] is None and specs.clock_corrected(fp64, 1900.0) is None


@pytest.mark.parametrize("device,part", [
    (dev("NVIDIA H200", 132, 139.8), "NVIDIA H200 SXM 141GB"),           # torch reports ~140 GiB
    (dev("NVIDIA H100 80GB HBM3", 132, 79.1), "NVIDIA H100 SXM5 80GB"),
    (dev("NVIDIA H100 PCIe", 114, 79.1), "NVIDIA H100 PCIe 80GB"),
    (dev("NVIDIA A100-SXM4-40GB", 108, 39.4), "NVIDIA A100 SXM4 40GB"),
    (dev("NVIDIA A100-SXM4-80GB", 108, 79.2), "NVIDIA A100 SXM4 80GB"),
    (dev("NVIDIA L4", 58, 22.0), "NVIDIA L4"),                          # 23.6e9 bytes: "24 GB"
    (dev("AMD Instinct MI300X", 304, 191.5), "AMD Instinct MI300X"),
    (dev("AMD Instinct MI325X", 304, 255.98), "AMD Instinct MI325X"),
    (dev("AMD Instinct MI355X", 256, 287.6), "AMD Instinct MI355X"),
    (dev("NVIDIA B200", 148, 178.4), "NVIDIA B200"),
    (dev("NVIDIA GB200", 148, 184.0), "NVIDIA GB200 (per GPU)"),
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


def test_cpu_peaks_know_every_unit():
    # 4 cores x 2.0 GHz, AVX-512 with BF16, FP16, VNNI and AMX (a Sapphire Rapids VM):
    # fp32 = 4 x 2 x 16 lanes x 2 pipes x 2 = 512; fp64 = 256; fp16 (AVX512-FP16) = 2 x 512;
    # bf16 = AMX's 1,024 FLOP/clk x 4 x 2 = 8,192 (above AVX512-BF16's 1,024);
    # int8 = AMX's 2,048 x 4 x 2 = 16,384 (above VNNI's 2,048)
    spr = ["avx512f", "avx512_bf16", "avx512_fp16", "avx512_vnni", "amx_tile", "amx_bf16", "amx_int8"]
    assert specs.cpu_peaks_gflops(4, 2000, spr) == {"fp32": 512.0, "fp64": 256.0, "bf16": 8192.0,
                                                    "fp16": 1024.0, "int8": 16384.0}
    # AMX-FP16 (Granite Rapids) beats AVX512-FP16 too
    assert specs.cpu_peaks_gflops(4, 2000, spr + ["amx_fp16"])["fp16"] == 8192.0
    # AVX2 with AVX-VNNI: int8 = 4 x (2 x 8 lanes x 2 x 2) per core per GHz; no bf16 or fp16 unit
    p = specs.cpu_peaks_gflops(1, 1000, ["avx2", "fma", "avx_vnni"])
    assert p == {"fp32": 32.0, "fp64": 16.0, "int8": 128.0}
    roofs = specs.computed_cpu_roofs({"kind": "cpu", "compute_units": 4, "max_clock_mhz": 2000, "cpu_flags": spr})
    bf16 = next(r for r in roofs if r.name == "bf16")
    assert bf16.value == 8192.0 and "AMX bf16" in bf16.note


def test_cpu_computed_peak_hand_worked():
    # 2 cores x 2.5 GHz x 16 fp32 lanes x 2 pipes x 2 = 320 GFLOP/s
    p = specs.cpu_peaks_gflops(2, 2500, ["avx512f", "avx512_bf16", "avx512_vnni"])
    assert p == {"fp32": 320.0, "fp64": 160.0, "bf16": 640.0, "int8": 1280.0}
    assert specs.cpu_peaks_gflops(4, 3000, ["avx2", "fma"])["fp32"] == 4 * 3 * 8 * 2 * 2
    roofs, why = specs.reference_roofs({"kind": "cpu", "compute_units": 2, "max_clock_mhz": 2500,
                                        "cpu_flags": ["avx512f"]})
    assert {r.source for r in roofs} == {"computed"} and "computed" in why
    why = specs.reference_roofs(dev("Mystery", 1, 1))[1]
    assert why.code == "no_datasheet" and why.endswith("Mystery")
