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


def initial_element(source, dts: tuple):
    """(element value, program inputs) for a source with shaped inputs."""
    from querycompute._codegen import expr as E
    from querycompute._codegen.program import InputSpec

    from ..frontend.shaped import ShapedVal
    from ..frontend.values import RecordVal, Scalar, TupleVal
    from ..plan.plan import _input_name
    inputs, values, k = [], [], 0
    for i, s in enumerate(source.shapes):
        base = _input_name(source, i)
        if not s:
            inputs.append(InputSpec(base, dts[k]))
            values.append(Scalar(E.Load(k, dts[k]), None))
            k += 1
            continue
        arr = np.empty(s, object)
        m = math.prod(s)
        for j, idx in enumerate(np.ndindex(s)):      # (element: the GPU may read it whole)
            inputs.append(InputSpec(f"{base}_{'_'.join(map(str, idx))}", dts[k], (base, j, m)))
            arr[idx] = Scalar(E.Load(k, dts[k]), None)
            k += 1
        values.append(ShapedVal(arr))
    if source.kind == "array":
        return values[0], inputs
    if source.kind == "zip":
        return TupleVal(tuple(values)), inputs
    return RecordVal(tuple(zip(source.fields, values))), inputs


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

    from querycompute._codegen.program import ToArray
    p = lowered.pass_
    if not isinstance(p.terminal, ToArray) or len(set(p.program.output_dtypes)) != 1:
        return lowered
    terminal = replace(p.terminal, element=len(p.program.outputs))
    return replace(lowered, pass_=replace(p, terminal=terminal))


def address(a: np.ndarray) -> int:
    """The address of a's first element."""
    return a.__array_interface__["data"][0]


def component_view(cols) -> np.ndarray | None:
    """The (n, m) view whose [i, j] is cols[j][i], no copy, when the 1-D columns are evenly
    spaced components of one array (how a shaped input's columns X[:, j] arrive): one dtype
    and length, column j starting j * step bytes after column 0, one stride for all (any for
    n = 1); else None. The one test behind every whole-array read of the backends:
    cpu_elements (a map's (n, m) argument), cpu_columns (row-major column sums) and
    gpu_elements (the C-contiguous span a kernel reads with wide loads)."""
    c0 = cols[0]
    n, m = len(c0), len(cols)
    if not all(isinstance(c, np.ndarray) and c.ndim == 1 and c.dtype == c0.dtype and len(c) == n for c in cols):
        return None
    item = c0.itemsize
    stride, step = (m * item, item)
    if n:
        base = address(c0)
        stride, step = c0.strides[0], (address(cols[1]) - base if m > 1 else item)
        if any(address(c) != base + j * step or (n > 1 and c.strides[0] != stride) for j, c in enumerate(cols)):
            return None
    return np.lib.stride_tricks.as_strided(c0, (n, m), (stride, step), writeable=c0.flags.writeable)


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


class ShapedFinish:
    """How a terminal over shaped elements finishes: one terminals.Finish per component,
    stacked into an array of the element shape (sum() of vec3 elements is a vec3)."""
    kind = "shaped"
    agg = 0
    result_dtype = ""

    def __init__(self, parts: tuple, shape: tuple):
        self.parts, self.shape = parts, shape

    def finish(self, raw, spec, key):
        from ..graph.terminals import finish
        values = [finish(p, raw, spec, key) for p in self.parts]
        if getattr(spec, "default", 0) is None and all(v is None for v in values):
            return None                # min/max/mean/first of nothing with default=None: None
        return np.array(values).reshape(self.shape)


def describe(source, backend: str = "", p=None) -> str:
    """explain()'s line for shaped inputs: the strategy and the bytes each element reads. On
    a GPU dialect (`p`: the pass), how its kernels read each array (_codegen/elements.py):
    whole elements with aligned wide loads when the array's elements are C-contiguous, else
    gathered, one strided load per component."""
    parts = []
    for a, s in zip(source._items, source.shapes):
        if s:
            nbytes = math.prod(s) * a.dtype.itemsize
            layout = "contiguous" if a[0:1].flags.c_contiguous else "strided/F-ordered"
            parts.append(f"{a.dtype}{list(s)} ({nbytes} B/element, {math.prod(s)} scalar "
                         f"columns, {layout})")
    text = "shaped elements: " + "; ".join(parts)
    from .._codegen import gpu
    if p is not None and backend == "cpu":
        from .._codegen.dialects.numba_py import whole_arrays
        if whole_arrays(p):            # a map / compaction (backends/cpu_elements.py)
            out = (", the result written in place as one (m, k) array"
                   if getattr(p.terminal, "element", 0) else "")
            return text + (" -- cpu strategy: scalarized, one element per loop iteration in "
                           "registers, each array read whole as one (n, m) array (a view; a "
                           "copy where the components are not evenly spaced: F-ordered or "
                           f"transposed matrices){out}")
    if p is None or backend not in gpu.DIALECTS:
        return text + (" -- strategy: scalarized, one element per thread in registers, each "
                       "component read as a strided column")
    from .._codegen import elements
    from ..backends.gpu.gpu_elements import whole
    ks = gpu.render(p, backend)
    wide = gpu.printer(backend).VECTOR_LOADS
    cols = columns(source)
    arrays = elements.arrays(p.program)
    comps = {a.first + j for a in arrays for j in range(a.m)}
    # one contiguity decision for every input (gpu_launch.LaunchLoop): whole elements only
    # when every array is element-contiguous and every other column unit-strided
    odd = [a.name for a in arrays if whole(cols[a.first:a.first + a.m]) is None]
    odd += [s.name for k, s in enumerate(p.program.inputs) if k not in comps and k < len(cols)
            and not (cols[k].flags.c_contiguous or len(cols[k]) <= 1)]
    if odd:
        how = ("gathered: one strided scalar load per component of every element (the strided "
               f"variant: {', '.join(odd)} not C-contiguous)")
    else:
        how = "; ".join(f"{a.name}: {a.nbytes} B/element, whole elements, "
                        f"{elements.strategy(a, ks.elems_per_thread, wide)}" for a in arrays) or "scalarized columns"
    return text + f" -- {backend} strategy: {how}"
