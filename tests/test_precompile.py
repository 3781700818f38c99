"""Precompiling into Triton's cache (bench/aot/precompile.py) and tuning once per shape class
(bench/ops/_tune.py). The cache test compiles two small kernels for sm_90 on the CPU (no GPU):
seconds, most of them the pool's start."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import session_run

from bench.aot import precompile as pc
from bench.ops import _tune

ROOT = Path(__file__).resolve().parents[1]

# Precompile the quick stream.copy plan for sm_90 into a fresh cache, then replay the launches
# a run makes (recorded from the launcher itself, on meta tensors) through Triton's own JIT
# launcher against a stand-in sm_90 driver, counting cache hits and compiles; then one launch
# of a specialization the plan does not hold (n not divisible by 16), which must compile.
REPLAY = r"""
import importlib, json, os, sys, tempfile
cache = tempfile.mkdtemp(prefix="rb-precompile-test-")
os.environ["TRITON_CACHE_DIR"] = cache
if __name__ == "__main__":
    from bench.aot import plan as aot_plan, precompile as pc, targets as aot_targets
    from bench.measure.registry import LaunchContext, load_all
    arch = sys.argv[1]
    rec = pc.precompile(arch, True, ["stream.copy"], workers=1, cache=cache)  # one: a second process costs its start
    reg = load_all()
    op, impl = reg.ops["stream.copy"], reg.impls["stream.copy/triton"]
    dev = aot_targets.fake_device(arch)
    log = []
    with aot_plan.meta_inputs():
        for point in op.points(dev, True):
            x = op.make_inputs(point, "meta")
            with aot_plan.recording(log):
                impl.launcher(x, LaunchContext(point, dev, "warm", True))()
    from triton.runtime import driver
    driver.set_active(pc._Target(aot_targets.ARCHS[arch].target))
    with pc.JitCounter() as run:
        for l in log:
            getattr(importlib.import_module(l.module), l.kernel).run(*l.args, grid=(1,), warmup=True, **l.kwargs)
    with pc.JitCounter() as other:
        l = log[0]
        kw = dict(l.kwargs)
        args = list(l.args[:2]) + [4096 * 16 + 1]
        getattr(importlib.import_module(l.module), l.kernel).run(*args, grid=(1,), warmup=True, **kw)
    print(json.dumps({"rec": rec, "launches": len(log), "run": run.record(), "other": other.record(),
                      "dtypes": sorted({str(l.args[0].dtype) for l in log})}))
    import shutil
    shutil.rmtree(cache, ignore_errors=True)
