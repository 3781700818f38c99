"""The plan of an ahead-of-time compile (bench/aot/table.py): the run's own ops, sweeps, skips and
tuning candidates for a device of the target arch, each recorded launch turned into a compile
job (signature, constexprs, integer specializations, options); nothing compiles here."""
from __future__ import annotations

import contextlib
import dataclasses
import importlib
import inspect
import os
from collections import Counter
from dataclasses import dataclass, field

import torch

from bench.aot.targets import ARCHS, DTYPE_CONSTEXPRS, FAMILIES, KERNEL_MODULES, TRITON_TYPE, fake_device
from bench.measure import skip
from bench.measure.registry import LaunchContext, load_all
from bench.ops._tune import launched
from bench.util import environ_restored, swapped

# ---- launches -> compile jobs -----------------------------------------------------------------

def int_spec(v: int) -> tuple[str, bool]:
    """Return (Triton type, 16-divisible) for an integer argument the way Triton's launcher
    specializes it: 1 is a constant, |v| >= 2**31 is i64, else i32; divisible by 16 is marked."""
    if v == 1:
        return "constexpr", False
    return ("i64" if not -2**31 <= v < 2**31 else "i32"), v % 16 == 0


def constexpr_names(kernel) -> set:
    """Return the names of a kernel's tl.constexpr parameters (JIT or interpreted)."""
    fn = getattr(kernel, "fn", kernel)
    out = set()
    for name, p in inspect.signature(fn).parameters.items():
        ann = p.annotation
        if ann is not inspect.Parameter.empty and "constexpr" in str(getattr(ann, "__name__", ann)):
            out.add(name)
    return out


@dataclass
class Launch:
    module: str
    kernel: str
    args: tuple
    kwargs: dict


class _Recorder:
    """Stands in for a kernel: kernel[grid](*args, **kwargs) records the call, launches nothing."""

    def __init__(self, module, name, log):
        self.module, self.name, self.log = module, name, log

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.log.append(Launch(self.module, self.name, args, kwargs))


def _kernels():
    """Return {(module, name): kernel object} of every Triton kernel in KERNEL_MODULES."""
    out = {}
    for modname in KERNEL_MODULES:
        mod = importlib.import_module(modname)
        for name, obj in vars(mod).items():
            if hasattr(obj, "arg_names") and hasattr(obj, "run") and name.endswith("_kernel"):
                out[(modname, name)] = obj
    return out


@contextlib.contextmanager
def recording(log: list):
    """Replace every suite kernel by a recorder that appends its launches to log."""
    with contextlib.ExitStack() as stack:
        for (modname, name) in _kernels():
            stack.enter_context(swapped(importlib.import_module(modname), **{name: _Recorder(modname, name, log)}))
        yield


@contextlib.contextmanager
def meta_inputs():
    """Let the ops' make_inputs build their tensors on the meta device: torch's random
    functions there take no generator (the values are never needed, only shapes, dtypes
    and strides)."""
    real_randn, real_randint = torch.randn, torch.randint

    class _Generator:
        def __init__(self, device=None):
            pass

        def manual_seed(self, seed):
            return self

    def randn(*a, generator=None, **kw):
        return real_randn(*a, **kw)

    def randint(*a, generator=None, **kw):
        return real_randint(*a, **kw)

    with swapped(torch, Generator=_Generator, randn=randn, randint=randint):
        yield


def tensordesc_type(v) -> str | None:
    """Return the signature type of a host-side tensor descriptor
    (triton.tools.tensor_descriptor.TensorDescriptor) as Triton's JIT names it, its base's
    element type and its block shape ("tensordesc<bf16[1, 1, 128, 64]>", Triton 3.6 to 3.9),
    or None for any other argument."""
    if type(v).__name__ != "TensorDescriptor" or not hasattr(v, "base") or not hasattr(v, "block_shape"):
        return None
    return f"tensordesc<{TRITON_TYPE[v.base.dtype]}[{', '.join(str(int(b)) for b in v.block_shape)}]>"


