"""Ahead-of-time compiles for sm_90, sm_80, sm_100 (Blackwell), gfx942 (AMD MI300X) and gfx950 (MI355X) without
a GPU (bench/aot/table.py): every
configuration a quick run launches fits shared memory, the shared-memory models agree with
the compiler (GEMM exactly, the others never below), nothing chosen spills more than
SPILL_LIMIT_BYTES, and what cannot compile for an arch is skipped before it is compiled.
Also: prune() on hand-worked configurations, the launch specialization rules against
Triton's own, and 64-bit offsets in the attention and GEMV kernels at sizes past 2**31.

On gfx942 the 64 KiB of LDS prunes the Hopper-sized tiles, and the kernels whose candidates
all exceed it run their fallback configurations instead.

The plans' compiles run in a process pool (over a minute of CPU per arch, sm_90's too; conftest.py's
aot_outcomes); the tests that read them are marked aot_arches and run with `--aot-arches` (.ci/run's
second step). The README's test command compiles for sm_90 the launches past 2**31 (offset_compiles,
marked slow); everything else here is CPU-only and instant."""
import re
from collections import Counter

import pytest
import torch
from conftest import AOT_ARCHES, session_run

from bench.aot import plan as aot_plan
from bench.aot import pool as aot_pool
from bench.aot import table as aot
from bench.aot import targets as aot_targets
from bench.aot.pool import amd_resources
from bench.ops._tune import QUICK_CANDIDATES, launched, prune
from bench.ops.gemm_fp4 import FP6_ARCH, FP6_FORMATS
from kernels.gemm import TileConfig, smem_bytes

# A configuration may spill at most this many bytes per thread (ptxas's spill stores plus
# spill loads). Spilled values live in local memory, cached in L1: a few words cost a few
# extra L1 accesses per loop step, noise beside the tile's own loads, while hundreds of
# bytes (what the old int4 GEMV tiles at batch 256 spilled: 764 to 5,060) turn the main
# loop into local-memory traffic. 64 bytes is 8 registers stored and reloaded.
SPILL_LIMIT_BYTES = 64
# Kernels whose launcher prunes by a shared-memory model; GEMM's model is exact.
MODELLED = {"matmul_kernel", "tma_matmul_kernel", "gemv_tile_kernel", "attn_fwd_kernel", "decode_split_kernel",
            "decode_combine_kernel", "fp4_matmul_kernel"}
# every arch, each marked aot_arches (its plan's compiles run with --aot-arches)
ARCHES = [pytest.param(a, id=a, marks=pytest.mark.aot_arches(a)) for a in AOT_ARCHES]


@pytest.fixture(scope="module")
def outcomes(aot_outcomes):
    # conftest.py: the quick plan of each arch the selected tests read, compiled in one pool
    return aot_outcomes


@pytest.mark.parametrize("arch", ARCHES)
def test_quick_plan_compiles_and_fits_shared_memory(outcomes, arch):
    out = outcomes[arch]
    limit = aot_targets.ARCHS[arch].smem_limit
    failed = [(r.kernel, r.dtype, r.config, r.reason) for r in out.plan.rows if r.status == "failed"]
    assert not failed, failed
    ok = out.plan.by_status("ok")
    assert len(ok) > 50 and all(r.result["status"] == "ok" for r in ok)
    for r in ok:
        assert r.result["shared"] <= limit, (r.kernel, r.dtype, r.config)
        assert r.model_smem is None or r.model_smem <= limit, (r.kernel, r.dtype, r.config)
    # every family's kernels are in the plan
    kernels = {r.kernel for r in ok}
    assert {"copy_kernel", "read_kernel", "l2_reread_kernel", "matmul_kernel", "gemv_rows_kernel", "gemv_tile_kernel",
            "attn_fwd_kernel", "decode_split_kernel", "decode_combine_kernel",
            "l1_reread_kernel", "empty_kernel", "fma_kernel"} <= kernels  # stream.reread runs the L2 probe
    # the persistent TMA GEMM and the TMA prefill from sm_90 on (NVIDIA only); before it, and on
    # AMD, skipped before compiling
    assert ("tma_matmul_kernel" in kernels) == (arch in ("sm_90", "sm_100"))
    tma_prefill = [r for r in ok if r.kernel == "attn_fwd_kernel" and "USE_TMATrue" in r.config]
    assert bool(tma_prefill) == (arch in ("sm_90", "sm_100"))
    if arch == "sm_80":
        reasons = {r.reason for r in out.plan.by_status("skipped") if r.kernel == "gemm/triton_tma"}
        assert any("9.0+ (Hopper)" in why for why in reasons)
    # pruned rows were never compiled, and the model is why
    for r in out.plan.by_status("pruned"):
        assert not r.results and r.model_smem > limit


