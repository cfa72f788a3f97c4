"""Issue 29 item 5 (and qc.count(pred) of item 3): results in the caller's world.

to_pandas() / to_polars() / to_arrow() on queries (tables from pandas, polars and pyarrow
inputs, records, tuples, scalars) and on group_by results, against to_array() / to_dict() and
against pandas' own groupby; qc.count(pred) inside group_by(...).agg against plain Python on
every backend that runs here. Column names with spaces and non-ASCII, empty results, NaN,
negative and extreme values.
"""
from __future__ import annotations

import math
import pathlib
import re
import runpy
import sys

import numpy as np
import pytest

import querycompute as qc

pd = pytest.importorskip("pandas")
pl = pytest.importorskip("polars")
pa = pytest.importorskip("pyarrow")

BACKENDS = ["numpy"] + [b for b in ("cpu", "opencl", "webgpu") if qc.backends()[b]["available"]]
LIBS = ("to_pandas", "to_polars", "to_arrow")


def _frame(backend="numpy"):
    """Columns of several dtypes, names with a space and non-ASCII letters, NaN, negatives,
    extremes (32-bit on webgpu: WGSL has no 64-bit types)."""
    wide = backend != "webgpu"
    f, i = (np.float64, np.int64) if wide else (np.float32, np.int32)
    return pd.DataFrame({
        "store id": np.array([2, 1, 2, -7, 3, 1], dtype=np.int32),
        "menge": np.array([5.0, 3.0, -1.0, np.nan, 1e300 if wide else 3e38, -0.0], dtype=f),
        "größe": np.array([1.5, -2.5, 0.25, 3.0, -1.0, 2.0], dtype=np.float32),
        "promo": np.array([True, False, True, True, False, True]),
        "big": np.array([np.iinfo(i).max, np.iinfo(i).min, 0, 1, -1, 7], dtype=i),
    })


# NaN stays a value (pl.from_pandas / pa.Table.from_pandas would make it a null, which a
# query refuses to read)
INPUTS = {"pandas": lambda df: df,
          "polars": lambda df: pl.DataFrame({c: df[c].to_numpy() for c in df.columns}),
          "pyarrow": lambda df: pa.table({c: df[c].to_numpy() for c in df.columns})}
# the conversions are backend-independent (they read to_array()'s arrays): every input kind
# on numpy and cpu, pandas input on the GPU backends (their compiles are slow on pocl/lavapipe)
BY_INPUT = [(b, s) for b in BACKENDS for s in INPUTS if s == "pandas" or b in ("numpy", "cpu")]


def _columns(obj) -> dict:
    """{name: numpy array} of a pandas / polars / Arrow table."""
    if isinstance(obj, pd.DataFrame):
        return {c: obj[c].to_numpy() for c in obj.columns}
    if isinstance(obj, pl.DataFrame):
        return {c: obj[c].to_numpy() for c in obj.columns}
    return {c: obj.column(c).to_numpy() for c in obj.column_names}


def _same(got: dict, want: dict) -> None:
    assert list(got) == list(want)
    for name in want:
        g, w = np.asarray(got[name]), np.asarray(want[name])
        assert g.dtype == w.dtype, (name, g.dtype, w.dtype)
        np.testing.assert_array_equal(g, w, err_msg=name)


# ---- queries -------------------------------------------------------------------------------

@pytest.mark.parametrize("backend,source", BY_INPUT)
def test_tables_keep_names_order_dtypes_and_rows(backend, source):
    df = _frame(backend)
    q = qc.query(INPUTS[source](df)).on(backend).where(lambda r: r["größe"] > 0)
    want = {c: df[c].to_numpy()[df["größe"].to_numpy() > 0] for c in df.columns}
    for lib, kind in zip(LIBS, (pd.DataFrame, pl.DataFrame, pa.Table)):
        out = getattr(q, lib)()
        assert isinstance(out, kind)
        _same(_columns(out), want)
        _same(_columns(out), q.to_array())


