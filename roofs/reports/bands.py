"""Rule 17 in words (ARCHITECTURE.md): each point's figure with the range its bound's interval
gives it, each roof's confirmation as the report's section and findings, and the terminal
summary's one line counting them. Reads a run's roofs (Roof.interval, Roof.confirmation) and
rows only; a run derived before intervals existed has neither, and gets its figures alone.
"""
from __future__ import annotations

import pandas as pd

from bench.util import missing, plural
from roofs.analysis.roofline import Roof, Roofline, band_text

# what each kind of check is, where the check itself does not say ("what")
CHECK_WHAT = {"impl": "another impl of the same op", "kernel": "another kernel of the same direction",
              "counters": "the counters' DRAM bytes for its own point", "sustained": "its own sustained window"}
COMPUTE_WHAT = {"impl": "another impl of the same precision", "kernel": "another GEMM sweep"}
STATUSES = ("confirmed", "disputed", "unconfirmed")
# the range columns of a point's figures (bench.results.ROOF_COLUMNS): figure -> (low, high)
RANGES = {"pct_of_attainable": ("pct_of_attainable_low", "pct_of_attainable_high"),
          "attainable_gflops": ("attainable_low", "attainable_high")}


def ranged(df: pd.DataFrame, column: str) -> pd.Series:
    """Return df's column as people read it with its range (band_text: "62.5, 58.1-64"), where
    df has the range columns RANGES names for it; the column unchanged where it has not, or they
    are empty (a run derived before rule 17), and each row without a figure blank."""
    lo, hi = RANGES[column]
    if column not in df or lo not in df or hi not in df:
        return df[column] if column in df else pd.Series(None, index=df.index, dtype=object)
    low, high = pd.to_numeric(df[lo], errors="coerce"), pd.to_numeric(df[hi], errors="coerce")
    if low.isna().all() and high.isna().all():  # the columns there but empty: a run annotated before rule 17
        return df[column]
    return pd.Series([None if missing(v) else band_text(v, (a, b))
                      for v, a, b in zip(pd.to_numeric(df[column], errors="coerce"), low, high)],
                     index=df.index, dtype=object)


def as_interval(v) -> tuple | None:
    """Return v as a roof's (low, high), or None where it is none (None, NaN, a malformed value)."""
    if isinstance(v, (tuple, list)) and len(v) == 2 and not any(missing(x) for x in v):
        return float(v[0]), float(v[1])
    return None


def with_ranges(df: pd.DataFrame) -> pd.DataFrame:
    """Return df with each figure of RANGES it holds written with its range (ranged)."""
    return df.assign(**{c: ranged(df, c) for c in RANGES if c in df})


def shown_validation(table: pd.DataFrame) -> pd.DataFrame:
    """Return the report's validation table (report.validation) as it prints it: "measured" with
    its interval (band_text: "372, 355-390"; the figure alone without one), the interval folded in."""
    if table.empty or "interval" not in table:
        return table
    return table.assign(measured=[band_text(v, as_interval(i)) for v, i in zip(table["measured"], table["interval"])]
                        ).drop(columns="interval")


def judged(model: Roofline) -> list[Roof]:
    """Return the measured roofs that carry a confirmation (rule 17), in roofs.json's order."""
    return [r for r in model.roofs if r.source == "measured" and r.confirmation]


def check_text(check: dict, roof: Roof) -> str:
    """Return one confirmation check as the report names it: "stream.triad/torch (another kernel
    of the same direction), 41.2 GB/s, 39-42.1"."""
    words = COMPUTE_WHAT if roof.kind == "compute" else CHECK_WHAT
    what = check.get("what") or words.get(check.get("kind"), CHECK_WHAT.get(check.get("kind"), "a check"))
    who = check.get("impl") or check.get("op") or check.get("point_id") or "?"
    interval = check.get("interval")
    return f"{who} ({what}), {band_text(check.get('value'), tuple(interval) if interval else None, roof.unit)}"


def _causes(conf: dict) -> list[str]:
    """Return the causes of a confirmation's failing checks that its finding does not already say."""
    finding = conf.get("finding") or ""
    return [c["cause"] for c in conf.get("checks") or [] if not c.get("agrees") and c.get("cause")
            and c["cause"] not in finding]


