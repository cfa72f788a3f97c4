"""Issue 11 item 9: Metal SIMD groups are not always 32 lanes wide (Apple GPUs: 32; AMD: 32
or 64; Intel: 8 to 32), and Metal compiles with fast math unless told otherwise.

The generated reductions run through the CPU harness with SIMD groups of 8, 16, 32 and 64
lanes and must give NumPy's answer at every width; the printed source must carry the
threadgroup-size limit and ask for no fast math and no contraction."""
from __future__ import annotations

import dataclasses
import re
from functools import lru_cache

import numpy as np
import pytest

import querycompute as qc
from harness import plans, runner
from harness.passes import assert_same as assert_same_raw
from harness.passes import data, expected, passes
from harness.runner import HarnessError
from querycompute._codegen import gpu
from querycompute._codegen.ir import kernel_ir as K
from querycompute._codegen.lower import block as lower_block
from querycompute._codegen.launch import BLOCK
from querycompute.backends.metal.metal import MetalBackend
from querycompute.run.engine import assemble
from querycompute.graph.terminals import AggSpec

needs_cxx = pytest.mark.skipif(not runner.available()[0], reason=runner.available()[1])

WIDTHS = [8, 16, 32, 64]
SIZES = [1, 255, 257, 10_007]


# ---- the queries: W1, min / max, count, first and multi-aggregate reductions -------------------
def w1(x):
    return qc.query(x).select(lambda v: v * 2).where(lambda v: v > 1000).select(lambda v: v + 100)


def plus_one(x):
    return qc.query(x).select(lambda v: v + 1)


def over_500(x):
    return qc.query(x).where(lambda v: v > 500)


def _w1_numpy(x):
    v = x * x.dtype.type(2)
    return (v[v > 1000] + x.dtype.type(100)).sum()


# Only all-32-bit accumulators take Metal's SIMD-group shuffle tree (W1's float32 sum; the
# any / all / fold / min / max passes of harness/passes.py); a count or an index (int64) takes
# the shared-memory tree, and so does min / max through the query layer (it counts too).
AGG3 = dict(total=qc.sum, lo=qc.min, hi=qc.max)
MIXED = dict(total=qc.sum, peak=qc.max, n=qc.count)

# name -> (query builder, terminal as Query.lowered takes it, NumPy's answer)
CASES = {
    "w1_sum": (w1, "sum", _w1_numpy),
    "min": (plus_one, AggSpec("min", None, None), lambda x: np.min(x + x.dtype.type(1))),
    "max": (plus_one, AggSpec("max", None, None), lambda x: np.max(x + x.dtype.type(1))),
    "count": (over_500, "count", lambda x: int(np.count_nonzero(x > 500))),
    "first": (over_500, AggSpec("first", None, None),
              lambda x: x[x > 500][0] if (x > 500).any() else None),
    "agg3": (plus_one, qc.agg(**AGG3), lambda x: plus_one(x).on("numpy").agg(**AGG3)),
    "agg_mixed": (over_500, qc.agg(**MIXED), lambda x: over_500(x).on("numpy").agg(**MIXED)),
}
DTYPES = ["float32", "int32"]


def exact_data(dtype: str, n: int, seed: int) -> np.ndarray:
    """Integers below 700 (W1 keeps 2v > 1000, adds 100: at most 1498 per element), so every
    float32 partial sum of 10_007 elements stays below 2**24 and is exact in any order: a
    reduction tree that drops or doubles a SIMD group's result can't hide in rounding. The
    smallest and largest values sit in the last SIMD groups of a block."""
    rng = np.random.default_rng(seed)
    x = rng.integers(1, 699, n).astype(dtype)
    if n > 250:
        x[250] = 0                      # lane 250 of block 0: SIMD group 15 at width 16
        x[n - 1] = 699
    return x


def lowered(name: str, x: np.ndarray):
    """(lowered plan, terminal request, Metal kernel set) of case `name` on x; the pass is
    renamed after the case, so every case's kernels compile together in one module."""
    build, term, _ = CASES[name]
    low, req, _, _ = build(x).lowered(term)
    p = dataclasses.replace(low.pass_, name=f"m9_{name}_{x.dtype}")
    return low, req, gpu.render(p, "metal")


@lru_cache(maxsize=None)
def metal_module(width: int) -> runner.Module:
    """Every case's Metal kernels in one module: one g++ run per SIMD width."""
    sets = [lowered(name, np.zeros(4, dtype))[2] for name in CASES for dtype in DTYPES]
    for dtype in ("float32", "int32", "uint32"):
        for kind in ("reduce_plain", "reduce_filtered"):
            sets.append(gpu.render(passes(dtype)[kind], "metal"))
    return plans.module_for(sets, simd_width=width)


