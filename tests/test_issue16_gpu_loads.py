"""Issue 16 item 4 on the GPU dialects: small shaped elements one per thread-run with the widest
aligned loads their size allows (seed 001's table; _codegen/elements.py, lower/vector.py,
backends/gpu_elements.py), strided / F-ordered / sliced elements gathered. Results against
NumPy on opencl (pocl), webgpu (lavapipe) and the CUDA C / MSL kernels through the CPU
harness; the PTX of the contiguous variant (NVRTC, sm_80 / sm_90, no GPU needed) holds the
`ld.global.nc.v4` loads; explain() names the strategy and the bytes per element."""
from __future__ import annotations

import re

import numpy as np
import pytest
from compile_checks import ARCHS, ptx_of
from expr_backends import HARNESS, harness_run

import querycompute as qc
from querycompute._codegen import elements
from querycompute.backends.gpu.gpu_elements import whole

GPU = [b for b in ("opencl", "cuda", "webgpu") if qc.backends()[b]["available"]] + HARNESS
N = 1003                      # not a multiple of a run (4 elements): the tail path runs too


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(16)
    R = rng.standard_normal((N, 3, 3)).astype(np.float32)
    T = rng.standard_normal((N, 3)).astype(np.float32)
    x = rng.standard_normal((N, 3)).astype(np.float32)
    X = rng.standard_normal((N, 4)).astype(np.float32)
    return R, T, x, X


def layouts(R, T, x):
    """(name, R, T, x, whole elements?) -- one query shape, so each backend compiles once."""
    wide = np.empty((N, 6), np.float32)
    wide[:, ::2] = x
    return [("C-ordered", R, T, x, True),
            ("F-ordered R", np.asfortranarray(R), T, x, False),
            ("transposed R", R.transpose(0, 2, 1).copy().transpose(0, 2, 1), T, x, False),
            ("strided x", R, T, wide[:, ::2], False),
            ("n = 1", R[:1], T[:1], x[:1], True),
            ("n = 1, strided x", R[:1], T[:1], wide[:1, ::2], False)]     # unit-strided columns, not whole


def result(q, backend, terminal="to_array"):
    if backend in HARNESS:
        return harness_run(q, terminal, backend), None
    got = getattr(q.on(backend), terminal)()
    return got, [k.name for k in qc.last_trace().kernels]


@pytest.fixture
def kernels_answer(monkeypatch):
    monkeypatch.setenv("QUERYCOMPUTE_TIERED", "0")        # the GPU kernels answer, not the numpy tier


@pytest.mark.parametrize("backend", GPU)
def test_item4_rigid_transform_whole_or_gathered_every_dialect(backend, data, kernels_answer):
    for name, R, T, x, is_whole in layouts(*data[:3]):
        got, names = result(qc.query(R, T, x).select(lambda R, T, x: R @ x + T), backend)
        want = np.einsum("nij,nj->ni", R, x) + T
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=f"{backend} {name}")
        if names:                 # the variant the launch loop picked (gpu_elements.whole_arrays)
            assert any(k.endswith("_strided") for k in names) != is_whole, (name, names)


@pytest.mark.parametrize("backend", GPU)
def test_item4_filtered_vec4_sum_and_compaction_read_whole_elements(backend, data, kernels_answer):
    X = data[3]
    got, names = result(qc.query(X).where(lambda r: np.linalg.norm(r) > 2), backend, "sum")
    np.testing.assert_allclose(got, X[np.linalg.norm(X, axis=1) > 2].sum(axis=0), rtol=1e-4, atol=1e-4)
    if names:
        assert not any(k.endswith("_strided") for k in names), names
    got, names = result(qc.query(X).where(lambda r: r[0] > r[3]).select(lambda r: r * 2), backend)
    np.testing.assert_array_equal(got, X[X[:, 0] > X[:, 3]] * 2)           # the compaction's kernels
    if names:
        assert not any(k.endswith("_strided") for k in names), names


