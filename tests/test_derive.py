"""Plateau detection and bandwidth-roof derivation on synthetic curves with known answers."""
import pandas as pd
import pytest

from roofs.derive import bandwidth_roofs, derive, envelope, plateau
from roofs.model import Roof, Roofline

KiB, MiB = 2**10, 2**20


def rows(points, op="stream.copy", impl="stream.copy/torch", mode="warm", dtype="float32"):
    return pd.DataFrame([{
        "point_id": f"{impl}[{ws}]@{mode}", "op": op, "family": "stream", "impl": impl, "dtype": dtype,
        "working_set_bytes": ws, "gbps": v, "mode": mode, "status": "ok"} for ws, v in points])


def synthetic_cpu():
    """L1 48 KiB x2, L2 1 MiB x2, L3 32 MiB: plateaus 400 / 200 / 100 GB/s, DRAM 50."""
    curve = {16 * KiB: 390, 32 * KiB: 400, 64 * KiB: 300,
             128 * KiB: 195, 256 * KiB: 200, 512 * KiB: 198, 1 * MiB: 190, 2 * MiB: 150,
             4 * MiB: 100, 8 * MiB: 98, 16 * MiB: 97, 32 * MiB: 80, 64 * MiB: 60,
             128 * MiB: 50, 256 * MiB: 48, 512 * MiB: 49}
    caches = [("l1", 96 * KiB), ("l2", 2 * MiB), ("l3", 32 * MiB)]
    return rows(curve.items()), caches


def test_plateau_indices():
    assert plateau([1, 5, 9.5, 10, 9.2, 3]) == (2, 4)
    assert plateau([10, 9.5, 1]) == (0, 1)
    assert plateau([1, 2, 4, 8]) == (3, 3)  # a rising curve has no flat stretch


def test_every_level_of_a_known_curve():
    df, caches = synthetic_cpu()
    roofs, notes = bandwidth_roofs(df, caches, "dram")
    got = {r.name: r for r in roofs}
    assert [r.name for r in roofs] == ["dram", "l3", "l2", "l1"]
    assert got["dram"].value == 50 and got["dram"].plateau_bytes == (128 * MiB, 512 * MiB)
    assert got["dram"].plateau_values == (48, 50)
    assert got["l3"].value == 100 and got["l3"].plateau_bytes == (4 * MiB, 16 * MiB)
    assert got["l2"].value == 200 and got["l2"].plateau_bytes == (128 * KiB, 1 * MiB)
    assert got["l1"].value == 400 and got["l1"].plateau_bytes == (16 * KiB, 32 * KiB)
    assert got["l1"].impl == "stream.copy/torch" and got["l1"].unit == "GB/s" and notes == []


def test_roof_is_best_over_kernels_and_names_it():
    df, caches = synthetic_cpu()
    better = rows([(256 * MiB, 55.0)], op="stream.read", impl="stream.read/triton", dtype="bfloat16")
    roofs, _ = bandwidth_roofs(pd.concat([df, better]), caches, "dram")
    dram = roofs[0]
    assert (dram.value, dram.impl, dram.op, dram.dtype) == (55.0, "stream.read/triton", "stream.read", "bfloat16")


def test_dram_uses_only_four_times_llc_and_up():
    # 64 MiB (2x LLC) reads fast from residual cache hits; it must not set the DRAM roof
    df = rows([(64 * MiB, 90), (128 * MiB, 50), (256 * MiB, 52)])
    roofs, _ = bandwidth_roofs(df, [("l3", 32 * MiB)], "dram")
    assert roofs[0].name == "dram" and roofs[0].value == 52


def test_no_dram_roof_without_large_sizes_says_why():
    df = rows([(1 * MiB, 100), (2 * MiB, 100)])
    roofs, notes = bandwidth_roofs(df, [("l3", 32 * MiB)], "dram")
    assert not [r for r in roofs if r.name == "dram"]
    assert any("4x the last-level cache" in n for n in notes)


def test_cache_level_not_above_memory_gets_no_roof():
    df = rows([(4 * MiB, 52), (8 * MiB, 51), (128 * MiB, 50), (256 * MiB, 50)])
    roofs, notes = bandwidth_roofs(df, [("l3", 32 * MiB)], "dram")
    assert [r.name for r in roofs] == ["dram"]
    assert any(n.startswith("l3:") and "not above" in n for n in notes)


