"""The launch loop every GPU runtime shares (querycompute/backends/gpu/gpu_launch.py), run on real
runtimes: the CPU harness running CUDA kernel sets (tests/harness/plans.py HarnessRuntime)
and pocl's OpenCL device. `recording(runtime class)` makes a subclass that logs each call
the loop makes and then passes it on, so the kernels really run (results are compared with
NumPy) while the log shows what the loop allocated, uploaded, bound and launched."""
from __future__ import annotations

import numpy as np
import pytest

from querycompute._codegen import gpu
from querycompute._codegen import launch as L
from querycompute._codegen.ir import program as P
from querycompute.backends.gpu.gpu_launch import GpuPrepared, LaunchLoop

import gpu_passes as G
from harness import plans, runner
from harness.passes import assert_same, data, expected, passes

needs_harness = pytest.mark.skipif(not runner.available()[0], reason=runner.available()[1])
KINDS = ("map", "where", "reduce_filtered", "reduce_plain")


def recording(base):
    class Recording(base):
        """`base`, with a log of the loop's calls: ("alloc", size), ("upload", size),
        ("set_args", kernel), ("set_arg", kernel, position), ("launch", kernel, grid, block)."""
        def __init__(self, *args, **kw):
            super().__init__(*args, **kw)
            self.log, self._names = [], {}

        def take(self) -> list:
            log, self.log = self.log, []
            return log

        def kernel(self, spec):
            k = super().kernel(spec)
            self._names[id(k)] = spec.name
            return k

        def alloc(self, size, dtype):
            self.log.append(("alloc", size))
            return super().alloc(size, dtype)

        def upload(self, buf, host):
            self.log.append(("upload", len(host)))
            super().upload(buf, host)

        def set_args(self, kernel, args):
            self.log.append(("set_args", self._names[id(kernel)]))
            super().set_args(kernel, args)

        def set_arg(self, kernel, pos, value):
            self.log.append(("set_arg", self._names[id(kernel)], pos))
            super().set_arg(kernel, pos, value)

        def launch(self, kernel, grid, block):
            self.log.append(("launch", self._names[id(kernel)], grid, block))
            return super().launch(kernel, grid, block)
    return Recording


Harness = recording(plans.HarnessRuntime)


class CopyingHarness(Harness):
    """The harness driven like a GPU that needs its inputs copied into device buffers."""
    def in_place(self, x):
        return None


class ResidentHarness(Harness):
    """The harness driven like CUDA with cupy inputs: ToArray results stay "on the device",
    handed over as views of the output buffers themselves."""
    def keeps_results(self, inputs):
        return True

    def hand_over(self, buf, count, dtype=""):
        return buf[:count]


_sets: dict = {}


def kernel_sets():
    """name -> cuda KernelSet, all compiled in one g++ run: the four shapes of harness.passes
    (int32), and filter passes with a parameter (compaction on float32, reduction on int32)."""
    if not _sets:
        sets = {kind: gpu.render(p, "cuda") for kind, p in passes("int32").items()}
        sets["filter_f32"] = gpu.render(P.Pass(G.filter_program("float32"), P.ToArray(), "lp_filter_f32"), "cuda")
        sets["reduce_param"] = gpu.render(P.Pass(G.filter_program("int32"), P.Reduce(G.reduce_aggs("int32")),
                                                 "lp_reduce_i32"), "cuda")
        _sets.update(sets=sets, module=plans.module_for(list(sets.values())))
    return _sets["sets"], _sets["module"]


def loop_for(name: str, runtime=Harness):
    sets, module = kernel_sets()
    ks = sets[name]
    return ks, LaunchLoop(ks, runtime(ks, module, "free"))


def launches(log) -> list:
    return [entry[1:] for entry in log if entry[0] == "launch"]


def planned(ks, n, contiguous=True) -> list:
    return [(l.name, l.grid, l.block) for l in L.plan(ks, n, contiguous)]


def several_blocks(ks) -> int:
    return 3 * ks.block * ks.elems_per_thread + 5


def filtered(x, lo):
    """What filter_program's ToArray returns: (x, index, x + x) where x > lo."""
    keep = np.flatnonzero(x > lo)
    return x[keep], keep.astype(np.int64), x[keep] + x[keep]


def assert_filtered(got, x, lo):
    for g, w in zip(got, filtered(x, lo)):
        np.testing.assert_array_equal(g, w)
        assert g.dtype == w.dtype


