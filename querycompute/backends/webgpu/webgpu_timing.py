"""How long each webgpu kernel ran (`KernelRun.elapsed_ms` in qc.last_trace()).

With the adapter feature `timestamp-query` (requested when the device opens; lavapipe,
Vulkan, Metal and D3D12 adapters have it) every compute pass writes a timestamp at its
beginning and end into a slot of one query set per device, resolved in the same command
buffer into a buffer kept on the device; `elapsed_ms` reads the slot only when a trace row
is asked for, so the launches never wait. The slots form a ring of RING launches: a token
whose slot was reused since (a trace read after more than RING later launches) reads NaN,
never another kernel's time.

Without the feature, each launch is timed on the host: wall-clock from submit until the
queue reports the work done. That waits after every launch (the kernels no longer overlap
the host's next submit), so it is an upper bound and costs throughput; documented in
docs/backends.md.
"""
from __future__ import annotations

import time

import numpy as np

RING = 1024                  # launches whose timestamps are kept
_ALIGN = 256                 # resolve_query_set's destination offset alignment


class TimestampTimer:
    """The device's ring of timestamp slots (callers hold the device's lock)."""

    def __init__(self, dev):
        usage = dev.wgpu.BufferUsage
        self.dev = dev
        self.queries = dev.device.create_query_set(type="timestamp", count=2 * RING)
        self.resolved = dev.device.create_buffer(size=RING * _ALIGN, usage=usage.QUERY_RESOLVE | usage.COPY_SRC)
        self.launches = 0    # launches timed so far: slot = launches % RING

    def begin(self) -> tuple[dict, tuple]:
        """(the compute pass's timestamp_writes, the token of this launch)."""
        slot = self.launches % RING
        self.launches += 1
        writes = {"query_set": self.queries, "beginning_of_pass_write_index": 2 * slot,
                  "end_of_pass_write_index": 2 * slot + 1}
        return writes, (self, slot, self.launches)

    def end(self, encoder, token) -> None:
        """Resolve the launch's two timestamps (after its pass ended, same encoder)."""
        slot = token[1]
        encoder.resolve_query_set(self.queries, 2 * slot, 2, self.resolved, slot * _ALIGN)

    def elapsed_ms(self, token) -> float:
        _, slot, launch = token
        with self.dev.lock:
            if self.launches - launch >= RING:      # the slot holds a later launch's times
                return float("nan")
            raw = self.dev.queue.read_buffer(self.resolved, slot * _ALIGN, 16)
        start, end = np.frombuffer(raw, np.uint64)
        return float(int(end) - int(start)) / 1e6 if end >= start else 0.0


def timer(dev) -> TimestampTimer | None:
    """The device's timestamp timer, or None without `timestamp-query` (then `submit`
    times each launch on the host). Called under the device's lock."""
    if dev.timer is None:
        dev.timer = TimestampTimer(dev) if "timestamp-query" in dev.device.features else False
    return dev.timer or None


def submit(dev, encoder_of) -> object:
    """Record and submit one launch; `encoder_of(timestamp_writes)` returns the command
    encoder with the compute pass recorded (ended). -> the launch's timing token."""
    t = timer(dev)
    if t is not None:
        writes, token = t.begin()
        encoder = encoder_of(writes)
        t.end(encoder, token)
        dev.queue.submit([encoder.finish()])
        return token
    encoder = encoder_of(None)
    t0 = time.perf_counter()
    dev.queue.submit([encoder.finish()])
    dev.queue.on_submitted_work_done_sync()
    return (time.perf_counter() - t0) * 1e3


def elapsed_ms(token) -> float:
    if isinstance(token, float):
        return token
    return token[0].elapsed_ms(token) if token else 0.0
