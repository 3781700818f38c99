"""Bytes per level from tile configurations (bench/ops/traffic.py) and bytes per direction
(Op.write_bytes), on hand-worked cases."""
import pytest

from bench.measure.registry import REGISTRY, LaunchContext, load_all
from bench.measure.runner import direction_columns
from bench.ops.traffic import (
    cdiv,
    decode_level_bytes,
    gemm_level_bytes,
    gemv_rows_level_bytes,
    gemv_tile_level_bytes,
    prefill_keys,
    prefill_level_bytes,
)

load_all()


def test_gemm_256x128_bf16_at_8192_cubed_is_about_85_flop_per_l2_byte():
    n = 8192
    got = gemm_level_bytes(n, n, n, 2, 2, 256, 128, num_warps=8)
    # A is loaded once per column of tiles (8192 / 128 = 64), B once per row of tiles (8192 / 256 = 32)
    assert got["l2_bytes"] == (n * n * 64 + n * n * 32) * 2 + n * n * 2 == 194 * n * n
    assert 2 * n**3 / got["l2_bytes"] == pytest.approx(84.45, abs=0.01)
    # shared memory: A once, B once per warpgroup (8 warps = 2): (64 + 2 x 32) x 2 bytes per M N
    assert got["l1_bytes"] == 256 * n * n and 2 * n**3 / got["l1_bytes"] == 64
    # the approximation M N K (1/BLOCK_N + 1/BLOCK_M) x itemsize, plus C
    assert got["l2_bytes"] == n**3 * (1 / 128 + 1 / 256) * 2 + n * n * 2


def test_gemm_edge_tiles_load_only_the_rows_that_exist():
    # M = 100, N = 70, K = 10, tiles 64 x 32: A read cdiv(70, 32) = 3 times, B cdiv(100, 64) = 2 times
    got = gemm_level_bytes(100, 70, 10, 2, 2, 64, 32, num_warps=4)
    assert got == {"l2_bytes": (3000 + 1400) * 2 + 7000 * 2, "l1_bytes": (3000 + 1400) * 2}
    # fp8 in, bf16 out; one column of tiles: A once; l1 with 4 warps: one warpgroup
    assert gemm_level_bytes(64, 64, 64, 1, 2, 64, 64)["l2_bytes"] == 2 * 64 * 64 + 2 * 64 * 64


def test_prefill_64_row_tiles_are_about_64_flop_per_l2_byte():
    b, hq, s, d = 1, 32, 16384, 128
    got = prefill_level_bytes(b, hq, s, d, 2, 64, 64, 4, causal=False)
    assert prefill_keys(s, s, 64, 64, False) == 256 * s
    assert got["l2_bytes"] == hq * (2 * d * 256 * s + 2 * s * d) * 2
    flops = 4 * b * hq * s * s * d
    assert flops / got["l2_bytes"] == pytest.approx(4 * s / ((2 * s / 64 + 2) * 2))
    assert flops / got["l2_bytes"] == pytest.approx(63.75, abs=0.01)
    assert got["l1_bytes"] == hq * (2 * d * 256 * s + s * d) * 2  # 4 warps: one warpgroup reads K and V
    # 128 rows on 8 warps: half the programs, each tile read by two warpgroups
    wide = prefill_level_bytes(b, hq, s, d, 2, 128, 64, 8, causal=False)
    assert flops / wide["l2_bytes"] == pytest.approx(4 * s / ((2 * s / 128 + 2) * 2))
    assert wide["l1_bytes"] == hq * (2 * d * 2 * 128 * s + s * d) * 2


def test_causal_prefill_programs_stop_at_their_diagonal_block():
    assert prefill_keys(4, 4, 2, 2, True) == 2 + 4
    assert prefill_keys(4, 4, 2, 4, True) == 4 + 4  # a 4-key block loads past the diagonal
    assert prefill_keys(5, 5, 2, 4, True) == 4 + 4 + 5  # masked past S_k = 5
    assert prefill_keys(5, 5, 2, 4, False) == 3 * 5
    n = 1024
    # large S: about half the keys of the non-causal kernel
    assert prefill_keys(n, n, 64, 64, True) / prefill_keys(n, n, 64, 64, False) == pytest.approx(17 / 32)


