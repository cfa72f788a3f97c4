"""Issue 13 item 4: staged plans in CUDA C and MSL, run by the CPU harness.

The cuda and metal backends can't run here, so their whole staged plan runs through the
harness: every fused pass's kernel set and every column operation's (GpuStages over the
harness runtime), by the same executor the backends use (pipeline.StagedPrepared). The
results must equal the numpy backend's.
"""
from __future__ import annotations

import numpy as np
import pytest

import querycompute as qc
from querycompute.run import pipeline
from querycompute._codegen import gpu
from querycompute.backends.base import Prepared
from querycompute.backends.gpu.gpu_stages import GpuStages

harness = pytest.importorskip("harness.plans")


class HarnessPass(Prepared):
    """One fused pass of the plan, compiled by the harness for `dialect`."""

    def __init__(self, lowered, dialect: str):
        ks = gpu.render(lowered.pass_, dialect)
        self.ks, self.module = ks, harness.module_for([ks])

    def run_quick(self, inputs, params, n):
        return harness.run_kernel_set(self.ks, self.module, inputs, params), None

    def trace_rows(self, row):
        return []


def run_staged(q, terminal, dialect: str):
    """The terminal's value with the plan's kernels in `dialect`, run on CPU threads."""
    from querycompute.run.engine import assemble
    from querycompute.plan.plan import param_values
    staged, term, cols, infos = q.lowered(terminal)
    stages = GpuStages(dialect, lambda ks: (harness.HarnessRuntime(ks, harness.module_for([ks])), "compiled", 0.0))
    prepared = pipeline.StagedPrepared(staged, lambda lowered: HarnessPass(lowered, dialect), stages)
    params = param_values(staged, infos, q._source)
    raw, _ = prepared.run_quick(cols, params, q._source.length(cols))
    return assemble(staged, raw, term)


def _available():
    ok, why = harness.runner.available()
    if not ok:
        pytest.skip(why)


@pytest.mark.parametrize("dialect", ["cuda", "metal"])
def test_item4_harness_sort_take_select(dialect):
    """where -> order_by_descending -> then_by -> take -> select: a compaction with the keys,
    a top-k (multi-key, mixed directions), a gather and a map, with NaN and -0.0 keys."""
    _available()
    rng = np.random.default_rng(7)
    n = 777
    p = (rng.integers(0, 40, n) / 4).astype(np.float32)
    p[::17] = np.nan
    p[::13] = -0.0
    qty = rng.integers(0, 6, n).astype(np.int16)
    q = qc.query(price=p, qty=qty).where(lambda r: r.qty > 1) \
        .order_by_descending(lambda r: r.price).then_by(lambda r: r.qty).take(25).select(lambda r: r.price * r.qty)
    want = q.on("numpy").to_array()
    got = run_staged(q, "to_array", dialect)
    assert np.array_equal(got, want, equal_nan=True)
    sorted_all = qc.query(price=p, qty=qty).order_by(lambda r: r.price).select(lambda r: r.qty)
    assert np.array_equal(run_staged(sorted_all, "to_array", dialect), sorted_all.on("numpy").to_array())


@pytest.mark.parametrize("dialect", ["cuda", "metal"])
def test_item4_harness_distinct_scan_window_positional(dialect):
    """distinct -> scan -> where -> skip/take (a windowed compaction), and the positional
    terminals, on int32 values with many duplicates."""
    _available()
    x = np.random.default_rng(9).integers(-20, 20, 600).astype(np.int32)
    base = qc.query(x).distinct().scan(lambda a, v: a + v, 5)
    q = base.where(lambda s: s % 2 == 0).skip(3).take(6)
    assert np.array_equal(run_staged(q, "to_array", dialect), q.on("numpy").to_array())
    assert run_staged(base, "last", dialect) == base.on("numpy").last()
    assert run_staged(base, ("element_at", 7), dialect) == base.on("numpy").element_at(7)
    assert run_staged(base.reverse(), "count", dialect) == base.on("numpy").count()

