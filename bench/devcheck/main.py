"""The device check: its steps (bench/devcheck/plan.py) in order, each bounded by the watchdog
and by one deadline, every result written under OUT as it is reached.

    python -m bench.devcheck [--dry] [--out DIR] [--check-s S] [--steps a,b] [--exclude IMPL,...]

Under OUT (at most 8 files come back from the device tool, at most two folders down):
    steps.jsonl           one line per step as it starts and as it ends (limit, predicted and wall
                          seconds, exit code, how it stopped), then the summary
    console.log           every step's own output, in order
    gates.jsonl           the gates' and the kernels step's cases: collected, started, each
                          verdict as it is reached (tests/gate_verdicts.py); a case a kill
                          stopped is written "hung"
    live/<run folder>/    the run step in progress: its rows appended as each point ends
    <step>.tar.gz         a run step's folder once it ends (however it ended), then removed from live/
A run step's folder, killed or not, is derived later, on any machine:
`tar xzf roofs-memory.tar.gz && python run_bench.py report <folder>` (charts included)."""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from bench.aot.predict import spec_device
from bench.aot.targets import ARCHS
from bench.devcheck import plan as plan_mod
from bench.devcheck.watchdog import ENDED, KILLED, Outcome, run_bounded
from roofs.analysis import specs

ROOT = Path(__file__).resolve().parents[2]
VERDICTS_ENV = "ROOFBENCH_VERDICTS"   # where the gates' plugin (tests/gate_verdicts.py) writes
DEFAULT_PART = "h200"   # the part predicted for where the GPU is not a datasheet part (or there is none: --dry)
MAX_ARCHIVE = 15 * 2**20   # a run's archive past this leaves samples.jsonl out (the tool takes 16 MiB a file)


