"""Issue 18 items 5 and 8 on the launch loop every GPU runtime shares (backends/gpu_launch.py):
  item 5: a launch is made measurable (CUDA: two events) only when kernel times are asked for
          (QUERYCOMPUTE_KERNEL_TIMES=1); the loop's choice is checked on a real LaunchLoop over
          the CPU harness running a CUDA kernel set, with a runtime that counts the two kinds of
          launch (and really runs the kernels: results are compared with NumPy);
  item 8: streamed chunks (streaming.py) go through two alternating device buffers, the next
          chunk's copy issued after this chunk's launches and before its results are read
          (backends/gpu_staging.py): on the harness, and end to end on pocl with a small
          QUERYCOMPUTE_DEVICE_MEMORY, checked against the numpy backend."""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

import querycompute as qc
from querycompute._codegen import gpu
from querycompute._codegen import launch as L
from querycompute.backends.gpu.gpu_launch import GpuPrepared, LaunchLoop
from querycompute.backends.gpu.gpu_staging import prefetching

from harness import plans, runner
from harness.passes import assert_same, data, expected, passes

needs_harness = pytest.mark.skipif(not runner.available()[0], reason=runner.available()[1])

_built: dict = {}


def where_set():
    """The `where` pass (int32) as a CUDA kernel set, compiled once for the harness."""
    if not _built:
        ks = gpu.render(passes("int32")["where"], "cuda")
        _built.update(ks=ks, module=plans.module_for([ks]))
    return _built["ks"], _built["module"]


class Counting(plans.HarnessRuntime):
    """The harness runtime, counting plain and timed launches and logging staged copies and
    reads; copies every input (like a GPU that can't read host memory in place)."""
    def __init__(self, *args):
        super().__init__(*args)
        self.plain, self.timed, self.log = 0, 0, []

    def in_place(self, x):
        return None

    def launch(self, kernel, grid, block):
        self.plain += 1
        super().launch(kernel, grid, block)

    def timed_launch(self, kernel, grid, block):
        self.timed += 1
        super().launch(kernel, grid, block)
        return self.timed

    def stage(self, buf, host):
        self.log.append(("stage", id(buf), int(host[0])))
        return super().stage(buf, host)

    def read(self, buf, count, dtype, wait):
        self.log.append(("read",))
        return super().read(buf, count, dtype, wait)

    def elapsed_ms(self, token):
        return math.nan if token is None else float(token)


class CountingPrepared(GpuPrepared):
    dialect = "cuda"

    def __init__(self, ks, module):
        super().__init__(ks, "compiled", 0.0)
        self._loop = LaunchLoop(ks, Counting(ks, module, "free"))

    def loop(self):
        return self._loop


@needs_harness
def test_item5_launches_are_timed_only_when_kernel_times_are_asked_for(monkeypatch):
    ks, module = where_set()
    prep = CountingPrepared(ks, module)
    rt = prep.loop().rt
    n = 3 * ks.block * ks.elems_per_thread + 5
    x = data("int32", n, seed=5)
    planned = len(L.plan(ks, n, True))
    monkeypatch.delenv("QUERYCOMPUTE_KERNEL_TIMES", raising=False)
    raw, row = prep.run_quick([x], [], n)
    assert_same("where", "int32", raw, expected("where", "int32", x))
    assert (rt.plain, rt.timed) == (planned, 0)
    assert all(math.isnan(r.run_ms) for r in prep.trace_rows(row))      # untimed, and says so
    monkeypatch.setenv("QUERYCOMPUTE_KERNEL_TIMES", "1")
    raw, row = prep.run_quick([x], [], n)
    assert_same("where", "int32", raw, expected("where", "int32", x))
    assert (rt.plain, rt.timed) == (planned, planned)
    assert [r.run_ms for r in prep.trace_rows(row)] == [float(t) for t in range(1, planned + 1)]


