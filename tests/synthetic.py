"""The synthetic GPU run the chart tests draw (tests/test_plot.py, tests/test_bands.py): a
measurements.csv of known rates for every family, and roofs.json's measured and datasheet
roofs, written by make_synthetic_run; and `banded`, a run folder's copy whose measured roofs
carry an interval (LOW to HIGH times the value: one-sided, as a shared host's noise is) and,
where asked, a confirmation, as rule 17 of ARCHITECTURE.md derives them."""
import json
import math
import shutil
from pathlib import Path

import pandas as pd

from bench.results import COLUMNS

EXTRA = [c for c in ("boundary", "bound_note") if c not in COLUMNS]  # the columns, whether or not COLUMNS has them yet

MiB, GiB = 2**20, 2**30
L1, L2 = 20 * MiB, 50 * MiB
WIDTH = {"float32": 4, "bfloat16": 2, "fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8e4m3": 1, "int8": 1}
PEAK = {"fp32": 50_000, "tf32": 400_000, "fp16": 50_000, "bf16": 800_000, "fp8e4m3": 1_500_000, "int8": 1_600_000}


def make_row(op, impl, dtype, size, shape, ws, flops, nbytes, seconds, mode="warm", precision="", flag="",
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
    window keeps rising), and the off-chip roof is reached from 1.5x L2 on, after a transition
    of two sizes (45 and 64 MiB: a working set partly in L2 reads between the two levels; a
    transition that spanned octaves would be a plateau, a level of its own)."""
    scale = 1.0 if impl == "torch" else 0.95
    if ws <= 0.75 * L1:
        v = (9000 if dtype == "float32" else 2000 + 6000 * ws / (0.75 * L1))
    elif ws <= 0.75 * L2:
        v = 6000 if dtype == "float32" else 7000
    elif ws < 1.5 * L2:
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
                    rows.append(make_row(op, impl, dtype, n, f"({n},)", ws, flops, nbytes, nbytes / gbps / 1e9,
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
                rows.append(make_row("gemm.square", impl, p, n, f"{n}x{n}x{n}", b, f, b, f / g / 1e9, precision=p,
                                     boundary="hbm"))
            for m in (1, 4, 16, 64, 256, 1024, 4096):
                k = 8192
                f, b = 2 * m * k * k, (m * k + k * k) * w + m * k * w
                g = min(own * eff, 4000 * f / b * 0.8)
                rows.append(make_row("gemm.skinny", impl, p, m, f"{m}x{k}x{k}", b, f, b, f / g / 1e9, "cold",
                                     precision=p, boundary="hbm"))
            for mm, nn, kk in ((16384, 4096, 4096), (4096, 16384, 1024)):
                f, b = 2 * mm * nn * kk, (mm * kk + kk * nn + mm * nn) * w
                g = own * eff * 0.95
                rows.append(make_row("gemm.search", impl, p, max(mm, nn, kk), f"{mm}x{nn}x{kk}", b, f, b, f / g / 1e9,
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
                    rows.append(make_row("gemv.decode", impl, fmt, bsz, f"{bsz}x{n}x{k}", ws, f, b, f / g / 1e9, "cold",
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
                rows.append(make_row("attention.prefill", impl, dtype, s, f"B1xH32/8xS{s}xD128", b, f, b, f / g / 1e9,
                                     precision=dtype, flag=flag, boundary="hbm"))
        for impl in ("sdpa", "triton", "torch_math"):
            for length in (1024, 8192, 65536, 131072):
                f, b = 4 * 32 * length * 128, 2 * 8 * length * 128 * 2
                g = 4000 * f / b * (0.7 if impl != "torch_math" else 0.3)
                rows.append(make_row("attention.decode", impl, dtype, length, f"B1xH32/8xL{length}xD128", b, f, b,
                                     f / g / 1e9, "cold", precision=dtype, boundary="l2" if b <= L2 else "hbm"))
    for nbytes in (4096, 2**16, 2**20, 2**24, 2**28):
        gbps = 50 * nbytes / (nbytes + 2**20)
        rows.append(make_row("transfer.h2d", "copy", "uint8", nbytes, "pinned", nbytes, 0, nbytes, nbytes / gbps / 1e9))
    for n in (2**20, 2**24):
        rows.append(make_row("user.double", "torch", "float32", n, f"({n},)", 8 * n, n, 8 * n, 8 * n / 3500 / 1e9,
                             precision="fp32", boundary="hbm"))
    # FMA chains (fp32 and bf16, Triton): n = 2^25, bytes ~ 2 n w, memory-bound until the vector roof
    for dtype, vec in (("fp32", 40_000), ("bf16", 120_000)):
        n, w = 2**25, WIDTH[dtype]
        for k in (1, 4, 16, 64, 256, 1024):
            flops, nbytes = 2 * k * 8 * n, (2 * n + 9) * w
            gflops = min(vec * 0.97, 3900 * flops / nbytes)
            rows.append(dict(make_row("fma.chains", "triton", dtype, n, f"({n},)x8x{k}", 2 * n * w, flops, nbytes,
                                      flops / gflops / 1e9, precision=dtype, boundary="hbm"), k=k))
    # the launch floor: empty Triton kernels, launched (events) and replayed (graph)
    for timer, sec in (("cuda_event", 4.5e-6), ("cuda_graph", 1.2e-6)):
        launch = make_row("probe.launch", "triton", "", 1, "(1,)", 1, 0, 1, sec)
        launch.update(timer=timer, bytes=0, working_set_bytes=0, intensity=math.nan, gbps=0.0, gflops=0.0,
                      point_id=f"probe.launch/triton[{timer}]@warm")
        rows.append(launch)
    # a skipped row never reaches a picture
    skipped = make_row("stream.triad", "torch", "float32", 1, "(1,)", 12, 2, 12, 1.0)
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
    return [roof("bandwidth", "hbm", 4000.0, plateau_bytes=[int(1.5 * L2), GiB], plateau_points=11,
                 plateau_values=[3900.0, 4000.0], impl="stream.triad/torch", extra={"from_bytes": int(1.5 * L2)}),
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


LOW, HIGH = 0.93, 1.03
UNBANDED = ("l3",)   # a roof left as a run derived before rule 17 has it: no interval, no confirmation


def banded(src: Path, dest: Path, confirm: dict | None = None) -> Path:
    """Return a copy of run folder src at dest whose measured roofs (L3 aside) carry the interval
    (LOW x value, HIGH x value) and, where confirm names them, that confirmation."""
    d = Path(shutil.copytree(src, dest))
    doc = json.loads((d / "roofs.json").read_text())
    for r in doc["roofs"]:
        if r.get("source", "measured") == "measured" and r["kind"] in ("bandwidth", "compute") \
                and r["name"] not in UNBANDED:
            r["interval"] = [LOW * r["value"], HIGH * r["value"]]
            if confirm and r["name"] in confirm:
                r["confirmation"] = confirm[r["name"]]
    (d / "roofs.json").write_text(json.dumps(doc))
    return d
