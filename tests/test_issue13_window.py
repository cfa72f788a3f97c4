"""Issue 13 items 1 and 5: windowed compaction (program.ToArray(window=(lo, hi))), the kernel
side of `where(...).skip(a).take(b)`: only the survivors of rank lo <= r < hi are stored,
and blocks / chunks whose survivors all lie outside the window do no element work.

Every backend that runs here (numpy, cpu, opencl on pocl, CUDA C and MSL through the CPU
harness) is compared with slicing the full compaction (the numpy reference without a
window); the cpu backend's chunk selection is checked against its definition.
"""
from __future__ import annotations

import numpy as np
import pytest
from compile_checks import ARCHS, ptx_of
from hypothesis import given, settings
from hypothesis import strategies as st

from querycompute._codegen.ir import expr as E
from querycompute._codegen import gpu
from querycompute._codegen.dialects import numba_py
from querycompute._codegen.dialects.numba_py import CHUNK
from querycompute._codegen.ir.program import ElementProgram, Filter, InputSpec, ParamSpec, Pass, ToArray
from querycompute.backends.cpu.cpu import CpuBackend
from querycompute.backends.reference.numpy_ref import NumpyBackend

F, V = E.Load(0, "int32"), E.Load(1, "float32")
PARAMS = (ParamSpec("lo", "int64"), ParamSpec("hi", "int64"), ParamSpec("t", "int32"))
# keep flag > t (t a captured value: the filter reads a param besides the window)
PROG = ElementProgram((InputSpec("flag", "int32"), InputSpec("value", "float32")), PARAMS,
                      (Filter(E.Compare("gt", F, E.Param("t", "int32"))),), (V, E.Index()))
WINDOWED = Pass(PROG, ToArray(window=("lo", "hi")), "w_take")
FULL = Pass(PROG, ToArray(), "w_full")
CPU_N = 3 * CHUNK + 123                  # the parallel entry points, a ragged last chunk
GPU_TILE = 256 * 2                       # compaction tile: 16-byte runs of the int64 index output


def data(n: int, density: float = 0.3, seed: int = 0):
    rng = np.random.default_rng(seed)
    return (rng.random(n) < density).astype(np.int32), rng.random(n).astype(np.float32)


def params(lo, hi, t=0):
    return (np.int64(lo), np.int64(hi), np.int32(t))


def full(inputs, t=0):
    return NumpyBackend().prepare(FULL).run_quick(inputs, params(0, 0, t), len(inputs[0]))[0]


