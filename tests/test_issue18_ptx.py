"""Issue 18 items 1, 4 and 6 checked without a GPU: the CUDA kernels of W1-W6 and the map /
first / any kernels on float32, float16, int8 and int64, compiled by NVRTC for sm_90, read
16 bytes per load on the contiguous path, convert float16 with the hardware's cvt, fit in
32 registers (__launch_bounds__(256, 8); the strided variants are left free) and spill
nothing. (The CPU harness and pocl
tests run the same kernels against NumPy: test_harness_plans.py, test_opencl_kernels.py,
test_issue18_vector_loads.py.)"""
from __future__ import annotations

import functools

import pytest

import ptx_facts as F

pytestmark = pytest.mark.skipif(F.nvrtc() is None, reason="NVRTC missing: pip install nvidia-cuda-nvrtc-cu12")

DTYPES = ("float32", "float16", "int8", "int64")
READS_INPUT = ("map", "partials", "count", "scatter")     # KernelSpec roles that stream the inputs


@functools.lru_cache(maxsize=None)
def compiled(key: str, dtype: str = ""):
    query, terminal = F.workloads()[key] if not dtype else F.simple_kernels(dtype)[key]
    ks = F.cuda_kernel_set(query, terminal)
    ptx, facts = F.compile_sm90(ks)
    return ks, ptx, facts


def check_streaming_kernels(ks, facts):
    for spec in ks.kernels:
        f = facts[spec.name]
        assert f.spills == 0, f"{spec.name}: {f.spills} bytes spilled"
        if spec.variant != "strided":      # the strided gathers may take more (gpu.OCCUPANCY)
            assert 0 < f.registers <= 32, f"{spec.name}: {f.registers} registers (want <= 32)"
        if spec.variant == "contiguous" and spec.role in READS_INPUT:
            assert f.widest_load_bytes() == 16, f"{spec.name}: no 16-byte load in {f.loads}"
        if spec.variant == "strided":
            assert not any(k.startswith("v") for k in f.loads), f"{spec.name}: the strided variant gathers"


@pytest.mark.parametrize("key", ["W1", "W2", "W3", "W4", "W5", "W6"])
def test_item6_workloads_load_16_bytes_in_32_registers(key):
    ks, _, facts = compiled(key)
    assert {s.variant for s in ks.kernels} >= {"contiguous", "strided"}
    check_streaming_kernels(ks, facts)


@pytest.mark.parametrize("dtype", DTYPES)
def test_item6_map_first_any_load_16_bytes_in_32_registers(dtype):
    for key in ("map", "first", "any"):
        ks, _, facts = compiled(key, dtype)
        check_streaming_kernels(ks, facts)


def test_item4_float16_converts_with_cvt_not_software():
    for key in ("map", "first", "any"):
        ks, ptx, facts = compiled(key, "float16")
        assert "cvt.f32.f16" in ptx, f"{key}: half -> float is not the hardware conversion"
        assert "0x7f800000" not in ks.source and "0x7c00" not in ks.source, "software half conversion left"
    ks, ptx, _ = compiled("map", "float16")      # x * 2 + 1 rounds to half after each op
    assert "cvt.rn.f16.f32" in ptx
    stage = F._entries(ptx)["qc_to_array_map"]
    assert stage.count("cvt.f32.f16") >= ks.elems_per_thread
