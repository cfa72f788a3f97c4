"""Issue 14 items 1-2 (the cpu backend's fused low-cardinality group_by,
backends/cpu_group_fused.py): the where/select chain, the key and the aggregates in one pass
with per-chunk private tables, checked

- against the two-step path it replaces (the pass's columns, then cpu_group's tables or sort):
  bit for bit, floats included (the fused module folds in the same order);
- against the numpy backend (ops/group/reference.group_reference) and a plain-Python oracle:
  keys, counts, min/max/first exactly, float sums within 4 * rows * eps * sum|x|;
- run to run and across numba thread counts: bit for bit;
- on NaN keys (one group, last), -0.0 == 0.0, more than 4096 groups (the fused attempt
  gives up and the two-step path answers), an input the filter empties, no filter.
Two query shapes only (each compiles the fused module, the two-step path and numpy's)."""
from __future__ import annotations

import math

import numba
import numpy as np
import pytest

import querycompute as qc
from querycompute.run import pipeline

N = 3 * 65536 + 777                    # several chunks, a ragged last one: the parallel kernels


def table(n: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {"day": rng.integers(0, 100, n).astype(np.int32),
            "flag": rng.integers(0, 3, n).astype(np.uint8),
            "status": rng.integers(0, 2, n).astype(np.uint8),
            "qty": rng.integers(1, 50, n).astype(np.float64),
            "price": rng.random(n) * 1000,
            "disc": rng.integers(0, 10, n) / 100}


def q1_like(t: dict, cutoff: int, backend: str) -> dict:
    """TPC-H Q1's shape: a filter, a (uint8, uint8) key, sums, means, min, max, first,
    count (folds go through the same generated code: test_issue14_group_by runs them)."""
    return (qc.query(t).where(lambda r: r.day <= cutoff).on(backend)
            .group_by(lambda r: (r.flag, r.status))
            .agg(sum_qty=qc.sum(lambda r: r.qty),
                 disc_price=qc.sum(lambda r: r.price * (1 - r.disc)),
                 avg_price=qc.mean(lambda r: r.price),
                 lo=qc.min(lambda r: r.price), hi=qc.max(lambda r: r.disc),
                 first=qc.first(lambda r: r.price),
                 n=qc.count))


def float_keyed(k: np.ndarray, v: np.ndarray, backend: str) -> dict:
    """No filter, a float64 key (NaN, -0.0), a sum and a count."""
    return qc.query(k, v).on(backend).group_by(lambda k, v: k).agg(s=qc.sum(lambda k, v: v), n=qc.count)


def two_step(fn, *args) -> dict:
    """`fn` on the cpu backend with the fused path switched off (the plan as planned)."""
    rt = pipeline.stage_runtime("cpu")
    if rt._fused is None:
        fn(*args, "cpu")                                      # makes the runtime's fused part
    saved, rt._fused.limit = rt._fused.limit, 0
    try:
        return fn(*args, "cpu")
    finally:
        rt._fused.limit = saved


def kernels() -> list:
    return [r.name for r in qc.last_trace().kernels]


def assert_bits(a: dict, b: dict) -> None:
    assert list(a) == list(b)
    for name in a:
        assert a[name].dtype == b[name].dtype, name
        assert a[name].tobytes() == b[name].tobytes(), name


def assert_close(got: dict, ref: dict, terms: dict) -> None:
    """Keys, counts, min/max/first exact; sums and means within 4 * rows * eps * sum|x|."""
    assert list(got) == list(ref)
    for name, r in ref.items():
        g = got[name]
        assert len(g) == len(r), name
        if name in terms:
            tol = 4 * got["n"] * np.finfo(np.float64).eps * terms[name]
            assert np.all(np.abs(g - r) <= tol), name
        else:
            np.testing.assert_array_equal(g, r, err_msg=name)


def python_q1(t: dict, cutoff: int) -> dict:
    """The oracle: dict of lists per key, then sorted."""
    groups: dict = {}
    for i in range(len(t["day"])):
        if t["day"][i] <= cutoff:
            groups.setdefault((int(t["flag"][i]), int(t["status"][i])), []).append(i)
    keys = sorted(groups)
    price = t["price"]
    return {"key_0": [k[0] for k in keys], "key_1": [k[1] for k in keys],
            "n": [len(groups[k]) for k in keys],
            "lo": [min(price[i] for i in groups[k]) for k in keys],
            "first": [price[groups[k][0]] for k in keys],
            "sum_qty": [math.fsum(t["qty"][i] for i in groups[k]) for k in keys]}


@pytest.fixture(scope="module")
def t():
    return table(N)


def test_item1_fused_q1_equals_two_step_reference_and_python(t):
    got = q1_like(t, 90, "cpu")
    assert any("_fchunks_" in k for k in kernels()), kernels()
    assert not any("_write_" in k for k in kernels())       # no key / input columns stored
    assert_bits(got, two_step(q1_like, t, 90))
    ref = q1_like(t, 90, "numpy")
    keep = t["day"] <= 90
    terms = {"sum_qty": t["qty"][keep].sum(), "avg_price": t["price"][keep].sum(),
             "disc_price": t["price"][keep].sum()}
    assert_close(got, ref, terms)
    py = python_q1(t, 90)
    for name, col in py.items():
        if name == "sum_qty":      # integral values: every order of adding them is exact
            np.testing.assert_array_equal(got[name], col)
        else:
            np.testing.assert_array_equal(got[name], np.asarray(col, dtype=got[name].dtype))


def test_item1_fused_deterministic_across_runs_and_threads(t):
    first = q1_like(t, 70, "cpu")
    assert_bits(first, q1_like(t, 70, "cpu"))
    threads = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = q1_like(t, 70, "cpu")
    finally:
        numba.set_num_threads(threads)
    assert_bits(first, one)
    small = {k: v[:1000] for k, v in t.items()}            # the serial kernels
    assert_bits(q1_like(small, 70, "cpu"), two_step(q1_like, small, 70))


def test_item1_filter_empties_everything(t):
    got = q1_like(t, -1, "cpu")
    ref = q1_like(t, -1, "numpy")
    assert list(got) == list(ref)
    assert all(len(v) == 0 for v in got.values())
    assert all(got[k].dtype == ref[k].dtype for k in got)


def test_item1_nan_keys_and_more_than_4096_groups_fall_back():
    rng = np.random.default_rng(3)
    v = rng.random(N)
    pool = np.array([np.nan, -np.nan, 0.0, -0.0, 1.5, -2.0, np.inf])
    k = pool[rng.integers(0, len(pool), N)]
    got = float_keyed(k, v, "cpu")
    assert any("_fchunks_" in name for name in kernels())
    assert_bits(got, two_step(float_keyed, k, v))
    ref = float_keyed(k, v, "numpy")
    np.testing.assert_array_equal(got["key"], ref["key"])              # NaN last, one group
    assert np.isnan(got["key"][-1]) and len(got["key"]) == 5
    # the group key is the key of the group's first row (-0.0 or 0.0)
    zero_first = k[np.flatnonzero(k == 0)[0]]
    assert np.signbit(got["key"][got["key"] == 0][0]) == np.signbit(zero_first)
    np.testing.assert_array_equal(got["n"], ref["n"])
    assert_close({"s": got["s"], "n": got["n"]}, {"s": ref["s"], "n": ref["n"]}, {"s": v.sum()})
    # many groups: every chunk has more than 4096 (the fused attempt gives up)
    many = rng.integers(0, 20000, N).astype(np.float64)
    got = float_keyed(many, v, "cpu")
    names = kernels()
    assert any("_fchunks_" in name for name in names) and any("_seg_" in name for name in names), names
    ref = float_keyed(many, v, "numpy")
    assert len(got["key"]) == len(np.unique(many))
    assert_close(got, ref, {"s": v.sum()})
    assert_bits(got, two_step(float_keyed, many, v))


def test_issue29_fused_module_text_names_the_group_kernels_text():
    """A fused group_by module links the group kernels' module by name in numba's cache: its
    text (its cache key) carries the kernels' text's hash, so a changed kernel text makes new
    entries instead of loading ones that name a module no longer there."""
    import hashlib
    from querycompute.backends.cpu import cpu_group
    text = cpu_group.uses_kernels()
    assert hashlib.sha256(cpu_group.kernels_source().encode()).hexdigest()[:16] in text.splitlines()[0]
    assert text.endswith(cpu_group.USES_KERNELS)
