"""The public API (DESIGN.md section 3) on the reference and cpu backends."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import querycompute as qc

BACKENDS = ["numpy", "cpu"]


@pytest.fixture(params=BACKENDS)
def on(request):
    return request.param


X = np.array([3.0, -1.0, 7.5, 1200.0, 600.0, np.nan, 2000.0], dtype=np.float32)


def test_chain_sum_and_receiver_unchanged(on):
    base = qc.query(X).on(on)
    q = base.select(lambda v: v * 2).where(lambda v: v > 1000).select(lambda v: v + 100)
    assert q.sum() == np.float32(2500 + 4100 + 1300)
    assert q.sum().dtype == np.float32
    assert base.count() == len(X)          # base unchanged by extending it
    np.testing.assert_array_equal(q.to_array(), np.array([2500, 1300, 4100], np.float32))
    assert q.to_list() == [2500.0, 1300.0, 4100.0]


def test_where_preserves_order(on):
    x = np.arange(100_000, dtype=np.int64)[::-1].copy()
    got = qc.query(x).where(lambda v: v % 7 == 3).on(on).to_array()
    np.testing.assert_array_equal(got, x[x % 7 == 3])


def test_aggregate_dtypes_follow_numpy(on):
    i32 = np.array([2**31 - 1, 5, -3], dtype=np.int32)
    assert qc.query(i32).on(on).sum() == np.sum(i32) and qc.query(i32).on(on).sum().dtype == np.int64
    u8 = np.array([250, 10], dtype=np.uint8)
    assert qc.query(u8).on(on).sum().dtype == np.uint64
    h = np.array([1.5, 2.25, 3.0], dtype=np.float16)
    assert qc.query(h).on(on).sum().dtype == np.float16
    assert qc.query(h).on(on).mean() == np.mean(h)
    assert qc.query(i32).on(on).mean() == np.mean(i32)
    assert qc.query(i32).on(on).max() == np.int32(2**31 - 1)


def test_nan_propagates_in_min_max_and_is_dropped_by_comparisons(on):
    q = qc.query(X).on(on)
    assert np.isnan(q.max()) and np.isnan(q.min())
    assert q.where(lambda v: v > 0).count() == 5
    assert q.count(lambda v: v != v) == 1


def test_empty_rules(on):
    q = qc.query(np.array([1.0, 2.0], np.float32)).where(lambda v: v > 10).on(on)
    assert q.sum() == 0 and q.count() == 0 and q.any() is False and q.all() is True
    for name in ("min", "max", "mean", "first"):
        with pytest.raises(qc.EmptySequenceError):
            getattr(q, name)()
        with pytest.raises(ValueError):      # EmptySequenceError is also a ValueError
            getattr(q, name)()
        assert getattr(q, name)(default=-1) == -1
    assert q.to_array().dtype == np.float32 and len(q.to_array()) == 0


def test_any_all_first_count_with_predicates(on):
    q = qc.query(np.array([5, -2, 9, 4], np.int32)).on(on)
    assert q.any(lambda v: v < 0) is True and q.all(lambda v: v < 0) is False
    assert q.first(lambda v: v > 5) == 9 and q.first() == 5
    assert q.count(lambda v: v > 0) == 3


def test_zip_tuples_and_records(on):
    a = np.array([1.0, 2.0, 3.0], np.float32)
    b = np.array([10, 20, 30], np.int32)
    q = qc.query(a, b).on(on)
    assert q.select(lambda x, y: x * y + 1).sum() == np.float64(143.0)
    xs, ys = q.select(lambda x, y: (y, x)).to_array()
    np.testing.assert_array_equal(xs, b)
    assert q.select(lambda x, y: (x, y)).first(lambda t: t[1] > 15) == (np.float32(2.0), np.int32(20))
    recs = q.select(lambda x, y: {"s": x + y, "d": y - 1}).where(lambda r: r.d > 10).to_array()
    assert set(recs) == {"s", "d"} and recs["d"].tolist() == [19, 29]
    with pytest.raises(ValueError):
        qc.query(a, b[:2])


@pytest.mark.parametrize("kind", ["dict", "structured", "pandas", "kwargs"])
def test_table_sources(on, kind):
    price = np.array([1.5, 2.0, 3.0, 4.0], np.float32)
    qty = np.array([1, 3, 5, 2], np.int32)
    cat = np.array([3, 3, 1, 3], np.int32)
    if kind == "dict":
        q = qc.query({"price": price, "qty": qty, "cat": cat})
    elif kind == "kwargs":
        q = qc.query(price=price, qty=qty, cat=cat)
    elif kind == "pandas":
        q = qc.query(pd.DataFrame({"price": price, "qty": qty, "cat": cat}))
    else:
        rec = np.zeros(4, dtype=[("price", "f4"), ("qty", "i4"), ("cat", "i4")])
        rec["price"], rec["qty"], rec["cat"] = price, qty, cat
        q = qc.query(rec)
    got = q.on(on).where(lambda r: r.cat == 3 and r["qty"] > 2).sum(lambda r: r.price * r.qty)
    assert got == np.float64(6.0)


def test_range_and_strided_inputs(on):
    assert qc.range(10).on(on).sum() == 45
    assert qc.range(2, 20, 3).on(on).to_list() == list(range(2, 20, 3))
    x = np.arange(30, dtype=np.float64)
    np.testing.assert_array_equal(qc.query(x[::3]).select(lambda v: v + 1).on(on).to_array(), x[::3] + 1)


def test_agg_is_one_pass_and_mean(on):
    x = np.array([1.0, 4.0, 9.0, 16.0], np.float64)
    r = qc.query(x).on(on).agg(total=qc.sum, peak=qc.max, n=qc.count, sq=qc.sum(lambda v: v * v),
                               avg=qc.mean)
    assert r == {"total": 30.0, "peak": 16.0, "n": 4, "sq": 354.0, "avg": 7.5}
    assert len(qc.last_trace().kernels) >= 1


def test_aggregate_fold(on):
    x = np.arange(1, 11, dtype=np.int64)
    assert qc.query(x).on(on).aggregate(lambda acc, v: acc + v, 0) == 55
    assert qc.query(x).on(on).aggregate(lambda acc, v: max(acc, v), np.int64(-2**63)) == 10


def test_captured_scalars_are_parameters(on):
    x = np.arange(10, dtype=np.float32)
    threshold = 4
    q = qc.query(x).where(lambda v: v > threshold).on(on)
    assert q.count() == 5
    threshold = 7
    assert q.count() == 2                  # new value: no stale result ...
    assert qc.last_trace().kernels[0].cache == ("memory" if on == "cpu" else "interpreted")
    threshold = 7.5                        # a new type (float) is a new signature
    assert q.count() == 2 and qc.last_trace().kernels[0].cache != "memory"
    src = q.source("cpu", terminal="count") if on == "cpu" else ""
    threshold = 99.25                      # the same type: the same kernel, whatever the value
    assert q.source("cpu", terminal="count") == src if on == "cpu" else True
    assert "7.5" not in src and "99.25" not in src


def test_deferred_execution_reads_arrays_at_terminal(on):
    x = np.zeros(4, np.float32)
    q = qc.query(x).on(on)
    x[:] = 2
    assert q.sum() == 8


def test_bad_inputs_raise_type_errors():
    with pytest.raises(TypeError, match="elements of 3 dimensions"):
        qc.query(np.zeros((2, 2, 2, 2)))       # (n, a, b) is fine: shaped elements (issue 16)
    with pytest.raises(TypeError, match="complex"):
        qc.query(np.zeros(3, np.complex64))
    with pytest.raises(TypeError):
        qc.query(np.array(["a"], dtype=object))
    with pytest.raises(qc.QueryError, match="unknown backend"):
        qc.query(X).on("tpu")


def test_unsupported_lambda_names_file_line_col():
    xs = [1, 2]
    with pytest.raises(qc.UnsupportedLambdaError) as info:
        qc.query(X).select(lambda v: v + xs[0]).to_array()
    assert "test_api.py:" in str(info.value)


def test_backends_and_trace():
    info = qc.backends()
    assert set(info) == {"numpy", "cpu", "cuda", "opencl", "webgpu", "metal"}
    assert info["numpy"]["available"] and info["cpu"]["available"]
    assert not info["metal"]["available"] and info["metal"]["reason"]
    qc.query(X).on("cpu").select(lambda v: v + 1).sum()
    t = qc.last_trace()
    assert t.backend == "cpu" and t.terminal == "sum" and t.n == len(X) and t.kernels
    assert "backend=cpu" in str(t)


def test_auto_picks_cpu_without_gpu():
    qc.query(X).sum()
    assert qc.last_trace().backend == "cpu"


def test_explain_shows_graph_plan_and_bytes():
    text = qc.query(X).select(lambda v: v * 2).where(lambda v: v > 1000).explain("cpu", terminal="sum")
    assert "operation graph" in text and "fused plan" in text and "keep if" in text
    assert "fused reads 4 B" in text


def test_captured_python_int_out_of_range_is_refused_like_numpy(on):
    x = np.arange(5, dtype=np.int8)
    k = 100
    q = qc.query(x).select(lambda v: v + k).on(on)
    assert q.to_list() == [100, 101, 102, 103, 104]
    k = 300                                   # np.int8(1) + 300 raises OverflowError in NumPy 2
    with pytest.raises(qc.QueryError, match=r"test_api.py:\d+:\d+: captured 'k' = 300 is out of bounds for int8"):
        q.to_list()
    k = np.int64(300)                         # a NumPy int64 is strong: int64 arithmetic, no error
    assert q.to_list() == [300, 301, 302, 303, 304]


def test_cache_entries_record_the_query_text():
    x = np.arange(50, dtype=np.float32)
    qc.query(x).select(lambda v: v * 3).where(lambda v: v > 7).on("cpu").max()
    texts = [e.query for e in qc.cache.entries(backend="cpu")]
    assert "select(lambda v: v * 3).where(lambda v: v > 7).max()" in texts
