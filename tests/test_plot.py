"""The pictures: which charts a run gets, what they draw, and that no two texts overprint.

Drawn from the recorded runs in tests/data, the committed reference run, and a synthetic
GPU-like run built here with every family, the boundary and bound_note columns, a borrowed
compute roof, datasheet roofs and flagged points."""
import json
import math
import shutil
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from test_labels import crossings  # noqa: E402

from bench.results import COLUMNS, load_run  # noqa: E402
from roofs.analysis.derive import bandwidth_roofs  # noqa: E402
from roofs.charts import plot  # noqa: E402

ROOT = Path(__file__).parent.parent
DATA = Path(__file__).parent / "data"
REFERENCE = ROOT / "results" / "cpu-amd-epyc-20261130T024914Z"   # the committed reference runs
H200 = ROOT / "results" / "nvidia-h200-20261130T010900Z"
EXTRA = [c for c in ("boundary", "bound_note") if c not in COLUMNS]  # the columns, whether or not COLUMNS has them yet

MiB, GiB = 2**20, 2**30
L1, L2 = 20 * MiB, 50 * MiB
WIDTH = {"float32": 4, "bfloat16": 2, "fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8e4m3": 1, "int8": 1}
PEAK = {"fp32": 50_000, "tf32": 400_000, "fp16": 50_000, "bf16": 800_000, "fp8e4m3": 1_500_000, "int8": 1_600_000}


def _row(op, impl, dtype, size, shape, ws, flops, nbytes, seconds, mode="warm", precision="", flag="",
         boundary="", bound_note=""):
    family = op.split(".")[0]
    return {
        "point_id": f"{op}/{impl}[dtype={dtype},size={size},shape={shape}]@{mode}", "op": op, "family": family,
        "impl": f"{op}/{impl}", "backend": "triton" if impl.startswith("triton") else "torch", "dtype": dtype,
        "size": size, "shape": shape, "working_set_bytes": int(ws), "flops": int(flops), "bytes": int(nbytes),
        "intensity": flops / nbytes, "mode": mode, "median_ms": seconds * 1e3, "p20_ms": seconds * 0.99e3,
        "p80_ms": seconds * 1.01e3, "samples": 5, "reps": 10, "timer": "cuda_event", "stop": "converged",
        "gbps": nbytes / seconds / 1e9, "gflops": flops / seconds / 1e9, "error": 0.0, "tolerance": 1e-3,
        "status": "ok", "reason": "", "detail": "", "precision": precision, "boundary": boundary,
        "bound_note": bound_note, "flag": flag}


def _stream_gbps(ws, dtype, impl):
    """Synthetic plateaus: fp32 shows an L1 and an L2 plateau, bf16 only an L2 one (its L1
    window keeps rising), and the off-chip roof is reached from 4x L2 on."""
    scale = 1.0 if impl == "torch" else 0.95
    if ws <= 0.75 * L1:
        v = (9000 if dtype == "float32" else 2000 + 6000 * ws / (0.75 * L1))
    elif ws <= 0.75 * L2:
        v = 6000 if dtype == "float32" else 7000
    elif ws < 4 * L2:
        v = 4600
    else:
        v = 4000 if dtype == "float32" else 3900
    return v * scale


