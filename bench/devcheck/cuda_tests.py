"""The device check's `kernels` step: the suite's CUDA-only tests other than the gates, each
named here to run (RUN) or left out with a reason (LEFT_OUT).

A test is CUDA-only (cuda_only) when it is marked `gpu` (conftest.py skips it without CUDA),
takes the `dev` fixture (the GPU when present; without one the kernel runs under Triton's
interpreter, never compiled), or carries a skipif that is true on a machine without CUDA and
names CUDA, a GPU, an sm_ arch or the interpreter; a test marked `interpreter_only` (it runs
under the interpreter on a CPU and never on a GPU) is not, whatever skips it. tests/test_device_check.py collects the
suite on a CPU with this module as a plugin and fails when a CUDA-only case is neither run
nor left out here, or when an entry names no such case; the gates' file
(bench/devcheck/plan.py GATES_FILE) is the `gates` step's own.

A selector is a test's node id (every case of it) or one case's (with its [parameters]); a
case takes the most specific selector that names it. Each RUN entry gives the cases it
selects and the Triton compiles they make on a GPU: one per distinct (kernel, constexprs,
argument dtypes, integer-argument class: 1, a multiple of 16, other), none for a kernel an
earlier case compiled. The step's prediction (predicted_s) is PYTEST_START_S, each entry's
compiles times bench.aot.predict.COMPILE_S of its kernels' family (the probe and FMA kernels,
single loops without a dot, as the stream kernels'), and CASE_S per case. RUN is in priority
order (a cut step loses the tail): the kernels no other step runs first (the TMA GEMM's
ragged edges and C splits, the prefill's edge blocks, the probes, the FMA chains), then
paths the gates run at other shapes."""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass

from bench.aot.predict import COMPILE_S

PYTEST_START_S = 8.0   # pytest, torch, conftest.py and the test modules, CUDA's context (no aot plan: a guess)
CASE_S = 0.15          # a case past its compiles: small inputs, a float64 reference, a check (a guess)
LIST_ENV = "ROOFBENCH_CUDA_ONLY_LIST"   # the plugin below writes the collected CUDA-only cases' ids here
SKIP_WORDS = re.compile(r"cuda|gpu|interpret|sm_\d", re.I)


@dataclass(frozen=True)
class Entry:
    selector: str
    cases: int       # the collected cases it selects (tests/test_device_check.py checks the count)
    compiles: int    # Triton compiles those cases make on a GPU (the rule above)
    family: str      # the kernels' family in bench.aot.predict.COMPILE_S


GT, AT, PR, ST = ("tests/test_gemm_tma.py::", "tests/test_attention.py::", "tests/test_probes.py::",
                  "tests/test_stream_kernels.py::")
PREFILL = AT + "test_triton_prefill_matches_float64"
RUN = (
    # per precision: the M = 1 shape is one class, 100x72x80 and 130x200x96 share another
    Entry(GT + "test_tma_gemm_ragged_shapes_match_float64", 4, 8, "gemm"),
    Entry(GT + "test_tma_gemm_every_c_split_stores_every_column", 3, 6, "gemm"),   # fp16 and int8 each
    Entry(GT + "test_tma_gemm_warp_specialized_config_is_correct", 1, 1, "gemm"),
    Entry(GT + "test_int8_warp_specialized_128x256_tile_of_the_quick_plan_is_exact", 1, 1, "gemm"),
    Entry(AT + "test_prefill_edge_blocks_when_the_key_block_is_wider_or_narrower", 4, 4, "attention"),
    Entry(AT + "test_tma_prefill_descriptors_made_once_serve_every_call", 2, 2, "attention"),
    # the ragged, grouped-query cases: TMA and not, causal and not, both head dims
    Entry(PREFILL + "[True-heads1-100-64-True-fp16]", 1, 1, "attention"),
    Entry(PREFILL + "[False-heads1-100-64-True-fp16]", 1, 1, "attention"),
    Entry(PREFILL + "[True-heads1-100-64-False-fp16]", 1, 1, "attention"),
    Entry(PREFILL + "[True-heads2-70-32-False-fp32]", 1, 1, "attention"),
    Entry(AT + "test_triton_decode_matches_float64[3-300-fp16]", 1, 2, "attention"),   # split and combine
    Entry(PR + "test_l1_kernel_reads_each_span_passes_times_and_nothing_else", 1, 1, "stream"),
    Entry(PR + "test_l1_op_torch_and_triton_pass_the_gate", 2, 2, "stream"),
    Entry(PR + "test_l2_kernel_reads_every_block_repeats_times", 3, 1, "stream"),
    Entry(PR + "test_reread_triton_is_the_l2_probe_and_passes_the_gate_with_few_passes", 1, 2, "stream"),
    Entry(PR + "test_launch_impls_pass_the_gate", 1, 1, "stream"),
    Entry(PR + "test_launch_form_refuses_graph_capture_so_the_timer_launches_each_call", 1, 0, "stream"),
    # k, an integer argument: 1, 2 and 16 are three classes, 5 is 2's
    *(Entry(f"tests/test_fma.py::test_triton_kernel_matches_float64[{k}-fp16]", 1, 0 if k == 5 else 1, "stream")
      for k in (1, 2, 5, 16)),
    *(Entry(ST + f"test_triton_stream_kernel_matches_float64[{kind}-{dtype}]", 1, 1, "stream")
      for kind, dtype in [(k, "float16") for k in ("copy", "scale", "add", "triad", "read", "write", "nstream")]
      + [("scale", "float32"), ("add", "float32"), ("nstream", "float32")]),
    *(Entry(ST + f"test_read_kernel_sums_every_block_once[{p}-{n}]", 1, 1 if p == 1 and n in (100, 5120) else 0,
            "stream") for p in (1, 7) for n in (100, 5120, 5137, 13288)),   # n: a multiple of 16 or not
    Entry(ST + "test_read_kernel_sums_exactly_on_integers", 1, 0, "stream"),
    Entry(ST + "test_write_kernel_leaves_memory_past_n_alone", 1, 1, "stream"),
    Entry(ST + "test_read_impl_is_one_launch_and_its_check_adds_the_partials", 1, 1, "stream"),
    *(Entry(ST + f"test_triton_stream_kernel_bf16_on_gpu[{kind}]", 1, 1, "stream")
      for kind in ("scale", "add", "nstream")),
    Entry("tests/test_gemm.py::test_triton_gemm_bf16_tf32_on_gpu[tf32]", 1, 1, "gemm.fp32"),
    *(Entry(f"tests/test_gemv.py::test_triton_gemv_matches_float64_of_dequantized[{kernel}-int4]", 1, 1, "gemv")
      for kernel in ("rows", "rows_split", "tile")),
)

