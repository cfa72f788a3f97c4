"""Issue 31 item 2: int(v) / round(v) of a float column are int64 in every later operation
(not weak Python ints that adopt an 8/16-bit operand's type and compare modulo 2**32), and
item 11: element_at of an index beyond int64 returns the default instead of raising."""
import numpy as np
import pytest

import querycompute as qc

BACKENDS = ["numpy", "cpu"] + (["opencl"] if qc.backends()["opencl"]["available"] else [])

V = np.array([2.0 ** 32 + 1, 3e9, 1.7e12])
W = np.array([1, 1, 1], np.int8)


@pytest.mark.parametrize("backend", BACKENDS)
def test_int_and_round_compare_as_int64(backend):
    q = qc.query(V, W).on(backend)
    assert q.count(lambda v, w: int(v) == w) == 0
    assert q.count(lambda v, w: round(v) > w) == 3
    assert q.count(lambda v, w: int(v) > w) == 3


@pytest.mark.parametrize("backend", BACKENDS)
def test_int_plus_int8_is_int64(backend):
    got = qc.query(V, W).on(backend).select(lambda v, w: int(v) + w).to_array()
    assert got.dtype == np.int64
    assert got.tolist() == [int(v) + 1 for v in V]
    got = qc.query(V, W).on(backend).select(lambda v, w: round(v) - w).to_array()
    assert got.dtype == np.int64
    assert got.tolist() == [round(v) - 1 for v in V]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("i", [2 ** 64, 2 ** 63, -2 ** 63 - 1, -2 ** 64])
def test_element_at_beyond_int64_gives_default(backend, i):
    x = np.arange(5.0)
    assert qc.query(x).on(backend).element_at(i, default=-1.0) == -1.0
    assert qc.query(x).on(backend).take(i).count() == (5 if i > 0 else 0)
    assert qc.query(x).on(backend).skip(i).count() == (0 if i > 0 else 5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_ternary_promotes_both_branches_like_np_where(backend):
    """Item 3: the documented rule (guide): both branches to their common type, as
    np.where does, on every backend (numpy included)."""
    v = np.array([20000, 0], np.int16)
    got = qc.query(v).on(backend).select(lambda v: (v if v else 0.5) * 2).to_array()
    want = np.where(v != 0, v, 0.5) * 2
    assert got.dtype == want.dtype == np.float64
    assert got.tolist() == want.tolist() == [40000.0, 1.0]
