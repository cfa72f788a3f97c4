"""The hot path (querycompute/run/warm.py): a Query run again with the same terminal skips key
building and translation. Whatever changed between calls (a lambda's captured value or its
type, a column's dtype or shape in place, the terminal, the lambda itself, the backend auto
picks) must give the same answer as a fresh query; and qc.last_trace(), built lazily after
a hot call, must describe that call."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import querycompute as qc
from querycompute.backends import registry


def hot(q):
    return q._hot


def test_repeat_call_takes_the_hot_path_and_its_trace_is_built_on_request():
    x = np.arange(1000, dtype=np.float32)
    q = qc.query(x).select(lambda v: v * 2).on("cpu")
    first = q.sum()
    assert hot(q) is False        # ran once: a query built per call never pays for an entry
    assert qc.last_trace().kernels[0].cache in ("compiled", "disk", "memory")
    assert q.sum() == first and hot(q)          # the second run makes it hot
    again = q.sum()
    assert again == first == np.float32((x * 2).sum()) and type(again) is np.float32
    t = qc.last_trace()
    assert (t.backend, t.terminal, t.n) == ("cpu", "sum", 1000)
    assert [k.cache for k in t.kernels] == ["memory"] and t.total_ms > 0
    assert qc.last_trace() is t                   # built once


def test_per_call_lambdas_are_checked_by_code_object():
    x = np.arange(100, dtype=np.int64)
    q = qc.query(x).on("cpu")
    for k in range(3):
        assert q.count(lambda v: v > 10) == 89
        assert q.count(lambda v: v % 3 == 0) == 34        # another lambda: another kernel
    assert q.first(lambda v: v > 41) == 42
    assert q.first(lambda v: v > 1000, default=-1) == -1   # a default: not a shared request


def test_captured_values_and_their_types_are_read_every_call():
    x = np.arange(10, dtype=np.int32)
    q = qc.query(x).on("cpu")
    limit = 5
    results = []
    for limit in (5, 7, 2.5, np.int8(8)):
        results.append(q.count(lambda v: v > limit))
    assert results == [4, 2, 7, 1]
    scale = 2
    q2 = q.select(lambda v: v * scale)
    assert q2.sum() == 90
    scale = 3
    assert q2.sum() == 135
    scale = 0.5                                  # int32 * float -> float64, as NumPy
    got = q2.sum()
    assert got == 22.5 and type(got) is np.float64


def test_columns_changed_in_place_are_seen():
    x = np.arange(8, dtype=np.float32)
    q = qc.query(x).on("cpu")
    assert q.sum() == 28
    x[:] = 1
    assert q.sum() == 8                            # deferred: values are read every call
    x.dtype = np.int32                              # same buffer, reinterpreted
    got = q.sum()
    assert got == x.sum() and type(got) is np.int64
    x.shape = (2, 4)                                # now 2 elements of shape (4,) (issue 16)
    assert np.array_equal(q.sum(), x.sum(axis=0))
    x.shape = (8,)
    assert q.sum() == x.sum()


def test_zip_and_range_sources_repeat():
    a = np.arange(5, dtype=np.float64)
    b = np.arange(5, dtype=np.int32)
    q = qc.query(a, b).select(lambda u, w: u * w).on("cpu")
    assert q.sum() == q.sum() == 30.0
    r = qc.range(10, 20).on("cpu")
    assert r.sum() == r.sum() == 145


def test_alternating_terminals_and_agg_requests():
    x = np.array([1.0, np.nan, 3.0], dtype=np.float32)
    q = qc.query(x).where(lambda v: v > 0).on("cpu")
    for _ in range(2):
        assert q.max() == 3.0
        assert q.agg(lo=qc.min, n=qc.count) == {"lo": 1.0, "n": 2}
        assert q.mean() == 2.0
        assert q.agg(total=qc.sum(lambda v: v * 10)) == {"total": 40.0}
        assert q.to_list() == [1.0, 3.0]


def test_empty_results_still_raise_on_the_hot_path():
    x = np.arange(5, dtype=np.float32)
    q = qc.query(x).where(lambda v: v > 100).on("cpu")
    for _ in range(2):
        with pytest.raises(qc.EmptySequenceError, match="max of an empty sequence"):
            q.max()
    assert q.max(default=-1.0) == -1.0


def test_out_of_range_capture_is_refused_on_the_hot_path_too():
    x = np.arange(5, dtype=np.int8)
    q = qc.query(x).on("cpu")
    k = 3
    q2 = q.select(lambda v: v + k)
    assert q2.sum() == 25
    k = 1000
    with pytest.raises(qc.QueryError, match="out of bounds for int8"):
        q2.sum()


def test_auto_choice_is_repeated_when_the_backend_it_chose_breaks(monkeypatch):
    if not registry.availability("opencl")[0]:
        pytest.skip("no OpenCL device here")
    monkeypatch.setattr(registry, "_auto", {False: "opencl", True: "opencl"})
    monkeypatch.setattr(registry, "_broken", {})
    x = np.arange(1000, dtype=np.float32)
    q = qc.query(x).select(lambda v: v + 1)
    for _ in range(2):
        assert q.sum() == np.float32(x.sum() + 1000) and qc.last_trace().backend == "opencl"
    assert hot(q).name == "opencl"

    def driver_failure(*args):
        raise RuntimeError("clEnqueueNDRangeKernel failed: OUT_OF_RESOURCES (injected)")

    monkeypatch.setattr(hot(q).fast.compiled.prepared, "run_quick", driver_failure)
    with pytest.warns(RuntimeWarning, match="opencl.*falling back to 'cpu'"):
        assert q.sum() == np.float32(x.sum() + 1000)
    t = qc.last_trace()
    assert t.backend == "cpu" and "opencl failed at run time" in t.fallback
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert q.sum() == np.float32(x.sum() + 1000)
    assert qc.last_trace().backend == "cpu" and qc.last_trace().fallback is None


def test_requests_that_share_a_signature_keep_their_own_defaults_and_names():
    x = np.arange(5, dtype=np.float32)
    empty = qc.query(x).where(lambda v: v > 100).on("cpu")
    for _ in range(3):
        assert empty.max(default=-1.0) == -1.0          # compiled by a non-shared request
        with pytest.raises(qc.EmptySequenceError):
            empty.max()                                  # same pass, no default
    q = qc.query(x).on("cpu")
    for _ in range(3):
        assert q.agg(a=qc.sum) == {"a": 10.0}
        assert q.agg(b=qc.sum) == {"b": 10.0}            # same pass, another result name
        assert qc.query(x).on("cpu").agg(c=qc.sum) == {"c": 10.0}


def test_opencl_trace_rows_are_read_when_asked():
    if not registry.availability("opencl")[0]:
        pytest.skip("no OpenCL device here")
    x = np.arange(5000, dtype=np.float32)
    q = qc.query(x).where(lambda v: v > 10).on("opencl")
    for _ in range(3):
        assert q.sum() == x[x > 10].sum()
    t = qc.last_trace()
    assert t.backend == "opencl" and len(t.kernels) == 1         # one launch: the last block finalizes
    assert all(k.dialect == "opencl" and k.cache == "memory" and k.run_ms > 0 for k in t.kernels)