def test_item5_cuda_runtime_records_events_only_for_timed_launches():
    """CudaRuntime over a stand-in for CuPy's Event (no GPU here): a plain launch creates no
    event, a timed one two, and an untimed token reads NaN."""
    from querycompute.backends.cuda.cuda import CudaRuntime, _Kernel
    made, calls = [], []

    class Event:
        def __init__(self, *args, **kw):
            made.append(self)

        def record(self, stream=None):
            pass

    cp = SimpleNamespace(cuda=SimpleNamespace(Event=Event, get_elapsed_time=lambda a, b: 1.5))
    rt = CudaRuntime(cp, {})
    kernel = _Kernel(lambda grid, block, args: calls.append((grid, block, args)))
    rt.set_args(kernel, [1, 2])
    assert rt.launch(kernel, 4, 256) is None and not made
    token = rt.timed_launch(kernel, 4, 256)
    assert len(made) == 2 and token == tuple(made) and calls == [((4,), (256,), (1, 2))] * 2
    assert math.isnan(rt.elapsed_ms(None))


@needs_harness
def test_item8_loop_double_buffers_the_chunks_and_copies_ahead():
    """Chunks run through prefetching(): chunk j reads the buffer staged for it during chunk
    j-1 (two buffers in turn), and chunk j+1's copy is issued before chunk j's results are read."""
    ks, module = where_set()
    loop = LaunchLoop(ks, Counting(ks, module, "free"))
    rt = loop.rt
    step = ks.block * ks.elems_per_thread * 2
    x = data("int32", 4 * step + 7, seed=6)
    bounds = [(lo, min(len(x), lo + step)) for lo in range(0, len(x), step)]
    for j, (lo, hi) in enumerate(bounds):
        nxt = x[hi:bounds[j + 1][1]] if j + 1 < len(bounds) else None
        chunk = x[lo:hi]
        with prefetching([(chunk, nxt)]):
            raw = loop.run([chunk], [], hi - lo)[0]
        assert_same("where", "int32", raw, expected("where", "int32", chunk))
    stages = [e for e in rt.log if e[0] == "stage"]
    assert [first for _, _, first in stages] == [int(x[lo]) for lo, _ in bounds]   # each chunk once
    buffers = [b for _, b, _ in stages[:4]]                                       # full-size chunks
    assert buffers[0] != buffers[1] and buffers[::2] == [buffers[0]] * 2 and buffers[1::2] == [buffers[1]] * 2
    # the copy of chunk j+1 comes before the first read of chunk j
    kinds = [e[0] for e in rt.log]
    reads = [i for i, k in enumerate(kinds) if k == "read" and (i == 0 or kinds[i - 1] != "read")]
    at = [i for i, k in enumerate(kinds) if k == "stage"]
    assert all(at[j + 1] < reads[j] for j in range(len(bounds) - 1))


@pytest.fixture
def pocl(ocl, monkeypatch):
    """An OpenCL device (conftest's `ocl` skips without one) and a 1 MB device-memory budget."""
    monkeypatch.setenv("QUERYCOMPUTE_DEVICE_MEMORY", "1e6")


def test_item8_opencl_streams_through_two_alternating_buffers(pocl, monkeypatch):
    """300,001 float32 at a 1 MB budget: 5 chunks of at most 65,536. Each chunk's input is
    copied on the second queue into one of two buffers, in turn; the result equals numpy's."""
    from querycompute.backends.opencl import opencl as O
    log = []

    class Recording(O.OpenCLRuntime):
        def stage(self, buf, host):
            log.append((buf.int_ptr, len(host), float(host[0])))
            return super().stage(buf, host)
    monkeypatch.setattr(O, "OpenCLRuntime", Recording)
    x = np.random.default_rng(81).uniform(0, 10, 300_001).astype(np.float32)
    q = qc.query(x).where(lambda v: v > 7.25).select(lambda v: v * 3 - 1)   # a shape of its own
    got = q.on("opencl").to_array()
    assert qc.last_trace().chunks == 5
    np.testing.assert_array_equal(got, q.on("numpy").to_array())
    starts = range(0, len(x), 65_536)
    assert [first for _, _, first in log] == [float(x[lo]) for lo in starts]
    assert [size for _, size, _ in log] == [min(65_536, len(x) - lo) for lo in starts]
    ptrs = [p for p, _, _ in log[:4]]                       # the four full chunks
    assert ptrs[0] != ptrs[1] and ptrs == [ptrs[0], ptrs[1]] * 2
