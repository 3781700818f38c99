"""REFERENCE.md's tables, made from the code they describe, so no table is copied by hand.

    python -m bench.doctables --write    rewrite every table in REFERENCE.md between its markers
    python -m bench.doctables --check    exit 1 naming each table that differs from the code

Each table sits in REFERENCE.md between `<!-- table:NAME -->` and `<!-- /table:NAME -->`:

    options      the run's options: their names and order from run_bench.build_parser(), the
                 defaults the parser holds; each option's meaning from OPTION_MEANINGS
    columns      measurements.csv's columns, in bench.results.COLUMNS' order, grouped as
                 COLUMN_MEANINGS groups them (the axis columns are bench.results.AXIS_COLUMNS)
    charts       a run's pictures: roofs.charts.registry.CHARTS' rows, each with the runs that draw it
                 and its meaning (the row holds both)
    thresholds   every field of bench.policy.Policy with its comment, under each preset
                 (bench.policy.PRESETS), a preset's value in bold where it differs from the default

An option or column the code has and the meanings here lack (or the reverse) is an error naming
it: a meaning is written once, here, when the thing is added (a chart's is in its row).
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import run_bench
from bench.policy import DEFAULT, PRESETS, policy_table
from bench.results import AXIS_COLUMNS, COLUMNS
from roofs.charts.registry import CHARTS

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "REFERENCE.md"

# {default} and {const} are the parser's own for that option; {offchip_ws} is the Policy's
OPTION_MEANINGS = {
    "--device": "`cpu`, `cuda` or `cuda:N`; default the first CUDA GPU, else the CPU",
    "--only": "comma-separated families (`stream`, `gemm`, `gemv`, `attention`, `transfer`, `probe`, `fma`), ops "
              "(`stream.triad`, `gemm.skinny`, `gemv.decode`), impl ids (`stream.copy/triton`) or impl names "
              "(`torch`, `triton`, `numpy`, `sdpa`)",
    "--dtype": "keep only these dtypes/precisions (`float32,bfloat16`, `bf16,fp8e4m3`); either spelling works: "
               "fp32/float32, bf16/bfloat16, fp16/float16, fp64/float64",
    "--mode": "timing modes for every op: `warm` (back-to-back, caches warm) and/or `cold` (last-level cache flushed "
              "before each sample); default each op's own (stream and GEMM warm, the skinny GEMM sweep cold)",
    "--quick": "one size per octave (two for the cache-roof sweep) plus sizes around every cache, fewer shapes and "
               "dtypes, 0.1 s per point (0.25 s a GEMM search point), 50 ms of samples; on a CPU stream in fp32 "
               "without scale and add, the fixed GEMM sweeps and decode GEMVs at the precisions the CPU runs "
               "natively, two sustained candidates a roof, fewer revisit passes ([Thresholds](#thresholds)): about a "
               "minute on a 2-core VM. "
               "`python run_bench.py --quick --dry-run --device-spec h200` predicts an H200's "
               "([Planning a GPU run](#planning-a-gpu-run))",
    "--budget": "seconds per point, warm-up included (default 0.5; 0.1 with `--quick`)",
    "--min-time": "seconds a point's samples must span before it may stop as converged (default 0.1; 0.05 with "
                  "`--quick`; at most half the budget unless given; 0 turns it off; one not below `--budget` is "
                  "refused)",
    "--sustain": "seconds of each sustained window after the sweeps ([rule 14](ARCHITECTURE.md#rule-14); default 1; "
                 "0.25 with `--quick`; 0 turns the phase off)",
    "--max-ws": "skip working sets above this size (`64MiB`, `1GiB`); below {offchip_ws}x the last-level cache the "
                "sweep may not reach its off-chip plateau ([rule 11](ARCHITECTURE.md#rule-11)), and where that "
                "roof is missing the summary says the option is why; one that leaves fewer than two stream working "
                "sets is refused",
    "--max-memory": "the memory the run may hold at once ([rule 16](ARCHITECTURE.md#rule-16); device memory on a "
                    "GPU): a size (`8GiB`, `512MiB`; one above the device's memory or what is available now is "
                    "refused) or a share of what is available when it starts (`50%`, the default); a point that "
                    "would not fit is a skipped row saying how much it needed. It counts beyond what the process "
                    "holds when it starts (the interpreter and its libraries, 300-450 MiB); on a CPU a share is at "
                    "most half the machine's memory less that, so a default run stays under half of RAM; `run.json`'s "
                    "`memory` records the peak it predicted beside the one measured",
    "--counters": "after the timing, replay N chosen points (default {const}; `--counters 3`) once each under "
                  "NVIDIA's Nsight Compute (`ncu`) and write `counters.csv`: each point's DRAM, L2 and L1 bytes and "
                  "tensor-pipe instructions beside its formulas' counts, a DRAM ratio more than 10% off flagged in "
                  "the report ([Hardware counters](#hardware-counters)). Not a refusal where counters cannot be read "
                  "(a CPU, no `ncu`, a driver or sandbox that refuses them): the run measures as usual and says why "
                  "in one sentence (exit code 0). With `--dry-run` it adds the replays' guessed time",
    "--out": "folder in which the run folder is created (default `results/`)",
    "--no-charts": "finish the folder without its pictures: roofs, measurements and the report (which says so) as "
                   "usual; drawing takes seconds of CPU per run on a small machine, and `report RUN` (which takes "
                   "`--no-charts` too) draws them later",
    "--list": "print every op, its axes on this device, and its impls (with why one can't run here)",
    "--dry-run": "print how many rows are planned (and how many rules skip before running), the predicted seconds per "
                 "family, and the predicted wall time (measuring, compiling, loading, tuning, the sustained phase), "
                 "then exit; see [Planning a GPU run](#planning-a-gpu-run)",
    "--device-spec": "with `--dry-run`: plan for a datasheet part instead of this machine (`h200`, `h100 sxm5`, "
                     "`a100 80gb`, ...)",
    "--all-devices": "measure every local GPU at once, one process per GPU on torch.distributed, then compare them: "
                     "per-device roofs side by side, the spread, and any device more than `--outlier-pct` below the "
                     "median flagged (`devices.md`, `devices.json`, `compare.png`)",
    "--comm": "interconnect benchmarks on torch.distributed (NCCL on GPUs, gloo on CPUs): all-reduce, all-gather, "
              "reduce-scatter, broadcast, all-to-all over message sizes, and send/recv between every ordered pair of "
              "ranks, each checked before it is timed (`comm/`)",
    "--procs": "processes for `--all-devices` (1 or more) or `--comm` (2 or more); default one per GPU; on a CPU-only "
               "machine, N gloo processes on loopback",
    "--outlier-pct": "with `--all-devices`: how far below the median a device is flagged (default {default:g})",
    "--deadline": "with `--all-devices`: seconds a rank may take before its measurement is stopped (kept, marked "
                  "failed) and rank 0 reports without it (default: the plan's predicted duration x 3 + 10 min)",
    "--run-dir": "with `--all-devices`/`--comm`: the node's run folder, instead of "
                 "`results/node-<slug>-<timestamp>/`; give the same one on every node of a torchrun launch (the "
                 "launcher passes it to its workers)",
}

# (columns, meaning): one row each, in the order of its first column in COLUMNS
COLUMN_MEANINGS = [
    (("point_id",), "`impl[axis=value,...]@mode`, the key into `samples.jsonl` and `roofs.json`"),
    (("op", "family", "impl", "backend"), "what was run (`stream.triad`, `stream`, `stream.triad/triton`, `triton`)"),
    (("dtype",), "element type (`float32`, `bfloat16`) or GEMM precision (`fp32`, `tf32`, `fp8e4m3`, ...)"),
    (("size", "shape"), "element count and shape (`(n,)`), or the largest dimension and `MxNxK`"),
    (("working_set_bytes",), "bytes resident while the kernel runs"),
    (("flops", "bytes", "intensity"), "the counts of the op's formula, and flops / bytes"),
    (("mode",), "`warm` or `cold`; `sustained` for the sustained phase's rows (their `detail` names the roof they "
                "stand for)"),
    (("median_ms", "p20_ms", "p80_ms", "samples", "reps"), "per-call time statistics, sample count, calls averaged "
                                                           "into each sample"),
    (("timer", "stop"), "`perf_counter_ns`, `cuda_event` or `cuda_graph`; why sampling stopped (`converged`, "
                        "`budget`, `max_samples`; `window` for a sustained window)"),
    (("gbps", "gflops"), "bytes / median and flops / median, in 1e9 per second (a roof reads each row's rate at a low "
                         "quantile of its samples instead: [rule 10](ARCHITECTURE.md#rule-10))"),
    (("error", "tolerance"), "relative norm error against the float64 reference, and the precision's limit (a "
                             "revisit pass's row carries its sweep's: it re-times what the sweep checked)"),
    (("status", "reason"), "`ok`, `skipped` or `error`, and why"),
    (("detail",), "what the implementation chose: the autotuned Triton tile, the SDPA backend torch picked"),
    (("precision",), "the compute roof that bounds the point (`bf16` for a bf16 GEMM or a bf16-activation GEMV)"),
    (("boundary", "bound_note"), "the memory level whose roof bounds the point (`l1`, `l2`, `l3`, `dram`, `hbm`: "
                                 "[rule 12](ARCHITECTURE.md#rule-12)), or empty; `bound_note` says why a point has no "
                                 "bound, and when it is bounded by its level's best roof for want of its direction's, "
                                 "by the next level out, or is launch-bound"),
    (("attainable_gflops", "pct_of_bw_roof", "pct_of_attainable"),
     "min(P_precision, BW x I) from this run's measured roofs, BW the boundary level's bandwidth for the point's "
     "direction, and the point as a percentage of that bandwidth and of that bound (filled when the run ends)"),
    (("clock_mhz", "power_w", "joules", "throttled"),
     "telemetry while the point was timed: mean SM (or core) clock, mean power, energy of one call (the window's "
     "energy / its length x median time: sustained rows only, over windows of at least the sensor's period; empty "
     "for the sweeps), and whether a clock-limiting reason was active"),
    (("flag",), "set while measuring ([rule 9](ARCHITECTURE.md#rule-9)): \"measured while the machine was busy: "
                "...\", \"measured while the hypervisor stole its cores: ...\" (a VM's steal time, apart from "
                "other processes' load) or \"time jumped: ...\"; none sets a roof. Set when the run ends "
                "([rule 12](ARCHITECTURE.md#rule-12)): why a point sits above its attainable bound by more than its "
                "own spread, with the likely causes"),
    (("bus_gbps",), "collectives: bus bandwidth = algorithm bandwidth x the collective's factor"),
    (tuple(AXIS_COLUMNS), "the point's axis values, one column each, empty where an op has no such axis: GEMM M, N, "
                          "K; a GEMV's batch, layer and its N, K; attention batch, sequence or KV length, query and KV "
                          "heads, head dimension, causal; the stream working-set target; a host copy's memory kind; "
                          "a collective's ranks and send/recv pair; the GEMM search's layout of B (`nt`, `nn`). "
                          "`shape` is their display form"),
    (("read_bytes", "write_bytes"), "the part of `bytes` read and written (the op's outputs are the written part); "
                                    "empty for ops that do not say"),
    (("l2_bytes", "l1_bytes"), "Triton points: the bytes the chosen tiles move through L2 and read from shared memory "
                               "(`bench/ops/traffic.py`); empty elsewhere"),
    (("bound_roof",), "the roof that bounds the point at its boundary: `hbm.read`, `hbm.write`, `hbm.copy`, "
                      "`hbm.read+write` (reads then writes), or `hbm` (the level's best)"),
    (("pass",), "the revisit pass of a row measured again (2, 3, ...: the rows a CPU run's passes measure again, "
                "[rule 11](ARCHITECTURE.md#rule-11)); 1 for the sweeps' own rows"),
    (("attainable_low", "attainable_high", "pct_of_attainable_low", "pct_of_attainable_high"),
     "the same bound at the low and the high ends of the roofs' intervals (same level and direction), and the "
     "point's % of attainable from the band's top (low) to its bottom (high); empty where the roofs have no interval "
     "([rule 17](ARCHITECTURE.md#rule-17))"),
]

class TableError(ValueError):
    """The code and the meanings here disagree: one sentence naming what lacks a meaning."""


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _table(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return "\n".join(lines + ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows])


def _same_names(what: str, code: list, meant: list) -> None:
    lacking, stale = [n for n in code if n not in meant], [n for n in meant if n not in code]
    if lacking or stale:
        raise TableError(f"bench/doctables.py's {what}: " + "; ".join(
            part for part in (f"no meaning for {', '.join(lacking)}" if lacking else "",
                              f"a meaning for {', '.join(stale)}, which the code no longer has" if stale else "")
            if part) + ".")


def options_table(parser: argparse.ArgumentParser | None = None) -> str:
    """Return the options table: every option of the run's parser, in its order, with its meaning."""
    if parser is None:
        parser = run_bench.build_parser()
    actions = [a for a in parser._actions if a.option_strings and not isinstance(a, argparse._HelpAction)]
    names = [a.option_strings[-1] for a in actions]
    _same_names("OPTION_MEANINGS", names, list(OPTION_MEANINGS))
    rows = []
    for name, action in zip(names, actions):
        figures = {"default": action.default, "const": action.const, "offchip_ws": 2 * DEFAULT.offchip_factor}
        rows.append([f"`{name}`", OPTION_MEANINGS[name].format(**figures)])
    return _table(["option", "meaning"], rows)


