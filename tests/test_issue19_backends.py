"""Issue 19 item 1: the backends apply per chunk — `.on("opencl")` over a Dask array runs each
chunk's fused pass on the OpenCL device (pocl here) and equals the numpy backend on the
concatenated data. Dask's threaded scheduler (no cluster: the cluster tests are
test_issue19_dask.py); the chunk sizes leave a short last chunk."""
from __future__ import annotations

import numpy as np
import pytest

import querycompute as qc

da = pytest.importorskip("dask.array", reason="dask is not installed (pip install -e '.[dask]')")


@pytest.mark.parametrize("backend", ["opencl", "cpu"])
def test_item1_backend_applies_per_chunk(backend):
    if not qc.backends()[backend]["available"]:
        pytest.skip(f"{backend}: {qc.backends()[backend]['reason']}")
    rng = np.random.default_rng(19)
    x = (rng.random(10_007) * 2000).astype(np.float32)
    x[::97] = np.nan
    d = da.from_array(x, chunks=3_000)
    q = qc.query(d).on(backend).select(lambda v: v * 2).where(lambda v: v > 1000)
    ref = qc.query(x).on("numpy").select(lambda v: v * 2).where(lambda v: v > 1000)
    from querycompute.dask import run as dask_run
    dask_run._LOG.clear()      # (a bounded log: full after earlier Dask tests in this process)
    before = len(dask_run.worker_log())
    assert q.count() == ref.count()
    # this process ran the chunks (threads); the n = 0 run is the client's check on the meta chunk
    runs = [r for r in dask_run.worker_log()[before:] if r[3] > 0]
    assert sorted(r[3] for r in runs) == [1007, 3000, 3000, 3000], runs
    assert {r[1] for r in runs} == {backend}, runs
    np.testing.assert_array_equal(q.to_array().compute(), ref.to_array())
    got, want = q.agg(n=qc.count, peak=qc.max, lo=qc.min), ref.agg(n=qc.count, peak=qc.max, lo=qc.min)
    assert got == want
    # per-chunk float32 sums are added in chunk order: equal within float32 rounding
    assert np.isclose(q.sum(), ref.sum(), rtol=1e-6)
