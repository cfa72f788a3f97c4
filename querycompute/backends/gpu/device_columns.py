"""Columns that stay on the device between the stages of a staged plan (opencl, cuda).

A staged plan (pipeline.py) hands columns from stage to stage. On a GPU backend whose runtime
says `device_columns`, the source goes to the device once (by the first pass, or by
GpuStages.to_device when a column operation comes first), a pass that feeds a next stage
leaves its outputs on the device
(gpu_launch.LaunchLoop with `keep`) and GpuStages' sort / gather / scan / first_occurrence /
group_by read and return device columns; only the plan's final result (the terminal pass's
output or reduction, a group_by's groups) is copied to the host. The host is crossed in the
middle only where no device kernel exists for an operation: a join (its probe is the host
reference). A reverse runs the reverse kernel (ops/sort/gather_gpu.py). A take / skip / skip_while window starting past 0 is a
device-to-device copy on OpenCL (a CuPy view on CUDA), never a host one; a counted
compaction reads its one-element survivor count (the next stage's length).

The column types:
    numpy arrays        host columns (the numpy / cpu backends, the CPU harness)
    CuPy arrays         CUDA device columns (cuda.CudaRuntime hands them over)
    ClColumn            an OpenCL buffer, its length and dtype (opencl.OpenCLRuntime)
The helpers below treat all three alike: length, dtype, a raw-bits view of another dtype of
the same width, a slice, and the host copy.

`TRANSFERS` counts the host <-> device traffic the OpenCL runtime does (uploads and reads,
and host arrays a zero-copy device reads in place, which are host memory handed over; the
bytes read back): tests/test_issue13_device_columns.py checks that a staged plan crosses
only at its ends.
"""
from __future__ import annotations

import numpy as np

TRANSFERS = {"to_device": 0, "to_host": 0, "to_host_bytes": 0}


class ClColumn:
    """`length` elements of `dtype` at the start of OpenCL buffer `buf` (`queue`: where
    copies of it are enqueued)."""
    __slots__ = ("buf", "length", "dtype", "queue", "cl")

    def __init__(self, cl, queue, buf, length: int, dtype):
        self.cl, self.queue, self.buf = cl, queue, buf
        self.length, self.dtype = int(length), np.dtype(dtype)

    def __len__(self) -> int:
        return self.length

    @property
    def ndim(self) -> int:
        return 1

    def view(self, dtype) -> "ClColumn":
        dtype = np.dtype(dtype)
        if dtype.itemsize != self.dtype.itemsize:
            raise TypeError(f"a device column of {self.dtype} can't be viewed as {dtype}: widths differ")
        return ClColumn(self.cl, self.queue, self.buf, self.length, dtype)

    def __getitem__(self, s) -> "ClColumn":
        if not isinstance(s, slice) or s.step not in (None, 1):
            raise TypeError("device columns take contiguous slices only (start:stop)")
        lo, hi, _ = s.indices(self.length)
        hi = max(lo, hi)
        if lo == 0:
            return ClColumn(self.cl, self.queue, self.buf, hi, self.dtype)
        # a copy on the device: OpenCL sub-buffers need aligned origins
        size = hi - lo
        item = self.dtype.itemsize
        out = self.cl.Buffer(self.buf.context, self.cl.mem_flags.READ_WRITE, max(size * item, 1))
        if size:
            self.cl.enqueue_copy(self.queue, out, self.buf, src_offset=lo * item, byte_count=size * item)
        return ClColumn(self.cl, self.queue, out, size, self.dtype)

    def get(self) -> np.ndarray:
        """The column's host copy (counted in TRANSFERS)."""
        host = np.empty(self.length, self.dtype)
        if self.length:
            TRANSFERS["to_host"] += 1
            TRANSFERS["to_host_bytes"] += host.nbytes
            self.cl.enqueue_copy(self.queue, host, self.buf, is_blocking=True)
        return host


def on_device(x) -> bool:
    return isinstance(x, ClColumn) or type(x).__module__.startswith("cupy")


def to_host(x) -> np.ndarray:
    """A host array of column x (itself when it is one)."""
    if isinstance(x, ClColumn) or type(x).__module__.startswith("cupy"):
        return x.get()
    return np.asarray(x)


def tree_to_host(raw):
    """A plan's raw result with every device column in it copied to the host: the result of
    a query over host inputs is host data, whatever stayed on the device between stages."""
    if on_device(raw):
        return to_host(raw)
    if isinstance(raw, (tuple, list)):
        return type(raw)(tree_to_host(r) for r in raw)
    return raw


def contiguous(x, dtype=None):
    """Column x contiguous (device columns are), converted to `dtype` on the host only."""
    if on_device(x):
        if dtype is not None and np.dtype(dtype) != x.dtype:
            raise TypeError(f"device column of {x.dtype} where {np.dtype(dtype)} is needed")
        return x
    return np.ascontiguousarray(x, dtype=dtype)


def bits(x, bits_dtype):
    """Column x's raw bits as `bits_dtype` (same width): a view, on the host or the device."""
    return contiguous(x).view(bits_dtype)


def reversed_column(x):
    """Column x in reverse order, a copy (CuPy reverses on the device; an OpenCL column goes
    through the host: GpuStages.reverse runs the reverse kernel instead)."""
    if on_device(x) and not isinstance(x, ClColumn):
        return x[::-1].copy()                     # CuPy reverses on the device
    return np.ascontiguousarray(to_host(x)[::-1])
