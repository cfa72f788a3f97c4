"""The one launch loop every GPU runtime runs for a pass, and the interface a runtime implements.

Kernels, buffers and launch shapes come from _codegen.launch (`KernelSet`, `plan`, `bind`);
a runtime never invents shapes of its own. For one call, `LaunchLoop.run`
  1. turns each input some kernel loads (`used_inputs`: an input no kernel reads is never
     copied; a 1-element stand-in is bound) into what the kernels read
     (`DeviceRuntime.view`: the array, or the memory span a strided view covers plus its
     element stride),
  2. gives each used input a device buffer: read in place when the runtime can (`in_place`),
     else uploaded into a buffer reused per size; while a query streams chunk by chunk, two
     buffers in turn, the next chunk's copy issued during this chunk's kernels
     (gpu_staging.py),
  3. takes the launch plan and the output and scratch buffers for (n, contiguity): the
     previous call's when those are unchanged; buffers are reused while their size is.
     Contiguous: every used input unit-strided and aligned for wide loads (`vector_aligned`),
  4. binds the arguments of each kernel (all of them only when the call shape, the strides
     or the parameter bits changed since that kernel was last bound, else just the inputs:
     binding costs as much as a small kernel on some drivers) and launches the kernels in
     plan order,
  5. reads the results back; reduce slots (views into one buffer where the runtime has
     `slot_view`: one copy back for all of them) are decoded by the reduce op
     (ops.reduce.decode).
The timing token each launch returns becomes milliseconds only when a trace row is asked
for (`GpuPrepared.trace_rows`); a launch is made measurable (`timed_launch`: CUDA's two
events) only with QUERYCOMPUTE_KERNEL_TIMES=1 (`kernel_times`).

Runtimes: opencl.OpenCLRuntime, cuda.CudaRuntime and the CPU test harness
(tests/harness/plans.py), so the harness runs CUDA and Metal kernel sets through this very
loop. Adding a runtime means one DeviceRuntime subclass and a GpuPrepared that builds the
loop for it.
"""
from __future__ import annotations

import threading
from typing import Any, Sequence

import numpy as np

from querycompute._codegen import launch as L
from querycompute._codegen.ops import reduce as reduce_op

from ..base import KernelRun, Prepared
from . import gpu_elements, gpu_staging


def strided_span(x: np.ndarray, max_step: float) -> tuple[np.ndarray, int]:
    """(host array holding the elements a kernel reads, element stride to pass) for a 1-D
    numpy input: the input when contiguous; for a positive stride of at most `max_step`
    elements, the memory span it covers (the kernel gathers); else a contiguous copy."""
    if x.flags.c_contiguous or len(x) <= 1:
        return np.ascontiguousarray(x), 1
    item = x.dtype.itemsize
    step, rem = divmod(x.strides[0], item)
    if rem == 0 and 0 < step <= max_step:
        span = np.lib.stride_tricks.as_strided(x, shape=((len(x) - 1) * step + 1,), strides=(item,))
        return span, step
    return np.ascontiguousarray(x), 1


def used_inputs(ks: L.KernelSet) -> frozenset | None:
    """Numbers of the inputs some kernel of `ks` loads (from KernelSpec.reads, the kernel IR's
    loads), or None when the set does not say (kernel sets not made by gpu.render)."""
    if not any(k.reads for k in ks.kernels):
        return None
    return frozenset(a.index for k in ks.kernels for a in k.args if a.kind == "input" and a.name in k.reads)


