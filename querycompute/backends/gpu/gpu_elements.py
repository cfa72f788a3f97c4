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

from querycompute._codegen.elements import component_view



def whole(cols) -> np.ndarray | None:
    """The 1-D span of n * m scalars whose element i, component j is cols[j][i], when the
    columns are the components of C-contiguous elements of one array (_codegen/elements.component_view
    with a step of one scalar and a stride of m); else None."""
    view = component_view(cols)
    if view is None:
        return None
    n, m = view.shape
    item = view.itemsize
    if view.strides[1] != item or (n > 1 and view.strides[0] != m * item):
        return None
    return np.lib.stride_tricks.as_strided(view, shape=(n * m,), strides=(item,), writeable=False)


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
