"""Which rows may set a roof (ARCHITECTURE.md, rule 10): rows that converged, or that have at
least TRUST_MIN_SAMPLES samples with a spread (p80 - p20) / median under TRUST_SPREAD, and
that the runner did not flag while measuring (a busy machine, a time jump: rule 9). A latency
floor's rows are judged apart (usable_floor): noise only ever adds time to a call.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from bench.results import BUSY_PREFIX, JUMP_PREFIX, text_column

TRUST_MIN_SAMPLES = 5
TRUST_SPREAD = 0.10
RUNNER_FLAGS = (BUSY_PREFIX, JUMP_PREFIX)  # rows the runner flagged while measuring set no roof


def row_spread(rows: pd.DataFrame) -> pd.Series:
    """Return (p80 - p20) / median of each row (NaN where the columns are missing)."""
    if not {"p20_ms", "p80_ms", "median_ms"} <= set(rows.columns):
        return pd.Series(np.nan, index=rows.index)
    return (rows["p80_ms"].astype(float) - rows["p20_ms"].astype(float)) / rows["median_ms"].astype(float)


def trusted(rows: pd.DataFrame) -> pd.Series:
    """Return, per row, whether it may set a roof: status ok, converged (or at least
    TRUST_MIN_SAMPLES samples with a spread under TRUST_SPREAD), and not measured while the
    machine was busy or whose time jumped against its sweep. Rows of runs that predate the
    stop column count as converged."""
    ok = rows["status"] == "ok"
    if "stop" in rows.columns:
        samples = rows["samples"].fillna(0).astype(float) if "samples" in rows.columns else 0
        converged = text_column(rows, "stop") == "converged"
        steady = (samples >= TRUST_MIN_SAMPLES) & (row_spread(rows) < TRUST_SPREAD)
        ok = ok & (converged | steady)
    if "flag" in rows.columns:
        ok = ok & ~text_column(rows, "flag").map(is_runner_flag)
    return ok


def usable_floor(rows: pd.DataFrame) -> pd.Series:
    """Return, per row, whether it may set a latency floor (rule 10): a trusted row, or an ok
    row with at least TRUST_MIN_SAMPLES samples, whatever its spread, not flagged by the runner.
    Noise only ever adds time to a call, so a row's median is at most the floor's true value
    plus the host's noise; a host that runs an empty call at two speeds a second apart (1.2 and
    2.3 us on a 2-core VM) spreads its rows past any spread limit while their medians still
    show the fast one."""
    ok = rows["status"] == "ok"
    if "samples" in rows.columns:
        ok = ok & ((rows["samples"].fillna(0).astype(float) >= TRUST_MIN_SAMPLES) | trusted(rows))
    if "flag" in rows.columns:
        ok = ok & ~text_column(rows, "flag").map(is_runner_flag)
    return ok


def untrusted_text(rows: pd.DataFrame) -> str:
    """Return how many ok rows could not set a roof, counted apart by cause, each with its
    remedy: not converged within the budget (a larger --budget), measured while the machine
    was busy or whose time jumped (a quiet machine)."""
    ok = rows[rows["status"] == "ok"]
    flags = text_column(ok, "flag")
    noisy = flags.map(is_runner_flag)
    unsteady = ~trusted(ok.assign(flag="")) if not ok.empty else noisy
    parts = []
    if (unsteady & ~noisy).any():
        parts.append(f"{int((unsteady & ~noisy).sum())} did not converge within the budget (a larger --budget helps)")
    if noisy.any():
        parts.append(f"{int(noisy.sum())} ran while the machine was busy or their time jumped (run on a quiet machine)")
    return "; ".join(parts) or "none is steady"


def is_runner_flag(flag: str) -> bool:
    """Return whether a flag was set by the runner while measuring (a busy machine, a time
    jump, or both joined by "; "): such rows set no roof."""
    return any(part.startswith(RUNNER_FLAGS) for part in flag.split("; "))