@needs_harness
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("layout", ["contiguous", "strided"])
def test_launches_follow_the_plan_for_every_kernel_shape(kind, layout):
    ks, loop = loop_for(kind)
    n = several_blocks(ks)
    base = data("int32", 2 * n, seed=5)
    x = base[:n] if layout == "contiguous" else base[::2]
    got, done, tokens = loop.run([x], [], n)
    assert_same(kind, "int32", got, expected(kind, "int32", x))
    want = planned(ks, n, layout == "contiguous")
    assert launches(loop.rt.take()) == want and [l.name for l in done] == [w[0] for w in want]
    assert len(tokens) == len(want)


@needs_harness
@pytest.mark.parametrize("kind", KINDS)
def test_buffers_are_reused_while_their_size_is(kind):
    """Outputs and scratch are allocated once per size; going back and forth between two n
    allocates only the buffers whose size differs, and stale contents never leak."""
    ks, loop = loop_for(kind, CopyingHarness)
    big, small = several_blocks(ks), ks.block + 1

    def sizes(n):
        return L.output_sizes(ks, n) + list(L.scratch_sizes(ks, n).values())

    changed = sum(a != b for a, b in zip(sizes(big), sizes(small)))
    buffers = len(sizes(big))
    if ks.shape == "reduce" and loop.rt.slot_align():     # the result slots share one buffer
        buffers -= len(ks.outputs) - 1
    for n, seed, allocs in [(big, 1, buffers + 1), (big, 2, 0), (small, 3, changed + 1),
                            (big, 4, changed + 1), (big, 5, 0)]:
        x = data("int32", n, seed)
        assert_same(kind, "int32", loop.run([x], [], n)[0], expected(kind, "int32", x))
        log = loop.rt.take()
        assert sum(e[0] == "alloc" for e in log) == allocs, (n, log)      # (+1: the input copy)
        # a zeroed scratch buffer (a one-launch reduction's ticket) is cleared when allocated
        zeroed = [("upload", 1)] * sum(b.zeroed for b in ks.scratch) if seed == 1 else []
        assert [e for e in log if e[0] == "upload"] == [("upload", n)] + zeroed


@needs_harness
def test_arguments_are_rebound_only_when_something_changed():
    """All arguments are bound when n, the strides or a parameter's bits changed since the
    kernel's last launch; otherwise only the input buffers are."""
    ks, loop = loop_for("filter_f32")
    n = several_blocks(ks)
    rng = np.random.default_rng(7)
    a, b = rng.normal(size=n).astype(np.float32), rng.normal(size=n).astype(np.float32)
    c = np.concatenate([a, b])
    a[:3] = 0.0
    kernels = [name for name, _, _ in planned(ks, n)]
    input_pos = {k.name: [j for j, arg in enumerate(k.args) if arg.kind == "input"] for k in ks.kernels}
    all_args = [("set_args", k) for k in kernels]
    inputs_only = [("set_arg", k, j) for k in kernels for j in input_pos[k]]
    for x, lo, want in [(a, 0.0, all_args), (b, 0.0, inputs_only), (a, 0.0, inputs_only),
                        (a, -0.0, all_args),                  # -0.0 is another parameter
                        (a, 0.5, all_args), (b, 0.5, inputs_only),
                        (c[:n], 0.5, inputs_only),            # another array, same shape
                        (c[::2], 0.5, None),                  # strided: other kernels
                        (c[:n - 1], 0.5, None),               # another n
                        (a, 0.5, all_args)]:
        got = loop.run([x], [np.float32(lo)], len(x))[0]
        assert_filtered(got, x, np.float32(lo))
        log = loop.rt.take()
        binds = [e for e in log if e[0] in ("set_args", "set_arg")]
        if want is None:
            want = [("set_args", name) for name, _, _ in planned(ks, len(x), x.strides[0] == 4)]
        assert binds == want, (lo, log)


@needs_harness
def test_reduce_parameters_rebind_and_results_decode():
    ks, loop = loop_for("reduce_param")
    n = several_blocks(ks)
    x = data("int32", n, seed=9)
    for lo in (0, 0, 5, -1000, 5):
        got = loop.run([x], [np.int32(lo)], n)[0]
        kept = x[x > lo]
        total, count, (first, values) = got[0], got[1], got[2]
        assert (total, count) == (kept.astype(np.int64).sum(), len(kept))
        assert first == (int(np.argmax(x > lo)) if len(kept) else -1)
        if len(kept):
            assert values[0] == x[first]
    log = loop.rt.take()
    assert [e[0] for e in log].count("set_args") == 4 * len(planned(ks, n))    # lo: 0, 5, -1000, 5


