"""Issue 19: queries over Dask arrays / dataframes on a real distributed LocalCluster
(2 worker processes): per-chunk kernels, partials combined by Dask, results equal to the
numpy backend on the concatenated data."""
from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")
import cloudpickle  # noqa: E402  (installed with distributed)
import pandas as pd  # noqa: E402

import querycompute as qc  # noqa: E402
from querycompute.dask import run as dask_run  # noqa: E402

cloudpickle.register_pickle_by_value(sys.modules[__name__])   # workers can't import tests/
ROOT = Path(__file__).resolve().parent.parent
RNG = np.random.default_rng(19)




def _data(n=5003):
    v = RNG.uniform(0, 2000, n).astype(np.float32)
    v[::97] = np.nan
    return v


def _w1(q):
    return q.select(lambda v: v * 2).where(lambda v: v > 1000).select(lambda v: v + 100)


def _close(a, b):
    assert np.asarray(a).dtype == np.asarray(b).dtype
    np.testing.assert_allclose(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64), rtol=1e-5)


def test_item1_item2_chains_and_aggregates_equal_numpy(client):
    x = _data()
    spec = dict(s=qc.sum, peak=qc.max, lo=qc.min, n=qc.count, m=qc.mean(lambda v: v * v),
                f=qc.first, big=qc.any(lambda v: v > 3900), every=qc.all(lambda v: v > 1000))
    for data, chunks in ((x, 1000), (x[:24], 1)):             # chunks of size 1 too
        q, ref = _w1(qc.query(da.from_array(data, chunks=chunks))), _w1(qc.query(data).on("numpy"))
        got, want = q.agg(**spec), ref.agg(**spec)
        assert list(got) == list(want)
        for k in want:
            if k in ("s", "m"):
                _close(got[k], want[k])
            else:
                assert got[k] == want[k] and type(got[k]) is type(want[k]), k
        arr = q.to_array()
        assert isinstance(arr, da.Array)            # lazy: nothing computed yet
        np.testing.assert_array_equal(arr.compute(), ref.to_array())
    # the standalone terminals and aggregate: seed once, element order kept ("last non-zero"
    # is not commutative)
    _close(q.sum(), ref.sum())
    assert q.first() == ref.first() and q.count() == ref.count()
    last = lambda a, v: v if v != 0 else a      # noqa: E731
    assert q.aggregate(last, -1.0) == ref.aggregate(last, -1.0)
    # NaN: max propagates it like np.max
    assert np.isnan(qc.query(da.from_array(x, chunks=700)).max())


def test_item1_zip_table_dataframe_w4_w5_w6(client):
    n = 3001
    a, b = RNG.uniform(0, 2000, n).astype(np.float32), RNG.uniform(0, 2000, n).astype(np.float32)
    # W4: a zip of differently chunked arrays (rechunked to equal chunks)
    q = qc.query(da.from_array(a, chunks=500), da.from_array(b, chunks=333)).select(lambda x, y: x * y + 1)
    _close(q.sum(), qc.query(a, b).on("numpy").select(lambda x, y: x * y + 1).sum())
    # W5: mean and max in one agg
    w5 = lambda q: q.where(lambda v: v > 10).select(lambda v: np.sqrt(v) + 1).agg(m=qc.mean, mx=qc.max)  # noqa: E731
    got, want = w5(qc.query(da.from_array(a, chunks=400))), w5(qc.query(a).on("numpy"))
    _close(got["m"], want["m"]), _close(got["mx"], want["mx"])
    # W6 over a dict of dask arrays and over a dask dataframe
    price = RNG.uniform(0, 2000, n).astype(np.float32)
    qty, cat = RNG.integers(0, 10, n).astype(np.int32), RNG.integers(0, 8, n).astype(np.int32)
    w6 = lambda q: q.where(lambda r: r.cat == 3 and r.qty > 2).sum(lambda r: r.price * r.qty)  # noqa: E731
    want = w6(qc.query(price=price, qty=qty, cat=cat).on("numpy"))
    cols = {"price": da.from_array(price, chunks=600), "qty": da.from_array(qty, chunks=600),
            "cat": da.from_array(cat, chunks=600)}
    _close(w6(qc.query(cols)), want)
    frame = dd.from_pandas(pd.DataFrame({"price": price, "qty": qty, "cat": cat}), npartitions=4)
    _close(w6(qc.query(frame)), want)
    recs = qc.query(frame).where(lambda r: r.cat == 3).select(lambda r: {"p": r.price, "q": r.qty}).to_array()
    ref = qc.query(price=price, qty=qty, cat=cat).on("numpy").where(lambda r: r.cat == 3) \
        .select(lambda r: {"p": r.price, "q": r.qty}).to_array()
    for k in ref:
        np.testing.assert_array_equal(recs[k].compute(), ref[k])


