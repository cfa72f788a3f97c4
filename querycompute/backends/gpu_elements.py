"""Which way a GPU pass reads its arrays of shaped elements, per call (_codegen/elements.py).

A shaped input X of shape (n, *s) arrives as its m component columns X[:, j] (strided views,
shaped.py). The kernel set's contiguous variant reads each such array whole: one buffer of
n * m scalars bound at component 0's input (`KernelSet.elements`), read with aligned wide
loads. That needs the columns to be the components of C-contiguous elements of one array:
column j starts j scalars after column 0 and every column steps over exactly m scalars.
`whole_arrays` checks it from the views alone and returns the n * m span (a view: no copy).
An F-ordered, transposed or sliced array (or columns from different arrays) returns None:
the call takes the strided variant, which gathers each component with its own stride.
"""
from __future__ import annotations

import numpy as np


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def whole(cols) -> np.ndarray | None:
    """The 1-D span of n * m scalars whose element i, component j is cols[j][i], when the
    columns are the components of C-contiguous elements of one array; else None."""
    c0 = cols[0]
    m, n = len(cols), len(c0)
    if not all(isinstance(c, np.ndarray) and c.ndim == 1 and c.dtype == c0.dtype and len(c) == n for c in cols):
        return None
    item = c0.itemsize
    if n > 1 and any(c.strides[0] != m * item for c in cols):
        return None
    if n and any(_address(c) != _address(c0) + j * item for j, c in enumerate(cols)):
        return None
    return np.lib.stride_tricks.as_strided(c0, shape=(n * m,), strides=(item,), writeable=False)


def whole_arrays(ks, inputs) -> dict[int, np.ndarray] | None:
    """First input -> whole span of each element array of `ks` (KernelSet.elements); None
    when one of them is not element-contiguous (then every component is read as a column)."""
    out = {}
    for _, k0, m in ks.elements:
        span = whole(inputs[k0:k0 + m])
        if span is None:
            return None
        out[k0] = (span, m)
    return out
