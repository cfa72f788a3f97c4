"""Issue 14 item 3: join and left_join against plain Python (nested loops in LINQ's order:
this side's order, then the other side's order among the matches)."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import querycompute as qc

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
BACKENDS = ["numpy"] + [b for b in ("cpu", "opencl", "cuda") if qc.backends()[b]["available"]]


def same_key(a, b) -> bool:
    a, b = float(a), float(b)
    return (math.isnan(a) and math.isnan(b)) or a == b


def py_join(left, right, outer: bool) -> list:
    out = []
    for lk, lv in left:
        hits = [(lv, rv) for rk, rv in right if same_key(lk, rk)]
        out += hits or ([(lv, None)] if outer else [])
    return out


@pytest.mark.parametrize("backend", BACKENDS)
@given(data=st.data(), kd=st.sampled_from(["int32", "int64", "float32"]), outer=st.booleans())
@settings(max_examples=15, **SETTINGS)
def test_item3_join_matches_plain_python(backend, data, kd, outer):
    """Duplicate keys on both sides, no matches, empty sides, NaN and -0.0 keys (equal like
    distinct's), keys of two different dtypes (compared in their common type)."""
    keys = st.sampled_from([0, 1, 2, 5]) if kd != "float32" else st.sampled_from([0.0, -0.0, 1.5, np.nan, 2.0])
    lk = np.array(data.draw(st.lists(keys, max_size=12)), dtype=kd)
    rk = np.array(data.draw(st.lists(keys, max_size=12)), dtype="float64" if kd == "float32" else "int16")
    lv = np.arange(len(lk), dtype=np.int32) * 10
    rv = np.arange(len(rk), dtype=np.float32) + 0.5
    left = qc.query(k=lk, v=lv).on(backend)
    right = qc.query(k=rk, v=rv)
    join = left.left_join if outer else left.join
    q = join(right, lambda a: a.k, lambda b: b.k, lambda a, b: (a.v, b.v))
    got = q.to_list()
    want = py_join(list(zip(lk.tolist(), lv.tolist())), list(zip(rk.tolist(), rv.tolist())), outer)
    assert len(got) == len(want)
    for (ga, gb), (wa, wb) in zip(got, want):
        assert ga == wa
        assert (math.isnan(gb) if wb is None else gb == wb)
    assert q.count() == len(want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_item3_join_then_where_group_by_and_tuple_keys(backend):
    rng = np.random.default_rng(12)
    orders = {"okey": rng.permutation(500).astype(np.int64), "prio": rng.integers(0, 5, 500).astype(np.int8)}
    items = {"okey": rng.integers(0, 600, 3000).astype(np.int64), "qty": rng.integers(1, 50, 3000).astype(np.float64)}
    q = qc.query(items).on(backend).where(lambda i: i.qty > 5) \
        .join(qc.query(orders), lambda i: i.okey, lambda o: o.okey, lambda i, o: {"qty": i.qty, "prio": o.prio}) \
        .where(lambda x: x.prio < 3)
    got = q.group_by(lambda x: x.prio).agg(n=qc.count, s=qc.sum(lambda x: x.qty))
    prio_of = dict(zip(orders["okey"].tolist(), orders["prio"].tolist()))
    rows = [(prio_of[k], v) for k, v in zip(items["okey"].tolist(), items["qty"].tolist())
            if v > 5 and k in prio_of and prio_of[k] < 3]
    keys = sorted({p for p, _ in rows})
    assert got["key"].tolist() == keys
    assert got["n"].tolist() == [sum(1 for p, _ in rows if p == k) for k in keys]
    assert got["s"].tolist() == [sum(v for p, v in rows if p == k) for k in keys]
    a = qc.query(x=np.array([1, 1, 2]), y=np.array([0, 1, 0])).on(backend)
    b = qc.query(x=np.array([1, 2, 1]), y=np.array([1, 0, 1]), z=np.array([7, 8, 9]))
    pairs = a.join(b, lambda r: (r.x, r.y), lambda r: (r.x, r.y), lambda r, s: s.z).to_list()
    assert pairs == [7, 9, 8]


def test_item3_join_errors():
    q = qc.query(np.arange(3))
    with pytest.raises(TypeError, match="another Query"):
        q.join(np.arange(3), lambda a: a, lambda b: b, lambda a, b: a)
    with pytest.raises(qc.QueryError, match="arity"):
        q.join(qc.query(np.arange(3)), lambda a: (a, a), lambda b: b, lambda a, b: a).to_list()
