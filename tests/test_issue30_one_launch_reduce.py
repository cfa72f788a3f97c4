"""Issue 30 item 1: a reduction in one launch where the dialect has a device-scope fence
(DialectCaps.device_fence: CUDA, OpenCL). Stage 1's blocks publish their partials, fence and
draw a ticket; the block that draws the last one folds the partials in the finalize kernel's
order, so the results are bit for bit those of the two-launch shape for the same grid. Run
through the CPU harness (CUDA C) and pocl (OpenCL), both through the launch loop the
backends share (one loop per kernel set, reused across n: the ticket counter must come back
to zero after every launch); the CUDA C compiles with NVRTC for sm_90."""
from __future__ import annotations

import ctypes
import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

from querycompute._codegen import gpu
from querycompute._codegen import launch as L
from querycompute._codegen.dialects.by_name import DIALECTS, caps
from querycompute._codegen.ops.reduce.gpu import TICKET
from querycompute.backends.gpu.gpu_launch import LaunchLoop

from compile_checks import ptx_of
from harness import plans, runner
from harness.passes import assert_same, data, expected, passes

needs_harness = pytest.mark.skipif(not runner.available()[0], reason=runner.available()[1])
DTYPES = ("float16", "float32", "float64", "int32", "int64", "bool")
KINDS = ("reduce_filtered", "reduce_plain")     # sum min max count first | min max any all fold


def render_both(dialect: str, dtypes=DTYPES) -> tuple[dict, dict]:
    """(one-launch sets, two-launch sets) by (dtype, kind): the two-launch shape is the same
    dialect with device_fence declared False (a capability decides, not the dialect's name)."""
    pairs = [(d, k) for d in dtypes for k in KINDS]
    one = {dk: gpu.render(passes(dk[0])[dk[1]], dialect) for dk in pairs}
    cls = DIALECTS[dialect]
    saved = cls.CAPS
    cls.CAPS = dataclasses.replace(saved, device_fence=False)
    try:
        two = {dk: gpu.render(passes(dk[0])[dk[1]], dialect) for dk in pairs}
    finally:
        cls.CAPS = saved
    return one, two


def sizes(ks) -> list[int]:
    """0, 1, block boundaries, one tile and its neighbours, grids of 2, 3 and 17 blocks."""
    tile = ks.block * ks.elems_per_thread
    return [0, 1, 2, ks.block - 1, ks.block, ks.block + 1, tile - 1, tile, tile + 1,
            2 * tile, 3 * tile + 5, 17 * tile + 7]


def bits(raw) -> list:
    """Raw reduce results as comparable bytes (NaN payloads, -0.0 and the type included)."""
    out = []
    for r in raw:
        if isinstance(r, tuple):
            out.append((r[0], tuple((type(v), np.asarray(v).tobytes()) for v in r[1])))
        else:
            out.append((type(r), np.asarray(r).tobytes()))
    return out


def test_the_capability_picks_the_shape():
    """One launch exactly where the dialect declares a device-scope fence."""
    for dialect in DIALECTS:
        ks = gpu.render(passes("int32")["reduce_filtered"], dialect)
        roles = [k.role for k in ks.kernels]
        if caps(dialect).device_fence:
            assert roles == ["partials", "partials"], dialect          # contiguous, strided
            assert [b for b in ks.scratch if b.name == TICKET] == [L.BufferSpec(TICKET, "int32", "1", zeroed=True)]
            for n in (0, 5, 10 ** 6, 10 ** 9):
                (launch,) = L.plan(ks, n, True)
                assert launch.values == {"num_partials": L.grid_size(ks, n), "logical_blocks": L.grid_size(ks, n)}
        else:
            assert roles[-1] == "finalize" and TICKET not in {b.name for b in ks.scratch}, dialect
    assert {d for d in DIALECTS if caps(d).device_fence} == {"cuda", "opencl"}


def test_one_launch_cuda_compiles_with_nvrtc_for_sm_90():
    one, _ = render_both("cuda")
    for ks in one.values():
        ptx = ptx_of(ks, "sm_90")
        assert "atom.global.add" in ptx or "red.global.add" in ptx, ks.pass_name
        assert "membar.gl" in ptx or "fence.sc.gpu" in ptx or "fence.acq_rel.gpu" in ptx, ks.pass_name


def _check(one_loops: dict, two_run, resident=None):
    """For every set and n: the one-launch loop's results == the two-launch ones, bit for bit
    (and NumPy's, as the harness's assert_same has it)."""
    for (d, kind), loop in one_loops.items():
        for n in sizes(loop.ks):
            x = data(d, n, seed=n % 7)
            got = loop.run([x], [], n)[0]
            want = two_run((d, kind), x)
            assert bits(got) == bits(want), (d, kind, n, resident, got, want)
            assert_same(kind, d, got, expected(kind, d, x))


@needs_harness
@pytest.mark.parametrize("resident", [None, 2])
def test_one_launch_equals_two_launches_cuda_harness(resident):
    """CUDA C on the CPU harness; `resident` 2: two physical blocks run every logical block
    (the ticket counts physical blocks, the partials logical ones)."""
    one, two = render_both("cuda")
    m_one, m_two = plans.module_for(list(one.values())), plans.module_for(list(two.values()))
    loops = {}
    for dk, ks in one.items():
        rt = plans.HarnessRuntime(ks, m_one, "free")
        rt.resident = resident
        loops[dk] = LaunchLoop(ks, rt)
    _check(loops, lambda dk, x: plans.run_kernel_set(two[dk], m_two, [x]), resident)
    for loop in loops.values():        # every launch left the counter at zero
        assert loop._buffers[f"scratch:{TICKET}"][2].tolist() == [0]


