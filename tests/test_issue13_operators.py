"""Issue 13: the pipeline operators and positional terminals against plain Python.

The oracle runs each operator on a Python list of NumPy scalars (so selects wrap and round as
NumPy does): sorted() with a key that puts NaN last (stable, -0.0 == 0.0), first occurrences
with NaN as one value, a sequential fold for scan. Every backend that runs here must agree
(numpy, cpu, opencl); CUDA C and MSL run the same plans through the CPU harness in
test_issue13_harness.py.
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
DTYPES = ["int32", "int64", "float32", "float64", "int8", "uint16", "bool", "float16"]


def _nan(v) -> bool:
    return isinstance(v, (float, np.floating)) and math.isnan(v)


def sort_key(descending: bool):
    def key(v):
        v = v.item() if hasattr(v, "item") else v
        if _nan(v):
            return (1, 0)
        return (0, -v if descending else v)
    return key


def canon(v):
    v = v.item() if hasattr(v, "item") else v
    return "nan" if _nan(v) else v


# -- the oracle: one function per operator, on lists ---------------------------------------
def py_op(xs: list, op: tuple) -> list:
    kind, arg = op
    if kind == "select":
        return [arg(v) for v in xs]
    if kind == "where":
        return [v for v in xs if arg(v)]
    if kind == "order_by":
        key, desc = arg
        return sorted(xs, key=lambda v: sort_key(desc)(key(v) if key else v))
    if kind == "take":
        return xs[:max(arg, 0)]
    if kind == "skip":
        return xs[max(arg, 0):]
    if kind == "take_while":
        out = []
        for v in xs:
            if not arg(v):
                break
            out.append(v)
        return out
    if kind == "skip_while":
        for i, v in enumerate(xs):
            if not arg(v):
                return xs[i:]
        return []
    if kind == "reverse":
        return xs[::-1]
    if kind == "distinct":
        seen, out = set(), []
        for v in xs:
            k = canon(v)
            if k not in seen:
                seen.add(k)
                out.append(v)
        return out
    if kind == "scan":
        func, seed = arg
        acc, out = None, []
        for v in xs:
            acc = func(seed if acc is None else acc, v)
            out.append(acc)
        return out
    raise AssertionError(kind)


def q_op(q, op: tuple):
    kind, arg = op
    if kind == "order_by":
        key, desc = arg
        return q.order_by_descending(key) if desc else q.order_by(key)
    if kind == "reverse":
        return q.reverse()
    if kind == "distinct":
        return q.distinct()
    if kind == "scan":
        return q.scan(*arg)
    return getattr(q, kind)(arg)


def _ops(dtype: str):
    big = np.dtype(dtype).kind == "f"
    c = np.dtype(dtype).type(1) if dtype != "bool" else np.True_
    ops = [st.just(("order_by", (None, False))), st.just(("order_by", (None, True))),
           st.integers(-1, 12).map(lambda k: ("take", k)), st.integers(-1, 12).map(lambda k: ("skip", k)),
           st.just(("reverse", None)), st.just(("distinct", None))]
    if dtype != "bool":
        ops += [st.just(("where", lambda v: v > c)), st.just(("take_while", lambda v: v != c)),
                st.just(("skip_while", lambda v: v < c)),
                st.just(("order_by", (lambda v: -v if big else v % 3, False)))]
    if dtype in ("int32", "int64"):
        ops += [st.just(("select", lambda v: v * 3 + 1)),
                st.just(("scan", (lambda a, v: a + v, 0))),
                st.just(("scan", (lambda a, v: max(a, v), -5)))]
    return ops


def values(dtype: str):
    if dtype == "bool":
        return st.lists(st.booleans(), max_size=60)
    if np.dtype(dtype).kind == "f":
        return st.lists(st.sampled_from([0.0, -0.0, 1.0, -1.0, 2.5, np.nan, np.inf, -np.inf, 3.0]), max_size=60)
    info = np.iinfo(dtype)
    return st.lists(st.integers(max(info.min, -4), min(info.max, 4)), max_size=60)


def same(got: list, want: list) -> bool:
    if len(got) != len(want):
        return False
    for g, w in zip(got, want):
        if _nan(w):
            if not _nan(g):
                return False
        elif g != w or (isinstance(w, (float, np.floating)) and math.copysign(1, w) != math.copysign(1, g)):
            return False
    return True


@pytest.mark.parametrize("backend", [b for b in BACKENDS if b != "opencl"])
@given(data=st.data(), dtype=st.sampled_from(DTYPES))
@settings(max_examples=15, **SETTINGS)
def test_item4_random_chains_match_plain_python(backend, data, dtype):
    """Chains of the new operators mixed with select/where, every terminal, empty inputs,
    NaN and -0.0 keys, all-equal keys (the small value range makes many)."""
    check_random_chain(backend, data, dtype)


@pytest.mark.skipif("opencl" not in BACKENDS, reason="no OpenCL device")
@given(data=st.data(), dtype=st.sampled_from(DTYPES))
@settings(max_examples=5, **SETTINGS)
def test_item4_random_chains_match_plain_python_opencl(data, dtype):
    """The same on OpenCL (fewer examples: every new key type builds a program on pocl)."""
    check_random_chain("opencl", data, dtype)


def check_random_chain(backend, data, dtype):
    raw = data.draw(values(dtype))
    x = np.array(raw, dtype=dtype)
    ops = data.draw(st.lists(st.one_of(_ops(dtype)), min_size=1, max_size=4))
    q = qc.query(x).on(backend)
    xs = list(x)
    for op in ops:
        q, xs = q_op(q, op), py_op(xs, op)
    got = q.to_list()
    assert same([np.asarray(g).item() for g in got], [np.asarray(w).item() for w in xs]), (ops, raw, got, xs)
    assert q.count() == len(xs)
    i = data.draw(st.integers(-1, 8))
    want_at = xs[i] if 0 <= i < len(xs) else "none"
    got_at = q.element_at(i, default="none") if i >= 0 else "none"
    assert same([got_at], [want_at])
    assert same([q.last(default="none")], [xs[-1] if xs else "none"])
    assert same([q.first(default="none")], [xs[0] if xs else "none"])
    if len(xs) == 1:
        assert same([q.single()], xs)
    elif len(xs) > 1:
        with pytest.raises(qc.MultipleElementsError):
            q.single()
    else:
        with pytest.raises(qc.EmptySequenceError):
            q.single()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("n", [0, 1, 255, 257, 3 * 4096 + 17, 70_000])
def test_item4_sizes_across_blocks_and_chunks(backend, n):
    """n not a multiple of any block size, n = 1, and n over several radix/scan tiles and
    cpu chunks; keys with many duplicates, NaN and -0.0."""
    rng = np.random.default_rng(n)
    x = rng.integers(-50, 50, n).astype(np.float32) / 4
    x[rng.random(n) < 0.05] = np.nan
    x[rng.random(n) < 0.05] = -0.0
    q = qc.query(x).on(backend)
    order = np.lexsort((np.arange(n), np.where(np.isnan(x), np.inf, x), np.isnan(x)))
    assert np.array_equal(q.order_by().to_array(), x[order], equal_nan=True)
    desc = np.lexsort((np.arange(n), -np.where(np.isnan(x), 0, x), np.isnan(x)))
    got = q.order_by_descending(lambda v: v).select(lambda v: v).to_array()
    assert np.array_equal(got, x[desc], equal_nan=True)
    assert np.array_equal(q.order_by().take(10).to_array(), x[order][:10], equal_nan=True)
    ints = (np.nan_to_num(x) * 4).astype(np.int64)
    qi = qc.query(ints).on(backend)
    assert np.array_equal(qi.scan(lambda a, v: a + v, 7).to_array(), 7 + np.cumsum(ints))
    _, first = np.unique(np.where(np.isnan(x), np.inf, x + 0.0), return_index=True)
    assert np.array_equal(q.distinct().to_array(), x[np.sort(first)], equal_nan=True)
    assert np.array_equal(qi.skip(n // 2).take(10).to_array(), ints[n // 2:n // 2 + 10])
    assert np.array_equal(qi.reverse().to_array(), ints[::-1])


@pytest.mark.parametrize("backend", BACKENDS)
def test_item1_multi_key_tuple_and_then_by(backend):
    rng = np.random.default_rng(3)
    a = rng.integers(0, 4, 500).astype(np.int8)
    b = rng.random(500).astype(np.float16)
    c = rng.integers(0, 2, 500).astype(bool)
    q = qc.query(a=a, b=b, c=c).on(backend)
    got = q.order_by(lambda r: (r.a, r.c)).then_by_descending(lambda r: r.b).to_array()
    want = np.lexsort((np.arange(500), -b.astype(np.float64), c, a))
    for k, col in (("a", a), ("b", b), ("c", c)):
        assert np.array_equal(got[k], col[want])
    top = q.order_by_descending(lambda r: r.b).take(5).select(lambda r: r.a).to_list()
    assert top == a[np.lexsort((np.arange(500), -b.astype(np.float64)))][:5].tolist()


@pytest.mark.parametrize("backend", BACKENDS)
def test_item1_take_skip_are_parameters_not_recompiled(backend):
    x = np.arange(100, dtype=np.int64)
    for k in (0, 3, 50, 200):
        n = k
        got = qc.query(x).on(backend).where(lambda v: v % 2 == 0).skip(n).take(5).to_array()
        assert np.array_equal(got, (x[x % 2 == 0])[k:k + 5])
        assert all(row.cache != "compiled" for row in qc.last_trace().kernels) or k == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_item1_scan_fold_rules(backend):
    """Inclusive running fold: seed once, element order kept (a non-commutative 'last
    non-zero'), accumulator type from the fold rules, captured values as parameters."""
    x = np.array([0, 3, 0, 0, 5, 0, 2], dtype=np.int32)
    q = qc.query(x).on(backend)
    assert q.scan(lambda a, v: v if v != 0 else a, -1).to_list() == [-1, 3, 3, 3, 5, 5, 2]
    k = 2
    got = q.scan(lambda a, v: a + v + k, 0).to_array()      # associative, as scan requires
    assert np.array_equal(got, np.cumsum(x + 2))
    f = q.select(lambda v: v * 0.5).scan(lambda a, v: a + v, 0.0).where(lambda s: s > 2).count()
    assert f == int(np.sum(np.cumsum(x * 0.5) > 2))
    assert qc.query(np.zeros(0, np.int64)).on(backend).scan(lambda a, v: a + v, 0).to_list() == []


@pytest.mark.parametrize("backend", BACKENDS)
def test_item1_compositions(backend):
    """where -> order_by -> take -> select -> to_array, scan -> where -> count,
    distinct -> order_by -> to_list (the issue's examples)."""
    rng = np.random.default_rng(5)
    p = rng.random(1000).astype(np.float32) * 100
    qty = rng.integers(0, 6, 1000).astype(np.int32)
    q = qc.query(price=p, qty=qty).on(backend)
    got = q.where(lambda r: r.qty > 2).order_by(lambda r: -r.price).take(10) \
        .select(lambda r: r.price * r.qty).to_array()
    keep = np.flatnonzero(qty > 2)
    idx = keep[np.argsort(-p[keep], kind="stable")][:10]
    assert np.array_equal(got, p[idx] * qty[idx])
    assert qc.query(qty).on(backend).scan(lambda a, v: a + v, 0).where(lambda s: s % 2 == 0).count() \
        == int(np.sum(np.cumsum(qty) % 2 == 0))
    assert qc.query(qty).on(backend).distinct().order_by().to_list() == sorted(set(qty.tolist()))


@pytest.mark.parametrize("backend", BACKENDS)
def test_item1_positional_terminals(backend):
    x = np.array([5, 1, 4, 1, 3], dtype=np.int64)
    q = qc.query(x).on(backend)
    assert q.last() == 3 and q.last(lambda v: v < 4) == 3 and q.last(lambda v: v > 4) == 5
    assert q.element_at(2) == 4 and q.element_at(9, default=-1) == -1
    assert q.element_at(-1, default=-7) == -7 and q.order_by().element_at(-2, default=-7) == -7
    with pytest.raises(qc.EmptySequenceError):
        q.where(lambda v: v > 1).element_at(-1)
    assert q.single(lambda v: v == 4) == 4
    with pytest.raises(qc.MultipleElementsError):
        q.single(lambda v: v == 1)
    with pytest.raises(qc.EmptySequenceError):
        q.single(lambda v: v > 9)
    assert q.single(lambda v: v > 9, default=0) == 0
    with pytest.raises(qc.EmptySequenceError):
        q.where(lambda v: v > 9).last()
    assert isinstance(qc.MultipleElementsError("x"), ValueError)
    assert q.order_by().first() == 1 and q.order_by_descending().first() == 5
    assert q.order_by().element_at(3) == 4
    r = qc.range(10, 100, 3).on(backend)
    assert r.element_at(4) == 22 and r.last() == 97 and r.skip(2).take(2).to_list() == [16, 19]


def test_item1_errors_are_clear():
    q = qc.query(np.arange(5))
    with pytest.raises(qc.QueryError, match="must follow order_by"):
        q.then_by(lambda v: v)
    with pytest.raises(TypeError, match="integer"):
        q.take(2.5)
    with pytest.raises(qc.QueryError, match="single-value"):
        qc.query(np.arange(3), np.arange(3)).scan(lambda a, v: a + v, 0).to_list()
    with pytest.raises(qc.QueryError, match="needs a key"):
        qc.query(a=np.arange(3), b=np.arange(3)).order_by().to_list()


@pytest.mark.parametrize("backend", BACKENDS)
def test_item1_staged_queries_from_threads_and_compiled(backend):
    """Staged plans are thread-safe (one compile per signature, shared runtimes) and work as
    compiled queries, whose numpy tier answers with the same semantics."""
    from concurrent.futures import ThreadPoolExecutor
    x = np.random.default_rng(1).random(5000).astype(np.float32)
    want = np.sort(x)[::-1]

    def job(i):
        return qc.query(x).on(backend).order_by(lambda v: -v).take(i % 5 + 1).to_list()
    with ThreadPoolExecutor(6) as ex:
        got = list(ex.map(job, range(30)))
    assert all(g == want[:i % 5 + 1].tolist() for i, g in enumerate(got))
    cq = qc.query(x).on(backend).where(lambda v: v > 0.5).distinct().order_by().compile("to_array", tiered=True)
    first = cq()
    cq.wait()
    again = cq()
    assert np.array_equal(first, again) and np.array_equal(again, np.unique(x[x > 0.5]))