class Check:
    """One check's files and clock: OUT, the deadline, the impls the gates excluded."""

    def __init__(self, out: Path, check_s: float, say=print, t0: float | None = None):
        self.out, self.say = Path(out), say
        self.out.mkdir(parents=True, exist_ok=True)
        self.live = self.out / "live"
        self.t0 = time.monotonic() if t0 is None else t0
        self.deadline = self.t0 + check_s
        self.console = open(self.out / "console.log", "a")
        self.verdicts = self.out / "gates.jsonl"
        self.excluded: dict[str, str] = {}   # impl id -> why (its gate failed, hung, or was not reached)
        self.ended: list[dict] = []

    def at(self) -> float:
        return round(time.monotonic() - self.t0, 1)

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def event(self, **line) -> None:
        line = {"at_s": self.at(), **line}
        with open(self.out / "steps.jsonl", "a") as f:
            f.write(json.dumps(line) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def header(self, text: str) -> None:
        self.console.write(f"\n== {text} (at {self.at():.0f} s)\n")
        self.console.flush()


def limit_of(check: Check, plan: list[plan_mod.Step], i: int) -> float:
    """Return the seconds step i may take: its cap, within what the deadline leaves after the
    later required steps' predictions and the packing reserve (all that is left, for an
    optional step with no required step after it)."""
    step = plan[i]
    room = check.left() - plan_mod.PACK_RESERVE_S
    later = sum(s.predicted_s for s in plan[i + 1:] if s.required)
    if not step.required and not any(s.required for s in plan[i + 1:]):
        return room
    return min(step.cap_s, room - later)


def read_verdicts(path: Path) -> dict:
    """Return {"cases": {case: impl}, "started": [case], "verdicts": {case: outcome}} from a gates.jsonl."""
    state = {"cases": {}, "started": [], "verdicts": {}}
    if not path.exists():
        return state
    for raw in path.read_text().splitlines():
        try:
            line = json.loads(raw)
        except ValueError:   # a line a kill cut short
            continue
        if line.get("event") == "collected":
            state["cases"].update(line["cases"])
        elif line.get("event") == "start":
            state["started"].append(line["case"])
            state["cases"].setdefault(line["case"], line.get("impl"))
        elif line.get("event") == "verdict":
            state["verdicts"][line["case"]] = line["outcome"]
            state["cases"].setdefault(line["case"], line.get("impl"))
    return state


def excluded_impls(state: dict) -> dict[str, str]:
    """Return {impl: why} for every impl with a case that did not pass: failed, hung, skipped,
    or never reached (a case collected with no verdict)."""
    out: dict[str, str] = {}
    for case, impl in state["cases"].items():
        outcome = state["verdicts"].get(case, "not reached")
        if impl and outcome != "passed" and impl not in out:
            out[impl] = f"{outcome}: {case}"
    return out


def stuck_case(path: Path, case_s: float):
    """Return a callable that says whether a gate case has run past case_s: the last line of
    gates.jsonl is a case's start, written more than case_s ago."""
    def stuck() -> bool:
        try:
            if time.time() - path.stat().st_mtime < case_s:
                return False
            with open(path, "rb") as f:
                f.seek(max(0, path.stat().st_size - 4096))
                last = f.read().decode(errors="replace").strip().splitlines()[-1]
            return json.loads(last).get("event") == "start"
        except (OSError, ValueError, IndexError):
            return False
    return stuck


def no_new_row(live: Path, since: float, stall_s: float):
    """Return a callable that says whether a run step has written no row for stall_s: the
    newest measurements.csv under live (or the step's start, before there is one) is older."""
    def stuck() -> bool:
        last = since
        for csv in live.glob("*/measurements.csv"):
            try:
                last = max(last, csv.stat().st_mtime)
            except OSError:
                pass
        return time.time() - last > stall_s
    return stuck


def run_gates(check: Check, step: plan_mod.Step, limit: float, before=frozenset()) -> Outcome:
    """Run the gate cases under the verdicts plugin. A case past step.case_s is stopped (its
    kernel may be hung); when pytest had to be killed, the case it was in is written "hung"
    (one that answered SIGINT: "cut") and pytest runs again on the cases not yet decided,
    while the step's limit leaves MIN_STEP_S. before: the cases an earlier step wrote to the
    same file (not this step's to deselect)."""
    t0 = time.monotonic()
    end = t0 + limit
    env = dict(os.environ, **{VERDICTS_ENV: str(check.verdicts)})
    killed = False
    while True:
        state = read_verdicts(check.verdicts)
        done = [c for c in state["cases"] if c in state["verdicts"] and c not in before]
        argv = step.argv + [f"--deselect={c}" for c in done]
        outcome = run_bounded(argv, end - time.monotonic(), step.grace_s, check.console, env, str(ROOT),
                              stalled=stuck_case(check.verdicts, step.case_s))
        state = read_verdicts(check.verdicts)
        stopped = [c for c in state["started"] if c not in state["verdicts"]]
        for case in stopped:   # the case the watchdog stopped: a verdict of its own
            how = "hung" if outcome.how == KILLED else "cut"
            with open(check.verdicts, "a") as f:
                f.write(json.dumps({"event": "verdict", "case": case, "impl": state["cases"].get(case),
                                    "outcome": how, "seconds": None, "why": f"stopped by the watchdog ({how})"})
                        + "\n")
        killed = killed or outcome.how == KILLED
        if outcome.how == ENDED or not stopped or end - time.monotonic() < plan_mod.MIN_STEP_S:
            # the step's wall time over every attempt; KILLED if the watchdog had to kill one
            return Outcome(outcome.rc, time.monotonic() - t0, KILLED if killed else outcome.how)
        check.header(f"gates again, past {len(stopped)} hung case(s)")


def pack(check: Check, name: str) -> list[dict]:
    """Archive each run folder under live/ as OUT/<name>.tar.gz (samples.jsonl left out past
    MAX_ARCHIVE) and remove it; return each folder's name, status and rows."""
    runs = []
    for folder in sorted(p for p in check.live.glob("*") if p.is_dir()):
        try:
            status = json.loads((folder / "run.json").read_text()).get("status")
        except (OSError, ValueError):
            status = None
        try:
            rows = max(0, len((folder / "measurements.csv").read_text().splitlines()) - 1)
        except OSError:
            rows = 0
        target = check.out / f"{name}.tar.gz"
        with tarfile.open(target, "w:gz") as tar:
            tar.add(folder, arcname=folder.name)
        if target.stat().st_size > MAX_ARCHIVE:
            with tarfile.open(target, "w:gz") as tar:
                tar.add(folder, arcname=folder.name, filter=lambda t: None if "samples.jsonl" in t.name else t)
        shutil.rmtree(folder)
        runs.append({"folder": folder.name, "archive": target.name, "status": status, "rows": rows})
    return runs


def run_step(check: Check, step: plan_mod.Step, limit: float, python: str) -> dict:
    """Run one step within limit; return what steps.jsonl records of its end."""
    check.header(f"{step.name}: limit {limit:.0f} s, predicted {step.predicted_s:.0f} s")
    env = dict(os.environ, **step.env)
    if step.kind == "gates":
        before = frozenset(read_verdicts(check.verdicts)["cases"])   # an earlier gates-kind step's
        outcome = run_gates(check, step, limit, before)
        state = read_verdicts(check.verdicts)
        check.excluded.update(excluded_impls(state))
        counts = {}
        for case in (c for c in state["cases"] if c not in before):
            v = state["verdicts"].get(case, "not reached")
            counts[v] = counts.get(v, 0) + 1
        return {"outcome": outcome, "cases": counts}
    if step.kind == "run":
        only = [i for i in step.only if i not in check.excluded]
        if not only:
            return {"skipped": "every impl it runs failed its gate"}
        record = step.env.get("ROOFBENCH_PRECOMPILE")
        if record and not Path(record).exists():
            env.pop("ROOFBENCH_PRECOMPILE")   # no record: the run precompiles its own plan
        argv = [python, str(ROOT / step.script), *step.argv, "--no-charts", "--out", str(check.live)]
        if len(only) < len(step.only) or step.required:   # the quick run with every impl: its whole plan
            argv += ["--only", ",".join(only)]
        check.live.mkdir(exist_ok=True)
        stalled = no_new_row(check.live, time.time(), step.stall_s) if step.stall_s else None
        outcome = run_bounded(argv, limit, step.grace_s, check.console, env, str(ROOT), stalled=stalled)
        return {"outcome": outcome, "runs": pack(check, step.name), "left_out": sorted(set(step.only) - set(only))}
    return {"outcome": run_bounded(step.argv, limit, step.grace_s, check.console, env, str(ROOT))}


def run_check(plan: list[plan_mod.Step], out: Path, check_s: float = plan_mod.CHECK_S, python: str = sys.executable,
              exclude: dict | None = None, say=print, t0: float | None = None, part: str | None = None) -> Check:
    """Run plan's steps in order within check_s seconds of t0 (default: now), writing under
    out; return the Check. part: the datasheet part the predictions are for (recorded)."""
    check = Check(out, check_s, say, t0)
    check.excluded.update(exclude or {})
    check.event(event="plan", check_s=check_s, part=part,
                steps=[{"name": s.name, "predicted_s": round(s.predicted_s, 1), "cap_s": round(s.cap_s, 1),
                        "required": s.required} for s in plan])
    for i, step in enumerate(plan):
        limit = limit_of(check, plan, i)
        if limit < (plan_mod.MIN_STEP_S if step.required else plan_mod.QUICK_MIN_S):
            end = {"skipped": f"{max(0, limit):.0f} s left for it"}
        else:
            check.event(event="start", step=step.name, limit_s=round(limit, 1), predicted_s=round(step.predicted_s, 1))
            say(f"[{check.at():5.0f} s] {step.name}: limit {limit:.0f} s, predicted {step.predicted_s:.0f} s")
            end = run_step(check, step, limit, python)
        outcome = end.pop("outcome", None)
        if outcome is not None:
            end.update(rc=outcome.rc, seconds=round(outcome.seconds, 1), how=outcome.how)
        check.event(event="end", step=step.name, **end)
        check.ended.append({"step": step.name, **end})
        say(f"[{check.at():5.0f} s] {step.name}: " + ", ".join(f"{k} {v}" for k, v in end.items()))
    check.event(event="summary", excluded=check.excluded, took_s=check.at())
    check.console.close()
    say(summary_text(check))
    return check


def summary_text(check: Check) -> str:
    lines = [f"device check took {check.at():.0f} s; under {check.out}:"]
    for end in check.ended:
        for run in end.get("runs", []):
            lines.append(f"  {run['archive']}: {run['folder']}, {run['rows']} rows, status {run['status']}")
    if check.excluded:
        lines.append("left out of the runs (their gates did not pass): "
                     + "; ".join(f"{k} ({v})" for k, v in sorted(check.excluded.items())))
    lines.append("offline: tar xzf STEP.tar.gz && python run_bench.py report FOLDER (roofs, charts, report)")
    return "\n".join(lines)


def gpu_here(line: str | None = None) -> tuple[str | None, str | None]:
    """Return (the aot arch, the datasheet part) of this machine's first GPU, from nvidia-smi's
    "compute_cap, name, memory.total [MiB]" (line: that answer, else nvidia-smi is asked), or
    None for what is not known: no GPU, an arch with no aot target, a part the datasheet lacks."""
    if line is None:
        try:
            got = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap,name,memory.total",
                                  "--format=csv,noheader,nounits"], capture_output=True, text=True,
                                 timeout=20).stdout.splitlines()
        except (OSError, subprocess.TimeoutExpired):
            return None, None
        line = got[0] if got else ""
    if line.count(",") < 2:
        return None, None
    cc, rest = line.split(",", 1)
    name, mib = (f.strip() for f in rest.rsplit(",", 1))   # a name may hold commas
    arch = f"sm_{cc.strip().replace('.', '')}"
    try:
        size = int(float(mib)) * 2**20
    except ValueError:   # "[N/A]": matched by name alone
        size = 0
    part = specs.match({"name": name, "memory_bytes": size})
    return (arch if arch in ARCHS else None), (part.part if part else None)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="bash .ci/device-check", description="the device check (bench/devcheck)")
    ap.add_argument("--dry", action="store_true", help="print the steps and their predictions; run nothing")
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "/tmp/roofbench-device"))
    ap.add_argument("--check-s", type=float, default=plan_mod.CHECK_S, help="the check's own deadline")
    ap.add_argument("--device-spec", help="the datasheet part the predictions are made for (default: this "
                    f"machine's GPU where the datasheet has it, else {DEFAULT_PART})")
    ap.add_argument("--steps", help="run only these steps (comma-separated), e.g. for a rerun")
    ap.add_argument("--exclude", default="", help="impl ids to leave out of the runs, e.g. one a first try saw hang")
    args = ap.parse_args(argv)
    t0 = time.monotonic()   # the deadline counts the planning too
    arch, part = gpu_here()
    try:
        device = spec_device(args.device_spec or part or DEFAULT_PART)
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    scratch = Path(os.environ.get("TMPDIR", "/tmp")) / "roofbench-devcheck"
    scratch.mkdir(parents=True, exist_ok=True)
    steps = plan_mod.steps(device, arch or (None if not args.dry else "sm_90"), scratch)
    if args.steps:
        names = [s.strip() for s in args.steps.split(",") if s.strip()]
        unknown = sorted(set(names) - {s.name for s in steps})
        if unknown:
            print(f"--steps names no step {', '.join(unknown)}: choose from {', '.join(s.name for s in steps)}.",
                  file=sys.stderr)
            return 2
        steps = [s for s in steps if s.name in names]
    if args.dry:
        print(plan_mod.plan_text(steps, args.check_s, device.name))
        return 0 if plan_mod.fits(steps, args.check_s) else 1
    exclude = {i: "--exclude" for i in args.exclude.split(",") if i}
    run_check(steps, args.out, args.check_s, exclude=exclude, t0=t0, part=device.name)
    return 0
