"""Issue 18 item 1, executed: the contiguous kernels' wide loads (uint4 in CUDA, packed words
in Metal, vloadN in OpenCL) and their guarded tail give NumPy's results, and an input that is
unit-strided but not 16-byte aligned (x[1:]) runs the strided variant (stride 1) instead of
reading misaligned vectors. CUDA C and MSL run on the CPU harness, OpenCL on pocl; every
size has whole runs and a run that crosses n."""
from __future__ import annotations

import numpy as np
import pytest

import querycompute as qc
from querycompute._codegen import gpu
from querycompute.backends.gpu.gpu_launch import LaunchLoop
from harness import plans, runner
from harness.passes import assert_same, data, expected, passes

KINDS = ("map", "where", "reduce_filtered", "reduce_plain")
_modules: dict = {}


def compiled(dialect: str, d: str = "float32"):
    """Kernel sets of the harness passes for (dialect, d), compiled in one g++ run."""
    ok, why = runner.available()
    if not ok:
        pytest.skip(why)
    if (dialect, d) not in _modules:
        sets = {kind: gpu.render(p, dialect) for kind, p in passes(d).items() if kind in KINDS}
        _modules[dialect, d] = (sets, plans.module_for(list(sets.values())))
    return _modules[dialect, d]


@pytest.mark.parametrize("dialect", ["cuda", "metal"])
def test_item1_misaligned_views_take_the_strided_kernels(dialect):
    d = "float32"
    sets, module = compiled(dialect, d)
    base = data(d, 3 * 1024 + 7, seed=18)
    store = np.zeros(len(base) + 8, d)
    off = (-store.ctypes.data % 16) // 4            # elements to the first 16-byte boundary
    aligned = store[off: off + len(base)]
    aligned[:] = base
    misaligned = store[off + 1: off + len(base)]     # unit stride, 4 bytes past a boundary
    for x, variant in ((aligned, "contiguous"), (misaligned, "strided")):
        for kind, ks in sets.items():
            raw, launches, _ = LaunchLoop(ks, plans.HarnessRuntime(ks, module, "free")).run([x], (), len(x))
            ran = {ks.kernel(launch.name).variant for launch in launches} - {"any"}
            assert ran == {variant}, f"{kind} on a {variant} input ran {ran}"
            assert_same(kind, d, raw, expected(kind, d, x))


@pytest.mark.parametrize("dtype", ["float16", "int8"])
def test_item1_pocl_vloads_match_numpy(dtype, ocl):
    """vload_half8 / vload16 runs with a tail, on an aligned array and on x[1:] (vloadN needs
    element alignment only, so both take the contiguous kernels)."""
    x = (np.arange(4099) % 97).astype(dtype)
    for view in (x, x[1:]):
        q = qc.query(view).where(lambda v: v > 40).select(lambda v: v * 2)
        got = q.on("opencl").to_array()
        want = q.on("numpy").to_array()
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_item3_reduction_bits_do_not_depend_on_the_physical_grid():
    """Stage 1 launched with 1, 3, 7 or all of its logical blocks (a device that keeps fewer
    resident): physical blocks loop over the logical ones, so the partials and the results
    are the same bits, and they are NumPy's."""
    d = "float32"
    sets, module = compiled("cuda", d)
    x = data(d, 40 * 1024 + 3, seed=3)
    for kind in ("reduce_filtered", "reduce_plain"):
        ks = sets[kind]
        results = {}
        for resident in (None, 1, 3, 7):
            rt = plans.HarnessRuntime(ks, module, "free")
            rt.resident = resident
            raw, launches, _ = LaunchLoop(ks, rt).run([x], (), len(x))
            stage1 = next(launch for launch in launches if launch.kernel.role == "partials")
            assert stage1.grid == (resident or stage1.values["logical_blocks"])
            results[resident] = raw
        assert_same(kind, d, results[None], expected(kind, d, x))
        bits = {r: repr([np.asarray(v).tobytes() if not isinstance(v, tuple) else v for v in raw])
                for r, raw in results.items()}
        assert len(set(bits.values())) == 1, f"{kind}: results differ between physical grids"
