"""python -m roofs.sim [--seeds N] [--out results/simulator.md] [--machines a,b] [--noises x,y] [--procs 2]

Scores the roof derivation against the simulator's truth: one table row per machine model and
noise model, a column per criterion with its target and a pass (yes) or fail (NO) mark, then the
most frequent failures per row and each model's truth. --seeds 20 is a quick look; 1000 seeds
per model run in minutes on two processes."""
from __future__ import annotations

import argparse
import sys
import time
from multiprocessing import Pool
from pathlib import Path

from bench.policy import DEFAULT
from bench.util import fmt_bytes
from roofs.sim import score
from roofs.sim.generate import plan, truth
from roofs.sim.machines import MACHINES
from roofs.sim.noise import NOISES

NOISES_OF = {"cpu": ("quiet", "switch", "drift", "busy"), "cuda": ("gpu", "quiet")}
CHUNK = 25   # seeds per task: its runs pair with each other for the same-truth checks


def _task(args) -> tuple:
    key, noise, seeds = args
    return key, noise, score.evaluate(key, noise, seeds, DEFAULT)


def _mark(value: float, target: float, at_most: bool = False) -> str:
    if value != value:
        return "-"
    ok = value <= target if at_most else value >= target
    return f"{value:.1%} {'yes' if ok else 'NO'}"


def table(results: dict, seeds: int) -> str:
    """Return the markdown report of results {(machine, noise): Tally}."""
    t = score.TARGETS
    drift, passes = NOISES["drift"].drift, 1 + DEFAULT.passes(True)[0]   # the table's runs: quick plans
    lines = [f"# The roof derivation against the simulator's truth ({seeds} seeds per row)", "",
             "Each row: one machine model (roofs/sim/machines.py) under one noise model (roofs/sim/noise.py); "
             "`python -m roofs.sim --seeds N` rewrites it. A share is over (seed, level) or (seed, roof) pairs; "
             "false verdicts are same-truth run pairs where `check` said SLOWER or FASTER of any roof; "
             f"SLOWER at {score.SLOW_SCALE:g}x is over the truth's roofs against a run whose every rate is "
             f"{score.SLOW_SCALE:g}x (its target holds under {', '.join(score.SLOWER_NOISES)}). Named wide: a roof "
             "whose interval is wider than the policy's target (the run notes it as unresolved) and covers the "
             "truth; a run cannot read a ceiling closer than its fastest pass, so under drift and busy noise "
             f"within the target takes more passes than a run has ({passes} passes each slowed by up to "
             f"{drift:.0%} leave the best past {DEFAULT.target_halfwidth:.0%} in about "
             f"{(1 - DEFAULT.target_halfwidth / drift) ** passes:.0%} of runs).", "",
             f"| model | noise | levels found, edge within 2x (>= {t['levels']:.0%}) | within "
             f"{DEFAULT.target_halfwidth:.0%} (>= {t['within']:.0%}) | within {2 * DEFAULT.target_halfwidth:.0%} "
             f"| within {DEFAULT.target_halfwidth:.0%} or named wide (>= {t['named']:.0%}) "
             f"| interval covers the truth (>= {t['covered']:.0%}) | false verdicts, pairs (<= {t['false_pairs']:.0%})"
             f" | false verdicts, roofs | SLOWER at {score.SLOW_SCALE:g}x (>= {t['slower']:.0%}) | extra roofs per run "
             "| ms per derivation |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for (key, noise), r in sorted(results.items(), key=lambda kv: (list(MACHINES).index(kv[0][0]), kv[0][1])):
        slower = r.share("slower")
        slower_cell = (_mark(slower, t["slower"]) if noise in score.SLOWER_NOISES
                       else ("-" if slower != slower else f"{slower:.1%} (info)"))
        lines.append(f"| {key} | {noise} | {_mark(r.share('levels_ok'), t['levels'])} | "
                     f"{_mark(r.share('within'), t['within'])} | {r.share('within2'):.1%} | "
                     f"{_mark(r.share('named'), t['named'])} | "
                     f"{_mark(r.share('covered'), t['covered'])} | "
                     f"{_mark(r.share('false_pairs'), t['false_pairs'], True)} | "
                     f"{r.share('false_verdicts'):.1%} | {slower_cell} | {r.extra / max(r.runs, 1):.1f} | "
                     f"{1e3 * r.seconds / max(r.derivations, 1):.0f} |")
    lines += ["", "## The most frequent failures", "",
              "Per row: (roof: what failed) x runs; extra roofs (measured roofs the truth has no name for: a "
              "kernel held below its ceiling by its per-call cost, say); roofs `check` called SLOWER or FASTER "
              "between two runs of one truth.", ""]
    for (key, noise), r in sorted(results.items(), key=lambda kv: (list(MACHINES).index(kv[0][0]), kv[0][1])):
        misses = ", ".join(f"{k} x{v}" for k, v in r.misses.most_common(6)) or "none"
        extras = ", ".join(f"{k} x{v}" for k, v in r.extras.most_common(4)) or "none"
        wrong = ", ".join(f"{k} x{v}" for k, v in r.false_names.most_common(4)) or "none"
        lines.append(f"- **{key} / {noise}**: {misses}. Extra: {extras}. False verdicts: {wrong}.")
    lines += ["", "## The truth", ""]
    for key in dict.fromkeys(k for k, _ in results):
        tru = truth(key)
        roofs = ", ".join(f"{n} {v:,.4g}" for n, v in tru["roofs"].items())
        edges = ", ".join(f"{n} {fmt_bytes(v)}" for n, v in tru["edges"].items())
        lines.append(f"- **{key}** ({MACHINES[key].name}): {roofs}; edges: {edges}.")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m roofs.sim", description=__doc__.splitlines()[2])
    ap.add_argument("--seeds", type=int, default=20, help="seeds per machine and noise (default 20)")
    ap.add_argument("--out", type=Path, default=None, help="write the markdown table here (default: print it)")
    ap.add_argument("--machines", default=",".join(MACHINES), help="machine models, comma-separated")
    ap.add_argument("--noises", default="", help="noise models, comma-separated (default: each machine kind's)")
    ap.add_argument("--procs", type=int, default=2, help="worker processes (default 2)")
    args = ap.parse_args(argv)
    keys = [k for k in args.machines.split(",") if k]
    unknown = [k for k in keys if k not in MACHINES]
    if unknown or args.seeds < 2:
        print(f"unknown machine(s) {unknown}: choose from {', '.join(MACHINES)}" if unknown
              else "--seeds needs at least 2 (runs pair for the same-truth checks)", file=sys.stderr)
        return 2
    tasks = []
    for key in keys:
        plan(key)   # built once here: the workers fork with it
        truth(key)
        noises = [n for n in args.noises.split(",") if n] or NOISES_OF[MACHINES[key].kind]
        for noise in noises:
            for lo in range(0, args.seeds, CHUNK):
                chunk = list(range(lo, min(args.seeds, lo + CHUNK)))
                if len(chunk) == 1:   # a lone seed pairs with nothing: join it to the chunk before
                    tasks[-1] = (key, noise, tasks[-1][2] + chunk)
                else:
                    tasks.append((key, noise, chunk))
    start, results = time.time(), {}
    with Pool(max(1, args.procs)) as pool:
        for key, noise, tally in pool.imap_unordered(_task, tasks):
            results[(key, noise)] = results.get((key, noise), score.Tally()) + tally
    text = table(results, args.seeds)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
        print(f"wrote {args.out} ({len(results)} rows, {time.time() - start:.0f} s)")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
