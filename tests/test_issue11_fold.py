"""Issue 11 item 2: `aggregate(func, seed)` is LINQ's fold on every backend.

func is associative but not necessarily commutative, so every backend must combine partial
results in element order; the seed is applied exactly once (it is not an identity), and an
empty input (or a filter that keeps nothing) gives the seed. The oracle is plain Python:
functools.reduce(func, kept elements, seed) on NumPy scalars.
"""
from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import querycompute as qc
from harness import runner
from harness.plans import run_pass
from querycompute.run.engine import assemble
from querycompute.graph.terminals import AggSpec

BACKENDS = ["numpy"] + [b for b in ("cpu", "opencl", "cuda") if qc.backends()[b]["available"]]
DIALECTS = ["cuda", "metal"]
needs_harness = pytest.mark.skipif(not runner.available()[0], reason=runner.available()[1])
SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# Associative, not commutative (and for the sum, a seed that is not its identity).
FOLDS = {
    "add": lambda a, v: a + v,
    "last_nonzero": lambda a, v: v if v != 0 else a,
    "first_nonzero": lambda a, v: a if a != 0 else v,
    # high bits from the first element, low bits from the last: associative, not commutative
    "mix_bits": lambda a, v: (a & -256) | (v & 255),
}


def oracle(kept, func, seed, dtype):
    t = np.dtype(dtype).type
    with np.errstate(over="ignore"):
        return functools.reduce(func, [t(v) for v in kept], t(seed))


def harness_fold(q, func, seed, dialect: str):
    """What the cuda/metal backend returns: the plan's kernels run on CPU threads."""
    lowered, req, cols, _ = q.lowered(AggSpec("fold", func, seed=seed))
    raw = run_pass(lowered.pass_, dialect, cols, ())
    return assemble(lowered, raw, req)


@pytest.mark.parametrize("backend", BACKENDS)
def test_item2_seed_is_applied_once(backend):
    x = np.arange(1, 11, dtype=np.int64)
    add = FOLDS["add"]
    assert qc.query(x).on(backend).aggregate(add, 5) == oracle(x, add, 5, "int64") == 60
    assert qc.query(x[:0]).on(backend).aggregate(add, 67) == 67
    assert qc.query(x).where(lambda v: v > 100).on(backend).aggregate(add, 7) == 7
    # a seed that is a fixed point of nothing: 1..10 folded from 1000 by multiplication
    assert qc.query(x).on(backend).aggregate(lambda a, v: a * v, 3) == oracle(x, lambda a, v: a * v, 3, "int64")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("n", [5000, 70_000, 300_000])
def test_item2_non_commutative_fold_keeps_element_order(backend, n):
    """Several GPU blocks / tiles (n = 5000, 70,000) and several cpu chunks (> 65,536)."""
    rng = np.random.default_rng(n)
    for trial in range(3):
        x = rng.integers(0, 4, n).astype(np.int64) * (rng.random(n) < 0.01 * (trial + 1))
        for name in ("last_nonzero", "first_nonzero", "mix_bits"):
            f = FOLDS[name]
            got = qc.query(x).on(backend).aggregate(f, 9)
            assert got == oracle(x, f, 9, "int64"), (name, trial)
            kept = x[x != 2]
            got = qc.query(x).where(lambda v: v != 2).on(backend).aggregate(f, 9)
            assert got == oracle(kept, f, 9, "int64"), (name, trial, "filtered")


@needs_harness
@pytest.mark.parametrize("dialect", DIALECTS)
def test_item2_harness_fold_keeps_order_and_applies_seed_once(dialect):
    rng = np.random.default_rng(3)
    n = 20_000        # int32: tiles of 8192, three of them, one block each
    x = (rng.integers(0, 4, n) * (rng.random(n) < 0.002)).astype(np.int32)
    for name in ("last_nonzero", "first_nonzero", "add"):
        f = FOLDS[name]
        assert harness_fold(qc.query(x), f, 5, dialect) == oracle(x, f, 5, "int32"), name
    assert harness_fold(qc.query(x[:0]), FOLDS["add"], 67, dialect) == 67
    assert harness_fold(qc.query(x).where(lambda v: v > 100), FOLDS["add"], 7, dialect) == 7


@st.composite
def fold_cases(draw):
    n = draw(st.sampled_from([0, 1, 2, 7, 300, 5000]))
    density = draw(st.sampled_from([0.0, 0.01, 0.5]))
    seed = draw(st.sampled_from([7, -3]))          # few seeds (each is compiled in), not identities
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x = (rng.integers(-5, 6, n) * (rng.random(n) < density)).astype(np.int64)
    return x, draw(st.sampled_from(sorted(FOLDS))), seed, draw(st.booleans())


@pytest.mark.parametrize("backend", BACKENDS)
@given(case=fold_cases())
@settings(max_examples=30, derandomize=True, **SETTINGS)
def test_item2_fold_order_and_seed_property(backend, case):
    x, name, seed, filtered = case
    f = FOLDS[name]
    q = qc.query(x).where(lambda v: v > 1) if filtered else qc.query(x)
    kept = x[x > 1] if filtered else x
    assert q.on(backend).aggregate(f, seed) == oracle(kept, f, seed, "int64"), (name, seed, filtered)


@needs_harness
@pytest.mark.parametrize("dialect", DIALECTS)
@given(case=fold_cases())
@settings(max_examples=8, derandomize=True, **SETTINGS)
def test_item2_fold_order_and_seed_property_harness(dialect, case):
    x, name, seed, filtered = case
    x = x.astype(np.int32)
    f = FOLDS[name]
    q = qc.query(x).where(lambda v: v > 1) if filtered else qc.query(x)
    kept = x[x > 1] if filtered else x
    assert harness_fold(q, f, seed, dialect) == oracle(kept, f, seed, "int32"), (name, seed, filtered)