class DeviceRuntime:
    """What one GPU runtime, on one device, supplies to the launch loop. Buffers, kernels and
    timing tokens are the runtime's own objects; the loop only passes them back."""

    def view(self, x) -> tuple[Any, int]:
        """(array the kernels read through element 0, element stride) for one 1-D input."""
        raise NotImplementedError

    def in_place(self, x) -> Any | None:
        """A buffer through which kernels read the non-empty view `x` without a copy, or None
        (then `x` is uploaded into a buffer of the loop's)."""
        return None

    def vector_aligned(self, buf) -> bool:
        """Whether the contiguous kernels may read input buffer `buf` with wide loads: they
        need it 16-byte aligned in CUDA and Metal (_codegen/lower/vector.py); an unaligned
        unit-stride input (a view like x[1:]) takes the strided variant with stride 1."""
        return True

    def resident_blocks(self, kernel, block: int) -> int | None:
        """How many blocks of `block` threads of `kernel` (this runtime's object) the device
        runs at once: occupancy x multiprocessors. A reduction's stage 1 launches at most that
        many (launch.plan's `resident`; the results do not change). None: the plan's grid."""
        return None

    def alloc(self, size: int, dtype: str) -> Any:
        """A device buffer of `size` (maybe 0) elements of `dtype`, 16-byte aligned at least
        (the contiguous kernels' wide stores into outputs need it: _codegen/lower/vector.py)."""
        raise NotImplementedError

    def upload(self, buf, host) -> None:
        """Copy `host` into `buf`; may return early, as long as later launches see the data."""
        raise NotImplementedError

    def slot_align(self) -> int:
        """Byte alignment of a view into a buffer (`slot_view`), 0 if the runtime has none: then
        each result slot of a reduction is a buffer of its own, read back one by one."""
        return 0

    def slot_view(self, buf, offset: int, dtype: str) -> Any:
        """One element of `dtype` at byte `offset` (a multiple of slot_align) of uint8 `buf`,
        as a buffer kernels write through."""
        raise NotImplementedError

    def kernel(self, spec: L.KernelSpec) -> Any:
        """The runtime's object for kernel `spec` (it keeps the arguments bound to it)."""
        raise NotImplementedError

    def set_args(self, kernel, args: Sequence) -> None:
        """Bind every argument (values from launch.bind, in KernelSpec.args order)."""
        raise NotImplementedError

    def set_arg(self, kernel, pos: int, value) -> None:
        """Rebind argument `pos` only (the others stay as last bound)."""
        raise NotImplementedError

    def launch(self, kernel, grid: int, block: int) -> Any:
        """Launch `grid` blocks of `block` threads with the bound arguments, after everything
        launched before; -> a token for `elapsed_ms` if the runtime gets one for free (an
        OpenCL event), else None (the loop calls `timed_launch` when times are wanted)."""
        raise NotImplementedError

    def timed_launch(self, kernel, grid: int, block: int) -> Any:
        """`launch`, made measurable: -> a token `elapsed_ms` turns into the kernel's run time.
        Only called with QUERYCOMPUTE_KERNEL_TIMES=1 (`kernel_times`): CUDA records two events
        per timed launch, which costs as much as a small kernel."""
        return self.launch(kernel, grid, block)

    def stage(self, buf, host) -> Any:
        """Start copying `host` into `buf` without blocking, on a copy queue beside the
        launches (streamed chunks: gpu_staging.py) -> a token for `await_staged`."""
        self.upload(buf, host)
        return None

    def await_staged(self, tokens: Sequence) -> None:
        """Make every later launch wait for the copies `stage` returned `tokens` for."""

    def read(self, buf, count: int, dtype: str, wait: bool):
        """A new host array of `buf`'s first `count` (> 0) elements. With wait=False the copy
        may still be running on return; a later wait=True read finishes it and everything
        launched before it."""
        raise NotImplementedError

    def finish(self) -> None:
        """Wait for everything launched (when no read did)."""

    device_columns = False      # whether a staged plan's columns may stay on this device
                                # (LaunchLoop.keep; backends/device_columns.py)

    def keeps_results(self, inputs: Sequence) -> bool:
        """Whether ToArray results stay on the device for these inputs (see `hand_over`)."""
        return False

    def hand_over(self, buf, count: int, dtype: str = ""):
        """`buf`'s first `count` elements as a device array that now belongs to the caller
        (the loop allocates a new output buffer for the next call)."""
        raise NotImplementedError

    def elapsed_ms(self, token) -> float:
        """How long the launch that returned `token` ran (called after the run, lazily); a
        runtime whose untimed launches return None answers NaN for them (CUDA)."""
        return 0.0


def kernel_times() -> bool:
    """Whether launches are timed for qc.last_trace() (QUERYCOMPUTE_KERNEL_TIMES=1; read per
    call, so a process may switch it between calls)."""
    from querycompute import config
    return config.get("QUERYCOMPUTE_KERNEL_TIMES")