def synthetic_rows() -> pd.DataFrame:
    rows = []
    sizes = [int(2 ** (16 + k / 2)) for k in range(29)]  # 64 KiB .. 1 GiB, two per octave
    for dtype in ("float32", "bfloat16"):
        w = WIDTH[dtype]
        for impl in ("torch", "triton"):
            for ws in sizes:
                gbps = _stream_gbps(ws, dtype, impl)
                for op, arrays, per in (("stream.copy", 2, 0), ("stream.triad", 3, 2), ("stream.reread", 1, 1)):
                    n = ws // (arrays * w)
                    nbytes = n * arrays * w * (8 if op == "stream.reread" else 1)
                    flops = per * n * (8 if op == "stream.reread" else 1)
                    level = "l1" if ws <= L1 else "l2" if ws <= L2 else "hbm"
                    rows.append(_row(op, impl, dtype, n, f"({n},)", ws, flops, nbytes, nbytes / gbps / 1e9,
                                     boundary=level if flops else "",
                                     bound_note="" if flops else "no FLOPs"))
    for p in PEAK:
        w = WIDTH[p]
        for impl in ("torch", "triton"):
            eff = 0.9 if impl == "torch" else 0.8
            own = 30_000 if p == "fp16" else PEAK[p]  # fp16's own GEMMs are slower: its roof is borrowed
            for n in (1024, 2048, 4096, 8192, 16384):
                f, b = 2 * n**3, 3 * n * n * w
                g = own * eff * min(1, n / 4096)
                rows.append(_row("gemm.square", impl, p, n, f"{n}x{n}x{n}", b, f, b, f / g / 1e9, precision=p,
                                 boundary="hbm"))
            for m in (1, 4, 16, 64, 256, 1024, 4096):
                k = 8192
                f, b = 2 * m * k * k, (m * k + k * k) * w + m * k * w
                g = min(own * eff, 4000 * f / b * 0.8)
                rows.append(_row("gemm.skinny", impl, p, m, f"{m}x{k}x{k}", b, f, b, f / g / 1e9, "cold",
                                 precision=p, boundary="hbm"))
            for mm, nn, kk in ((16384, 4096, 4096), (4096, 16384, 1024)):
                f, b = 2 * mm * nn * kk, (mm * kk + kk * nn + mm * nn) * w
                g = own * eff * 0.95
                rows.append(_row("gemm.search", impl, p, max(mm, nn, kk), f"{mm}x{nn}x{kk}", b, f, b, f / g / 1e9,
                                 precision=p, boundary="hbm"))
    bits = {"fp16": 16, "bf16": 16, "int8": 8, "fp8": 8, "int4": 4}
    for fmt, nbits in bits.items():
        prec = fmt if fmt in ("fp16", "bf16") else "bf16"
        for impl, eff in (("torch", 0.3), ("torch_best", 0.6), ("triton_rows", 0.8), ("triton_tile", 0.85)):
            for n, k in ((4096, 4096), (14336, 4096), (4096, 14336), (128256, 4096)):
                for bsz in (1, 2, 4, 8, 16, 32, 64, 128, 256):
                    f = 2 * bsz * n * k
                    b = n * k * nbits // 8 + 2 * bsz * (n + k)
                    ws = b
                    level = "l2" if ws <= L2 else "hbm"
                    bw = 6000 if level == "l2" else 4000
                    g = min(PEAK[prec] * eff, bw * f / b * eff)
                    flag = ""
                    if fmt == "fp8" and impl == "triton_tile" and bsz == 1 and n == 4096 and k == 4096:
                        g *= 2.5
                        flag = "above its attainable bound even at p80: synthetic"
                    rows.append(_row("gemv.decode", impl, fmt, bsz, f"{bsz}x{n}x{k}", ws, f, b, f / g / 1e9, "cold",
                                     precision=prec, flag=flag, boundary=level))
    for dtype in ("fp16", "bf16"):
        for impl in ("sdpa", "triton"):
            for s in (512, 1024, 2048, 4096, 8192, 16384):
                f, b = 4 * 32 * s * s * 128 / 2, 4 * 32 * s * 128 * 2
                g = min(PEAK[dtype] * 0.5, 4000 * f / b)
                flagged = dtype == "fp16" and impl == "triton" and s == 16384
                flag = "above its attainable bound: synthetic" if flagged else ""
                if flagged:
                    g = PEAK[dtype] * 1.4
                rows.append(_row("attention.prefill", impl, dtype, s, f"B1xH32/8xS{s}xD128", b, f, b, f / g / 1e9,
                                 precision=dtype, flag=flag, boundary="hbm"))
        for impl in ("sdpa", "triton", "torch_math"):
            for length in (1024, 8192, 65536, 131072):
                f, b = 4 * 32 * length * 128, 2 * 8 * length * 128 * 2
                g = 4000 * f / b * (0.7 if impl != "torch_math" else 0.3)
                rows.append(_row("attention.decode", impl, dtype, length, f"B1xH32/8xL{length}xD128", b, f, b,
                                 f / g / 1e9, "cold", precision=dtype, boundary="l2" if b <= L2 else "hbm"))
    for nbytes in (4096, 2**16, 2**20, 2**24, 2**28):
        gbps = 50 * nbytes / (nbytes + 2**20)
        rows.append(_row("transfer.h2d", "copy", "uint8", nbytes, "pinned", nbytes, 0, nbytes, nbytes / gbps / 1e9))
    for n in (2**20, 2**24):
        rows.append(_row("user.double", "torch", "float32", n, f"({n},)", 8 * n, n, 8 * n, 8 * n / 3500 / 1e9,
                         precision="fp32", boundary="hbm"))
    # FMA chains (fp32 and bf16, Triton): n = 2^25, bytes ~ 2 n w, memory-bound until the vector roof
    for dtype, vec in (("fp32", 40_000), ("bf16", 120_000)):
        n, w = 2**25, WIDTH[dtype]
        for k in (1, 4, 16, 64, 256, 1024):
            flops, nbytes = 2 * k * 8 * n, (2 * n + 9) * w
            gflops = min(vec * 0.97, 3900 * flops / nbytes)
            rows.append(dict(_row("fma.chains", "triton", dtype, n, f"({n},)x8x{k}", 2 * n * w, flops, nbytes,
                                  flops / gflops / 1e9, precision=dtype, boundary="hbm"), k=k))
    # the launch floor: empty Triton kernels, launched (events) and replayed (graph)
    for timer, sec in (("cuda_event", 4.5e-6), ("cuda_graph", 1.2e-6)):
        launch = _row("probe.launch", "triton", "", 1, "(1,)", 1, 0, 1, sec)
        launch.update(timer=timer, bytes=0, working_set_bytes=0, intensity=math.nan, gbps=0.0, gflops=0.0,
                      point_id=f"probe.launch/triton[{timer}]@warm")
        rows.append(launch)
    # a skipped row never reaches a picture
    skipped = _row("stream.triad", "torch", "float32", 1, "(1,)", 12, 2, 12, 1.0)
    skipped.update(status="skipped", reason="synthetic", gbps=math.nan, gflops=math.nan)
    rows.append(skipped)
    df = pd.DataFrame(rows)
    for c in COLUMNS + EXTRA:
        if c not in df:
            df[c] = None
    # the Triton points' tile traffic (bench/ops/traffic.py): drawn again at their L2 (and L1) intensity
    tiled = (df["backend"] == "triton") & df["op"].isin(["gemm.square", "gemm.search", "attention.prefill"])
    df.loc[tiled, "l2_bytes"] = df.loc[tiled, "flops"] / 80
    df.loc[tiled & (df["family"] == "gemm"), "l1_bytes"] = df.loc[tiled & (df["family"] == "gemm"), "flops"] / 60
    gemv = df["impl"] == "gemv.decode/triton_tile"
    df.loc[gemv, "l2_bytes"] = df.loc[gemv, "bytes"] * 1.5
    return df[COLUMNS + EXTRA]


