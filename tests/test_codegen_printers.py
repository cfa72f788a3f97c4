"""Printer tables, literal spelling, helper emission and the launch planner (no device)."""
from __future__ import annotations

import numpy as np
import pytest

from querycompute._codegen.ir import expr as E
from querycompute._codegen import launch as L
from querycompute._codegen.ir import program as P
from querycompute._codegen.dialects.cuda import Cuda
from querycompute._codegen.dialects.metal import Metal
from querycompute._codegen.dialects.opencl import OpenCL
from querycompute._codegen.errors import InvalidName
from querycompute._codegen.ops.reduce import decode
from querycompute._codegen.gpu import render

import gpu_passes as G


def map_pass(dtype="float32", outputs=None, name="qc_w4") -> P.Pass:
    a, b = E.Load(0, dtype), E.Load(1, dtype)
    outs = outputs or (E.Binary("add", E.Binary("mul", a, b, dtype), E.Const(1, dtype), dtype),)
    prog = P.ElementProgram((P.InputSpec("a", dtype), P.InputSpec("b", dtype)), (), (), tuple(outs))
    return P.Pass(prog, P.ToArray(), name)


def test_each_dialect_spells_barrier_and_shared_memory_in_its_table():
    assert Cuda.BARRIER == "__syncthreads()" and Cuda.SHARED == "__shared__"
    assert OpenCL.BARRIER == "barrier(CLK_LOCAL_MEM_FENCE)" and OpenCL.SHARED == "__local"
    assert Metal.BARRIER == "threadgroup_barrier(mem_flags::mem_threadgroup)" and Metal.SHARED == "threadgroup"
    assert Cuda.THREAD["local_id"] == "threadIdx.x" and OpenCL.THREAD["group_id"] == "get_group_id(0)"
    assert Metal.THREAD["num_groups"] == "qc_ngroups" and OpenCL.SHUFFLE_DOWN == ""


@pytest.mark.parametrize("printer, dtype, value, text", [
    (Cuda, "int32", -2 ** 31, "(-2147483647 - 1)"),
    (Cuda, "int64", -2 ** 63, "(-9223372036854775807LL - 1LL)"),
    (OpenCL, "uint64", 2 ** 64 - 1, "18446744073709551615UL"),
    (OpenCL, "int8", -5, "((char)-5)"),
    (Cuda, "float32", 0.1, "0.1f"),
    (Cuda, "float64", 1e300, "1e+300"),
    (OpenCL, "float32", float("nan"), "as_float(0x7FC00000u)"),
    (Cuda, "float32", float("-inf"), "__uint_as_float(0xFF800000u)"),
    (Metal, "float16", float("inf"), "as_type<float>(0x7F800000u)"),
    (Metal, "bool", True, "true"),
])
def test_literals_are_exact_and_never_overflow(printer, dtype, value, text):
    assert printer().literal(value, dtype) == text


def test_helpers_are_emitted_only_when_used():
    plain = render(map_pass(), "cuda").source
    assert "qc_floordiv" not in plain and "static __device__" not in plain
    a, b = E.Load(0, "int32"), E.Load(1, "int32")
    src = render(map_pass("int32", (E.Binary("floordiv", a, b, "int32"),)), "cuda").source
    assert src.count("qc_floordiv_int32(int a, int b)") == 1 and "qc_mod_int32" not in src


def test_signed_arithmetic_wraps_through_unsigned_types():
    a, b = E.Load(0, "int32"), E.Load(1, "int32")
    src = render(map_pass("int32", (E.Binary("mul", a, b, "int32"),)), "opencl").source
    assert "= (int)((uint)x_a * (uint)x_b);" in src


def test_opencl_enables_fp64_only_when_a_double_is_used():
    assert "cl_khr_fp64" not in render(map_pass("float32"), "opencl").source
    src = render(map_pass("float64"), "opencl").source
    assert "#pragma OPENCL EXTENSION cl_khr_fp64 : enable" in src
    assert "#pragma OPENCL FP_CONTRACT OFF" in src
    assert "-cl-fast-relaxed-math" not in render(map_pass(), "opencl").options


def test_float16_uses_vload_half_in_opencl_and_rounds_after_each_op():
    src = render(map_pass("float16"), "opencl").source
    assert "vload_half(i, in_a)" in src and "vstore_half_rte(" in src
    assert "qc_round_f16(qc_round_f16(x_a * x_b) + 1.0f)" in src


def test_kernel_names_come_from_the_pass_name_and_role():
    names = [k.name for k in render(G.shape_passes("float32")[2], "metal").kernels]
    assert names == ["qc_reduce_float32_reduce_partials", "qc_reduce_float32_reduce_partials_strided",
                     "qc_reduce_float32_reduce_finalize"]
    names = [k.name for k in render(G.shape_passes("float32")[2], "cuda").kernels]    # one launch
    assert names == ["qc_reduce_float32_reduce_partials", "qc_reduce_float32_reduce_partials_strided"]
    names = [k.name for k in render(G.shape_passes("int8")[1], "metal").kernels]
    assert names == ["qc_filter_int8_compact_count", "qc_filter_int8_compact_count_strided",
                     "qc_filter_int8_compact_scan_partials", "qc_filter_int8_compact_scan_blocks",
                     "qc_filter_int8_compact_scan_downsweep", "qc_filter_int8_compact_scatter",
                     "qc_filter_int8_compact_scatter_strided"]


