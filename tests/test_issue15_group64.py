"""Issue 15 item 2: a webgpu group_by whose sums / means NumPy accumulates in 64 bits (int64 /
uint64 sums, float64 means of bool and 8-32-bit integers) runs and equals the numpy backend.

The webgpu pass stores the values in their own type (group_narrow.py: WGSL has no 64-bit
types); the group stage widens them as it sums, on the numpy reference, and its trace row
names numpy. Runs where a WebGPU adapter exists (CI: Mesa's lavapipe).
"""
from __future__ import annotations

import os

os.environ.setdefault("WGPU_BACKEND_TYPE", "Vulkan")     # before the device opens

import numpy as np
import pytest

import querycompute as qc

WEBGPU = qc.backends()["webgpu"]
needs_adapter = pytest.mark.skipif(not WEBGPU["available"], reason=f"no WebGPU adapter: {WEBGPU['reason']}")


def _grouped(on, k, v):
    """One query shape for every case: int64 sum, float64 mean and count per key."""
    return qc.query(k=k, v=v).on(on).group_by(lambda r: r.k).agg(
        total=qc.sum(lambda r: r.v), avg=qc.mean(lambda r: r.v), n=qc.count)


def _values(dtype, n, rng):
    if dtype == "bool":
        return rng.random(n) < 0.3
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, n, endpoint=True).astype(dtype)


def _assert_same(got, want):
    assert list(got) == list(want)
    for name in want:
        assert got[name].dtype == want[name].dtype, name
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


@needs_adapter
@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "uint8", "uint32", "bool"])
def test_item2_group_by_wide_sums_and_means_of_narrow_values(dtype):
    """Extreme values (int32 sums overflow 32 bits, negatives sign-extend) against the numpy
    backend: int64 sums exact, float64 means of the exact sums, int64 counts; the pass runs on
    webgpu and the group stage's row names numpy."""
    rng = np.random.default_rng(15)
    k = rng.integers(0, 5, 3000).astype(np.int32)
    v = _values(dtype, 3000, rng)
    got = _grouped("webgpu", k, v)
    dialects = [r.dialect for r in qc.last_trace().kernels]
    _assert_same(got, _grouped("numpy", k, v))
    assert dialects[0] == "webgpu" and dialects[-1] == "numpy", dialects
    # plain NumPy, per group (the oracle of the oracle)
    for g, key in enumerate(got["key"]):
        assert got["total"][g] == v[k == key].sum()
        assert got["n"][g] == np.count_nonzero(k == key)


@needs_adapter
def test_item2_group_by_int32_sum_past_int32_and_float_keys():
    """Sums far past 2^31 (every value int32's max or min), float32 keys (NaN-free, with
    -0.0 == 0.0), and a where before the group_by."""
    k = np.array([0.5, -1.0, 0.0, -0.0, 2.25] * 400, dtype=np.float32)
    v = np.where(np.arange(2000) % 3 == 0, np.int32(-2**31), np.int32(2**31 - 1)).astype(np.int32)

    def run(on):
        return qc.query(k=k, v=v).on(on).where(lambda r: r.k != 2.25).group_by(lambda r: r.k).agg(
            total=qc.sum(lambda r: r.v), avg=qc.mean(lambda r: r.v))

    got = run("webgpu")
    _assert_same(got, run("numpy"))
    assert np.abs(got["total"]).max() > 2**31


@needs_adapter
def test_item2_group_by_wide_sums_of_empty_input():
    k = np.zeros(0, np.int32)
    v = np.zeros(0, np.int16)
    got = _grouped("webgpu", k, v)
    _assert_same(got, _grouped("numpy", k, v))
    assert len(got["key"]) == 0


@needs_adapter
def test_item2_group_by_float32_values_stay_on_webgpu():
    """Values that need no 64-bit accumulator keep the WGSL group kernels."""
    k = np.arange(100, dtype=np.int32) % 3
    v = np.arange(100, dtype=np.int32)
    got = qc.query(k=k, v=v).on("webgpu").group_by(lambda r: r.k).agg(s=qc.sum(lambda r: np.float32(r.v)))
    np.testing.assert_array_equal(got["s"], [np.float32(v[k == g].sum()) for g in range(3)])
    assert {r.dialect for r in qc.last_trace().kernels} == {"webgpu"}


@needs_adapter
def test_item2_group_by_of_64bit_values_is_still_a_clear_error():
    """Values that are 64-bit themselves (an int64 column) are not narrow: refused, type named."""
    k = np.arange(10, dtype=np.int32) % 2
    with pytest.raises(qc.QueryError, match="int64"):
        _grouped("webgpu", k, np.arange(10, dtype=np.int64))


def test_item2_other_backends_keep_their_64bit_columns():
    """Only a backend without 64-bit types narrows the pass (opencl's pass still stores the
    int64 column: its source declares 64-bit outputs)."""
    from querycompute.backends import registry
    assert getattr(registry.get("webgpu"), "narrow_group_sums", False)
    for name in ("numpy", "cpu", "opencl", "cuda"):
        assert not getattr(registry.get(name), "narrow_group_sums", False), name


def test_item2_source_and_explain_show_the_narrowed_pass():
    """source() / explain() for webgpu print the plan the engine compiles (the pass stores the
    int32 values; no device needed); opencl's pass still computes the int64 column."""
    k = np.arange(10, dtype=np.int32) % 2
    g = qc.query(k=k, v=np.arange(10, dtype=np.int32)).group_by(lambda r: r.k)
    src = g.source("webgpu", total=qc.sum(lambda r: r.v))
    assert "qc_stage1" in src and "i64" not in src
    assert "staged plan" in g.explain("webgpu", total=qc.sum(lambda r: r.v))
    assert "long" in g.source("opencl", total=qc.sum(lambda r: r.v))