def synthetic_roofs() -> list[dict]:
    def roof(kind, name, value, source="measured", **kw):
        unit = "GB/s" if kind == "bandwidth" else ("GOP/s" if name == "int8" else "GFLOP/s")
        return {"kind": kind, "name": name, "value": value, "unit": unit, "source": source, "op": "", "impl": "",
                "dtype": "", "point_id": "", "shape": "", **kw}
    return [roof("bandwidth", "hbm", 4000.0, plateau_bytes=[4 * L2, GiB], plateau_points=5,
                 plateau_values=[3900.0, 4000.0], impl="stream.triad/torch"),
            roof("bandwidth", "l2", 7000.0, plateau_bytes=[L1, int(0.75 * L2)], plateau_points=3,
                 plateau_values=[6900.0, 7000.0]),
            roof("bandwidth", "l1", 9000.0, plateau_bytes=[2**16, int(0.75 * L1)], plateau_points=9,
                 plateau_values=[8900.0, 9000.0]),
            roof("bandwidth", "hbm", 4800.0, "datasheet"),
            roof("bandwidth", "host.h2d.pinned", 48.0),
            *[roof("bandwidth", f"link.sendrecv.{a}->{b}", 300.0 + 10 * a + b) for a, b in ((0, 1), (1, 0), (1, 2))],
            *[roof("compute", p, v * 0.9) for p, v in PEAK.items() if p != "fp16"],
            roof("compute", "fp16", PEAK["fp32"] * 0.9, extra={"via": "fp32", "own_gflops": 27_000.0}),
            roof("compute", "fp32.vector", 38_000.0, extra={"unit": "vector"}),
            roof("compute", "bf16.vector", 116_000.0, extra={"unit": "vector"}),
            {**roof("latency", "launch.triton.launch", 4.5), "unit": "us",
             "extra": {"backend": "triton", "form": "launch"}},
            {**roof("latency", "launch.triton.graph", 1.2), "unit": "us",
             "extra": {"backend": "triton", "form": "graph"}},
            *[roof("compute", p, v * 1.1, "datasheet") for p, v in PEAK.items()],
            *[roof("compute", p, v * 0.95, "datasheet@clock", extra={"clock_mhz": 1650}) for p, v in PEAK.items()]]


