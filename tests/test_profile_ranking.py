"""profile's one ranking: an op that moves bytes and counts no FLOPs (a cast, a copy) is counted by the bytes
its input and output tensors hold, placed at its level's bandwidth roof and ranked with the ops that have
FLOPs, by the share of the step it would win; an op with neither is listed after, with its time and code."""
import json
import re

import pandas as pd
import pytest
import torch
from torch import nn

from bench import api
from bench.run.profile import count_step
from roofs.analysis.program import NO_ROOF, NO_TIME, UNCOUNTED, place_ops, ranking, totals
from roofs.analysis.roofline import Roof
from roofs.reports.profile import finish_profile

MIB = 1024 * 1024
ROOFS = [Roof("bandwidth", "dram", 50.0, "GB/s"), Roof("compute", "fp32", 200.0, "GFLOP/s")]
NUMBERED = re.compile(r"^\s*(\d+)\. (\S+) ")


def _ranked_in_text(text: str) -> list[tuple[int, str]]:
    """Return (number, op) of the printed ranking's numbered lines, in order."""
    return [(int(m.group(1)), m.group(2)) for m in map(NUMBERED.match, text.splitlines()) if m]


def _only(calls, op):
    got = [c for c in calls if c.op == op]
    assert len(got) == 1, [c.op for c in calls]
    return got[0]


def test_a_cast_reads_its_input_and_writes_its_output_by_their_dtypes():
    x = torch.randn(1024, 1024)
    cast = _only(count_step(lambda: x.to(torch.bfloat16))[0], "aten::_to_copy")
    # fp32 [1024, 1024] -> bf16: 1024 x 1024 x 4 bytes read, 1024 x 1024 x 2 bytes written; no FLOPs
    assert (cast.read_bytes, cast.write_bytes, cast.flops) == (4 * MIB, 2 * MIB, None)
    back = _only(count_step(lambda: x.bfloat16().float())[0][1:], "aten::_to_copy")    # bf16 -> fp32
    assert (back.read_bytes, back.write_bytes) == (2 * MIB, 4 * MIB)
    y = torch.empty(1024, 1024, dtype=torch.bfloat16)
    copy = _only(count_step(lambda: y.copy_(x))[0], "aten::copy_")   # the destination is written, not read
    assert (copy.read_bytes, copy.write_bytes) == (4 * MIB, 2 * MIB)


def _synthetic() -> pd.DataFrame:
    op = {"module": "m", "shapes": "", "calls": 1, "kind": "aten"}
    return pd.DataFrame([
        # compute-bound: I = 60 FLOP/B, attainable min(200, 50 x 60) = 200 GFLOP/s: 0.3 s at its roof, 0.4 s taken
        {**op, "op": "aten::mm", "dtype": "float32", "precision": "fp32", "flops": 60e9, "read_bytes": 0.8e9,
         "write_bytes": 0.2e9, "time_s": 0.4},
        # a cast: 4e9 read + 2e9 written at 50 GB/s is 0.12 s at its roof, 0.3 s taken
        {**op, "op": "aten::_to_copy", "dtype": "float32", "precision": "fp32", "flops": float("nan"),
         "read_bytes": 4e9, "write_bytes": 2e9, "time_s": 0.3},
        {**op, "op": "aten::_local_scalar_dense", "dtype": "", "precision": "", "flops": float("nan"),
         "read_bytes": 0.0, "write_bytes": 0.0, "time_s": 0.05},                       # nothing counted
        {**op, "op": "aten::bmm", "dtype": "bfloat16", "precision": "bf16", "flops": 1e9, "read_bytes": 0.0,
         "write_bytes": 0.0, "time_s": 0.02},                             # FLOPs, no bytes, no bf16 roof
        {**op, "op": "aten::add", "dtype": "float32", "precision": "fp32", "flops": float("nan"),
         "read_bytes": 1e6, "write_bytes": 1e6, "time_s": 0.0}])                        # no time recorded


