"""Issue 17 items 1-5: inputs and outputs (nulls, table columns, Arrow-world tables, anything
np.asarray accepts, np.asarray(query), ufuncs / builtins / text lambdas as functions).

Mostly on the numpy backend (the oracle's own semantics, no compile); one cpu case checks
that a ufunc-as-function compiles like the lambda it stands for."""
from __future__ import annotations

import array
import math
import mmap

import numpy as np
import pytest

import querycompute as qc

pd = pytest.importorskip("pandas")
pl = pytest.importorskip("polars")
pa = pytest.importorskip("pyarrow")


def Q(*args, **kw):
    return qc.query(*args, **kw).on("numpy")


# --- item 1: nulls are never NaN ---------------------------------------------------------------
@pytest.mark.parametrize("make", [
    lambda: pd.Series([1, None, 3], dtype="Int64"),
    lambda: pd.Series([1.5, None], dtype="Float64"),
    lambda: pd.Series([True, None], dtype="boolean"),
    lambda: pd.Series([1, None], dtype="int64[pyarrow]"),
    lambda: pl.Series([1, None, 3]),
    lambda: pa.array([1.0, None]),
    lambda: pa.chunked_array([[1, 2], [None]]),
], ids=["pd-Int64", "pd-Float64", "pd-boolean", "pd-arrow", "polars", "pa-array", "pa-chunked"])
def test_item1_nulls_raise_type_error(make):
    with pytest.raises(TypeError, match=r"the input holds 1 null.*fill_null.*fillna.*drop_nulls"):
        Q(make()).sum()


def test_item1_nulls_in_zip_and_table_name_the_column():
    x = np.arange(3.0)
    with pytest.raises(TypeError, match=r"input 1 holds 1 null"):
        Q(x, pl.Series([1.0, None, 2.0])).sum(lambda a, b: a + b)
    df = pd.DataFrame({"a": x, "n": pd.Series([1, None, 3], dtype="Int64")})
    with pytest.raises(TypeError, match=r"column 'n'.*holds 1 null"):
        Q(df).sum(lambda r: r.n)
    # in-place: a column that gains a null after the query was built
    df2 = pd.DataFrame({"n": pd.Series([1, 2, 3], dtype="Int64")})
    q = Q(df2)
    assert q.sum(lambda r: r.n) == 6
    df2.loc[1, "n"] = pd.NA
    with pytest.raises(TypeError, match=r"column 'n' holds 1 null"):
        q.sum(lambda r: r.n)


def test_item1_masked_arrays():
    m = np.ma.masked_array([1.0, 2.0, 3.0], mask=[0, 1, 0])
    with pytest.raises(TypeError, match=r"masked array with 1 masked.*\.filled.*\.compressed"):
        Q(m).sum()
    with pytest.raises(TypeError, match="masked"):
        qc.query(m).on("cpu").sum()
    full = np.ma.masked_array([1.0, 2.0, 3.0], mask=False)
    assert Q(full).sum() == np.sum(full.data)


def test_item1_nullable_dtypes_without_nulls_work():
    cases = [pd.Series([1, 2, 3], dtype="Int64"), pd.Series([1.5, 2.0], dtype="Float64"),
             pd.Series([True, False, True], dtype="boolean"), pd.Series([4, 5], dtype="int32[pyarrow]"),
             pl.Series([1, 2, 3], dtype=pl.Int16), pa.array([1.5, 2.5], pa.float32()),
             pa.chunked_array([[1, 2], [3, 4], [5]])]
    for s in cases:
        ref = np.asarray(s.to_numpy() if not hasattr(s, "dtype") or not hasattr(s.dtype, "numpy_dtype")
                         else s.to_numpy(dtype=s.dtype.numpy_dtype))
        got = Q(s).to_array()
        assert got.dtype == ref.dtype and np.array_equal(got, ref), type(s)
        assert Q(s).sum() == ref.sum()


# --- item 2: only the columns the lambdas read ---------------------------------------------------
def test_item2_unused_unreadable_columns_are_no_obstacle():
    df = pd.DataFrame({"a": [1.0, 2.0, 3.0], "s": ["x", "y", "z"],
                       "b": pd.Series([True, None, False], dtype="boolean"),
                       "t": pd.to_datetime(["2020-01-01"] * 3)})
    assert Q(df).sum(lambda r: r.a * 2) == (df["a"] * 2).sum()
    assert Q(df).where(lambda r: r.a > 1).count() == 2
    with pytest.raises(TypeError, match=r"sum\(\) over string column 's'"):   # (issue 29 item 4)
        Q(df).sum(lambda r: r.s)
    with pytest.raises(TypeError, match=r"column 'b' can't be read.*holds 1 null"):
        Q(df).count(lambda r: r.b)
    assert Q(df).max(lambda r: r["t"]) == df["t"].max()     # dates are readable (issue 33)
    with pytest.raises(TypeError, match="none of the table's columns"):   # (strings are read: issue 29)
        Q(pd.DataFrame({"b": pd.Series([True, None], dtype="boolean")}))