def _finding(roof: Roof, default: str) -> tuple[str, str]:
    """Return (who, what) of a roof's confirmation finding: its label ("l2 (stream.reread/torch)",
    the roof's name where the finding does not open with one) and the sentence after it with the
    causes it leaves out, ending in a full stop."""
    conf = roof.confirmation or {}
    text, who = (conf.get("finding") or default).rstrip("."), roof.name
    label = f"{roof.name} ({roof.impl}): "
    if text.startswith(label):
        who, text = label[:-2], text[len(label):]
    causes = _causes(conf)
    return who, text + (f" ({'; '.join(causes)})" if causes else "") + "."


def confirmation_line(roof: Roof) -> str:
    """Return a roof's line in the report's confirmation section: the check that confirms it, or
    why none does ("dram: confirmed by stream.triad/torch (another kernel of the same direction),
    41.2 GB/s, 39-42.1"; "fp64: unconfirmed: ...")."""
    conf = roof.confirmation or {}
    status = conf.get("status", "")
    if status == "confirmed":
        by = conf.get("by") or next((c for c in conf.get("checks") or [] if c.get("agrees")), None)
        return f"{roof.name}: confirmed by {check_text(by, roof)}" if by else f"{roof.name}: confirmed"
    if status == "disputed":
        return f"{roof.name}: disputed: " + _finding(roof, "no independent measurement agrees with its band")[1]
    if status == "unconfirmed":
        return f"{roof.name}: unconfirmed: " + _finding(roof, "it rests on one kernel and impl alone")[1]
    return f"{roof.name}: {status or 'not judged'}"


def confirmation_section(model: Roofline) -> list[tuple[str, object]]:
    """Return the report's "Confirmation" section (rule 17): one line per measured roof that
    carries a confirmation (its status and the check behind it, or its finding), the measured
    roofs rule 17 does not judge named once; a run derived before rule 17 says so in one line."""
    title = "Confirmation: the second measurement behind each roof"
    roofs = judged(model)
    if not roofs:
        return [(title, ["No roof of this run carries a confirmation: its roofs were derived before each roof "
                         "got an interval and a second measurement (ARCHITECTURE.md, rule 17)."])]
    head = ("Each roof is confirmed by a second, independent measurement of the same ceiling whose interval "
            "overlaps its own (another impl of its op, another kernel of its family and direction, the counters' "
            "DRAM bytes), disputed when every such measurement falls below its band, unconfirmed when it rests on "
            "one kernel and impl alone (ARCHITECTURE.md, rule 17). " + confirmation_counts(model, prefix="") + ".")
    lines = [head] + [confirmation_line(r) for r in roofs]
    rest = [r.name for r in model.roofs if r.source == "measured" and not r.confirmation]
    if rest:
        lines.append(f"Not judged (no second measurement is defined for them): {', '.join(rest)}.")
    return [(title, lines)]


def confirmation_findings(model: Roofline) -> list[str]:
    """Return one finding per disputed roof: its name and impl, its finding sentence and the causes
    of its failing checks ("l2 (stream.reread/torch) is disputed: ...", rule 17)."""
    return ["{} is disputed: {}".format(*_finding(r, "no independent measurement agrees with its band"))
            for r in judged(model) if r.confirmation.get("status") == "disputed"]


def confirmation_counts(model: Roofline, prefix: str = "confirmation (rule 17): ") -> str:
    """Return one line counting the roofs confirmed, disputed and unconfirmed, naming the disputed
    ("confirmation (rule 17): 5 of 7 roofs confirmed, 1 disputed (dram), 1 unconfirmed"); "" when no
    roof carries a confirmation (a run derived before rule 17)."""
    roofs = judged(model)
    if not roofs:
        return ""
    by = {s: [r.name for r in roofs if r.confirmation.get("status") == s] for s in STATUSES}
    disputed = f"{len(by['disputed'])} disputed" + (f" ({', '.join(by['disputed'])})" if by["disputed"] else "")
    return (f"{prefix}{len(by['confirmed'])} of {plural(len(roofs), 'roof')} confirmed, {disputed}, "
            f"{len(by['unconfirmed'])} unconfirmed")
