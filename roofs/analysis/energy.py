"""Energy: operations per joule, and the energy model fitted to a run's measurements.

Model (the enhanced roofline of "Know your rooflines!", arXiv 2505.16346):
    E = W e_flop + Q e_byte + P0 T
with W the FLOPs, Q the bytes, T the time of one call, e_flop and e_byte the energy per
FLOP and per byte, and P0 the static power; fitted by least squares over every measured
row that has an energy figure (joules per call).

Only the sustained windows carry energy (ARCHITECTURE.md, rule 14; bench/hw/telemetry.py), so
the fits read those rows. fit_groups() fits one model per precision (the GEMMs: E = e_flop W
+ P0 T) and one per memory level (the stream kernels: E = e_byte Q + P0 T), and checks each
for physical sense (checks()):
- e x the roof (the dynamic power at the roof's rate) is positive and under the power limit;
- the static power P0 lies between the idle power (read before the sustained windows) and
  the power limit;
- P0 + e x roof, the power the fit predicts at the roof, is under the power limit.
A group whose rates span less than MIN_RATE_SPAN (20%) cannot tell P0 from e (every row
draws about the same power): it gets no fit, says so, and still gives its all-in energy
per operation (median of E / W, static power included), which one window measures.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from bench.results import text_column
from bench.util import Reason


def fit_energy(rows: pd.DataFrame) -> tuple[dict | None, str]:
    """Return ({e_flop_pj, e_byte_pj, static_w, points, r2}, "") or (None, why not): a
    bench.util.Reason whose code is "no_energy_column" or "too_few_energy_rows"."""
    if "joules" not in rows:
        return None, Reason("no energy column in this run", "no_energy_column")
    d = rows[(rows["status"] == "ok") & rows["joules"].notna() & (rows["joules"] > 0)]
    if len(d) < 3:
        return None, Reason(f"{len(d)} measurements carry energy (an energy counter or power readings are needed: "
                            "NVML on NVIDIA GPUs, RAPL on CPUs)", "too_few_energy_rows")
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


MIN_FIT_ROWS = 3       # a group's fit needs this many sustained rows with energy
MIN_RATE_SPAN = 0.2    # ... whose rates (work / time) span at least 20% (max / min - 1)


def _lstsq(work, seconds, joules) -> tuple[float, float, float]:
    """Return (e per unit of work, P0, R^2) of E = e W + P0 T by least squares, each column
    scaled to 1 first (W ~1e12, T ~1e-3)."""
    a = np.column_stack([work, seconds])
    scale = np.abs(a).max(axis=0)
    scale[scale == 0] = 1.0
    coef, *_ = np.linalg.lstsq(a / scale, joules, rcond=None)
    coef = coef / scale
    pred = a @ coef
    r2 = 1 - ((joules - pred) ** 2).sum() / max(((joules - joules.mean()) ** 2).sum(), 1e-300)
    return float(coef[0]), float(coef[1]), float(r2)


def energy_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """Return the rows a fit may use: ok, with a positive energy per call, and a time."""
    if "joules" not in rows:
        return rows.iloc[0:0]
    return rows[(rows["status"] == "ok") & rows["joules"].notna() & (rows["joules"] > 0) & rows["median_ms"].notna()]


def fit_group(d: pd.DataFrame, work: str) -> dict:
    """Return the fit of one group's rows (work: "flops" or "bytes"): {points, all_in_pj,
    rate_span, and e_pj, static_w, r2 when the rates span enough} or with `why` when not, and
    `reason`, its code: "too_few_windows" or "narrow_rate_span"."""
    w = d[work].astype(float).to_numpy()
    t = d["median_ms"].astype(float).to_numpy() * 1e-3
    e = d["joules"].astype(float).to_numpy()
    rate = w / t
    out = {"points": int(len(d)), "all_in_pj": float(np.median(e / w)) * 1e12 if len(d) else None,
           "rate_span": float(rate.max() / rate.min() - 1) if len(d) else 0.0}
    if len(d) < MIN_FIT_ROWS:
        return dict(out, why=f"{len(d)} sustained windows carry energy; a fit needs {MIN_FIT_ROWS}",
                    reason="too_few_windows")
    if out["rate_span"] < MIN_RATE_SPAN:
        return dict(out, why=f"its rates span only {out['rate_span']:.0%} (under {MIN_RATE_SPAN:.0%}): static power "
                             "and energy per operation cannot be told apart; the all-in figure stands",
                    reason="narrow_rate_span")
    e_op, p0, r2 = _lstsq(w, t, e)
    return dict(out, e_pj=e_op * 1e12, static_w=p0, r2=r2)


def checks(fit: dict, roof_rate: float | None, limit_w: float | None, idle_w: float | None) -> list[dict]:
    """Return the physical checks a fit fails (module docstring), each {"code", "value", "against",
    "text"}: value the figure that fails (pJ for "energy_not_positive", else W), against the one it
    is held to (the power limit or the idle power; None for a sign), text one sentence; roof_rate
    in operations per second (FLOP/s or bytes/s)."""
    if "e_pj" not in fit:
        return []
    failed = []

    def fail(code, value, against, text):
        failed.append({"code": code, "value": value, "against": against, "text": text})
    e, p0 = fit["e_pj"] * 1e-12, fit["static_w"]
    if e <= 0:
        fail("energy_not_positive", fit["e_pj"], None, f"energy per operation {fit['e_pj']:.3g} pJ is not positive")
    if roof_rate and limit_w:
        dyn = e * roof_rate
        if dyn > limit_w:
            fail("dynamic_over_limit", dyn, limit_w,
                 f"e x roof = {dyn:,.0f} W exceeds the {limit_w:,.0f} W power limit")
        elif dyn + p0 > limit_w:
            fail("total_over_limit", dyn + p0, limit_w,
                 f"static + e x roof = {dyn + p0:,.0f} W exceeds the {limit_w:,.0f} W power limit")
    if idle_w is not None and p0 < idle_w:
        fail("static_below_idle", p0, idle_w, f"static power {p0:,.1f} W is below the idle power {idle_w:,.1f} W")
    elif idle_w is None and p0 < 0:
        fail("static_negative", p0, None, f"static power {p0:,.1f} W is negative")
    if limit_w and p0 > limit_w:
        fail("static_over_limit", p0, limit_w, f"static power {p0:,.0f} W exceeds the {limit_w:,.0f} W power limit")
    return failed


def fit_groups(rows: pd.DataFrame, roof_rates: dict, limit_w: float | None = None,
               idle_w: float | None = None) -> list[dict]:
    """Return one fit per precision and per memory level (module docstring), each with
    `group` ("fp32", "dram", ...), `per` ("FLOP" or "byte"), and `failed`, its failed checks (checks()).

    rows: the run's rows (the sustained ones carry energy); a stream row's level is its
    `boundary` column; roof_rates: group -> its roof's rate in operations per second (the
    sustained figure where there is one)."""
    d = energy_rows(rows)
    if "mode" in d:  # the sweeps of runs made before rule 14 carry energy too: not these fits'
        d = d[d["mode"] == "sustained"]
    out = []
    if d.empty:
        return out
    stream = d["family"] == "stream"
    flops = d["flops"].fillna(0).astype(float) > 0
    gemm = d[~stream & flops]
    for precision, g in gemm.groupby(gemm["precision"].replace("", np.nan).fillna(gemm["dtype"]), sort=False):
        fit = dict(fit_group(g, "flops"), group=str(precision), per="FLOP")
        out.append(dict(fit, failed=checks(fit, roof_rates.get(str(precision)), limit_w, idle_w)))
    levels = d[stream]
    for level, g in levels.groupby(text_column(levels, "boundary").replace("", "unbounded"), sort=False):
        fit = dict(fit_group(g, "bytes"), group=str(level), per="byte")
        out.append(dict(fit, failed=checks(fit, roof_rates.get(str(level)), limit_w, idle_w)))
    return out