def make_synthetic_run(d: Path) -> Path:
    d.mkdir(parents=True)
    meta = {"schema_version": 1, "status": "complete", "start_utc": "2026-12-01T00:00:00+00:00",
            "device": {"kind": "cuda", "name": "Synthetic GPU", "torch_device": "cuda:0", "memory_bytes": 80 * GiB,
                       "compute_units": 100, "compute_unit_kind": "SMs",
                       "caches": [{"name": "l1", "size_bytes": L1 // 100, "instances": 100, "total_bytes": L1},
                                  {"name": "l2", "size_bytes": L2, "instances": 1, "total_bytes": L2}]}}
    (d / "run.json").write_text(json.dumps(meta))
    synthetic_rows().to_csv(d / "measurements.csv", index=False)
    (d / "roofs.json").write_text(json.dumps({"schema_version": 1, "roofs": synthetic_roofs(), "notes": []}))
    return d


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    return make_synthetic_run(tmp_path_factory.mktemp("plot") / "synthetic")


@pytest.fixture(scope="module")
def synthetic_drawn(synthetic, tmp_path_factory):
    """Return (a copy of the synthetic run with every chart drawn by plot_run in 2 worker
    processes, the paths it returned): drawn once, for the report test and the serial one."""
    d = Path(shutil.copytree(synthetic, tmp_path_factory.mktemp("drawn") / "run"))
    return d, plot.plot_run(d, workers=2)


def _runs(synthetic):
    return {"run_a": DATA / "run_a", "run_b": DATA / "run_b", "reference": REFERENCE, "h200": H200,
            "synthetic": synthetic}


def _intersecting(fig) -> tuple[int, list[tuple[str, str]]]:
    """Return how many texts a draw of fig puts on it, and every pair of them whose display
    boxes intersect; a text reaching past the figure's edge pairs with "(the figure's edge)"."""
    texts = plot.drawn_texts(fig)
    renderer = fig.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in texts]
    edge = fig.bbox
    out = [(t.get_text(), "(the figure's edge)") for t, b in zip(texts, boxes)
           if b.x0 < edge.x0 - 0.5 or b.y0 < edge.y0 - 0.5 or b.x1 > edge.x1 + 0.5 or b.y1 > edge.y1 + 0.5]
    out += [(texts[i].get_text(), texts[j].get_text())
            for i in range(len(boxes)) for j in range(i + 1, len(boxes))
            if boxes[i].x0 < boxes[j].x1 and boxes[j].x0 < boxes[i].x1
            and boxes[i].y0 < boxes[j].y1 and boxes[j].y0 < boxes[i].y1]
    return len(texts), out


CPU_CHARTS = {"roofline.png", "roofline-stream.png", "roofline-gemm.png", "roofline-gemv.png", "bandwidth.png",
              "gemm.png"}


@pytest.mark.parametrize("name,charts", [
    ("run_a", CPU_CHARTS), ("run_b", CPU_CHARTS), ("reference", CPU_CHARTS | {"roofline-attention.png"}),
    ("h200", CPU_CHARTS | {"roofline-attention.png", "links.png", "energy.png"}),
    ("synthetic", set(plot.CHARTS) - {"energy.png"})])  # synthetic: no energy readings
