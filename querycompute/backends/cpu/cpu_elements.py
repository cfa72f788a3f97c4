"""The cpu backend's arrays of shaped elements read whole (dialects/numba_py.whole_arrays).

A shaped input X of shape (n, *s) reaches a pass as its m component columns X[:, j]
(shaped.py). The numba module of a map or compaction pass takes each such array as one
(n, m) argument instead, read as in_X[i, j]: one base pointer and two strides in the loop
rather than m of each (with the rigid transform's 15 columns the loop spilled registers).
`bind` turns a call's columns into those arguments:

* components evenly spaced in memory (column j starts j * step bytes after column 0, every
  column with the same stride: C-ordered elements, vectors of any order, slices along n,
  reversed components) -> a strided (n, m) view of the same memory, no copy. numba compiles
  a C-contiguous view as its 'C' layout and any other as 'A' (one more specialisation,
  cached like the rest);
* otherwise (F-ordered or transposed matrix elements, columns of different arrays) -> one
  C-ordered (n, m) copy made with np.stack; the kernel then reads it as the first case.
"""
from __future__ import annotations

import numpy as np

from querycompute._codegen.elements import component_view



def as_2d(cols) -> np.ndarray:
    """The (n, m) array whose [i, j] is cols[j][i]: a view when the columns are evenly spaced
    components of one array (_codegen/elements.component_view), else a C-ordered copy."""
    view = component_view(cols)
    return view if view is not None else np.stack(cols, axis=1)


def bind(arrays, inputs) -> list:
    """A call's inputs (one column per program input) -> the module's arguments: each of
    `arrays` (ElementArray: inputs first .. first + m - 1) as one (n, m) array."""
    firsts = {a.first: a.m for a in arrays}
    out, k = [], 0
    while k < len(inputs):
        m = firsts.get(k)
        if m is None:
            out.append(inputs[k])
            k += 1
        else:
            out.append(as_2d(inputs[k:k + m]))
            k += m
    return out
