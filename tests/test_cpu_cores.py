"""Computed CPU references per microarchitecture (roofs/analysis/cpu_cores.json, ARCHITECTURE.md
rule 13's method 7): cpu_info on recorded /proc and sysfs text of the CPUs the suite has met
(tests/data/cpus), each core's width and FMA pipes, the clock and its basis, physical cores."""
from pathlib import Path

import pytest

from bench.hw.device import cpu_identity, cpu_info
from roofs.analysis import specs

CPUS = Path(__file__).parent / "data" / "cpus"


def unpack(name: str, root: Path) -> tuple[Path, Path]:
    """Write a recorded CPU's files ("--- proc/cpuinfo", "--- sysfs/online", ... then each file's
    lines) under root; return (its /proc, its /sys/devices/system/cpu)."""
    path = None
    for line in (CPUS / name).read_text().splitlines():
        if line.startswith("--- "):
            path = root / line[4:]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("")
        elif path is not None:
            with path.open("a") as f:
                f.write(line + "\n")
    return root / "proc", root / "sysfs"


# per core per clock: fp32 = datapath / 32 x pipes x 2; fp64 half; bf16, fp16 2x; int8 4x; AMX its own
CASES = {
    # Zen 4: AVX-512 on a 256-bit datapath, 2 pipes: 32 / 16 / 64 / 128 (the figures measured on the 2-core Zen 4 VM)
    "zen4-epyc-vm.txt": ("Zen 4 (EPYC 9004 Genoa)", 2, 2596.15, "nominal",
                         {"fp32": 32, "fp64": 16, "bf16": 64, "int8": 128}, 64),
    # Zen 5: the full 512-bit datapath, 2 pipes
    "zen5-epyc-vm.txt": ("Zen 5 (EPYC 9005 Turin)", 2, 2596.094, "nominal",
                         {"fp32": 64, "fp64": 32, "bf16": 128, "int8": 256}, 128),
    # Zen 3, AVX2 only: 256-bit x 2; no bf16 or int8 unit; 4 CPUs of 2 threads each are 2 cores;
    # the clock is cpufreq's maximum
    "epyc-zen3-avx2.txt": ("Zen 3 (EPYC 7003)", 2, 3529.052, "cpufreq maximum", {"fp32": 32, "fp64": 16}, 64),
    # Sapphire Rapids: 512-bit x 2, AVX512-FP16 at 2x fp32, AMX bf16 1,024 and int8 2,048; the two
    # vCPUs are one core's threads
    "xeon-spr-amx.txt": ("Sapphire / Emerald Rapids (Xeon Scalable 4th, 5th gen)", 1, 2400.0, "nominal",
                         {"fp32": 64, "fp64": 32, "fp16": 128, "bf16": 1024, "int8": 2048}, 128),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_recorded_cpus_get_their_cores_width_pipes_clock_and_cores(name, tmp_path):
    core, cores, clock, basis, per_clock, l1_bytes = CASES[name]
    device = cpu_info(*unpack(name, tmp_path)).to_dict()
    assert specs.cpu_core(device)[0].core == core
    assert specs.physical_cores(device) == cores and specs.cpu_clock(device) == (clock, basis)
    computed = specs.computed_cpu_roofs(device)
    roofs = {r.name: r for r in computed if r.kind == "compute"}
    assert {p: r.extra["per_clock"] for p, r in roofs.items()} == per_clock
    # the L1's load ports, a computed reference beside the measured l1: cores x clock x bytes per clock
    l1 = next(r for r in computed if r.kind == "bandwidth")
    assert l1.name == "l1" and l1.value == pytest.approx(cores * clock / 1000 * l1_bytes)
    for p, ops in per_clock.items():
        assert roofs[p].value == pytest.approx(cores * clock / 1000 * ops)
        assert roofs[p].extra["clock_basis"] == basis and f"({basis})" in roofs[p].note
    origin = specs.reference_roofs(device)[1]
    assert core in origin and f"{cores} cores at {clock:,.0f} MHz ({basis})" in origin


def test_the_zen4_vms_measured_roofs_imply_clocks_within_its_parts_published_range(tmp_path):
    # the 2-core Zen 4 VM: fp32 198.9, fp64 98.9, bf16 422.6 GFLOP/s, int8 840 GOP/s imply 3.1-3.3 GHz
    # (an all-core boost) at 32 / 16 / 64 / 128 per core per clock on 2 cores: 198.9 / 64 = 3.108 GHz
    device = cpu_info(*unpack("zen4-epyc-vm.txt", tmp_path)).to_dict()
    refs = {r.name: r for r in specs.computed_cpu_roofs(device)}
    implied = {p: specs.implied_clock_mhz(v, refs[p]) for p, v in
               {"fp32": 198.9, "fp64": 98.9, "bf16": 422.6, "int8": 840.0}.items()}
    assert implied == pytest.approx({"fp32": 3107.8, "fp64": 3090.6, "bf16": 3301.6, "int8": 3281.25}, abs=0.1)
    lo, hi = refs["fp32"].extra["published_clock_mhz"]
    assert all(lo <= c <= hi for c in implied.values())
    assert (lo, hi) == (2250, 4400) and "2,250-4,400 MHz" in specs.reference_roofs(device)[1]
    # before the table: two full 512-bit pipes were assumed, twice this core's fp32 peak
    assert specs.cpu_units(device["cpu_flags"])["fp32"][0] == 2 * refs["fp32"].extra["per_clock"]


def test_records_without_family_and_model_are_placed_by_their_flags():
    # run.json devices written before cpu_info recorded family and model (the committed runs)
    zen4 = ["avx", "avx2", "avx512_bf16", "avx512_vnni", "avx512f", "fma"]
    zen5 = zen4 + ["avx512_vp2intersect", "avx_vnni"]
    for flags, core in ((zen4, "Zen 4 (EPYC 9004 Genoa)"), (zen5, "Zen 5 (EPYC 9005 Turin)"),
                        (["avx", "avx2", "fma"], "Zen 3 (EPYC 7003)")):
        hit, how = specs.cpu_core({"kind": "cpu", "name": "AMD EPYC", "cpu_flags": flags})
        assert hit.core == core and "flags" in how
    # a vendor or core the table does not know: the register width and 2 pipes, said to be assumed
    unknown = {"kind": "cpu", "name": "Some CPU", "cpu_flags": ["avx2", "fma"], "compute_units": 4,
               "max_clock_mhz": 1000}
    assert specs.cpu_core(unknown) == (None, "")
    assert "assumed" in specs.reference_roofs(unknown)[1]
    assert specs.computed_cpu_roofs(unknown)[0].value == 4 * 8 * 2 * 2


def test_one_fma_unit_parts_and_arm_cores():
    sky = next(c for c in specs.load_cores() if c.models == [[85, 85]])
    assert sky.pipes_for("Intel(R) Xeon(R) Silver 4214 CPU @ 2.20GHz") == 1
    assert sky.pipes_for("Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz") == 2
    assert specs.cpu_units(["avx512f"], sky, "Intel(R) Xeon(R) Gold 5218")["fp32"][0] == 32
    # Neoverse V2 (Graviton4): 4 x 128-bit pipes; /proc/cpuinfo names Arm by implementer and part
    ident = cpu_identity({"CPU implementer": "0x41", "CPU architecture": "8", "CPU part": "0xd4f"})
    assert ident == {"cpu_vendor": "ARM", "cpu_family": 8, "cpu_model": 0xD4F}
    v2, _ = specs.cpu_core({"kind": "cpu", "extra": ident})
    assert v2.core.startswith("Neoverse V2")
    assert specs.cpu_units(["asimd", "sve", "sve2", "bf16", "asimddp"], v2) == {
        "fp32": (32.0, "128-bit FMA datapath x 4 pipes, Neoverse V2 (Graviton4, Grace)"),
        "fp64": (16.0, "128-bit FMA datapath x 4 pipes, Neoverse V2 (Graviton4, Grace)"),
        "bf16": (64.0, "bf16 dot products on the 128-bit FMA datapath x 4 pipes, Neoverse V2 (Graviton4, Grace)"),
        "int8": (128.0, "int8 dot products on the 128-bit FMA datapath x 4 pipes, Neoverse V2 (Graviton4, Grace)")}


def test_every_row_has_a_source_and_no_two_rows_claim_a_model():
    cores = specs.load_cores()
    for c in cores:
        assert c.source and c.datapath_bits in (128, 256, 512) and c.fma_pipes in (1, 2, 4)
        assert all(lo <= hi for lo, hi in c.models)
        assert c.clock_mhz is None or 1000 < c.clock_mhz[0] < c.clock_mhz[1] < 6000
    claimed = [(c.vendor, c.family, m) for c in cores for lo, hi in c.models for m in range(lo, hi + 1)]
    assert len(claimed) == len(set(claimed))
