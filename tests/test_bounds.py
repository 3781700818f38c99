"""Direction roofs and measured level edges (ARCHITECTURE.md, rules 11 and 12) on synthetic
runs with known answers: the H200's HBM by direction, its 60 MiB L2 whose plateau ends at
16 MiB, and a CPU VM that reports a 300 MiB L3 and reaches DRAM speed from 90.5 MiB. Each roof
is the Policy.roof_rank-th (second) highest measurement of the outer half of its level's
plateau (roofs/analysis/model.py), worked out in the test."""
import pandas as pd
import pytest

from roofs.analysis.bounds import annotate, boundary_level, point_bound
from roofs.analysis.checks import ABOVE_PREFIX
from roofs.analysis.confirm import derive_roofs as derive
from roofs.analysis.model import directions, level_roofs, level_sizes, rated
from roofs.analysis.roofline import Roof, Roofline, direction_of

KiB, MiB, GiB = 2**10, 2**20, 2**30
H200 = {"kind": "cuda", "caches": [{"name": "l2", "total_bytes": 60 * MiB}]}


def row(op, ws, gbps, mode="warm", family="stream", read=None, write=None, flops=0, precision="", spread=0.01):
    """One measured row: bytes = ws, time from gbps; p20/p80 spread around the median."""
    ms = ws / (gbps * 1e9) * 1e3
    r = {"point_id": f"{op}[{ws}]@{mode}", "op": op, "family": family, "impl": f"{op}/triton", "backend": "triton",
         "dtype": "bfloat16",
         "working_set_bytes": ws, "bytes": ws, "flops": flops, "intensity": flops / ws, "mode": mode,
         "median_ms": ms, "p20_ms": ms * (1 - spread / 2), "p80_ms": ms * (1 + spread / 2), "samples": 20,
         "stop": "converged", "gbps": gbps, "gflops": flops / ms / 1e6 if flops else float("nan"),
         "status": "ok", "precision": precision, "flag": ""}
    if read is not None:
        r.update(read_bytes=read, write_bytes=write)
    return r


