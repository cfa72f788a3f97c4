"""Outside tests of shaped elements, tables, Dask, the CLI / cache, explain / source and
threads (DESIGN.md sections 3, 4b, 5b, 5c, 6), written as a user would: each one reproduces
a bug found by probing the documented promises, checked against NumPy / pandas / plain
Python. Small inputs, few query shapes (compiles are the cost)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import querycompute as qc
from querycompute.errors import UnsupportedTypeError


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_dict_table_column_names_that_are_not_identifiers(backend):
    # A DataFrame's "my col" is read as r["my col"]; a dict of arrays with the same names
    # used to be refused ("table column names must be identifiers").
    a, b = np.arange(5.0), np.arange(5, dtype=np.int32)
    q = qc.query({"my col": a, "x-y": b, "class": a}).on(backend)
    np.testing.assert_array_equal(q.select(lambda r: r["my col"] * r["x-y"] + r["class"]).to_array(),
                                  a * b + a)
    got = q.where(lambda r: r["x-y"] > 2).to_array()
    assert list(got) == ["my col", "x-y", "class"]
    np.testing.assert_array_equal(got["x-y"], b[b > 2])
    assert qc.query(**{"my col": a}).on(backend).to_list()[1] == {"my col": 1.0}
    with pytest.raises(TypeError, match="column names must be strings"):
        qc.query({0: a})
    with pytest.raises(ValueError, match=r"table columns must have equal lengths, got a=5, b=3"):
        qc.query({"a": a, "b": a[:3]}).on(backend).sum(lambda r: r.a)    # was "zipped inputs"


def test_staged_plan_reading_an_unreadable_column_says_why():
    # where() said "column 's' can't be read by a kernel"; group_by / order_by / join said
    # "the record has no field 's'", as if the DataFrame had no such column.
    # (a string column is readable since issue 29 item 4: a column holding a null is not)
    df = pd.DataFrame({"s": pd.array([1, None, 3, 1, 2], dtype="Int64"), "x": np.arange(5.0)})
    q = qc.query(df).on("numpy")
    for run in (lambda: q.group_by(lambda r: r.s).count(),
                lambda: q.order_by(lambda r: r.s).select(lambda r: r.x).to_list(),
                lambda: q.join(qc.query(x=np.arange(2.0)), lambda r: r.s, lambda o: o.x,
                               lambda r, o: r.x).to_list()):
        with pytest.raises(qc.QueryError, match="column 's' can't be read by a kernel"):
            run()


def _cli_exit(argv, capsys) -> tuple[int, str]:
    from querycompute.cli.main import main
    try:
        code = main(argv)
    except SystemExit as stop:                 # argparse: usage errors
        code = stop.code
    return code, capsys.readouterr().err


@pytest.mark.parametrize("argv", [
    ["source", "sum()", "--dtype", "nope"],
    ["source", "sum()", "--input", "a"],                       # no dtype
    ["explain", "sum()", "--field", "price:nope"],
    ["source", "sum()", "--dtype", "float32", "--input", "a:float32"],   # used to ignore --input
    ["source", "sum()", "--input", "a:float32", "--field", "b:int32"],
])
def test_cli_bad_input_arguments_are_usage_errors(argv, capsys):
    # A malformed or contradictory --dtype / --input / --field is a usage error (exit 2,
    # argparse's message), like --backend banana; it was exit 1, or silently ignored.
    code, err = _cli_exit(argv, capsys)
    assert code == 2 and "usage:" in err and "Traceback" not in err
    assert _cli_exit(["source", "select(lambda a, b: a * b).sum()", "--input", "a:float32",
                      "--input", "b:int32", "--backend", "opencl"], capsys)[0] == 0


def test_grouped_source_and_explain_take_terminal_like_query():
    # DESIGN.md section 3: source()/explain()'s terminal= is a name, a spec or qc.agg(...);
    # on a group_by it became an aggregate named "terminal" (TypeError).
    k = np.array([1, 0, 1], dtype=np.int32)
    v = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    g = qc.query(k=k, v=v).group_by(lambda r: r.k)
    spec = qc.agg(s=qc.sum(lambda r: r.v), n=qc.count)
    assert g.source("opencl", terminal=spec) == g.source("opencl", s=qc.sum(lambda r: r.v), n=qc.count)
    assert g.explain("cpu", terminal="count") == g.explain("cpu")
    assert "qc_stage1" in g.source("cuda", terminal=qc.max(lambda r: r.v))
    with pytest.raises(TypeError, match="not both"):
        g.source("cuda", terminal="count", n=qc.count)


@pytest.mark.parametrize("backend", ["webgpu", "metal"])
def test_source_of_a_64_bit_scan_raises_unsupported_type_error(backend):
    # The column operation's kernels leaked querycompute._codegen's UnsupportedType (not a
    # QueryError) where the passes raise qc.UnsupportedTypeError naming the backend.
    q = qc.query(np.arange(5.0)).scan(lambda a, v: a + v, 0.0)
    with pytest.raises(UnsupportedTypeError, match=f"backend '{backend}'.*float64"):
        q.source(backend)


def test_dask_arrays_of_shaped_elements(client):
    # DESIGN.md section 3: an input of shape (n, *s) is n elements of shape s, and
    # qc.query(dask_array) returns the same Query; a 2-D Dask array was refused ("Dask inputs
    # must be 1-D"). Chunks along the second axis too, size-1 and empty chunks, on a cluster.
    import cloudpickle
    import dask.array as da
    import sys
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    rng = np.random.default_rng(7)
    V, M, x = rng.random((23, 3)), rng.random((23, 3, 3)), rng.random(23)
    dV = da.from_array(V, chunks=((7, 1, 0, 15), (2, 1)))
    q = qc.query(dV).on("numpy")
    np.testing.assert_allclose(q.sum(), V.sum(axis=0))
    np.testing.assert_allclose(q.mean(), V.mean(axis=0))
    np.testing.assert_array_equal(q.max(), V.max(axis=0))
    np.testing.assert_array_equal(q.first(lambda r: r[0] > 0.5), V[V[:, 0] > 0.5][0])
    got = q.agg(s=qc.sum, n=qc.count)
    np.testing.assert_allclose(got["s"], V.sum(axis=0))
    assert got["n"] == 23
    empty = qc.query(da.from_array(np.zeros((0, 3)), chunks=(2, 3))).on("numpy")
    with pytest.raises(qc.EmptySequenceError):
        empty.max()
    np.testing.assert_array_equal(empty.max(default=5.0), qc.query(np.zeros((0, 3))).max(default=5.0))
    np.testing.assert_allclose(q.sum(compute=False).compute(), V.sum(axis=0))
    far = q.where(lambda r: r @ r > 1).to_array()
    assert far.shape[1:] == (3,)
    np.testing.assert_array_equal(far.compute(), V[(V * V).sum(axis=1) > 1])
    np.testing.assert_allclose(q.select(lambda r: np.linalg.norm(r)).to_array().compute(),
                               np.linalg.norm(V, axis=1))
    zipped = qc.query(da.from_array(M, chunks=5), dV, da.from_array(x, chunks=6)).on("cpu")
    np.testing.assert_allclose(zipped.select(lambda R, T, s: R @ T * s + T).to_array().compute(),
                               np.einsum("nij,nj->ni", M, V) * x[:, None] + V)
    np.testing.assert_allclose(qc.query(pos=dV, w=da.from_array(x, chunks=4)).on("cpu")
                               .sum(lambda r: r.pos * r.w), (V * x[:, None]).sum(axis=0))
    np.testing.assert_allclose(qc.query(V, chunks=5).on("numpy").sum(), V.sum(axis=0))
    B = da.from_array(V > 0.5, chunks=(5, 3))
    np.testing.assert_array_equal(qc.query(B).on("numpy").any(), (V > 0.5).any(axis=0))
    np.testing.assert_array_equal(qc.query(B).on("numpy").all(), (V > 0.5).all(axis=0))
    with pytest.raises(qc.QueryError, match="order_by.*shaped elements"):
        q.order_by(lambda r: r[0]).to_array()


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_any_all_without_predicate_over_shaped_elements(backend):
    # Terminals act elementwise across elements (DESIGN.md 4b): q.sum() is X.sum(axis=0), so
    # q.any() is X.any(axis=0); it raised "any() without a predicate needs single-value elements".
    X = np.array([[0, 2, 0], [0, 1, 3], [0, 5, 0]], dtype=np.int32)
    q = qc.query(X).on(backend)
    np.testing.assert_array_equal(q.any(), X.any(axis=0))
    np.testing.assert_array_equal(q.all(), X.all(axis=0))
    np.testing.assert_array_equal(qc.query(X[:0]).on(backend).all(), X[:0].all(axis=0))
    assert q.any(lambda r: r[2] > 2) is True


def test_aggregate_of_shaped_or_tuple_elements_names_aggregate():
    # The error named "fold()" and suggested .fold(lambda r: r[0]), which does not exist.
    for q in (qc.query(np.ones((3, 2))), qc.query(np.ones(3), np.ones(3))):
        with pytest.raises(qc.QueryError, match=r"aggregate\(\) folds single values.*\.select\("):
            q.on("numpy").aggregate(lambda a, v: a + v, 0.0)


def test_dask_dataframe_with_a_string_column(client):
    # DESIGN.md section 3: only the columns the lambdas read are converted, so an unused
    # string column is no obstacle; with qc.query(dask_dataframe) every terminal raised
    # numpy's "Cannot interpret '<StringDtype...>' as a data type".
    import dask.dataframe as dd
    x = np.random.default_rng(3).random(40) * 100
    pdf = pd.DataFrame({"a": x, "k": (x // 30).astype(np.int64), "s": ["z"] * 40,
                        "n": pd.array([1, None] + [2] * 38, dtype="Int64")})
    ddf = dd.from_pandas(pdf, npartitions=4)
    q = qc.query(ddf[ddf.a > 50]).on("numpy")
    m = x > 50
    assert q.sum(lambda r: r.a) == pytest.approx(x[m].sum())
    np.testing.assert_array_equal(q.select(lambda r: r.a * 2).to_array().compute(), x[m] * 2)
    got = q.group_by(lambda r: r.k).agg(n=qc.count)
    want = pdf[m].groupby("k").size()
    np.testing.assert_array_equal(got["key"], want.index)
    np.testing.assert_array_equal(got["n"], want.values)
    with pytest.raises(qc.QueryError, match="column 's' can't be read by a kernel"):
        q.count(lambda r: r.s == 1)
    with pytest.raises(qc.QueryError, match="column 'n' can't be read by a kernel: it holds 1 null"):
        qc.query(ddf).on("numpy").sum(lambda r: r.n)


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_zips_and_tables_with_shaped_items_come_back_whole(backend):
    # The guide: shaped inputs work "zipped with 1-D inputs, and as table columns", and
    # where() keeps whole elements; to_array / to_list / first of such a zip or table raised
    # "nested tuples/records can't be stored as columns".
    rng = np.random.default_rng(2)
    P, w, M = rng.random((12, 3)), rng.random(12), rng.random((12, 2, 2))
    m = w > 0.5
    got = qc.query(P, w, M).on(backend).where(lambda p, s, mm: s > 0.5).to_array()
    assert [g.shape for g in got] == [(m.sum(), 3), (m.sum(),), (m.sum(), 2, 2)]
    for g, want in zip(got, (P[m], w[m], M[m])):
        np.testing.assert_array_equal(g, want)
    q = qc.query(pos=P, w=w).on(backend)
    np.testing.assert_array_equal(q.where(lambda r: r.w > 0.5).to_array()["pos"], P[m])
    first = q.first(lambda r: r.w > 0.5)
    np.testing.assert_array_equal(first["pos"], P[m][0])
    assert first["w"] == w[m][0]
    assert q.where(lambda r: r.w > 0.5).to_list()[0] == {"pos": P[m][0].tolist(), "w": w[m][0]}
    assert qc.query(P, w).on(backend).where(lambda p, s: s > 5).to_array()[0].shape == (0, 3)
    with pytest.raises(qc.QueryError, match="shaped items is not supported yet"):
        qc.query(w).on(backend).select(lambda v: (np.array([v, v]), v)).order_by(lambda a, b: b).to_list()


def test_join_with_a_shaped_other_side_names_join():
    # The refusal named "take(...)", an operator the user never wrote (the join's probe of
    # the other side's columns).
    V = np.arange(12.0).reshape(4, 3)
    q = qc.query(np.arange(3.0)).on("numpy")
    with pytest.raises(qc.QueryError, match=r"^join\(\.\.\.\) on a query over shaped elements"):
        q.join(qc.query(V), lambda a: a, lambda b: b[0], lambda a, b: a).to_list()
    with pytest.raises(qc.QueryError, match=r"^left_join\(\.\.\.\) on a query over shaped"):
        q.left_join(qc.query(V), lambda a: a, lambda b: b[0], lambda a, b: a).to_list()


def test_nested_lists_are_shaped_elements_like_the_array_they_make():
    # DESIGN.md section 3: anything np.asarray accepts is converted once, and an input of
    # shape (n, *s) is n elements of shape s; a list of lists (or a 2-D memoryview) was
    # refused with "queries read 1-D arrays".
    L = [[1.0, 2.0], [3.0, 4.0], [5.0, 7.0]]
    X = np.asarray(L)
    q = qc.query(L).on("numpy")
    np.testing.assert_array_equal(q.sum(), X.sum(axis=0))
    np.testing.assert_array_equal(q.select(lambda r: r @ r).to_array(), (X * X).sum(axis=1))
    np.testing.assert_array_equal(qc.query(L, [1.0, 2.0, 3.0]).on("numpy")
                                  .select(lambda r, s: r * s).to_array(), X * [[1.0], [2.0], [3.0]])
    np.testing.assert_array_equal(qc.query(memoryview(X)).on("numpy").max(), X.max(axis=0))
    np.testing.assert_array_equal(qc.query(pos=L, w=[1, 2, 3]).on("numpy")
                                  .where(lambda r: r.w > 1).to_array()["pos"], X[1:])
    assert qc.query([1, 2, 3]).on("numpy").sum() == 6 and qc.query([]).on("numpy").count() == 0


def test_pyarrow_record_batch_reader_is_a_table():
    # DESIGN.md section 3: anything exporting __arrow_c_stream__ is a table; a pyarrow
    # RecordBatchReader was read as one column of Arrow type struct<...> (TypeError).
    pa = pytest.importorskip("pyarrow")
    batches = [pa.record_batch([pa.array([1.0, 2.0]), pa.array([3, 4])], names=["x", "k"]),
               pa.record_batch([pa.array([5.0]), pa.array([6])], names=["x", "k"])]
    q = qc.query(pa.RecordBatchReader.from_batches(batches[0].schema, batches)).on("numpy")
    assert q.sum(lambda r: r.x * r.k) == 1 * 3 + 2 * 4 + 5 * 6
    assert q.where(lambda r: r.k > 3).to_list() == [{"x": 2.0, "k": 4}, {"x": 5.0, "k": 6}]


def test_cli_chain_takes_numpy_functions_and_builtins(capsys):
    # DESIGN.md section 3: select(np.sqrt), select(abs), sum(np.square) are supported; in
    # the CLI's query text they were refused ("np.square is not a lambda ...").
    from querycompute.cli.main import main
    assert main(["source", "select(np.sqrt).where(np.isfinite).sum(np.square)", "--backend", "opencl"]) == 0
    x = np.zeros(3, np.float32)
    want = qc.query(x).select(np.sqrt).where(np.isfinite).source("opencl", terminal=qc.sum(np.square))
    assert capsys.readouterr().out.strip() == want.strip()
    assert _cli_exit(["source", "select(abs).max()", "--backend", "cuda"], capsys)[0] == 0
    code, err = _cli_exit(["source", "select(print).sum()"], capsys)
    assert code == 1 and "can't be used as a query function" in err
    # qc.aggregate(func, seed) is an agg spec (DESIGN.md section 3); query text refused it
    assert main(["source", "agg(n=qc.count, g=qc.aggregate(lambda a, v: a * v, 1))", "--dtype",
                 "int32", "--backend", "opencl"]) == 0
    want = qc.query(np.zeros(3, np.int32)).source(
        "opencl", terminal=qc.agg(n=qc.count, g=qc.aggregate(lambda a, v: a * v, 1)))
    assert capsys.readouterr().out.strip() == want.strip()


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_shaped_terminals_of_nothing_with_default_none_give_none(backend):
    # DESIGN.md section 3: min/max/mean/first of an empty sequence give `default`; over
    # shaped elements default=None came back as an array of None objects (dtype object).
    # A value default still fills the element shape, as X.max(axis=0, initial=...) would.
    X = np.ones((5, 3), np.float32)
    q = qc.query(X).on(backend).where(lambda r: r.sum() > 100)
    assert q.max(default=None) is None and q.min(default=None) is None
    assert q.mean(default=None) is None and q.first(default=None) is None
    np.testing.assert_array_equal(q.min(default=0.0), np.zeros(3))
    np.testing.assert_array_equal(qc.query(X).on(backend).max(default=None), X.max(axis=0))