def job_of(launch: Launch, kernel, cc: int, target: tuple | None = None) -> dict:
    """Return the compile job of a recorded launch: signature, constexprs, 16-aligned
    arguments and options, all by argument name (picklable, version-neutral), and the
    target (Triton's GPUTarget fields; default NVIDIA's sm_cc)."""
    names = list(kernel.arg_names)
    declared = constexpr_names(kernel)
    kwargs = dict(launch.kwargs)
    options = {k: kwargs.pop(k) for k in ("num_warps", "num_stages") if k in kwargs}
    values = dict(zip(names, launch.args))
    values.update(kwargs)
    missing = [n for n in names if n not in values]
    if missing:
        params = inspect.signature(getattr(kernel, "fn", kernel)).parameters
        for n in missing:
            values[n] = params[n].default
    signature, constexprs, aligned, specialized, ptr32 = {}, {}, [], [], []
    hip = bool(target) and target[0] == "hip"
    for n in names:
        v = values[n]
        if n in declared:
            signature[n], constexprs[n] = "constexpr", v
        elif isinstance(v, torch.Tensor):
            signature[n] = "*" + TRITON_TYPE[v.dtype]
            aligned.append(n)  # allocations are 256-byte aligned; the suite passes no offset views
            if hip and hip_buffer_ops() and v.untyped_storage().nbytes() <= PTR32_MAX:
                ptr32.append(n)  # ROCm's JIT specializes it ("S": tt.pointer_range 32, buffer loads)
        elif tensordesc_type(v):
            signature[n] = tensordesc_type(v)  # a host-side tensor descriptor: no alignment attribute
        elif isinstance(v, bool):
            signature[n] = "i1"
        elif isinstance(v, int):
            t, div16 = int_spec(v)
            signature[n] = t
            if t == "constexpr":
                constexprs[n] = v
                specialized.append(n)
            elif div16:
                aligned.append(n)
        elif isinstance(v, float):
            signature[n] = "fp32"
        else:
            raise TypeError(f"{launch.kernel}: argument {n} is a {type(v).__name__}, which the AOT compile cannot type")
    job = {"module": launch.module, "kernel": launch.kernel, "signature": signature, "constexprs": constexprs,
           "aligned": aligned, "specialized": specialized, "options": options, "cc": cc,
           "target": tuple(target) if target else ("cuda", cc, 32)}
    if ptr32:
        job["ptr32"] = ptr32
    return job


PTR32_MAX = 2**31 - 1  # a buffer ROCm's Triton addresses with 32-bit offsets (HIPBackend.is_within_2gb)


def hip_buffer_ops() -> bool:
    """Return whether ROCm's Triton specializes pointers on their buffer's size (its
    AMDGCN_USE_BUFFER_OPS knob, on by default)."""
    try:
        from triton import knobs  # deferred: Triton is optional (Linux only)
        return bool(knobs.amd.use_buffer_ops)
    except Exception:  # an older triton without the knob
        return False


def config_label(job: dict) -> str:
    """Return the configuration of a job: its tile constexprs (BLOCK_ prefixes dropped), warps, stages."""
    parts = [f"{k.replace('BLOCK_', '')}{'' if isinstance(v, int) else '='}{v}"
             for k, v in job["constexprs"].items()
             if k not in DTYPE_CONSTEXPRS and k not in job["specialized"]]
    o = job["options"]
    parts.append(f"w{o.get('num_warps', 4)}")
    if "num_stages" in o:
        parts.append(f"s{o['num_stages']}")
    return " ".join(parts)


def spec_key(job: dict) -> tuple:
    """Return what makes two jobs of one configuration separate compiles."""
    return (tuple(sorted(job["signature"].items())), tuple(sorted(job["aligned"])),
            tuple(sorted((k, repr(v)) for k, v in job["constexprs"].items())), tuple(sorted(job.get("ptr32", ()))))


# ---- the plan --------------------------------------------------------------------------------

@dataclass
class Row:
    kernel: str
    dtype: str
    config: str
    status: str                     # ok, pruned, skipped, failed (after compiling: ok or failed)
    reason: str = ""
    model_smem: int | None = None
    specs: Counter = field(default_factory=Counter)   # spec_key -> launches (points x candidates)
    jobs: dict = field(default_factory=dict)          # spec_key -> job
    results: dict = field(default_factory=dict)       # spec_key -> compile result
    order: int = 0
    source: tuple | None = None     # (op, impl, point) of the first point that launches it (the GPU path tests)

    @property
    def job(self) -> dict | None:
        """Return the job of the specialization most launches use."""
        return self.jobs[self.specs.most_common(1)[0][0]] if self.specs else None

    @property
    def result(self) -> dict | None:
        """Return the compile result of the representative specialization, if compiled."""
        return self.results.get(self.specs.most_common(1)[0][0]) if self.specs else None


