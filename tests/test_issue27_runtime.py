"""Issue 27 item 6 (first step): one Runtime object owns the memo of compiled queries, the
compile locks and the backends' StageRuntimes; the engine and the executor use it."""
from __future__ import annotations

import threading

import numpy as np

import querycompute as qc
from querycompute.run import engine, pipeline
from querycompute.run.runtime import RUNTIME, Runtime


def test_the_engine_and_the_executor_use_the_one_runtime():
    assert engine._memo is RUNTIME.memo and engine._compiling is RUNTIME.compiling
    assert pipeline.stage_runtime("cpu") is RUNTIME.stage_runtime("cpu")
    x = np.arange(50, dtype=np.int32)
    qc.query(x).on("numpy").order_by(lambda v: -v).take(2).to_array()
    plans = [key for key, _ in RUNTIME.memo.items() if key[0] == "plan" and key[1] == "numpy"]
    assert plans                                       # the compiled plan is the runtime's


def test_stage_runtimes_are_made_once_per_backend_across_threads():
    rt = Runtime()
    got = []
    threads = [threading.Thread(target=lambda: got.append(rt.stage_runtime("numpy"))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(g) for g in got}) == 1
    assert type(rt.stage_runtime("metal")).__name__ == "NumpyStages"   # none of its own: the reference



def test_every_artifact_cache_is_bounded_listed_and_cleared_by_the_runtime():
    """Issue 27 item 6: the compiled-artifact caches below the run layer are ArtifactCaches
    (bounded, least recently used out), which the Runtime lists and clears."""
    from querycompute import artifacts
    x = np.arange(200, dtype=np.int64)
    want = sorted(x.tolist(), reverse=True)[:3]
    assert qc.query(x).on("cpu").order_by(lambda v: -v).take(3).to_array().tolist() == want
    assert qc.query(x).on("cpu").scan(lambda a, b: a + b, 0).to_array()[-1] == x.sum()
    listed = RUNTIME.artifacts()
    assert listed["memo: compiled queries"][0] >= 1
    assert listed["cpu: numba modules"][0] >= 1 and listed["cpu: scan kernels"][0] >= 1
    assert all(n <= limit for n, limit in listed.values())
    RUNTIME.clear()
    assert all(n == 0 for n, _ in RUNTIME.artifacts().values())
    # a query after clear() plans and loads again, with the same answer
    assert qc.query(x).on("cpu").order_by(lambda v: -v).take(3).to_array().tolist() == want
    # a bound holds: the least recently used entry goes first
    c = artifacts.ArtifactCache("test: bounded", limit=2)
    c.put("a", 1), c.put("b", 2)
    assert c.get("a") == 1                      # a used: b is now the oldest
    c.put("c", 3)
    assert (c.get("a"), c.get("b"), c.get("c")) == (1, None, 3)
    assert c in artifacts.caches()