"""


def _python(code: str, *args, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


@session_run
def replays(tmp, env):
    """Return {arch: CompletedProcess} of REPLAY for sm_90 and gfx942, and {"tma": [the
    CompletedProcess of REPLAY_DESCRIPTORS compile, of its replay]} (their own Triton cache),
    each in a process of its own."""
    env = dict(env, PYTHONPATH=str(ROOT))

    def run(code, *args, **extra):
        return subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, env=dict(env, **extra),
                              capture_output=True, text=True, timeout=600)
    done = {arch: run(REPLAY, arch) for arch in ("sm_90", "gfx942")}
    done["tma"] = [run(REPLAY_DESCRIPTORS, step, TRITON_CACHE_DIR=str(tmp)) for step in ("compile", "replay")]
    return done


# gfx942: ROCm's Triton also specializes each pointer on its buffer being within 2 GiB; the
# jobs record it (aot_plan.job_of "ptr32"), or no launch would find its kernel
@pytest.mark.slow
@pytest.mark.parametrize("arch", ["sm_90", "gfx942"])
def test_a_jit_launch_finds_what_precompile_wrote(replays, arch):
    out = replays[arch]
    assert out.returncode == 0, out.stderr[-3000:]
    r = json.loads(out.stdout.strip().splitlines()[-1])
    rec = r["rec"]
    # quick stream.copy on sm_90 and gfx942: one BLOCK 4096, 8-warp tile per dtype (float32, bfloat16),
    # every size a 16-divisible i32: two compiles
    assert rec["jobs"] == 2 and rec["ok"] == 2 and rec["failed"] == 0, rec
    assert r["dtypes"] == ["torch.bfloat16", "torch.float32"]
    assert r["launches"] > 2  # many sizes, two specializations
    # every launch of the run found its kernel: the JIT compiled nothing
    assert r["run"] == {"cache_hits": 2, "compiles": 0}
    # a specialization the plan does not hold (n % 16 != 0) is compiled: the counter sees it
    assert r["other"] == {"cache_hits": 0, "compiles": 1}


def test_launch_args_reproduce_the_specialization_of_a_job():
    job = {"module": "kernels.stream", "kernel": "copy_kernel", "cc": 90,
           "signature": {"a_ptr": "*bf16", "b_ptr": "*bf16", "n": "i64", "m": "i32", "one": "constexpr",
                         "BLOCK": "constexpr"},
           "constexprs": {"one": 1, "BLOCK": 1024}, "aligned": ["a_ptr", "b_ptr", "n"], "specialized": ["one"],
           "options": {"num_warps": 4, "num_stages": 2}}
    args = pc.launch_args(job)
    assert args["a_ptr"].dtype == torch.bfloat16 and args["a_ptr"].data_ptr() % 16 == 0
    assert args["n"] == 2**32 and args["n"] % 16 == 0          # i64, 16-divisible
    assert args["m"] == 17 and args["m"] < 2**31                # i32, not 16-divisible
    assert args["one"] == 1 and args["BLOCK"] == 1024
    assert args["num_warps"] == 4 and args["num_stages"] == 2
    with pytest.raises(TypeError, match="tensordesc"):
        pc.launch_args(dict(job, signature={"d": "tensordesc"}))


def test_arch_and_the_plan_of_a_run():
    import dataclasses

    from bench.aot.targets import fake_device
    gpu = fake_device("sm_90")
    cpu = dataclasses.replace(gpu, kind="cpu", torch_device="cpu", compute_capability=None)
    assert pc.arch_of(gpu) == "sm_90" and pc.arch_of(cpu) is None
    assert pc.arch_of(dataclasses.replace(gpu, compute_capability="7.5")) is None  # no aot target
    # a CPU run precompiles nothing
    assert pc.before_run(cpu, None, True) is None
    jobs, counts = pc.plan_jobs("sm_90", True, ["stream.copy", "stream.read"])
    assert {j["kernel"] for j in jobs} == {"copy_kernel", "read_kernel"} and counts["pruned"] == 0


def test_ranks_on_one_host_share_its_cores(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    assert pc.default_workers() == 16
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    assert pc.default_workers() == 4
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "32")
    assert pc.default_workers() == 1


def test_a_run_takes_a_record_made_before_or_skips_when_told(monkeypatch, tmp_path):
    from bench.aot.targets import fake_device
    from bench.measure.registry import load_all
    from bench.measure.runner import make_plan
    gpu = fake_device("sm_90")
    plan = make_plan(load_all(), gpu, only=["stream.copy"], quick=True)
    monkeypatch.setattr(pc, "triton_interpreting", lambda: False)
    monkeypatch.setattr(pc, "precompile", lambda *a, **k: pytest.fail("must not compile"))
    monkeypatch.setenv("ROOFBENCH_PRECOMPILE", "0")
    assert pc.before_run(gpu, plan, True, say=lambda s: None) == {"arch": "sm_90", "skipped": "ROOFBENCH_PRECOMPILE=0"}
    rec = tmp_path / "pre.json"
    rec.write_text(json.dumps({"arch": "sm_90", "jobs": 2, "ok": 2, "failed": 0, "wall_s": 9.5}))
    monkeypatch.setenv("ROOFBENCH_PRECOMPILE", str(rec))
    got = pc.before_run(gpu, plan, True, say=lambda s: None)
    assert got["ok"] == 2 and got["wall_s"] == 9.5 and got["done_before"] == str(rec)
    assert pc.families_of(plan) == ["stream.copy"]


def test_octaves_and_shape_classes():
    assert [_tune.octave(n) for n in (1, 2, 3, 4, 5, 6, 4096, 5120, 6144, 5792, 5793)] == \
        [0, 1, 2, 2, 2, 3, 12, 12, 13, 12, 13]  # 2**12.5 = 5792.6
    assert _tune.octave(0) == -1
    gemm = ("gemm", "bf16", (4096, 5120), (5120, 4096))
    assert _tune.shape_class(gemm) == ("gemm", "bf16", (("oct", 12), ("oct", 12)), (("oct", 12), ("oct", 12)))
    # 4096^3 and 5120 x 4096 x 4096 share a class; 6144 does not; the dtype and flags stay
    assert _tune.shape_class(("gemm", "bf16", (5120, 4096), (4096, 4096))) == \
        _tune.shape_class(("gemm", "bf16", (4096, 4096), (4096, 4096)))
    assert _tune.shape_class(("gemm", "bf16", (6144, 4096), (4096, 4096))) != \
        _tune.shape_class(("gemm", "bf16", (4096, 4096), (4096, 4096)))
    assert _tune.shape_class(("gemm", "fp16", (4096, 4096), (4096, 4096))) != \
        _tune.shape_class(("gemm", "bf16", (4096, 4096), (4096, 4096)))
    # a GEMV batch of 1 and of 2 are different classes; a bool flag is kept as it is
    assert _tune.shape_class(("tile", "int4", (1, 4096), (6144, 4096))) != \
        _tune.shape_class(("tile", "int4", (2, 4096), (6144, 4096)))
    assert _tune.shape_class(("prefill", torch.bfloat16, (1, 8, 2048, 128), (1, 8, 2048, 128), True))[-1] is True
    assert _tune.shape_class(("prefill", torch.bfloat16, (1,), (1,), True))[1] is torch.bfloat16


def test_a_class_is_tuned_once_and_its_winner_reused(monkeypatch):
    # tuned() on a fake CUDA tensor: the candidates are timed by a stand-in for the timer
    timed = []

    class Stats:
        def __init__(self, s):
            self.median_s = s

    class Timing:
        def __init__(self, s):
            self.stats = Stats(s)

    speed = {"a": 3.0, "b": 1.0, "c": 2.0}
    monkeypatch.setattr(_tune, "time_fn", lambda fn, *a, **k: Timing(speed[fn.cfg]))
    monkeypatch.setattr(_tune, "smem_limit", lambda dev: None)
    monkeypatch.setattr(_tune, "_BEST", {})

    class FakeCuda:
        is_cuda = True
        device = "cuda:0"

    def make_fn(cfg):
        def fn():
            timed.append(cfg)
        fn.cfg = cfg
        return fn

    fn, cfg = _tune.tuned(FakeCuda(), ("gemm", "bf16", (4096, 4096), (4096, 4096)), ("a", "b", "c"), "i", make_fn)
    assert cfg == "b" and timed == ["a", "b", "c"]  # each candidate's first call, then timed
    timed.clear()
    # 5120 x 4096 x 4096: the same class, the winner launched without timing anything
    fn, cfg = _tune.tuned(FakeCuda(), ("gemm", "bf16", (5120, 4096), (4096, 4096)), ("a", "b", "c"), "i", make_fn)
    assert cfg == "b" and timed == [] and "shape class" in fn.tuning
    # same class, but the winner is not among this size's candidates: tuned on its own
    fn, cfg = _tune.tuned(FakeCuda(), ("gemm", "bf16", (4100, 4096), (4096, 4096)), ("a", "c"), "i", make_fn)
    assert cfg == "c" and timed == ["a", "c"]
    # another class (6144): tuned
    timed.clear()
    _tune.tuned(FakeCuda(), ("gemm", "bf16", (6144, 4096), (4096, 4096)), ("a", "b", "c"), "i", make_fn)
    assert timed == ["a", "b", "c"]


# On a GPU: precompile a small plan, then run it; every launch must load from the cache.
GPU_LOAD = r"""
import json, os, tempfile
os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="rb-precompile-gpu-")
if __name__ == "__main__":
    from bench.aot import precompile as pc
    from bench.hw import detect
    from bench.measure.registry import load_all
    from bench.measure.runner import Runner, make_plan
    from bench.measure.timing import TimerConfig
    info = detect.resolve("cuda")
    plan = make_plan(load_all(), info, only=["stream.copy", "gemm.square/triton"], dtypes=["float32", "bf16"],
                     quick=True, max_ws_bytes=64 * 2**20)
    rec = pc.before_run(info, plan, True, say=lambda s: None)
    with pc.JitCounter() as c:
        ms = Runner(info, TimerConfig(budget_s=0.05, warmup_s=0.01), quick=True).run(plan)
    print(json.dumps({"rec": rec, "jit": c.record(), "ok": sum(m.status == "ok" for m in ms), "rows": len(ms)}))
    import shutil
    shutil.rmtree(os.environ["TRITON_CACHE_DIR"], ignore_errors=True)