def test_item2_non_string_column_names_read_as_strings():
    x = np.arange(12.0).reshape(4, 3)
    df = pd.DataFrame(x)                                    # columns 0, 1, 2
    got = Q(df).select(lambda r: r["0"] + r["2"]).to_array()
    assert np.array_equal(got, x[:, 0] + x[:, 2])
    two = Q(pd.DataFrame([[1.0, 2.0, 3.0]], columns=[1, "1", "x"]))   # fine while "1" unread
    assert two.sum(lambda r: r["x"]) == 3.0
    with pytest.raises(TypeError, match="column '1'.*name of 2 columns"):
        two.sum(lambda r: r["1"])


def test_item2_dict_and_structured_tables_skip_unreadable_columns():
    a = np.arange(4.0)
    assert Q({"a": a, "s": np.array(list("abcd"))}).sum(lambda r: r.a) == a.sum()
    rec = np.zeros(3, dtype=[("a", "f8"), ("s", "U2")])
    rec["a"] = [1, 2, 3]
    assert Q(rec).sum(lambda r: r.a) == 6.0


# --- item 3: Arrow-world tables ------------------------------------------------------------------
def _frames():
    a = np.array([1.5, -2.0, 3.0, 7.0])
    k = np.array([1, 2, 3, 4], np.int32)
    s = ["w", "x", "y", "z"]
    return a, k, [
        pa.table({"a": a, "k": k, "s": s}),
        pa.record_batch({"a": a, "k": k, "s": s}),
        pa.Table.from_batches([pa.record_batch({"a": a[:2], "k": k[:2], "s": s[:2]}),
                               pa.record_batch({"a": a[2:], "k": k[2:], "s": s[2:]})]),
        pl.DataFrame({"a": a, "k": k, "s": s}),
        pl.DataFrame({"a": a, "k": k, "s": s}).lazy(),
        pd.DataFrame({"a": a, "k": k, "s": s}),
    ]


def test_item3_arrow_tables_polars_lazyframes():
    a, k, frames = _frames()
    want_sum = np.sum(a * k)
    for frame in frames:
        q = Q(frame)
        assert q.sum(lambda r: r.a * r.k) == want_sum, type(frame)
        got = q.where(lambda r: r.k > 1).select(lambda r: r.a).to_array()
        assert np.array_equal(got, a[k > 1]), type(frame)


def test_item3_arrow_pycapsule_objects():
    a, k, _ = _frames()

    class Stream:                       # only the Arrow PyCapsule stream interface
        def __init__(self, t):
            self.t = t

        def __arrow_c_stream__(self, requested_schema=None):
            return self.t.__arrow_c_stream__(requested_schema)

    class Arr:
        def __arrow_c_array__(self, requested_schema=None):
            return pa.array(a).__arrow_c_array__(requested_schema)

    assert Q(Stream(pa.table({"a": a, "k": k}))).sum(lambda r: r.a - r.k) == np.sum(a - k)
    assert Q(Arr()).sum() == a.sum()


# --- item 4: anything np.asarray accepts; np.asarray(query) --------------------------------------
def test_item4_buffers_and_sequences():
    cases = [[1.0, 2.5, -3.0], (1, 2, 3), range(2, 9, 3), [True, False, True],
             memoryview(array.array("f", [1.0, 2.0])), array.array("h", [5, -6, 7])]
    for x in cases:
        ref = np.asarray(x)
        got = Q(x).select(lambda v: v * 2).to_array()
        assert got.dtype == (ref * 2).dtype and np.array_equal(got, ref * 2), x
    with mmap.mmap(-1, 16) as m:
        m.write(bytes(range(16)))
        assert Q(m).sum() == np.asarray(m).sum()
    with pytest.raises(TypeError, match="object array"):
        Q([1, "a", None])


def test_item4_np_asarray_of_a_query():
    x = np.array([1.0, 4.0, 9.0], np.float32)
    q = Q(x).select(lambda v: v + 1)
    out = np.asarray(q)
    assert out.dtype == np.float32 and np.array_equal(out, x + 1)
    assert np.asarray(q, dtype=np.float64).dtype == np.float64
    with pytest.raises(TypeError, match=r"records.*to_array"):
        np.asarray(Q(a=x, b=x))


# --- item 5: ufuncs, builtins, lambdas as text -----------------------------------------------------
def test_item5_ufuncs_and_builtins_as_functions():
    x = np.array([1.0, 4.0, -9.0, np.inf, np.nan], np.float32)
    b = np.array([True, False])
    i8 = np.array([1, -3, 100, -128], np.int8)
    with np.errstate(invalid="ignore"):
        assert np.array_equal(Q(x).select(np.sqrt).to_array(), np.sqrt(x), equal_nan=True)
    assert np.array_equal(Q(x).select(abs).to_array(), np.abs(x), equal_nan=True)
    assert np.array_equal(Q(x).where(np.isfinite).to_array(), x[np.isfinite(x)])
    assert Q(i8).sum(np.square) == np.square(i8).sum()
    assert Q(b).select(np.square).to_array().dtype == np.square(b).dtype
    assert np.array_equal(Q(i8).select(np.float64).to_array(), i8.astype(np.float64))
    assert np.array_equal(Q(x, x).where(lambda a, c: np.isfinite(a))
                          .select(np.hypot).to_array(), np.hypot(x, x)[np.isfinite(x)])
    assert np.array_equal(Q(i8, i8[::-1]).select(max).to_array(), np.maximum(i8, i8[::-1]))
    assert np.array_equal(Q(x).where(np.isfinite).select(math.floor).to_array(),
                          np.floor(x[np.isfinite(x)]).astype(np.int64))
    fin = x[np.isfinite(x)]
    assert Q(fin).agg(total=qc.sum(np.square), n=qc.count(np.isnan)) == \
        {"total": np.square(fin).sum(), "n": 0}
    assert Q(x).count(np.isnan) == int(np.isnan(x).sum())