def test_charts_of_a_run_and_no_two_texts_overprint(name, charts, synthetic, run_figures):
    """A family chart exists only for the families the run has; on every chart no two drawn
    texts (labels, titles, ticks, legend entries) intersect, none runs off the figure, and no
    drawn line (leaders aside) passes through a label."""
    figs = run_figures(_runs(synthetic)[name])
    assert set(figs) == charts
    for chart, fig in figs.items():
        count, overlaps = _intersecting(fig)
        assert count > 5, chart  # titles, ticks and labels were drawn
        assert overlaps == [], f"{name}/{chart}"
        # no label on a line: roofs, sweeps, size lines and frames pass beside every label
        assert crossings(fig, [t for ax in fig.axes for t in ax.texts]) == [], f"{name}/{chart}"


def _gids(ax) -> dict:
    return {a.get_gid(): a for a in ax.get_children() if a.get_gid()}


def test_overview_roofs_points_and_legend(synthetic):
    run = load_run(synthetic)
    fig = plot.draw_roofline(run)
    try:
        ax = fig.axes[0]
        gids = _gids(ax)
        top = max(v for p, v in PEAK.items() if p != "fp16") * 0.9
        for level, bw in (("hbm", 4000.0), ("l2", 7000.0), ("l1", 9000.0)):  # every slope reaches the top roof
            xs, ys = gids[f"slope:{level}"].get_data()
            assert max(ys) == pytest.approx(top) and max(xs) == pytest.approx(top / bw)
        assert "slope:hbm:datasheet" in gids and "slope:host.h2d.pinned" in gids
        assert {"slope:link.sendrecv.1->2", "slope:link.sendrecv.0->1"} <= set(gids)  # the pairs' fastest, slowest
        assert sum(t.get_text().startswith("link.sendrecv, 3 pairs: 301 GB/s to 312 GB/s") for t in ax.texts) == 1
        assert "flat:bf16:datasheet" in gids and not any(g.endswith("datasheet@clock") for g in gids)
        texts = [t.get_text() for t in ax.texts]
        assert any("fp32, fp16 (via fp32)" in t for t in texts)  # the borrowed roof shares fp32's line, labelled so
        best = plot.roofline_points(run.measurements)
        assert len(best) == len(best.drop_duplicates(["op", "impl", "precision"]))
        # each best point labelled: by its point, by a number of the key, or by its place in the key
        placeless = [line for t in ax.texts if t.get_gid() == "label:key" for line in t.get_text().split("\n")
                     if line.startswith("-  ")]
        assert len([t for t in ax.texts if t.get_gid() == "label:point"]) + len(placeless) == len(best)
        said = [line.split("  ", 1)[-1] for t in texts for line in t.split("\n")]  # on the chart or in its key
        assert any(t.startswith("prefill/triton fp16") and "above its bound" in t for t in said)
        assert len(gids["flagged"].get_offsets()) == int(best["flagged"].sum()) >= 1
        sweep = gids["sweep:user.double:torch:fp32"]  # a user's sweep: one marker per shape, joined
        assert len(sweep.get_xdata()) == 2 and sweep.get_marker() == "o" and sweep.get_linestyle() == "-"
        from roofs.charts.kit import LEVEL_COLORS
        for level in ("hbm", "l2", "l1"):  # each level in its own colour, as on every chart
            assert matplotlib.colors.same_color(gids[f"slope:{level}"].get_color(), LEVEL_COLORS[level])
        entries = [t.get_text() for t in ax.get_legend().get_texts()]
        assert len(entries) <= 13 and {"stream", "gemm", "gemv", "attention", "user"} <= set(entries)
    finally:
        plt.close(fig)


