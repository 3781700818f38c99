"""Energy: operations per joule, and the energy model fitted to a run's measurements.

Model (the enhanced roofline of "Know your rooflines!", arXiv 2505.16346):
    E = W e_flop + Q e_byte + P0 T
with W the FLOPs, Q the bytes, T the time of one call, e_flop and e_byte the energy per
FLOP and per byte, and P0 the static power; fitted by least squares over every measured
row that has an energy figure (joules per call).
"""
from __future__ import annotations

import numpy as np
import pandas as pd


def fit_energy(rows: pd.DataFrame) -> tuple[dict | None, str]:
    """Return ({e_flop_pj, e_byte_pj, static_w, points, r2}, "") or (None, why not)."""
    if "joules" not in rows:
        return None, "no energy column in this run"
    d = rows[(rows["status"] == "ok") & rows["joules"].notna() & (rows["joules"] > 0)]
    if len(d) < 3:
        return None, (f"{len(d)} measurements carry energy (an energy counter or power readings are needed: "
                      "NVML on NVIDIA GPUs, RAPL on CPUs)")
    a = np.column_stack([d["flops"].astype(float), d["bytes"].astype(float), d["median_ms"].astype(float) * 1e-3])
    e = d["joules"].astype(float).to_numpy()
    # columns span 15 orders of magnitude (FLOPs ~1e12, seconds ~1e-5): scale each to 1
    # first, or lstsq's cut-off drops the small one (the static power came out as 0 W)
    scale = np.abs(a).max(axis=0)
    scale[scale == 0] = 1.0
    coef, *_ = np.linalg.lstsq(a / scale, e, rcond=None)
    coef = coef / scale
    pred = a @ coef
    r2 = 1 - ((e - pred) ** 2).sum() / max(((e - e.mean()) ** 2).sum(), 1e-300)
    return {"e_flop_pj": coef[0] * 1e12, "e_byte_pj": coef[1] * 1e12, "static_w": coef[2],
            "points": int(len(d)), "r2": float(r2)}, ""


def flops_per_joule(model: dict, intensity, attainable_gflops) -> np.ndarray:
    """Return the fitted model's FLOP/J at intensity I when running at the attainable rate:
    1 / (e_flop + e_byte / I + P0 / attainable)."""
    i = np.asarray(intensity, dtype=float)
    att = np.asarray(attainable_gflops, dtype=float) * 1e9
    return 1 / (model["e_flop_pj"] * 1e-12 + model["e_byte_pj"] * 1e-12 / i + model["static_w"] / att)
