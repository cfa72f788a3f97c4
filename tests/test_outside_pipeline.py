"""Outside tests of the pipeline operators, group_by and join (DESIGN.md sections 3 and 5b),
written as a user would: each reproduces a bug found by probing the documented promises,
checked against NumPy / plain Python. Small inputs, one query shape per test."""
from __future__ import annotations

import numpy as np
import pytest

import querycompute as qc

BACKENDS = ["numpy", "cpu"]


@pytest.mark.parametrize("backend", ["numpy"])
def test_group_sum_and_mean_of_negative_zeros_is_positive_zero(backend):
    # np.sum starts from +0.0: np.sum([-0.0]) and np.mean([-0.0, -0.0]) are 0.0 (Query.sum
    # agrees); per-group sums and means kept the -0.0 of a segment's first value (numpy and
    # cpu). The fix is in the result dict every backend shares (group_plan.GroupResult), so
    # the numpy backend checks it without a ~20 s numba compile of a group module.
    k = np.array([1, 2, 2, 3, 3], dtype=np.int32)
    v = np.array([-0.0, -0.0, -0.0, -0.0, 1.5], dtype=np.float32)
    got = qc.query(k, v).on(backend).group_by(lambda k, v: k).agg(
        s=qc.sum(lambda k, v: v), m=qc.mean(lambda k, v: v))
    for name, f in (("s", np.sum), ("m", np.mean)):
        exp = np.array([f(v[k == g]) for g in (1, 2, 3)], dtype=np.float32)
        assert got[name].dtype == np.float32
        np.testing.assert_array_equal(got[name], exp)
        np.testing.assert_array_equal(np.signbit(got[name]), np.signbit(exp))


@pytest.mark.parametrize("backend", BACKENDS)
def test_distinct_of_records_compares_every_field(backend):
    # DESIGN: distinct(key=None) keys on the element; zips (tuples) did, tables (records) were
    # refused with "needs a key". LINQ's Distinct compares anonymous types field by field.
    a = np.array([1, 1, 2, 1, 2], dtype=np.int32)
    b = np.array([0.5, 0.5, 0.5, np.nan, 0.5], dtype=np.float32)
    got = qc.query(a=a, b=b).on(backend).distinct().to_array()
    seen, keep = set(), []
    for i, key in enumerate(zip(a.tolist(), ["nan" if v != v else v for v in b.tolist()])):
        if key not in seen:
            seen.add(key)
            keep.append(i)
    assert list(got) == ["a", "b"]
    np.testing.assert_array_equal(got["a"], a[keep])
    np.testing.assert_array_equal(got["b"], b[keep])
