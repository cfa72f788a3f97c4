"""Inputs larger than a storage binding: one webgpu pass run over consecutive windows.

A WebGPU storage binding holds at most the adapter's `max_storage_buffer_binding_size`
(128 MiB on lavapipe and on many GPUs). A pass whose buffers for n elements would exceed it
runs over windows [lo, hi) of its input columns instead: every window is an ordinary call of
the same compiled kernels on the columns' views `col[lo:hi]` (one kernel set and one set of
buffers serve every full window), and the windows' results combine on the host, in window
order, as the blocks of one reduction would, with the rules of _codegen/combine.py
(combine_raw: a float sum's windows added left to right, a first's index offset by its
window's start; the windows stop once every aggregate is decided; concatenate). Here only:

  to_array      a compaction with a ToArray window [lo, hi) of survivors runs each binding
                window unclipped and slices the concatenation, stopping once hi survivors
                are in;
  fold          refused (each window applies the seed; a fold over more than one binding
                needs the cpu / opencl / cuda backend).

The window length is the largest whole number of elements for which every buffer that grows
with n (inputs, as the span a strided input covers; outputs; scratch sized n) fits the
binding limit. `binding_limit` is the adapter's, or `TEST_BINDING_LIMIT` when a test lowers
it to reach this path with small inputs.
"""
from __future__ import annotations

import numpy as np

from querycompute._codegen import launch as L
from querycompute._codegen.combine import all_decided, combine_raw, concatenate

from ...errors import QueryError

TEST_BINDING_LIMIT: int | None = None     # bytes; tests only (None: the adapter's limit)


def binding_limit(dev) -> int:
    return min(dev.max_binding, TEST_BINDING_LIMIT) if TEST_BINDING_LIMIT else dev.max_binding


def _step(x, max_step: int) -> int:
    """Elements of memory a strided input's element spans on the device (gpu_launch.strided_span
    uploads the span for strides up to max_step, else a contiguous copy)."""
    x = np.asarray(x)
    step, rem = divmod(x.strides[0], x.dtype.itemsize) if x.ndim == 1 and len(x) > 1 else (1, 0)
    return step if rem == 0 and 0 < step <= max_step else 1


def window_length(ks: L.KernelSet, inputs, n: int, limit: int, itemsize, max_step: int) -> int:
    """Elements per window so that no buffer exceeds `limit` bytes (n when all of it fits).
    `itemsize(dtype)`: device bytes per element."""
    per = [itemsize(str(np.asarray(x).dtype)) * _step(x, max_step) for x in inputs]
    per += [itemsize(b.dtype) for b in ks.outputs if b.size in ("n", "window")]
    per += [itemsize(b.dtype) for b in ks.scratch if b.size == "n"]
    widest = max(per, default=1)
    if n * widest <= limit - 4:
        return n
    return max(1, (limit - 4) // widest)


def run(prepared, loop, aggs, inputs, params, n: int, length: int) -> tuple:
    """(raw results of the whole pass, launches, tokens) from windows of `length` elements."""
    ks = loop.ks
    if not inputs:
        raise QueryError(f"webgpu: {n} elements of {ks.pass_name} need more than one storage binding "
                         f"and the pass reads no input column to split; use the cpu / opencl / cuda backend")
    if ks.shape == "reduce" and any(a.op == "fold" for a in aggs):
        raise QueryError(f"webgpu: an aggregate(...) fold over {n} elements needs more than one storage "
                         "binding window (each window would apply the seed); use the cpu / opencl / cuda "
                         "backend, or a smaller input")
    params = list(params)
    want = None
    if ks.window:                                  # survivors [lo, hi): every survivor, sliced after
        lo_at, hi_at = ks.window
        want = (int(params[lo_at]), int(params[hi_at]))
    ops = [a.op for a in aggs]
    launches, tokens, parts, total = [], [], [], None
    kept = 0
    for lo in range(0, n, length):
        hi = min(n, lo + length)
        if want:
            params[lo_at], params[hi_at] = type(params[lo_at])(0), type(params[hi_at])(hi - lo)
        raw, ls, ts = loop.run([x[lo:hi] for x in inputs], params, hi - lo)
        launches += ls
        tokens += ts
        if ks.shape == "reduce":
            total = combine_raw(ops, total, raw, lo)
            if all_decided(ops, total):
                break
        else:
            parts.append(tuple(raw[k] for k in range(len(ks.outputs))))
            kept += len(raw[0]) if raw else 0
            if want and kept >= want[1]:
                break
    if ks.shape == "reduce":
        return total, launches, tokens
    outs = concatenate(parts)
    if want:
        outs = tuple(o[want[0]:want[1]] for o in outs)
    return outs, launches, tokens