"""


@pytest.mark.gpu
def test_on_a_gpu_a_run_launch_loads_the_precompiled_kernel():
    out = _python(GPU_LOAD)
    assert out.returncode == 0, out.stderr[-3000:]
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["rec"]["failed"] == 0 and r["rec"]["ok"] > 0, r["rec"]
    assert r["ok"] > 0
    assert r["jit"]["cache_hits"] > 0 and r["jit"]["compiles"] == 0, r


# The TMA prefill takes host-side tensor descriptors: its job types them as Triton's JIT does
# ("tensordesc<bf16[1, 1, 128, 64]>"), precompile compiles it from stand-ins in one process, and
# a launch in another with the run's own descriptors (recorded from the launcher, on meta
# tensors) finds it in the cache.
REPLAY_DESCRIPTORS = r"""
import importlib, json, sys
if __name__ == "__main__":
    import torch
    from bench.aot import plan as aot_plan, precompile as pc
    from kernels import attention as ka
    meta = dict(device="meta", dtype=torch.bfloat16)
    q, k = torch.empty(1, 4, 1024, 64, **meta), torch.empty(1, 2, 1024, 64, **meta)
    log = []
    with aot_plan.recording(log):
        ka.prefill(q, k, k, q, True, 128, 64, 8, 3, use_tma=True,
                   descriptors=ka.prefill_descriptors(q, k, k, q, 128, 64))
    job = aot_plan.job_of(log[0], aot_plan._kernels()[(log[0].module, log[0].kernel)], 90)
    if sys.argv[1] == "compile":
        print(json.dumps({"sig": {n: job["signature"][n] for n in ("q_ptr", "k_ptr", "v_ptr", "o_ptr")},
                          "res": pc.compile_launch(job)["status"]}))
    else:
        from triton.runtime import driver
        driver.set_active(pc._Target(90))
        with pc.JitCounter() as run:
            l = log[0]
            getattr(importlib.import_module(l.module), l.kernel).run(*l.args, grid=(1,), warmup=True, **l.kwargs)
        print(json.dumps({"run": run.record()}))
