"""A copy roof's write share comes from its rows (roofs/analysis/model.py's write_shares,
Roofline.point_bandwidth's copy_share), not from a constant: the least share of its bytes any
row of the mix wrote, so a point writing at least as much may take the roof. An in-place
kernel such as nstream (a += b + s c: reads a, b, c, writes a) writes 1/4 of its bytes: it is a
mix (never a read or a write row), and it moves the copy roof's share to 1/4."""
import pandas as pd
import pytest

from roofs.analysis.confirm import derive_roofs
from roofs.analysis.roofline import OLD_RUN_WRITE_SHARE, Roof, Roofline, direction_of, write_share

MIB = 2**20
L3 = {"kind": "cpu", "caches": [{"name": "l3", "total_bytes": 32 * MIB}]}


def row(op, ws, gbps, read, write):
    return {"point_id": f"{op}[{ws}]@warm", "op": op, "family": "stream", "impl": f"{op}/torch", "backend": "torch",
            "dtype": "float32", "working_set_bytes": ws, "bytes": read + write, "read_bytes": read,
            "write_bytes": write, "gbps": gbps, "gflops": float("nan"), "median_ms": 1.0, "p20_ms": 1.0,
            "p80_ms": 1.0, "samples": 20, "status": "ok", "flag": "", "mode": "warm", "pass": 1, "shape": str(ws),
            "precision": "", "timer": "perf_counter_ns"}


def sweep(nstream_gbps=None):
    rows = []
    for ws in (128 * MIB, 256 * MIB, 512 * MIB):
        n = ws // 12   # 3 arrays of fp32 resident
        rows += [row("stream.read", ws, 40, ws, 0), row("stream.write", ws, 25, 0, ws),
                 row("stream.copy", ws, 35, ws // 2, ws // 2), row("stream.triad", ws, 33, 2 * 4 * n, 4 * n)]
        if nstream_gbps:   # traffic 4 arrays (a, b, c read; a written) over 3 resident
            rows.append(row("stream.nstream", ws, nstream_gbps, 3 * 4 * n, 4 * n))
    roofs, _ = derive_roofs(pd.DataFrame(rows), L3)
    return {r.name: r for r in roofs}


def test_nstream_is_a_mix_that_writes_a_quarter_of_its_bytes():
    n, w = 1000, 4
    assert write_share(3 * n * w, n * w) == 0.25 and direction_of(3 * n * w, n * w) == "copy"
    assert write_share(None, 4) is None and write_share(0, 0) is None


def test_the_copy_roof_records_the_least_share_its_rows_write():
    # copy writes 1/2, triad 1/3: the share is triad's, as the old constant had it
    got = sweep()
    assert got["dram.copy"].value == 35 and got["dram.copy"].extra["write_share"] == pytest.approx(1 / 3)
    assert "write_share" not in got["dram.read"].extra


def test_nstream_rows_set_no_read_or_write_roof_and_the_copy_roof_says_their_share():
    base, fast, slow = sweep(), sweep(nstream_gbps=38), sweep(nstream_gbps=30)
    for got in (fast, slow):   # its rows write: never a read roof; they read: never a write roof
        assert got["dram.read"].value == base["dram.read"].value == 40
        assert got["dram.write"].value == base["dram.write"].value == 25
        assert got["dram.copy"].extra["write_share"] == pytest.approx(0.25)
    assert fast["dram.copy"].value == 38 and fast["dram.copy"].op == "stream.nstream"
    assert slow["dram.copy"].value == 35 and slow["dram.copy"].op == "stream.copy"
    assert fast["dram"].value == base["dram"].value == 40   # the level's best: the read rows


def _model(share):
    extra = {} if share is None else {"write_share": share}
    return Roofline([Roof("bandwidth", "hbm", 100, "GB/s"), Roof("bandwidth", "hbm.read", 100, "GB/s"),
                     Roof("bandwidth", "hbm.write", 50, "GB/s"),
                     Roof("bandwidth", "hbm.copy", 90, "GB/s", extra=extra)])


def test_a_point_takes_the_copy_roof_when_it_writes_at_least_the_roofs_share():
    # 30 of 100 bytes written: read then write takes 100 / (70/100 + 30/50) = 76.9 GB/s
    serial = 100 / (70 / 100 + 30 / 50)
    assert _model(0.25).point_bandwidth("hbm", 70, 30)[:2] == (90, "hbm.copy")
    value, label, _ = _model(1 / 3).point_bandwidth("hbm", 70, 30)
    assert label == "hbm.read+write" and value == pytest.approx(serial)
    # nstream's own point (1/4 written) under a roof its rows set
    assert _model(0.25).point_bandwidth("hbm", 75, 25)[:2] == (90, "hbm.copy")
    # a copy roof derived before roofs recorded their share: the old kernels' least, triad's 1/3
    assert OLD_RUN_WRITE_SHARE == pytest.approx(1 / 3)
    assert _model(None).point_bandwidth("hbm", 70, 30)[1] == "hbm.read+write"
    assert _model(None).point_bandwidth("hbm", 200, 100)[:2] == (90, "hbm.copy")
