"""Issue 15, the webgpu backend's gaps: NumPy's 64-bit sums from 32-bit words, storage bindings
in windows, the pipeline operators' column operations, and kernel timings.

Runs where a WebGPU adapter exists (CI: Mesa's lavapipe with WGPU_BACKEND_TYPE=Vulkan).
"""
from __future__ import annotations

import os

os.environ.setdefault("WGPU_BACKEND_TYPE", "Vulkan")     # before the device opens

import numpy as np
import pytest

import querycompute as qc

WEBGPU = qc.backends()["webgpu"]
needs_adapter = pytest.mark.skipif(not WEBGPU["available"], reason=f"no WebGPU adapter: {WEBGPU['reason']}")


def _both(x, run):
    """run(query) on webgpu and on numpy (the oracle)."""
    return run(qc.query(*x).on("webgpu")), run(qc.query(*x).on("numpy"))


def _same(got, want):
    assert type(got) is type(want), (got, want)
    if isinstance(want, dict):
        assert got.keys() == want.keys()
        for k in want:
            _same(got[k], want[k])
    else:
        assert got == want, (got, want)


# ---- item 2: 64-bit results from 32-bit words -----------------------------------------------
@needs_adapter
@pytest.mark.parametrize("dtype", ["int32", "uint32", "int8", "uint8", "int16", "bool"])
def test_item2_int64_sums_and_means_of_narrow_integers_are_exact(dtype):
    """NumPy sums bool and <= 32-bit integers in int64 / uint64 and means them in float64:
    the kernels carry those sums in two u32 words (carries between them, sign extension),
    so sums far outside 32 bits come out exact, in NumPy's types."""
    rng = np.random.default_rng(11)
    n = 300_000                                  # 2 stages, many blocks: partials combined
    if dtype == "bool":
        x = rng.integers(0, 2, n).astype(bool)
    else:
        info = np.iinfo(dtype)
        x = rng.integers(info.min, info.max, n, endpoint=True).astype(dtype)
        x[:1000] = info.max                      # one-sided runs: carries into the high word
    keep = (lambda v: v) if dtype == "bool" else (lambda v: v > 0)     # (bool > 0 would be int64)
    got, want = _both((x,), lambda q: (q.sum(), q.mean(), q.where(keep).sum(),
                                        q.agg(s=qc.sum, m=qc.mean, n=qc.count, hi=qc.max)))
    for g, w in zip(got, want):
        _same(g, w)


@needs_adapter
def test_item2_sums_beyond_32_bits_in_tables_folds_and_negative_totals():
    """An int32 column summing past 2^32 both ways, in a table's agg and next to a fold (the
    order-keeping reduction shape)."""
    n = 2_000_000
    big = np.full(n, 2 ** 31 - 1, np.int32)
    small = np.full(n, -2 ** 31, np.int32)
    for on in ("webgpu", "numpy"):
        t = qc.query(a=big, b=small).on(on)
        res = (t.agg(a=qc.sum(lambda r: r.a), b=qc.sum(lambda r: r.b), m=qc.mean(lambda r: r.b)),
               qc.query(big).on(on).agg(s=qc.sum, last=qc.aggregate(lambda acc, v: v, np.int32(0))))
        if on == "webgpu":
            got = res
        else:
            want = res
    for g, w in zip(got, want):
        _same(g, w)
    assert want[0]["b"] == np.int64(n) * -2 ** 31


def test_item2_64_bit_values_still_refused_with_the_type_named():
    """Sums whose values are 64-bit (float64 data, int64 columns, promotion to int64) are not
    narrow sums: the QueryError names the type and the way out."""
    for x, f in ((np.ones(4), None), (np.ones(4, np.int64), None),
                 (np.ones(4, np.int32), lambda v: v * np.int64(3))):
        q = qc.query(x) if f is None else qc.query(x).select(f)
        with pytest.raises(qc.QueryError, match=r"(float64|int64).*float32 / int32"):
            q.source("webgpu", terminal="sum")
