"""The targets of the ahead-of-time compile (bench/aot/table.py): each arch, the device facts its
sweeps depend on (SM or CU count, last-level cache), its shared-memory (LDS) limit, and the
fake DeviceInfo a plan is made for. NVIDIA sm_80 to sm_100 and AMD gfx942 (MI300X, MI325X)
and gfx950 (MI355X): Triton's wheel compiles for both without a GPU or a ROCm install."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from bench import precisions
from bench.hw.device import CacheLevel, DeviceInfo
from bench.ops._tune import SMEM_LIMIT

KERNEL_MODULES = ("kernels.stream", "kernels.gemm", "kernels.gemm_tma", "kernels.gemm_fp4", "kernels.gemv",
                  "kernels.attention", "kernels.probes", "kernels.fma")
FAMILIES = ("stream", "gemm", "gemv", "attention", "probe", "fma")


@dataclass(frozen=True)
class Arch:
    """A compile target and the device facts its sweeps depend on.

    cc is what torch reports as the compute capability x 10: 90 for sm_90; on ROCm torch
    reports the gfx version's digits (gfx942: 9.4, gfx950: 9.5), so an AMD plan takes the
    same paths a ROCm run would. lds_bytes is the shared memory (LDS) one workgroup may use
    where it is not in bench/ops/_tune.SMEM_LIMIT (AMD)."""
    cc: int
    sms: int                # SMs or CUs of the example part (sets decode's split count)
    l2_bytes: int           # L2 of the example part (sets the stream sweep)
    example: str
    backend: str = "cuda"   # Triton's backend: "cuda" or "hip"
    gfx: str | None = None  # the AMD target name (gfx942)
    lds_bytes: int | None = None
    l3_bytes: int | None = None  # AMD's Infinity Cache (MALL), the last level before HBM

    @property
    def smem_limit(self) -> int:
        return self.lds_bytes or SMEM_LIMIT[(self.cc // 10, self.cc % 10)]

    @property
    def amd(self) -> bool:
        return self.backend == "hip"

    @property
    def target(self) -> tuple:
        """Return Triton's GPUTarget fields (backend, arch, warp size)."""
        return ("hip", self.gfx, 64) if self.amd else ("cuda", self.cc, 32)

    @property
    def unit(self) -> str:
        return "CUs" if self.amd else "SMs"


ARCHS = {
    "sm_80": Arch(80, 108, 40 * 2**20, "A100"),
    "sm_86": Arch(86, 84, 6 * 2**20, "RTX 3090"),
    "sm_89": Arch(89, 142, 96 * 2**20, "L40S"),
    "sm_90": Arch(90, 132, 50 * 2**20, "H100 SXM / H200"),
    "sm_100": Arch(100, 148, 126 * 2**20, "B200"),
    # CDNA3: 64 KiB LDS per workgroup; 4 MiB L2 per XCD x 8, 256 MiB Infinity Cache
    "gfx942": Arch(94, 304, 32 * 2**20, "MI300X", "hip", "gfx942", 64 * 2**10, 256 * 2**20),
    # CDNA4: 160 KiB LDS per CU
    "gfx950": Arch(95, 256, 32 * 2**20, "MI355X", "hip", "gfx950", 160 * 2**10, 256 * 2**20),
}

# Torch dtypes as Triton names them in a signature.
# A precision's element: its row's in bench/precisions.py; the other element types kernels take beside.
TRITON_TYPE = {getattr(torch, p.storage): p.triton for p in precisions.ROWS if p.storage and p.triton}
TRITON_TYPE.update({torch.uint8: "u8", torch.int16: "i16", torch.int64: "i64", torch.bool: "i1"})
# Constexprs that follow from the dtype, not the tile: left out of the configuration label.
DTYPE_CONSTEXPRS = {"FMT", "GROUP", "INT_ACC", "INPUT_PRECISION", "HAS_SCALE", "PRECISION", "DECODE", "MANT", "BIAS"}


def fake_device(arch: str):
    """Return a DeviceInfo of a GPU of this arch, for the sweeps and the skips."""
    a = ARCHS[arch]
    caches = (CacheLevel("l2", a.l2_bytes),) + ((CacheLevel("l3", a.l3_bytes),) if a.l3_bytes else ())
    return DeviceInfo(kind="cuda", torch_device="meta", name=f"{a.example} ({arch}, ahead of time)",
                      memory_bytes=None, compute_units=a.sms, compute_unit_kind=a.unit, caches=caches,
                      compute_capability=f"{a.cc // 10}.{a.cc % 10}", vendor="amd" if a.amd else "nvidia",
                      extra={"gfx": a.gfx} if a.amd else {})

