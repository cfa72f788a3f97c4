"""Issue 28 item 2 for the column operations: sort, top-k, distinct, scan, group_by and join
run as steps over ranges of chunks through the morsel scheduler (backends/cpu/cpu_stages.py,
cpu_group.py, cpu_join.py): no prange entry point and no serial twin is called, the results'
bits do not depend on the number of pool threads or the morsel size, and several Python
threads can run column operations at once. The same for long rows (rows_numba.py's row
kernel, rows_columns.py's column tiles, also behind scalarized X.sum(axis=0)): one nogil
entry point over a range of rows or tiles, no prange kernel compiled."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import querycompute as qc
from querycompute._codegen.dialects.numba_py import CHUNK
from querycompute.backends import registry
from querycompute.backends.cpu import morsels

pytestmark = pytest.mark.skipif(not registry.availability("cpu")[0], reason="needs numba")

N = 5 * CHUNK + 7                      # several chunks, a ragged last one


@pytest.fixture(autouse=True)
def _default_morsels():
    yield
    morsels.configure()


def _data():
    rng = np.random.default_rng(28)
    x = (rng.standard_normal(N) * 100).astype(np.float32)
    x[::997] = np.nan
    x[::1009] = -0.0
    keys = rng.integers(0, 50, N).astype(np.int64)
    other = np.arange(0, 60, 2, dtype=np.int64)
    return x, keys, other


def _run_all(x, keys, other) -> tuple:
    """Every column operation once on cpu, with each one's trace rows."""
    q, k = qc.query(x).on("cpu"), qc.query(keys).on("cpu")
    out, names = [], []
    for run in (lambda: q.order_by(lambda v: v).to_array(),
                lambda: q.order_by_descending(lambda v: v).take(9).to_array(),
                lambda: q.distinct().to_array(),
                lambda: q.scan(lambda a, v: a + v, np.float32(0)).to_array(),
                lambda: k.group_by(lambda v: v % 7).agg(s=qc.sum(lambda v: v * 1.5), n=qc.count()),
                lambda: k.join(qc.query(other), lambda a: a, lambda b: b, lambda a, b: a * 100 + b).to_array()):
        res = run()
        out.append({c: np.asarray(v) for c, v in res.items()} if isinstance(res, dict) else np.asarray(res))
        names += [r.name for r in qc.last_trace().kernels]
    return out, names


def _same(a, b) -> None:
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for c in a:
            _same(a[c], b[c])
        return
    assert a.dtype == b.dtype and a.shape == b.shape
    assert a.tobytes() == b.tobytes()              # bits, NaN payloads and -0.0 included


def test_every_column_operation_runs_by_morsels_with_the_same_bits():
    x, keys, other = _data()
    morsels.configure(workers=1, step=1)
    first, names = _run_all(x, keys, other)
    assert not any(n.endswith(("_parallel", "_serial")) for n in names), names
    assert any(n.endswith("_morsels") for n in names)
    for workers, step in ((0, 1), (2, 3), (1, 4)):
        morsels.configure(workers=workers, step=step)
        got, _ = _run_all(x, keys, other)
        for a, b in zip(first, got):
            _same(a, b)
    # and they are the reference's (the float scan's and sums' grouping aside)
    ref = qc.query(x).on("numpy")
    _same(first[0], ref.order_by(lambda v: v).to_array())
    _same(first[1], ref.order_by_descending(lambda v: v).take(9).to_array())
    _same(first[2], ref.distinct().to_array())


def _at_once(run, n: int = 4) -> list:
    """run() in n Python threads released together: their results (any exception fails)."""
    got, errors = [None] * n, []
    start = threading.Barrier(n)

    def work(i):
        try:
            start.wait()
            got[i] = run()
        except BaseException as exc:               # reported below
            errors.append(exc)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert errors == []
    return got


def test_python_threads_run_column_operations_at_once():
    x, keys, other = _data()
    morsels.configure(workers=2, step=1)
    want, _ = _run_all(x, keys, other)
    for res in _at_once(lambda: _run_all(x, keys, other)[0]):
        for a, b in zip(want, res):
            _same(a, b)


def test_a_sort_of_one_chunk_is_one_call():
    """A small input costs one call, as a small fused pass does (no call per radix step)."""
    x = np.random.default_rng(3).standard_normal(1000).astype(np.float32)
    got = qc.query(x).on("cpu").order_by(lambda v: v).to_array()
    np.testing.assert_array_equal(got, np.sort(x, kind="stable"))
    names = [r.name for r in qc.last_trace().kernels]
    radix = [n for n in names if "radix" in n]
    assert len(radix) == 1 and radix[0].endswith("radix_one"), names


# ---- long rows --------------------------------------------------------------------------------
def lse(r):
    return r.max() + np.log(np.exp(r - r.max()).sum())


def _rows_data():
    rng = np.random.default_rng(16)
    X = rng.uniform(-50, 50, (600, 2000)).astype(np.float32)   # 19 units of rows, 10 tiles
    X[3, 5], X[7, 11], X[400, 1999] = np.nan, -0.0, np.inf
    S = rng.uniform(-50, 50, (50_000, 10)).astype(np.float32)  # scalarized: 4 tiles
    return X, S


def _run_rows(X, S) -> tuple:
    """Every long-row kernel once on cpu (row plans, column-tiled plans, the scalarized
    column reduction), with each one's trace rows."""
    q, s = qc.query(X).on("cpu"), qc.query(S).on("cpu")
    out, names = [], []
    for run in (lambda: q.select(lambda r: r.sum()).to_array(),
                lambda: q.select(lse).to_array(),
                lambda: q.select(lambda r: (r * 0.01).prod() + r.min()).to_array(),
                lambda: q.select(lambda r: (r > 40).any()).to_array(),
                q.sum, q.min, q.max, q.mean,
                lambda: s.agg(t=qc.sum, lo=qc.min, hi=qc.max)):
        res = run()
        out.append({c: np.asarray(v) for c, v in res.items()} if isinstance(res, dict) else np.asarray(res))
        names += [r.name for r in qc.last_trace().kernels]
    return out, names


def test_long_rows_run_by_morsels_with_the_same_bits():
    X, S = _rows_data()
    assert "prange" not in qc.query(X).select(lse).source(backend="cpu")
    assert "prange" not in qc.query(X).source(backend="cpu", terminal="sum")
    morsels.configure(workers=1, step=1)
    first, names = _run_rows(X, S)
    assert not any(n.endswith(("_parallel", "_serial")) for n in names), names
    assert {n for n in names} == {"qc_rows_morsels", "qc_columns_morsels"}, names
    for workers, step in ((0, 1), (2, 3), (1, 4), (2, 100)):
        morsels.configure(workers=workers, step=step)
        got, names = _run_rows(X, S)
        if workers == 0 or step == 100:
            assert {n for n in names} == {"qc_rows_inline", "qc_columns_inline"}, names
        for a, b in zip(first, got):
            _same(a, b)
    # the right answers (the float sums' grouping aside): NaN rows / columns, the bool rows
    Xd = X.astype(np.float64)
    np.testing.assert_array_equal(first[3], (X > 40).any(axis=1))
    np.testing.assert_allclose(first[0], Xd.sum(axis=1), rtol=1e-5, atol=1e-2)
    _same(first[5], X.min(axis=0))
    _same(first[6], X.max(axis=0))


def test_python_threads_run_long_rows_at_once():
    X, S = _rows_data()
    morsels.configure(workers=2, step=1)
    want, _ = _run_rows(X, S)
    for res in _at_once(lambda: _run_rows(X, S)[0]):
        for a, b in zip(want, res):
            _same(a, b)