def test_compaction_never_uses_atomics(monkeypatch):
    """No atomic append; CUDA's single pass (its default: compact_gpu.ALGORITHM) takes its
    tile from an atomic ticket (issue 18), and reduce-then-scan has no atomic at all."""
    from querycompute._codegen.ops.compact import gpu as compact_gpu
    for d in ("opencl", "metal"):
        assert "atomic" not in render(G.shape_passes("float32")[1], d).source.lower()
    atomics = [line for line in render(G.shape_passes("float32")[1], "cuda").source.splitlines()
               if "atomicAdd(" in line]
    assert len(atomics) == 2 and all("ticket[" in line for line in atomics)   # both variants
    monkeypatch.setitem(compact_gpu.ALGORITHM, "cuda", "reduce_then_scan")
    assert "atomic" not in render(G.shape_passes("float32")[1], "cuda").source.lower()


def test_invalid_names_are_rejected_with_what_to_do():
    with pytest.raises(InvalidName, match="input name '2x' is not a valid C identifier"):
        prog = P.ElementProgram((P.InputSpec("2x", "float32"),), (), (), (E.Load(0, "float32"),))
        render(P.Pass(prog, P.ToArray(), "qc_bad"), "cuda")
    with pytest.raises(ValueError, match="unknown GPU dialect 'wgsl'"):
        render(map_pass(), "wgsl")


# ---- launch planning ----------------------------------------------------------------------
def test_elementwise_plan_uses_wide_tiles_and_picks_the_variant():
    ks = render(map_pass("float32"), "opencl")
    assert ks.elems_per_thread == 4 and ks.shape == "elementwise"
    assert L.plan(ks, 0, True) == []
    (c,) = L.plan(ks, 1025, True)
    assert (c.name, c.grid, c.block) == ("qc_w4_map", 2, 256)
    (s,) = L.plan(ks, 1025, False)
    assert s.name == "qc_w4_map_strided" and [a.kind for a in s.kernel.args] == \
        ["input", "input", "stride", "stride", "n", "output"]
    assert L.output_sizes(ks, 1025) == [1025]
    assert render(map_pass("int8"), "cuda").elems_per_thread == 16


def test_reduce_grid_depends_only_on_n_and_is_capped():
    ks = render(G.shape_passes("float32")[2], "metal")         # two launches: no device fence
    big = L.plan(ks, 10 ** 9, True)
    assert [l.grid for l in big] == [L.MAX_REDUCE_BLOCKS, 1]
    assert big[1].values == {"num_partials": L.MAX_REDUCE_BLOCKS}
    empty = L.plan(ks, 0, True)
    assert [l.grid for l in empty] == [1, 1]       # identities come from the device
    assert L.scratch_sizes(ks, 0)["part_acc0"] == 1
    ks = render(G.shape_passes("float32")[2], "cuda")          # one launch: the last block finalizes
    (big,) = L.plan(ks, 10 ** 9, True)
    assert big.grid == L.MAX_REDUCE_BLOCKS and big.values["num_partials"] == L.MAX_REDUCE_BLOCKS
    (empty,) = L.plan(ks, 0, True)
    assert empty.grid == 1
    assert L.scratch_sizes(ks, 0)["part_acc0"] == 1 and L.scratch_sizes(ks, 0)["blocks_done"] == 1


def test_compaction_plan_scans_one_count_per_block(monkeypatch):
    """CUDA's look-back (its default): init + one pass over the tiles, one status word a tile;
    reduce-then-scan (the other dialects', CUDA's on request): count, the scan operator's
    multi-block scan of the tile counts (ceil(tiles / T) blocks), scatter."""
    from querycompute._codegen.ops.compact import gpu as compact_gpu
    ks = render(G.shape_passes("float32")[1], "cuda")
    launches = L.plan(ks, 100_000, True)
    assert [l.kernel.role for l in launches] == ["init", "scatter"]
    tiles = -(-100_000 // (256 * ks.elems_per_thread))
    assert launches[0].grid == 1 and launches[1].grid == tiles
    assert launches[0].values == launches[1].values == {"num_blocks": tiles}
    assert L.scratch_sizes(ks, 100_000) == {"tile_status": tiles, "ticket": 1, "total": 1}
    for d in ("opencl", "cuda"):
        with monkeypatch.context() as m:
            m.setitem(compact_gpu.ALGORITHM, "cuda", "reduce_then_scan")
            ks = render(G.shape_passes("float32")[1], d)
        launches = L.plan(ks, 10_000_000, True)
        assert [l.kernel.role for l in launches] == ["count", "partials", "scan", "downsweep", "scatter"]
        tiles = -(-10_000_000 // (256 * ks.elems_per_thread))
        per_block = int(launches[1].kernel.grid.split("/")[1])
        scan_blocks = -(-tiles // per_block)
        assert [l.grid for l in launches] == [tiles, scan_blocks, 1, scan_blocks, tiles]
        assert launches[1].values == {"n": tiles} and launches[2].values == {"num_blocks": scan_blocks}


def test_decode_reduce_builds_base_py_results():
    ks = render(G.shape_passes("int32")[2], "opencl")
    kinds = [s.role for s in ks.result_slots]
    assert kinds == ["value", "count", "index", "value", "value", "flag", "flag", "value", "value", "value"]
    raw = [np.int64(5), np.int64(2), np.int64(2 ** 63 - 1), np.int32(0), np.int32(0),
           np.uint32(1), np.uint32(0), np.int32(-3), np.int32(9), np.int32(9)]
    assert decode(ks, raw) == [5, 2, (-1, (0, 0)), True, False, -3, 9, 9]