GATED = "the gates run this kernel at this precision (tests/test_gpu_paths.py)"
BUDGET = "over the step's budget (CHECK_S less the required steps' predictions)"
MEASURED = "the run steps time every point through this path, and gate each"
LEFT_OUT = {
    GT + "test_tma_gemm_on_gpu": "the gates run every TMA configuration of these precisions; the ragged "
                                 "edges run here through test_tma_gemm_ragged_shapes_match_float64",
    AT + "test_triton_attention_bf16_on_gpu": GATED + " (prefill and decode, bf16); ragged lengths run here",
    AT + "test_first_prefill_candidate_on_gpu": "the gates run every TMA prefill candidate at both head dims, "
                                                "causal, at a length no block divides",
    PREFILL: BUDGET + ": 24 compiles; its four ragged grouped-query cases run here",
    AT + "test_triton_decode_matches_float64": BUDGET + "; " + GATED + " (bf16)",
    "tests/test_fma.py::test_triton_kernel_matches_float64": "roofs-compute gates fma.chains in fp32 and fp64 at "
                                                             "every chain length of its sweep; fp16 runs here",
    "tests/test_gemm.py::test_triton_gemm_ragged_shapes_match_float64": BUDGET + ": 15 compiles; " + GATED
                                                                         + " (bf16, fp8e4m3, int8)",
    "tests/test_gemm.py::test_triton_gemm_bf16_tf32_on_gpu[bf16]": GATED,
    "tests/test_gemv.py::test_triton_gemv_matches_float64_of_dequantized": BUDGET + "; " + GATED
                                                                           + " (both kernels, every format)",
    "tests/test_gemv.py::test_triton_gemv_bf16_activations_on_gpu": GATED + " (both kernels, every format)",
    ST + "test_triton_stream_kernel_matches_float64": GATED + " (copy, triad, read, write in float32)",
    ST + "test_triton_stream_kernel_bf16_on_gpu": GATED + " (copy, triad, read, write in bfloat16)",
    ST + "test_read_kernel_sums_every_block_once": BUDGET + "; one program and seven run here",
    "tests/test_api.py::test_cuda_graph_captured_callable": "the public API on a captured torch graph: no kernel "
                                                            "of the suite's; " + MEASURED,
    "tests/test_gemm_int8_forms.py::test_gpu_launcher_times_both_forms_and_keeps_one": "torch's int8 GEMM, no "
                                                                                      "Triton kernel; the quick "
                                                                                      "run gates it",
    "tests/test_gpu.py": "the timer and the runner on CUDA, no kernel of their own: " + MEASURED,
    "tests/test_precompile.py::test_on_a_gpu_a_run_launch_loads_the_precompiled_kernel": BUDGET + ": its own "
                                                                                          "precompile and run "
                                                                                          "processes",
    "tests/test_counters.py::test_a_real_replay_under_ncu_reads_a_copys_dram_bytes": BUDGET + ": a replay under "
                                                                                     "ncu; the check collects no "
                                                                                     "counters",
    "tests/test_profile_counters.py::test_a_real_profile_reads_an_elementwise_ops_dram_bytes": BUDGET + ": a "
                                                                                               "profile under ncu",
}


def predicted_s(entries=RUN) -> float:
    """Return the kernels step's predicted seconds (the rule in the module's docstring)."""
    return PYTEST_START_S + sum(e.compiles * COMPILE_S[e.family] + e.cases * CASE_S for e in entries)


def selectors(entries=RUN) -> list[str]:
    return [e.selector for e in entries]


def placed(case: str, run=RUN, left_out=LEFT_OUT) -> tuple[str, str] | None:
    """Return ("run" | "left out", selector) for the most specific selector naming case (its own
    id, then its test's, then its file's), or None."""
    names = {e.selector: "run" for e in run}
    for sel in left_out:
        names.setdefault(sel, "left out")
    for sel in (case, case.split("[")[0], case.split("::")[0]):
        if sel in names:
            return names[sel], sel
    return None


def cuda_only(item) -> bool:
    """Whether a collected pytest item is CUDA-only (the rule in the module's docstring)."""
    if "interpreter_only" in item.keywords:
        return False
    if "gpu" in item.keywords or "dev" in getattr(item, "fixturenames", ()):
        return True
    return any(m.args and m.args[0] is True and SKIP_WORDS.search(str(m.kwargs.get("reason", "")))
               for m in item.iter_markers("skipif"))


def pytest_collection_finish(session):
    """As a plugin (`-p bench.devcheck.cuda_tests`): write the CUDA-only cases' ids to the file
    LIST_ENV names."""
    path = os.environ.get(LIST_ENV)
    if path:
        with open(path, "w") as f:
            json.dump([item.nodeid for item in session.items if cuda_only(item)], f)
