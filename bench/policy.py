"""Every threshold behind a roof, in one frozen object (ARCHITECTURE.md, "How a roof is made").

The derivation (roofs/analysis/model.py), the revisit passes (bench/measure/revisit.py), the
stream sweep's end (bench/ops/stream_sizes.py), the GEMM search's (bench/ops/gemm.py), the
bounds and `check` read their numbers from a Policy and hold no bare threshold of their own.
`PRESETS` names the variants a user may pick (`--policy`); DEFAULT is what every run and
re-derivation uses unless told otherwise.

A leaf module: it imports nothing of the project, so measuring and deriving both read it.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, fields, replace


@dataclass(frozen=True)
class Policy:
    # --- a row's rate (noise only slows a call) ---
    rate_quantile: float = 0.10     # a row's rate is its work over this low quantile of its sample times
    min_samples: int = 5            # a row with fewer samples sets nothing
    # --- levels: one segmentation of the sweep ---
    bins_per_octave: int = 16       # working sets within 1/16 octave are one size
    min_sizes: int = 2              # a plateau holds at least this many sizes
    level_step: float = 0.15        # adjacent plateaus differ by at least this share of the faster one's rate
    level_min_octaves: float = 1.0  # a segment between two others spanning fewer octaves is a transition, no level
    clear_factor: int = 2           # a level's sizes start at this x the inner level's edge (it still hits there)
    edge_tol: float = 0.10          # a plateau's sizes reach within this share of its roof; its edge is the last
    # --- a roof: one high statistic ---
    roof_rank: int = 2              # a roof is the rank-th best measurement of its plateau: no lucky one sets it
    shape_tol: float = 0.10         # a precision's plateau: its shapes within this share of its best
    # --- an interval: [roof, best x (best / typical) ** interval_reach], at least min_halfwidth wide ---
    interval_reach: float = 3.0     # how far the top reaches past the best, in a row's or the groups' log spreads
    pass_miss: float = 0.015        # ... in the passes' log spread, as far as leaves the truth past it this
                                    # often: n passes each slowed as a whole by an independent uniform share
                                    # (pass_reach(n): 7.2 for three, 66 for two)
    min_halfwidth: float = 0.01     # timer and clock resolution: no interval is narrower
    target_halfwidth: float = 0.05  # revisit passes continue while a roof's interval is wider than this
    # --- confirmation by a second measurement ---
    steady_spread: float = 0.10     # a sustained window spread under this is steady (rule 14)
    agree_tol: float = 0.10         # two kernels of one ceiling agree when their figures meet within this share
    # --- `check` ---
    check_tolerance: float = 0.05   # a change within this share of the baseline is SAME
    decide_max_passes: int = 20     # check: an UNCLEAR roof that would need more passes than this is past any rerun
    # --- passes: the number of repetitions follows the noise ---
    min_passes: int = 2             # a CPU run's revisit passes at least (quick: quick_min_passes)
    max_passes: int = 4             # ... and at most (quick: quick_max_passes)
    quick_min_passes: int = 2       # with the sweep, three passes: a top 7.2 spreads past the best, not two's 66
    quick_max_passes: int = 2
    pass_time_share: float = 0.30   # the share of the run's time revisit passes may take
    revisit_top: int = 2            # rows revisited per working-set window and per precision and unit
    # --- the stream sweep and the bounds ---
    offchip_factor: int = 4         # off-chip sizes from this x the last cache's measured edge; the sweep reaches it
    settle_tol: float = 0.10        # the sweep ends once its last octave (settle_sizes or more) agrees this close
    settle_sizes: int = 3           # ... of at least this many sizes: two can agree because noise slowed the first
    quick_past_floor: int = 4       # a CPU's quick sweep ends at this x the off-chip floor
    # --- the GEMM search ---
    search_gain: float = 0.03       # a size gains when it beats the best size before it by more than this share
    search_patience: int = 2        # the search stops after this many sizes in a row without a gain
    quick_search_sizes: int = 4     # a quick run's search measures at most this many sizes, whatever its noise
    band_factor: int = 4            # a warm working set up to this x a level's edge is bounded by that level;
                                    # a first plateau past this x a cache's reported size is not that cache's
    launch_factor: float = 2.0      # a call under this x the launch floor is launch-bound

    def pass_reach(self, n: int) -> float:
        """Return c, the reach past the best in n passes' log spread (ln max / min): the fastest of
        n passes, each slowed as a whole by an independent uniform share, lies more than c spreads
        below the truth with probability (1 + c)^-(n - 1), so c = pass_miss^(-1 / (n - 1)) - 1
        (0 for one pass: no spread to reach from)."""
        return self.pass_miss ** (-1.0 / (n - 1)) - 1.0 if n >= 2 else 0.0

    def passes(self, quick: bool) -> tuple[int, int]:
        """Return (fewest, most) revisit passes of a CPU run."""
        return (self.quick_min_passes, self.quick_max_passes) if quick else (self.min_passes, self.max_passes)


DEFAULT = Policy()
# strict: narrower agreement and a tighter interval target (more passes on a noisy host)
STRICT = replace(DEFAULT, roof_rank=2, agree_tol=0.05, target_halfwidth=0.03, check_tolerance=0.03, max_passes=6)
# permissive: a shared host's figures, compared loosely
PERMISSIVE = replace(DEFAULT, agree_tol=0.15, target_halfwidth=0.10, check_tolerance=0.10, max_passes=3)
PRESETS = {"default": DEFAULT, "strict": STRICT, "permissive": PERMISSIVE}


def policy_table() -> list[tuple[str, object, str]]:
    """Return [(field, default, the comment beside it)] for REFERENCE.md's thresholds table."""
    src = inspect.getsource(Policy)
    out = []
    for f in fields(Policy):
        line = next(ln for ln in src.splitlines() if ln.strip().startswith(f"{f.name}:"))
        out.append((f.name, getattr(DEFAULT, f.name), line.split("#", 1)[1].strip() if "#" in line else ""))
    return out
