"""Issue 14 items 1, 2 and 5: two things Q1 leans on.

- An aggregate asked for twice (Q1 sums l_quantity for sum_qty and again for avg_qty) is
  one accumulator in the plan (group_plan's `same`): explain lists it once, and every named
  result built from it equals the NumPy value computed on its own.
- The cpu backend's fused group_by indexes its per-chunk table directly by the key word when
  the keys add up to at most 2 bytes (two uint8 flags, an int16, a float16: no hash, no
  probe): results equal the numpy backend's over full 16-bit key ranges, negative and NaN
  keys included; more groups than the table limit still fall back (same results).
"""
from __future__ import annotations

import numpy as np
import pytest

import querycompute as qc

N = 2 * 65536 + 321                    # several chunks of the parallel kernels, a ragged last


def _rows(n: int, seed: int = 1) -> dict:
    rng = np.random.default_rng(seed)
    return {"a": rng.integers(0, 4, n).astype(np.uint8), "b": rng.integers(0, 2, n).astype(np.uint8),
            "q": rng.integers(1, 50, n).astype(np.float64), "p": rng.random(n) * 1000,
            "d": rng.integers(0, 10, n).astype(np.int32)}


def _grouped(t, backend):
    return qc.query(t).where(lambda r: r.d < 8).on(backend).group_by(lambda r: (r.a, r.b))


AGGS = dict(sum_q=qc.sum(lambda r: r.q), avg_q=qc.mean(lambda r: r.q), sum_q2=qc.sum(lambda r: r.q),
            sum_p=qc.sum(lambda r: r.p), avg_p=qc.mean(lambda r: r.p), n=qc.count, n2=qc.count)


def test_item1_repeated_aggregates_computed_once_and_right():
    t = _rows(N)
    got = _grouped(t, "cpu").agg(**AGGS)
    ref = _grouped(t, "numpy").agg(**AGGS)
    for name in AGGS:
        np.testing.assert_allclose(got[name], ref[name], rtol=1e-12)
    np.testing.assert_array_equal(got["sum_q"], got["sum_q2"])
    np.testing.assert_array_equal(got["n"], got["n2"])
    keep = t["d"] < 8
    for i, (a, b) in enumerate(zip(got["key_0"], got["key_1"])):
        m = keep & (t["a"] == a) & (t["b"] == b)
        assert got["n"][i] == m.sum()
        assert got["sum_q"][i] == pytest.approx(t["q"][m].sum(), rel=1e-12)
        assert got["avg_q"][i] == pytest.approx(t["q"][m].mean(), rel=1e-12)
        assert got["avg_p"][i] == pytest.approx(t["p"][m].mean(), rel=1e-12)
    text = _grouped(t, "cpu").explain("cpu", **AGGS)
    assert "per group sum, sum, count in source order" in text, text


@pytest.mark.parametrize("dtype", ["int16", "uint16", "float16", "int8"])
def test_item2_direct_table_small_keys(dtype):
    rng = np.random.default_rng(2)
    if dtype == "float16":
        k = rng.normal(0, 3, N).astype(np.float16)
        k[::97] = np.nan
        k[::89] = -0.0
    else:
        info = np.iinfo(dtype)
        k = rng.integers(info.min, info.max, N, endpoint=True).astype(dtype) // 64 * 64
        k[::101] = info.min
    v = rng.random(N)
    q = lambda b: qc.query(k, v).on(b).group_by(lambda k, v: k).agg(s=qc.sum(lambda k, v: v), n=qc.count)
    got, ref = q("cpu"), q("numpy")
    np.testing.assert_array_equal(got["key"], ref["key"])
    np.testing.assert_array_equal(got["n"], ref["n"])
    np.testing.assert_allclose(got["s"], ref["s"], rtol=1e-12)


def test_item2_two_byte_keys_beyond_the_table_limit():
    """About 16K distinct int16 keys: more than a chunk's table holds; the result is still
    every group's (the two-step path's), in key order."""
    rng = np.random.default_rng(3)
    k = rng.integers(-8192, 8192, N).astype(np.int16)
    v = np.ones(N)
    got = qc.query(k, v).on("cpu").group_by(lambda k, v: k).agg(s=qc.sum(lambda k, v: v))
    keys, counts = np.unique(k, return_counts=True)
    np.testing.assert_array_equal(got["key"], keys)
    np.testing.assert_array_equal(got["s"], counts.astype(np.float64))
