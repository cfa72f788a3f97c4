"""Issue 26 item 5: webgpu bit-exact on the classes a vector table found off (lavapipe).

  * a ternary whose branches are comparisons printed `select(false, x < 3.0f, x > 1.0f)`,
    which naga reads as a template list: compilation failed (wgsl.select);
  * lavapipe re-associated literal constants of user arithmetic (`b + 3 + 3` as `b + 6`,
    `3 - (b + 3)` as `-b`): literals now go through `qc_k` (wgsl_helpers);
  * `0.0 // y` for y < 0 gave +0.0 (the helper took the sign from a folded `0.0 / y`);
  * `agg` with 9 or more `count(pred)` was refused: the finalize kernel bound every
    partial and result (52 storage buffers for 12 counts and 2 sums, 32 allowed).
The oracle is NumPy (DESIGN.md section 4): same bits, signs of zero included.
"""
from __future__ import annotations

import numpy as np
import pytest

import querycompute as qc
from expr_backends import WEBGPU, same_bits

pytestmark = pytest.mark.skipif(not WEBGPU, reason="no webgpu adapter")


def _bits_equal(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype
    bad = ~same_bits(got, want)
    assert not bad.any(), f"at {np.flatnonzero(bad)[:6]}: got {got[bad][:6]}, NumPy {want[bad][:6]}"


@pytest.mark.parametrize("dtype", ["float32", "int32", "int8"])
def test_ternary_of_comparisons_compiles(dtype):
    a = np.array([0, 1, 2, 3, 5, -4], dtype)
    got = qc.query(a).on("webgpu").select(
        "lambda a: ((a < 3) if a > 1 else False, (a < 3) if a > 1 else (a >= 0))").to_array()
    _bits_equal(got[0], (a > 1) & (a < 3))
    _bits_equal(got[1], np.where(a > 1, a < 3, a >= 0))


# b + 3 + 3 != b + 6 at 1e8 (float32 spacing 8 there), 3 - (b + 3) is +0 (not -b) for small b
B = np.array([0.0, -0.0, 1e-8, -1e-8, 1e8, 1.0, 0.9942662, 2.0 ** -22 * 3, -3.0, np.inf, np.nan], np.float32)
CHAINS = ["b + 3 + 3", "3 - (b + 3)", "(b - 3) + 3", "b * 3.3 * 3.3", "b / 3 * 3", "(b + 0.1) - 0.1",
          "2 * (b * 0.5)", "b - 1e8 - 1e8"]


def test_literal_constants_are_not_reassociated():
    """Each chain as NumPy computes it, one rounding per operation in source order."""
    got = qc.query(B).on("webgpu").select(f"lambda b: ({', '.join(CHAINS)},)").to_array()
    with np.errstate(all="ignore"):
        for e, g in zip(CHAINS, got):
            want = eval(e.replace("b", "B"), {"B": B})       # B float32; Python scalars are weak
            _bits_equal(g, want)


def test_column_chains_are_not_rewritten():
    """lavapipe rewrote (a - b) + b to a, (a + b) - b to a and a + b - a to b (inf - inf is NaN)."""
    a = np.array([-0.0, 1e-8, 1.0, 1e8, 0.3, np.inf, 2.5], np.float32)
    b = np.array([3.0, 3.0, 1e8, 3.0, 0.7, 1.0, -np.inf], np.float32)
    ex = ["(a - b) + b", "(a + b) - b", "a + b - a", "a * b - a * b", "(a * b) / b"]
    got = qc.query(a, b).on("webgpu").select(f"lambda a, b: ({', '.join(ex)},)").to_array()
    with np.errstate(all="ignore"):
        for e, g in zip(ex, got):
            _bits_equal(g, eval(e, {"a": a, "b": b}))


def test_literal_constants_in_a_reduction_and_filter():
    """The same spelling in a where predicate and a sum's values."""
    q = qc.query(B[np.isfinite(B)]).on("webgpu")
    finite = B[np.isfinite(B)]
    negative = np.copysign(np.float32(1), np.float32(3) - (finite + np.float32(3))) < 0
    assert q.where("lambda b: np.copysign(1.0, 3 - (b + 3)) < 0").count() == negative.sum()
    s = q.sum("lambda b: b + 3 + 3")
    with np.errstate(all="ignore"):
        want = np.sum(B[np.isfinite(B)] + np.float32(3) + np.float32(3))
    _bits_equal(np.float32(s), want)


def test_floor_division_of_zero_keeps_numpys_sign():
    y = np.array([-1.0, -2.5, -np.inf, -1e-45, 1.0, np.inf, 1e-45, 3.0], np.float32)
    got = qc.query(y).on("webgpu").select("lambda y: (0.0 // y, -0.0 // y, np.float32(0) // y)").to_array()
    with np.errstate(all="ignore"):
        _bits_equal(got[0], np.float32(0.0) // y)
        _bits_equal(got[1], np.float32(-0.0) // y)
        _bits_equal(got[2], np.float32(0.0) // y)
    assert np.signbit(got[0][:4]).all() and not np.signbit(got[0][4:]).any()


def _many_counts():
    named = {f"c{k}": qc.count(f"lambda v: v > {k * 70}") for k in range(12)}
    named.update(s=qc.sum(), s2=qc.sum("lambda v: v * 2"), lo=qc.min(), m=qc.mean(), n=qc.count())
    return named


def test_agg_with_twelve_counts_and_sums():
    """12 count(pred) + sums / min / mean / count: stage 2 is split into kernels of at most
    Wgsl.FINALIZE_BUFFERS storage buffers (before: one kernel binding 57, refused)."""
    x = (np.arange(20000) % 1000).astype(np.float32)
    named = _many_counts()
    got = qc.query(x).on("webgpu").agg(**named)
    assert "webgpu" in str(qc.last_trace())
    want = qc.query(x).on("numpy").agg(**named)
    assert got.keys() == want.keys()
    for k in want:
        assert type(got[k]) is type(want[k]) and same_bits(np.asarray(got[k]), np.asarray(want[k])), k
    src = qc.query(x).source(backend="webgpu", terminal=qc.agg(**named))
    assert "fn qc_agg_reduce_finalize1(" in src


def test_agg_with_many_counts_over_empty_input():
    x = np.zeros(0, np.float32)
    named = {f"c{k}": qc.count(f"lambda v: v > {k}") for k in range(10)}
    assert qc.query(x).on("webgpu").agg(**named) == {f"c{k}": 0 for k in range(10)}


def test_agg_fold_with_many_counts_splits_the_ordered_finalize():
    """A fold takes the order-keeping shape; its stage 2 splits the same way, each fold's
    seed applied once in its own kernel."""
    x = (np.arange(5000) % 1000).astype(np.float32)
    named = {f"c{k}": qc.count(f"lambda v: v > {k * 70}") for k in range(12)}
    named["f"] = qc.aggregate("lambda acc, v: v if v > acc else acc", np.float32(-1.0))
    named["s"] = qc.sum()
    got = qc.query(x).on("webgpu").agg(**named)
    want = qc.query(x).on("numpy").agg(**named)
    assert got == want and got["f"] == np.float32(999.0)
    assert "fn qc_agg_reduce_finalize3(" in qc.query(x).source(backend="webgpu", terminal=qc.agg(**named))
