"""Issue 18 items 1, 4 and 6 checked on the SASS, without a GPU: NVRTC's PTX for sm_90,
assembled by ptxas and disassembled by nvdisasm of one release (tests/sass_facts.py says
why not NVRTC's own cubin). On the contiguous path the kernels read (and the maps write) 16
bytes per instruction (LDG.E.128 / STG.E.128); the elementwise and reduce kernels fit in 32
registers as the cubin records them; float16 converts with the hardware's instructions
(HADD2.F32, F2FP.F16.F32), not with integer bit manipulation. A few kernels only: each case
is one NVRTC compile (~1 s) and one ptxas run."""
from __future__ import annotations

import functools

import pytest

import ptx_facts as F
import sass_facts as S

pytestmark = [pytest.mark.skipif(F.nvrtc() is None, reason="NVRTC missing: pip install nvidia-cuda-nvrtc-cu12"),
              pytest.mark.skipif(S.missing() is not None, reason=S.missing() or "")]

STREAMING = ("map", "partials", "count", "scatter", "lookback")   # KernelSpec roles that read the inputs
# what a software float <-> half conversion is made of: exponent / mantissa masks and the
# float bias constants (2**-14 scaled, 65536.0f); the hardware conversions need none
SOFTWARE_HALF = ("0x7c00", "0x3ff,", "0x3ff ", "0x7fff", "0x38000000", "0x47800000")


@functools.lru_cache(maxsize=None)
def compiled(key: str, dtype: str = ""):
    """(KernelSet, SassFacts by kernel) of a workload (W1-W6) or a map / first / any kernel."""
    query, terminal = F.workloads()[key] if not dtype else F.simple_kernels(dtype)[key]
    ks = F.cuda_kernel_set(query, terminal)
    ptx, _ = F.compile_sm90(ks)
    return ks, S.sass(ptx)


@pytest.mark.parametrize("key", ["W1", "W4"])
def test_item6_workloads_sass_load_128_bits_in_32_registers(key):
    ks, facts = compiled(key)
    for spec in ks.kernels:
        f = facts[spec.name]
        if spec.variant != "strided":
            assert 0 < f.registers <= 32, f"{spec.name}: {f.registers} registers in the cubin"
        if spec.variant == "contiguous" and spec.role in STREAMING:
            assert f.widest("loads") == 16, f"{spec.name}: LDG widths {f.loads} (want LDG.E.128)"
        if spec.variant == "strided":
            assert f.widest("loads") < 16, f"{spec.name}: a strided gather with a wide load"


@pytest.mark.parametrize("dtype", ["float32", "float16", "int8"])
def test_item1_maps_sass_store_128_bits(dtype):
    ks, facts = compiled("map", dtype)
    for spec in ks.kernels:
        f = facts[spec.name]
        assert f.widest("stores") == 16, f"{spec.name}: STG widths {f.stores} (want STG.E.128)"
        if spec.variant == "contiguous":
            assert f.widest("loads") == 16 and 0 < f.registers <= 32, f


@pytest.mark.parametrize("key", ["map", "any"])
def test_item4_float16_sass_has_no_software_conversion(key):
    """Every float16 element goes through HADD2.F32 (half -> float) and the map's results
    through F2FP.F16.F32 (float -> half, round to nearest even); the bit operations (LOP3,
    SHF, PRMT) are those of the float32 kernel plus at most one per element (the packing),
    where a software conversion takes several per element, and no half mask appears."""
    ks, facts = compiled(key, "float16")
    _, twin = compiled(key, "float32")
    bit_ops = ("LOP3", "SHF", "PRMT")
    for spec in ks.kernels:
        f, g = facts[spec.name], twin[spec.name]
        if spec.role in STREAMING:
            assert f.half_conversions >= ks.elems_per_thread, f"{spec.name}: {f.half_conversions} conversions"
        assert not [c for c in SOFTWARE_HALF if c in f.text], f"{spec.name}: a half mask in the SASS"
        extra = sum(f.count(op) for op in bit_ops) - sum(g.count(op) for op in bit_ops)
        assert extra <= ks.elems_per_thread, f"{spec.name}: {extra} more bit operations than float32"
    if key == "map":
        stage = facts["qc_to_array_map"]
        assert stage.count("F2FP") >= ks.elems_per_thread, "float -> half is not the hardware's F2FP"