def test_item2_group_by_combines_partial_groups(client):
    n = 4001
    price = RNG.uniform(0, 100, n).astype(np.float32)
    cat = RNG.integers(0, 7, n).astype(np.int32)
    keyf = RNG.integers(0, 3, n).astype(np.float64)
    keyf[::50] = np.nan
    spec = dict(total=qc.sum(lambda r: r.price), n=qc.count, lo=qc.min(lambda r: r.price),
                hi=qc.max(lambda r: r.price), m=qc.mean(lambda r: r.price),
                f=qc.first(lambda r: r.price), big=qc.any(lambda r: r.price > 99))
    for key in (lambda r: (r.k, r.cat),):           # a tuple key with NaN keys (last)
        dq = qc.query(price=da.from_array(price, chunks=500), cat=da.from_array(cat, chunks=500),
                      k=da.from_array(keyf, chunks=500))
        got = dq.group_by(key).agg(**spec)
        want = qc.query(price=price, cat=cat, k=keyf).on("numpy").group_by(key).agg(**spec)
        assert list(got) == list(want)
        for col in want:
            if want[col].dtype.kind == "f" and col in ("total", "m"):
                _close(got[col], want[col])
            else:
                np.testing.assert_array_equal(got[col], want[col])
    with pytest.raises(qc.QueryError, match="aggregate"):
        dq.group_by(lambda r: r.cat).agg(x=qc.aggregate(lambda a, v: a + v, 0.0))


def test_item2_empty_chunks_lazy_and_unsupported_operators(client):
    x = np.arange(100, dtype=np.int32)
    q = qc.query(da.from_array(x, chunks=10)).where(lambda v: v >= 95)   # most chunks empty
    assert q.first() == 95 and q.count() == 5 and q.min() == 95 and int(q.sum()) == sum(range(95, 100))
    none = q.where(lambda v: v > 1000)
    assert none.count() == 0 and none.sum() == 0 and none.any() is False and none.all() is True
    with pytest.raises(qc.EmptySequenceError):
        none.min()
    assert none.first(default=-1) == -1 and none.mean(default=0.5) == 0.5
    assert none.aggregate(lambda a, v: a + v, 7) == 7
    assert none.to_array().compute().shape == (0,)
    assert "__kernel" in q.source("opencl", "sum") and "n=100" in repr(q)   # planned on the meta
    lazy = dask_run.lazy(q).sum()
    assert hasattr(lazy, "compute") and int(lazy.compute()) == sum(range(95, 100))
    for build, name in ((lambda q: q.reverse(), "reverse"),
                        (lambda q: q.join(q, lambda v: v, lambda v: v, lambda a, b: a), "join")):
        with pytest.raises(qc.QueryError, match=name):   # (the others: test_issue19_operators)
            build(q).to_array()
    # last / single / first(pred): positional terminals over chunks (most of them empty)
    ref = qc.query(x).on("numpy").where(lambda v: v >= 95)
    assert q.last() == ref.last() and q.first(lambda v: v > 96) == ref.first(lambda v: v > 96)
    assert q.single(lambda v: v == 96) == 96 and none.last(default=-1) == -1
    with pytest.raises(qc.MultipleElementsError):
        q.single()
    with pytest.raises(qc.QueryError, match="element_at"):
        q.element_at(2)


def test_item3_memmap_out_of_core(client, tmp_path):
    n = 20011
    path = tmp_path / "big.f32"
    mm = np.memmap(path, dtype=np.float32, mode="w+", shape=(n,))
    mm[:] = RNG.uniform(0, 2000, n).astype(np.float32)
    mm.flush()
    ro = np.memmap(path, dtype=np.float32, mode="r")
    _close(_w1(qc.query(ro, chunks=4096)).sum(), _w1(qc.query(np.array(ro)).on("numpy")).sum())
    tail = ro[5:]                                   # a view starting inside the file
    assert qc.query(tail, chunks=3000).count(lambda v: v > 1000) == int(np.count_nonzero(tail > 1000))


def test_item4_workers_compile_or_load_from_cache(client):
    x = _data(4000)
    q = qc.query(da.from_array(x, chunks=250)).select(lambda v: v * 3).where(lambda v: v > 10)
    client.run(lambda: dask_run._LOG.clear())          # only this query's runs below
    assert q.count() == qc.query(x).on("numpy").select(lambda v: v * 3).where(lambda v: v > 10).count()
    logs = client.run(dask_run.worker_log)
    runs = [r for log in logs.values() for r in log if r[2] == "agg" and r[3] > 0]
    assert runs, "no chunk ran on a worker"
    origins = {cache for r in runs for _, cache in r[4]}
    # the client compiled the kernel (its meta run) into the shared disk cache: each worker
    # process loads it from there once, then finds it in its memory
    assert "disk" in origins and origins <= {"disk", "memory"}, runs
    assert {r[0] for r in runs} <= {w["pid"] for w in client.run(lambda: {"pid": os.getpid()}).values()}


def test_item4_worker_killed_mid_query_is_retried(client):
    x = _data(6000)
    slow = da.from_array(x, chunks=200).map_blocks(lambda b: (time.sleep(0.05), b)[1], dtype=x.dtype)
    q = _w1(qc.query(slow))
    fut = client.compute(dask_run.lazy(q).agg(s=qc.sum, n=qc.count))
    time.sleep(0.4)
    pid = next(iter(client.run(os.getpid).values()))
    os.kill(pid, signal.SIGKILL)                    # a worker process dies; its nanny starts a new one
    got = fut.result(timeout=120)
    want = _w1(qc.query(x).on("numpy")).agg(s=qc.sum, n=qc.count)
    assert got["n"] == want["n"]
    _close(got["s"], want["s"])