def test_rising_curve_gives_no_cache_roof():
    df = rows([(16 * KiB, 10), (32 * KiB, 20), (64 * KiB, 40), (256 * MiB, 5)])
    roofs, notes = bandwidth_roofs(df, [("l1", 128 * KiB), ("l3", 32 * MiB)], "dram")
    assert [r.name for r in roofs] == ["dram"]
    assert any(n.startswith("l1: no plateau") for n in notes)


def test_cold_rows_never_make_a_cache_roof_and_failed_rows_are_ignored():
    df = pd.concat([rows([(256 * KiB, 300), (512 * KiB, 300)], mode="cold"),
                    rows([(256 * MiB, 40)]),
                    rows([(128 * MiB, 999)]).assign(status="error")])
    roofs, _ = bandwidth_roofs(df, [("l2", 2 * MiB), ("l3", 32 * MiB)], "dram")
    assert [(r.name, r.value) for r in roofs] == [("dram", 40)]


def test_envelope_keeps_best_row_per_size():
    df = pd.concat([rows([(1024, 5), (2048, 9)]), rows([(1024, 7)], impl="x/triton")])
    env = envelope(df)
    assert list(env["gbps"]) == [7, 9] and env.iloc[0]["impl"] == "x/triton"


def test_derive_reads_device_record_and_gpu_level_name():
    df = rows([(1 * MiB, 5000), (4 * MiB, 5200), (8 * MiB, 5100), (1 * 2**30, 4300), (2 * 2**30, 4350)])
    roofs, _ = derive(df, {"kind": "cuda", "caches": [{"name": "l2", "total_bytes": 50 * MiB}]})
    assert [(r.name, r.value) for r in roofs] == [("hbm", 4350), ("l2", 5200)]


def test_roofline_attainable_and_ridge():
    model = Roofline([Roof("bandwidth", "dram", 50.0, "GB/s"), Roof("compute", "fp32", 1000.0, "GFLOP/s"),
                      Roof("compute", "bf16", 4000.0, "GFLOP/s")])
    assert model.attainable_gflops(2.0, "fp32") == 100.0           # bandwidth-bound: 50 x 2
    assert model.attainable_gflops(100.0, "fp32") == 1000.0        # compute-bound
    assert model.ridge("fp32") == 20.0 and model.ridge("bf16") == 80.0
    assert model.attainable_gflops(1.0) == 50.0
    assert Roof.from_dict(model.roofs[0].to_dict()) == model.roofs[0]


def test_kernels_rounded_from_one_target_size_share_a_bin():
    # triad's 3 arrays round 1 MiB down to 1048572 bytes; it must compete with copy at 1 MiB,
    # not form a zigzag of its own sizes in the envelope
    df = pd.concat([rows([(2**20, 100), (2**21, 101)]),
                    rows([(2**20 - 4, 120), (2**21 - 8, 90)], op="stream.triad", impl="stream.triad/torch")])
    env = envelope(df)
    assert list(env["gbps"]) == [120, 101]


def test_annotate_percent_of_roofs_hand_worked():
    from roofs.derive import annotate
    roofs = [Roof("bandwidth", "dram", 50.0, "GB/s"), Roof("compute", "bf16", 1000.0, "GFLOP/s")]
    df = pd.DataFrame([
        # GEMV, bf16, I = 1 FLOP/B: attainable min(1000, 50 x 1) = 50; 40 GFLOP/s is 80%; 40 GB/s is 80% of BW
        {"status": "ok", "intensity": 1.0, "precision": "bf16", "gflops": 40.0, "gbps": 40.0, "flops": 10},
        # GEMM, bf16, I = 100: attainable 1000; 900 GFLOP/s is 90%
        {"status": "ok", "intensity": 100.0, "precision": "bf16", "gflops": 900.0, "gbps": 9.0, "flops": 10},
        # copy: no flops, no precision: % of attainable is % of bandwidth
        {"status": "ok", "intensity": 0.0, "precision": "", "gflops": 0.0, "gbps": 45.0, "flops": 0},
        {"status": "skipped", "intensity": 1.0, "precision": "bf16", "gflops": None, "gbps": None, "flops": 10},
    ])
    df = df.assign(family="gemm", p80_ms=1.0, working_set_bytes=1, mode="warm")
    out = annotate(df, roofs)
    assert list(out["attainable_gflops"][:2]) == [50.0, 1000.0]
    assert out["pct_of_attainable"][:3].tolist() == pytest.approx([80.0, 90.0, 90.0])
    assert out["pct_of_bw_roof"][:3].tolist() == pytest.approx([80.0, 18.0, 90.0])
    assert pd.isna(out["pct_of_attainable"][3]) and pd.isna(out["attainable_gflops"][3])