def test_bandwidth_panels_draw_only_their_own_dtypes_roofs(synthetic):
    run = load_run(synthetic)
    fig = plot.draw_bandwidth(run)
    try:
        caches = [(c["name"], c["total_bytes"]) for c in run.device["caches"]]
        df = run.measurements
        panels = {ax.get_title().split(":")[0]: ax for ax in fig.axes if ax.get_visible()}
        assert set(panels) == {"float32", "bfloat16"}
        for dtype, ax in panels.items():
            own, _ = bandwidth_roofs(df[(df["family"] == "stream") & (df["dtype"] == dtype)], caches, "hbm")
            # level roofs only: hbm.read and the like are not drawn
            own = [r for r in own if "direction" not in r.extra]
            gids = _gids(ax)
            drawn = {g.split(":")[1]: a for g, a in gids.items() if g.startswith(("roof:", "candidate:"))}
            assert set(drawn) == {r.name for r in own}, dtype
            kept = {r["name"]: r for r in run.roofs if r["source"] == "measured"}
            texts = [t.get_text() for t in ax.texts]
            for r in own:
                assert drawn[r.name].get_segments()[0][0][1] == pytest.approx(r.value)
                # drawn as a roof only when it is roofs.json's roof, else labelled a candidate
                is_roof = r.name in kept and kept[r.name]["point_id"] == r.point_id
                assert (f"roof:{r.name}" in gids) == is_roof and (f"candidate:{r.name}" in gids) != is_roof
                assert any(t.startswith(f"{r.name.upper()} {'roof' if is_roof else 'candidate'} ") for t in texts)
            assert {g for g in gids if g.startswith("overall:")} == {"overall:hbm", "overall:l2", "overall:l1"}
            from roofs.charts.kit import LEVEL_COLORS
            for name in ("hbm", "l2", "l1"):  # the level's colour, as on the rooflines
                assert matplotlib.colors.same_color(gids[f"overall:{name}"].get_color(), LEVEL_COLORS[name])
            assert "4xllc" in gids
        bf16 = {g.split(":")[1] for g in _gids(panels["bfloat16"]) if g.startswith(("roof:", "candidate:"))}
        assert "l1" not in bf16  # the run's L1 roof comes from fp32 rows; bf16 shows none of its own
    finally:
        plt.close(fig)


def test_gemv_chart_joins_each_layers_batch_walk(synthetic):
    fig = plot.draw_gemv_roofline(load_run(synthetic))
    try:
        panels = [ax for ax in fig.axes if ax.get_visible() and ax.get_title().endswith("compute)")]
        assert [ax.get_title().split()[0] for ax in panels] == ["fp16", "bf16", "fp8", "int8", "int4"]
        for ax in panels:
            walks = [a for g, a in _gids(ax).items() if g.startswith("walk:")]
            assert len(walks) == 4 * 4  # impls x layers
            for line in walks:
                xs = list(line.get_xdata())
                assert len(xs) == 9 and xs == sorted(xs)  # B = 1 .. 256, intensity rising with B
            # the slopes crowd each panel's corner: unlabelled there, their figures in the shared legend
            assert {"slope:hbm", "slope:l2", "slope:l1"} <= set(_gids(ax))
            assert not [t.get_text() for t in ax.texts
                        if t.get_text().startswith(("HBM ", "L2 ", "L1 ")) and "datasheet" not in t.get_text()]
        entries = [t.get_text() for leg in fig.legends for t in leg.get_texts()]
        for level in ("HBM", "L2", "L1"):
            assert sum(e.startswith(f"slope: {level} ") and "GB/s" in e for e in entries) == 1, entries
    finally:
        plt.close(fig)


def test_triton_points_are_drawn_at_each_level_they_cross(synthetic):
    """Each point with l2_bytes (and l1_bytes) is drawn again at FLOPs / those bytes, at the
    same GFLOP/s, joined to its compulsory-intensity point by a thin line."""
    from roofs.charts.families import draw_gemm_roofline
    run = load_run(synthetic)
    fig = draw_gemm_roofline(run)
    try:
        gids = _gids(fig.axes[0])
        l2, l1 = gids["levels:l2"], gids["levels:l1"]
        df = run.measurements
        tiled = df[(df["family"] == "gemm") & (df["l2_bytes"] > 0)]
        assert len(l2.get_offsets()) == len(l1.get_offsets()) == len(tiled)
        assert sorted(x for x, _ in l2.get_offsets()) == pytest.approx([80.0] * len(tiled))
        assert sorted(x for x, _ in l1.get_offsets()) == pytest.approx([60.0] * len(tiled))
        line = gids["levels:lines"]
        assert sum(1 for x in line.get_xdata() if x != x) == len(tiled)  # one joined segment per point
    finally:
        plt.close(fig)


def test_label_placer_separates_labels_at_one_point():
    fig, ax = plt.subplots(figsize=(6, 4), dpi=plot.DPI)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(0.7, 1000)  # not a decade at the corner: matplotlib's own 10^0 labels would meet there
    ax.set_ylim(0.7, 1000)
    ax.plot([1, 1000], [1, 1000])
    fig.tight_layout()
    placer = plot.LabelPlacer(fig)
    for i in range(25):
        placer.add(ax, 30, 30, f"label number {i}")
    placed = placer.place()
    try:
        assert len(placed) == 25 and _intersecting(fig)[1] == []
        renderer = fig.canvas.get_renderer()
        inside = ax.get_window_extent(renderer)
        assert all(inside.x0 <= t.get_window_extent(renderer).x0 and t.get_window_extent(renderer).y1 <= inside.y1
                   for t in placed)  # there was room inside the axes for all of them
    finally:
        plt.close(fig)


