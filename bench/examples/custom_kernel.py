"""Place your own kernels on this device's roofline.

    python -m bench.examples.custom_kernel [RUN_DIR]

With a run folder, its roofs are used and the points are added to its chart and report, in
a derived folder beside the run (the run's own files are never rewritten);
without one, roofs are measured on the spot (quick).
"""
import sys

import torch

from bench import api


@api.kernel(flops=lambda n: 2 * n, bytes=lambda n: 3 * 4 * n, shapes=[2**16, 2**20, 2**24], precision="fp32",
            make_inputs=lambda n, dev: (torch.randn(n, device=dev), torch.randn(n, device=dev),
                                        torch.empty(n, device=dev)),
            reference=lambda x, y, out: 2 * x.double() + y.double())
def axpy(x, y, out):
    """out = 2 x + y: 2 FLOPs per element; x and y read, out written (3 arrays of fp32).
    The output is preallocated: allocating it inside the call would time the allocator."""
    return torch.add(y, x, alpha=2, out=out)


def main(run_dir=None):
    if not run_dir:
        print("measuring this device's roofs first (api.quick_roofs: the quick run's stream, cache and GEMM points)")
    roofs = api.roofs_from(run_dir) if run_dir else api.quick_roofs()
    results = axpy.sweep(roofs=roofs)
    # a torch matmul measured directly, with its counts as numbers
    a, b = torch.randn(512, 512), torch.randn(512, 512)
    results.append(api.measure(lambda: a @ b, flops=2 * 512**3, bytes=3 * 512 * 512 * 4, name="matmul512",
                               shape="512x512x512", precision="fp32", roofs=roofs, device="cpu"))
    for m in roofs.missing:   # each roof it could not set, and why (quick_roofs also warned of it)
        print(f"no {m}")
    for r in results:
        if r.status != "ok":
            print(f"{r.name:10} {r.shape:>12}  {r.status}: {r.reason}")
            continue
        band = r.pct_of_attainable_band   # over its bound's band, where the roofs have intervals (rule 17)
        span = f", {band[0]:.1f}-{band[1]:.1f}%" if band else ""
        where = (f"{r.pct_of_attainable:5.1f}% of attainable{span} ({r.bound}-bound)" if r.pct_of_attainable
                 else f"no bound: {r.bound_note}" if roofs else "no bound: no roof could be set (see above)")
        print(f"{r.name:10} {r.shape:>12}  {r.gflops:8.2f} GFLOP/s  {r.gbps:7.2f} GB/s  I={r.intensity:6.3f}  {where}")
        if r.above_bound:
            print(f"  FLAG {r.name} {r.shape}: {r.above_bound}")
    if run_dir:
        out = api.add_to_run(run_dir, results)  # a derived folder beside the run: its own files stay as they are
        print(f"added to {run_dir}, in {out}: see roofline.png and report.md there")


if __name__ == "__main__":
    main(*sys.argv[1:2])