def test_points_above_their_roof_are_flagged_with_causes():
    from roofs.derive import annotate
    roofs = [Roof("bandwidth", "dram", 50.0, "GB/s", plateau_values=(40.0, 50.0)),
             Roof("compute", "bf16", 1000.0, "GFLOP/s")]
    base = {"status": "ok", "precision": "bf16", "mode": "cold", "working_set_bytes": 1 * MiB}
    df = pd.DataFrame([
        # GEMV at I=1: bound 50 GFLOP/s; 1e9 flops in 10 ms at p80 = 100 GFLOP/s: above, from cache
        dict(base, family="gemv", flops=10**9, intensity=1.0, gflops=110.0, gbps=110.0, p80_ms=10.0),
        # the same, but its p80 time gives 45 GFLOP/s: within its spread, not flagged
        dict(base, family="gemv", flops=10**9, intensity=1.0, gflops=55.0, gbps=55.0, p80_ms=1e3 / 45),
        # attention above the compute roof at I=100
        dict(base, family="attention", flops=10**12, intensity=100.0, gflops=1200.0, gbps=12.0, p80_ms=900.0),
        # a GEMM sets the roof: never flagged
        dict(base, family="gemm", flops=10**12, intensity=100.0, gflops=1200.0, gbps=12.0, p80_ms=900.0),
    ])
    out = annotate(df, roofs, {"caches": [{"name": "l3", "total_bytes": 32 * MiB}]})
    assert out["flag"][0].startswith("above its attainable 50 GFLOP/s even at p80 (100)")
    assert "cache-resident working set (1 MiB beside a 32 MiB last-level cache)" in out["flag"][0]
    assert "plateau spans 40 to 50 GB/s" in out["flag"][0]
    assert out["flag"][1] == "" and out["flag"][3] == ""
    assert "beats the GEMMs that set the bf16 roof" in out["flag"][2]


def test_link_roofs_take_bus_bandwidth_per_collective_and_best_host_copy():
    from roofs.derive import link_roofs
    df = pd.DataFrame([
        {"family": "comm", "op": "comm.all_reduce", "shape": "2 ranks", "status": "ok", "gbps": 2.0, "bus_gbps": 2.0,
         "bytes": 2**20, "impl": "comm.all_reduce/gloo", "point_id": "a"},
        {"family": "comm", "op": "comm.all_reduce", "shape": "2 ranks", "status": "ok", "gbps": 3.0, "bus_gbps": 3.0,
         "bytes": 2**26, "impl": "comm.all_reduce/gloo", "point_id": "b"},
        {"family": "comm", "op": "comm.sendrecv", "shape": "2 ranks 0->1", "pair": "0->1", "status": "ok", "gbps": 4.0, "bus_gbps": 4.0,
         "bytes": 2**26, "impl": "comm.sendrecv/gloo", "point_id": "c"},
        {"family": "transfer", "op": "transfer.h2d", "shape": "pinned", "memory": "pinned", "status": "ok", "gbps": 50.0, "bus_gbps": None,
         "bytes": 2**30, "impl": "transfer.h2d/torch", "point_id": "d"},
        {"family": "transfer", "op": "transfer.h2d", "shape": "pinned", "memory": "pinned", "status": "error", "gbps": 99.0, "bus_gbps": None,
         "bytes": 2**31, "impl": "transfer.h2d/torch", "point_id": "e"},
    ])
    got = {r.name: (r.value, r.point_id) for r in link_roofs(df)}
    assert got == {"link.all_reduce": (3.0, "b"), "link.sendrecv.0->1": (4.0, "c"), "host.h2d.pinned": (50.0, "d")}


def test_transfer_bytes_are_the_size_copied():
    from bench.registry import load_all
    op = load_all().ops["transfer.h2d"]
    assert op.bytes({"memory": "pinned", "bytes": 4096}) == 4096 and op.flops({"memory": "pinned", "bytes": 4096}) == 0
    assert op.skip({"memory": "pinned", "bytes": 4096}, type("D", (), {"kind": "cpu"})()) == "host-device copies need a GPU"
