"""Issue 16 item 4: shaped elements on every kernel dialect, with no kernel change (the
frontend scalarizes them): opencl (pocl), webgpu, and the CUDA C / MSL kernels through the CPU
harness, on two representative chains (a map: seed 001's rigid transform; a reduction: a
filtered sum of vec4 elements = X[mask].sum(axis=0)). Each dialect compiles two programs."""
from __future__ import annotations

import numpy as np
import pytest

import querycompute as qc
from expr_backends import HARNESS, run

GPU = [b for b in ("opencl", "cuda", "webgpu") if qc.backends()[b]["available"]] + HARNESS


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(16)
    n = 1000
    R = np.asfortranarray(rng.standard_normal((n, 3, 3)).astype(np.float32))   # F-ordered
    T = rng.standard_normal((n, 3)).astype(np.float32)
    x = rng.standard_normal((n, 6)).astype(np.float32)[:, ::2]                    # strided
    X = rng.standard_normal((n, 4)).astype(np.float32)
    return R, T, x, X


@pytest.mark.parametrize("backend", GPU)
def test_item4_rigid_transform_every_dialect(backend, data):
    R, T, x, _ = data
    q = qc.query(R, T, x).select(lambda R, T, x: R @ x + T)
    got = run(q, backend)
    np.testing.assert_allclose(got, np.einsum("nij,nj->ni", R, x) + T, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", GPU)
def test_item4_elementwise_reduction_every_dialect(backend, data):
    X = data[3]
    q = qc.query(X).where(lambda r: np.linalg.norm(r) > 2)
    got = run(q, backend, "sum")
    want = X[np.linalg.norm(X, axis=1) > 2].sum(axis=0)
    assert got.shape == (4,) and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
