"""The one registry of ops and their implementations.

An Op is a family member ("stream.triad", later "gemm"...) with its axes as data, input
makers, a float64 reference, and its FLOP and byte formulas. An Impl is one way to
compute it ("stream.triad/torch", "stream.triad/triton"): launcher(inputs, ctx) returns a
zero-argument callable, so allocation and setup (and autotuning) stay outside the timed
region; ctx (a LaunchContext) tells it the point, the device, the mode the point will be
timed in and whether the run is quick, so nothing travels inside the inputs.
Registering an id twice is an error, never a silent overwrite.
"""
from __future__ import annotations

import importlib
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from bench.util import Refusal, did_you_mean

Point = dict  # axis name -> value, e.g. {"dtype": "float32", "ws_bytes": 1048576}


class RegistryError(Refusal):
    """Bad registry use or an unknown name given by the user: one sentence, and its code
    (op_registered, op_unregistered, impl_registered, unknown_name)."""


@dataclass(frozen=True)
class Axis:
    """One swept dimension. Either fixed values, or a sweep(device, quick) that derives
    them from the device (working sets from its cache sizes, say); quick_values, when
    given, replaces values in --quick runs."""
    name: str
    values: tuple = ()
    quick_values: tuple | None = None
    sweep: Callable | None = None
    doc: str = ""

    def expand(self, device, quick: bool) -> tuple:
        if self.sweep is not None:
            return tuple(self.sweep(device, quick))
        return tuple(self.quick_values if quick and self.quick_values is not None else self.values)


PROJECTION_VECTORS = 4   # random directions of a Projection


@dataclass(frozen=True)
class Projection:
    """A product's reference by Freivalds' check, C = A B: random directions X (N, r) and A (B X) in float64. The
    product's relative error is estimated as ||C X - A (B X)|| / ||A (B X)||: O(n^2) work
    where the full float64 product is O(n^3). For Gaussian X the squared norm of E X (E =
    C - A B) has the expectation r ||E||_F^2, as C X's has r ||A B||_F^2, so the ratio
    estimates the relative Frobenius error the full check measures; an error confined to
    one tile, or an unwritten (NaN) output, moves C X with probability one. Each side is
    computed in float64 (its rounding, about K x 1.1e-16 relative at worst, is under every
    tolerance: int8's is 1e-12)."""
    x: torch.Tensor
    ax: torch.Tensor


# The float64 copy of a block of rows that f64_rows_product and f64_weighted_rows widen at once: no
# reference widens a large operand whole (ARCHITECTURE.md, rule 2), since a fresh float64 copy of it costs
# more in first-touch page faults than the product it feeds, and 4x a bf16 operand's memory.
F64_BLOCK_BYTES = 8 * 2**20