def test_report_embeds_the_family_charts(synthetic_drawn, tmp_path):
    from roofs.reports.report import write_report
    d = Path(shutil.copytree(synthetic_drawn[0], tmp_path / "run"))  # its charts drawn by plot_run
    paths = synthetic_drawn[1]
    drawn = set(plot.CHARTS) - {"energy.png"}  # the synthetic run has no energy readings (tests/test_report.py has)
    assert {p.name for p in paths} == drawn
    md, html = write_report(d)
    text = md.read_text()
    for name in drawn:
        assert f"({name})" in text, name
    page = html.read_text()
    assert "base64" not in page  # linked, not inlined
    for name in drawn:
        assert f'src="{name}"' in page and (d / name).exists(), name


def test_charts_drawn_in_worker_processes_equal_those_drawn_here(synthetic, synthetic_drawn, run_figures, tmp_path):
    """plot_run's forked workers (synthetic_drawn) save the bytes that the same charts drawn in
    this process (plot.figures, shared with the layout tests through run_figures) save."""
    here = run_figures(synthetic)
    two = synthetic_drawn[1]  # plot_run(..., workers=2)
    assert sorted(here) == sorted(p.name for p in two) and here
    for path in two:
        mine = plot.save_chart(here[path.name], tmp_path / path.name)
        assert mine.read_bytes() == path.read_bytes(), path.name


def test_a_saved_chart_is_drawn_once_per_file(monkeypatch, tmp_path):
    """Saving draws the figure once per file: no layout pass before the draw that is saved."""
    fig = plot.draw_roofline(load_run(DATA / "run_a"))
    draws = []
    real = Figure.draw
    monkeypatch.setattr(Figure, "draw", lambda self, renderer: draws.append(renderer) or real(self, renderer))
    try:
        plot.save_chart(fig, tmp_path / "roofline.png")
    finally:
        plt.close(fig)
    assert (tmp_path / "roofline.svg").exists() and (tmp_path / "roofline.png").exists()
    assert len(draws) == 2  # the SVG's and the PNG's


def test_compare_chart_has_every_run_in_its_legend_and_no_overprinted_label(nodram):
    """Every run in the legend (one without an off-chip roof too: conftest.py's nodram), and the
    right-edge labels of equal roofs of several runs never overprint."""
    from roofs.reports.compare import figure_compare
    runs = [load_run(DATA / "run_a"), load_run(DATA / "run_b"), load_run(nodram)]
    fig = figure_compare(runs)
    try:
        legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
        for i in (1, 2, 3):
            assert any(t.startswith(f"run {i}: AMD EPYC") for t in legend), legend
        assert any(t.startswith("run 3:") and "no off-chip roof" in t for t in legend)
        count, overlaps = _intersecting(fig)
        assert overlaps == []
        ax = fig.axes[0]
        gids = {a.get_gid() for a in ax.get_children() if a.get_gid()}
        labels = [t.get_text() for t in ax.texts]
        for i, run in enumerate(runs, 1):
            for r in run.roofs:  # every level's slope and every precision's flat of every run
                if r["source"] == "measured" and r["kind"] == "bandwidth" and r["name"] in ("l1", "l2", "l3", "dram"):
                    assert f"run{i}:slope:{r['name']}" in gids, (i, r["name"])
                if r["source"] == "measured" and r["kind"] == "compute" and "." not in r["name"]:
                    assert f"run{i}:{r['name']}" in gids, (i, r["name"])
                    # one label per roof: the runs sharing a value share it
                    assert sum(t.split(": ", 1)[1].startswith(r["name"] + " ") and str(i) in t.split(":")[0]
                               for t in labels) == 1, (i, r["name"], labels)
    finally:
        plt.close(fig)


