"""profile: programs built in code (a small transformer's prefill and decode, a convolutional net, a
torch.compile'd function) captured op by op; their FLOPs against hand-worked counts, bytes on hand-worked ops,
the ops' times against the step, the placement formulas, the chart's named points and bad input."""
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch
from conftest import session_run
from torch import nn

from bench import api
from bench.examples import profile_transformer as tf
from bench.results import load_run
from bench.run.profile import capture
from roofs.analysis.program import place_ops
from roofs.analysis.roofline import Roof
from roofs.charts.kit import roofline_points
from roofs.charts.plot import draw_roofline
from roofs.charts.svg import point_titles, save_svg
from roofs.reports.profile import RANKED_HEAD

ROOFS = [Roof("bandwidth", "dram", 50.0, "GB/s"), Roof("bandwidth", "l1", 300.0, "GB/s"),
         Roof("bandwidth", "l2", 200.0, "GB/s"), Roof("bandwidth", "l3", 100.0, "GB/s"),
         Roof("compute", "fp32", 200.0, "GFLOP/s")]
ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).parent / "data"
# The ops' times are each inside the step's range, so they never sum past it (beyond the profiler's 1 us
# ticks); what is not an op is Python and dispatch between ops, whose share depends on how busy the
# machine is, so no lower bound is asserted.
TICKS = 1e-6


@pytest.mark.slow   # two whole profiles through the API, with their files (seconds)
def test_transformer_prefill_and_decode_flops_match_the_hand_count(tmp_path):
    dim, layers, prompt, vocab = 128, 2, 64, 512
    _, prefill, decode = tf.build(dim, layers, prompt, vocab)
    for step, is_decode in ((prefill, False), (decode, True)):
        p = api.profile(step, roofs=ROOFS, steps=2, out=tmp_path / f"p{is_decode}", device="cpu")
        ops, rec = p.ops, p.record
        want = tf.hand_flops(dim, layers, prompt, vocab, is_decode)
        assert ops["flops"].fillna(0).sum() == want
        assert rec["flop_counter_total"] == want                     # FlopCounterMode agrees over the same pass
        # every linear layer is one aten::mm per layer and module: 4 per block plus the head
        mm = ops[ops["op"] == "aten::mm"]
        assert len(mm) == 4 * layers + 1 and set(mm["precision"]) == {"fp32"}
        qkv = mm[mm["module"] == "TinyLM.layers.0.qkv"].iloc[0]
        s = 1 if is_decode else prompt
        assert qkv["flops"] == 2 * s * dim * 3 * dim
        # read: the activation (s x dim) and the weight (dim x 3dim, a transposed view: its span); written s x 3dim
        assert qkv["read_bytes"] == 4 * (s * dim + dim * 3 * dim) and qkv["write_bytes"] == 4 * s * 3 * dim
        assert ops["time_s"].sum() <= rec["step_s"] + TICKS * len(ops)
        assert (ops["time_s"] > 0).all()   # every counted op was matched to a timed event of the step
        assert (ops["share"].sum() - ops["time_s"].sum() / rec["step_s"]) == pytest.approx(0, abs=1e-9)


def test_convnet_flops_match_the_hand_count():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 16, 3, stride=2, padding=1),
                        nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10)).eval()
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        cap = capture(lambda: net(x), steps=2)
    # conv: 2 x N x Cout x Hout x Wout x Cin x k x k; linear: 2 x N x in x out
    conv1, conv2, fc = 2 * 2 * 8 * 32 * 32 * 3 * 9, 2 * 2 * 16 * 16 * 16 * 8 * 9, 2 * 2 * 16 * 10
    assert cap.rows["flops"].fillna(0).sum() == conv1 + conv2 + fc == cap.flop_counter_total
    convs = cap.rows[cap.rows["op"] == "aten::convolution"].sort_values("module")
    assert list(convs["flops"]) == [conv1, conv2]
    # conv1 reads x, its weight and bias once each and writes its output
    assert convs.iloc[0]["read_bytes"] == 4 * (2 * 3 * 32 * 32 + 8 * 3 * 9 + 8)
    assert convs.iloc[0]["write_bytes"] == 4 * 2 * 8 * 32 * 32


def test_bytes_count_each_input_once_and_an_expanded_one_by_its_span():
    x, y = torch.randn(256, 256), torch.randn(256)
    cap = capture(lambda: x + y, steps=1)
    add = cap.rows[cap.rows["op"] == "aten::add"].iloc[0]
    assert add["read_bytes"] == 4 * (256 * 256 + 256) and add["write_bytes"] == 4 * 256 * 256
    cap = capture(lambda: x * x, steps=1)                 # the same tensor twice is read once
    assert cap.rows.iloc[0]["read_bytes"] == 4 * 256 * 256