def run_metal(name: str, x: np.ndarray, width: int):
    """What the metal backend would return for case `name` on x, at SIMD width `width`."""
    low, req, ks = lowered(name, x)
    raw = plans.run_kernel_set(ks, metal_module(width), [x], schedule="free" if len(x) > 1000 else "alternate")
    return assemble(low, raw, req)


def numpy_answer(name: str, x: np.ndarray):
    return CASES[name][2](x)


def assert_equal(got, want):
    if isinstance(want, dict):
        assert isinstance(got, dict) and got.keys() == want.keys(), (got, want)
        for k in want:
            assert_equal(got[k], want[k])
        return
    if want is None:
        assert got is None
        return
    assert np.asarray(got).dtype == np.asarray(want).dtype, (got, want)
    assert got == want, (got, want)


# ---- the reductions at every SIMD width ----------------------------------------------------------
@needs_cxx
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["w1_sum", "min", "max", "count", "first"])
def test_item9_reductions_match_numpy_at_every_simd_width(name, dtype, width):
    for n in SIZES:
        x = exact_data(dtype, n, seed=n)
        assert_equal(run_metal(name, x, width), numpy_answer(name, x))


@needs_cxx
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", ["agg3", "agg_mixed"])
def test_item9_multi_aggregate_reduce_at_every_simd_width(name, width):
    for dtype in DTYPES:
        for n in SIZES:
            x = exact_data(dtype, n, seed=n + 1)
            got = run_metal(name, x, width)
            assert_equal(got, numpy_answer(name, x))
            if name == "agg3":       # and plain NumPy agrees with the numpy backend
                y = x + x.dtype.type(1)
                assert_equal(got, {"total": np.sum(y), "lo": np.min(y), "hi": np.max(y)})


@needs_cxx
@pytest.mark.parametrize("width", WIDTHS)
def test_item9_every_aggregate_kind_with_edge_values_at_every_simd_width(width):
    """NaN, infinities, extremes (harness/passes.py data) through any / all / fold and the
    filtered multi-aggregate, on partial blocks."""
    for dtype in ("float32", "int32", "uint32"):
        for kind in ("reduce_plain", "reduce_filtered"):
            ks = gpu.render(passes(dtype)[kind], "metal")
            for n in (1, 255, 257, 1000):
                x = data(dtype, n, seed=n)
                got = plans.run_kernel_set(ks, metal_module(width), [x])
                assert_same_raw(kind, dtype, got, expected(kind, dtype, x))


@needs_cxx
def test_item9_harness_catches_a_tree_that_assumes_32_lanes(monkeypatch):
    """The lowering with the width fixed at 32 (what it was before) sums a SIMD group twice at
    width 16, drops the upper half at 64, and is right at 32: the harness at other widths is
    what catches it."""
    monkeypatch.setattr(lower_block, "SIMD_WIDTH", K.KConst(32, "int32"))
    low, req, ks = lowered("w1_sum", np.zeros(4, np.float32))
    assert "threads_per_simdgroup" not in ks.source
    x = exact_data("float32", 10_007, seed=3)
    want = numpy_answer("w1_sum", x)
    for width in (16, 32, 64):
        raw = plans.run_kernel_set(ks, plans.module_for([ks], simd_width=width), [x], schedule="free")
        got = assemble(low, raw, req)
        assert (got == want) == (width == 32), (width, got, want)


# ---- the harness at other widths keeps its checks ----------------------------------------------
LANE_PROBE = r"""
#include <metal_stdlib>
using namespace metal;
kernel void probe(device uint* active [[buffer(0)]], device uint* width [[buffer(1)]],
                  device int* below [[buffer(2)]],
                  uint lid [[thread_position_in_threadgroup]],
                  uint lane [[thread_index_in_simdgroup]],
                  uint w [[threads_per_simdgroup]]) {
    active[lid] = simd_sum(1u);                                  // live lanes of my SIMD group
    width[lid] = w;
    below[lid] = simd_shuffle_down(int(lid), (ushort)(w / 2));   // poison from a missing lane
}
"""
DIVERGENT = r"""
#include <metal_stdlib>
using namespace metal;
kernel void divergent(device int* out [[buffer(0)]], uint lane [[thread_index_in_simdgroup]],
                      uint w [[threads_per_simdgroup]]) {
    if (lane == w - 1) out[lane] = simd_sum(1);
    else out[lane] = simd_max(1);
}
"""


