"""A user's PyTorch program captured op by op: time, FLOPs and bytes of each op (ARCHITECTURE.md, rule 1).

    capture(step, steps, device) -> Capture      one step callable: warm-up, a counting pass, N timed steps
    warm_up(step, device, what)                  the warm-up alone (the counters' replay of one step shares it)
    script_step(path, argv) -> callable          a script run as __main__, the whole script one step
    write_capture(capture, folder, ...)          ops.csv and profile.json, the files the report reads

How each number is made:
- Time: torch.profiler around N steps after a warm-up by time (rule 4's shape: at least two
  calls and WARMUP_S, so compilation stays out). On a CPU an op's time is its profiler event's
  CPU time (its own internal calls included); on a GPU the device time of the kernels it
  launched. The step's time is its record_function range (on a GPU it ends with a
  synchronize). The time between ops (Python, dispatch, idle device) is the step's time less
  the ops', reported beside them, so the ops' shares and that gap add up to the step. The
  profiler's own log lines (Kineto's, written to stderr as it starts and stops) are dropped
  (bench/run/quiet.py); what the program writes to stderr passes through.
- FLOPs: torch.utils.flop_counter's registered formulas (FlopCounterMode's own table, per
  call), from one counting pass under a TorchDispatchMode; FlopCounterMode's total over the
  same pass is kept beside them as a check. An op with no formula counts no FLOPs: its bytes
  place it (roofs/analysis/program.py ranks it with the rest).
- Bytes: rule 1's compulsory traffic of each call: every distinct input tensor read once,
  every output written once (read_bytes and write_bytes apart); a tensor's bytes are the span
  its strides touch, at most numel x itemsize (an expanded operand is read once). Views and
  aliases move nothing and are left out. An op that overwrites its first argument (copy_,
  fill_) does not read it.
- Inductor's kernels (torch.compile): each generated CPU or Triton kernel is wrapped when it is
  loaded, so the profiler names it and its arguments' bytes are counted (const / in_ptr
  arguments read, the others written; in_out_ptr both). They have no FLOP formula: bandwidth
  points. A function compiled before the capture began keeps its unwrapped kernels (its time
  is then the gap between ops).
The counting pass (after the timed steps) has its ops matched to the timed steps' profiler events in order, by name
(events inside a matched one are its own internal calls); an op the timed steps ran that the
counting pass did not see (a compiled region's extern kernels) is counted from the event's
recorded shapes and dtypes.
- Kernels (a GPU): each kernel of the first timed step belongs to the counted op whose profiler event, or an
  event inside it, launched it (a device event's linked_correlation_id is its launching CPU event's id),
  listed in device start order (Capture.launches; bench/run/profile_counters.py reads them for --counters).
"""
from __future__ import annotations

import json
import math
import re
import runpy
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, record_function
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode, flop_registry
from torch.utils.module_tracker import ModuleTracker

from bench.results import utc_stamp
from bench.run.quiet import quietly
from bench.util import Refusal, first_line, precision_name
from roofs.reports.profile import finish_profile

STEP = "roofbench.step#"
INDUCTOR = "inductor:"
WARMUP_S = 0.2
# ops that overwrite their first argument without reading it
OVERWRITES = {"aten::copy_", "aten::fill_", "aten::zero_", "aten::normal_", "aten::uniform_", "aten::random_",
              "aten::bernoulli_", "aten::exponential_", "aten::set_"}
COLUMNS = ["op", "module", "shapes", "dtype", "precision", "calls", "flops", "read_bytes", "write_bytes",
           "time_s", "kind"]


class ProfileError(Refusal):
    """A program that cannot be profiled: one sentence naming it and what would work, and its code
    (step_raised, bad_steps, no_op, no_script, script_exited, out_inside_roofs, replay_unloadable,
    no_program)."""


@dataclass
class Call:
    """One op call: its name ("aten::mm"), innermost module, input shapes, dtype, FLOPs (None: no formula)
    and bytes read and written; kind "aten" (counted by dispatch), "event" (from the profiler's
    record) or "inductor" (a generated kernel)."""
    op: str
    module: str
    shapes: str
    dtype: str
    flops: float | None
    read_bytes: float
    write_bytes: float
    kind: str = "aten"