@pytest.mark.parametrize("backend", BACKENDS)
def test_records_tuples_and_scalars(backend):
    df = _frame(backend)
    q = qc.query(df).on(backend)
    rec = q.select(lambda r: {"p q": r.menge * 2, "ü": r["store id"], "flag": r.promo})
    tup = q.select(lambda r: (r["store id"], r.promo))
    sca = q.select(lambda r: r["store id"] - 1)
    for lib in LIBS:
        _same(_columns(getattr(rec, lib)()), rec.to_array())
        _same(_columns(getattr(tup, lib)()), {"0": df["store id"].to_numpy(), "1": df["promo"].to_numpy()})
    s = sca.to_pandas()
    assert isinstance(s, pd.Series) and s.name is None and s.dtype == np.int32
    assert s.tolist() == (df["store id"] - 1).tolist()
    s = sca.to_polars()
    assert isinstance(s, pl.Series) and s.name == "" and s.dtype == pl.Int32
    assert s.to_list() == (df["store id"] - 1).tolist()
    a = sca.to_arrow()
    assert isinstance(a, pa.Array) and a.type == pa.int32() and a.to_pylist() == s.to_list()


def test_nan_stays_a_value_and_float16_and_bool_keep_their_types():
    x = np.array([1.0, np.nan, -np.inf, -0.0], dtype=np.float16)
    q = qc.query(x=x, b=x > 0).on("numpy")
    p, l, a = q.to_pandas(), q.to_polars(), q.to_arrow()
    assert p["x"].dtype == np.float16 and p["b"].dtype == bool and p["x"].isna().tolist()[1]
    assert l["x"].dtype == pl.Float16 and l["x"].null_count() == 0 and l["x"].is_nan().to_list()[1]
    assert a.schema.field("x").type == pa.float16() and a.column("x").null_count == 0
    assert np.signbit(a.column("x").to_numpy()[3])


@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_results_keep_columns_and_dtypes(backend):
    df = _frame(backend)
    q = qc.query(df).on(backend).where(lambda r: r["größe"] > 100)
    for lib in LIBS:
        got = _columns(getattr(q, lib)())
        assert list(got) == list(df.columns)
        assert all(len(v) == 0 for v in got.values())
        assert [got[c].dtype for c in df.columns] == list(df.dtypes)
    g = q.group_by(lambda r: r["store id"]).agg(n=qc.count(lambda r: r.promo), s=qc.sum(lambda r: r.menge))
    for lib in LIBS:
        got = _columns(getattr(g, lib)())
        assert list(got) == ["key", "n", "s"]
        assert [got[c].dtype for c in got] == [np.int32, np.int64, df["menge"].dtype]
    s = q.select(lambda r: r.promo)
    assert s.to_pandas().dtype == bool and s.to_polars().dtype == pl.Boolean
    assert s.to_arrow().type == pa.bool_() and len(s.to_arrow()) == 0


def test_datetimes_keep_instants_and_polars_gets_ms_for_seconds():
    # (queries read no datetime column yet: the conversion of such a result, by itself)
    from querycompute.api import results
    t = np.array(["2024-01-02T03:04:05", "1969-12-31T23:59:59"], dtype="datetime64[s]")
    d = np.array([1, -2], dtype="timedelta64[m]")
    cols = {"t": t, "d": d, "day": t.astype("datetime64[D]")}
    arrow = results.to_arrow(cols)
    assert arrow.schema.types == [pa.timestamp("s"), pa.duration("s"), pa.date32()]
    assert arrow.column("d").to_pylist() == [d[0].item(), d[1].item()]
    got = results.to_polars(cols)
    assert got.dtypes == [pl.Datetime("ms"), pl.Duration("ms"), pl.Date]
    np.testing.assert_array_equal(got["t"].to_numpy(), t.astype("datetime64[ms]"))
    np.testing.assert_array_equal(got["d"].to_numpy(), d.astype("timedelta64[ms]"))
    np.testing.assert_array_equal(results.to_pandas(cols)["t"].to_numpy(), t)
    for lib in ("polars", "arrow"):
        with pytest.raises(qc.QueryError, match="datetime64\\[ps\\] column has no"):
            getattr(results, f"to_{lib}")({"t": t.astype("datetime64[ps]")})