def h200_rows():
    """A warm reread sweep (L2 plateau ~7,500 GB/s to 16 MiB, 7,300 at 22.6 and 6,178 at 32
    falling, 4,897 at 45, HBM speed beyond) and the HBM stream kernels: write 4,669, read
    4,390, copy 4,208 (10 less at 256 MiB). Each row's rate is its figure (p20 at its median)."""
    reread = {2 * MiB: 7400, 4 * MiB: 7500, 8 * MiB: 7546, 11.3 * MiB: 7480, 16 * MiB: 7450, 22.6 * MiB: 7300,
              32 * MiB: 6178, 45.3 * MiB: 4897, 64 * MiB: 4420, 90.5 * MiB: 4385}
    out = [row("stream.reread", int(ws), v, read=int(ws), write=0, spread=0.0) for ws, v in reread.items()]
    for ws in (256 * MiB, 512 * MiB, 1 * GiB):
        out.append(row("stream.write", ws, 4669 - (ws == 256 * MiB) * 10, read=0, write=ws, spread=0.0))
        out.append(row("stream.read", ws, 4390 - (ws == 256 * MiB) * 10, read=ws, write=0, spread=0.0))
        out.append(row("stream.copy", ws, 4208 - (ws == 256 * MiB) * 10, read=ws // 2, write=ws // 2, spread=0.0))
        out.append(row("stream.triad", ws, 4150, read=2 * ws // 3, write=ws // 3, spread=0.0))
    return pd.DataFrame(out)


def test_direction_of():
    assert direction_of(10, 0) == "read" and direction_of(0, 10) == "write" and direction_of(5, 5) == "copy"
    assert direction_of(None, 3) == "" and direction_of(float("nan"), 0) == "" and direction_of(0, 0) == ""


def test_hbm_has_a_roof_per_direction_and_the_level_best():
    """HBM's plateau runs from 4x L2's 16 MiB edge (64 MiB) to 1 GiB; its outer half is 256 MiB,
    512 MiB and 1 GiB, whose best rows (any kernel) are 4,659, 4,669 and 4,669: the roof is
    4,669 (stream.write). Each direction: the same over its own rows there: read 4,380, 4,390,
    4,390 -> 4,390; write -> 4,669; copy (copy and triad, both read and write) 4,198, 4,208,
    4,208 -> 4,208."""
    roofs, notes = derive(h200_rows(), H200)
    got = {r.name: r.value for r in roofs}
    assert got["hbm"] == 4669 and next(r for r in roofs if r.name == "hbm").op == "stream.write"
    assert (got["hbm.read"], got["hbm.write"], got["hbm.copy"]) == (4390, 4669, 4208)
    hbm_read = next(r for r in roofs if r.name == "hbm.read")
    assert hbm_read.extra["direction"] == "read" and hbm_read.op == "stream.read"


def test_point_bandwidth_by_direction_hand_worked():
    model = Roofline([Roof("bandwidth", "hbm", 4669, "GB/s"), Roof("bandwidth", "hbm.read", 4390, "GB/s"),
                      Roof("bandwidth", "hbm.write", 4669, "GB/s"), Roof("bandwidth", "hbm.copy", 4208, "GB/s")])
    assert model.point_bandwidth("hbm", 100, 0)[:2] == (4390, "hbm.read")
    assert model.point_bandwidth("hbm", 0, 100)[:2] == (4669, "hbm.write")
    # copy (R = W): one after the other, 2 / (1/4390 + 1/4669) = 4525.3 GB/s, above the copy roof
    value, label, note = model.point_bandwidth("hbm", 50, 50)
    assert value == pytest.approx(2 / (1 / 4390 + 1 / 4669)) and label == "hbm.read+write" and note == ""
    assert value == pytest.approx(4525.3, abs=0.1)
    # GEMM-like: 3 parts read for 1 written: 4 / (3/4390 + 1/4669) = 4456.8
    assert model.point_bandwidth("hbm", 300, 100)[0] == pytest.approx(4456.6, abs=0.1)
    # the measured copy roof wins where it is higher than the serial mix
    fast_copy = Roofline(model.roofs[:3] + [Roof("bandwidth", "hbm.copy", 4600, "GB/s")])
    assert fast_copy.point_bandwidth("hbm", 50, 50)[:2] == (4600, "hbm.copy")
    assert fast_copy.point_bandwidth("hbm", 200, 100)[:2] == (4600, "hbm.copy")  # a triad's mix: 1/3 written
    # ... but not for a point that mostly reads (decode: the KV cache read, a token written): serial mix
    value, label, _ = fast_copy.point_bandwidth("hbm", 1000, 1)
    assert label == "hbm.read+write" and value == pytest.approx(1001 / (1000 / 4390 + 1 / 4669))
    # with no read or write roof, the copy roof is the only mix measured
    assert Roofline([model.roofs[0], model.roofs[3]]).point_bandwidth("hbm", 1000, 1)[:2] == (4208, "hbm.copy")
    # unknown direction, or no roof of that direction: the level's best, with a label
    value, label, note = model.point_bandwidth("hbm", None, None)
    assert (value, label, note.code) == (4669, "hbm", "direction_unknown")
    only_best = Roofline([Roof("bandwidth", "hbm", 4669, "GB/s")])
    value, label, note = only_best.point_bandwidth("hbm", 10, 0)
    assert (value, label, note.code) == (4669, "hbm", "no_direction_roof") and "hbm.read" in note
    # read and write bytes, and neither direction's roof: the level's best, with its label (not a mix)
    value, label, note = only_best.point_bandwidth("hbm", 10, 10)
    assert (value, label, note.code) == (4669, "hbm", "no_direction_roof")
    assert model.point_bandwidth("l2", 10, 0) is None


def test_read_only_point_above_its_read_roof_is_flagged_and_write_point_uses_write_roof():
    df = h200_rows()
    decode_bytes = 1 * GiB
    flops = 2 * decode_bytes  # 2 FLOP/byte: far under the ridge
    pts = pd.DataFrame([
        # SDPA decode reads at 4,685 GB/s: over its read roof (4,390), and over the level's best (4,669)
        row("attention.decode", decode_bytes, 4685, mode="cold", family="attention", read=decode_bytes, write=0,
            flops=flops, precision="bf16"),
        # a read-only point at 4,600: under the level's best (4,669), over its read roof's interval
        # (4,390 to 4,390 x 1.02, the narrowest the Policy allows) even at its p80 (4,600 / 1.005)
        row("attention.decode", decode_bytes // 2, 4600, mode="cold", family="attention",
            read=decode_bytes // 2, write=0, flops=flops // 2, precision="bf16"),
        # a write-only point at 4,600: bounded by the write roof, not the read one
        row("stream.write", 2 * GiB, 4600, read=0, write=2 * GiB),
    ])
    roofs, _ = derive(df, H200)
    out = annotate(pd.concat([df, pts], ignore_index=True), roofs, H200).tail(3)
    dec, dec2, wr = out.itertuples(index=False)
    assert dec.boundary == "hbm" and dec.bound_roof == "hbm.read"
    assert dec.attainable_gflops == pytest.approx(2 * 4390)
    assert dec.flag.startswith(ABOVE_PREFIX) and "hbm.read" in dec.flag
    assert dec2.bound_roof == "hbm.read" and dec2.flag != ""
    assert wr.bound_roof == "hbm.write" and wr.pct_of_bw_roof == pytest.approx(100 * 4600 / 4669) and wr.flag == ""


def test_no_stream_point_is_above_its_bound_because_of_direction():
    df = h200_rows()
    roofs, _ = derive(df, H200)
    out = annotate(df, roofs, H200)
    big = out[out["working_set_bytes"] >= 256 * MiB]
    assert (big["flag"] == "").all()
    assert set(big["bound_roof"]) == {"hbm.write", "hbm.read", "hbm.read+write"}
    copy = big[big["op"] == "stream.copy"].iloc[0]
    assert copy["pct_of_bw_roof"] == pytest.approx(100 * 4198 / (2 / (1 / 4390 + 1 / 4669)))


def test_h200_l2_capacity_is_its_measured_plateau_edge():
    """L2's plateau is 2-16 MiB (22.6 and 32 MiB fall, 7,300 then 6,178: a transition); the
    roof is the second highest of its sizes (the innermost level has no level inside it to leave:
    every size counts; 7,546 at 8 MiB, then 7,500 at 4 MiB): 7,500.
    Its edge is the plateau's last size within 10% of the roof, 16 MiB; its reach, where the
    next plateau (HBM's) starts, 45.3 MiB; HBM's sizes start at 4x the edge, 64 MiB."""
    df = h200_rows()
    roofs, notes = derive(df, H200)
    l2 = next(r for r in roofs if r.name == "l2")
    assert l2.value == pytest.approx(7500)
    assert l2.extra["capacity_bytes"] == 60 * MiB  # reported
    assert l2.extra["edge_bytes"] == 16 * MiB
    assert l2.extra["reach_bytes"] == int(45.3 * MiB)
    assert l2.plateau_bytes == (2 * MiB, 16 * MiB)
    # roofs.json keeps both sizes
    assert {"capacity_bytes", "edge_bytes", "reach_bytes"} <= set(l2.to_dict()["extra"])
    hbm = next(r for r in roofs if r.name == "hbm")
    assert hbm.extra["from_bytes"] == 64 * MiB  # 4x the 16 MiB edge (not 4x 60 MiB)
    # the boundary rule: a warm 64 MiB copy crosses HBM (past L2's measured reach)
    model = Roofline(roofs)
    caches = [("l2", 60 * MiB)]
    assert point_bound(model, 64 * MiB, "warm", 0.0, "", caches, "hbm", 32 * MiB, 32 * MiB)[0] == "hbm"
    assert point_bound(model, 240 * MiB, "warm", 0.0, "", caches, "hbm")[0] == "hbm"
    assert point_bound(model, 40 * MiB, "warm", 0.0, "", caches, "hbm")[0] == "l2"  # in the fall: still L2's
    # without the measured reach (old roofs), the reported size's band: 4 x 60 MiB
    assert boundary_level(64 * MiB, "warm", caches, "hbm") == "l2"
    out = annotate(pd.DataFrame([row("stream.copy", 64 * MiB, 3900, read=32 * MiB, write=32 * MiB)]), roofs, H200)
    assert out["boundary"].iloc[0] == "hbm" and out["pct_of_bw_roof"].iloc[0] > 80


def cpu_vm_rows():
    """A CPU VM reporting its host's 300 MiB L3: its L2 plateau ~200 GB/s over 256 KiB-1 MiB,
    the L3 plateau ~100 GB/s over 4-32 MiB, a transition of two sizes (45.3 MiB at 60, 64 MiB at
    30), DRAM speed (20 GB/s) from 90.5 MiB to 2.4 GiB. Triads, each rate its figure exactly."""
    curve = {256 * KiB: 200, 512 * KiB: 205, 1 * MiB: 202, 4 * MiB: 98, 8 * MiB: 100, 16 * MiB: 99,
             22.6 * MiB: 97, 32 * MiB: 95, 45.3 * MiB: 60, 64 * MiB: 30, 90.5 * MiB: 21, 128 * MiB: 20,
             256 * MiB: 20.2, 512 * MiB: 19.8, 1 * GiB: 20, 2.4 * GiB: 19.9}
    return pd.DataFrame([row("stream.triad", int(ws), v, read=int(ws) * 2 // 3, write=int(ws) // 3, spread=0.0)
                         for ws, v in curve.items()])


def test_cpu_vm_l3_ends_where_dram_speed_begins():
    """The plateaus 256 KiB-1 MiB, 4-32 MiB and 90.5 MiB-2.4 GiB take the names l2 and l3 (the
    reported sizes nearest their edges: 1 MiB by 2 MiB, 32 MiB by 300 MiB) and dram. l3: the
    second highest of its outer half (16, 22.6, 32 MiB: 99, 97, 95), 97; its edge 32 MiB (95
    is within 10% of 97), its reach 90.5 MiB, where DRAM's plateau starts. DRAM's sizes start
    at 4x that edge, 128 MiB: 128 MiB-2.4 GiB, whose outer half (512 MiB, 1 GiB, 2.4 GiB: 19.8,
    20, 19.9) gives 19.9."""
    caches = [("l1", 96 * KiB), ("l2", 2 * MiB), ("l3", 300 * MiB)]
    device = {"kind": "cpu", "caches": [{"name": n, "total_bytes": b} for n, b in caches]}
    roofs, notes = derive(cpu_vm_rows(), device)
    got = {r.name: r for r in roofs}
    assert got["dram"].value == 19.9 and got["dram"].plateau_bytes == (128 * MiB, int(2.4 * GiB))
    l3 = got["l3"]
    assert l3.value == 97
    assert (l3.extra["capacity_bytes"], l3.extra["edge_bytes"], l3.extra["reach_bytes"]) == \
        (300 * MiB, 32 * MiB, int(90.5 * MiB))
    model = Roofline(roofs)
    for ws, level in ((16 * MiB, "l3"), (45 * MiB, "l3"), (64 * MiB, "l3"), (100 * MiB, "dram"), (200 * MiB, "dram"),
                      (1 * GiB, "dram")):
        assert point_bound(model, ws, "warm", 0.0, "", caches, "dram")[0] == level, ws
    assert level_sizes(roofs, caches)[-1] == ("l3", 32 * MiB, int(90.5 * MiB))


def test_a_level_reaches_where_the_next_levels_plateau_starts():
    """L2 flat over 2-16 MiB (reported 50 MiB), HBM measured from 256 MiB: a warm 150 MiB point,
    past 4x L2's 16 MiB edge but short of the 256 MiB where HBM speed was measured, is L2's."""
    df = pd.DataFrame([row("stream.reread", ws, v, read=ws, write=0) for ws, v in
                       ((2 * MiB, 7000), (4 * MiB, 7100), (8 * MiB, 7050), (16 * MiB, 7000))]
                      + [row("stream.write", ws, 4600, read=0, write=ws) for ws in (256 * MiB, 512 * MiB)])
    roofs, _ = derive(df, {"kind": "cuda", "caches": [{"name": "l2", "total_bytes": 50 * MiB}]})
    l2 = next(r for r in roofs if r.name == "l2")
    assert l2.extra["edge_bytes"] == 16 * MiB and l2.extra["reach_bytes"] == 256 * MiB
    assert point_bound(Roofline(roofs), 150 * MiB, "warm", 0.0, "", [("l2", 50 * MiB)], "hbm")[0] == "l2"


def test_old_runs_without_direction_columns_use_op_names():
    df = pd.DataFrame({"op": ["stream.read", "stream.reread", "stream.write", "stream.triad", "gemm.square"]})
    assert list(directions(df)) == ["read", "read", "write", "copy", ""]
    old = h200_rows().drop(columns=["read_bytes", "write_bytes"])
    roofs, _ = level_roofs(rated(old, {}), [("l2", 60 * MiB)], "hbm")
    assert {r.name for r in roofs} >= {"hbm.read", "hbm.write", "hbm.copy"}


def test_binding_level_of_a_triton_gemm_is_l2_at_its_tile_intensity():
    """The issue's case: the 256x128 bf16 GEMM at 8192^3 moves 194 n^2 bytes through L2 (84.45
    FLOP per byte, C included), so the measured 7,546 GB/s L2 roof bounds it at 637 TFLOP/s,
    below bf16's 797 TFLOP/s and far below its HBM bound (2,731 FLOP per compulsory byte)."""
    from roofs.analysis.hierarchy import binding_level, level_bounds, triton_binding_table
    n = 8192
    model = Roofline([Roof("bandwidth", "hbm", 4669, "GB/s"), Roof("bandwidth", "l2", 7546, "GB/s"),
                      Roof("compute", "bf16", 797_000, "GFLOP/s")])
    r = {"op": "gemm.square", "impl": "gemm.square/triton", "backend": "triton", "status": "ok", "dtype": "bf16",
         "precision": "bf16", "shape": f"{n}x{n}x{n}", "flops": 2 * n**3, "bytes": 6 * n * n, "boundary": "hbm",
         "read_bytes": 4 * n * n, "write_bytes": 2 * n * n, "l2_bytes": 194 * n * n, "l1_bytes": 256 * n * n,
         "gflops": 630_000.0}
    b = level_bounds(r, model)
    assert b["l2"] == pytest.approx(7546 * 2 * n / 194) == pytest.approx(637_287, abs=1)
    assert b["hbm"] == pytest.approx(4669 * 2 * n / 6) and b["compute"] == 797_000
    assert "l1" not in b  # no L1 roof measured: no bound there
    assert binding_level(b) == "l2"
    table = triton_binding_table(pd.DataFrame([r, {**r, "backend": "torch", "impl": "gemm.square/torch"}]), model)
    assert list(table["kernel"]) == ["gemm.square/triton bf16"] and table["binding"].iloc[0] == "l2"
    assert table["% of binding bound"].iloc[0] == pytest.approx(100 * 630_000 / b["l2"])
    # a point whose every level allows more than its precision's roof is compute-bound
    assert binding_level(level_bounds({**r, "l2_bytes": n * n, "l1_bytes": None}, model)) == "compute"


def test_a_run_written_before_the_new_columns_loads_and_is_bounded_by_direction():
    from pathlib import Path

    from bench.results import load_run
    run = load_run(Path(__file__).parent / "data" / "run_a")
    df = run.measurements
    assert {"read_bytes", "write_bytes", "l2_bytes", "l1_bytes", "bound_roof"} <= set(df.columns)
    assert df["l2_bytes"].isna().all()
    roofs, _ = derive(df, run.device)
    out = annotate(df, roofs, run.device)
    stream = out[(out["family"] == "stream") & (out["boundary"] != "")]
    # stream rows of an old run are classed by their op: copy-like rows meet read+write or copy roofs
    assert set(stream["bound_roof"]) and all("." in b or b in ("dram", "l1", "l2", "l3") for b in stream["bound_roof"])
    from roofs.analysis.bounds import direction_bytes
    r = pd.Series({"op": "stream.triad", "bytes": 300.0, "read_bytes": float("nan"), "write_bytes": float("nan")})
    assert direction_bytes(r) == (200.0, 100.0)
    assert direction_bytes(pd.Series({"op": "gemm.square", "bytes": 300.0})) == (None, None)


def _cpu_levels_model(l2_reach):
    """A CPU VM's roofs: L2 230 GB/s read (edge 256 KiB, reach l2_reach), L3 190 GB/s read,
    DRAM 40 GB/s; caches as reported: L1 64 KiB, L2 2 MiB, L3 32 MiB in all."""
    return Roofline([Roof("bandwidth", "dram", 40, "GB/s"), Roof("bandwidth", "dram.read", 40, "GB/s"),
                     Roof("bandwidth", "l3", 190, "GB/s", extra={"capacity_bytes": 32 * MiB}),
                     Roof("bandwidth", "l3.read", 190, "GB/s"),
                     Roof("bandwidth", "l2", 230, "GB/s",
                          extra={"capacity_bytes": 2 * MiB, "edge_bytes": 256 * KiB, "reach_bytes": l2_reach}),
                     Roof("bandwidth", "l2.read", 230, "GB/s")])


def test_a_point_at_l2_speed_past_l2s_measured_reach_is_bounded_by_l2_not_the_l3_roof_it_beats():
    """The reread points at 0.5-1 MiB ran 220-230 GB/s (L2 speed) on a core pair whose
    L2 totals 2 MiB, past an L2 reach measured at 384 KiB; they were bounded by L3 (190) and
    flagged. A faster level whose band (4x its reported size) holds them and whose speed
    explains them (within 10%) bounds them instead."""
    model = _cpu_levels_model(384 * KiB)
    caches = [("l1", 64 * KiB), ("l2", 2 * MiB), ("l3", 32 * MiB)]
    level, note, att, bw = point_bound(model, 768 * KiB, "warm", 0.25, "", caches, "dram", 768 * KiB, 0, gbps=225)
    assert level == "l2" and bw.value == 230 and "runs at l2 speed" in note
    # at 180 GB/s L3's roof explains it: it stays L3's
    assert point_bound(model, 768 * KiB, "warm", 0.25, "", caches, "dram", 768 * KiB, 0, gbps=180)[0] == "l3"
    # beating L2 by more than 10% too: no faster level explains it, it stays L3's (and is flagged)
    assert point_bound(model, 768 * KiB, "warm", 0.25, "", caches, "dram", 768 * KiB, 0, gbps=260)[0] == "l3"
    # past L2's band (4 x 2 MiB): never L2's, however fast
    assert point_bound(model, 12 * MiB, "warm", 0.25, "", caches, "dram", 12 * MiB, 0, gbps=225)[0] == "l3"
    # a cold point crosses DRAM whatever its speed
    assert point_bound(model, 768 * KiB, "cold", 0.25, "", caches, "dram", 768 * KiB, 0, gbps=225)[0] == "dram"
