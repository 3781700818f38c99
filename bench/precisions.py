"""Every precision the suite knows, one row each: the one place a precision's facts live.

A row holds its spellings (the short name every record uses, and torch's name where a user may
type either), how it is stored (torch dtypes of an element and of a GEMM's output), the gate's
tolerance, the wider precisions its values convert to exactly (rule 10), whether it counts
operations (an integer: GOP/s, compared exactly), Triton's names for it, its colour and marker
on every chart, where the GEMM family measures it and what a device needs for it, and, on a CPU,
the units that run it and their width against fp32's FMA datapath.

Everything else reads this table: bench/util's spellings and itemsize, the gate's tolerances,
the GEMM family's dtype axis, the derivation's exact wider paths and integer roofs, the CPU's
units and computed peaks, the AOT signature types, the charts' colours and markers.
tests/test_precisions.py fails when a precision appears anywhere without a row here.

A leaf module: it imports nothing of the project, so every layer reads it.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Precision:
    name: str                     # the short name every record uses: "bf16"
    colour: str                   # its colour on every chart (never red: red is the flag)
    marker: str                   # its marker on every chart
    long: str = ""                # its other spelling, torch's name ("bfloat16"); "" where it has none
    storage: str = ""             # torch dtype of a stored element ("float32" for tf32, "uint8" for packed fp4)
    out: str = ""                 # torch dtype of a GEMM's output at this precision
    tolerance: float | None = None  # the gate's relative error against the float64 reference (None: no op checks it)
    exact_in: tuple = ()          # wider precisions its values convert to exactly: their GEMM does its math (rule 10)
    integer: bool = False         # counts operations (GOP/s); its results compare exactly
    triton: str = ""              # Triton's name of a stored element in a kernel signature ("fp8e4nv")
    scaled_format: str = ""       # tl.dot_scaled's format string of its values ("e2m1"); "" where none
    gemm: str = ""                # the GEMM op measuring it: "gemm" (square, skinny, search), "gemm.fp4"; "" none
    min_cc: tuple | None = None   # the CUDA compute capability whose tensor cores run it
    cpu_reason: str = ""          # why a CPU runs no GEMM of it ("" when a CPU has it)
    cpu_may_lack: bool = False    # a CPU may have no unit for it: its GEMMs then convert on every call
    cpu_flags: tuple = ()         # the CPU flags naming a vector unit for it
    cpu_rate: int = 0             # that unit's operations per clock against fp32's FLOP on the same datapath
    cpu_unit: str = ""            # what that unit does
    amx_flag: str = ""            # the flag of an AMX tile unit (TMUL) for it
    amx_per_clock: int = 0        # one TMUL's operations per clock (Intel's optimization manual)
    also: tuple = ()              # other names records give it (the GEMV's weight format "fp8")
    doc: str = ""

    @property
    def scaled(self) -> bool:
        """Return whether its GEMM inputs carry per-tensor scales (fp8)."""
        return self.storage.startswith("float8_")


ROWS = (
    Precision("fp64", "tab:gray", "D", long="float64", storage="float64", out="float64", tolerance=1e-12,
              triton="fp64", gemm="gemm", doc="IEEE fp64"),
    Precision("fp32", "tab:blue", "o", long="float32", storage="float32", out="float32",
              tolerance=1e-5,  # TF32 off
              exact_in=("fp64",), triton="fp32", gemm="gemm", doc="IEEE fp32 products, TF32 off"),
    Precision("tf32", "tab:cyan", "h", storage="float32", out="float32",
              tolerance=5e-3,  # a 10-bit mantissa's products
              exact_in=("fp32", "fp64"), triton="fp32", gemm="gemm", min_cc=(8, 0),
              cpu_reason="TF32 is a GPU tensor-core mode; a CPU has no TF32 math",
              doc="fp32 tensors, TF32 tensor-core products"),
    Precision("fp16", "tab:orange", "s", long="float16", storage="float16", out="float16", tolerance=5e-3,
              exact_in=("fp32", "fp64"), triton="fp16", gemm="gemm", cpu_may_lack=True,
              cpu_flags=("avx512_fp16", "asimdhp"), cpu_rate=2, cpu_unit="fp16 FMA",
              amx_flag="amx_fp16", amx_per_clock=1024, doc="fp16 in and out, fp32 accumulation"),
    Precision("bf16", "tab:brown", "^", long="bfloat16", storage="bfloat16", out="bfloat16", tolerance=1.5e-2,
              exact_in=("fp32", "fp64"), triton="bf16", gemm="gemm", cpu_may_lack=True,
              cpu_flags=("avx512_bf16", "bf16"), cpu_rate=2, cpu_unit="bf16 dot products",
              amx_flag="amx_bf16", amx_per_clock=1024, doc="bf16 in and out, fp32 accumulation"),
    Precision("fp8e4m3", "tab:purple", "v", storage="float8_e4m3fn", out="bfloat16",
              tolerance=1.5e-2,  # fp8 inputs, bf16 output: the output's rounding dominates
              exact_in=("fp16", "bf16", "fp32", "fp64"), triton="fp8e4nv", scaled_format="e4m3", gemm="gemm",
              min_cc=(8, 9), cpu_may_lack=True, also=("fp8",),
              doc="e4m3 in, per-tensor scales, fp32 accumulation, bf16 out"),
    Precision("fp8e5m2", "tab:pink", "v", storage="float8_e5m2", out="bfloat16", tolerance=1.5e-2,
              exact_in=("fp16", "bf16", "fp32", "fp64"), triton="fp8e5", scaled_format="e5m2", gemm="gemm",
              min_cc=(8, 9), cpu_may_lack=True, doc="e5m2 in, per-tensor scales, fp32 accumulation, bf16 out"),
    Precision("int8", "tab:green", "P", long="", storage="int8", out="int32",
              tolerance=1e-12,  # int32 accumulation is exact; the float64 comparison is not quite
              integer=True, triton="i8", gemm="gemm",
              cpu_flags=("avx512_vnni", "avx_vnni", "asimddp"), cpu_rate=4, cpu_unit="int8 dot products",
              amx_flag="amx_int8", amx_per_clock=2048, doc="int8 in, int32 accumulation and out"),
    Precision("int32", "darkgreen", "p", storage="int32", tolerance=0.0,  # integer results are compared exactly
              integer=True, triton="i32", doc="int32 elements (stream kernels)"),
    Precision("int4", "tab:olive", "X", integer=True, doc="int4 weights (the GEMV's weight-only format)"),
    Precision("mxfp4", "teal", "<", storage="uint8", out="bfloat16",
              tolerance=1.5e-2,  # fp4 products are exact in fp32 accumulation: C's bf16 rounding is what is left
              triton="u8", scaled_format="e2m1", gemm="gemm.fp4", min_cc=(10, 0),
              cpu_reason="a CPU has no fp4 matrix unit", doc="e2m1 values, one e8m0 scale per 32 (OCP microscaling)"),
    Precision("nvfp4", "darkcyan", ">", storage="uint8", out="bfloat16", tolerance=1.5e-2,
              triton="u8", scaled_format="e2m1", gemm="gemm.fp4", min_cc=(10, 0),
              cpu_reason="a CPU has no fp4 matrix unit", doc="e2m1 values, one e4m3 scale per 16 (NVIDIA)"),
    # fp6 products are exact in fp32 accumulation, as fp4's: C's bf16 rounding is what is left
    Precision("fp6e2m3", "goldenrod", "d", storage="uint8", out="bfloat16", tolerance=1.5e-2,
              triton="u8", scaled_format="e2m3", gemm="gemm.fp6", min_cc=(10, 0),
              cpu_reason="a CPU has no fp6 matrix unit", doc="e2m3 values, one e8m0 scale per 32 (OCP MXFP6)"),
    Precision("fp6e3m2", "darkkhaki", "8", storage="uint8", out="bfloat16", tolerance=1.5e-2,
              triton="u8", scaled_format="e3m2", gemm="gemm.fp6", min_cc=(10, 0),
              cpu_reason="a CPU has no fp6 matrix unit", doc="e3m2 values, one e8m0 scale per 32 (OCP MXFP6)"),
)
BY_NAME = {p.name: p for p in ROWS}
assert len(BY_NAME) == len(ROWS), "a precision has two rows"


def row(name: str) -> Precision:
    """Return the row of a precision in either spelling, case-blind ("Float32" -> fp32's row);
    KeyError for one the table lacks."""
    return BY_NAME[short_name(name)]


def short_name(name: str) -> str:
    """Return the short name of either spelling, case-blind ("Float32" -> "fp32"); a name the
    table does not know, lower-cased."""
    name = str(name).lower()
    return next((p.name for p in ROWS if p.long and name == p.long), name)


def names(**where) -> tuple[str, ...]:
    """Return the short names of the rows whose fields equal where's values, in table order
    (names(gemm="gemm"), names(integer=True))."""
    return tuple(p.name for p in ROWS if all(getattr(p, k) == v for k, v in where.items()))


def chart_names() -> dict[str, Precision]:
    """Return every name a chart may meet for a row: its short name and the names records also give it."""
    return {n: p for p in ROWS for n in (p.name, *p.also)}