"""


@pytest.mark.slow
def test_a_tma_prefill_launch_with_host_descriptors_finds_what_precompile_wrote(replays):
    out, replay = replays["tma"]
    assert out.returncode == 0, out.stderr[-3000:]
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["sig"] == {"q_ptr": "tensordesc<bf16[1, 1, 128, 64]>", "k_ptr": "tensordesc<bf16[1, 1, 64, 64]>",
                        "v_ptr": "tensordesc<bf16[1, 1, 64, 64]>", "o_ptr": "tensordesc<bf16[1, 1, 128, 64]>"}
    assert r["res"] == "ok"
    out = replay
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1])["run"] == {"cache_hits": 1, "compiles": 0}


def unbound_names(code: str) -> set:
    """Return the names code reads that nothing binds: not its module's own (assigned, imported,
    defined), nor a builtin. A subprocess's code string is checked this way on any host, though
    it may run only on a GPU."""
    import builtins
    import symtable
    top = symtable.symtable(code, "<code>", "exec")
    bound = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported()}
    missing, tables = set(), [top]
    while tables:
        t = tables.pop()
        tables += t.get_children()
        for s in t.get_symbols():
            local = t is not top and (s.is_assigned() or s.is_imported() or s.is_parameter() or s.is_free())
            if s.is_referenced() and not local and s.get_name() not in bound:
                missing.add(s.get_name())
    return {n for n in missing if not hasattr(builtins, n)}


def test_the_subprocess_codes_bind_every_name_they_read():
    assert unbound_names("import os\nprint(os.sep, [x for x in y], len)") == {"y"}
    assert unbound_names("def f(a):\n    return a + b\nb = 1") == set()
    assert unbound_names("if __name__ == '__main__':\n    info = detect.resolve('cuda')") == {"detect"}
    for name, code in (("REPLAY", REPLAY), ("GPU_LOAD", GPU_LOAD), ("REPLAY_DESCRIPTORS", REPLAY_DESCRIPTORS)):
        assert unbound_names(code) == set(), name