def columns_table() -> str:
    """Return measurements.csv's columns table, grouped by COLUMN_MEANINGS, in COLUMNS' order."""
    grouped = [c for cols, _ in COLUMN_MEANINGS for c in cols]
    if len(grouped) != len(set(grouped)):
        raise TableError("bench/doctables.py's COLUMN_MEANINGS names a column twice.")
    _same_names("COLUMN_MEANINGS", list(COLUMNS), grouped)
    ordered = sorted(COLUMN_MEANINGS, key=lambda g: COLUMNS.index(g[0][0]))
    return _table(["column", "meaning"], [[", ".join(f"`{c}`" for c in cols), meaning] for cols, meaning in ordered])


def charts_table() -> str:
    """Return the pictures a run folder holds, from roofs.charts.registry.CHARTS' rows, in its order."""
    return _table(["picture", "drawn for", "what it shows"], [[f"`{c.file}`", c.when.says, c.meaning] for c in CHARTS])


def _value(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def thresholds_table() -> str:
    """Return every Policy field with each preset's value and the field's comment."""
    names = list(PRESETS)
    rows = []
    for name, default, meaning in policy_table():
        cells = []
        for preset in names:
            v = getattr(PRESETS[preset], name)
            cells.append(f"**{_value(v)}**" if v != default else _value(v))
        rows.append([f"`{name}`", *cells, meaning])
    return _table(["field", *names, "meaning"], rows)


TABLES = {"options": options_table, "columns": columns_table, "charts": charts_table, "thresholds": thresholds_table}


def tables() -> dict[str, str]:
    """Return {name: the table as the code makes it} for every table in TABLES."""
    return {name: make() for name, make in TABLES.items()}


def _span(name: str) -> re.Pattern:
    return re.compile(rf"(<!-- table:{name} -->\n)(.*?)(<!-- /table:{name} -->)", re.DOTALL)


def written(text: str, name: str) -> str | None:
    """Return the table a doc holds between NAME's markers (blank lines around it dropped), or None."""
    m = _span(name).search(text)
    return m.group(2).strip("\n") if m else None


def rewrite(text: str, made: dict[str, str]) -> str:
    """Return text with each table in made put between its markers; raise TableError for missing markers."""
    for name, table in made.items():
        if written(text, name) is None:
            raise TableError(f"REFERENCE.md has no <!-- table:{name} --> ... <!-- /table:{name} --> markers.")
        text = _span(name).sub(lambda m, t=table: f"{m.group(1)}\n{t}\n\n{m.group(3)}", text, count=1)
    return text


def differing(text: str, made: dict[str, str]) -> list[str]:
    """Return the names of the tables text holds otherwise than made (or lacks)."""
    return [name for name, table in made.items() if written(text, name) != table]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.doctables", description=__doc__.split("\n\n")[0])
    act = p.add_mutually_exclusive_group(required=True)
    act.add_argument("--write", action="store_true", help="rewrite REFERENCE.md's tables from the code")
    act.add_argument("--check", action="store_true", help="exit 1 naming each table that differs from the code")
    args = p.parse_args(argv)
    text = REFERENCE.read_text()
    try:
        made = tables()
        if args.write:
            new = rewrite(text, made)
            if new != text:
                REFERENCE.write_text(new)
            print(f"REFERENCE.md: {', '.join(made)} {'rewritten' if new != text else 'already the code'}")
            return 0
    except TableError as e:
        print(f"doctables: {e}", file=sys.stderr)
        return 1
    stale = differing(text, made)
    if stale:
        print(f"REFERENCE.md's tables differ from the code: {', '.join(stale)} "
              "(python -m bench.doctables --write rewrites them)", file=sys.stderr)
        return 1
    print(f"REFERENCE.md's tables are the code's: {', '.join(made)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
