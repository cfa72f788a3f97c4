"""Issue 19 (second part): user functions travel to Dask workers as text plus captured
values (item 2: "nothing pickled but the plan/source"), `compute=False` on the terminals,
and the pipeline operators over Dask chunks (take/skip, scan, distinct, order_by, top-k).
One real distributed LocalCluster (2 worker processes) for the module; results are compared
with the numpy backend on the concatenated data."""
from __future__ import annotations

import importlib.util
import os
import sys
import textwrap

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")
import cloudpickle  # noqa: E402  (installed with distributed)

import querycompute as qc  # noqa: E402

cloudpickle.register_pickle_by_value(sys.modules[__name__])   # workers can't import tests/
RNG = np.random.default_rng(1919)




def test_item2_lambdas_travel_as_text_the_module_file_is_gone(client, tmp_path):
    # the query's lambdas (and a def, and a captured constant) live in a module the workers
    # never saw; the file is deleted and the module forgotten before compute()
    path = tmp_path / "h19_user_query.py"
    path.write_text(textwrap.dedent("""
        import numpy as np
        SCALE = 3.0

        def big(v):
            return v > 1000

        def build(q, offset):
            return q.select(lambda v: v * SCALE).where(big).select(lambda v: np.sqrt(v) + offset)
    """))
    spec = importlib.util.spec_from_file_location("h19_user_query", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["h19_user_query"] = mod
    spec.loader.exec_module(mod)
    x = RNG.uniform(0, 2000, 3001).astype(np.float32)
    q = mod.build(qc.query(da.from_array(x, chunks=500)), np.float32(2))
    want = mod.build(qc.query(x).on("numpy"), np.float32(2))
    mean = lambda v: v * 2   # noqa: E731  (a terminal function travels the same way)
    ref = want.agg(s=qc.sum, n=qc.count, m=qc.mean(mean))   # the client read the source here
    os.remove(path)
    del mod, sys.modules["h19_user_query"]
    got = q.agg(s=qc.sum, n=qc.count, m=qc.mean(mean))
    assert got["n"] == ref["n"]
    np.testing.assert_allclose(got["s"], ref["s"], rtol=1e-5)
    np.testing.assert_allclose(got["m"], ref["m"], rtol=1e-5)


def _ints(n=200):
    return RNG.integers(-50, 50, n).astype(np.int32)


def test_item2_compute_false_returns_dask_objects(client):
    x = _ints()
    q = qc.query(da.from_array(x, chunks=37)).on("numpy").where(lambda v: v > 0)
    ref = qc.query(x).on("numpy").where(lambda v: v > 0)
    lazy = q.sum(compute=False)
    assert hasattr(lazy, "dask") and lazy.compute() == ref.sum()
    got = q.agg(s=qc.sum, m=qc.max, compute=False).compute()
    assert got == ref.agg(s=qc.sum, m=qc.max)
    assert q.first(compute=False).compute() == ref.first()
    assert q.count(lambda v: v > 10, compute=False).compute() == ref.count(lambda v: v > 10)
    assert q.aggregate(lambda a, v: a + v, 1, compute=False).compute() == \
        ref.aggregate(lambda a, v: a + v, 1)
    assert isinstance(q.to_array(compute=False), da.Array)
    assert q.to_list(compute=False).compute() == ref.to_list()
    with pytest.raises(qc.QueryError, match="compute=False applies to queries over Dask"):
        qc.query(x).sum(compute=False)               # in memory: refused, not ignored
    with pytest.raises(TypeError, match="True or False"):
        q.sum(compute="no")


def test_item2_take_skip_while_over_chunks(client):
    x = _ints(301)
    q = qc.query(da.from_array(x, chunks=23)).on("numpy").where(lambda v: v % 3 != 0)
    ref = qc.query(x).on("numpy").where(lambda v: v % 3 != 0)
    for build in (lambda q: q.take(40), lambda q: q.skip(40), lambda q: q.skip(5).take(500),
                  lambda q: q.take_while(lambda v: v > -45), lambda q: q.skip_while(lambda v: v > -45)):
        np.testing.assert_array_equal(build(q).to_array().compute(), build(ref).to_array())
    assert q.skip(7).take(9).select(lambda v: v * 2).sum() == ref.skip(7).take(9).select(lambda v: v * 2).sum()
    assert q.take(0).count() == 0 and q.skip(10_000).to_array().compute().shape == (0,)
    # known chunk sizes (no where first): Dask's slicing keeps only the chunks it needs
    k = qc.query(da.from_array(x, chunks=23)).on("numpy").take(30).to_array()
    assert k.numblocks[0] == 2
    np.testing.assert_array_equal(k.compute(), x[:30])
    np.testing.assert_array_equal(qc.query(da.from_array(x, chunks=23)).on("numpy").skip(290)
                                  .select(lambda v: v + 1).to_array().compute(), x[290:] + 1)


def test_item2_distinct_order_by_top_k(client):
    x = RNG.integers(0, 40, 257).astype(np.float32)
    x[::31] = np.nan
    # the numpy backend per chunk keeps this test free of kernel builds (the cpu backend's
    # chunks run in the scan test and the module-file test)
    q = qc.query(da.from_array(x, chunks=30)).on("numpy").select(lambda v: v - 20)
    ref = qc.query(x).on("numpy").select(lambda v: v - 20)
    for build in (lambda q: q.order_by_descending().take(5).select(lambda v: v * 10),
                  lambda q: q.distinct(), lambda q: q.distinct(lambda v: abs(v)),
                  lambda q: q.order_by(), lambda q: q.order_by_descending(lambda v: abs(v)),
                  lambda q: q.order_by(lambda v: v % 7).then_by_descending(lambda v: v).take(11)):
        np.testing.assert_array_equal(build(q).to_array().compute(), build(ref).to_array())
    # records: the whole element moves with its key (stable: ties keep element order)
    a, b = RNG.integers(0, 5, 150).astype(np.int64), np.arange(150, dtype=np.float64)
    t = qc.query(a=da.from_array(a, chunks=16), b=da.from_array(b, chunks=16)).on("numpy")
    tref = qc.query(a=a, b=b).on("numpy")
    got, want = t.order_by(lambda r: r.a).take(20).to_array(), tref.order_by(lambda r: r.a).take(20).to_array()
    for k in want:
        np.testing.assert_array_equal(got[k].compute(), want[k])
    assert t.distinct(lambda r: r.a).count() == tref.distinct(lambda r: r.a).count()


def test_item2_scan_seed_once_and_unsupported(client):
    x = _ints(211)
    q = qc.query(da.from_array(x, chunks=17)).where(lambda v: v > -20)
    ref = qc.query(x).on("numpy").where(lambda v: v > -20)
    for build in (lambda q: q.scan(lambda a, v: a + v, 100), lambda q: q.scan(lambda a, v: max(a, v), -1000)):
        np.testing.assert_array_equal(build(q).to_array().compute(), build(ref).to_array())
    assert q.scan(lambda a, v: a + v, 0).max() == ref.scan(lambda a, v: a + v, 0).max()
    with pytest.raises(qc.QueryError, match="reverse"):
        q.reverse().to_array()
