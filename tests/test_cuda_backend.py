"""The cuda backend's compile path (NVRTC without a device), arch selection, availability and,
on a machine with a CUDA device (`-m gpu`), real runs compared with NumPy."""
from __future__ import annotations

import sys

import numpy as np
import pytest

from querycompute._codegen import gpu
from querycompute._codegen import launch as L
from harness.passes import assert_same, expected, passes
from querycompute.backends.cuda import cuda as cuda_mod
from querycompute.backends.cuda.cuda_compile import (ARCH_VAR, compile_cuda, nvrtc, parse_arch,
    targets)
from querycompute.backends.cuda.cuda_device import probe
from querycompute.errors import BackendUnavailableError, CompileError, QueryError

pytest.importorskip("cupy")
try:
    nvrtc()
except BackendUnavailableError as exc:
    pytest.skip(f"NVRTC unavailable: {exc}", allow_module_level=True)
HAS_DEVICE = probe()[0] is not None
gpu_only = pytest.mark.skipif(not HAS_DEVICE, reason=f"no CUDA device: {probe()[1]}")


@pytest.fixture(autouse=True)
def no_arch_override(monkeypatch):
    monkeypatch.delenv(ARCH_VAR, raising=False)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("kind", ["map", "where", "reduce_filtered"])
def test_generated_kernels_compile_to_cubin(arch, kind):
    ks = gpu.render(passes("float32")[kind], "cuda")
    cubin = compile_cuda(ks.source, ks.options, arch)
    assert cubin[:4] == b"\x7fELF"              # a CUBIN is an ELF image


def test_virtual_arch_gives_ptx():
    ks = gpu.render(passes("int64")["reduce_plain"], "cuda")
    ptx = compile_cuda(ks.source, ks.options, "compute_80").decode()
    assert ".target sm_80" in ptx
    assert all(f".entry {k.name}" in ptx for k in ks.kernels)


def test_default_targets_are_sm80_cubin_plus_compute80_ptx():
    assert targets() == ["sm_80", "compute_80"]


@pytest.mark.parametrize("env,want", [("sm_90", ["sm_90", "compute_90"]), ("86", ["sm_86", "compute_86"]),
                                      ("8.9", ["sm_89", "compute_89"]), ("compute_75", ["compute_75"])])
def test_arch_override_from_environment(monkeypatch, env, want):
    monkeypatch.setenv(ARCH_VAR, env)
    assert targets() == want


def test_device_arch_is_used_without_override():
    assert targets(device_arch=86) == ["sm_86", "compute_86"]


@pytest.mark.parametrize("bad", ["banana", "sm_", "8"])
def test_bad_arch_names_the_variable(monkeypatch, bad):
    monkeypatch.setenv(ARCH_VAR, bad)
    with pytest.raises(QueryError, match=ARCH_VAR):
        targets()


def test_arch_nvrtc_does_not_know_lists_the_supported_ones(monkeypatch):
    monkeypatch.setenv(ARCH_VAR, "sm_20")
    with pytest.raises(QueryError, match="not supported by NVRTC.*sm_80"):
        targets()


def test_parse_arch_spellings():
    assert parse_arch("sm_90a") == ("sm", 90)
    assert parse_arch("compute_80") == ("compute", 80)
    assert parse_arch("7.5") == ("sm", 75)


def test_compile_error_carries_log_options_and_numbered_source():
    src = 'extern "C" __global__ void broken(float* x) {\n    x[0] = undefined_name;\n}\n'
    with pytest.raises(CompileError) as info:
        compile_cuda(src, ("--fmad=false",), "sm_80")
    err = info.value
    assert err.dialect == "cuda"
    assert "undefined_name" in err.log
    assert "--gpu-architecture=sm_80" in err.options and "--fmad=false" in err.options
    assert "   2 |     x[0] = undefined_name;" in str(err)


def test_availability_without_device_says_why_and_what_to_install():
    ok, why = cuda_mod.CudaBackend().availability()
    if HAS_DEVICE:
        assert ok and "sm_" in why
    else:
        assert not ok and "querycompute[cuda12]" in why


def test_availability_without_cupy_does_not_crash(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)      # `import cupy` now raises ImportError
    ok, why = cuda_mod.CudaBackend().availability()
    assert not ok and "cupy is not installed" in why and "pip install" in why


def test_prepare_compiles_without_a_device_and_caches_on_disk(private_cache, monkeypatch):
    monkeypatch.setenv("QUERYCOMPUTE_CUDA_ARCH", "sm_80")    # the same targets with a device
    p = passes("float32")["reduce_filtered"]
    first = cuda_mod.CudaBackend().prepare(p)
    assert first.origin == "compiled" and first.compile_ms > 0
    assert set(first.binaries) == {"sm_80", "compute_80"}
    second = cuda_mod.CudaBackend().prepare(p)
    assert second.origin == "disk" and second.binaries == first.binaries
    from querycompute.cache import cache
    entries = cache.entries(backend="cuda")
    assert len(entries) == 2 and {e.backend for e in entries} == {"cuda"}


@pytest.mark.skipif(HAS_DEVICE, reason="checks the no-device error")
def test_running_without_a_device_raises_backend_unavailable(private_cache):
    prepared = cuda_mod.CudaBackend().prepare(passes("int32")["map"])
    with pytest.raises(BackendUnavailableError, match="can't run here"):
        prepared.run_quick([np.arange(4, dtype=np.int32)], [], 4)[0]


def test_source_and_launch_shape_need_no_device():
    backend = cuda_mod.CudaBackend()
    p = passes("float32")["where"]
    assert '__global__' in backend.source(p)
    shapes = backend.launch_shape(p, 10_000)
    # compaction in one pass: init, then the look-back kernel over tiles of 2048 (ops/compact/gpu.py)
    assert [s["name"] for s in shapes] == ["h_where_float32_compact_init", "h_where_float32_compact_lookback"]
    assert all(s["block"] == (256,) for s in shapes)


def test_scalar_arguments_follow_the_printers_declarations():
    assert L.scalar_arg("bool", True).dtype == np.uint8
    assert L.scalar_arg("float16", 1.5).dtype == np.float32
    assert L.scalar_arg("int8", -3).dtype == np.int8


@pytest.mark.gpu
@gpu_only
@pytest.mark.parametrize("kind", ["map", "where", "reduce_filtered", "reduce_plain"])
@pytest.mark.parametrize("d", ["int32", "float32", "float64", "uint8"])
def test_runs_on_the_device_like_numpy(kind, d):
    from harness.passes import data
    prepared = cuda_mod.CudaBackend().prepare(passes(d)[kind])
    for n in (0, 1, 33, 1000, 65537):
        x = data(d, n, seed=n)
        assert_same(kind, d, prepared.run_quick([x], [], n)[0], expected(kind, d, x))


@pytest.mark.gpu
@gpu_only
def test_cupy_inputs_stay_on_the_device():
    import cupy as cp
    x = cp.arange(1000, dtype=cp.float32)
    got = cuda_mod.CudaBackend().prepare(passes("float32")["map"]).run_quick([x], [], 1000)[0]
    assert all(isinstance(g, cp.ndarray) for g in got)
    np.testing.assert_array_equal(got[0].get(), x.get() * 3 + 1)
