"""A tiny op family for testing the runner and results without real kernels, measurements.csv
rows of known rates, and finished run folders of known roofs written through roofs.json and
run.json only (a thousand in seconds)."""
import json
from pathlib import Path

import numpy as np
import torch

import bench.results as results
from bench.hw.device import DeviceInfo
from bench.measure.registry import Axis, Impl, Op, Registry
from bench.results import RunWriter, write_roofs
from bench.run.session import run_meta
from roofs.reports.fleet import gather, write_fleet


def toy_registry(impls=None, working_set=lambda p: p["n"] * 4, skip=None, flops=lambda p: p["n"],
                 sizes=(1000, 4000)) -> Registry:
    """Return a Registry with op 'toy.double' (b = 2 a over n fp32 elements for n in sizes;
    bytes 8n, flops n unless given) and the given impls (name -> launcher); by default one
    correct torch impl."""
    reg = Registry()
    reg.add_op(Op(
        name="toy.double", family="toy", doc="b = 2 a",
        axes=(Axis("dtype", ("float32",)), Axis("n", sizes, quick_values=sizes[:1])),
        make_inputs=lambda p, d: {"a": torch.randn(p["n"], device=d), "b": torch.empty(p["n"], device=d)},
        reference=lambda x: 2 * x["a"].double(),
        flops=flops, bytes=lambda p: 8 * p["n"], working_set=working_set,
        describe=lambda p: (p["n"], f"({p['n']},)"), tolerance=lambda p: 1e-6,
        outputs=("b",), skip=skip))
    impls = impls or {"torch": lambda x, ctx: (lambda: torch.mul(x["a"], 2, out=x["b"]))}
    for name, launcher in impls.items():
        reg.add_impl(Impl("toy.double", name, "triton" if name.startswith("triton") else "torch", launcher))
    return reg


def measured_row(op, impl, dtype, ws, rate, mode="warm", kind="bw", samples=20, spread=0.02, flag="", clock=None,
                 power=None, joules=None, stop=None, read_share=None):
    """Return one measurements.csv row with a median of 1 ms: rate is GB/s (kind bw) or GFLOP/s;
    its p20 and p80 times spread / 2 either side; read_share (a stream row): the share of its
    bytes read (1 a read, 0 a write, 1/2 a copy), the rest written; None leaves them unknown."""
    family = "stream" if kind == "bw" else "gemm"
    work = rate * 1e6  # per 1 ms call
    pid = f"{op}/{impl}[dtype={dtype},ws={ws}]@{mode}"
    return {"point_id": pid, "op": op, "family": family, "impl": f"{op}/{impl}", "dtype": dtype, "shape": str(ws),
            "working_set_bytes": ws, "flops": work if kind == "gemm" else 0.0, "bytes": work if kind == "bw" else ws,
            "mode": mode, "median_ms": 1.0, "p20_ms": 1.0 - spread / 2, "p80_ms": 1.0 + spread / 2,
            "samples": samples, "stop": stop or ("window" if mode == "sustained" else "converged"), "status": "ok",
            "gbps": rate if kind == "bw" else ws / 1e6, "gflops": rate if kind == "gemm" else None,
            "precision": dtype if kind == "gemm" else "", "flag": flag, "clock_mhz": clock, "power_w": power,
            "joules": joules, "intensity": None, "backend": impl.split("_")[0],
            "read_bytes": None if read_share is None else read_share * work,
            "write_bytes": None if read_share is None else (1 - read_share) * work}


# the measured roofs write_run gives a run: name -> (kind, value, unit)
ROOFS = {"hbm": ("bandwidth", 4000.0, "GB/s"), "l2": ("bandwidth", 9000.0, "GB/s"),
         "fp32": ("compute", 50000.0, "GFLOP/s"), "bf16": ("compute", 700000.0, "GFLOP/s")}


def _moved(passes, name: str):
    """Return a roof's pass ratio from write_run's passes: the one ratio, the roof's in a dict, or None."""
    return passes.get(name) if isinstance(passes, dict) else passes


