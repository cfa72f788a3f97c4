"""Memory traffic of a KernelSet's launches: the bytes each kernel really reads and writes.

`touched(kernel)` walks a kernel's IR for the argument buffers it loads (KLoad, VecLoad) and
stores (Store, VecStore, AtomicAdd): a pass's program may carry columns nothing reads (a table's
unused field), and a compaction reads its inputs twice (count, then scatter), which a
per-pass "bytes per element" hides. `launch_traffic(ks, n)` multiplies each touched buffer's
size for n elements (launch.output_sizes / scratch_sizes; inputs have n elements) by its
element size, per launch of launch.plan. A kernel that touches a buffer is counted as
touching all of it: exact for streamed inputs, map outputs and per-block partials; an upper
bound for a compaction's outputs (only survivors are written) and for runs cut short (first,
early exit).
"""
from __future__ import annotations

from dataclasses import dataclass, fields, is_dataclass

from . import dtypes as D
from .ir import kernel_ir as K
from .launch import KernelSet, output_sizes, plan, scratch_sizes


def touched(kernel: K.Kernel) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(buffers loaded, buffers stored) among the kernel's buffer arguments, in argument order."""
    loads, stores = set(), set()

    def walk(node):
        if isinstance(node, (K.KLoad, K.VecLoad)):
            loads.add(node.buffer)
        elif isinstance(node, (K.Store, K.VecStore, K.AtomicAdd)):
            stores.add(node.buffer)
            if isinstance(node, K.AtomicAdd):
                loads.add(node.buffer)
        if isinstance(node, (tuple, list)):
            for item in node:
                walk(item)
        elif is_dataclass(node) and not isinstance(node, K.Elem):
            for f in fields(node):
                walk(getattr(node, f.name))

    walk(kernel.body)
    buffers = [a.name for a in kernel.args if a.is_buffer]
    return tuple(b for b in buffers if b in loads), tuple(b for b in buffers if b in stores)


@dataclass(frozen=True)
class LaunchTraffic:
    name: str
    read: int            # bytes
    written: int         # bytes (at most, for outputs only survivors are written to)
    inputs_read: tuple[str, ...]


def launch_traffic(ks: KernelSet, n: int, input_dtypes, params=()) -> list[LaunchTraffic]:
    """Bytes read and written by each launch of the contiguous plan for n elements."""
    sizes = {}
    whole = {buffer: m for buffer, _, m in ks.elements}     # arrays of shaped elements: m per element
    for spec in ks.kernels:
        for a in spec.args:
            if a.kind == "input":
                sizes[a.name] = n * whole.get(a.name, 1) * D.itemsize(input_dtypes[a.index])
    for b, count in zip(ks.outputs, output_sizes(ks, n, params)):   # a window needs its params
        sizes[b.name] = count * D.itemsize(b.dtype)
    for b in ks.scratch:
        sizes[b.name] = scratch_sizes(ks, n)[b.name] * D.itemsize(b.dtype)
    out = []
    for launch in plan(ks, n, True):
        spec = launch.kernel
        names = {a.name: a for a in spec.args}
        # a scratch argument's C name may differ from its buffer's (ops/compact/gpu.py's scan)
        buf = {a.name: a.scratch if a.kind == "scratch" else a.name for a in spec.args}
        read = sum(sizes.get(buf.get(b, b), 0) for b in spec.reads)
        written = sum(sizes.get(buf.get(b, b), 0) for b in spec.writes)
        ins = tuple(b for b in spec.reads if names[b].kind == "input")
        out.append(LaunchTraffic(spec.name, read, written, ins))
    return out