def tensor_bytes(t) -> int:
    """Return the bytes a tensor's elements occupy: (1 + sum((size - 1) x |stride|)) x itemsize, the span
    its strides touch, at most numel x itemsize; 0 for anything else or an empty tensor."""
    if not isinstance(t, torch.Tensor) or t.numel() == 0:
        return 0
    span = 1 + sum((s - 1) * abs(st) for s, st in zip(t.shape, t.stride()) if s > 1)
    return min(span, t.numel()) * t.element_size()


def _tensors(x):
    if isinstance(x, torch.Tensor):
        yield x
    elif isinstance(x, (list, tuple)):
        for v in x:
            yield from _tensors(v)


def _key(t):
    return (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), tuple(t.stride()))


def _dtype_of(tensors) -> str:
    floating = [t for t in tensors if t.is_floating_point()]
    pick = (floating or tensors)
    return str(pick[0].dtype).replace("torch.", "") if pick else ""


def _precision(dtype: str) -> str:
    """Return the compute roof's name for a floating dtype ("bfloat16" -> "bf16"); "" for an integer op."""
    if not dtype or not getattr(torch, dtype, torch.int8).is_floating_point:
        return ""
    return precision_name(dtype)


def _shape_text(tensors) -> str:
    return ", ".join("x".join(map(str, t.shape)) or "scalar" for t in tensors)


def count_call(func, args, kwargs, out, module: str) -> Call | None:
    """Return the Call of one dispatched op (the module docstring's counts), or None for a view or
    alias (no bytes moved, no FLOPs)."""
    schema = func._schema
    name = f"aten::{schema.name.split('::')[-1]}"
    mutable = any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments)
    outs = list(_tensors(out))
    out_names = {a.name for a in schema.arguments if getattr(a, "is_out", False)}
    ins = [t for a, v in zip(schema.arguments, args) if a.name not in out_names for t in _tensors(v)]
    ins += [t for k, v in kwargs.items() if k not in out_names for t in _tensors(v)]
    if func.is_view or (not mutable and not out_names and outs and
                        all(o.untyped_storage().data_ptr() in {i.untyped_storage().data_ptr() for i in ins}
                            for o in outs)):
        return None
    if name in OVERWRITES and ins:
        ins = ins[1:]
    seen, reads = set(), 0
    for t in ins:
        if _key(t) not in seen:
            seen.add(_key(t))
            reads += tensor_bytes(t)
    writes = sum(tensor_bytes(o) for o in {_key(o): o for o in outs}.values())
    formula = flop_registry.get(func._overloadpacket)
    flops = float(formula(*args, **kwargs, out_val=out)) if formula else None
    return Call(name, module, _shape_text(ins), _dtype_of(ins + outs), flops, float(reads), float(writes))


def innermost(parents) -> str:
    """Return the innermost module of ModuleTracker's parents (the deepest dotted name), "Global" when none."""
    named = [p for p in parents if p != "Global"]
    return max(named, key=lambda p: (p.count("."), len(p))) if named else "Global"


class _Counter(TorchDispatchMode):
    def __init__(self, tracker):
        super().__init__()
        self.tracker, self.calls = tracker, []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        call = count_call(func, args, kwargs, out, innermost(self.tracker.parents))
        if call is not None:
            self.calls.append(call)
        return out


def count_step(step) -> tuple[list[Call], float]:
    """Return (the step's op calls in order, FlopCounterMode's total FLOPs over the same pass)."""
    tracker = ModuleTracker()
    with FlopCounterMode(display=False) as fc, tracker, _Counter(tracker) as counter:
        step()
    return counter.calls, float(fc.get_total_flops())