@pytest.mark.parametrize("arch", ARCHES)
def test_shared_memory_models_match_the_compiler(outcomes, arch):
    for r in outcomes[arch].plan.by_status("ok"):
        if r.kernel not in MODELLED:
            continue
        model, compiled = r.model_smem, r.result["shared"]
        assert model is not None, (r.kernel, r.dtype, r.config)
        if r.kernel == "matmul_kernel" and arch == "gfx950":  # every stage, padded: an upper bound within 1/32
            assert compiled <= model <= compiled * 33 / 32 + 64, (r.dtype, r.config, model, compiled)
        elif r.kernel == "matmul_kernel":
            assert model == compiled, (r.dtype, r.config, model, compiled)
        else:
            assert model >= compiled, (r.kernel, r.dtype, r.config, model, compiled)


@pytest.mark.parametrize("arch", ARCHES)
def test_no_chosen_configuration_spills(outcomes, arch):
    spills = [(r.kernel, r.dtype, r.config, r.result["spill_stores"] + r.result["spill_loads"])
              for r in outcomes[arch].plan.by_status("ok")
              if r.result["spill_stores"] + r.result["spill_loads"] > SPILL_LIMIT_BYTES]
    assert not spills, spills
    # ptxas (or the AMD compiler) reported registers: an empty kernel has none on AMD
    assert all(r.result["regs"] or (arch.startswith("gfx") and r.result["regs"] == 0)
               for r in outcomes[arch].plan.by_status("ok"))


@pytest.mark.aot_arches("sm_80", "sm_90")
def test_fp8_is_skipped_before_sm89_before_compiling(outcomes):
    sm80, sm90 = outcomes["sm_80"].plan, outcomes["sm_90"].plan
    fp8 = ("fp8e4m3", "fp8e5m2", "fp8")
    skipped = {(r.kernel, r.dtype) for r in sm80.by_status("skipped") if "8.9" in r.reason}
    assert {("gemm/triton", "fp8e4m3"), ("gemm/triton", "fp8e5m2"), ("gemv/triton_tile", "fp8"),
            ("gemv/triton_rows", "fp8")} <= skipped
    # nothing fp8 reached the compiler for sm_80; on sm_90 all of it compiled
    assert not [r for r in sm80.rows if r.dtype in fp8 and (r.results or r.specs)]
    assert not [j for r in sm80.rows for j in r.jobs.values() if "*fp8e4nv" in j["signature"].values()]
    on90 = [r for r in sm90.rows if r.dtype in fp8]
    assert on90 and sm90.by_status("ok")
    assert all(r.status in ("ok", "pruned") or (r.status == "skipped" and "8.9" not in r.reason) for r in on90)


@pytest.mark.parametrize("arch", ARCHES)
def test_quick_plan_keeps_three_fitting_candidates_per_kernel_and_dtype(outcomes, arch):
    # e.g. the GEMM: 3 tiles per precision, each compiled once per specialization
    gemm = [r for r in outcomes[arch].plan.by_status("ok") if r.kernel == "matmul_kernel"]
    per_dtype = {}
    for r in gemm:
        per_dtype[r.dtype] = per_dtype.get(r.dtype, 0) + 1
    assert set(per_dtype.values()) == {QUICK_CANDIDATES}
    # the TMA GEMM too: 3 per quick precision (int8's third is the one after a pruned one)
    tma = Counter(r.dtype for r in outcomes[arch].plan.by_status("ok") if r.kernel == "tma_matmul_kernel")
    assert tma == ({"bf16": 3, "fp8e4m3": 3, "int8": 3} if arch in ("sm_90", "sm_100") else {})
    # a quick GPU skinny sweep has M = 1 and multiples of 16: two specializations each
    assert all(len(r.specs) == 2 for r in gemm)
    # and a quick run compiles the Triton GEMM at bf16, fp8e4m3 and int8 only
    assert set(per_dtype) == {"bf16", "fp8e4m3", "int8"} or arch == "sm_80" and set(per_dtype) == {"bf16", "int8"}
    text = aot.table(outcomes[arch])
    assert "slowest compile" in text and f"{arch} (" in text


