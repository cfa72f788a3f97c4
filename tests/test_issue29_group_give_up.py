"""Issue 29 (Q20, Q21 speed), the cpu group_by and distinct machinery, each against plain Python
and the numpy backend:

- a step that may give up (a group table past GROUP_TABLE_MAX groups, a sortedness or runs
  check) stops its morsels once a chunk gave up (morsels.run's `stop`), and the result is the
  same as when every chunk runs;
- a group_by on integer fields wider together than 64 bits (two int64 ids) packs them by
  their values' ranges into one word (no sort per field), and keeps the columns' sort when
  the ranges do not fit;
- a per-group distinct count over a group key in order compares the other fields only.
"""
from __future__ import annotations

import threading
from collections import defaultdict

import numpy as np
import pytest

import querycompute as qc
from querycompute.backends.cpu import morsels


@pytest.fixture(autouse=True)
def _default_morsels():
    yield
    morsels.configure()


def _names(trace) -> list:
    return [r.name for r in trace.kernels]


def _groups(keys, values):
    """Plain Python: {key tuple: (count, sum, first value)} in ascending key order."""
    out: dict = defaultdict(lambda: [0, 0, None])
    for k, v in zip(keys, values):
        g = out[k]
        g[0] += 1
        g[1] += v
        if g[2] is None:
            g[2] = v
    return dict(sorted(out.items()))


def test_morsels_stop_skips_the_morsels_left():
    """The first morsel runs on the caller's thread before any other: a give-up there skips
    every other morsel; a stop that never holds runs every chunk once."""
    morsels.configure(workers=1, step=1)
    seen, lock = [], threading.Lock()

    def visit(c0, c1, out, fail_at):
        with lock:
            out.extend(range(c0, c1))
            if c0 <= fail_at < c1:
                out.append(-1)
    morsels.run(visit, 40, (seen, -5), stop=lambda: -1 in seen)
    assert sorted(seen) == list(range(40))
    seen.clear()
    morsels.run(visit, 40, (seen, 0), stop=lambda: -1 in seen)
    assert seen == [0, -1]
    seen.clear()
    morsels.run(visit, 40, (seen, 39), stop=lambda: -1 in seen)     # gives up at the end
    assert sorted(seen) == [-1] + list(range(40))


@pytest.mark.parametrize("order", ["sorted", "shuffled", "few"])
def test_many_groups_give_up_the_tables_and_match_python(order):
    """> 4096 groups: the chunk tables (fused and two-step) give up after about one morsel,
    the sorted runs or the radix sort answer; counts, sums (integers: exact) and first values
    equal plain Python's and the numpy backend's, groups in ascending key order."""
    morsels.configure(workers=1, step=1)
    rng = np.random.default_rng(7)
    n = 5 * (1 << 16) + 3
    groups = 40 if order == "few" else n // 3
    k = rng.integers(-2 ** 62, 2 ** 62, groups)[rng.integers(0, groups, n)]
    if order == "sorted":
        k = np.sort(k)
    v = rng.integers(-1000, 1000, n)
    keep = rng.random(n) < 0.9
    ref = _groups([(a,) for a in k[keep]], v[keep].tolist())
    for backend in ("cpu", "numpy"):
        q = qc.query(k=k, v=v, m=keep).on(backend).where(lambda r: r.m).group_by(lambda r: r.k)
        got = q.agg(n=qc.count, s=qc.sum(lambda r: r.v), f=qc.first(lambda r: r.v)).to_dict()
        assert got["key"].tolist() == [g[0] for g in ref]
        assert got["n"].tolist() == [c for c, _, _ in ref.values()]
        assert got["s"].tolist() == [s for _, s, _ in ref.values()]
        assert got["f"].tolist() == [f for _, _, f in ref.values()]
        if backend == "cpu":
            names = _names(qc.last_trace())
            tables = [x for x in names if "group_local_ids" in x or "fchunks" in x]
            assert tables, names
            if order == "few":
                assert not any("breaks" in x for x in names), names
            else:
                assert any("breaks" in x for x in names), names


@pytest.mark.parametrize("case", ["ids", "negative", "extreme", "empty"])
def test_group_by_two_int64_fields_packed_by_their_ranges(case):
    """(partkey, suppkey)-like int64 pairs: one word by the fields' value ranges (one radix
    sort, no per-field sort); ranges over 64 bits together keep the per-field sort; either
    way the groups are Python's, in ascending tuple order."""
    rng = np.random.default_rng(len(case))
    n = 0 if case == "empty" else 3 * (1 << 16) + 11
    a = rng.integers(1, 200_000, n)
    b = rng.integers(1, 10_000, n)
    if case == "negative":
        a, b = a - 100_000, -b
    if case == "extreme":                      # 64 bits of range in a: no room for b
        a[:2] = [np.iinfo(np.int64).min, np.iinfo(np.int64).max]
    v = rng.integers(0, 50, n)
    ref = _groups(list(zip(a.tolist(), b.tolist())), v.tolist())
    for backend in ("cpu", "numpy"):
        got = (qc.query(a=a, b=b, v=v).on(backend).group_by(lambda r: (r.a, r.b))
               .agg(n=qc.count, s=qc.sum(lambda r: r.v)).to_dict())
        assert list(zip(got["key_0"].tolist(), got["key_1"].tolist())) == list(ref)
        assert got["n"].tolist() == [c for c, _, _ in ref.values()]
        assert got["s"].tolist() == [s for _, s, _ in ref.values()]
        if backend == "cpu" and n:
            names = _names(qc.last_trace())
            per_field = any("key0_radix" in x for x in names)
            assert per_field == (case == "extreme"), names


@pytest.mark.parametrize("f", ["int", "pair", "float"])
def test_count_distinct_per_sorted_group_compares_the_other_fields(f):
    """count_distinct per group over a group key in order (lines by order key): the runs
    compare only f's fields (one int column as it is, a pair or a float packed as order bits:
    NaNs one value, -0.0 == 0.0); equal to plain Python's distinct sets and to numpy's."""
    rng = np.random.default_rng(3)
    n = 2 * (1 << 16) + 9
    k = np.sort(rng.integers(0, n // 4, n))
    x = rng.integers(-3, 3, n)
    y = np.array([0.0, -0.0, np.nan, 1.5, -np.inf])[rng.integers(0, 5, n)]
    fn = {"int": lambda r: r.x, "pair": lambda r: (r.x, r.k % 3), "float": lambda r: r.y}[f]
    canon = {"int": lambda i: x[i], "pair": lambda i: (x[i], k[i] % 3),
             "float": lambda i: "nan" if np.isnan(y[i]) else y[i] + 0.0}[f]
    sets: dict = defaultdict(set)
    for i in range(n):
        sets[k[i]].add(canon(i))
    ref = [len(sets[g]) for g in sorted(sets)]
    for backend in ("cpu", "numpy"):
        got = qc.query(k=k, x=x, y=y).on(backend).group_by(lambda r: r.k).agg(n=qc.count_distinct(fn))
        assert got["key"].tolist() == sorted(sets)
        assert got["n"].tolist() == ref