@dataclass
class CompilePlan:
    arch: str
    quick: bool
    rows: list

    def by_status(self, status: str) -> list:
        return [r for r in self.rows if r.status == status]


def build_plan(arch: str, quick: bool = False, only: list | None = None, device=None) -> CompilePlan:
    """Return the rows a run on a GPU of this arch would compile (quick: as --quick would),
    with what it prunes and skips; nothing is compiled here. device: the GPU whose sweeps
    to plan (its SM count and L2 set the stream and decode sweeps), on the meta device;
    None: the arch's example part (targets.fake_device)."""
    if arch not in ARCHS:
        raise ValueError(f"unknown arch '{arch}': choose from {', '.join(ARCHS)}")
    a = ARCHS[arch]
    device = fake_device(arch) if device is None else dataclasses.replace(device, torch_device="meta")
    kernels = _kernels()
    reg = load_all()
    rows: dict = {}

    def row(kernel, dtype, config, status, reason=""):
        key = (kernel, dtype, config, status, reason)
        if key not in rows:
            rows[key] = Row(kernel, dtype, config, status, reason, order=len(rows))
        return rows[key]

    def record(fn):
        log = []
        with recording(log):
            fn()
        return log

    # Plan as a GPU run would: the interpreter switch (set by the tests) means nothing here.
    with environ_restored(), meta_inputs():
        os.environ.pop("TRITON_INTERPRET", None)
        for op, impls in reg.select(only or list(FAMILIES)):
            for impl in impls:
                if impl.backend != "triton":
                    continue
                for point in op.points(device, quick):
                    dtype = str(point.get("dtype", ""))
                    # the backend's reason is left out: this plans a GPU's launches on any host
                    reason = (skip.point_reason(op, point, device) or skip.quick_reason(impl, point, quick)
                              or skip.own_reason(impl, point, device))
                    if reason:
                        row(f"{op.family}/{impl.name}", dtype, "*", "skipped", reason)
                        continue
                    x = op.make_inputs(point, "meta")
                    ctx = LaunchContext(point, device, op.modes[0], quick)
                    if impl.tuning is None:
                        plan = [(None, None, False)]
                    else:
                        t = impl.tuning(x, ctx)
                        runs, _ = launched(t.candidates, t.smem, a.smem_limit, quick, t.fallback)
                        if not runs:  # the run would refuse the point: no candidate fits
                            row(f"{op.family}/{impl.name}", dtype, "*", "failed",
                                f"every candidate exceeds {a.smem_limit} B of shared memory at {point}")
                        tried = t.candidates + (tuple(t.fallback) if runs and runs[0] not in t.candidates else ())
                        plan = [(c, t.smem(c) if t.smem else None, c not in runs) for c in tried
                                if c in runs or (t.smem and t.smem(c) > a.smem_limit)]
                    for cfg, model, pruned in plan:
                        fn = impl.launcher(x, ctx) if cfg is None else t.make_fn(cfg)
                        for i, launch in enumerate(record(fn)):
                            job = job_of(launch, kernels[(launch.module, launch.kernel)], a.cc, a.target)
                            m = model if i == 0 else secondary_smem(job)
                            if pruned:
                                if i == 0:
                                    row(launch.kernel, dtype, config_label(job), "pruned",
                                        f"model {m} B > {a.smem_limit} B").model_smem = m
                                continue
                            r = row(launch.kernel, dtype, config_label(job), "ok")
                            r.model_smem = m
                            r.source = r.source or (op.name, impl.name, dict(point))
                            k = spec_key(job)
                            r.specs[k] += 1
                            r.jobs.setdefault(k, job)
    return CompilePlan(arch, quick, sorted(rows.values(), key=lambda r: r.order))


def secondary_smem(job: dict) -> int | None:
    """Return the shared-memory model of a kernel launched beside the tuned one (decode's
    combine), or None where there is none."""
    if job["kernel"] == "decode_combine_kernel":
        from kernels.attention import (
            combine_smem_bytes,  # deferred: kernels/ imports Triton, which is optional (Linux only)
        )
        c = job["constexprs"]
        return combine_smem_bytes(c["BLOCK_S"], c["D"], job["options"].get("num_warps", 4))
    return None