def test_a_cast_that_would_win_more_ranks_before_a_matmul():
    placed = place_ops(_synthetic(), ROOFS, {}, step_s=1.0)
    ranked, rest = ranking(placed)
    assert list(ranked["op"]) == ["aten::_to_copy", "aten::mm"] and list(ranked["rank"]) == [1, 2]
    cast, mm = ranked.iloc[0], ranked.iloc[1]
    # the cast: (0.3 - 0.12) / 1.0 = 0.18 to win at 40% of 50 GB/s; the mm: (0.4 - 0.3) / 1.0 = 0.1 at 75%,
    # though its share of the step (0.4) is the larger
    assert cast["counted_by"] == "bytes" and cast["pct_of_attainable"] == pytest.approx(40)
    assert cast["to_win"] == pytest.approx(0.18) and cast["bound_s"] == pytest.approx(0.12)
    assert mm["counted_by"] == "flops" and mm["to_win"] == pytest.approx(0.1) and mm["share"] > cast["share"]
    assert dict(zip(rest["op"], rest["unranked"])) == {"aten::_local_scalar_dense": UNCOUNTED,
                                                         "aten::bmm": NO_ROOF, "aten::add": NO_TIME}
    assert rest["rank"].isna().all() and (ranked["unranked"] == "").all()
    assert list(rest["op"]) == ["aten::_local_scalar_dense", "aten::bmm", "aten::add"]   # by share
    t = totals(placed, 1.0)
    # the ranked ops at their bounds, the unranked at their own times: 0.12 + 0.3 + 0.05 + 0.02 + 0
    assert t["bound_s"] == pytest.approx(0.49)
    assert t["unranked"] == {UNCOUNTED: 1, NO_ROOF: 1, NO_TIME: 1}


def test_the_printed_ranking_is_the_one_ranking(tmp_path):
    ops = _synthetic()
    ops.to_csv(tmp_path / "ops.csv", index=False)
    (tmp_path / "profile.json").write_text(json.dumps({
        "kind": "profile", "step_s": 1.0, "steps_s": [1.0], "steps": 1, "flop_counter_total": 61e9, "notes": [],
        "device": {"name": "test"}, "roofs": [r.to_dict() for r in ROOFS], "program": "synthetic"}))
    text, _ = finish_profile(tmp_path)
    assert _ranked_in_text(text) == [(1, "aten::_to_copy"), (2, "aten::mm")]
    md = (tmp_path / "profile.md").read_text()
    assert _ranked_in_text(md) == [(1, "aten::_to_copy"), (2, "aten::mm")]
    written = pd.read_csv(tmp_path / "ops.csv")
    assert list(written["rank"].dropna()) == [1, 2]


def test_an_mlp_under_bf16_autocast_ranks_its_casts_with_its_matmuls(tmp_path):
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(256, 1024), nn.GELU(), nn.Linear(1024, 256))
    x = torch.randn(8, 256)

    def step():
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            return net(x)
    roofs = [Roof("bandwidth", "dram", 50.0, "GB/s"), Roof("bandwidth", "l1", 300.0, "GB/s"),
             Roof("bandwidth", "l2", 200.0, "GB/s"), Roof("bandwidth", "l3", 100.0, "GB/s"),
             Roof("compute", "fp32", 200.0, "GFLOP/s"), Roof("compute", "bf16", 400.0, "GFLOP/s")]
    p = api.profile(step, roofs=roofs, steps=2, out=tmp_path / "p", device="cpu")
    ops = p.ops
    casts, mms = ops[ops["op"] == "aten::_to_copy"], ops[ops["op"].isin(["aten::addmm", "aten::mm"])]
    assert len(mms) == 2 and len(casts) >= 2
    # each weight cast: fp32 read, bf16 written (256 x 1024 elements)
    weights = casts[casts["read_bytes"] == 4 * 256 * 1024]
    assert len(weights) == 2 and (weights["write_bytes"] == 2 * 256 * 1024).all()
    # one ranking: the casts and the matmuls both hold ranks in it, numbered in the printed text alike
    assert casts["rank"].notna().all() and mms["rank"].notna().all()
    assert set(casts["counted_by"]) == {"bytes"} and set(mms["counted_by"]) == {"flops"}
    printed = [op for _, op in _ranked_in_text(p.text)]
    assert "aten::_to_copy" in printed and "aten::addmm" in printed
    ranks = sorted(int(r) for r in ops["rank"].dropna())
    assert ranks == list(range(1, len(ranks) + 1))
