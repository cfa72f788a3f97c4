"""Issue 18 item 8: a host input larger than QUERYCOMPUTE_DEVICE_MEMORY runs on the device
chunk by chunk (querycompute/run/streaming.py), the chunks' partials combined by the multi-block
rules; executed on pocl with a small budget and checked against the numpy backend."""
from __future__ import annotations

import numpy as np
import pytest

import querycompute as qc
from querycompute.backends import registry

N = 300_001                 # float32 + int32 columns at a 1 MB budget: 65,536-element chunks


@pytest.fixture
def pocl(ocl, monkeypatch):
    """An OpenCL device (conftest's `ocl` skips without one) and a 1 MB device-memory budget."""
    monkeypatch.setenv("QUERYCOMPUTE_DEVICE_MEMORY", "1e6")


def _data():
    rng = np.random.default_rng(18)
    return rng.uniform(0, 2000, N).astype(np.float32), rng.integers(-50, 50, N).astype(np.int32)


def test_item8_to_array_streams_in_order(pocl):
    x, _ = _data()
    q = qc.query(x).where(lambda v: v % 3 < 1).select(lambda v: v * 2 + 1)
    got = q.on("opencl").to_array()
    trace = qc.last_trace()
    assert trace.chunks == 5 and "STREAMED: 5 chunks" in str(trace)
    np.testing.assert_array_equal(got, q.on("numpy").to_array())


def test_item8_aggregates_combine_across_chunks(pocl):
    x, b = _data()
    z = qc.query(a=x, b=b).where(lambda r: r.a > 1000)
    aggs = dict(s=qc.sum(lambda r: r.b), f=qc.first(lambda r: r.b), c=qc.count(),
                lo=qc.min(lambda r: r.a), m=qc.mean(lambda r: r.a))
    got = z.on("opencl").agg(**aggs)
    assert qc.last_trace().chunks == 5
    want = z.on("numpy").agg(**aggs)
    for key in ("s", "f", "c", "lo"):           # exact: integers, first, min
        assert got[key] == want[key], key
    np.testing.assert_allclose(got["m"], want["m"], rtol=1e-6)   # a float sum: another order


def test_item8_under_the_budget_or_with_a_breaker_runs_whole(pocl):
    x, _ = _data()
    small = x[:1000]
    assert qc.query(small).on("opencl").count(lambda v: v > 10) == int((small > 10).sum())
    assert qc.last_trace().chunks == 0
    # a sort needs every element at once: not streamed
    got = qc.query(x).order_by(lambda v: v).take(3).on("opencl").to_array()
    assert qc.last_trace().chunks == 0
    np.testing.assert_array_equal(got, np.sort(x)[:3])


def test_item8_device_failure_disables_the_device_and_reruns_on_cpu(pocl, monkeypatch):
    """A real device failure: a compaction of 1.1e9 int64 needs an 8.8 GB output buffer, more
    than pocl's largest allocation (8 GB): creating it fails (INVALID_BUFFER_SIZE). `auto`
    (standing in for a GPU: its remembered choice is opencl) warns once, marks opencl broken
    for the process, reruns on cpu, and the trace says so; the next call goes to cpu quietly."""
    import warnings
    from querycompute.backends.opencl.opencl_device import open_device
    device = open_device().device         # the one the opencl backend runs on
    n = 1_100_000_000
    if n * 8 <= device.max_mem_alloc_size:
        pytest.skip("this OpenCL device could allocate the output")
    monkeypatch.delenv("QUERYCOMPUTE_DEVICE_MEMORY")
    monkeypatch.setenv("QUERYCOMPUTE_TIERED", "0")
    monkeypatch.setattr(registry, "_auto", {True: "opencl", False: "opencl"})
    monkeypatch.setattr(registry, "_broken", {})
    q = qc.range(n).where(lambda v: v < 3)
    with pytest.warns(qc.FallbackWarning, match="opencl.*INVALID_BUFFER_SIZE"):
        np.testing.assert_array_equal(q.to_array(), np.arange(3))
    trace = qc.last_trace()
    assert trace.backend == "cpu" and "opencl failed at run time" in trace.fallback
    with warnings.catch_warnings():
        warnings.simplefilter("error")                 # warned once: not again
        assert qc.range(10).where(lambda v: v < 3).count() == 3
    assert qc.last_trace().backend in ("cpu", "numpy") and "opencl" in registry._broken
