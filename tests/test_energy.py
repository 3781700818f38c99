import numpy as np
import pandas as pd
import pytest

from roofs.analysis.energy import fit_energy, flops_per_joule


def test_fit_recovers_known_coefficients():
    rng = np.random.default_rng(0)
    w = rng.uniform(1e9, 1e12, 40)
    q = rng.uniform(1e6, 1e10, 40)
    t = rng.uniform(1e-4, 1e-1, 40)
    e = w * 0.5e-12 + q * 20e-12 + 80.0 * t           # 0.5 pJ/FLOP, 20 pJ/byte, 80 W static
    df = pd.DataFrame({"status": "ok", "flops": w, "bytes": q, "median_ms": t * 1e3, "joules": e})
    model, why = fit_energy(df)
    assert why == "" and model["points"] == 40 and model["r2"] == pytest.approx(1.0)
    assert model["e_flop_pj"] == pytest.approx(0.5, rel=1e-6)
    assert model["e_byte_pj"] == pytest.approx(20.0, rel=1e-6)
    assert model["static_w"] == pytest.approx(80.0, rel=1e-6)
    # at I = 100 FLOP/B running at 1e5 GFLOP/s: 1 / (0.5e-12 + 0.2e-12 + 80 / 1e14)
    assert flops_per_joule(model, 100.0, 1e5) == pytest.approx(1 / (0.7e-12 + 0.8e-12), rel=1e-6)


def test_no_energy_says_why():
    df = pd.DataFrame({"status": ["ok"], "flops": [1], "bytes": [1], "median_ms": [1.0], "joules": [None]})
    model, why = fit_energy(df)
    assert model is None and why.code == "too_few_energy_rows"
    model, why = fit_energy(df.drop(columns="joules"))
    assert model is None and why.code == "no_energy_column"


def test_fit_recovers_a_static_power_beside_huge_flop_counts():
    # GPU-sized columns: FLOPs up to 1e13, times of microseconds; E = 1 pJ/FLOP + 100 pJ/B + 300 W x T
    import numpy as np
    import pandas as pd

    from roofs.analysis.energy import fit_energy
    rng = np.random.default_rng(0)
    flops = rng.uniform(0, 1e13, 200)
    nbytes = rng.uniform(1e6, 1e10, 200)
    t = rng.uniform(1e-6, 2e-2, 200)
    e = 1e-12 * flops + 100e-12 * nbytes + 300 * t
    df = pd.DataFrame({"status": "ok", "flops": flops, "bytes": nbytes, "median_ms": t * 1e3, "joules": e})
    fit, _ = fit_energy(df)
    assert fit["static_w"] == pytest.approx(300, rel=1e-6) and fit["e_flop_pj"] == pytest.approx(1, rel=1e-6)
    assert fit["e_byte_pj"] == pytest.approx(100, rel=1e-6) and fit["r2"] > 0.999


# ---- fits per precision and per level from the sustained windows, with physical checks ----

from roofs.analysis.energy import MIN_RATE_SPAN, checks, fit_group, fit_groups  # noqa: E402


def _group_rows(rng, n, family, precision, boundary, e_op, p0, rate_lo, rate_hi, work):
    """Synthetic sustained rows of one group: E = e_op x W + P0 x T exactly."""
    t = rng.uniform(1e-3, 5e-2, n)
    rate = rng.uniform(rate_lo, rate_hi, n)
    w = rate * t
    rows = pd.DataFrame({"status": "ok", "family": family, "precision": precision, "dtype": precision or "float32",
                         "boundary": boundary, "mode": "sustained", "median_ms": t * 1e3,
                         "flops": w if work == "flops" else 0.0, "bytes": w if work == "bytes" else 1e6,
                         "joules": e_op * w + p0 * t})
    return rows


