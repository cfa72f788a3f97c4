"""Every error the library raises on purpose; all subclass QueryError."""
from __future__ import annotations

from contextlib import contextmanager

from querycompute._codegen.errors import CodegenError, HostOnly, UnsupportedType


class QueryError(Exception):
    """Base class of querycompute's errors."""


class UnsupportedLambdaError(QueryError):
    """A lambda uses a construct the kernel language does not have, or its source can't be read.

    `where` is "file:line:col" (col 1-based, counted in UTF-8 bytes as `ast` does) when known.
    """

    def __init__(self, message: str, where: str | None = None, construct: str | None = None):
        self.where = where
        self.construct = construct
        super().__init__(f"{where}: {message}" if where else message)


class EmptySequenceError(QueryError, ValueError):
    """min/max/mean/first of an empty sequence without `default=`."""


class ElementIndexError(EmptySequenceError, IndexError):
    """element_at(i) found no element at position i (i < 0 or past the end) and had no `default=`.

    Also an IndexError, what Python's `seq[i]` raises (LINQ's ElementAt throws
    ArgumentOutOfRangeException), while staying an EmptySequenceError like the other terminals."""


class MultipleElementsError(QueryError, ValueError):
    """single() found more than one element."""


class CapturedValueOverflowError(QueryError, OverflowError):
    """A captured Python int does not fit the type it meets in the lambda (`int8_value + k`
    with k = 300): NumPy 2 raises OverflowError there, so this is one too."""


class FoldOrderError(QueryError):
    """A fold (aggregate / scan) whose function is not provably associative was asked of a
    backend that folds in parallel only (a GPU dialect, Dask chunks); the message names the
    function and the fix (`associative=True` if it is, or `.on("cpu")`)."""


class HostOnlyError(QueryError):
    """The plan reads a string function's table (one value per distinct string, computed on
    the host: s.endswith(x), "x" in s, len(s)) and the backend is a GPU dialect, whose kernels
    don't take one; the numpy and cpu backends run it (`auto` runs it on cpu)."""


class BackendUnavailableError(QueryError):
    """The backend can't run on this machine; the message says why and what to install."""


class CompileError(QueryError):
    """A kernel failed to compile. Carries the dialect, options, compiler log and source."""

    def __init__(self, dialect: str, log: str, source: str, options=()):
        self.dialect = dialect
        self.log = log
        self.source = source
        self.options = tuple(options)
        numbered = "\n".join(f"{i:4d} | {line}" for i, line in enumerate(source.splitlines(), 1))
        super().__init__(
            f"{dialect} compilation failed (options: {' '.join(self.options) or 'none'})\n"
            f"--- compiler log ---\n{log.strip()}\n--- source ---\n{numbered}")


class UnsupportedTypeError(QueryError, TypeError):
    """A dtype the chosen backend can't hold (e.g. float64 on Metal); names type and backend."""


class InputTypeError(QueryError, TypeError):
    """An input or argument of the wrong kind (a string array, a Series with nulls, take(2.5));
    `except TypeError` still catches it."""


class InputValueError(QueryError, ValueError):
    """An input or argument with a wrong value (zipped inputs of unequal lengths)."""


@contextmanager
def codegen_errors(backend: str):
    """Re-raise codegen's errors (codegen never imports this package) as QueryErrors."""
    try:
        yield
    except CodegenError as exc:
        cls = UnsupportedTypeError if isinstance(exc, UnsupportedType) else \
            HostOnlyError if isinstance(exc, HostOnly) else QueryError
        raise cls(f"backend {backend!r}: {exc}") from exc
