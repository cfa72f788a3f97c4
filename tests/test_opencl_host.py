"""Host side of the opencl ocl (querycompute/backends/opencl/opencl.py) on pocl: inputs are read
in place on a CPU device and copied on other devices, both paths give NumPy's answer for
contiguous, misaligned, strided and reversed views, and the arguments a warm call leaves
bound never leak into a call with another n or another parameter value."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from querycompute._codegen.ir import expr as E
from querycompute._codegen.ir import program as P
from querycompute.backends.opencl.opencl import OpenCLPrepared
from querycompute.backends.opencl.opencl_device import DeviceContext

import gpu_passes as G


class CopyingDevice(DeviceContext):
    """The same pocl device, driven the way a GPU is: inputs copied into device buffers."""
    zero_copy = False


def prepared(ocl, p: P.Pass, copying: bool) -> OpenCLPrepared:
    prep = ocl.prepare(p)
    if not copying:
        return prep
    dev = CopyingDevice(**{f.name: getattr(prep.dev, f.name) for f in dataclasses.fields(DeviceContext)})
    return OpenCLPrepared(dev, prep.ks, prep.program, prep.origin, 0.0)


def sum_pass(dtype: str, name: str) -> P.Pass:
    """sum of x over the elements with x > lo, and their count."""
    prog = G.filter_program(dtype)
    x = E.Load(0, dtype)
    aggs = (P.Agg("sum", (E.Cast(x, G.sum_dtype(dtype)),), G.sum_dtype(dtype)), P.Agg("count", (), "int64"))
    return P.Pass(prog, P.Reduce(aggs), name)


def filtered_sum(x: np.ndarray, lo) -> tuple:
    kept = x[x > lo]
    return kept.astype(np.int64).sum(), len(kept)


def test_pocl_is_read_in_place(ocl):
    """A CPU device's kernels read the caller's memory: the input buffer wraps its pointer."""
    prep = ocl.prepare(sum_pass("int32", "qc_host_inplace"))
    assert prep.dev.zero_copy
    x = np.arange(1000, dtype=np.int32)
    buf = prep.loop().input_buffer(0, x)
    cl = prep.dev.cl
    assert buf.get_info(cl.mem_info.FLAGS) & cl.mem_flags.USE_HOST_PTR
    assert buf.get_host_array(x.shape, x.dtype).ctypes.data == x.ctypes.data


def test_copying_device_uploads_into_a_reused_buffer(ocl):
    prep = prepared(ocl, sum_pass("int32", "qc_host_copy"), copying=True)
    x = np.arange(1000, dtype=np.int32)
    first = prep.loop().input_buffer(0, x)
    assert not first.get_info(prep.dev.cl.mem_info.FLAGS) & prep.dev.cl.mem_flags.USE_HOST_PTR
    assert prep.loop().input_buffer(0, x + 1) is first


def views(dtype: str) -> dict:
    """Inputs of every layout the host side handles differently."""
    rng = np.random.default_rng(3)
    base = rng.integers(-1000, 1000, 40_003).astype(dtype)
    raw = np.zeros(8 * 5001 + 4, np.uint8)                   # a view 4 bytes off its alignment
    misaligned = np.frombuffer(raw.data, dtype=dtype, count=(len(raw) - 4) // np.dtype(dtype).itemsize, offset=4)
    misaligned[:] = rng.integers(-1000, 1000, len(misaligned))
    return {"contiguous": base, "offset by one element": base[1:], "misaligned": misaligned,
            "stride 3": base[::3], "stride 20": base[::20], "reversed": base[::-1], "empty": base[:0]}


@pytest.mark.parametrize("copying", [False, True], ids=["zero-copy", "copying"])
@pytest.mark.parametrize("dtype", ["int32", "float64"])
def test_every_layout_gives_numpys_answer(ocl, copying, dtype):
    prep = prepared(ocl, sum_pass(dtype, f"qc_host_layouts_{dtype}"), copying)
    lo = np.dtype(dtype).type(0)
    for label, x in views(dtype).items():
        if dtype == "float64" and label == "misaligned":
            assert x.ctypes.data % 8 == 4
        total, count = prep.run_quick([x], [lo], len(x))[0]
        want_total, want_count = filtered_sum(x, lo)
        assert (total, count) == (want_total, want_count), label


@pytest.mark.parametrize("copying", [False, True], ids=["zero-copy", "copying"])
def test_warm_calls_rebind_what_changed(ocl, copying):
    """Alternating n, inputs and parameter values on one Prepared: every call sees its own."""
    prep = prepared(ocl, sum_pass("int32", "qc_host_rebind"), copying)
    rng = np.random.default_rng(9)
    a = rng.integers(-50, 50, 300_001).astype(np.int32)
    b = rng.integers(-50, 50, 1_000).astype(np.int32)
    for x, lo in [(a, 0), (a, 10), (b, 10), (a, 10), (a[::2], 10), (b, -60), (a, 0)]:
        got, row = prep.run_quick([x], [np.int32(lo)], len(x))
        assert tuple(got) == filtered_sum(x, lo)
        names = [k.name for k in prep.trace_rows(row)]      # one launch: its last block finalizes
        assert len(names) == 1 and "_reduce_partials" in names[0]


def test_negative_zero_parameter_is_not_mistaken_for_zero(ocl):
    """Bound scalars are compared by their bits: lo = -0.0 after lo = 0.0 is a new value."""
    dtype = "float32"
    x = E.Load(0, dtype)
    prog = P.ElementProgram((P.InputSpec("x", dtype),), (P.ParamSpec("s", dtype),), (), ())
    aggs = (P.Agg("min", (E.Binary("truediv", E.Const(1.0, dtype), E.Param("s", dtype), dtype),), dtype),
            P.Agg("sum", (x,), dtype))
    prep = ocl.prepare(P.Pass(prog, P.Reduce(aggs), "qc_host_negzero"))
    data = np.ones(10, np.float32)
    assert prep.run_quick([data], [np.float32(0.0)], 10)[0][0] == np.inf
    assert prep.run_quick([data], [np.float32(-0.0)], 10)[0][0] == -np.inf