def test_decode_and_gemv_l2_bytes():
    # KV 2 x 8 x 1024 x 128, q once per split (4) and o once, bf16; fp32 partials written and read
    assert decode_level_bytes(1, 32, 8, 1024, 128, 2, 4) == {
        "l2_bytes": (2 * 8 * 1024 * 128 + 32 * 128 * 4 + 32 * 128) * 2 + 2 * 4 * 32 * 4 * 130} == {"l2_bytes": 4368384}
    assert gemv_tile_level_bytes(1000, 4, 100, 50, 32) == {"l2_bytes": 1000 + 2 * 4 * 50 * 4 + 2 * 4 * 100}
    assert gemv_rows_level_bytes(1000, 100, 50, 8, 1) == {"l2_bytes": 1000 + 2 * 50 * 13 + 200}
    assert gemv_rows_level_bytes(1000, 100, 50, 8, 4) == {"l2_bytes": 1000 + 1300 + 4 * 100 * 6 + 200}
    assert cdiv(100, 8) == 13 and cdiv(96, 8) == 12


def test_triton_gemm_launcher_records_its_tile_bytes():
    from bench.ops import gemm
    from kernels.gemm import INTERPRETER_CONFIG as cfg
    point = {"dtype": "fp16", "shape": (100, 70, 10)}
    fn = gemm._triton_launcher(gemm.make_inputs(point, "cpu"), LaunchContext(point))
    assert fn.level_bytes == gemm_level_bytes(100, 70, 10, 2, 2, cfg.block_m, cfg.block_n, cfg.num_warps)


def test_prefill_and_gemv_launchers_record_their_tile_bytes():
    from bench.ops import attention, gemv
    point = {"dtype": "fp16", "causal": True, "head_dim": 64, "heads": (1, 2, 1), "seq": 128}
    x = attention.prefill_inputs(point, "cpu")
    fn = attention._prefill_triton(x, LaunchContext(point))
    bm, bn, warps = attention.INTERPRETER_PREFILL[:3]
    assert fn.level_bytes == prefill_level_bytes(1, 2, 128, 64, 2, bm, bn, warps, True)
    layer = next(iter(gemv.LAYERS))
    gp = {"layer": layer, "dtype": "int8", "batch": 2}
    gx = gemv.make_inputs(gp, "cpu")
    fn = gemv._tile_launcher(gx, LaunchContext(gp))
    n, k = gemv.LAYERS[layer]
    assert fn.level_bytes == gemv_tile_level_bytes(gemv.weight_bytes(n, k, "int8"), 2, n, k, gemv.INTERPRETER_TILE[0])


@pytest.mark.parametrize("op,point,read,write", [
    # copy: n = 4096 // (2 arrays x 4 bytes) = 512 elements; read a, write b
    ("stream.copy", {"dtype": "float32", "ws_bytes": 4096}, 2048, 2048),
    ("stream.triad", {"dtype": "float32", "ws_bytes": 3 * 4 * 640}, 2 * 4 * 640, 4 * 640),
    ("stream.read", {"dtype": "float32", "ws_bytes": 4096}, 4096, 0),
    ("stream.write", {"dtype": "float32", "ws_bytes": 4096}, 0, 4096),
    ("gemm.square", {"dtype": "fp8e4m3", "shape": (64, 32, 16)}, (64 * 16 + 16 * 32) * 1, 64 * 32 * 2),
    ("attention.decode", {"dtype": "bf16", "length": 64, "batch": 2},
     (2 * 2 * 8 * 64 * 128 + 2 * 32 * 128) * 2, 2 * 32 * 128 * 2),
])
def test_read_and_write_bytes_sum_to_bytes(op, point, read, write):
    o = REGISTRY.ops[op]
    assert direction_columns(o, point, o.bytes(point)) == {"read_bytes": read, "write_bytes": write}
    assert read + write == o.bytes(point)


def test_an_impl_with_its_own_bytes_reads_the_difference():
    o = REGISTRY.ops["gemv.decode"]
    impl = REGISTRY.impls["gemv.decode/torch_best"]
    point = {"layer": next(iter(__import__("bench.ops.gemv", fromlist=["LAYERS"]).LAYERS)), "dtype": "int4", "batch": 4}
    cols = direction_columns(o, point, impl.bytes(point))
    n = __import__("bench.ops.gemv", fromlist=["LAYERS"]).LAYERS[point["layer"]][0]
    assert cols["write_bytes"] == 2 * 4 * n and cols["read_bytes"] + cols["write_bytes"] == impl.bytes(point)
    assert cols["read_bytes"] > o.bytes(point) - 2 * 4 * n  # torch's int4 layout stores more scales
