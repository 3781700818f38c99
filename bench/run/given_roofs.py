"""The roofs a user's kernel or program is placed under (the API's roofs=, the model and
profile commands): a run folder's, read back (roofs_from), or measured on the spot as a quick
run measures them (quick_roofs). A roof that could not be set, or roofs of another machine,
are warned of (RoofWarning, ForeignRoofsWarning) and kept on the result (`missing`, `foreign`)."""
from __future__ import annotations

import json
import warnings

import pandas as pd

from bench.hw import detect
from bench.hw.device import DeviceError
from bench.identity import other_machine
from bench.measure.registry import load_all
from bench.measure.runner import Runner, make_plan
from bench.measure.timing import timer_config
from bench.ops.gemm import PRECISIONS
from bench.results import COLUMNS, load_run
from roofs.analysis.confirm import derive_roofs
from roofs.analysis.model import untrusted_text
from roofs.analysis.roofline import Roof


class Roofs(list):
    """A list of Roof, with `missing`: one sentence per roof that could not be set, and why;
    and `foreign`: the sentence saying the roofs were measured on another machine, or ""."""

    def __init__(self, roofs=(), missing=(), foreign: str = ""):
        super().__init__(roofs)
        self.missing = list(missing)
        self.foreign = foreign


class RoofWarning(UserWarning):
    """A roof quick_roofs() could not set (also listed in its result's `missing`)."""


class ForeignRoofsWarning(UserWarning):
    """Roofs read from a run made on another machine than this one (also the result's `foreign`)."""


def foreign_note(recorded: dict, device: str | None = None) -> str:
    """Return bench.identity.other_machine's sentence for roofs measured on the device
    `recorded` (a run.json device) against this machine's device (default: of the run's kind),
    or ""; a device this machine does not have is said so."""
    try:
        here = detect.resolve(device or ("cpu" if recorded.get("kind") == "cpu" else None))
    except DeviceError:
        return (f"the roofs were measured on {recorded.get('name', 'a device')}, which this machine does not have: "
                "its bounds describe that machine, not this one")
    return other_machine(recorded, here.to_dict())


def roofs_from(run_dir, device: str | None = None) -> Roofs:
    """Return the roofs of a run folder (measured, datasheet and computed); `missing` holds
    roofs.json's notes on the levels and precisions that got none. Roofs measured on another
    machine than this one (device: default the run's kind) are warned of in one sentence
    (ForeignRoofsWarning, bench.identity.other_machine), kept in `foreign`."""
    run = load_run(run_dir)
    path = run.dir / "roofs.json"  # a relative run_dir missing here is the checkout's (bench.paths.existing)
    notes = json.loads(path.read_text()).get("notes", []) if path.exists() else []
    foreign = foreign_note(run.device, device)
    if foreign:
        warnings.warn(f"{run_dir}: {foreign}", ForeignRoofsWarning, stacklevel=2)
    return Roofs([Roof.from_dict(r) for r in run.roofs], notes, foreign)


QUICK_ROOF_OPS = ("stream.copy", "stream.read", "stream.write", "stream.reread", "probe.l1", "gemm.square")


def quick_roofs(device: str | None = None, budget_s: float | None = None) -> Roofs:
    """Measure roofs on the spot, as a quick run measures them and with its budgets (rule 4:
    0.1 s a point, each op's own floor above it, a point predicted past its budget cut
    before its inputs are made, the stream sweep stopped once the off-chip rate settles):
    the quick plan's stream copy, read, write and reread (every cache level's window, and
    the off-chip roof past the last), probe.l1 and its square GEMMs (each precision a quick
    run measures here), derived by the run's own rules (roofs.analysis.confirm.derive_roofs), each
    with its interval and confirmation (rule 17).
    About 20-30 s on a 2-core CPU VM, seconds on a GPU. A roof it could not set (a level or
    a precision whose rows did not converge on a busy machine, or were cut) is named in the
    result's `missing` with why (derive's notes) and warned of (RoofWarning); never raises
    for a roof it could not set."""
    info = detect.resolve(device)
    reg = load_all()
    plan = make_plan(reg, info, list(QUICK_ROOF_OPS), quick=True)
    runner = Runner(info, timer_config(True, budget_s), quick=True)
    measured = runner.run(plan)
    rows = pd.DataFrame([m.row() for m in measured], columns=COLUMNS)
    # each roof with its interval and confirmation, as a run's: a point's % of attainable has its band
    roofs, notes = derive_roofs(rows, info.to_dict(), {m.point_id: list(m.samples_s) for m in measured})
    have = {r.name for r in roofs}
    levels = [c.name for c in info.caches] + [info.memory_level]
    precisions = sorted({str(t.point["dtype"]) for t in plan.tasks if t.op.family == "gemm"},
                        key=list(PRECISIONS).index)
    missing = []
    for name in levels + precisions:
        if name in have:
            continue
        why = [n.split(": ", 1)[1] for n in notes if n.startswith(f"{name}:") or n.startswith(f"{name} ")]
        if name in precisions and not why:
            g = rows[(rows["family"] == "gemm") & (rows["dtype"] == name)]
            reasons = sorted(set(g.loc[g["status"] != "ok", "reason"].dropna().astype(str)))
            why = reasons or [f"of its {len(g)} GEMM rows, {untrusted_text(g)}"]
        missing.append(f"{name} roof: " + ("; ".join(why) if why else "no row of the quick plan set it"))
    for m in missing:
        warnings.warn(f"quick_roofs could not set the {m}", RoofWarning, stacklevel=2)
    return Roofs([r for r in roofs if r.source == "measured" or r.kind != "bandwidth"], missing)