class InductorKernels:
    """While active, each Inductor kernel has its arguments' read and written bytes, dtype and shapes kept in
    `bytes` by its name (the module docstring's rule): a CPU C++ kernel (AsyncCompile.cpp_pybinding, wrapped
    when its module loads) also runs inside record_function("inductor:<name>"); a Triton kernel
    (CachingAutotuner.run) is counted at its first launch and names its own profiler event."""

    def __init__(self):
        self.bytes: dict[str, tuple] = {}  # name: (read, written, dtype, its tensors' shapes)
        self._undo = []

    def __enter__(self):
        from torch._inductor import async_compile  # deferred: importing Inductor costs seconds, most programs skip it
        original = async_compile.AsyncCompile.cpp_pybinding
        kernels = self

        def cpp_pybinding(compiler, argtypes, source_code):
            return kernels._wrap_cpp(original(compiler, argtypes, source_code), argtypes, source_code)
        async_compile.AsyncCompile.cpp_pybinding = cpp_pybinding
        self._undo.append(lambda: setattr(async_compile.AsyncCompile, "cpp_pybinding", original))
        try:
            from torch._inductor.runtime import triton_heuristics  # deferred: needs Triton, absent on some hosts
        except ImportError:
            return self
        run = triton_heuristics.CachingAutotuner.run

        def traced_run(autotuner, *args, **kw):
            name = autotuner.inductor_meta.get("kernel_name") or getattr(autotuner.fn, "__name__", "triton")
            if name not in kernels.bytes:
                tensors = [a for a in args if isinstance(a, torch.Tensor)]
                kernels.bytes[name] = (*_by_arg_names(list(getattr(autotuner.fn, "arg_names", [])), args),
                                       _dtype_of(tensors), _shape_text(tensors))
            return run(autotuner, *args, **kw)
        triton_heuristics.CachingAutotuner.run = traced_run
        self._undo.append(lambda: setattr(triton_heuristics.CachingAutotuner, "run", run))
        return self

    def __exit__(self, *exc):
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()

    def _wrap_cpp(self, fn, argtypes, source_code):
        signature = re.search(r"kernel\((.*?)\)", source_code, re.DOTALL)
        names = re.findall(r"(\w+)\s*[,)]", (signature.group(1) if signature else "") + ")")
        found = {}

        def kernel(*args):
            if "name" not in found:  # the generated module's own name for it, found once in its caller's globals
                caller = sys._getframe(1).f_globals
                found["name"] = next((k for k, v in caller.items() if v is kernel), "cpp_kernel")
            name = found["name"]
            if name not in self.bytes:
                reads = [not t.endswith("*") or t.startswith("const") or n.startswith("in_out")
                         for t, n in zip(argtypes, names + [""] * len(argtypes))]
                writes = [t.endswith("*") and not t.startswith("const") for t in argtypes]
                self.bytes[name] = (float(sum(tensor_bytes(a) for a, r in zip(args, reads) if r)),
                                    float(sum(tensor_bytes(a) for a, w in zip(args, writes) if w)),
                                    _dtype_of([a for a in args if isinstance(a, torch.Tensor)]),
                                    _shape_text([a for a in args if isinstance(a, torch.Tensor)]))
            with record_function(INDUCTOR + name):
                return (fn.result() if hasattr(fn, "result") else fn)(*args)
        return kernel


def _by_arg_names(names, args) -> tuple[float, float]:
    """Return (read, written) bytes of a Triton kernel's tensor arguments by Inductor's names: in_ptr read,
    out_ptr written, in_out_ptr both."""
    r = w = 0.0
    for n, a in zip(names, args):
        b = tensor_bytes(a)
        r += b if n.startswith(("in_ptr", "in_out_ptr")) else 0
        w += b if n.startswith(("out_ptr", "in_out_ptr")) else 0
    return r, w


def _children(e):
    return sorted(e.cpu_children, key=lambda c: c.time_range.start)