@needs_harness
@pytest.mark.parametrize("kind", ["map", "where"])
def test_results_left_on_the_device_are_not_overwritten_by_the_next_call(kind):
    """A runtime that hands its output buffers over (CUDA with cupy inputs) gets new ones for
    the next call, and every kernel is rebound to them."""
    ks, loop = loop_for(kind, ResidentHarness)
    n = several_blocks(ks)
    x1, x2 = data("int32", n, seed=1), data("int32", n, seed=2)
    first = loop.run([x1], [], n)[0]
    loop.rt.take()
    second = loop.run([x2], [], n)[0]
    log = loop.rt.take()
    assert_same(kind, "int32", first, expected(kind, "int32", x1))
    assert_same(kind, "int32", second, expected(kind, "int32", x2))
    assert sum(e[0] == "alloc" for e in log) == len(ks.outputs)
    assert [e for e in log if e[0] == "set_args"] == [("set_args", name) for name, _, _ in planned(ks, n)]


@needs_harness
@pytest.mark.parametrize("kind", KINDS)
def test_empty_input(kind):
    """n = 0: nothing launched for ToArray (empty results); a reduction still launches (grid
    1) so the identities come from the kernels."""
    ks, loop = loop_for(kind)
    x = np.empty(0, np.int32)
    got = loop.run([x], [], 0)[0]
    assert_same(kind, "int32", got, expected(kind, "int32", x))
    assert launches(loop.rt.take()) == planned(ks, 0)


class TimedHarness(Harness):
    """Launch tokens are numbered; elapsed_ms says which it was asked for."""
    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.count, self.asked = 0, []

    def launch(self, kernel, grid, block):
        super().launch(kernel, grid, block)
        self.count += 1
        return self.count

    def elapsed_ms(self, token):
        self.asked.append(token)
        return float(token)


class HarnessPrepared(GpuPrepared):
    dialect = "cuda"

    def __init__(self, ks, module):
        super().__init__(ks, "compiled", 12.5)
        self._loop = LaunchLoop(ks, TimedHarness(ks, module, "free"))

    def loop(self):
        return self._loop


@needs_harness
def test_trace_rows_are_made_only_when_asked():
    sets, module = kernel_sets()
    ks = sets["where"]
    prep = HarnessPrepared(ks, module)
    n = several_blocks(ks)
    x = data("int32", n, seed=3)
    raw1, row1 = prep.run_quick([x], [], n)
    raw2, row2 = prep.run_quick([x], [], n)
    assert prep.loop().rt.asked == []
    assert_same("where", "int32", raw2, expected("where", "int32", x))
    rows1, rows2 = prep.trace_rows(row1), prep.trace_rows(row2)
    want = planned(ks, n)
    assert [(r.name, r.grid, r.block) for r in rows1] == [(name, (g,), (b,)) for name, g, b in want]
    assert [r.cache for r in rows1] == ["compiled"] * len(want) and [r.cache for r in rows2] == ["memory"] * len(want)
    assert [r.compile_ms for r in rows1] == [12.5] + [0.0] * (len(want) - 1)
    assert [r.run_ms for r in rows1 + rows2] == [float(t) for t in range(1, 2 * len(want) + 1)]
    assert all(r.dialect == "cuda" for r in rows1)


def test_opencl_runs_the_shared_loop(ocl):
    """The opencl backend's Prepared is the shared loop on an OpenCL runtime: on pocl inputs are
    read in place (no upload), a warm call rebinds only the inputs, launches follow the plan."""
    from querycompute.backends.opencl.opencl import OpenCLRuntime
    prep = ocl.prepare(P.Pass(G.filter_program("int32"), P.ToArray(), "lp_ocl_filter"))
    assert isinstance(prep.loop().rt, OpenCLRuntime)
    ks = prep.ks
    loop = LaunchLoop(ks, recording(OpenCLRuntime)(prep.dev, prep.program))
    n = 5000
    x = data("int32", n, seed=4)
    for lo in (0, 0, 100):
        assert_filtered(loop.run([x], [np.int32(lo)], n)[0], x, lo)
    log = loop.rt.take()
    assert launches(log) == planned(ks, n) * 3
    assert not any(e[0] == "upload" for e in log) and prep.dev.zero_copy
    kernels = [name for name, _, _ in planned(ks, n)]
    all_args = [("set_args", k) for k in kernels]
    inputs_only = [("set_arg", k.name, j) for k in ks.kernels if k.name in kernels
                   for j, a in enumerate(k.args) if a.kind == "input"]
    assert [e for e in log if e[0].startswith("set_arg")] == all_args + inputs_only + all_args
