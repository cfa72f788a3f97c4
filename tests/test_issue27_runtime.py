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

