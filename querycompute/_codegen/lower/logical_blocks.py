"""Grid-independent results: a kernel's blocks as *logical* blocks any physical grid runs.

A reduction's stage 1 (ops/reduce) gives each block a fixed share of the input and writes
one partial per block; which elements a block folds, in which order, depends on the number
of blocks. That number is the plan's (launch.grid_size rule "reduce": it depends only on n),
so the bits of a result never depend on the device. But the best *physical* grid does: as
many blocks as the device keeps resident at once (occupancy x multiprocessors); more
blocks than that run in waves, and a last partial wave idles most of the device.

`over_logical_blocks(kernel)` rewrites the kernel so that physical block g runs the logical
blocks g, g + gridDim, g + 2 * gridDim, ... < logical_blocks, each exactly as the plain
kernel's block of that number would (the thread coordinates group_id and num_groups read as
the logical block and the logical block count), with a barrier between two logical blocks
because they share the shared-memory arrays. `logical_blocks` is a "value" argument the
launch planner sets to the plan's grid; the runtime may launch fewer physical blocks
(launch.plan's `resident`). The partials, and so the results, are bit-identical for every
physical grid. A trailing `Epilogue` (kernel_ir.py) stays after the loop, run once per
physical block, its group_id / num_groups the physical ones (a reduction's last-block
ticket: ops/reduce/gpu.py).
"""
from __future__ import annotations

from dataclasses import fields, is_dataclass, replace

from ..ir import kernel_ir as K
from ..launch import KernelArg, KernelSpec

LOGICAL = K.KVar("logical_blocks", "int64")
BLOCK_VAR = K.KVar("lblock", "int64")
ARG = KernelArg(LOGICAL.name, "value", "int64")


def over_logical_blocks(kernel: K.Kernel, spec: KernelSpec) -> tuple[K.Kernel, KernelSpec]:
    """The kernel (and its spec, one "value" argument longer) looping over logical blocks."""
    body, tail = kernel.body, ()
    if body and isinstance(body[-1], K.Epilogue):
        body, tail = body[:-1], body[-1:]
    body = _swap(body)
    loop = K.For(BLOCK_VAR, K.KCast(K.KThread("group_id"), "int64"), K.op("<", BLOCK_VAR, LOGICAL),
                 K.op("+", BLOCK_VAR, K.KCast(K.KThread("num_groups"), "int64")),
                 (*body, K.Barrier()))     # the next logical block reuses the shared arrays
    note = K.Comment("Block g runs logical blocks g, g + gridDim, ...: results never depend on the grid.")
    return (replace(kernel, args=kernel.args + (ARG,), body=(note, loop, *tail)),
            replace(spec, args=spec.args + (ARG,)))


def _swap(node):
    """The IR with group_id / num_groups read as the logical block / logical block count."""
    if isinstance(node, K.KThread) and node.kind in ("group_id", "num_groups"):
        return BLOCK_VAR if node.kind == "group_id" else LOGICAL
    if isinstance(node, K.KCast) and isinstance(node.x, K.KThread) and node.x.kind in ("group_id", "num_groups"):
        return _swap(node.x)                   # already 64-bit
    if isinstance(node, tuple):
        return tuple(_swap(x) for x in node)
    if is_dataclass(node) and not isinstance(node, K.Elem):
        return replace(node, **{f.name: _swap(getattr(node, f.name)) for f in fields(node)})
    return node
