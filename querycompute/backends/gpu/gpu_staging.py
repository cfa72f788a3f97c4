"""Double-buffered uploads for streamed chunks: chunk k+1's copy overlaps chunk k's kernels.

querycompute/run/streaming.py runs a query larger than the device-memory budget chunk by chunk,
each chunk a normal (synchronous) call of the launch loop. To overlap copies with kernels it
wraps each chunk's call in `prefetching(pairs)`: (this chunk's view, the next chunk's view)
of every host column. While that hint is active, a launch loop (gpu_launch.LaunchLoop) gives
each used input a `Staging`:
  1. input k of chunk c lives in one of two device buffers, "in{k}:0" / "in{k}:1", used in
     turn (`parity`): never read in place, so device memory holds two chunks whatever the
     device (this is what the budget pays for);
  2. its copy is `DeviceRuntime.stage`: issued on the runtime's copy queue / stream without
     blocking (CUDA: through a pinned host staging buffer, on a second stream; OpenCL: a
     second command queue), returning a token; `await_staged` makes the chunk's launches wait
     for those tokens (CUDA: the compute stream waits on the copy's event; OpenCL: a barrier
     with the copy events in its wait list);
  3. right after chunk c's kernels are launched, and before its results are read (which
     waits for them), the loop stages chunk c+1's views into the other buffers: that copy
     runs while chunk c's kernels do. Chunk c+1's call finds its inputs already staged
     (matched by address, shape, strides and dtype) and only waits for the copy.
No write-after-read hazard: the buffer chunk c+1 is copied into was last read by chunk c-1,
whose results were read back (so its kernels finished) before chunk c started.
A chunk whose inputs were not staged (the first, or a view the hint does not name) is staged
on the spot; results never depend on the overlap. Outside `prefetching` nothing changes.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Sequence

import numpy as np

_hint = threading.local()


def _key(x) -> tuple | None:
    """Identity of a host view: its address, shape, strides and dtype (None for non-numpy)."""
    if type(x) is not np.ndarray:
        return None
    return (x.__array_interface__["data"][0], x.shape, x.strides, x.dtype.str)


@contextmanager
def prefetching(pairs: Sequence[tuple[np.ndarray, np.ndarray | None]]):
    """While active (this thread), launch loops double-buffer their inputs and copy the next
    chunk's view of an input (the second of its pair; None: this is the last chunk) during
    this chunk's kernels."""
    old = getattr(_hint, "pairs", None)
    _hint.pairs = {_key(cur): nxt for cur, nxt in pairs}
    try:
        yield
    finally:
        _hint.pairs = old


def active() -> bool:
    return getattr(_hint, "pairs", None) is not None


class Staging:
    """One launch loop's two buffers per input, the copies staged ahead and the copies this
    call's launches wait for."""

    def __init__(self, loop):
        self.loop = loop
        self.parity: dict[int, int] = {}          # input -> which buffer its next copy goes to
        self.ready: dict[int, tuple] = {}         # input -> (view key, buffer, token) staged ahead
        self.waits: list[Any] = []                # tokens this call's launches wait for

    def _buffer(self, k: int, host: np.ndarray):
        p = self.parity.get(k, 0)
        self.parity[k] = 1 - p
        return self.loop.buffer(f"in{k}:{p}", len(host), host.dtype)

    def input_buffer(self, k: int, host: np.ndarray):
        """The buffer input k (host view `host`, non-empty) is read through in this call."""
        have = self.ready.pop(k, None)
        if have is not None and have[0] == _key(host):
            buf, token = have[1], have[2]
        else:                                    # not staged ahead: copy it now
            buf = self._buffer(k, host)
            token = self.loop.rt.stage(buf, host)
        self.waits.append(token)
        return buf

    def before_launches(self) -> None:
        """Make the launches that follow wait for this call's copies."""
        waits, self.waits = self.waits, []
        self.loop.rt.await_staged(waits)

    def prefetch(self, inputs: Sequence[Any], used) -> None:
        """Stage the next chunk's view of every used input (after this call's launches)."""
        pairs = getattr(_hint, "pairs", None) or {}
        self.ready.clear()
        rt = self.loop.rt
        for k, x in enumerate(inputs):
            if used is not None and k not in used:
                continue
            nxt = pairs.get(_key(x))
            if nxt is None or not len(nxt):
                continue
            host, _ = rt.view(nxt)
            buf = self._buffer(k, host)
            self.ready[k] = (_key(host), buf, rt.stage(buf, host))
