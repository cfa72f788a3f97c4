"""The fixed order of a float sum on the cpu kernel, and its NumPy twin.

The order (the same for every machine, every thread count, every tier):

    chunks   CHUNK (2**16) elements; each gives one total; the chunk totals are added as
             a balanced tree (`pairwise`), then +0.0 is added (a sum of -0.0s is +0.0)
    blocks   a chunk is cut into blocks of BLOCK (4096) elements (the last one padded with
             -0.0); its block totals are added as a balanced tree (`pairwise`)
    lanes    a block is summed in LANES (64) accumulators: lane j starts at element b + j
             and adds element b + 64 r + j for rows r = 1, 2, ... one after another (64
             independent adds per row: a vector operation that needs no reassociation);
             then the lanes are added as a balanced tree (`pairwise`)
    dropped  an element a where drops contributes -0.0 (x + -0.0 == x for every x)

`pairwise(buf)`: while more than one value is left, buf[j] = buf[2j] + buf[2j + 1], an odd
last one moves up as is. float16 sums round after every add (NumPy's half adds do too; the
kernel holds them in float32 and rounds each result).

The cpu kernel prints this order explicitly (ops/reduce/cpu.py: a lane array per float sum
added row by row, no `reassoc`, so LLVM may not regroup it); the numpy tier (and the numpy
backend, ops/reduce/reference.py) computes it with `chunk_totals` and `total`,
whole-array NumPy operations: so a float sum's bits never depend on which tier answered
(docs/guide.md, "Tiered execution").
"""
from __future__ import annotations

import numpy as np

CHUNK = 1 << 16         # elements per chunk (the cpu entry points' chunks: dialects.numba_py)
BLOCK = 4096            # elements per block of a chunk
LANES = 64              # accumulators of a block


def pairwise(buf: np.ndarray) -> np.ndarray:
    """The balanced tree of adds over the last axis of `buf` (see the module doc), in
    buf's dtype: shape buf.shape[:-1]. Needs at least one value per row."""
    while buf.shape[-1] > 1:
        m = buf.shape[-1]
        even = m - m % 2
        pairs = buf[..., 0:even:2] + buf[..., 1:even:2]
        buf = np.concatenate([pairs, buf[..., even:]], axis=-1) if m % 2 else pairs
    return buf[..., 0]


def chunk_totals(x: np.ndarray) -> np.ndarray:
    """The totals of the chunks of `x` (its length need not be a multiple of CHUNK: the
    last chunk is shorter), in the kernel's order. `x` holds every element, with -0.0
    where an element was dropped."""
    t = x.dtype
    m = len(x)
    if m == 0:
        return np.empty(0, t)
    pad = (-m) % BLOCK                 # -0.0 padding: adds that change nothing
    if pad:
        x = np.concatenate([x, np.full(pad, -0.0, t)])
    rows = x.reshape(-1, BLOCK // LANES, LANES)
    with np.errstate(all="ignore"):
        acc = rows[:, 0, :]
        for r in range(1, rows.shape[1]):       # row after row: each lane in element order
            acc = acc + rows[:, r, :]
        blocks = pairwise(acc)                 # the lanes' tree
        per = CHUNK // BLOCK
        full = len(blocks) // per
        out = [pairwise(blocks[:full * per].reshape(full, per))] if full else []
        if len(blocks) > full * per:
            out.append(pairwise(blocks[full * per:])[None])
    return np.concatenate(out) if len(out) > 1 else out[0]


def total(chunks: np.ndarray, dtype: str):
    """The sum from all chunk totals (in order): their tree, then +0.0; 0.0 for none."""
    t = np.dtype(dtype).type
    with np.errstate(all="ignore"):
        s = pairwise(chunks) if len(chunks) else t(-0.0)
        return t(s + t(0.0))