@needs_cxx
@pytest.mark.parametrize("width", WIDTHS)
def test_item9_harness_models_partial_simd_groups_at_every_width(width):
    block = 100                                  # the last SIMD group is partial at every width
    active, seen, below = np.zeros(block, np.uint32), np.zeros(block, np.uint32), np.zeros(block, np.int32)
    runner.build(LANE_PROBE, "metal", simd_width=width).kernel("probe").launch(1, block, [active, seen, below])
    lid = np.arange(block)
    group_start = lid // width * width
    np.testing.assert_array_equal(active, np.minimum(width, block - group_start))
    np.testing.assert_array_equal(seen, width)
    src = lid + width // 2
    inside = src < group_start + width           # else: the lane keeps its own value
    want = np.where(inside, np.where(src < block, src, -1), lid)   # a missing lane reads poison
    np.testing.assert_array_equal(below, want)


@needs_cxx
@pytest.mark.parametrize("width", WIDTHS)
def test_item9_harness_reports_divergent_simd_operations_at_every_width(width):
    out = np.zeros(256, np.int32)
    with pytest.raises(HarnessError, match="divergent"):
        runner.build(DIVERGENT, "metal", simd_width=width, defines={"QCH_TIMEOUT_S": 5}) \
            .kernel("divergent").launch(1, 256, [out])


def test_item9_cuda_warps_stay_32_lanes():
    with pytest.raises(ValueError, match="32"):
        runner.build("kernel", "cuda", simd_width=16)


# ---- the printed source ---------------------------------------------------------------------------
@pytest.mark.parametrize("source", ["w1", "reduce_plain"])
def test_item9_metal_source_sizes_the_tree_by_threads_per_simdgroup(source):
    p = lowered("w1_sum", np.zeros(4, np.float32))[0].pass_ if source == "w1" else passes("float32")[source]
    src = MetalBackend().source(p)
    assert "uint qc_simd_width [[threads_per_simdgroup]]" in src
    assert "for (int offset = simd_width / 2; offset > 0; offset >>= 1)" in src
    assert "lane < 256 / simd_width" in src
    # one slot per SIMD group of the narrowest width the tree supports
    sizes = {int(s) for s in re.findall(r"threadgroup float sh_acc\d+\[(\d+)\];", src)}
    assert sizes == {BLOCK // lower_block.MIN_SIMD_WIDTH}
    assert not re.search(r"offset = (16|8|4);", src)


def test_item9_metal_kernels_declare_the_launch_block_size():
    for name in ("w1_sum", "agg_mixed"):
        src = MetalBackend().source(lowered(name, np.zeros(4, np.float32))[0].pass_)
        kernels = re.findall(r"kernel void \w+\(", src)
        heads = re.findall(rf"\[\[max_total_threads_per_threadgroup\({BLOCK}\)\]\]\nkernel void \w+\(", src)
        assert kernels and len(heads) == len(kernels)
    shapes = MetalBackend().launch_shape(lowered("w1_sum", np.zeros(4, np.float32))[0].pass_, 10_007)
    assert {s["block"] for s in shapes} == {(BLOCK,)}


def test_item9_metal_never_contracts_or_uses_fast_math():
    backend = MetalBackend()
    ks = backend.kernel_set(lowered("w1_sum", np.zeros(4, np.float32))[0].pass_)
    # what the runtime / `metal` compiler must be given (MSL before 3.2 has no pragma for it)
    assert "-fno-fast-math" in ks.options and "-ffp-contract=off" in ks.options
    assert "// compile options: -fno-fast-math -ffp-contract=off" in ks.source
    # what MSL 3.2+ reads from the source itself
    lines = ks.source.splitlines()
    start = lines.index("#if __METAL_VERSION__ >= 320")
    assert lines[start + 1:start + 4] == ["#pragma METAL fp math_mode(safe)",
                                          "#pragma METAL fp contract(off)", "#endif"]
    assert lines.index("#include <metal_stdlib>") < start < min(
        i for i, line in enumerate(lines) if "kernel void" in line)
    # and the harness compiles Metal (and CUDA) without contraction, as the promise says
    assert "-ffp-contract=off" in runner.FLAGS and "-fno-fast-math" in runner.FLAGS


@needs_cxx
def test_item9_harness_enforces_max_total_threads_per_threadgroup():
    ks = gpu.render(passes("float32")["map"], "metal")
    kernel = plans.module_for([ks]).kernel(ks.kernels[0].name)
    assert kernel.info.max_threads == BLOCK
    x = np.zeros(4 * BLOCK, np.float32)
    outs = [np.zeros(len(x), np.float32), np.zeros(len(x), np.int64)]
    with pytest.raises(HarnessError, match="max_total_threads_per_threadgroup"):
        kernel.launch(1, 2 * BLOCK, [x, np.int64(len(x)), *outs])