def _bits_key(values) -> tuple:
    """Scalars by type and bits, so 0.0 and -0.0 (or two NaN payloads) never look equal."""
    return tuple((type(v), np.asarray(v).tobytes()) for v in values)


class _CallShape:
    """The launches and the output / scratch buffers for one (n, contiguity)."""
    __slots__ = ("launches", "out_sizes", "out_bufs", "scratch")

    def __init__(self, launches, out_sizes, out_bufs, scratch):
        self.launches, self.out_sizes, self.out_bufs, self.scratch = launches, out_sizes, out_bufs, scratch


class LaunchLoop:
    """One KernelSet on one runtime: the buffers, call shape and bound arguments it keeps
    between calls. Not thread-safe: its owner runs one call at a time (GpuPrepared's lock)."""

    def __init__(self, ks: L.KernelSet, rt: DeviceRuntime):
        self.ks, self.rt = ks, rt
        self.kernels = {k.name: rt.kernel(k) for k in ks.kernels}
        # (argument position, input number) of each kernel's inputs: rebound on every call,
        # because inputs read in place are new buffers every call
        self._input_pos = {k.name: tuple((j, a.index) for j, a in enumerate(k.args) if a.kind == "input")
                           for k in ks.kernels}
        self._bound: dict[str, tuple] = {}            # kernel -> (call shape, strides, params) last bound
        self._buffers: dict[str, tuple] = {}          # role -> (size, dtype, buffer)
        self._shape: tuple[tuple, _CallShape] | None = None
        self._total = next((b.dtype for b in ks.scratch if b.name == "total"), "int64")
        # physical grid caps of the kernels that loop over logical blocks (asked once)
        self._resident = {k.name: rt.resident_blocks(self.kernels[k.name], ks.block)
                          for k in ks.kernels if k.grid == "reduce"}
        self.used = used_inputs(ks)
        self._staging = gpu_staging.Staging(self)     # double buffers while a query streams
        self._slots = None            # a reduction's (buffer, bytes, offsets) of its packed slots
        # results stay on the device (a staged plan's columns between stages) when the
        # runtime has device columns; the caller sets it around a call
        self.keep = False

    def buffer(self, role: str, size: int, dtype, zeroed: bool = False) -> Any:
        """The buffer kept for `role`, allocated anew when its size or dtype changed (then
        filled with zeros when `zeroed`: a counter the kernels leave at zero, BufferSpec)."""
        have = self._buffers.get(role)
        if have is None or have[0] != size or have[1] != dtype:
            have = self._buffers[role] = (size, dtype, self.rt.alloc(size, dtype))
            if zeroed:
                self.rt.upload(have[2], np.zeros(size, dtype))
        return have[2]

    def input_buffer(self, k: int, host) -> Any:
        """The buffer input k is read through: `host` in place when the runtime can, else a
        copy of it in a buffer reused per size."""
        size = len(host)
        if size:
            buf = self.rt.in_place(host)
            if buf is not None:
                return buf
        buf = self.buffer(f"in{k}", size, host.dtype)
        if size:
            self.rt.upload(buf, host)
        return buf

    def call_shape(self, n: int, contiguous: bool, params: Sequence[Any] = ()) -> _CallShape:
        """`params` matter only to a compaction with a window: its outputs' size."""
        ks = self.ks
        key = (n, contiguous, ks.window and L.window_length(ks, n, params))
        if self._shape is None or self._shape[0] != key:
            out_sizes = L.output_sizes(ks, n, params)
            out_bufs = self._slot_buffers() if ks.shape == "reduce" else None
            out_bufs = out_bufs or [self.buffer(f"out{k}", size, b.dtype)
                                    for k, (b, size) in enumerate(zip(ks.outputs, out_sizes))]
            sizes = L.scratch_sizes(ks, n)
            scratch = {b.name: self.buffer(f"scratch:{b.name}", sizes[b.name], b.dtype, b.zeroed) for b in ks.scratch}
            launches = L.plan(ks, n, contiguous, self._resident)
            self._shape = (key, _CallShape(launches, out_sizes, out_bufs, scratch))
        return self._shape[1]

    def _slot_buffers(self) -> list | None:
        """A reduction's result slots as views into one buffer, so that one device->host copy
        reads them all (`DeviceRuntime.slot_view`); None where the runtime can't view."""
        align, specs = self.rt.slot_align(), self.ks.outputs
        if not align or not specs:
            return None
        offsets, at = [], 0
        for b in specs:
            at = -(-at // align) * align
            offsets.append(at)
            at += np.dtype(b.dtype).itemsize
        whole = self.buffer("slots", at, "uint8")
        self._slots = (whole, at, offsets)
        return [self.rt.slot_view(whole, off, b.dtype) for off, b in zip(offsets, specs)]

    def run(self, inputs: Sequence[Any], params: Sequence[Any], n: int) -> tuple:
        """-> (raw results as backends/base.py describes them, the launches, their tokens)."""
        rt = self.rt
        used = self.used
        if n == 0 and self.ks.shape != "reduce":      # a ToArray pass: nothing to launch
            return self._empty(inputs), (), ()
        # a streamed chunk (streaming.py) copies its inputs into two alternating buffers
        staging = self._staging if gpu_staging.active() else None
        fill = staging.input_buffer if staging is not None else self.input_buffer
        # arrays of shaped elements read whole when element-contiguous (gpu_elements.py)
        whole = gpu_elements.whole_arrays(self.ks, inputs) if self.ks.elements else None
        views, in_bufs, contiguous = self._bind_inputs(inputs, used, fill, whole)
        strides = tuple(step for _, step in views)
        shape = self.call_shape(n, contiguous, params)
        launches = shape.launches
        if not launches:
            return self._empty(inputs), (), ()
        key = (shape, strides, _bits_key(params))
        bound, tokens = self._bound, []
        if staging is not None:
            staging.before_launches()
        # two CUDA events per launch cost as much as a small kernel: only when times are wanted
        start = rt.timed_launch if kernel_times() else rt.launch
        for launch in launches:
            name = launch.kernel.name
            kernel = self.kernels[name]
            # a multi-pass shape launches one kernel with several "value" sets (launch.Step)
            lkey = (key, tuple(launch.values.items())) if launch.values else key
            if bound.get(name) != lkey:
                rt.set_args(kernel, L.bind(launch, in_bufs, strides, params, n, shape.out_bufs, shape.scratch))
                bound[name] = lkey
            else:
                for pos, k in self._input_pos[name]:
                    rt.set_arg(kernel, pos, in_bufs[k])
            tokens.append(start(kernel, launch.grid, launch.block))
        if staging is not None:          # the next chunk's copy runs during these kernels
            staging.prefetch(inputs, used)
        return self._results(shape, inputs), launches, tokens

    def _bind_inputs(self, inputs, used, fill, whole) -> tuple[list, list, bool]:
        """(views, buffers, contiguous) of the inputs; `whole`: first input -> (span, m) of the
        element arrays read whole (their other components are not bound: stand-ins)."""
        rt = self.rt
        # an input no kernel reads is neither viewed nor copied: a 1-element stand-in is bound
        parts = {k0 + j for k0, (_, m) in (whole or {}).items() for j in range(m)}
        views = [rt.view(x) if (used is None or k in used) and k not in parts else (None, 1)
                 for k, x in enumerate(inputs)]
        if whole and any(host is not None and step != 1 for host, step in views):
            return self._bind_inputs(inputs, used, fill, None)     # a gathered column: all gathered
        for k0, (span, m) in (whole or {}).items():
            if used is None or k0 in used:
                views[k0] = (span, 1)
        in_bufs = [(fill(k, host) if len(host) else self.input_buffer(k, host)) if host is not None
                   else self.buffer(f"unused{k}", 1, inputs[k].dtype)
                   for k, (host, _) in enumerate(views)]
        # the variant follows the used inputs only (an unused strided column changes nothing)
        contiguous = all(step == 1 and rt.vector_aligned(b)
                         for k, ((host, step), b) in enumerate(zip(views, in_bufs)) if host is not None)
        if whole and not contiguous:          # an unaligned whole array: every column gathered
            return self._bind_inputs(inputs, used, fill, None)
        # columns not of whole elements (even unit-strided ones, n = 1) take the strided variant:
        # the contiguous one reads an array's component 0 buffer as the whole array
        return views, in_bufs, contiguous and (whole is not None or not self.ks.elements)

    def _empty(self, inputs) -> tuple:
        outs = self.ks.outputs
        if self._keeps(inputs):
            return tuple(self.rt.hand_over(self.rt.alloc(0, b.dtype), 0, b.dtype) for b in outs)
        return tuple(np.empty(0, b.dtype) for b in outs)

    def _results(self, shape: _CallShape, inputs) -> Any:
        """Read the results back. The last read waits, so every kernel (and every read of an
        input in place) has finished when this returns, unless results stay on the device."""
        ks, rt = self.ks, self.rt
        specs, bufs = ks.outputs, shape.out_bufs
        if ks.shape == "reduce" and self._slots is not None:     # one read-back for every slot
            whole, nbytes, offsets = self._slots
            raw = rt.read(whole, nbytes, "uint8", True)
            return reduce_op.decode(ks, [np.frombuffer(raw, b.dtype, 1, off)[0] for b, off in zip(specs, offsets)])
        if ks.shape == "reduce":
            last = len(bufs) - 1
            slots = [rt.read(buf, 1, b.dtype, k == last)[0] for k, (b, buf) in enumerate(zip(specs, bufs))]
            if not slots:
                rt.finish()
            return reduce_op.decode(ks, slots)
        count = shape.out_sizes[0] if shape.out_sizes else 0
        if ks.shape in L.COUNTED_SHAPES:     # results: the first `total` slots of every output
            count = int(rt.read(shape.scratch["total"], 1, self._total, True)[0])
        if self._keeps(inputs):
            outs = tuple(rt.hand_over(buf, count, b.dtype) for buf, b in zip(bufs, specs))
            self._give_away_outputs()
            return outs
        if not count or not bufs:
            if ks.shape not in L.COUNTED_SHAPES:     # nothing read that waits for the kernels
                rt.finish()
            return tuple(np.empty(0, b.dtype) for b in specs)
        last = len(bufs) - 1
        return tuple(rt.read(buf, count, b.dtype, k == last) for k, (b, buf) in enumerate(zip(specs, bufs)))

    def _keeps(self, inputs) -> bool:
        return (self.keep and self.rt.device_columns) or self.rt.keeps_results(inputs)

    def _give_away_outputs(self) -> None:
        """The output buffers now belong to the caller: the next call allocates new ones (and
        so rebinds every kernel: its call shape is new)."""
        for k in range(len(self.ks.outputs)):
            self._buffers.pop(f"out{k}", None)
        self._shape = None


class GpuPrepared(Prepared):
    """A compiled KernelSet run by the launch loop: one run at a time (the loop's buffers
    are shared), trace rows made from the launch tokens only when asked for.
    A subclass sets `dialect` and provides `loop()`, the loop of the device to run on."""
    dialect = "?"

    def __init__(self, ks: L.KernelSet, origin: str, compile_ms: float):
        self.ks, self.origin, self.compile_ms = ks, origin, compile_ms
        self._lock = threading.Lock()
        self._runs = 0

    def loop(self) -> LaunchLoop:
        raise NotImplementedError

    def run_quick(self, inputs: Sequence[Any], params: Sequence[Any], n: int, keep: bool = False) -> tuple:
        """`keep`: ToArray results stay on the device where the runtime has device columns
        (a staged plan's pass feeding a next stage)."""
        with self._lock:
            loop = self.loop()
            first = not self._runs
            self._runs += 1
            loop.keep = keep
            try:
                raw, launches, tokens = loop.run(inputs, params, n)
            finally:
                loop.keep = False
        if first:
            return raw, (loop, launches, tokens, self.origin, self.compile_ms)
        return raw, (loop, launches, tokens, "memory", 0.0)

    def trace_rows(self, row: tuple) -> list[KernelRun]:
        loop, launches, tokens, cache, compile_ms = row
        rows = []
        for launch, token in zip(launches, tokens):
            rows.append(KernelRun(launch.name, self.dialect, (launch.grid,), (launch.block,), cache,
                                  compile_ms, loop.rt.elapsed_ms(token)))
            compile_ms = 0.0                  # the program's build time is reported once
        return rows
