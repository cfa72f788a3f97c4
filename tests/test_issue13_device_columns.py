"""Issue 13 item 1 ("data between stages stays on the device"): on the opencl backend (pocl)
a staged plan hands device columns from stage to stage (backends/device_columns.py): the
runtime's own transfer counter (device_columns.TRANSFERS, counted by OpenCLRuntime's upload,
read and zero-copy wrap of host memory) shows the source handed over once and, read back,
only the result plus one-element survivor counts. Results equal the numpy backend."""
from __future__ import annotations

import numpy as np
import pytest

import querycompute as qc
from querycompute.backends.gpu.device_columns import TRANSFERS

pytestmark = pytest.mark.skipif(not qc.backends()["opencl"]["available"], reason="no OpenCL device")


def chains(q):
    return [
        ("where->order_by->take->select", lambda: q.where(lambda v: v > -5).order_by(lambda v: -v).take(7)
         .select(lambda v: v * 2).to_array()),
        ("select->order_by", lambda: q.select(lambda v: v + 1).order_by().to_array()),
        ("select->distinct->select", lambda: q.select(lambda v: v * 3).distinct().select(lambda v: v + 1)
         .to_array()),
        ("select->scan->where->count", lambda: q.select(lambda v: v * 2).scan(lambda a, v: a + v, 0)
         .where(lambda v: v > 0).count()),
        ("where->order_by->skip", lambda: q.where(lambda v: v > 0).order_by().skip(3).to_array()),
    ]


@pytest.mark.parametrize("n", [1, 3 * 4096 + 17])
def test_item1_staged_plan_columns_stay_on_device(n):
    x = (np.random.default_rng(n).integers(-50, 50, n) / 4).astype(np.float32)
    ref = dict(chains(qc.query(x).on("numpy")))
    for name, run in chains(qc.query(x).on("opencl")):
        run()                                        # compiled and warm
        before = dict(TRANSFERS)
        got = run()
        moved = {k: TRANSFERS[k] - before[k] for k in TRANSFERS}
        runs = qc.last_trace().kernels
        assert len(runs) >= 2 and all(r.dialect == "opencl" for r in runs), [r.name for r in runs]
        assert np.array_equal(np.asarray(got), np.asarray(ref[name]())), name
        assert moved["to_device"] == 1, (name, moved)          # the source column, once
        result_bytes = np.asarray(got).nbytes
        # back: the result, and at most a few 8-byte counts (a compaction's survivors)
        assert moved["to_host_bytes"] <= result_bytes + 4 * 8, (name, moved, result_bytes)