def test_shaped_elements_are_refused_with_what_to_do():
    q = qc.query(np.arange(6.0).reshape(3, 2))
    for lib in LIBS:
        with pytest.raises(qc.QueryError, match=r"shape \(3, 2\).*to_array\(\)"):
            getattr(q, lib)()


@pytest.mark.parametrize("lib,package", [("to_pandas", "pandas"), ("to_polars", "polars"),
                                         ("to_arrow", "pyarrow")])
def test_a_missing_library_names_its_pip_package(monkeypatch, lib, package):
    q = qc.query(a=np.arange(3)).on("numpy")
    monkeypatch.setitem(sys.modules, package, None)       # import of it fails, as uninstalled
    with pytest.raises(ImportError, match=f"pip install {package}"):
        getattr(q, lib)()
    with pytest.raises(ImportError, match=f"pip install {package}"):
        getattr(q.group_by(lambda r: r.a).count(), lib)()


def test_dask_inputs_are_computed():
    da = pytest.importorskip("dask.array")
    x = np.array([3, -1, 4, 1, -5, 9, 2], dtype=np.int32)
    q = qc.query(v=da.from_array(x, chunks=3), w=da.from_array(x * 0.5, chunks=3)).on("numpy").where(lambda r: r.v > 0)
    want = {"v": x[x > 0], "w": x[x > 0] * 0.5}
    for lib in LIBS:
        _same(_columns(getattr(q, lib)()), want)
    g = q.group_by(lambda r: r.v % 2).agg(n=qc.count, big=qc.count(lambda r: r.w > 1))
    _same(_columns(g.to_pandas()), {"key": np.array([0, 1], dtype=np.int32),
                                    "n": np.array([2, 3]), "big": np.array([1, 2])})


# ---- group_by results ----------------------------------------------------------------------

@pytest.mark.parametrize("backend,source", BY_INPUT)
def test_grouped_results_against_pandas_groupby(backend, source):
    df = _frame(backend)
    g = qc.query(INPUTS[source](df)).on(backend).group_by(lambda r: r["store id"]).agg(
        **{"summe größe": qc.sum(lambda r: r["größe"]), "n": qc.count,
           "promos": qc.count(lambda r: r.promo), "hi": qc.max(lambda r: r.big)})
    want = df.groupby("store id", sort=True).agg(**{
        "summe größe": ("größe", "sum"), "n": ("größe", "size"),
        "promos": ("promo", "sum"), "hi": ("big", "max")}).reset_index()
    for lib in LIBS:
        got = _columns(getattr(g, lib)())
        assert list(got) == ["key", "summe größe", "n", "promos", "hi"]
        np.testing.assert_array_equal(got["key"], want["store id"].to_numpy())
        np.testing.assert_allclose(got["summe größe"], want["summe größe"].to_numpy(), rtol=1e-6)
        for c in ("n", "promos", "hi"):
            np.testing.assert_array_equal(got[c], want[c].to_numpy())
        assert got["key"].dtype == np.int32 and got["summe größe"].dtype == np.float32
        assert got["n"].dtype == got["promos"].dtype == np.int64
        _same(got, g.to_dict())
    assert type(g.to_dict()) is dict and isinstance(g, dict)


@pytest.mark.parametrize("backend", BACKENDS)
def test_grouped_tuple_and_record_keys_and_shorthands(backend):
    df = _frame(backend)
    q = qc.query(df).on(backend)
    t = q.group_by(lambda r: (r.promo, r["store id"])).count()
    rec = q.group_by(lambda r: {"aktion": r.promo, "laden nr": r["store id"]}).mean(lambda r: r["größe"])
    want = df.groupby(["promo", "store id"], sort=True).agg(
        count=("größe", "size"), mean=("größe", "mean")).reset_index()
    for lib in LIBS:
        got = _columns(getattr(t, lib)())
        assert list(got) == ["key_0", "key_1", "count"]
        np.testing.assert_array_equal(got["key_0"], want["promo"].to_numpy())
        np.testing.assert_array_equal(got["key_1"], want["store id"].to_numpy())
        np.testing.assert_array_equal(got["count"], want["count"].to_numpy())
        got = _columns(getattr(rec, lib)())
        assert list(got) == ["aktion", "laden nr", "mean"] and got["aktion"].dtype == bool
        np.testing.assert_allclose(got["mean"], want["mean"].to_numpy(), rtol=1e-6)


