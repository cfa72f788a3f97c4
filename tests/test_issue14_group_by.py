"""Issue 14: group_by against a plain-Python oracle (a dict of lists, then sorted).

Groups: equal keys with all NaNs one group and -0.0 == 0.0, sorted ascending with NaN last;
the key shown is that of the group's first row. Per group: sums (floats within rounding of
math.fsum: every backend uses a fixed order, not necessarily the oracle's), counts, means,
min/max with NaN propagating, first, any/all and folds in element order.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import querycompute as qc

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
BACKENDS = ["numpy"] + [b for b in ("cpu", "opencl", "cuda") if qc.backends()[b]["available"]]


def _canon(v):
    v = v.item() if hasattr(v, "item") else v
    return ("nan",) if isinstance(v, float) and math.isnan(v) else (v + 0 if not isinstance(v, bool) else v,)


def _order(k):
    v = k[0]
    return (1, 0) if v == "nan" else (0, v)


def oracle(keys: list, vals: list) -> dict:
    """key -> (first key value, [values in source order])."""
    groups: dict = {}
    for k, v in zip(keys, vals):
        c = _canon(k)
        if c not in groups:
            groups[c] = (k, [])
        groups[c][1].append(v)
    return {c: groups[c] for c in sorted(groups, key=_order)}


def close(got, want, n) -> bool:
    if isinstance(want, float) and math.isnan(want):
        return math.isnan(got)
    return got == want or abs(got - want) <= 4 * n * np.finfo(np.float32).eps * max(1.0, abs(want))


def check(backend, keys: np.ndarray, vals: np.ndarray):
    q = qc.query(k=keys, v=vals).on(backend)
    got = q.group_by(lambda r: r.k).agg(total=qc.sum(lambda r: r.v), n=qc.count, avg=qc.mean(lambda r: r.v),
                                        lo=qc.min(lambda r: r.v), hi=qc.max(lambda r: r.v),
                                        first=qc.first(lambda r: r.v), pos=qc.any(lambda r: r.v > 0))
    want = oracle(list(keys), list(vals))
    assert list(got) == ["key", "total", "n", "avg", "lo", "hi", "first", "pos"]
    assert len(got["key"]) == len(want)
    for g, (c, (k0, vs)) in enumerate(want.items()):
        assert _canon(got["key"][g]) == c
        if isinstance(k0, float) and not math.isnan(k0):
            assert math.copysign(1, got["key"][g]) == math.copysign(1, k0)   # the first row's key
        fl = [float(v) for v in vs]
        assert close(float(got["total"][g]), math.fsum(fl), len(vs))
        assert got["n"][g] == len(vs)
        assert close(float(got["avg"][g]), math.fsum(fl) / len(vs), len(vs))
        nan = any(math.isnan(v) for v in fl)
        assert (math.isnan(got["lo"][g]) if nan else got["lo"][g] == min(vs))
        assert (math.isnan(got["hi"][g]) if nan else got["hi"][g] == max(vs))
        assert got["first"][g] == vs[0] or (math.isnan(vs[0]) and math.isnan(got["first"][g]))
        assert bool(got["pos"][g]) == any(v > 0 for v in vs)
    assert got["total"].dtype == np.sum(vals).dtype
    assert got["avg"].dtype == (np.float32 if vals.dtype == np.float32 else np.float64)
    assert all(got[name].dtype == vals.dtype for name in ("lo", "hi", "first"))

KEYS = {"int8": st.integers(-3, 3), "int32": st.integers(-3, 3), "bool": st.booleans(),
        "float32": st.sampled_from([0.0, -0.0, 1.5, -2.0, np.nan, np.inf])}
VALS = {"float32": st.sampled_from([0.5, -1.25, 3.0, 0.0, np.nan, 1e6]), "int32": st.integers(-100, 100)}


@pytest.mark.parametrize("backend", BACKENDS)
@given(data=st.data(), kd=st.sampled_from(sorted(KEYS)), vd=st.sampled_from(sorted(VALS)))
@settings(max_examples=20, **SETTINGS)
def test_item6_group_by_matches_plain_python(backend, data, kd, vd):
    n = data.draw(st.integers(0, 40))
    keys = np.array(data.draw(st.lists(KEYS[kd], min_size=n, max_size=n)), dtype=kd)
    vals = np.array(data.draw(st.lists(VALS[vd], min_size=n, max_size=n)), dtype=vd)
    check(backend, keys, vals)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", ["empty", "one group", "every row its own group", "large"])
def test_item6_group_shapes(backend, case):
    rng = np.random.default_rng(4)
    n = {"empty": 0, "one group": 1000, "every row its own group": 3000, "large": 70_001}[case]
    keys = {"empty": np.zeros(0, np.int32), "one group": np.full(n, 7, np.int32),
            "every row its own group": rng.permutation(n).astype(np.int32),
            "large": rng.integers(0, 50, n).astype(np.int32)}[case]
    vals = rng.random(n).astype(np.float32)
    check(backend, keys, vals)


@pytest.mark.parametrize("backend", BACKENDS)
def test_item1_tuple_and_dict_keys_fused_wheres(backend):
    rng = np.random.default_rng(8)
    flag = rng.integers(0, 3, 5000).astype(np.uint8)
    status = rng.integers(0, 2, 5000).astype(np.int8)
    qty = rng.integers(1, 50, 5000).astype(np.float64)
    q = qc.query(flag=flag, status=status, qty=qty).on(backend)
    got = q.where(lambda r: r.qty > 10).group_by(lambda r: (r.flag, r.status)).agg(s=qc.sum(lambda r: r.qty), n=qc.count)
    keep = qty > 10
    pairs = sorted(set(zip(flag[keep].tolist(), status[keep].tolist())))
    assert list(got) == ["key_0", "key_1", "s", "n"]
    assert list(zip(got["key_0"].tolist(), got["key_1"].tolist())) == pairs
    for i, (f, s) in enumerate(pairs):
        m = keep & (flag == f) & (status == s)
        assert got["n"][i] == m.sum() and got["s"][i] == qty[m].sum()
    d = q.group_by(lambda r: {"flag": r.flag}).max(lambda r: r.qty)
    assert list(d) == ["flag", "max"] and d["max"].tolist() == [qty[flag == f].max() for f in range(3)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_item6_float_sums_identical_run_to_run(backend):
    rng = np.random.default_rng(2)
    keys = rng.integers(0, 7, 100_000).astype(np.int64)
    vals = (rng.random(100_000) * 1e4).astype(np.float32)
    q = qc.query(keys, vals).on(backend).group_by(lambda k, v: k)
    a, b = q.sum(lambda k, v: v), q.sum(lambda k, v: v)
    assert a["sum"].tobytes() == b["sum"].tobytes()
    want = np.array([vals[keys == g].astype(np.float64).sum() for g in range(7)])
    assert np.allclose(a["sum"], want, rtol=1e-5)


def test_item1_group_by_errors():
    q = qc.query(np.arange(5))
    with pytest.raises(qc.QueryError, match="filter before grouping"):
        q.group_by(lambda v: v % 2).where(lambda v: v > 1)
    with pytest.raises(qc.QueryError, match="not offered"):
        q.group_by(lambda v: v % 2).select(lambda v: v)
    with pytest.raises(qc.QueryError, match="also a key column"):
        q.group_by(lambda v: v % 2).agg(key=qc.count)
    with pytest.raises(TypeError, match="needs a function"):
        q.group_by(None)


@pytest.mark.parametrize("backend", BACKENDS)
def test_item1_group_fold_keeps_element_order(backend):
    """qc.aggregate per group: a non-commutative 'last non-zero' with the seed applied once."""
    x = np.random.default_rng(3).integers(-3, 4, 3000).astype(np.int32)
    x[x == 1] = 0
    got = qc.query(x).on(backend).group_by(lambda v: v % 3).agg(
        last=qc.aggregate(lambda a, v: v if v != 0 else a, -9), n=qc.count)
    for g, key in enumerate(got["key"]):
        vs = [v for v in x.tolist() if v % 3 == key]
        nz = [v for v in vs if v != 0]
        assert got["last"][g] == (nz[-1] if nz else -9) and got["n"][g] == len(vs)
