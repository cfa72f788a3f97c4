"""Issue 16 item 6: the cpu backend writes a shaped select's result in place.

A select that returns an (n, *s) element stores its k components as the columns of one
(m, k) array (ToArray.element, backends/cpu/cpu.py Launch), for the dense map and the compaction
(where) alike, and shaped.stack hands that array out reshaped, without the stacking copy.
Results are checked against the numpy backend (the oracle) and plain NumPy; the no-copy
claim against the kernel's own output columns (np.shares_memory). The same item's second
half: the cpu module reads each array of shaped elements whole, as one (n, m) view
(backends/cpu_elements.py) or, for unevenly spaced components, one copy.
"""
from __future__ import annotations

import numpy as np
import pytest

import querycompute as qc
from querycompute.run import engine
from querycompute.backends import registry
from querycompute.backends.cpu.cpu_elements import as_2d
from querycompute.sources.shaped import stack

# 0, 1, a few serial chunks' worth, and a parallel run whose last chunk is ragged
# (cpu.SERIAL_MAX = 32768, numba_py.CHUNK = 65536)
SIZES = (0, 1, 1000, 70001)
TOL = {"float16": 2e-2, "float32": 1e-5, "float64": 1e-12}


def rigid(R, x, T):
    return R @ x + T


def rigid_where(R, x, T):
    return x[0] > 0


def flip(R, x, T):
    return R.T * 2


def inputs(n: int, dtype: str, seed: int = 0):
    rng = np.random.default_rng(seed)
    if dtype.startswith("int"):
        R, x, T = (rng.integers(-50, 50, s).astype(dtype) for s in ((n, 3, 3), (n, 3), (n, 3)))
    else:
        R, x, T = (rng.standard_normal(s).astype(dtype) for s in ((n, 3, 3), (n, 3), (n, 3)))
    return R, x, T


def np_rigid(R, x, T):
    return (R @ x[:, :, None])[:, :, 0] + T


def one_allocation(out: np.ndarray) -> bool:
    """C-contiguous, and either owning its data or a plain view (reshape / dtype view) of
    one array that owns exactly those bytes."""
    owner = out if out.base is None else out.base
    return out.flags.c_contiguous and owner.base is None and owner.nbytes == out.nbytes


def check(got, want_backend, want_numpy, dtype):
    assert got.shape == want_numpy.shape and got.dtype == want_numpy.dtype
    assert one_allocation(got)
    if dtype.startswith("int"):
        np.testing.assert_array_equal(got, want_numpy)
        np.testing.assert_array_equal(got, want_backend)
    else:
        np.testing.assert_allclose(got.astype(np.float64), want_numpy.astype(np.float64),
                                   rtol=TOL[dtype], atol=TOL[dtype])
        np.testing.assert_allclose(got.astype(np.float64), want_backend.astype(np.float64),
                                   rtol=TOL[dtype], atol=TOL[dtype])


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int32"])
def test_item6_select_in_place_matches_numpy(dtype):
    sizes = SIZES if dtype == "float32" else SIZES[:3]     # (the parallel flavour: once)
    for n in sizes:
        R, x, T = inputs(n, dtype)
        q = qc.query(R, x, T).select(rigid)
        got = q.on("cpu").to_array()
        check(got, q.on("numpy").to_array(), np_rigid(R, x, T), dtype)


def test_item6_where_select_in_place_matches_numpy():
    for n in SIZES:
        R, x, T = inputs(n, "float32", seed=1)
        q = qc.query(R, x, T).where(rigid_where).select(rigid)
        keep = x[:, 0] > 0
        got = q.on("cpu").to_array()
        check(got, q.on("numpy").to_array(), np_rigid(R[keep], x[keep], T[keep]), "float32")
        # few survivors: the compaction's sparse writer fills the block too
        x[:, 0] = -1
        x[:: 97, 0] = 1
        keep = x[:, 0] > 0
        got = q.on("cpu").to_array()
        check(got, q.on("numpy").to_array(), np_rigid(R[keep], x[keep], T[keep]), "float32")


def test_item6_matrix_results_f_ordered_inputs_and_to_list():
    for n in SIZES:
        R, x, T = inputs(n, "float32", seed=2)
        R = np.asfortranarray(R)                     # F-ordered input, C-ordered result
        q = qc.query(R, x, T).select(flip).on("cpu")
        got = q.to_array()
        assert got.shape == (n, 3, 3) and one_allocation(got)
        np.testing.assert_array_equal(got, np.transpose(R, (0, 2, 1)) * np.float32(2))
        assert q.to_list() == (np.transpose(R, (0, 2, 1)) * np.float32(2)).tolist()
        w = qc.query(R, x, T).where(rigid_where).select(flip).on("cpu").to_array()
        keep = x[:, 0] > 0
        np.testing.assert_array_equal(w, np.transpose(R[keep], (0, 2, 1)) * np.float32(2))
        assert one_allocation(w)
    R, x, T = inputs(50, "float64")
    q = qc.query(R, x, T).select(rigid)
    assert q.on("cpu").to_list() == q.on("numpy").to_list() == q.on("numpy").to_array().tolist()