def test_prune_hand_worked():
    a = TileConfig(128, 256, 64, 8, 8, 3)   # 3 x 384 x 64 x 2 = 147,456 B
    b = TileConfig(128, 128, 128, 8, 8, 3)  # 3 x 256 x 128 x 2 = 196,608 B
    c = TileConfig(64, 128, 64, 8, 4, 4)    # 4 x 192 x 64 x 2 = 98,304 B
    d = TileConfig(16, 128, 128, 1, 4, 4)   # 4 x 144 x 128 x 2 = 147,456 B
    e = TileConfig(32, 64, 256, 1, 4, 3)    # 3 x 96 x 256 x 2 = 147,456 B
    smem = lambda cfg: smem_bytes(cfg, 2)  # noqa: E731  (no arch: the conservative figure)
    assert [smem(x) for x in (a, b, c, d, e)] == [147456, 196608, 98304, 147456, 147456]
    # sm_90 (232,448 B): all fit, in order; sm_80 (166,912 B): b is pruned
    assert prune([a, b, c, d, e], smem, 232448) == ([a, b, c, d, e], 0)
    assert prune([a, b, c, d, e], smem, 166912) == ([a, c, d, e], 1)
    # sm_86 (101,376 B): only c fits; keep limits what is returned, not what is counted
    assert prune([a, b, c, d, e], smem, 101376) == ([c], 4)
    assert prune([a, b, c, d, e], smem, 166912, keep=2) == ([a, c], 1)
    # a quick run keeps the first QUICK_CANDIDATES (3) that fit; a full one FULL_CANDIDATES (6)
    assert launched([a, b, c, d, e], smem, 166912, quick=True) == ([a, c, d], 1)
    assert launched([a, b, c, d, e], smem, 166912, quick=False) == ([a, c, d, e], 1)
    assert launched([a] * 9, smem, 166912, quick=False) == ([a] * 6, 0)
    # no model or no limit: nothing is pruned
    assert prune([a, b], None, 1) == ([a, b], 0) and prune([a, b], smem, None) == ([a, b], 0)
    # the arch-aware model: Ampere keeps one buffer fewer, so b fits an A100 after all
    assert smem_bytes(b, 2, cc=80) == 131072 and smem_bytes(b, 2, cc=90) == 196608
    assert smem_bytes(TileConfig(64, 64, 32, 8, 4, 3), 4, cc=90, fma=True) == 32768


def test_integer_specialization_matches_triton():
    from triton.runtime.jit import mangle_type
    for v in (1, 2, 16, 17, 4096, 2**31 - 16, 2**31, 2**31 + 16, -16, 2**40):
        t, div16 = aot_plan.int_spec(v)
        assert t == mangle_type(v, True), v
        assert div16 == (t != "constexpr" and v % 16 == 0)


def _first_offset(ttir: str, arg: str) -> str:
    """Return the type of the offset first added to kernel argument %arg (directly, or to
    its splat into a tensor of pointers)."""
    name = arg
    for line in ttir.splitlines():
        m = re.search(rf"%(\S+) = tt\.splat %{re.escape(name)} ", line)
        if m and name == arg:
            name = m.group(1)
            continue
        m = re.search(rf"tt\.addptr %{re.escape(name)}, %\S+ : [^,]+, (.+?)(?: loc\(|$)", line)
        if m:
            return m.group(1).strip()
    raise AssertionError(f"no addptr on %{arg}")


def _offset_jobs() -> list:
    """The sm_90 compile jobs (TTIR kept) of the attention and GEMV launches at sizes past 2**31,
    recorded from meta tensors. Called at collection, in the main thread: recording hooks every
    launch of this process, so it never runs beside the tests."""
    from kernels import attention as ka
    from kernels import gemv as kv
    meta = dict(device="meta", dtype=torch.float16)
    # decode at batch 64 over 65,536 keys: b x stride_b = 63 x 2**26 passes 2**31 (and 2**32)
    q = torch.empty(64, 32, 128, **meta)
    k, v = torch.empty(64, 8, 65536, 128, **meta), torch.empty(64, 8, 65536, 128, **meta)
    # prefill of 64 x 8 heads x 65,536 tokens: the same products for q, k, v and o
    qp = torch.empty(64, 8, 65536, 128, **meta)
    # an LM head of 128,256 x 16,384: n x stride_n passes 2**31 elements
    w = torch.empty(128256, 16384, **meta)
    x1, x16 = torch.empty(1, 16384, **meta), torch.empty(16, 16384, **meta)
    log = []
    with aot_plan.recording(log):
        ka.decode(q, k, v, torch.empty_like(q), ka.decode_workspace(q, 4))
        ka.prefill(qp, qp, qp, qp, causal=True)
        kv.gemv_rows(x1, w, None, torch.empty(1, 128256, **meta))
        kv.gemv_tile(x16, w, None, torch.empty(16, 128256, **meta))
    kernels = aot_plan._kernels()
    return [dict(aot_plan.job_of(launch, kernels[(launch.module, launch.kernel)], 90), keep=("ttir",))
            for launch in log]


