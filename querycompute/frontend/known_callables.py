"""Functions passed as they are: `select(np.sqrt)`, `select(abs)`, `sum(np.square)`,
`where(np.isfinite)`, and lambdas given as text (`select("lambda v: v * 2")`).

A NumPy ufunc, a `math` function, a builtin (abs, min, max, round, pow, float, int, bool) or a
NumPy scalar type is not Python source the frontend can read, but each stands for a lambda
that calls it: `np.sqrt` is `lambda v: np.sqrt(v)`, the binary `np.hypot` is
`lambda a, b: np.hypot(a, b)` (for zips of two inputs). That lambda is written as text and
parsed like any text lambda (chain_text.text_lambda; never executed), so the translation, the
NumPy semantics and the error messages are exactly those of the call inside a lambda
(translate_calls.py). Only the functions translate_calls supports are accepted; any other
callable object is refused here, naming it and the way out. One LambdaSource per function
(cached), so a function stands for its own warm signature.
"""
from __future__ import annotations

import builtins
import math
from typing import Optional

import numpy as np

from ..errors import UnsupportedLambdaError
from .capture import LambdaSource, _describe_callable
from .chain_text import parse_lambda, text_lambda
from .translate_calls import MATH_BINARY, SUPPORTED, call_handler

# Builtins that take two values (applied to a zip's pairs); the other supported ones take one.
_BINARY_BUILTINS = ("min", "max", "pow")

_by_function: dict[object, LambdaSource] = {}


def function_source(fn) -> LambdaSource:
    """The LambdaSource a non-`def` function argument stands for: a lambda as text, a parsed
    text lambda (the CLI), or a supported ufunc / math function / builtin / NumPy scalar type.
    Raises UnsupportedLambdaError for any other callable and TypeError for a non-callable."""
    if isinstance(fn, LambdaSource):
        return fn
    if isinstance(fn, str):
        return parse_lambda(fn)
    try:
        hit = _by_function.get(fn)
    except TypeError:                   # unhashable: never a known function
        hit = None
    if hit is not None:
        return hit
    spelling = _spelling(fn)
    if spelling is None:
        if not callable(fn):
            raise TypeError(f"expected a function (a lambda, a lambda as text, or a supported "
                            f"NumPy ufunc / builtin), got {type(fn).__name__} {fn!r}"[:300])
        raise UnsupportedLambdaError(
            f"{_describe_callable(fn)} can't be used as a query function: pass a lambda "
            f"(lambda v: ...), a def with a single return, a lambda as text, or one of the "
            f"supported functions ({SUPPORTED})", construct=type(fn).__name__)
    params = ("a", "b") if _arity(fn, spelling) == 2 else ("v",)
    text = f"lambda {', '.join(params)}: {spelling}({', '.join(params)})"
    src = text_lambda(text, f"<{spelling}>")
    _by_function[fn] = src
    return src


def _spelling(fn) -> Optional[str]:
    """How a lambda's text names `fn` (np.sqrt, math.hypot, abs, np.float32), when it is one
    of the supported callees; None otherwise."""
    if call_handler(fn) is None:
        return None
    name = getattr(fn, "__name__", None)
    if name is None:
        return None
    if getattr(np, name, None) is fn:
        return f"np.{name}"
    if getattr(math, name, None) is fn:
        return f"math.{name}"
    if getattr(builtins, name, None) is fn:
        return name
    return None


def _arity(fn, spelling: str) -> int:
    if isinstance(fn, np.ufunc):
        return fn.nin
    if spelling.startswith("math."):
        return 2 if spelling[5:] in MATH_BINARY else 1
    return 2 if spelling in _BINARY_BUILTINS else 1
