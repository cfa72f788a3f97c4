"""Issue 18 item 5: `auto` keeps host arrays on the CPU unless the plan does enough work per
byte to pay for PCIe (graph.heavy: the operator nodes that read their input many times); device arrays stay on the
device. A GPU is stood in for by the choice `auto` remembered for large inputs (pocl runs the
query), as tests/test_warm_path.py does."""
from __future__ import annotations

import numpy as np
import pytest

import querycompute as qc
from querycompute.backends import registry
from querycompute.graph import graph


def test_item5_the_rule():
    s, w = graph.Select, graph.Where
    assert not graph.heavy((s, w))                     # select / where: one read of each byte
    assert not graph.heavy((s, w, graph.Scan))         # a scan: one read, one write
    for heavy in ((graph.OrderBy,), (s, graph.OrderByDescending), (graph.Distinct,), (graph.GroupBy,),
                  (graph.Join,), (w, graph.LeftJoin)):  # sorts, distinct, group_by, joins
        assert graph.heavy(heavy)
    assert registry.choose_auto(10, True, False) == "cuda"     # device data stays there


def test_item5_auto_sends_only_heavy_host_queries_to_the_gpu(monkeypatch):
    if not registry.availability("opencl")[0]:
        pytest.skip("no OpenCL device here")
    monkeypatch.setattr(registry, "_auto", {True: "opencl"})      # "a GPU for large inputs"
    monkeypatch.setattr(registry, "_broken", {})
    monkeypatch.setattr(registry, "_THRESHOLD", 1000)
    x = (np.arange(5000) % 997).astype(np.float32)
    q = qc.query(x).where(lambda v: v > 10)
    assert q.count() == int((x > 10).sum())
    assert qc.last_trace().backend in ("cpu", "numpy")            # a streaming pass: CPU
    got = q.order_by(lambda v: -v).take(3).to_array()
    assert qc.last_trace().backend == "opencl"                   # a sort: worth the copy
    np.testing.assert_array_equal(got, np.sort(x[x > 10])[::-1][:3])


def test_item5_one_read_back_for_every_result_slot(monkeypatch):
    """W5 (mean and max in one agg: sum, count and max slots) reads its three slots back with
    one device->host copy: the slots are views into one buffer (OpenCL sub-buffers)."""
    if not registry.availability("opencl")[0]:
        pytest.skip("no OpenCL device here")
    from querycompute.backends.opencl.opencl import TRANSFERS
    monkeypatch.setenv("QUERYCOMPUTE_TIERED", "0")          # the kernel answers from the first call
    x = np.random.default_rng(5).uniform(0, 2000, 100_000).astype(np.float32)
    q = qc.query(x).where(lambda v: v > 10).select(lambda v: np.sqrt(v) + 1).on("opencl")
    aggs = dict(m=qc.mean(), hi=qc.max())
    q.agg(**aggs)                                     # compiles
    before = TRANSFERS["to_host"]
    got = q.agg(**aggs)
    assert qc.last_trace().tier == "kernel" and TRANSFERS["to_host"] - before == 1
    want = q.on("numpy").agg(**aggs)
    assert got["hi"] == want["hi"]
    np.testing.assert_allclose(got["m"], want["m"], rtol=1e-6)