def test_item5_ufunc_compiles_on_cpu():
    x = np.array([1.0, 4.0, 9.0, 2.0], np.float64)
    q = qc.query(x).on("cpu")
    assert np.array_equal(q.select(np.sqrt).to_array(), np.sqrt(x))
    assert q.select(np.sqrt).to_array().dtype == np.float64


def test_item5_unsupported_callables_are_named():
    x = np.arange(3.0)
    with pytest.raises(qc.UnsupportedLambdaError, match=r"numpy ufunc 'spacing'.*supported functions"):
        Q(x).select(np.spacing).to_array()
    with pytest.raises(qc.UnsupportedLambdaError, match="builtin function 'len'"):
        Q(x).sum(len)
    with pytest.raises(TypeError, match=r"select\(\) takes a function.*got int"):
        Q(x).select(5)


def test_item5_lambdas_as_text():
    x = np.array([1.0, -2.0, 3.0])
    assert np.array_equal(Q(x).select("lambda v: v * 2").to_array(), x * 2)
    assert Q(x).where("lambda v: v > 0").sum("lambda v: np.sqrt(v)") == np.sqrt(x[x > 0]).sum()
    assert Q(x).aggregate("lambda a, v: a + v", 0.0) == x.sum()
    assert Q(x).agg(m=qc.max("lambda v: -v")) == {"m": np.max(-x)}
    with pytest.raises(qc.UnsupportedLambdaError,
                       match=r"^<text>:1:15: name 'k' has no value: a lambda given as text has no variables"):
        Q(x).select("lambda v: v * k").to_array()
    with pytest.raises(qc.UnsupportedLambdaError, match=r"^<text>:1:11: attribute \.foo"):
        Q(x).select("lambda v: v.foo").to_array()
    with pytest.raises(qc.UnsupportedLambdaError, match="one lambda"):
        Q(x).select("v * 2")


def test_item5_no_source_error_says_pass_text():
    ns: dict = {}
    exec("f = lambda v: v * 2", ns)       # no source Python keeps: like python -c or the REPL
    with pytest.raises(qc.UnsupportedLambdaError, match=r"pass the lambda as text"):
        Q(np.arange(3.0)).select(ns["f"]).to_array()


def test_item2_only_the_columns_the_lambdas_read_are_read():
    a = np.array([1.0, 2.0, 3.0])
    df = pd.DataFrame({"a": a, "n": pd.Series([1, 2, 3], dtype="Int64"),
                       "b": np.array([4, 5, 6], np.int32)})
    q = Q(df)
    df.loc[0, "n"] = pd.NA                  # a null appears in a column no lambda reads
    assert q.sum(lambda r: r.a) == a.sum()
    assert q.where(lambda r: r.b > 4).select(lambda r: r["a"] * 2).to_array().tolist() == [4.0, 6.0]
    assert q.count() == 3
    assert q.max(lambda r: r.a * r.b, default=0) == np.max(a * df["b"].to_numpy())
    assert q.agg(s=qc.sum(lambda r: r.b), c=qc.count) == {"s": 15, "c": 3}
    for read_n in (lambda: q.sum(lambda r: r.n), lambda: q.to_array(),
                   lambda: q.select(lambda r: r).to_list(), lambda: q.first(lambda r: r.a > 1)):
        with pytest.raises(TypeError, match="column 'n' holds 1 null"):
            read_n()                        # the record itself, or n, is read


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_whole_records_over_a_table_with_an_unreadable_column_are_refused_not_cut(backend):
    """A column no kernel can read (here: a null) is no obstacle to a query that does not read
    it, but a result of the table's whole records would leave it out: refused, naming it."""
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"a": [3, 1, 2], "n": pd.array([1, None, 3], dtype="Int64")})
    q = qc.query(df).on(backend)
    for run in (q.to_array, q.to_list, q.first, lambda: q.order_by(lambda r: r.a).to_list(),
                lambda: q.where(lambda r: r.a > 1).to_pandas()):
        with pytest.raises(qc.QueryError, match=r"whole records.*'n': holds 1 null"):
            run()
    assert q.select(lambda r: {"a": r.a}).to_list() == [{"a": 3}, {"a": 1}, {"a": 2}]
    assert q.sum(lambda r: r.a) == 6 and q.count() == 3