def test_fits_per_precision_and_level_recover_known_coefficients():
    rng = np.random.default_rng(7)
    rows = pd.concat([
        _group_rows(rng, 6, "gemm", "bf16", "hbm", 0.4e-12, 250.0, 4e14, 7e14, "flops"),    # 0.4 pJ/FLOP, 250 W
        _group_rows(rng, 6, "gemm", "fp32", "hbm", 2.0e-12, 200.0, 2e13, 4e13, "flops"),    # 2 pJ/FLOP, 200 W
        _group_rows(rng, 5, "stream", "", "hbm", 60e-12, 180.0, 2e12, 4.5e12, "bytes"),     # 60 pJ/B, 180 W
        _group_rows(rng, 5, "stream", "", "l2", 15e-12, 190.0, 4e12, 9e12, "bytes"),        # 15 pJ/B, 190 W
    ], ignore_index=True)
    rates = {"bf16": 7e14, "fp32": 4e13, "hbm": 4.5e12, "l2": 9e12}
    sweep = _group_rows(rng, 4, "gemm", "bf16", "hbm", 9e-12, 10.0, 1e14, 2e14, "flops").assign(mode="warm")
    rows = pd.concat([rows, sweep], ignore_index=True)     # a sweep's energy (an old run) is not fitted
    fits = {f["group"]: f for f in fit_groups(rows, rates, limit_w=700.0, idle_w=90.0)}
    assert set(fits) == {"bf16", "fp32", "hbm", "l2"}
    for group, e_pj, p0, per in (("bf16", 0.4, 250, "FLOP"), ("fp32", 2.0, 200, "FLOP"), ("hbm", 60, 180, "byte"),
                                 ("l2", 15, 190, "byte")):
        f = fits[group]
        assert f["per"] == per and f["e_pj"] == pytest.approx(e_pj, rel=1e-6)
        assert f["static_w"] == pytest.approx(p0, rel=1e-6) and f["r2"] == pytest.approx(1.0)
    # hand-worked: bf16 at its roof draws 0.4e-12 x 7e14 = 280 W + 250 W static = 530 W < 700 W: no failed check
    assert all(f["failed"] == [] for f in fits.values())


def test_physical_checks_report_what_fails():
    # the H200's first fit: 1.42 pJ/FLOP x 797 TFLOP/s = 1,132 W against a 700 W cap
    fit = {"e_pj": 1.42, "static_w": 60.0}
    failed = checks(fit, 797e12, 700.0, 90.0)
    got = [(f["code"], f["value"], f["against"]) for f in failed]
    assert got == [("dynamic_over_limit", pytest.approx(1.42 * 797), 700.0), ("static_below_idle", 60.0, 90.0)]
    assert all(f["text"] for f in failed)  # each with its sentence for the report
    # under the cap alone, but not with its static power: 0.5 pJ x 797e12 = 398.5 W + 400 W > 700 W
    got = checks({"e_pj": 0.5, "static_w": 400.0}, 797e12, 700.0, 90.0)
    assert [(f["code"], f["value"], f["against"]) for f in got] == [
        ("total_over_limit", pytest.approx(798.5), 700.0)]
    got = checks({"e_pj": -0.1, "static_w": 800.0}, None, 700.0, None)
    assert [(f["code"], f["value"], f["against"]) for f in got] == [
        ("energy_not_positive", -0.1, None), ("static_over_limit", 800.0, 700.0)]
    assert [f["code"] for f in checks({"e_pj": 1.0, "static_w": -5.0}, None, None, None)] == ["static_negative"]
    assert checks({"points": 2, "why": "too few"}, 1e12, 700.0, 90.0) == []   # no fit: nothing to check


def test_a_group_at_one_rate_gives_its_all_in_energy_not_a_fit():
    # three windows at the same 500 TFLOP/s drawing 600 W: 1.2 pJ/FLOP all-in; P0 and e_flop inseparable
    t = np.array([0.01, 0.02, 0.04])
    d = pd.DataFrame({"flops": 5e14 * t, "median_ms": t * 1e3, "joules": 600.0 * t})
    f = fit_group(d, "flops")
    assert "e_pj" not in f and f["reason"] == "narrow_rate_span" and f["rate_span"] < MIN_RATE_SPAN
    assert f["all_in_pj"] == pytest.approx(1.2)
    assert fit_group(d.head(2), "flops")["reason"] == "too_few_windows"
