"""querycompute: LINQ-style query chains over arrays, compiled into fused kernels.

    import querycompute as qc
    qc.query(x).select(lambda v: v * 2).where(lambda v: v > 1000).sum()
"""
from __future__ import annotations

from . import cache            # qc.cache: the compiled-kernel cache (touches no files on import)
from .backends.registry import backends
from .run.compiled import CompiledQuery
from .run.engine import last_trace, set_memo_size
from .errors import (BackendUnavailableError, CapturedValueOverflowError, CompileError, ElementIndexError,
                     EmptySequenceError, FoldOrderError, MultipleElementsError, QueryError,
                     UnsupportedLambdaError, UnsupportedTypeError)
from .errors import InputTypeError, InputValueError
from .log import ConfigWarning, FallbackWarning
from .api.query import Query, query, range
from .api.grouped import Grouped, GroupedResult
from .graph.terminals import agg, aggregate, all, any, count, count_distinct, first, max, mean, min, sum
from .frontend.values import matched

__version__ = "0.1.0"


# `from querycompute import *` brings no name that shadows a builtin (sum, min, max, range,
# any, all) or reads like a generic helper (count, first, mean, agg, aggregate): those stay
# qc.sum, qc.range, ... (tests/test_issue17_conventions.py checks).
__all__ = ["query", "Query", "Grouped", "GroupedResult", "CompiledQuery",
           "backends", "last_trace", "set_memo_size", "cache", "QueryError", "UnsupportedLambdaError", "EmptySequenceError",
           "MultipleElementsError", "ElementIndexError", "UnsupportedTypeError", "CapturedValueOverflowError",
           "BackendUnavailableError", "CompileError", "FoldOrderError", "InputTypeError", "InputValueError", "FallbackWarning", "ConfigWarning", "__version__"]