def _event_call(e, kernels: InductorKernels) -> Call:
    """Return a Call counted from a profiler event alone: an Inductor kernel's recorded bytes, or an aten
    op's recorded shapes and dtypes (inputs read; FLOPs from the formula on meta tensors)."""
    if e.name.startswith(INDUCTOR) or e.name in kernels.bytes:
        name = e.name.removeprefix(INDUCTOR)
        r, w, dtype, shapes = kernels.bytes.get(name, (0.0, 0.0, "", ""))
        return Call(name, "compiled", shapes, dtype, None, r, w, kind="inductor")
    shapes, dtypes = e.input_shapes or [], list(getattr(e, "input_dtypes", None) or [])
    metas = []
    for s, d in zip(shapes, dtypes + [""] * len(shapes)):
        dt = {"float": torch.float32, "c10::BFloat16": torch.bfloat16, "c10::Half": torch.float16,
              "double": torch.float64, "long int": torch.int64, "int": torch.int32}.get(d)
        if isinstance(s, list) and dt is not None and (s or d):
            metas.append(torch.empty(s, dtype=dt, device="meta"))
    flops = None
    formula = flop_registry.get(getattr(torch.ops.aten, e.name.split("::")[-1], None))
    if formula is not None and len(metas) >= 2:
        try:
            flops = float(formula(*metas[:2], out_val=None))
        except Exception:  # a formula that needs arguments the record lacks: counted as no formula
            flops = None
    nbytes = float(sum(tensor_bytes(m) for m in metas))
    return Call(e.name, "compiled", _shape_text(metas), _dtype_of(metas), flops, nbytes, 0.0, kind="event")


def match_step(step_event, calls: list[Call], kernels: InductorKernels, on_gpu: bool):
    """Return ([(Call, seconds, its event)] for one timed step, the counted calls it did not run): the step's event
    tree walked in start order, each event whose name is the next counted call's taken as that call
    (its subtree is the op's own internal calls); an Inductor kernel's event, or an aten event under a
    compiled region, is counted from the event (_event_call). Seconds: CPU time, or device time on a GPU."""
    out, i = [], 0
    names = {c.op for c in calls}

    def seconds(e):
        return (e.device_time_total if on_gpu else e.time_range.elapsed_us()) * 1e-6

    def walk(e, compiled):
        nonlocal i
        for c in _children(e):
            if i < len(calls) and c.name == calls[i].op:
                out.append((calls[i], seconds(c), c))
                i += 1
                continue
            ahead = next((j for j in range(i, min(i + 8, len(calls))) if calls[j].op == c.name), None)
            if ahead is not None and not compiled:
                out.append((calls[ahead], seconds(c), c))
                i = ahead + 1
                continue
            if c.name.startswith(INDUCTOR) or c.name in kernels.bytes or (compiled and c.name in names
                                                                              and c.name.startswith("aten::")):
                out.append((_event_call(c, kernels), seconds(c), c))
                continue
            walk(c, compiled or c.name.startswith(("Torch-Compiled Region", "## Call CompiledFxGraph")))
    walk(step_event, False)
    return out, len(calls) - i


def row_key(call: Call) -> tuple:
    """Return the ops.csv row a call adds to: (op, module, shapes, dtype, kind)."""
    return call.op, call.module, call.shapes, call.dtype, call.kind


def step_launches(step_event, matched, events) -> list[tuple]:
    """Return [(row_key of the counted op that launched it, or None for a kernel launched between ops, kernel
    name)] for every kernel the step's events launched, in device start order (on one stream, launch order):
    the module docstring's rule. Copies and memsets are no kernels (a kernel profiler does not see them)."""
    owner = {}

    def mark(e, key):
        owner[e.id] = key
        for c in e.cpu_children:
            mark(c, key)
    mark(step_event, None)
    for call, _, e in matched:
        mark(e, row_key(call))
    found = [k for k in events if k.device_type == DeviceType.CUDA and k.linked_correlation_id in owner
             and getattr(k, "activity_type", None) not in ("gpu_memcpy", "gpu_memset")
             and not k.name.startswith(("Memcpy", "Memset"))]
    return [(owner[k.linked_correlation_id], k.name) for k in sorted(found, key=lambda k: k.time_range.start)]


