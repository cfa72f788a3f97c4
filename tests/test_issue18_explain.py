"""Issue 18 item 7: explain() reports the bytes each kernel really reads and writes, from the
kernels' IR: a table's unused column is not counted, and every pass a compaction makes over
its input is."""
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
    # disc (8 B an element) is not read; on one-launch dialects (opencl) the kernel also reads
    # the per-block partials its last block folds, and the ticket counter: a few bytes a block
    assert 0 <= stage1[0] - N * used < N
    # the numpy backend's result agrees with plain NumPy: the query is the one explained
    keep = (t["cat"] == 3) & (t["qty"] > 2)
    got = q.on("numpy").sum(lambda r: r.price * r.qty)
    np.testing.assert_allclose(got, np.sum(t["price"][keep].astype(np.float64) * t["qty"][keep]), rtol=1e-12)


def test_item7_compaction_counts_every_pass_over_its_input():
    """However a dialect compacts (count + scan + scatter reads the input twice, a single-pass
    look-back once), the per-element figure is the sum of the kernels that stream the input,
    and the output is written at most once."""
    x = np.arange(N, dtype=np.float32)
    q = qc.query(x).where(lambda v: v % 3 < 1).select(lambda v: v * 2 + 1)
    for backend in ("cuda", "opencl"):
        text = q.explain(backend, terminal="to_array")
        rows = _kernel_bytes(text)
        streaming = [name for name, (read, _) in rows.items() if read >= x.nbytes]
        assert streaming, text
        assert f"fused reads {len(streaming) * x.itemsize} B" in text
        assert max(written for _, written in rows.values()) <= x.nbytes + 64 * 1024, text
    np.testing.assert_array_equal(q.on("numpy").to_array(), x[x % 3 < 1] * 2 + 1)
