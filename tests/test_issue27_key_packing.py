"""Issue 27 item 3, key packing (DESIGN.md section 5e): a join key of integer fields wider
than 64 bits together (an int64 order key and a line number) packs into one 64-bit word by
its values' ranges (a min/max pass over both sides) and runs the cpu hash join, not the numpy
reference; when the ranges do not fit, the reference runs and the trace and explain() say so.
Pairs are the reference's exactly (LINQ's order), inner and left joins."""
from __future__ import annotations

import numpy as np
import pytest

import querycompute as qc
from querycompute.backends.cpu.cpu_join import range_packed


def _pairs(backend, left, right, outer):
    f = "left_join" if outer else "join"
    q = getattr(qc.query(left).on(backend), f)(qc.query(right), lambda l: (l.a, l.b), lambda r: (r.a, r.b),
                                               lambda l, r: l.v)
    return q.compile("to_array", tiered=False)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("outer", [False, True])
def test_wide_integer_keys_pack_by_range_and_match_the_reference(seed, outer):
    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(0, 400)), int(rng.integers(0, 400))
    scale = int(rng.choice([1, 2**31, 2**45]))
    dtype = (np.int64, np.uint64)[seed % 2]
    base = np.int64(2**62) if seed % 3 == 0 else np.int64(-(2**40))
    la = (base + rng.integers(0, 6, n) * scale).astype(np.int64)
    ra = (base + rng.integers(0, 6, m) * scale).astype(np.int64)
    if dtype is np.uint64:
        la, ra = la.astype(np.uint64) + np.uint64(2**63), ra.astype(np.uint64) + np.uint64(2**63)
    left = {"a": la, "b": rng.integers(-3, 3, n).astype(np.int32), "v": np.arange(n, dtype=np.float64)}
    right = {"a": ra, "b": rng.integers(-3, 3, m).astype(np.int32), "w": np.arange(m, dtype=np.float64)}
    cpu = _pairs("cpu", left, right, outer)
    got = cpu()
    want = _pairs("numpy", left, right, outer)()
    np.testing.assert_array_equal(got, want)
    if n and m:
        runs = {(k.name, k.dialect) for k in cpu.trace.kernels}
        assert ("join_sorted_probe", "numpy") not in runs, runs      # the hash join ran
        assert any(name.startswith(("join_probe", "join_dense")) for name, _ in runs), runs


def test_ranges_too_wide_run_the_reference_and_say_so():
    i = np.arange(50, dtype=np.int64)
    left = {"a": (i % 4) << 40, "b": (i % 3) << 30, "v": i.astype(np.float64)}
    right = {"a": (i % 5) << 40, "b": (i % 2) << 30, "w": i.astype(np.float64)}
    cq = _pairs("cpu", left, right, False)
    np.testing.assert_array_equal(cq(), _pairs("numpy", left, right, False)())
    assert ("join_sorted_probe", "numpy") in {(k.name, k.dialect) for k in cq.trace.kernels}
    text = cq.explain()
    assert "packed by their value ranges, or the numpy reference" in text, text


def test_range_packed_is_injective_and_refuses_what_does_not_fit():
    a = [np.array([-5, 7, 7, -5], np.int64), np.array([0, 1, 0, 1], np.int64)]
    b = [np.array([7, -5], np.int64), np.array([0, 1], np.int64)]
    lw, rw = range_packed(a, b)
    assert len(set(lw.tolist())) == 4 and rw.tolist() == [lw[2], lw[3]]
    wide = [np.array([0, 2**40], np.int64), np.array([0, 2**30], np.int64)]
    assert range_packed(wide, wide) is None                     # 41 + 31 bits


def _same_matches(small, big, sw, bw):
    keys = list(zip(*[c.tolist() for c in small]))
    word = dict(zip(keys, sw.tolist()))
    assert len(set(word.values())) == len(word)                         # injective
    for key, w in zip(zip(*[c.tolist() for c in big]), bw.tolist()):
        assert (w == word[key]) if key in word else (w not in word.values()), (key, w)


def test_range_packed_by_the_smaller_side():
    """The smaller side's ranges alone: the larger side's values outside them (below, above,
    the extremes of the type) make a word no key of the smaller side has (all ones, or an
    offset past the range's last value within its bits); equal keys make equal words."""
    top, bot = np.iinfo(np.int64).max, np.iinfo(np.int64).min
    small = [np.array([10, 12, 11], np.int64), np.array([-1, 0, 1], np.int64)]
    big = [np.array([10, 9, 13, top, bot, 12, 11, 10], np.int64), np.array([-1, -1, 0, 0, 0, 0, 2, bot], np.int64)]
    sw, bw = range_packed(small, big)
    ones = 2**64 - 1
    assert ones not in sw.tolist()
    assert [bw[i] for i in (1, 3, 4, 7)] == [ones] * 4
    _same_matches(small, big, sw, bw)
    u = [np.array([2**64 - 2, 2**64 - 1], np.uint64), np.array([3, 4], np.uint64)]
    ub = [np.array([2**64 - 1, 0, 2**64 - 2, 5, 2**64 - 1], np.uint64), np.array([4, 4, 3, 3, 5], np.uint64)]
    ubw, uw = range_packed(ub, u)
    _same_matches(u, ub, uw, ubw)
    assert ubw[1] == ones and ubw[3] == ones


@pytest.mark.parametrize("outer", [False, True])
def test_packed_keys_equal_the_reference_at_scale(outer):
    """Q5's shape: (suppkey, nationkey) of many lines against a small supplier side, keys
    outside its ranges included."""
    rng = np.random.default_rng(7)
    n, m = 50_000, 1_000
    left = {"a": rng.integers(-5, 1_100, n).astype(np.int64), "b": rng.integers(-1, 26, n).astype(np.int64),
            "v": np.arange(n, dtype=np.float64)}
    right = {"a": rng.permutation(1_000).astype(np.int64), "b": rng.integers(0, 25, m).astype(np.int64),
             "w": np.arange(m, dtype=np.float64)}
    left["a"][::3], left["b"][::3] = right["a"][rng.integers(0, m, len(left["a"][::3]))], 0
    cpu = _pairs("cpu", left, right, outer)
    np.testing.assert_array_equal(cpu(), _pairs("numpy", left, right, outer)())
    names = [k.name for k in cpu.trace.kernels]
    assert any(name.startswith(("join_probe", "join_dense")) for name in names), names
