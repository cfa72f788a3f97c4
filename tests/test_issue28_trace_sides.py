"""A join's or semi-join's other side is a sub-plan run by the executor (engine.run_side): its
kernels show in the caller's qc.last_trace(), named `side <kernel>` (issue 28 item 5: the trace
shows what compiled and ran; a side's group_by compile used to be invisible)."""
import numpy as np
import pytest

import querycompute as qc

BACKENDS = ["numpy", "cpu"]


def _side_rows(trace):
    return [k for k in trace.kernels if k.name.startswith("side ")]


@pytest.mark.parametrize("backend", BACKENDS)
def test_join_side_kernels_in_trace(backend):
    keys = np.arange(50, dtype=np.int64)
    cust = qc.query(k=keys, w=keys * 1.5).where(lambda c: c.k % 3 != 0)
    orders = qc.query(ck=np.arange(400, dtype=np.int64) % 60, amt=np.ones(400))
    q = orders.on(backend).join(cust, lambda o: o.ck, lambda c: c.k, lambda o, c: o.amt * c.w)
    want = sum(1.0 * (k * 1.5) for k in np.arange(400) % 60 if k < 50 and k % 3 != 0)
    for _ in range(2):                       # the first call and a warm one
        assert q.sum() == pytest.approx(want)
        rows = _side_rows(qc.last_trace())
        assert rows, qc.last_trace()
        assert all(k.run_ms >= 0 for k in rows)
        outer = [k for k in qc.last_trace().kernels if not k.name.startswith("side ")]
        assert outer                         # the caller's own kernels stay


@pytest.mark.parametrize("backend", BACKENDS)
def test_grouped_side_and_semi_join_side_in_trace(backend):
    k = np.arange(300, dtype=np.int64) % 40
    v = np.arange(300, dtype=np.float64)
    per = qc.query(k=k, v=v).group_by(lambda r: r.k).agg(t=qc.sum(lambda r: r.v)).where(lambda g: g.t >= 0)
    q = qc.query(np.arange(40, dtype=np.int64)).on(backend).join(
        per, lambda a: a, lambda g: g.key, lambda a, g: g.t)
    want = [float(v[k == i].sum()) for i in range(40)]
    assert q.to_array().tolist() == want
    names = [r.name for r in _side_rows(qc.last_trace())]
    assert names, qc.last_trace()
    s = qc.query(np.arange(100, dtype=np.int64)).on(backend).intersect_by(
        qc.query(np.arange(0, 100, 7, dtype=np.int64)).where(lambda x: x > 20), lambda x: x, lambda y: y)
    assert s.to_array().tolist() == [x for x in range(100) if x % 7 == 0 and x > 20]
    assert _side_rows(qc.last_trace()), qc.last_trace()