OFFSET_JOBS = _offset_jobs()


@session_run
def offset_compiles() -> list:
    """OFFSET_JOBS compiled (aot_pool.compile_jobs' results, in order), in one process of the pool:
    a second would cost its own start (seconds of CPU)."""
    return aot_pool.compile_jobs(OFFSET_JOBS, workers=1)[0]


@pytest.mark.slow
def test_offsets_are_64_bit_where_products_pass_2_31(offset_compiles):
    jobs, results = OFFSET_JOBS, offset_compiles
    assert [j["kernel"] for j in jobs] == ["decode_split_kernel", "decode_combine_kernel", "attn_fwd_kernel",
                                           "gemv_rows_kernel", "gemv_tile_kernel"]
    assert jobs[0]["signature"]["skb"] == "i32"  # 2**26 itself fits 32 bits: the product is the risk
    checked = {"decode_split_kernel": ("q_ptr", "k_ptr", "v_ptr", "m_ptr", "l_ptr", "acc_ptr"),
               "decode_combine_kernel": ("m_ptr", "l_ptr", "acc_ptr", "o_ptr"),
               "attn_fwd_kernel": ("q_ptr", "k_ptr", "v_ptr", "o_ptr"),
               "gemv_rows_kernel": ("w_ptr",), "gemv_tile_kernel": ("w_ptr",)}
    for job, res in zip(jobs, results):
        assert res["status"] == "ok", res
        for arg in checked[job["kernel"]]:
            offset = _first_offset(res["ir"]["ttir"], arg)
            assert offset == "i64" or offset.endswith("xi64>"), (job["kernel"], arg, offset)


@pytest.mark.aot_arches("gfx942")
def test_gfx942_prunes_by_its_lds_and_falls_back(outcomes):
    plan = outcomes["gfx942"].plan
    assert aot_targets.ARCHS["gfx942"].smem_limit == 65536
    pruned = plan.by_status("pruned")
    assert pruned and all(r.model_smem > 65536 for r in pruned)
    # attention at head dim 128 and the GEMV tile at batch 256: no regular candidate fits,
    # so the fallback configurations (one K/V buffer, narrow tiles) run instead
    from kernels.attention import PREFILL_FALLBACK
    d128 = [r for r in plan.by_status("ok") if r.kernel == "attn_fwd_kernel" and r.job["constexprs"]["D"] == 128]
    assert d128 and {(r.job["constexprs"]["BLOCK_M"], r.job["constexprs"]["BLOCK_N"]) for r in d128} <= {
        (c[0], c[1]) for c in PREFILL_FALLBACK}
    tiles256 = [r for r in plan.by_status("ok")
                if r.kernel == "gemv_tile_kernel" and r.job["constexprs"]["BLOCK_B"] == 256]
    assert tiles256
    # every job targets the AMD backend, wave64
    assert {j["target"] for r in plan.by_status("ok") for j in r.jobs.values()} == {("hip", "gfx942", 64)}
    assert all(r.result.get("occupancy") for r in plan.by_status("ok"))


