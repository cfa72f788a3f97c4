"""Checks of a query operator's arguments, shared by the operators (query.py) and the
terminals (query_terminals.py): counts, required functions, functions given as text or as a
supported ufunc / builtin."""
from __future__ import annotations

import numpy as np

from ..errors import InputTypeError


def count_arg(n, what: str) -> int:
    """take / skip / element_at's n: an integer (numpy integers too; not a bool or float)."""
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)):
        raise InputTypeError(f"{what}() takes an integer, got {type(n).__name__} {n!r}")
    # Clamped to int64: no sequence reaches 2**63 elements, so take/skip/element_at of a
    # larger n (or below -2**63) mean the same as of the bound (element_at: the default).
    return min(max(int(n), -2 ** 63), 2 ** 63 - 1)


def required(fn, what: str):
    if fn is None:
        raise InputTypeError(f"{what}() needs a function (a lambda)")
    return fn


def text_lambda(kind: str, fn):
    """A chain operator's argument that is not a Python function: a lambda given as text
    (`select("lambda v: v * 2")`, parsed, never executed), already parsed (the CLI), or a
    supported ufunc / builtin (`select(np.sqrt)`: frontend/known_callables.py) stands for its
    own code object; another callable is an UnsupportedLambdaError, a non-callable a TypeError."""
    if not isinstance(fn, str) and not callable(fn) and not hasattr(fn, "body"):
        raise InputTypeError(f"{kind}() takes a function (a lambda, a lambda as text or a supported "
                        f"NumPy ufunc / builtin such as np.sqrt or abs), got {type(fn).__name__}")
    from ..frontend.known_callables import function_source
    return function_source(fn)