@needs_harness
def test_one_launch_survives_the_alternate_schedule():
    """The harness's deterministic warp schedule (ascending / descending blocks) too."""
    one, two = render_both("cuda", ("float32", "int64"))
    m_one, m_two = plans.module_for(list(one.values())), plans.module_for(list(two.values()))
    loops = {dk: LaunchLoop(ks, plans.HarnessRuntime(ks, m_one, "alternate")) for dk, ks in one.items()}
    _check(loops, lambda dk, x: plans.run_kernel_set(two[dk], m_two, [x]))


def test_one_launch_equals_two_launches_opencl_pocl(ocl):
    from querycompute.backends.opencl.opencl import OpenCLRuntime
    from querycompute.backends.opencl.opencl_device import cached_program
    dev = ocl.require_device()
    dtypes = tuple(d for d in DTYPES if d != "float64" or dev.has_fp64)
    one, two = render_both("opencl", dtypes)

    def loop_of(ks, d):
        program, _ = cached_program(dev, ks.source, ks.options, [k.name for k in ks.kernels], [d])
        return LaunchLoop(ks, OpenCLRuntime(dev, program))
    two_loops = {dk: loop_of(ks, dk[0]) for dk, ks in two.items()}
    _check({dk: loop_of(ks, dk[0]) for dk, ks in one.items()},
           lambda dk, x: two_loops[dk].run([x], [], len(x))[0])


# ---- the CUDA runtime's side, over stand-ins for CuPy (no device here: nothing is timed) ----
class _DeviceBuffer:
    """A stand-in for a cupy array: host memory at `data.ptr`; get() counts as a sync."""
    def __init__(self, host, log):
        self.host, self.log = host, log
        self.data = SimpleNamespace(ptr=host.ctypes.data)

    def __getitem__(self, key):
        return _DeviceBuffer(self.host[key], self.log)

    def get(self):
        self.log.append("get")
        return self.host.copy()


def _cupy_stand_in(log):
    def memcpy_async(dst, src, size, kind, stream):
        assert kind == 2 and stream == 77          # device to host, on the launches' stream
        ctypes.memmove(dst, src, size)
        log.append(("memcpyAsync", size))

    stream = SimpleNamespace(ptr=77, synchronize=lambda: log.append("synchronize"))

    def pinned(nbytes):
        log.append(("alloc_pinned", nbytes))
        return bytearray(nbytes)
    runtime = SimpleNamespace(memcpyAsync=memcpy_async, memcpyDeviceToHost=2)
    return SimpleNamespace(cuda=SimpleNamespace(alloc_pinned_memory=pinned, runtime=runtime,
                                                get_current_stream=lambda: stream))


def test_cuda_reads_small_results_through_pinned_memory_with_one_synchronize():
    from querycompute.backends.cuda.cuda import PINNED_READ_BYTES, CudaRuntime
    log = []
    rt = CudaRuntime(_cupy_stand_in(log), {})
    slots = np.arange(48, dtype=np.uint8)
    for _ in range(3):
        got = rt.read(_DeviceBuffer(slots, log), 40, "uint8", True)
        assert got.tolist() == list(range(40)) and not np.shares_memory(got, rt._readback)
    # one pinned block, made once; per read one async copy and one synchronize, no get()
    assert log == [("alloc_pinned", PINNED_READ_BYTES)] + [("memcpyAsync", 40), "synchronize"] * 3
    got = rt.read(_DeviceBuffer(np.arange(4, dtype=np.float64), log), 4, "float64", True)
    assert got.dtype == np.float64 and got.tolist() == [0.0, 1.0, 2.0, 3.0]
    log.clear()                                    # large results and reads that need not wait: get()
    rt.read(_DeviceBuffer(np.zeros(PINNED_READ_BYTES + 1, np.uint8), log), PINNED_READ_BYTES + 1, "uint8", True)
    rt.read(_DeviceBuffer(slots, log), 8, "uint8", False)
    assert log == ["get", "get"]


def test_cuda_launches_reuse_the_bound_argument_tuple():
    from querycompute.backends.cuda.cuda import CudaRuntime, _Kernel
    calls = []
    rt = CudaRuntime(SimpleNamespace(), {})
    kernel = _Kernel(lambda grid, block, args: calls.append(args))
    x, y = np.zeros(4), np.zeros(4)
    rt.set_args(kernel, [x, np.int64(5)])
    prepared = kernel.args
    rt.set_arg(kernel, 0, x)                        # the same input buffer: nothing is remade
    rt.launch(kernel, 1, 256)
    rt.launch(kernel, 1, 256)
    assert calls[0] is prepared and calls[1] is prepared
    rt.set_arg(kernel, 0, y)                        # another input: a new tuple, the rest kept
    rt.launch(kernel, 1, 256)
    assert calls[2] is not prepared and calls[2][0] is y and calls[2][1] == 5
