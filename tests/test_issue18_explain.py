"""Issue 18 item 7: explain() reports the bytes each kernel really reads and writes, from the
kernels' IR: a table's unused column is not counted, and a compaction's two passes over its
input (count, then scatter) both are."""
from __future__ import annotations

import re

import numpy as np

import querycompute as qc

N = 5000


def _orders():
    rng = np.random.default_rng(18)
    return {"price": rng.random(N, dtype=np.float32), "qty": rng.integers(0, 10, N, dtype=np.int32),
            "cat": rng.integers(0, 8, N, dtype=np.int32), "disc": rng.random(N)}   # disc: never read


def _kernel_bytes(text: str) -> dict[str, tuple[int, int]]:
    return {m[1]: (int(m[2]), int(m[3])) for m in re.finditer(r"  (\w+): reads (\d+) B, writes (\d+) B", text)}


def test_item7_explain_counts_only_the_columns_kernels_read():
    t = _orders()
    q = qc.query(t).where(lambda r: r.cat == 3 and r.qty > 2)
    text = q.explain("opencl", terminal=qc.sum(lambda r: r.price * r.qty))
    used = sum(t[c].itemsize for c in ("price", "qty", "cat"))
    assert f"fused reads {used} B" in text
    stage1 = _kernel_bytes(text)["qc_sum_reduce_partials"]
    assert stage1[0] == N * used                       # disc (8 B an element) is not read
    # the numpy backend's result agrees with plain NumPy: the query is the one explained
    keep = (t["cat"] == 3) & (t["qty"] > 2)
    got = q.on("numpy").sum(lambda r: r.price * r.qty)
    np.testing.assert_allclose(got, np.sum(t["price"][keep].astype(np.float64) * t["qty"][keep]), rtol=1e-12)


def test_item7_compaction_reads_its_input_twice():
    x = np.arange(N, dtype=np.float32)
    text = qc.query(x).where(lambda v: v % 3 < 1).select(lambda v: v * 2 + 1).explain("cuda", terminal="to_array")
    assert f"fused reads {2 * x.itemsize} B" in text
    rows = _kernel_bytes(text)
    count = next(v for k, v in rows.items() if k.endswith("_compact_count"))
    scatter = next(v for k, v in rows.items() if k.endswith("_compact_scatter"))
    assert count[0] == x.nbytes and scatter[0] >= x.nbytes
    assert scatter[1] == x.nbytes                    # at most every element survives
