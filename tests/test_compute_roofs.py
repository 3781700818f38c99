"""Compute roofs (ARCHITECTURE.md, rule 10) on synthetic rows: torch's elementwise FMA chains set
only their "<p>.elementwise" lines, in any run (full, quick, --only fma, interrupted)."""
import pandas as pd

from roofs.analysis.bounds import point_bound
from roofs.analysis.compute import compute_notes, compute_roofs
from roofs.analysis.roofline import Roof, Roofline


def row(family, dtype, gflops, k=1, stop="converged", status="ok"):
    """A GEMM (numpy) or a torch FMA chain of length k, converged unless told."""
    op = "gemm.square" if family == "gemm" else "fma.chains"
    impl = f"{op}/{'numpy' if family == 'gemm' else 'torch'}"
    return {"family": family, "op": op, "impl": impl, "dtype": dtype, "precision": dtype, "shape": f"k={k}",
            "point_id": f"{impl}[{dtype},{k}]", "working_set_bytes": 2**20, "status": status,
            "gflops": gflops if status == "ok" else None, "stop": stop, "samples": 20 if stop == "converged" else 2,
            "median_ms": 1.0, "p20_ms": 0.9, "p80_ms": 1.1, "flag": ""}


def test_only_fma_sets_no_precision_roof_and_says_so_once():
    # `--only fma` on a CPU: torch's chains at k = 1, 8, 64 in fp32 and fp64 (fp64's k=1 chain at 2.34
    # GFLOP/s, its best 15.4): before, fp64's roof was 7.6 from a chain; now only the lines exist
    df = pd.DataFrame([row("fma", "fp64", g, k) for k, g in ((1, 2.34), (8, 7.6), (64, 15.4))]
                      + [row("fma", "fp32", g, k) for k, g in ((1, 4.1), (8, 14.0), (64, 30.2))])
    roofs = compute_roofs(df)
    got = {r.name: r for r in roofs}
    assert set(got) == {"fp64.elementwise", "fp32.elementwise"}
    assert got["fp64.elementwise"].value == 15.4 and got["fp32.elementwise"].value == 30.2
    assert all(r.extra == {"unit": "elementwise", "line_of": r.name.split(".")[0]} for r in roofs)
    model = Roofline(roofs)
    assert model.compute("fp64") is None and model.compute("fp32") is None and model.compute() is None
    notes = compute_notes(df, roofs)
    assert len(notes) == 2 and all(n.count("no compute roof") == 1 for n in notes)
    assert notes[0] == ("fp64: no compute roof: no GEMM of it ran, and its FMA chains (torch's elementwise passes) "
                        "set only the fp64.elementwise line, never a unit's roof: its points have no compute bound")
    # its points: the bandwidth bound alone, 40 GB/s x 2 FLOP/B = 80, never a chain's 15.4
    with_dram = Roofline(roofs + [Roof("bandwidth", "dram", 40.0, "GB/s")])
    _, _, attainable, _ = point_bound(with_dram, 2**30, "warm", 2.0, "fp64", [], "dram")
    assert attainable == 80.0


def test_interrupted_run_keeps_chains_off_a_precision_without_a_gemm():
    # Ctrl-C after fp32's GEMMs and every chain, before fp64's GEMMs (their rows never written):
    # fp32's roof is its GEMM, fp64 has none, and neither is bounded via a chain
    df = pd.DataFrame([row("gemm", "fp32", 198.9), row("fma", "fp32", 30.2, 64),
                       row("fma", "fp64", 2.34, 1), row("fma", "fp64", 15.4, 64)])
    got = {r.name: r for r in compute_roofs(df)}
    assert set(got) == {"fp32", "fp32.elementwise", "fp64.elementwise"}
    assert got["fp32"].value == 198.9 and got["fp32"].extra == {"unit": "gemm"}
    assert [n.split(":")[0] for n in compute_notes(df, list(got.values()))] == ["fp64"]


def test_a_chain_never_stands_in_for_unsteady_gemms_nor_takes_a_wider_path():
    # fp64's GEMM ran but did not converge: no roof from its (steady) chain, and the note counts the
    # GEMM rows alone; fp32 ran only chains: no roof, not even "via fp64" (fp32 has a unit: its chains ran)
    df = pd.DataFrame([row("gemm", "fp64", 98.9, stop="budget"), row("fma", "fp64", 15.4, 64),
                       row("fma", "fp32", 30.2, 64), row("gemm", "bf16", 422.6)])
    roofs = compute_roofs(df)
    got = {r.name: r for r in roofs}
    assert set(got) == {"bf16", "fp64.elementwise", "fp32.elementwise"}
    assert compute_notes(df, roofs)[0] == "fp64: no compute roof: of its 1 GEMM rows, 1 did not converge within the " \
                                          "budget (a larger --budget helps)"
    # with a steady fp64 GEMM, an fp32 that ran only chains still gets no roof through it
    steady = pd.DataFrame([row("gemm", "fp64", 98.9), row("fma", "fp32", 30.2, 64)])
    assert {r.name for r in compute_roofs(steady)} == {"fp64", "fp32.elementwise"}


def test_full_run_keeps_the_elementwise_line_beside_the_gemm_roof():
    df = pd.DataFrame([row("gemm", "fp64", 98.9), row("fma", "fp64", 150.0, 64)])  # even a chain faster than GEMM
    got = {r.name: r for r in compute_roofs(df)}
    assert got["fp64"].value == 98.9 and got["fp64.elementwise"].value == 150.0
    assert Roofline(list(got.values())).compute().name == "fp64"  # the highest roof is a precision's, not a line


def test_an_interrupted_run_whose_chains_never_steadied_says_so():
    # Ctrl-C 30 s into a loaded quick run: two chains, neither converged nor steady
    df = pd.DataFrame([row("fma", "fp64", 2.34, 1, stop="budget"), row("fma", "fp64", 7.6, 8, stop="budget")])
    roofs = compute_roofs(df)
    assert roofs == []
    assert compute_notes(df, roofs) == [
        ("fp64: no compute roof: no GEMM of it ran, and its FMA chains (torch's elementwise passes) set no roof, not "
        "even the fp64.elementwise line (none steady), never a unit's roof: its points have no compute bound")]