def test_compare_chart_of_runs_without_any_roof():
    """Runs with no roof and no FLOP-counted point (a busy machine's quick
    stream run) still give a compare chart: nothing to scale, so it says so."""
    from roofs.reports.compare import figure_compare
    run = load_run(DATA / "run_a")
    run.roofs = []
    run.measurements = run.measurements[run.measurements["family"] == "stream"].assign(flops=0)
    fig = figure_compare([run, run])
    try:
        fig.savefig(__import__("io").BytesIO(), format="png")
        assert "no roofs or FLOP-counted points in these runs" in [t.get_text() for t in plot.drawn_texts(fig)]
    finally:
        plt.close(fig)


def test_overview_leaves_off_and_names_a_best_point_far_under_its_bound(synthetic, tmp_path):
    # an fp8 GEMM on a slow path at 1e-3 GFLOP/s (bound 400,000) would stretch the y axis over decades
    d = Path(shutil.copytree(synthetic, tmp_path / "run"))
    df = pd.read_csv(d / "measurements.csv")
    slow = _row("gemm.square", "torch_best", "float8_e4m3fn", 64, "64x64x64", 3 * 64 * 64, 2 * 64**3, 3 * 64 * 64,
                2 * 64**3 / 1e6, precision="fp8e4m3")
    near = dict(slow, impl="gemm.square/triton_best", point_id=slow["point_id"].replace("torch_best", "triton_best"),
                median_ms=slow["median_ms"] / 500, gflops=0.5)  # 0.125% of the same bound: drawn
    assert slow["gflops"] == pytest.approx(1e-3)
    rows = pd.DataFrame([slow, near]).assign(attainable_gflops=400.0)
    pd.concat([df, rows], ignore_index=True).to_csv(d / "measurements.csv", index=False)
    fig = plot.draw_roofline(load_run(d))
    try:
        ax = fig.axes[0]
        labels = [t.get_text() for t in ax.texts if t.get_gid() == "label:point"]
        assert not any(t.startswith("square/torch_best") for t in labels)
        assert any(t.startswith("square/triton_best") for t in labels)
        assert ax.get_ylim()[0] > 1e-3  # the axis was not stretched down to the slow point
        notes = [t.get_text() for t in fig.texts if "left off" in t.get_text()]
        assert len(notes) == 1 and "1 best point at under 0.1% of its bound" in notes[0]
        assert "square/torch_best fp8e4m3 at 0.001 GFLOP/s" in notes[0]
    finally:
        plt.close(fig)


def test_a_busy_point_is_not_drawn_as_above_its_bound():
    # red rings mean "above its attainable bound"; a runner flag alone (busy, a time jump) is not that
    from roofs.charts.kit import _points
    df = pd.DataFrame({"status": ["ok"] * 3, "flops": [1e9] * 3, "gflops": [10.0] * 3, "intensity": [1.0] * 3,
                       "dtype": ["float32"] * 3, "precision": ["fp32"] * 3,
                       "flag": ["measured while the machine was busy: load 3", "",
                                "measured while the machine was busy: "
                                "load 3; above its attainable 9 GFLOP/s even at p80 (9.5): a test"]})
    assert list(_points(df)["flagged"]) == [False, False, True]


def test_a_model_runs_layer_ops_are_each_a_point():
    """Three layer GEMMs of one model op and impl, and two stream rows: three points for
    the model (one per shape), one for the stream kernel (its best)."""
    def row(op, family, shape, gflops, precision="bf16"):
        return {"op": op, "family": family, "impl": f"{op}/torch", "shape": shape, "mode": "warm", "status": "ok",
                "flops": 1e9, "gflops": gflops, "intensity": 10.0, "precision": precision, "dtype": "bfloat16",
                "flag": "", "boundary": ""}
    df = pd.DataFrame([row("model.gemm", "model", "2048x6144x4096", 400.0),
                       row("model.gemm", "model", "2048x4096x4096", 380.0),
                       row("model.gemm", "model", "2048x28672x4096", 420.0),
                       row("stream.triad", "stream", "64 MiB", 5.0, ""),
                       row("stream.triad", "stream", "1 GiB", 6.0, "")])
    best = plot.roofline_points(df)
    assert sorted(best[best["family"] == "model"]["gflops"]) == [380.0, 400.0, 420.0]
    assert list(best[best["family"] == "stream"]["gflops"]) == [6.0]