@pytest.mark.skipif("cuda" not in HARNESS, reason="the CPU harness (g++) is missing")
def test_item4_narrow_wide_and_unaligned_elements_through_the_harness():
    """float16 vec3 (8 per thread: 3 loads), uint8 rows of 5 (16 per thread: 5 loads),
    float64 mat3x3 (2 per thread: 9 ulonglong2 loads), and an element array 4 bytes off
    16-byte alignment (the strided variant: gathered)."""
    rng = np.random.default_rng(3)
    n = 37
    H = rng.standard_normal((n, 3)).astype(np.float16)
    got = harness_run(qc.query(H).select(lambda r: r * 2 + r[0]), "to_array", "cuda")
    np.testing.assert_array_equal(got, H * 2 + H[:, :1])
    U = rng.integers(0, 255, (n, 5)).astype(np.uint8)
    got = harness_run(qc.query(U).select(lambda r: r.max() - r.min()), "to_array", "cuda")
    np.testing.assert_array_equal(got, U.max(axis=1) - U.min(axis=1))
    D = rng.standard_normal((n, 3, 3))
    got = harness_run(qc.query(D).select(lambda m: m.T @ m[0]), "to_array", "cuda")
    np.testing.assert_allclose(got, np.einsum("nji,nj->ni", D, D[:, 0]), rtol=1e-12)
    raw = np.empty(n * 4 * 4 + 16, np.uint8)
    at = (-raw.ctypes.data) % 16 + 4                        # 4 bytes past a 16-byte boundary
    X = raw[at:at + n * 16].view(np.float32).reshape(n, 4)
    X[:] = rng.standard_normal((n, 4))
    assert whole([X[:, j] for j in range(4)]) is not None and X.ctypes.data % 16 == 4
    got = harness_run(qc.query(X).where(lambda r: np.linalg.norm(r) > 2), "sum", "cuda")
    np.testing.assert_allclose(got, X[np.linalg.norm(X, axis=1) > 2].sum(axis=0), rtol=1e-4, atol=1e-4)


@pytest.mark.skipif("webgpu" not in GPU, reason="no webgpu adapter")
def test_item4_webgpu_binds_a_whole_array_once(kernels_answer):
    """40 values per element: the gathered variant would bind 41 storage buffers (lavapipe
    allows 32), the whole-element one binds 2, so a C-contiguous array runs; an F-ordered one
    is refused when it runs, with the way out named."""
    X = np.random.default_rng(4).standard_normal((100, 40)).astype(np.float32)
    got, names = result(qc.query(X).select(lambda r: r.sum()), "webgpu")
    np.testing.assert_allclose(got, X.sum(axis=1), rtol=1e-5, atol=1e-5)
    assert names == ["qc_to_array_map"], names
    from querycompute.backends.webgpu.webgpu_device import open_device
    if int(open_device().limits.get("max-storage-buffers-per-shader-stage", 64)) < 41:
        with pytest.raises(qc.QueryError, match="storage buffers.*C-contiguous"):
            qc.query(np.asfortranarray(X)).select(lambda r: r.sum()).on("webgpu").to_array()


def test_item4_whole_arrays_only_from_element_contiguous_views(data):
    R = data[0]
    cols = lambda A: [A[(slice(None),) + idx] for idx in np.ndindex(A.shape[1:])]   # noqa: E731
    span = whole(cols(R))
    assert span is not None and span.base is not None and np.array_equal(span, R.reshape(-1))
    assert whole(cols(np.asfortranarray(R))) is None
    assert whole(cols(R[:, :2, :])) is None                  # rows of each element sliced
    assert whole(cols(R[::2])) is None                       # every other element
    assert whole(cols(R)[::-1]) is None                      # components out of order
    assert len(whole(cols(R[:0]))) == 0