def _row_blocks(w: torch.Tensor):
    """Yield (slice, float64 block) over w's rows, F64_BLOCK_BYTES of them widened at a time into
    one buffer reused for every block (a fresh block each time pays its page faults again)."""
    rows = max(1, F64_BLOCK_BYTES // (8 * w.shape[1]))
    buf = torch.empty(min(rows, w.shape[0]), w.shape[1], dtype=torch.float64, device=w.device)
    for lo in range(0, w.shape[0], rows):
        blk = slice(lo, min(lo + rows, w.shape[0]))
        yield blk, buf[:blk.stop - lo].copy_(w[blk])


def f64_rows_product(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Return a @ w^T in float64 (a: (B, K) float64, w: (N, K) of any type whose values float64
    holds exactly), widening w a block of F64_BLOCK_BYTES of rows at a time."""
    out = torch.empty(a.shape[0], w.shape[0], dtype=torch.float64, device=a.device)
    for blk, wide in _row_blocks(w):
        torch.mm(a, wide.T, out=out[:, blk])
    return out


def f64_weighted_rows(w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Return w^T @ x in float64 (w: (N, K) as in f64_rows_product, x: (N, r) float64): the
    sum over blocks of rows of w's float64 block^T times x's matching rows."""
    out = torch.zeros(w.shape[1], x.shape[1], dtype=torch.float64, device=x.device)
    for blk, wide in _row_blocks(w):
        out.addmm_(wide.T, x[blk])
    return out


def f64_times(m: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Return m @ x in float64 (m: (R, C) of any type whose values float64 holds exactly, x: (C, r)
    float64), widening m a block at a time along the dimension it is laid out by: a row-major m
    by its rows (f64_rows_product), a column-major one (a transposed view) by its columns, as the
    rows of m^T (f64_weighted_rows); any other layout is made row-major first."""
    if m.stride(-1) != 1 and m.T.is_contiguous():
        return f64_weighted_rows(m.T, x)
    return f64_rows_product(x.T.contiguous(), m if m.stride(-1) == 1 else m.contiguous()).T


def relative_norm_error(out, ref, inputs) -> float:
    """Return ||out - ref||_2 / ||ref||_2 in float64 (the absolute norm when ref is all zero);
    for a Projection reference, ||out X - A (B X)|| / ||A (B X)|| (Freivalds' estimate)."""
    if isinstance(ref, Projection):  # C X, widening C a block at a time
        out, ref = f64_times(out, ref.x), ref.ax
    diff = (out.double() - ref).norm().item()
    denom = ref.norm().item()
    return diff / denom if denom > 0 else diff


@dataclass(frozen=True)
class Op:
    name: str                                   # "stream.copy"
    family: str                                 # "stream"
    doc: str
    axes: tuple[Axis, ...]
    make_inputs: Callable                       # (point, torch_device) -> dict of tensors/scalars
    reference: Callable                         # (inputs) -> float64 tensor
    flops: Callable                             # (point) -> int
    bytes: Callable                             # (point) -> int, compulsory traffic
    working_set: Callable                       # (point) -> int, bytes resident while it runs
    describe: Callable                          # (point) -> (size, shape string)
    tolerance: Callable                         # (point) -> float, max error to pass
    outputs: tuple[str, ...] = ()               # input keys that are outputs: poisoned first
    inouts: tuple[str, ...] = ()                # input keys read and written (a += ...): never poisoned; the
                                                # gate snapshots them and restores them (bench/measure/gate.py)
    error: Callable = relative_norm_error      # (out, ref, inputs) -> float
    skip: Callable | None = None                # (point, device) -> reason or None
    modes: tuple[str, ...] = ("warm",)
    precision: Callable = lambda point: ""     # (point) -> the compute roof that bounds it ("bf16"), "" for none
    memory_factor: float = 3.0                  # peak bytes needed / working set (inputs + f64 reference)
    memory: Callable | None = None              # (point) -> peak bytes of its inputs, outputs, reference and
                                                # check beyond shared pools (default working set x memory_factor)
    pools: Callable | None = None               # (point, torch_device) -> {pool key: bytes}: shared inputs
                                                # (bench/measure/memory.py) it uses, held at that size across
                                                # points (rule 16)
    release: Callable | None = None             # () -> None: drops what the op caches across points; called
                                                # once no later point of the plan is this op's (rule 16)
    min_budget_s: float = 0.0                   # a point's budget is at least this (a search whose large
                                                # points need more than a quick run's 0.1 s)
    quick_min_budget_s: float | None = None     # ... in a quick run (None: min_budget_s)
    sweep_stop: Callable | None = None          # (history [(point, rate)], device) -> why the sweep grows no
                                                # further, or None: later sizes of that sweep are skipped
    cost_group: str = ""                        # ops whose times predict each other (default: the family)
    columns: Callable | None = None             # (point) -> {axis column: value} beyond bench.results.axis_columns
    write_bytes: Callable | None = None         # (point) -> int: the part of bytes that is written (the
                                                # outputs); the rest is read (ARCHITECTURE.md, rule 12)

    def budget_floor(self, quick: bool) -> float:
        """Return the least budget one of this op's points gets (min_budget_s, or
        quick_min_budget_s in a quick run where given)."""
        return self.quick_min_budget_s if quick and self.quick_min_budget_s is not None else self.min_budget_s

    def peak_bytes(self, point) -> int:
        """Return the bytes a point holds at its peak beyond shared pools (ARCHITECTURE.md, rule 16)."""
        if self.memory is not None:
            return int(self.memory(point))
        return int(self.working_set(point) * self.memory_factor)

    def pool_bytes(self, point, torch_device) -> dict:
        """Return {pool key: bytes} of the shared pools a point uses on torch_device (none by default)."""
        return dict(self.pools(point, torch_device)) if self.pools is not None else {}

    def points(self, device, quick: bool = False) -> list[Point]:
        """Return the product of every axis's values, in axis order; none for an op without
        axes (one whose points come from elsewhere, such as a model's layers)."""
        if not self.axes:
            return []
        names = [a.name for a in self.axes]
        return [dict(zip(names, combo)) for combo in
                itertools.product(*(a.expand(device, quick) for a in self.axes))]


@dataclass(frozen=True)
class LaunchContext:
    """What a launcher may know besides its inputs: the point, the device (a DeviceInfo, or
    None outside a run), the mode the point is timed in (autotuning times candidates in the
    same mode) and whether the run is quick (fewer tuning candidates)."""
    point: dict = field(default_factory=dict)
    device: object = None
    mode: str = "warm"
    quick: bool = False
    flush: Callable | None = None   # evicts the last-level cache (cold tuning)
    verify: Callable | None = None  # (fn) -> None or why fn's result fails the gate (gate.verifier): a tuner
                                    # checks each winning candidate with it before keeping it


@dataclass(frozen=True)
class Impl:
    op: str
    name: str                                   # "torch", "triton"
    backend: str                                # "torch" or "triton": decides device support
    launcher: Callable                          # (inputs, LaunchContext) -> zero-argument callable returning the output
    skip: Callable | None = None                # (point, device) -> reason or None
    doc: str = ""
    quick_dtypes: tuple = ()                    # in quick runs, only these dtypes (empty: all)
    bytes: Callable | None = None               # (point) -> int: this impl's traffic when its data
                                                # layout moves more than the op's formula (default op.bytes)
    tuning: Callable | None = None              # (inputs, ctx) -> bench.ops._tune.Tuning, for impls that tune
                                                # (bench/aot/table.py compiles its candidates ahead of time)

    @property
    def id(self) -> str:
        return f"{self.op}/{self.name}"


@dataclass
class Registry:
    ops: dict = field(default_factory=dict)
    impls: dict = field(default_factory=dict)

    def add_op(self, op: Op) -> Op:
        if op.name in self.ops:
            raise RegistryError(f"op '{op.name}' is already registered.", "op_registered")
        self.ops[op.name] = op
        return op

    def add_impl(self, impl: Impl) -> Impl:
        if impl.op not in self.ops:
            raise RegistryError(f"impl '{impl.id}' names op '{impl.op}', which is not registered.", "op_unregistered")
        if impl.id in self.impls:
            raise RegistryError(f"impl '{impl.id}' is already registered.", "impl_registered")
        self.impls[impl.id] = impl
        return impl

    def ordered(self) -> list[Op]:
        """Return the ops in run order: FAMILY_ORDER first (bandwidth roofs before the
        kernels placed under them), then registration order."""
        rank = {f: i for i, f in enumerate(FAMILY_ORDER)}
        ops = list(self.ops.values())
        return sorted(ops, key=lambda op: (rank.get(op.family, len(rank)), ops.index(op)))

    def impls_of(self, op_name: str) -> list[Impl]:
        return [i for i in self.impls.values() if i.op == op_name]

    def select(self, only: list[str] | None) -> list[tuple[Op, list[Impl]]]:
        """Return (op, impls) pairs that match any of the names in only (all when empty).

        A name matches an op ("stream.copy"), a family ("stream"), an impl id
        ("stream.copy/triton") or an impl name across ops ("triton"). An unknown name
        raises RegistryError listing what exists.
        """
        if not only:
            return [(op, self.impls_of(op.name)) for op in self.ordered()]
        families = {op.family for op in self.ops.values()}
        impl_names = {i.name for i in self.impls.values()}
        for name in only:
            if not (name in self.ops or name in families or name in self.impls or name in impl_names):
                raise RegistryError(
                    f"unknown op or impl '{name}'{did_you_mean(name, [*families, *self.ops, *impl_names])}: "
                    f"choose from families {', '.join(sorted(families))}, "
                    f"ops {', '.join(self.ops)}, or impls {', '.join(sorted(impl_names))} "
                    f"(or an impl id such as {next(iter(self.impls), 'op/impl')}).", "unknown_name")
        chosen = []
        for op in self.ordered():
            op_hit = op.name in only or op.family in only
            impls = [i for i in self.impls_of(op.name)
                     if op_hit or i.id in only or i.name in only]
            # an impl-name filter alone ("triton") keeps every op that has that impl
            if impls:
                chosen.append((op, impls))
        return chosen


def geometric(lo: int, hi: int, per_octave: int = 2) -> list[int]:
    """Return sizes from lo to at least hi, growing by 2**(1/per_octave), rounded to 4 KiB."""
    steps = math.ceil(per_octave * math.log2(hi / lo) - 1e-9)
    out = []
    for i in range(steps + 1):
        v = int(round(lo * 2 ** (i / per_octave) / 4096)) * 4096
        if not out or v > out[-1]:
            out.append(max(v, 4096))
    return out


FAMILY_ORDER = ("stream", "probe", "fma", "gemm", "gemv", "attention", "transfer")
# Modules that add ops to a family beyond bench/ops/<family>.py, imported right after it
FAMILY_EXTRAS = {"gemm": ("gemm_fp4",)}
REGISTRY = Registry()


def load_all() -> Registry:
    """Import every op family so that it registers itself; return the registry."""
    # the order of registration is the order of a run: bandwidth roofs first
    for family in FAMILY_ORDER:
        for module in (family,) + FAMILY_EXTRAS.get(family, ()):
            importlib.import_module(f"bench.ops.{module}")
    return REGISTRY