@pytest.mark.parametrize("where", [False, True])
def test_item6_result_is_the_kernels_own_output_block(where):
    """The pass is marked (ToArray.element = 9), and the array to_array returns shares
    memory with every column the cpu kernel wrote: no stacking copy."""
    R, x, T = inputs(70001, "float32", seed=3)
    q = qc.query(R, x, T)
    q = (q.where(rigid_where) if where else q).select(flip)
    lowered, term, cols, _ = q.lowered("to_array")
    assert lowered.pass_.terminal.element == 9
    prepared = registry.get("cpu").prepare(lowered.pass_)
    raw, _ = prepared.run_quick(cols, (), len(R))
    out = engine.assemble(lowered, raw, term)
    assert len(raw) == 9 and all(np.shares_memory(out, c) for c in raw)
    assert out.flags.c_contiguous and out.base is not None and out.base.base is None
    keep = x[:, 0] > 0 if where else slice(None)
    np.testing.assert_array_equal(out, np.transpose(R[keep], (0, 2, 1)) * np.float32(2))


def test_item6_stack_never_hands_out_an_array_someone_else_holds():
    """Columns of a caller's (m, k) array (what a backend returning views of its input would
    give) are copied, as NumPy's result would be; separate columns are stacked."""
    X = np.arange(12.0).reshape(4, 3)
    out = stack(tuple(X[:, j] for j in range(3)), (3,))
    np.testing.assert_array_equal(out, X)
    assert not np.shares_memory(out, X)
    parts = (np.arange(4.0), np.arange(4.0) + 1)
    np.testing.assert_array_equal(stack(parts, (2,)), np.stack(parts, axis=1))
    for backend in ("numpy", "cpu"):
        got = qc.query(X).select(lambda r: r).on(backend).to_array()
        np.testing.assert_array_equal(got, X)
        assert not np.shares_memory(got, X)


def test_item6_cpu_module_reads_contiguous_arrays_whole():
    """Item 6's second half: the cpu module takes each array of shaped elements as one
    (n, m) argument (numba_py.whole_arrays), so the loop holds 3 base pointers, not 15."""
    R, x, T = inputs(10, "float32")
    src = qc.query(R, x, T).select(rigid).source("cpu")
    assert "def qc_to_array_chunks(c0, c1, n, out0, out1, out2, in_in0, in_in1, in_in2):" in src
    assert "in_in0[i, 8]" in src and "in_in0_2_2" not in src
    text = qc.query(R, x, T).select(rigid).on("cpu").explain()
    assert "each array read whole as one (n, m) array" in text
    assert "the result written in place as one (m, k) array" in text


def test_item6_as_2d_views_evenly_spaced_components_and_copies_the_rest():
    X = np.arange(60.0, dtype=np.float32).reshape(10, 2, 3)
    F = np.asfortranarray(X)
    V = np.arange(30, dtype=np.int64).reshape(10, 3)
    cases = [(X, True), (X[::2], True), (X[::-1], True), (V, True), (np.asfortranarray(V), True),
             (V[:, ::-1], True), (F, False), (X.transpose(0, 2, 1), False), (X[:0], False),
             (X[:1], True)]
    for A, view in cases:
        cols = [A[(slice(None),) + idx] for idx in np.ndindex(A.shape[1:])]
        got = as_2d(cols)
        np.testing.assert_array_equal(got, A.reshape(len(A), int(np.prod(A.shape[1:]))))
        assert np.shares_memory(got, A) == view, (A.shape, A.strides)
    parts = [np.arange(5.0), np.arange(5.0) * 2]           # columns of two arrays: a copy
    np.testing.assert_array_equal(as_2d(parts), np.stack(parts, axis=1))


def test_item6_strided_f_ordered_and_reversed_inputs_match_numpy():
    R, x, T = inputs(2001, "float32", seed=4)
    layouts = [(R[::2], x[::2], T[::2]),                            # sliced along n: views
               (R[:1000], np.ascontiguousarray(x[:1000, ::-1])[:, ::-1],  # reversed components
                np.asfortranarray(T[:1000])),                      # F-ordered vectors: views
               (np.asfortranarray(R[:1000]), x[:1000], T[:1000])]   # F-ordered 3x3: one copy
    for R_, x_, T_ in layouts:
        for where in (False, True):
            q = qc.query(R_, x_, T_)
            q = (q.where(rigid_where) if where else q).select(rigid)
            keep = x_[:, 0] > 0 if where else slice(None)
            got = q.on("cpu").to_array()
            check(got, q.on("numpy").to_array(), np_rigid(R_[keep], x_[keep], T_[keep]), "float32")