def write_run(path: Path, host: str, uuid: str, scale: float, rng=None, model="NVIDIA H200", clock=1980.0,
              power=700.0, status="complete", method=None, start=None, driver="560.35", interval=None,
              software=None, passes=None):
    """Write one finished run folder whose every roof is ROOFS' value x scale (x up to 1% noise
    from rng), each with the interval value x (1 -/+ interval) when interval is given (a
    fraction), its revisit passes from value / passes to value when passes (a ratio, or one per
    roof name in a dict) is, and a
    datasheet fp32 reference beside them; software adds to run.json's; method stands for the
    method version that measured them and derived their roofs."""
    dev = DeviceInfo("cuda", "cuda:0", model, 2**37, 132, "SMs", (), max_clock_mhz=1980.0, host=host, uuid=uuid,
                     software={"driver": driver, **(software or {})},
                     extra={"power_limit_w": power, "state": {"app_sm_clock_mhz": clock, "ecc_mode":
                            {"current": True, "pending": True}, "pcie_gen": 5, "pcie_gen_max": 5,
                            "pcie_width": 16, "pcie_width_max": 16}})
    w = RunWriter(path, run_meta(dev, {"quick": True}, "device"))
    if method is not None:
        w.meta["method_version"] = method
    if start is not None:
        w.meta["start_utc"] = start
    w.finish(status)
    roofs = []
    for name, (kind, value, unit) in ROOFS.items():
        v = value * scale * (1 + (rng.uniform(-0.01, 0.01) if rng is not None else 0.0))
        roofs.append({"kind": kind, "name": name, "value": v, "unit": unit, "source": "measured",
                      "extra": {"burst": v, "sustained": {"value": 0.97 * v, "clock_mhz": clock},
                                **({"passes": [v / moved, v]} if (moved := _moved(passes, name)) else {})},
                      **({"interval": [v * (1 - interval), v * (1 + interval)]} if interval is not None else {})})
    roofs.append({"kind": "compute", "name": "fp32", "value": 67000.0, "unit": "GFLOP/s", "source": "datasheet"})
    out = write_roofs(path, roofs)
    if method is not None:  # a run of another method derived its roofs by that method too
        doc = json.loads(out.read_text())
        doc["derived_by"]["method_version"] = method
        out.write_text(json.dumps(doc))


# The fleets of a thousand synthetic H200s that tests/test_fleet.py and tests/test_check.py read:
# the index of the slow device in the first; the second's nodes of 8 GPUs, each roof within 1%
# of ROOFS' value with +/-1% intervals, and two nodes outside it.
SLOW_OF_A_THOUSAND = 537


def write_thousands(top: Path) -> None:
    """Write top/slow-one/array (a thousand runs, SLOW_OF_A_THOUSAND 15% slow with its clock held
    down) and top/check: array (a thousand within 1%), its fleet report (fleet/), and the nodes
    slow (15% slow, clock held down) and healthy. Run in a process of its own (conftest.py's
    thousands): seconds of CPU, and the commit recorded is abc1234."""
    results.git_commit = lambda: "abc1234"  # this process's own: a thousand folders, one commit
    for fleet, seed, slow, extra in (("slow-one", 30, SLOW_OF_A_THOUSAND, {}), ("check", 36, None, {"interval": 0.01})):
        rng = np.random.default_rng(seed)
        for i in range(1000):
            node, gpu = divmod(i, 8)
            write_run(top / fleet / "array" / f"job{node}" / f"gpu{gpu}", f"node{node:03d}", f"GPU-{i:04d}",
                      0.85 if i == slow else 1.0, rng, clock=1600.0 if i == slow else 1980.0, **extra)
    write_run(top / "check" / "slow", "new1", "GPU-slow", 0.85, interval=0.01, clock=1600.0)
    write_run(top / "check" / "healthy", "new2", "GPU-ok", 1.0, np.random.default_rng(1), interval=0.01)
    write_fleet(gather([top / "check" / "array"]), top / "check" / "fleet")