def _queries(data):
    R, T, x, X = data
    D = np.random.default_rng(1).standard_normal((64, 3, 3))
    H = np.random.default_rng(2).standard_normal((64, 3)).astype(np.float16)
    return {"rigid": (qc.query(R, T, x).select(lambda R, T, x: R @ x + T), "to_array", "v4", 9 + 3 + 3),
            "vec4 sum": (qc.query(X).where(lambda r: np.linalg.norm(r) > 2), "sum", "v4", 4),
            "float64 mat3x3": (qc.query(D).select(lambda m: m.sum()), "to_array", "v2", 9),
            "float16 vec3": (qc.query(H).select(lambda r: r.max()), "to_array", "v4", 3)}


def test_item4_ptx_contiguous_variant_loads_whole_elements_v4(data):
    """The contiguous kernels read each run with `ld.global.nc.v4.u32` (v2.u64 for float64: 16
    bytes too); the strided variants gather with scalar loads."""
    F = pytest.importorskip("ptx_facts")
    if F.nvrtc() is None:
        pytest.skip("NVRTC missing: pip install nvidia-cuda-nvrtc-cu12")
    for name, (q, terminal, lanes, count) in _queries(data).items():
        ks = F.cuda_kernel_set(q, terminal)
        assert ks.elements, name
        _, facts = F.compile_sm90(ks)
        main = next(s.name for s in ks.kernels if s.variant == "contiguous" and s.role in ("map", "partials"))
        vec = sum(c for kind, c in facts[main].loads.items() if kind.startswith(lanes))
        assert vec == count and facts[main].widest_load_bytes() == 16, (name, facts[main].loads)
        assert facts[main].spills == 0, (name, facts[main])
        for s in ks.kernels:
            if s.variant == "strided":
                assert not any(k.startswith("v") for k in facts[s.name].loads), (name, s.name)
        for arch in ARCHS:
            ptx = ptx_of(ks, arch, "elements.cu")
            assert len(re.findall(rf"ld\.global\.nc\.{lanes}\.", ptx)) >= count, (name, arch)


def test_item4_explain_states_strategy_width_and_bytes(data):
    R, T, x, _ = data
    q = qc.query(R, T, x).select(lambda R, T, x: R @ x + T)
    text = q.explain("cuda")
    assert ("in0: 36 B/element, whole elements, 4 elements per thread, each run of 144 B read as 9 "
            "aligned 16-byte load(s)") in text, text
    assert "in1: 12 B/element, whole elements, 4 elements per thread, each run of 48 B read as 3" in text
    assert "fused reads 60 B" in text                          # 36 + 12 + 12 bytes per element
    F = qc.query(np.asfortranarray(R), T, x).select(lambda R, T, x: R @ x + T).explain("opencl")
    assert "gathered: one strided scalar load per component" in F and "in0 not C-contiguous" in F, F
    assert "no wide loads in this dialect" in q.explain("webgpu")
    big = np.zeros((4, 8, 8), np.float32)                      # 256 B: one element per thread
    text = qc.query(big).select(lambda m: m.sum()).explain("cuda")
    assert "one element per thread, each run of 256 B read as 16 aligned 16-byte load(s)" in text, text


def test_item4_load_width_follows_alignment_of_every_run():
    """Seed 001's table extended to any element size: the widest power of two dividing a
    run's bytes, up to 16; no wide load where only scalar alignment holds."""
    def arr(m, dtype):
        return elements.ElementArray("x", 0, m, dtype)
    assert elements.load_width(arr(4, "float32"), 4) == 16          # float4 each
    assert elements.load_width(arr(9, "float32"), 4) == 16          # 144 B: nine
    assert elements.load_width(arr(3, "float32"), 1) == 0           # 12 B alone: scalar alignment only
    assert elements.load_width(arr(3, "float32"), 2) == 8           # 24 B: float2 loads
    assert elements.load_width(arr(9, "float64"), 2) == 16
    assert elements.load_width(arr(63, "float32"), 4) == 0          # 1008 B: too long to hold