# ---- qc.count(pred) inside group_by(...).agg -----------------------------------------------

def _count_oracle(keys, vals, pred) -> tuple:
    groups: dict = {}
    for k, v in zip(keys.tolist(), vals.tolist()):
        n, m = groups.get(k, (0, 0))
        groups[k] = (n + 1, m + bool(pred(v)))
    ks = sorted(groups)
    return ks, [groups[k][0] for k in ks], [groups[k][1] for k in ks]


@pytest.mark.parametrize("backend", BACKENDS)
def test_count_pred_per_group_against_python(backend):
    rng = np.random.default_rng(29)
    keys = rng.integers(-3, 4, 300).astype(np.int32)
    vals = rng.normal(size=300).astype(np.float32 if backend == "webgpu" else np.float64)
    vals[::17] = np.nan
    vals[::23] = -0.0
    q = qc.query(k=keys, v=vals).on(backend).group_by(lambda r: r.k)
    out = q.agg(n=qc.count, pos=qc.count(lambda r: r.v > 0), truthy=qc.count(lambda r: r.v),
                nan=qc.count(lambda r: r.v != r.v))
    ks, n, pos = _count_oracle(keys, vals, lambda v: v > 0)
    assert out["key"].tolist() == ks and out["n"].tolist() == n and out["pos"].tolist() == pos
    assert out["truthy"].tolist() == _count_oracle(keys, vals, lambda v: v)[2]    # NaN is truthy
    assert out["nan"].tolist() == _count_oracle(keys, vals, math.isnan)[2]
    assert out["pos"].dtype == np.int64
    k, v = (np.arange(5000, dtype=np.int32) % 4500, np.arange(5000, dtype=np.int32) - 2500)
    many = qc.query(k=k, v=v).on(backend).group_by(
        lambda r: r.k).agg(odd=qc.count(lambda r: r.v % 2 == 1))               # > 4096 groups
    ks, _, odd = _count_oracle(k, v, lambda v: v % 2 == 1)
    assert many["key"].tolist() == ks and many["odd"].tolist() == odd


@pytest.mark.parametrize("backend", BACKENDS)
def test_count_pred_empty_and_refusals(backend):
    q = qc.query(k=np.array([], dtype=np.int16), v=np.array([], dtype=np.float32)).on(backend)
    out = q.group_by(lambda r: r.k).agg(c=qc.count(lambda r: r.v < 0))
    assert out["key"].dtype == np.int16 and out["c"].dtype == np.int64 and len(out["c"]) == 0
    q = qc.query(k=np.array([1, 2], dtype=np.int32), v=np.array([1.0, 2.0], dtype=np.float32)).on(backend)
    with pytest.raises(qc.UnsupportedLambdaError, match=r"test_issue29_results.py:\d+:\d+: count predicate must return a single value"):
        q.group_by(lambda r: r.k).agg(c=qc.count(lambda r: (r.v, r.k)))


# ---- the guide's example -------------------------------------------------------------------

def test_guide_results_example_runs(tmp_path):
    guide = (pathlib.Path(__file__).parent.parent / "docs" / "guide.md").read_text()
    start = guide.index("## Results as pandas, polars or Arrow")
    blocks = re.findall(r"```python\n(.*?)```", guide[start:guide.index("\n## ", start + 3)], re.S)
    assert len(blocks) == 1
    path = tmp_path / "results_example.py"
    path.write_text(blocks[0])
    runpy.run_path(str(path))


