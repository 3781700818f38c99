import numpy as np
import pandas as pd
import pytest

from roofs.energy import fit_energy, flops_per_joule


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
    assert model is None and "0 measurements carry energy" in why


def test_fit_recovers_a_static_power_beside_huge_flop_counts():
    # GPU-sized columns: FLOPs up to 1e13, times of microseconds; E = 1 pJ/FLOP + 100 pJ/B + 300 W x T
    import numpy as np
    import pandas as pd
    from roofs.energy import fit_energy
    rng = np.random.default_rng(0)
    flops = rng.uniform(0, 1e13, 200)
    nbytes = rng.uniform(1e6, 1e10, 200)
    t = rng.uniform(1e-6, 2e-2, 200)
    e = 1e-12 * flops + 100e-12 * nbytes + 300 * t
    df = pd.DataFrame({"status": "ok", "flops": flops, "bytes": nbytes, "median_ms": t * 1e3, "joules": e})
    fit, _ = fit_energy(df)
    assert fit["static_w"] == pytest.approx(300, rel=1e-6) and fit["e_flop_pj"] == pytest.approx(1, rel=1e-6)
    assert fit["e_byte_pj"] == pytest.approx(100, rel=1e-6) and fit["r2"] > 0.999