@dataclass
class Capture:
    """What capture() measured: one row per distinct (op, module, shapes, dtype) with its calls, FLOPs,
    bytes and mean time per step (rows), the mean step time, each step's time, FlopCounterMode's total,
    counted calls the timed steps did not run, notes, and the first step's kernels (step_launches; none on a
    CPU)."""
    rows: pd.DataFrame
    step_s: float
    steps_s: list
    flop_counter_total: float
    device: str
    unmatched: int = 0
    notes: list = field(default_factory=list)
    launches: list = field(default_factory=list)


def _sync(device: str):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _run(step, what: str):
    try:
        return step()
    except ProfileError:
        raise
    except Exception as e:
        raise ProfileError(f"{what} raised {first_line(e)}; nothing was profiled.", "step_raised") from None


def one_step(step, device: str, what: str = "the step"):
    """Call step() once and synchronize the device; return what it returned. Raises ProfileError (_run's)."""
    out = _run(step, what)
    _sync(device)
    return out


def warm_up(step, device: str, what: str = "the step") -> int:
    """Call step() (one_step) at least twice and for at least WARMUP_S (rule 4's shape: compiles and first
    touches stay out of what follows); return the calls made. Raises ProfileError (_run's)."""
    t0, n = time.perf_counter(), 0
    while n < 2 or time.perf_counter() - t0 < WARMUP_S:
        one_step(step, device, what)
        n += 1
    return n


def capture(step, steps: int = 5, device: str = "cpu", what: str = "the step") -> Capture:
    """Return the Capture of `steps` calls of step() (the module docstring's rules), after a warm-up of at
    least two calls and WARMUP_S. Raises ProfileError for steps < 1, a step that raises, or one that runs
    no op."""
    if not isinstance(steps, int) or steps < 1:
        raise ProfileError(f"steps={steps!r} captures nothing: give 1 or more steps.", "bad_steps")
    kernels = InductorKernels()
    with kernels:
        warm_up(step, device, what)
        on_gpu = device.startswith("cuda")
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
        # the profiler's own log lines, written as it starts and stops, stay out of the output (bench/run/quiet.py)
        with quietly(profile(activities=acts, record_shapes=True)) as prof:
            for k in range(steps):
                with record_function(f"{STEP}{k}"):
                    _run(step, what)
                    _sync(device)
        # counted after the timed steps: under a dispatch mode a compiled function may fall back to eager
        # for good, and the timed steps must run it as the program does
        calls, fc_total = _run(lambda: count_step(step), what)
    events = prof.events()
    step_events = sorted((e for e in events if e.name.startswith(STEP)), key=lambda e: e.time_range.start)
    per_step, steps_s, unmatched = [], [], 0
    for e in step_events:
        got, left = match_step(e, calls, kernels, on_gpu)
        per_step.append(got)
        steps_s.append(e.time_range.elapsed_us() * 1e-6)
        unmatched = max(unmatched, left)
    rows = _rows(per_step)
    if rows.empty:
        raise ProfileError(f"{what} ran no torch op that the profiler saw: profile a program that computes with "
                           "torch tensors.", "no_op")
    notes = []
    if unmatched:
        notes.append(f"{unmatched} op call(s) of the counting pass did not appear in the timed steps (a compiled "
                     "region fuses them, or the program's ops change from step to step): their FLOPs are left out")
    launches = step_launches(step_events[0], per_step[0], events) if on_gpu and step_events else []
    return Capture(rows, sum(steps_s) / len(steps_s), steps_s, fc_total, device, unmatched, notes, launches)


def _rows(per_step) -> pd.DataFrame:
    """Return one row per distinct (op, module, shapes, dtype, kind): calls, FLOPs and bytes per step, and the
    mean seconds per step over the steps (a mean, so the rows' times add up to the mean step's ops)."""
    agg: dict = {}
    for got in per_step:
        for call, s, _ in got:
            key = row_key(call)
            a = agg.setdefault(key, {"calls": 0, "flops": 0.0, "has_flops": call.flops is not None,
                                     "read_bytes": 0.0, "write_bytes": 0.0, "time_s": 0.0})
            a["calls"] += 1
            a["flops"] += call.flops or 0.0
            a["read_bytes"] += call.read_bytes
            a["write_bytes"] += call.write_bytes
            a["time_s"] += s
    n = max(len(per_step), 1)
    out = [{"op": k[0], "module": k[1], "shapes": k[2], "dtype": k[3], "precision": _precision(k[3]),
            "calls": a["calls"] / n, "flops": a["flops"] / n if a["has_flops"] else math.nan,
            "read_bytes": a["read_bytes"] / n, "write_bytes": a["write_bytes"] / n, "time_s": a["time_s"] / n,
            "kind": k[4]} for k, a in agg.items()]
    return pd.DataFrame(out, columns=COLUMNS)