def test_placement_follows_the_formulas():
    rows = pd.DataFrame([{"op": "aten::mm", "module": "m", "shapes": "", "dtype": "float32", "precision": "fp32",
                          "calls": 1, "flops": 4e9, "read_bytes": 3e9, "write_bytes": 1e9, "time_s": 0.5,
                          "kind": "aten"},
                         {"op": "aten::gelu", "module": "m", "shapes": "", "dtype": "float32", "precision": "fp32",
                          "calls": 1, "flops": float("nan"), "read_bytes": 1e9, "write_bytes": 1e9, "time_s": 0.25,
                          "kind": "aten"}])
    roofs = [Roof("bandwidth", "dram", 50.0, "GB/s"), Roof("compute", "fp32", 200.0, "GFLOP/s")]
    p = place_ops(rows, roofs, {}, step_s=1.0).set_index("op")
    mm, gelu = p.loc["aten::mm"], p.loc["aten::gelu"]
    # mm: I = 4e9 / 4e9 = 1, attainable min(200, 50 x 1) = 50; attained 8 GFLOP/s: 16%, 6.25x, wins 0.5 x 0.84
    assert mm["attainable_gflops"] == 50 and mm["pct_of_attainable"] == pytest.approx(16)
    assert mm["headroom"] == pytest.approx(6.25) and mm["to_win"] == pytest.approx(0.42)
    assert mm["bound_s"] == pytest.approx(0.08)
    # gelu: no formula, a bandwidth point: 2e9 bytes in 0.25 s = 8 GB/s of 50: 16%
    assert not gelu["has_formula"] and gelu["pct_of_attainable"] == pytest.approx(16)
    assert list(p.index) == ["aten::mm", "aten::gelu"]          # ranked by the share to win


@pytest.mark.slow
def test_chart_names_every_point_and_the_html_inlines_it(tmp_path):
    _, prefill, _ = tf.build(64, 1, 16, 256)
    p = api.profile(prefill, roofs=ROOFS, steps=1, out=tmp_path / "p", device="cpu")
    titles = point_titles(p.folder / "roofline.svg")
    ops = p.ops
    drawn = ops[(ops["read_bytes"] + ops["write_bytes"] > 0) & (ops["gbps"] > 0)]
    assert sum(titles.values()) == len(drawn)
    assert any(t.startswith("aten::mm [fp32, 16x64, 64x192] in TinyLM.layers.0.qkv: ") for t in titles)
    html = (p.folder / "profile.html").read_text()
    # the html inlines the chart itself: its svg names the same points as roofline.svg
    inlined = tmp_path / "inlined.svg"
    inlined.write_text(html[html.index("<svg"):html.index("</svg>") + len("</svg>")])
    assert point_titles(inlined) == titles


@pytest.mark.slow
def test_a_compiled_function_places_its_kernels_from_their_arguments(tmp_path):
    x, w = torch.randn(64, 32), torch.randn(32, 16)
    f = torch.compile(lambda x, w: torch.relu(x @ w) * 2 + 1)
    cap = capture(lambda: f(x, w), steps=2)
    rows = cap.rows
    kernels = rows[rows["kind"] == "inductor"]
    assert len(kernels) == 1 and kernels.iloc[0]["flops"] != kernels.iloc[0]["flops"]   # a bandwidth point
    # the fused relu, mul and add rewrite the 64x16 product in place: read and written once
    assert kernels.iloc[0]["read_bytes"] == kernels.iloc[0]["write_bytes"] == 64 * 16 * 4
    assert rows["flops"].fillna(0).sum() == 2 * 64 * 32 * 16                 # the extern mm's


@session_run
def profiled_example(tmp, env):
    """Return (the CompletedProcess, the --out folder) of `run_bench.py profile` on the transformer
    example, in a process of its own."""
    out = tmp / "prof"
    return subprocess.run([sys.executable, str(ROOT / "run_bench.py"), "profile",
                           str(ROOT / "bench/examples/profile_transformer.py"), "--dim", "64", "--layers", "1",
                           "--prompt", "16", "--roofs", str(DATA / "run_a"), "--steps", "2", "--out", str(out)],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=300, check=False), out


@pytest.mark.slow
def test_cli_profiles_the_example_into_its_own_folder(profiled_example):
    r, out = profiled_example
    assert r.returncode == 0, r.stderr
    assert RANKED_HEAD in r.stdout and "TinyLM.layers.0.qkv" in r.stdout
    assert {"ops.csv", "profile.json", "profile.md", "profile.html", "roofline.svg", "roofline.png"} <= \
        {p.name for p in out.iterdir()}
    assert json.loads((out / "profile.json").read_text())["argv"] == ["--dim", "64", "--layers", "1",
                                                                       "--prompt", "16"]