@pytest.mark.aot_arches("sm_100", "sm_90", "gfx942")
def test_sm100_plan_is_the_sm90_plan_with_blackwell_facts(outcomes):
    # sm_100 has Hopper's 227 KiB per block: the same tiles fit; only the sweeps' SM count and L2 differ
    assert aot_targets.ARCHS["sm_100"].smem_limit == aot_targets.ARCHS["sm_90"].smem_limit
    ok100 = {(r.kernel, r.dtype, r.config) for r in outcomes["sm_100"].plan.by_status("ok")}
    assert {("matmul_kernel", "bf16")} <= {k[:2] for k in ok100}
    assert {j["target"] for r in outcomes["sm_100"].plan.by_status("ok")
            for j in r.jobs.values()} == {("cuda", 100, 32)}
    # fp4: both formats compile for Blackwell's block-scaled MMA; sm_90 and gfx942 skip them, saying why
    fp4 = [r for r in outcomes["sm_100"].plan.by_status("ok")
           if r.kernel == "fp4_matmul_kernel" and r.dtype not in FP6_FORMATS]
    assert {r.dtype for r in fp4} == {"mxfp4", "nvfp4"} and len(fp4) == 2 * QUICK_CANDIDATES
    for arch in ("sm_90", "gfx942"):
        skipped = {r.dtype: r.reason for r in outcomes[arch].plan.by_status("skipped") if r.dtype in ("mxfp4", "nvfp4")}
        assert set(skipped) == {"mxfp4", "nvfp4"} and all("fp4" in why for why in skipped.values())
    # fp6: compiled for sm_100 (Blackwell's f8f6f4 MMA), its codes decoded to e4m3 in registers
    # where Triton's tl.dot_scaled refuses e2m3 and e3m2 (Triton 3.6 to 3.9); every other arch
    # skips it, its code FP6_ARCH
    fp6 = [r for r in outcomes["sm_100"].plan.by_status("ok") if r.dtype in FP6_FORMATS]
    assert {r.dtype for r in fp6} == set(FP6_FORMATS)
    assert all(r.dtype not in FP6_FORMATS for r in outcomes["sm_100"].plan.by_status("failed"))
    codes = {arch: {r.dtype: r.reason.split(":")[0] for r in outcomes[arch].plan.by_status("skipped")
                    if r.dtype in FP6_FORMATS} for arch in ("sm_100", "sm_90", "gfx942")}
    assert codes["sm_100"] == {} and codes["sm_90"] == codes["gfx942"] == dict.fromkeys(FP6_FORMATS, FP6_ARCH)


def test_launched_falls_back_only_when_nothing_fits():
    smem = lambda c: c  # noqa: E731  (a configuration is its own size here)
    assert launched((100, 50), smem, 60, quick=True, fallback=(10,)) == ([50], 1)     # one fits: no fallback
    assert launched((100, 90), smem, 60, quick=True, fallback=(70, 10, 20)) == ([10, 20], 3)
    assert launched((100, 90), smem, 60, quick=True) == ([], 2)


def test_amd_resources_from_the_assembly():
    text = """
    ; TotalNumSgprs: 18
    ; ScratchSize: 48
    ; Occupancy: 3
      - .agpr_count:     16
        .sgpr_count:     18
        .sgpr_spill_count: 2
        .vgpr_count:     168
        .vgpr_spill_count: 10
    """
    r = amd_resources(text)
    assert r == {"vgprs": 168, "agprs": 16, "vgpr_spills": 10, "sgpr_spills": 2, "scratch": 48, "occupancy": 3}
    assert amd_resources("")["occupancy"] is None


def test_unknown_arch_is_refused_with_the_list(capsys):
    assert aot.main(["--arch", "gfx1100"]) == 2
    err = capsys.readouterr().err
    assert "gfx1100" in err and "gfx942" in err and "sm_100" in err


@pytest.mark.aot_arches("gfx950")
def test_gfx950_keeps_every_lds_stage_and_has_no_tf32(outcomes):
    # CDNA4 (MI350X/MI355X): Triton 3.9 keeps num_stages LDS buffers there (gfx942: num_stages - 1),
    # so the models count every stage, padded; a bf16 128x128x128 s3 GEMM tile (199,648 B
    # compiled) no longer passes for 131,072 against its 160 KiB
    plan = outcomes["gfx950"].plan
    assert aot_targets.ARCHS["gfx950"].smem_limit == 163840
    from kernels.gemm import TileConfig, smem_bytes
    assert smem_bytes(TileConfig(128, 128, 128, 8, 8, 3), 2, 80, gfx="gfx950") == 3 * 256 * 128 * 2 * 33 // 32 > 163840
    assert smem_bytes(TileConfig(128, 128, 128, 8, 8, 3), 2, 80, gfx="gfx942") == 2 * 256 * 128 * 2
    assert {j["target"] for r in plan.by_status("ok") for j in r.jobs.values()} == {("hip", "gfx950", 64)}
    # fp4: mxfp4 on its scaled MFMA; tf32: no xf32 instructions, skipped with the reason
    assert {r.dtype for r in plan.by_status("ok") if r.kernel == "fp4_matmul_kernel"} == {"mxfp4"}
    from bench.ops.gemm import point_skip
    why = point_skip({"dtype": "tf32"}, aot_targets.fake_device("gfx950"))
    assert why and "xf32" in why and "gfx950" in why
    assert point_skip({"dtype": "tf32"}, aot_targets.fake_device("gfx942")) is None