def script_step(path, argv=()):
    """Return a zero-argument callable: its first call runs the script at path as __main__ with sys.argv =
    [path, *argv] (a SystemExit of 0 or None is a normal end); later calls run the script's own
    `profile_step` (a zero-argument callable it left in its globals: its steps without its setup), or, where
    it has none, the whole script again. Raises ProfileError when path is not a file."""
    path = Path(path)
    if not path.is_file():
        raise ProfileError(f"script {path} does not exist: give the path of a Python file to profile.", "no_script")
    found = {}

    def run_script():
        saved = sys.argv
        sys.argv = [str(path), *argv]
        try:
            return runpy.run_path(str(path), run_name="__main__")
        except SystemExit as e:
            if e.code not in (None, 0):
                raise ProfileError(f"script {path} exited with status {e.code}; nothing was profiled.",
                                   "script_exited") from None
            return {}
        finally:
            sys.argv = saved

    def step():
        if "step" in found:
            return found["step"]()
        ns = run_script()
        marked = ns.get("profile_step")
        found["step"] = marked if callable(marked) else run_script
    return step


def write_capture(cap: Capture, folder, roofs, device: dict, meta: dict) -> Path:
    """Write ops.csv (Capture.rows) and profile.json (the step times, FlopCounterMode's total, the roofs
    as dicts, the device record, notes and meta) into folder; return it."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    cap.rows.to_csv(folder / "ops.csv", index=False)
    record = {"kind": "profile", "step_s": cap.step_s, "steps_s": cap.steps_s, "steps": len(cap.steps_s),
              "flop_counter_total": cap.flop_counter_total, "unmatched_calls": cap.unmatched,
              "notes": cap.notes, "device": device, "roofs": [r.to_dict() for r in roofs], **meta}
    (folder / "profile.json").write_text(json.dumps(record, indent=1, default=str))
    return folder


def outside_run(out, roofs_dir) -> Path:
    """Return out when it is not inside the roofs' run folder; raise ProfileError otherwise (a profile
    folder is its own, never a run's)."""
    out = Path(out)
    if roofs_dir is not None:
        run = Path(roofs_dir).resolve()
        if out.resolve() == run or run in out.resolve().parents:
            raise ProfileError(f"--out {out} is inside the roofs' run folder {roofs_dir}: a profile writes a folder "
                               "of its own; give another --out (default results/).", "out_inside_roofs")
    return out


def profile_into(step, folder, roofs, device, roofs_from: str, steps: int = 5, program: str = "program",
                 meta: dict | None = None, counters=None) -> tuple[Path, str]:
    """Capture steps of step() on device (a bench.hw.device.DeviceInfo), write the capture into folder
    (write_capture) and finish it there (roofs.reports.profile.finish_profile: placed ops, chart, report);
    return (folder, the text to print). counters(capture) -> dict, when given, runs between the capture and
    its writing (bench/run/profile_counters.py: it adds the top ops' counter columns to the capture's rows)
    and its dict is profile.json's "counters". Raises ProfileError (capture's)."""
    cap = capture(step, steps, device.torch_device, what=program)
    extra = {"counters": counters(cap)} if counters is not None else {}
    write_capture(cap, folder, roofs, device.to_dict(),
                  {"program": program, "roofs_from": roofs_from, "started_utc": utc_stamp(), **(meta or {}), **extra})
    text, _ = finish_profile(folder)
    return Path(folder), text
