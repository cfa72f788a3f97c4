"""Issue 18 item 1, the store half: a map kernel's whole runs write each output with one
16-byte store (CUDA `st.global.v4` / `.v2.u64`, Metal packed words, OpenCL vstoreN /
vstore_halfN_rte) and its last run element by element (_codegen/lower/vector.py). The
stored bits are NumPy's: CUDA C and MSL run on the CPU harness, OpenCL on pocl, at sizes
with whole runs and a run that crosses n, on an aligned input (contiguous kernel) and on
x[1:] (strided kernel, whose dense outputs take the wide stores too). NVRTC shows the
vector store in the PTX of the map kernels, with no more than 32 registers."""
from __future__ import annotations

import re

import numpy as np
import pytest

import ptx_facts as F
import querycompute as qc
from querycompute._codegen import gpu
from querycompute.backends.gpu.gpu_launch import LaunchLoop
from harness import plans, runner
from harness.passes import data, expected, passes

DTYPES = ("float32", "float16", "int8", "int64", "bool")
_modules: dict = {}


def map_sets(dialect: str):
    """The harness "map" pass (x * 3 + 1 and the index; bool: not x) for every dtype, compiled
    in one g++ run."""
    ok, why = runner.available()
    if not ok:
        pytest.skip(why)
    if dialect not in _modules:
        sets = {d: gpu.render(passes(d)["map"], dialect) for d in DTYPES}
        _modules[dialect] = (sets, plans.module_for(list(sets.values())))
    return _modules[dialect]


def same_bits(got: np.ndarray, want: np.ndarray) -> None:
    """Equal storage bits, NaN for NaN (a NaN's payload is the device's)."""
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype.kind == "f":
        nan = np.isnan(want)
        np.testing.assert_array_equal(np.isnan(got), nan)
        got, want = got[~nan], want[~nan]
    np.testing.assert_array_equal(got.view(f"u{got.itemsize}") if got.dtype != bool else got,
                                  want.view(f"u{want.itemsize}") if want.dtype != bool else want)


@pytest.mark.parametrize("dialect", ["cuda", "metal"])
def test_item1_wide_stores_write_numpys_bits_on_the_harness(dialect):
    sets, module = map_sets(dialect)
    for d, ks in sets.items():
        assert "wo_out0" in ks.source, f"{d}: no wide store in the {dialect} map kernel"
        for n in (1, 31, 3 * 1024 + 7):                    # a tail only; whole runs and a tail
            store = data(d, n + 24, seed=n)
            off = (-store.ctypes.data % 16) // store.itemsize
            aligned = store[off: off + n]
            for x, variant in ((aligned, "contiguous"), (store[off + 1: off + 1 + n], "strided")):
                raw, launches, _ = LaunchLoop(ks, plans.HarnessRuntime(ks, module, "free")).run([x], (), n)
                assert {ks.kernel(launch.name).variant for launch in launches} <= {variant, "any"}
                for got, want in zip(raw, expected("map", d, x)):
                    same_bits(np.asarray(got), want)


@pytest.mark.parametrize("dtype", ["float16", "int8"])
def test_item1_pocl_vstores_match_numpy(dtype, ocl):
    """vstore_half8_rte (float16 results, rounded to nearest even) and vstore16 of bool
    bytes (int8 input: 16 per run), on 4099 elements: whole runs and a tail."""
    x = data(dtype, 4099, seed=18)
    if dtype == "float16":
        q = qc.query(x).select(lambda v: v * 3 + 1)
    else:
        q = qc.query(x).select(lambda v: v > 40)
    assert "vstore" in q.source("opencl")
    got, want = q.on("opencl").to_array(), q.on("numpy").to_array()
    same_bits(got, want)


@pytest.mark.skipif(F.nvrtc() is None, reason="NVRTC missing: pip install nvidia-cuda-nvrtc-cu12")
@pytest.mark.parametrize("dtype", ["float32", "float16", "int8", "int64"])
def test_item1_map_ptx_stores_16_bytes(dtype):
    ks = F.cuda_kernel_set(*F.simple_kernels(dtype)["map"])
    ptx, facts = F.compile_sm90(ks)
    for spec in ks.kernels:
        body = F._entries(ptx)[spec.name]
        wide = re.findall(r"\bst\.global\.(v4\.(?:u32|f32|b32)|v2\.(?:u64|b64))\b", body)
        assert len(wide) == 1, f"{spec.name}: want one 16-byte store, got {wide}"
        if spec.variant == "contiguous":
            assert 0 < facts[spec.name].registers <= 32 and facts[spec.name].spills == 0
