"""Shaped inputs (DESIGN.md sections 3 and 4b): an array of shape (n, *s) is n elements of
shape s, by scalarization.

Strategy ("scalarized"): an input of shape (n, a) becomes a scalar columns X[:, j], one of
shape (n, a, b) becomes a*b columns X[:, i, j] (C order over the element). These are strided
views -- no copy, whatever the array's order or strides -- and every kernel already reads
strided 1-D inputs, so one thread handles one element and holds it in registers (seed 001's
register storage). The lambda sees a `frontend.shaped.ShapedVal` over those columns' loads;
a select that returns one stores several output columns, and `to_array()` gives them as one
(m, *s) array: the cpu backend writes them as the columns of one (m, k) array in place
(as_block marks the final pass; `stack` then hands it out without a copy), other backends'
columns are stacked; terminals reduce each column (sum() is X.sum(axis=0)).

Elements larger than MAX_SCALARS scalars are not scalarized (a program unrolled over
thousands of columns would compile for minutes): rows (1-D elements) are read as the 2-D
array itself and planned by rows.py (seed 002's long-row strategies); larger matrices are
refused with an error naming the limit.
"""
from __future__ import annotations

import math
import sys

import numpy as np

from querycompute._codegen.elements import address

from ..errors import QueryError

MAX_SCALARS = 64        # element size (scalars) up to which elements are scalarized


def has_shaped(source) -> bool:
    """Does any input hold elements with a shape (a numpy array of 2 or 3 dimensions)?"""
    if source.kind == "range":
        return False
    if source.kind == "table" and len(source._items) == 1 and hasattr(source._items[0], "columns"):
        return False                      # a DataFrame: its columns are 1-D
    return any(isinstance(a, np.ndarray) and a.ndim >= 2 for a in source._items)


def _check(a: np.ndarray, what: str) -> tuple:
    s = a.shape[1:]
    if len(s) > 2:
        raise TypeError(f"{what} has shape {a.shape}: elements of {len(s)} dimensions are not "
                        f"supported (elements are scalars, vectors (n, k) or matrices (n, a, b))")
    size = math.prod(s)
    if size == 0:
        raise TypeError(f"{what} has shape {a.shape}: its elements are empty")
    if size > MAX_SCALARS and len(s) == 1:
        return s                          # a long row: rows.py's strategies
    if size > MAX_SCALARS:
        raise QueryError(
            f"{what} has elements of shape {s} ({size} values each); matrix elements are "
            f"computed by scalarization up to {MAX_SCALARS} values per element (rows of any "
            f"length are supported: reshape to (n, {size}) for whole-element reductions)")
    return s


def columns(source) -> tuple:
    """The scalar columns of every input, in input order; records each input's element
    shape in `source.shapes` (part of the compiled signature)."""
    from .sources import _as_1d
    names = source.fields or tuple(f"input {i}" for i in range(len(source._items)))
    if source.kind == "array":
        names = ("the input",)
    cols, shapes, lengths = [], [], []
    for a, nm in zip(source._items, names):
        what = str(nm) if source.kind == "array" else f"{nm}"
        if not (isinstance(a, np.ndarray) and a.ndim >= 2):
            c = _as_1d(a, what)
            cols.append(c)
            shapes.append(())
            lengths.append(len(c))
            continue
        s = _check(a, what)
        shapes.append(s)
        lengths.append(a.shape[0])
        if len(s) == 1 and s[0] > MAX_SCALARS:     # a long row: X itself (rows.py)
            _as_1d(a[:1, 0], what)                  # (the dtype check)
            cols.append(a if a.dtype.isnative else a.astype(a.dtype.newbyteorder("=")))
            continue
        for idx in np.ndindex(s):
            cols.append(_as_1d(a[(slice(None),) + idx], what))
    if len(set(lengths)) > 1:
        lens = ", ".join(f"{nm}={n}" for nm, n in zip(names, lengths))
        raise ValueError(f"zipped inputs must have equal lengths (first axis), got {lens}")
    source.shapes = tuple(shapes)
    return tuple(cols)


def refuse_staged(source, ops=(), term=None) -> None:
    """Staged operators (order_by, distinct, take, ... and last / element_at / single) run on
    scalar columns (stages.py) and don't read shaped elements yet: refused, naming the first
    such operator, with what works today (its key or result computed first, as an array)."""
    if not (getattr(source, "shapes", None) and any(source.shapes)):
        return
    first = next((op.kind for op in ops if op.breaks_stage), getattr(term, "name", "this terminal"))
    shape = next(s for s in source.shapes if s)
    raise QueryError(
        f"{first}(...) on a query over shaped elements (elements of shape {shape}) is not supported "
        f"yet: staged operators (order_by, distinct, take, skip, take_while, reverse, scan, "
        f"group_by, join, last, element_at, single) run on scalar columns only, even after a "
        f"select to scalars. Compute the values first, then use NumPy or a query over them: "
        f"keys = qc.query(X).select(lambda r: r.sum()).to_array(); X[np.argsort(keys, "
        f"kind='stable')] orders the elements, X[:k] takes k, qc.query(keys).order_by(...) "
        f"works on the scalars. (where / select / first / count / sum ... work on shaped elements.)")


def as_block(lowered):
    """The final pass of a query whose result is an (m, *s) array, its ToArray marked with
    the element size k (ToArray.element) when the k outputs share one dtype: a backend may
    then write them as the columns of one (m, k) array, which `stack` hands out as it is.
    (Only here, plan.lower's to_array / to_list: staged plans and other consumers of a
    pass's outputs keep separate columns.)"""
    from dataclasses import replace

    from querycompute._codegen.ir.program import ToArray
    p = lowered.pass_
    if not isinstance(p.terminal, ToArray) or len(set(p.program.output_dtypes)) != 1:
        return lowered
    terminal = replace(p.terminal, element=len(p.program.outputs))
    return replace(lowered, pass_=replace(p, terminal=terminal))


def _block(arrays, m: int):
    """The (m, k) C-contiguous array whose columns are exactly `arrays` (in order, viewed in
    their dtype: float16 results are uint16 bits in the cpu kernel), when nothing but these
    columns holds it; else None. The reference count makes handing it out safe: a backend
    that returned views of a user's (m, k) input (an identity select) would pass the layout
    test, but the input is held by its query too, so the result is a copy as NumPy's is."""
    a0 = arrays[0]
    base, k = a0.base, len(arrays)
    if type(base) is not np.ndarray or base.shape != (m, k) or not base.flags.c_contiguous:
        return None
    dt, size = a0.dtype, a0.dtype.itemsize
    if base.dtype.itemsize != size:
        return None
    start = address(base)
    for j, a in enumerate(arrays):
        if a.base is not base or a.dtype != dt:
            return None
        if m and (a.strides != (k * size,) or address(a) != start + j * size):
            return None
    if sys.getrefcount(base) > k + 2:       # the k columns, `base` and the call's argument
        return None
    return base if base.dtype == dt else base.view(dt)


def stack(arrays, shape: tuple) -> np.ndarray:
    """The output columns of a shaped select as one (m, *shape) array: the one array they
    are the columns of when the backend wrote them in place (ToArray.element, `_block`), with
    no copy; else a new array they are copied into."""
    m = len(arrays[0]) if arrays else 0
    block = _block(arrays, m) if arrays else None
    if block is not None:
        return block if block.shape[1:] == tuple(shape) else block.reshape((m,) + tuple(shape))
    out = np.empty((m,) + tuple(shape), np.result_type(*arrays))
    flat = out.reshape(m, math.prod(shape))
    for j, a in enumerate(arrays):
        flat[:, j] = a
    return out
