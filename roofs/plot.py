"""Pictures of a run. Reads only the run folder's files; never runs a kernel.

roofline.png   log-log FLOP/s against FLOP/byte: measured bandwidth roofs as slopes,
               compute roofs as flats, every measured point that does FLOPs
bandwidth.png  GB/s against working-set size per dtype, one line per kernel, the cache
               sizes marked and each bandwidth roof drawn over its plateau
gemm.png       GFLOP/s against size per precision: the square sweep and the skinny
               (intensity) sweep beside its attainable bound
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from bench.results import Run, load_run  # noqa: E402
from roofs.model import Roofline  # noqa: E402

OP_COLORS = {"copy": "tab:blue", "scale": "tab:orange", "add": "tab:green",
             "triad": "tab:red", "read": "tab:purple", "write": "tab:brown"}
IMPL_MARKERS = {"torch": "o", "triton": "^", "numpy": "s", "torch_best": "v", "triton_rows": ">", "triton_tile": "<"}
LEVEL_COLORS = {"hbm": "black", "dram": "black", "l3": "tab:cyan", "l2": "tab:olive", "l1": "tab:pink"}


def _fmt_bytes(n: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n:g} B"


def _title(run: Run, what: str) -> str:
    dev = run.device
    return f"{what}: {dev.get('name', '?')} ({run.meta.get('start_utc', '')[:16]} UTC)"


def _short(s: str) -> str:
    return s.split(".", 1)[-1]


PRECISION_COLORS = {"fp64": "tab:gray", "fp32": "tab:blue", "tf32": "tab:cyan", "fp16": "tab:orange",
                    "bf16": "tab:red", "fp8e4m3": "tab:purple", "fp8e5m2": "tab:pink", "int8": "tab:green",
                    "fp8": "tab:purple", "int4": "tab:olive"}


def _impl_name(impl: str) -> str:
    return impl.rsplit("/", 1)[-1]


def plot_roofline(run: Run, path: Path) -> Path:
    """Draw roofline.png for run and return its path: bandwidth roofs as slopes, one flat
    roof per measured precision starting at its ridge point against the memory roof,
    stream points coloured by op and GEMM points coloured by precision."""
    model = Roofline(run.roofs)
    df = run.measurements
    ok = df[(df["status"] == "ok") & (df["flops"] > 0) & df["gflops"].notna()]
    llc = max((c.get("total_bytes", 0) for c in run.device.get("caches", [])), default=0)
    fig, ax = plt.subplots(figsize=(11, 6.5))
    lo_x = min(ok["intensity"].min() / 4, 1e-2) if not ok.empty else 1e-2
    hi_x = max(ok["intensity"].max() * 4, 100) if not ok.empty else 1e3
    xs = np.logspace(np.log10(lo_x), np.log10(hi_x), 400)
    peak = model.compute()
    mem = model.bandwidth()
    for roof in model.roofs:
        if roof.kind != "bandwidth" or roof.source != "measured":
            continue
        ys = roof.value * xs
        if peak:
            ys = np.minimum(ys, peak.value)
        is_mem = roof.name in ("hbm", "dram")
        ax.plot(xs, ys, color=LEVEL_COLORS.get(roof.name, "gray"), lw=2 if is_mem else 1.2,
                ls="-" if is_mem else "--",
                label=f"{roof.name.upper()} {roof.value:,.0f} GB/s ({roof.source}, {_impl_name(roof.impl)})")
    for roof in model.roofs:
        if roof.kind != "compute" or roof.source != "measured":
            continue
        ridge = roof.value / mem.value if mem else lo_x
        color = PRECISION_COLORS.get(roof.name, "gray")
        ax.hlines(roof.value, max(ridge, lo_x), hi_x, color=color, lw=1.8)
        ax.text(hi_x, roof.value, f"{roof.name} {roof.value:,.0f} {roof.unit}"
                + (f", ridge {ridge:.3g} FLOP/B" if mem else "") + " ", ha="right", va="bottom", fontsize=7, color=color)
    for roof in model.roofs:  # the vendor's (or a computed) roofs, beside the measured ones
        if roof.source not in ("datasheet", "computed"):
            continue
        if roof.kind == "bandwidth":
            ax.plot(xs, roof.value * xs, color="gray", lw=1, ls=":", label=f"{roof.name.upper()} {roof.value:,.0f} GB/s ({roof.source})")
        elif roof.name in {r.name for r in model.roofs if r.kind == "compute" and r.source == "measured"}:
            ax.axhline(roof.value, color=PRECISION_COLORS.get(roof.name, "gray"), lw=0.8, ls=":", alpha=0.8)
            ax.text(lo_x, roof.value, f" {roof.name} {roof.source} {roof.value:,.0f}", fontsize=6, va="bottom",
                    color=PRECISION_COLORS.get(roof.name, "gray"))
    stream = ok[ok["family"] == "stream"]
    for (op, impl), g in stream.groupby(["op", "impl"]):
        big = g["working_set_bytes"] >= 4 * llc if llc else g["working_set_bytes"] >= 0
        color = OP_COLORS.get(_short(op), None)
        marker = IMPL_MARKERS.get(_impl_name(impl), "s")
        ax.scatter(g.loc[big, "intensity"], g.loc[big, "gflops"], color=color, marker=marker, s=28,
                   label=f"{impl} (working set >= 4x LLC)", zorder=3)
        ax.scatter(g.loc[~big, "intensity"], g.loc[~big, "gflops"], facecolors="none", edgecolors=color,
                   marker=marker, s=14, alpha=0.5, zorder=2)
    other = ok[ok["family"] != "stream"].assign(impl_name=lambda d: d["impl"].map(_impl_name))
    for (family, precision, impl), g in other.groupby(["family", "dtype", "impl_name"]):
        ax.scatter(g["intensity"], g["gflops"], color=PRECISION_COLORS.get(precision, "gray"),
                   marker=IMPL_MARKERS.get(impl, "D"), s=20, alpha=0.8, zorder=3,
                   label=f"{family} {precision} ({impl})")
    ax.set_xscale("log")
    ax.set_yscale("log")
    if not ok.empty:
        refs = [r.value for r in model.roofs if r.kind == "compute" and r.source in ("datasheet", "computed")]
        ax.set_ylim(max(ok["gflops"].min() / 4, 1e-3), max([ok["gflops"].max(), peak.value if peak else 0] + refs) * 3)
        ax.set_xlim(lo_x, hi_x)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("GFLOP/s (1e9 FLOP/s; GOP/s for int8)")
    ax.set_title(_title(run, "Roofline"))
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    notes = ("hollow: cache-resident stream working sets (may sit above the memory roof). "
             "copy and write do no FLOPs: see bandwidth.png. Roofs: best median per precision over impls and shapes.")
    fig.text(0.01, 0.01, notes, fontsize=7, color="dimgray")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_gemm(run: Run, path: Path) -> Path | None:
    """Draw gemm.png (throughput against size per precision: the square sweep by N, the
    skinny sweep by M with each precision's attainable bound dotted); None without GEMM rows."""
    df = run.measurements
    ok = df[(df["status"] == "ok") & (df["family"] == "gemm") & df["gflops"].notna()]
    if ok.empty:
        return None
    model = Roofline(run.roofs)
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.2))
    for ax, op, axis_name in ((axes[0], "gemm.square", "N (= M = K)"), (axes[1], "gemm.skinny", "M (N = K fixed)")):
        sub = ok[ok["op"] == op]
        for (precision, impl), g in sub.groupby(["dtype", "impl"]):
            dims = g["shape"].str.split("x", expand=True).astype(int)
            x = dims[0]
            order = np.argsort(x.values)
            name = _impl_name(impl)
            ax.plot(x.values[order], g["gflops"].values[order], marker=IMPL_MARKERS.get(name, "s"), ms=4,
                    color=PRECISION_COLORS.get(precision, "gray"), ls="-" if name == "torch" else ":",
                    label=f"{precision} ({name})")
            if op == "gemm.skinny" and name == "torch":
                bound = [model.attainable_gflops(i, precision) for i in g["intensity"].values[order]]
                ax.plot(x.values[order], bound, color=PRECISION_COLORS.get(precision, "gray"), ls=":", lw=1, alpha=0.6)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel(axis_name)
        ax.set_title(op + (" (dotted: min(P, BW x I) from the measured roofs)" if op == "gemm.skinny" else ""), fontsize=9)
        ax.grid(True, which="both", alpha=0.25)
        if not sub.empty:
            ax.legend(fontsize=7, ncol=2)
    axes[0].set_ylabel("GFLOP/s (median; GOP/s for int8)")
    fig.suptitle(_title(run, "GEMM throughput"))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_bandwidth(run: Run, path: Path) -> Path:
    """Draw bandwidth.png for run and return its path."""
    df = run.measurements
    ok = df[(df["status"] == "ok") & (df["family"] == "stream") & df["gbps"].notna()]
    dtypes = sorted(ok["dtype"].unique()) or ["(none)"]
    fig, axes = plt.subplots(1, len(dtypes), figsize=(6.5 * len(dtypes), 5.2), sharey=True, squeeze=False)
    roofs = [r for r in Roofline(run.roofs).roofs if r.kind == "bandwidth" and r.source == "measured"]
    caches = run.device.get("caches", [])
    for ax, dtype in zip(axes[0], dtypes):
        sub = ok[ok["dtype"] == dtype]
        for (op, impl, mode), g in sub.groupby(["op", "impl", "mode"]):
            g = g.sort_values("working_set_bytes")
            name = impl.rsplit("/", 1)[-1]
            ax.plot(g["working_set_bytes"], g["gbps"], marker=IMPL_MARKERS.get(name, "s"), ms=3,
                    color=OP_COLORS.get(_short(op)), ls="-" if name == "torch" else ":",
                    label=f"{_short(op)}/{name}" + (f" {mode}" if mode != "warm" else ""))
        for c in caches:
            ax.axvline(c["total_bytes"], color="gray", ls=":", lw=1)
            ax.text(c["total_bytes"], 0.98, f" {c['name'].upper()} {_fmt_bytes(c['total_bytes'])}",
                    transform=ax.get_xaxis_transform(), fontsize=7, va="top", color="gray")
        for r in roofs:
            if r.plateau_bytes:
                ax.hlines(r.value, r.plateau_bytes[0], r.plateau_bytes[1], color="black", lw=2.5, alpha=0.6)
                ax.text(r.plateau_bytes[0], r.value, f"{r.name} {r.value:,.0f} GB/s", fontsize=7, va="bottom")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("working set (bytes, all arrays)")
        ax.set_title(f"{dtype}")
        ax.grid(True, which="both", alpha=0.25)
        if not sub.empty:
            ax.legend(fontsize=7, ncol=2)
    axes[0][0].set_ylabel("achieved GB/s (1e9 bytes/s, median)")
    fig.suptitle(_title(run, "Stream bandwidth"))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_links(run: Run, path: Path) -> Path | None:
    """Draw links.png: bus bandwidth of each collective and send/recv pair, and GB/s of each
    host-device copy, against message size; None without such rows."""
    df = run.measurements
    ok = df[(df["status"] == "ok") & df["family"].isin(["comm", "transfer"])]
    if ok.empty:
        return None
    fig, ax = plt.subplots(figsize=(9, 5.5))
    for (op, shape), g in ok.groupby(["op", "shape"]):
        g = g.sort_values("bytes")
        rate = g["bus_gbps"].fillna(g["gbps"]) if "bus_gbps" in g else g["gbps"]
        label = f"{_short(op)} {shape}" + (" (bus)" if op.startswith("comm.") and "sendrecv" not in op else "")
        ax.plot(g["bytes"], rate, marker="o", ms=3, label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("GB/s (bus bandwidth for collectives)")
    ax.set_title(_title(run, "Interconnect and host links"))
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_run(run_dir) -> list[Path]:
    """Draw every picture for the run folder run_dir; return their paths."""
    run = load_run(run_dir)
    d = Path(run_dir)
    paths = [plot_roofline(run, d / "roofline.png"), plot_bandwidth(run, d / "bandwidth.png"),
             plot_gemm(run, d / "gemm.png"), plot_links(run, d / "links.png")]
    return [p for p in paths if p is not None]