@pytest.mark.parametrize("dialect,cast", [("cuda", "(long long)"), ("metal", "(long)")])
def test_count_pred_in_group_kernel_source(dialect, cast):
    """cuda / metal (no device here, and no harness for the group kernels): the pass computes
    the predicate as a 64-bit 0/1 column that the group kernel sums."""
    q = qc.query(k=np.arange(5, dtype=np.int32), v=np.arange(5, dtype=np.float32)).group_by(lambda r: r.k)
    src = q.source(dialect, big=qc.count(lambda r: r.v > 2))
    assert f"{cast}(x_c1 > 2.0f)" in src
    assert "per group sum" in q.explain(dialect, big=qc.count(lambda r: r.v > 2))


# ---- item 3, first version: a group_by result as a query over the groups -------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_having_order_by_take_select_over_groups_against_pandas(backend):
    df = _frame(backend)
    counts = backend != "webgpu"          # counts are int64: no WGSL type (refused, below)
    g = qc.query(df).on(backend).group_by(lambda r: r["store id"]).agg(
        **{"summe größe": qc.sum(lambda r: r["größe"])}, **({"n": qc.count} if counts else {}))
    top = g.where(lambda g: g["summe größe"] > 0).order_by_descending(lambda g: g["summe größe"]) \
           .then_by(lambda g: g.key).take(2)
    want = df.groupby("store id").agg(s=("größe", "sum"), n=("größe", "size")).reset_index()
    having = want[want.s > 0].sort_values(["s", "store id"], ascending=[False, True], kind="stable")[:2]
    got = top.to_pandas()
    assert got.columns.tolist() == ["key", "summe größe"] + (["n"] if counts else [])
    assert got["key"].tolist() == having["store id"].tolist()
    np.testing.assert_allclose(got["summe größe"].to_numpy(), having["s"].to_numpy(), rtol=1e-6)
    twice = g.select(lambda g: g["summe größe"] * 2).to_array()
    np.testing.assert_allclose(twice, want["s"].to_numpy() * 2, rtol=1e-6)
    assert g.count(lambda g: g["summe größe"] < 0) == int((want.s < 0).sum())
    assert g.first() == {name: col[0] for name, col in g.items()}
    assert g.query()._backend == top._backend == backend
    if counts:
        assert got["n"].tolist() == having["n"].tolist()
    else:
        n = qc.query(df).on(backend).group_by(lambda r: r["store id"]).count()
        with pytest.raises(qc.UnsupportedTypeError, match="int64.*cast to a supported type"):
            n.where(lambda g: g.count > 1).to_array()


def test_over_groups_is_a_second_plan_in_explain_and_a_plain_dict_stays():
    g = qc.query(k=np.array([3, 1, 3], dtype=np.int32)).on("numpy").group_by(lambda r: r.k).count()
    for q in (g.where(lambda g: g.count > 1), g.order_by(lambda g: g.count)):
        text = q.explain()
        assert "a second plan" in text and "not fused" in text
    assert g.where(lambda g: g.count > 1).to_list() == [{"key": 3, "count": 2}]
    assert g.to_dict() == dict(g) and list(g) == ["key", "count"]
    with pytest.raises(qc.QueryError, match=r"aggregate first.*\.where\(lambda g"):
        qc.query(np.arange(3)).group_by(lambda v: v).where(lambda v: v > 1)


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_group_by_result_joins_as_its_groups(backend):
    """A group_by's result (GroupedResult) is accepted as the other side of a join and of
    intersect_by: it reads as .query(), one record per group."""
    k = np.arange(300, dtype=np.int64) % 40
    v = np.arange(300, dtype=np.float64)
    per = qc.query(k=k, v=v).group_by(lambda r: r.k).agg(t=qc.sum(lambda r: r.v))
    q = qc.query(np.arange(45, dtype=np.int64)).on(backend).join(per, lambda a: a, lambda g: g.key,
                                                                 lambda a, g: g.t)
    assert q.to_array().tolist() == [float(v[k == i].sum()) for i in range(40)]
    s = qc.query(np.arange(60, dtype=np.int64)).on(backend).intersect_by(per, lambda x: x, lambda g: g.key)
    assert s.to_array().tolist() == list(range(40))
    with pytest.raises(TypeError, match="wrap it"):
        qc.query(np.arange(3)).join({"k": np.arange(3)}, lambda a: a, lambda b: b.k, lambda a, b: a)