@pytest.mark.parametrize("body, args, code, says", [
    ("raise RuntimeError('boom')\n", ["--roofs", DATA / "run_a"], "step_raised", "RuntimeError: boom"),
    ("x = 1 + 1\n", ["--roofs", DATA / "run_a"], "no_op", "prog.py"),
    ("import torch\ntorch.ones(3).sum()\n", ["--roofs", "{tmp}"], "roofs_unreadable", "{tmp}"),
    ("import torch\ntorch.ones(3).sum()\n", ["--roofs", DATA / "run_a", "--steps", "0"], "bad_steps", "steps=0"),
])
def test_bad_input_is_one_sentence_and_exit_2(tmp_path, cli_in_process, body, args, code, says):
    script = tmp_path / "prog.py"
    script.write_text(body)
    r = cli_in_process("profile", script, *[str(a).format(tmp=tmp_path) for a in args], "--out", tmp_path / "out")
    err = r.stderr
    assert r.returncode == 2 and r.code == code and says.format(tmp=tmp_path) in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1


def test_out_inside_the_roofs_run_is_refused(tmp_path):
    with pytest.raises(api.APIError) as e:
        api.profile(lambda: torch.ones(3).sum(), roofs=DATA / "run_a", steps=1, out=DATA / "run_a" / "p")
    assert e.value.code == "out_inside_roofs"


def test_a_runs_overview_roofline_names_its_points_on_hover(tmp_path):
    run = load_run(DATA / "run_a")
    save_svg(draw_roofline(run), tmp_path / "roofline.svg")   # what a run's report links beside roofline.png
    titles = point_titles(tmp_path / "roofline.svg")
    best = roofline_points(run.measurements)
    assert 1 <= sum(titles.values()) <= len(best)
    assert all(" GFLOP/s" in t and "/" in t.split()[0] for t in titles)


def test_the_pct_interval_spans_the_roofs_interval():
    op = {"module": "m", "shapes": "", "dtype": "float32", "precision": "fp32", "calls": 1, "time_s": 0.1,
          "kind": "aten"}
    rows = pd.DataFrame([{**op, "op": "aten::add", "flops": float("nan"), "read_bytes": 2e9, "write_bytes": 1e9},
                         {**op, "op": "aten::mm", "flops": 3e10, "read_bytes": 2e8, "write_bytes": 1e8}])
    roofs = [Roof("bandwidth", "dram", 50.0, "GB/s", interval=(40.0, 60.0)),
             Roof("compute", "fp32", 400.0, "GFLOP/s", interval=(380.0, 420.0))]
    add, mm = (r for _, r in place_ops(rows, roofs, {}, step_s=0.2).sort_values("op").iterrows())
    # 3e9 bytes in 0.1 s = 30 GB/s: 60% of 50, 50% of the band's top 60, 75% of its bottom 40 (rule 17)
    assert add["pct_of_attainable"] == pytest.approx(60) and add["pct_low"] == pytest.approx(50)
    assert add["pct_high"] == pytest.approx(75) and add["share"] == pytest.approx(0.5)
    # 3e10 FLOPs in 0.1 s = 300 GFLOP/s at 100 FLOP/B: the compute roof binds, 75% of 400, 71.4% to 78.9%
    assert mm["pct_of_attainable"] == pytest.approx(75)
    assert (mm["pct_low"], mm["pct_high"]) == pytest.approx((100 * 300 / 420, 100 * 300 / 380))
    # roofs without an interval: no range
    plain = place_ops(rows, [Roof("bandwidth", "dram", 50.0, "GB/s")], {}, step_s=0.2)
    assert plain["pct_low"].isna().all() and plain["pct_high"].isna().all()


def test_svg_titles_follow_the_points_order_for_scatters_and_lines(tmp_path):
    import xml.etree.ElementTree as ET

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from roofs.charts.svg import SVG, name_points
    fig = Figure()
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    name_points(ax.scatter([3, 1, 2], [1, 1, 1], s=[10, 20, 30], gid="pts"), ["x3", "x1", "x2"])
    line, = ax.plot([1, 2, 3], [2, 2, 2], marker="o", ls="-", gid="line")
    name_points(line, ["l1", "l2", "l3"])
    save_svg(fig, tmp_path / "c.svg")
    root = ET.parse(tmp_path / "c.svg").getroot()

    def x_of(mark):   # a <use> has its x; a scatter's <path> starts at "M x y"
        return float(mark.get("x")) if mark.get("x") else float(mark.get("d").split()[1])
    xs = {}
    for g in root.iter(f"{{{SVG}}}g"):
        if g.get("class") == "point":
            xs[g.find(f"{{{SVG}}}title").text] = x_of(next(c for c in g if not c.tag.endswith("title")))
    assert set(xs) == {"x1", "x2", "x3", "l1", "l2", "l3"}
    assert xs["x1"] < xs["x2"] < xs["x3"] and xs["l1"] < xs["l2"] < xs["l3"]