def windows(count: int, chunk: int) -> list[tuple[int, int]]:
    """Empty, at the start, past the end, straddling the end, spanning chunks, everything."""
    return [(0, 0), (7, 7), (0, 10), (count + 5, count + 50), (max(0, count - 3), count + 10),
            (chunk // 3, chunk // 3 + 2 * chunk), (chunk - 1, chunk + 1), (0, count), (0, 2 ** 62)]


def check(got, ref, lo, hi, where):
    for g, r in zip(got, ref):
        assert g.dtype == r.dtype and np.array_equal(g, r[lo:hi]), (
            f"{where} window [{lo}, {hi}): {len(g)} elements, expected {len(r[lo:hi])}")


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
@pytest.mark.parametrize("n", [0, 1, 1000, CPU_N])
def test_item1_window_matches_slicing_numpy_cpu(backend, n):
    prepared = (NumpyBackend() if backend == "numpy" else CpuBackend()).prepare(WINDOWED)
    inputs = data(n)
    ref = full(inputs)
    for lo, hi in windows(len(ref[0]), CHUNK * 3 // 10):      # ~a chunk's worth of survivors
        check(prepared.run_quick(inputs, params(lo, hi), n)[0], ref, lo, hi, f"{backend} n={n}")


def test_item1_window_matches_slicing_opencl(ocl):
    prepared = ocl.prepare(WINDOWED)
    for n in (0, 1, GPU_TILE - 1, 5 * GPU_TILE + 7, 100_000):
        inputs = data(n)
        ref = full(inputs)
        for lo, hi in windows(len(ref[0]), GPU_TILE * 3 // 10):
            check(prepared.run_quick(inputs, params(lo, hi), n)[0], ref, lo, hi, f"opencl n={n}")
    strided = [a[::3] for a in data(3 * (5 * GPU_TILE + 7))]   # the strided kernel variants
    ref = full(strided)
    check(prepared.run_quick(strided, params(40, 400), len(strided[0]))[0], ref, 40, 400, "opencl strided")


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 3000), st.integers(0, 1200), st.integers(0, 1200), st.sampled_from([0.0, 0.05, 0.5, 1.0]),
       st.integers(-1, 1))
def test_item4_window_property(ocl, n, lo, length, density, t):
    inputs = data(n, density, seed=n)
    ref = full(inputs, t)
    for prepared in (NumpyBackend().prepare(WINDOWED), CpuBackend().prepare(WINDOWED), ocl.prepare(WINDOWED)):
        check(prepared.run_quick(inputs, params(lo, lo + length, t), n)[0], ref, lo, lo + length, "property")


@pytest.mark.parametrize("dialect", ["cuda", "metal"])
def test_item1_window_matches_slicing_in_the_harness(dialect):
    from harness import plans, runner
    if not runner.available()[0]:
        pytest.skip(runner.available()[1])
    ks = gpu.render(WINDOWED, dialect)
    module = plans.module_for([ks])
    n = 5 * GPU_TILE + 7
    inputs = data(n)
    ref = full(inputs)
    for lo, hi in windows(len(ref[0]), GPU_TILE * 3 // 10):
        got = plans.run_kernel_set(ks, module, inputs, params(lo, hi), schedule="free")
        check(got, ref, lo, hi, dialect)


def test_item1_window_kernel_launches_and_sizes():
    from querycompute._codegen import launch as L
    ks = gpu.render(WINDOWED, "opencl")
    assert ks.window == (0, 1) and ks.shape == "compact"
    assert L.output_sizes(ks, 10_000, params(100, 110)) == [10, 10]    # the window, not n
    assert L.output_sizes(ks, 50, params(0, 2 ** 62)) == [50, 50]
    scatter = next(k for k in ks.source.split("\n\n") if "void w_take_compact_scatter(" in k)
    # a block holding no survivor of the window skips its element work
    assert "if (tile_end > p_lo && tile_start < p_hi) {" in scatter
    with pytest.raises(ValueError, match="0 <= lo <= hi"):
        L.output_sizes(ks, 10, params(5, 4))


def test_item1_window_needs_a_filter_and_int64_params():
    no_filter = ElementProgram(PROG.inputs, PARAMS, (), (V,))
    with pytest.raises(ValueError, match="needs a filter"):
        Pass(no_filter, ToArray(window=("lo", "hi")), "w_bad")
    with pytest.raises(ValueError, match="two int64 params"):
        Pass(PROG, ToArray(window=("lo", "t")), "w_bad")


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_item1_window_bounds_are_checked(backend):
    prepared = (NumpyBackend() if backend == "numpy" else CpuBackend()).prepare(WINDOWED)
    with pytest.raises(ValueError, match="0 <= lo <= hi"):
        prepared.run_quick(data(10), params(3, 2), 10)


# ---- the cpu backend visits only the chunks holding survivors of the window ----------------
def window_chunks():
    from querycompute.backends.cpu.cpu import _load
    ns = _load(WINDOWED)[0]
    return ns["w_take_window_chunks"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 5), min_size=1, max_size=12), st.integers(0, 40), st.integers(0, 40))
def test_item5_cpu_writes_only_chunks_in_the_window(counts, lo, length):
    """<pass>_window_chunks(offsets, lo, hi) -> [first, end): the write pass loops over
    exactly these chunks, so chunks whose survivors miss the window evaluate nothing.
    Every chunk holding a survivor of the window is in the range; every chunk in it either
    holds one or has no survivor at all (its loop ends before its first element)."""
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    hi = lo + length
    first, end = window_chunks()(offsets, np.int64(lo), np.int64(hi))
    hits = {c for c in range(len(counts)) if max(offsets[c], lo) < min(offsets[c + 1], hi)}
    assert hits <= set(range(first, end))
    assert all(c in hits or counts[c] == 0 for c in range(first, end))
    if hits:
        assert first == min(hits) and end - 1 == max(hits)


def test_item5_cpu_write_pass_loops_over_the_window_chunks_only():
    src = numba_py.render(WINDOWED)
    write = src[src.index("def w_take_write("):]
    assert "first, end = w_take_window_chunks(offsets, p_lo, p_hi)" in write
    assert "for c in range(max(first, c0), min(end, c1)):" in write
    # a window of 5 survivors in the middle of 3 full chunks: one chunk's elements are visited
    counts = [CHUNK // 2] * 3
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    first, end = window_chunks()(offsets, np.int64(CHUNK // 2 + 10), np.int64(CHUNK // 2 + 15))
    assert (first, end) == (1, 2)


def test_item4_windowed_compaction_compiles_with_nvrtc():
    ks = gpu.render(WINDOWED, "cuda")
    for arch in ARCHS:
        ptx_of(ks, arch, "window.cu")
