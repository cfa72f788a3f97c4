"""What a query reads: one array, a zip of arrays, a table of named columns, or a range.

A `Source` holds references only; arrays are read when a terminal operator runs (deferred
execution), so an in-place change between building the query and running it is seen.
`columns()` is called once per terminal run and returns the 1-D arrays to pass to the kernel.
Inputs other than 1-D NumPy arrays (pandas, polars, pyarrow, masked arrays, lists, buffers,
Arrow PyCapsules) and tables are adapted by source_adapters.py; nulls are refused there.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from querycompute._codegen import dtypes

from .source_adapters import (Table, device_array, dict_table, host_array, read_hint,
    structured_table, table_of)
from ..errors import InputTypeError, InputValueError
from ..frontend.datetimes import column_problem

KINDS = ("array", "zip", "table", "range")


def _cupy_module():
    import sys
    return sys.modules.get("cupy")


def is_device_array(a: Any) -> bool:
    """A CuPy array (lives on a CUDA device); we never import cupy just to ask."""
    cp = _cupy_module()
    return cp is not None and isinstance(a, cp.ndarray)


NATIVE_DTYPES = frozenset(np.dtype(d) for d in dtypes.ALL)   # native byte order only


def _as_1d(a: Any, what: str):
    """A 1-D native-order array of a kernel dtype from any input kind (numpy/cupy arrays as
    they are; the rest through source_adapters.host_array); a clear TypeError otherwise."""
    if type(a) is np.ndarray and a.ndim == 1 and a.dtype in NATIVE_DTYPES:
        return a                                      # the warm path: nothing to convert
    device = is_device_array(a)
    if device and a.ndim == 1 and a.dtype in NATIVE_DTYPES:
        return a                                      # a CuPy column, likewise
    if not device and type(a) is not np.ndarray:
        dev = device_array(a)                         # __cuda_array_interface__ / CUDA DLPack
        a = host_array(a, what) if dev is None else dev
    if a.ndim != 1:
        raise InputTypeError(f"{what} has {a.ndim} dimensions; queries read 1-D arrays "
                        f"(flatten it with .ravel(), or query one column/row at a time)")
    try:
        if a.dtype.kind in "mM":       # dates and durations: their ticks (Source.columns)
            problem = column_problem(a.dtype)
            if problem:
                raise InputTypeError(f"{what} {problem}")
        else:
            dtypes.normalize(a.dtype)
    except TypeError:
        raise InputTypeError(f"{what} has dtype {a.dtype}{read_hint(a.dtype)}; supported element types are "
                        f"{', '.join(dtypes.ALL)} (object, string and complex arrays are not)") from None
    if not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="))      # kernels read native byte order
    return a


def plain_columns(items: tuple) -> bool:
    """Every item a 1-D native numpy array, all of one length: usable as they are. (Checked
    on every terminal call of a query not yet hot, so the one-array case goes first.)"""
    a = items[0]
    if type(a) is not np.ndarray or a.ndim != 1 or a.dtype not in NATIVE_DTYPES:
        return False
    if len(items) == 1:
        return True
    n = len(a)
    for b in items[1:]:
        if type(b) is not np.ndarray or b.ndim != 1 or b.dtype not in NATIVE_DTYPES or len(b) != n:
            return False
    return True


class Source:
    """kind + how to get the columns. `fields` names the record fields of a table (the
    columns a kernel can read; `skipped` maps the others to why not)."""
    __slots__ = ("kind", "_items", "fields", "range_args", "_table", "shapes", "origin", "times")
    # A source whose terminals run somewhere else (dask/source.py: once per chunk, on Dask's
    # scheduler) says so here, and the engine hands the query to its `run_terminal`.
    runs_elsewhere = False

    def __init__(self, kind: str, items: tuple, fields: tuple[str, ...] = (), range_args=None,
                 table: Table | None = None):
        self.kind = kind
        self._items = items            # arrays ((the frame,) for a Table)
        self.fields = fields
        self.range_args = range_args   # (start, stop, step) for ranges
        self._table = table            # DataFrames, Arrow tables, tables with skipped columns
        self.shapes = None             # per input: its element shape, when one is shaped (shaped.py)
        self.origin = ""               # where the columns came from, when explain() says so
        self.times = None              # per column: its datetime64/timedelta64 dtype name or
                                       # None, when one is a date column (read as int64 ticks)

    @property
    def skipped(self) -> dict:
        """{column name: why a kernel can't read it} (strings, nulls, ...): an error only
        when a lambda reads that column."""
        return self._table.skipped if self._table is not None else {}

    def narrow(self, fields: tuple) -> "Source":
        """This table source reading only `fields` (the columns a query's lambdas read:
        column_use.py); one Source per field subset."""
        t = self._table
        hit = t.narrowed.get(fields)
        if hit is None:
            hit = t.narrowed[fields] = Source("table", self._items, fields, table=t)
            hit.origin = self.origin
        return hit

    def columns(self) -> tuple:
        """The 1-D arrays to read, in input order (validated; reads DataFrame columns now).
        When the items are usable as they are, the items tuple itself is returned (the
        engine's Hot entries rely on that identity: warm.plain_items). A datetime64 /
        timedelta64 column is handed over as its int64 ticks, its dtype kept in `times`
        (frontend/datetimes.py; `dtypes(cols)` names it)."""
        cols = self._read()
        if cols is self._items or not cols:
            self.times = None
            return cols
        times = [str(c.dtype) if c.dtype.kind in "mM" else None for c in cols]
        if not any(times):
            self.times = None
            return cols
        self.times = tuple(times)
        return tuple(c.view(np.int64) if t else c for c, t in zip(cols, times))

    def dtypes(self, cols: tuple) -> tuple:
        """The host dtype names of `columns()`' result: a date column's own dtype (its
        ticks' is int64)."""
        if self.times is None:
            return tuple(str(c.dtype) for c in cols)
        return tuple(t or str(c.dtype) for c, t in zip(cols, self.times))

    def _read(self) -> tuple:
        if self.kind == "range":
            return ()
        if self._table is None and plain_columns(self._items):
            self.shapes = None                        # (an input reshaped in place since)
            return self._items                        # the warm path: nothing to convert
        from . import shaped
        if self._table is None and shaped.has_shaped(self):   # (n, *s) inputs: scalar columns
            return shaped.columns(self)
        if self.kind == "array":
            return (_as_1d(self._items[0], "the input"),)
        if self._table is not None:
            t = self._table
            cols = tuple(_as_1d(t.column(f), f"column {f!r}") for f in self.fields)
        else:
            names = self.fields or tuple(f"input {i}" for i in range(len(self._items)))
            cols = tuple(_as_1d(a, str(nm)) for a, nm in zip(self._items, names))
        if len({len(c) for c in cols}) > 1:
            lens = ", ".join(f"{nm}={len(c)}" for nm, c in zip(self.fields or range(len(cols)), cols))
            what = "table columns" if self.kind == "table" else "zipped inputs"
            raise InputValueError(f"{what} must have equal lengths, got {lens}")
        return cols

    def run_terminal(self, q, term, fns):
        """Run `term` of `q` where this source's data lives (only when `runs_elsewhere`)."""
        raise NotImplementedError(f"a {type(self).__name__} runs its terminals here")

    def length(self, cols: tuple) -> int:
        if self.kind == "range":
            start, stop, step = self.range_args
            return len(range(start, stop, step))
        return len(cols[0])


def from_args(args: tuple, named: dict) -> Source:
    """Interpret qc.query(...)'s arguments."""
    if named:
        if args:
            raise InputTypeError("qc.query takes either positional arrays or named columns, not both")
        return _dict_source(named)
    if not args:
        raise InputTypeError("qc.query needs at least one array (or named columns: qc.query(price=p, qty=q))")
    if len(args) == 1:
        x = args[0]
        if isinstance(x, dict):
            if not x:
                raise InputTypeError("qc.query got an empty dict; give it at least one column")
            return _dict_source(x)
        if isinstance(x, np.ndarray) and x.dtype.names:
            return _table_source(structured_table(x))
        table = table_of(x)
        if table is not None:
            return _table_source(table)
        return Source("array", (_shaped_host(x, "the input"),))
    return Source("zip", tuple(_shaped_host(a, "input {}", i) for i, a in enumerate(args)))


def _shaped_host(x, what: str, key=None):
    """A host input that is no ndarray but reads as one of 2+ dimensions (a list of lists, a
    2-D memoryview, a CPU tensor): converted once, here, so that it is n elements of shape s
    (shaped.py) as the ndarray np.asarray makes of it is. Everything else as it is. `what`
    names it in an error (formatted with `key` only then: this runs on every query call)."""
    if isinstance(x, np.ndarray) or is_device_array(x):
        return x
    if isinstance(x, (list, tuple)):
        nested = len(x) > 0 and isinstance(x[0], (list, tuple, np.ndarray))
    else:
        nested = isinstance(getattr(x, "ndim", None), int) and x.ndim >= 2 and device_array(x) is None
    return host_array(x, what.format(key)) if nested else x


def _dict_source(d: dict) -> Source:
    """A dict / keyword table: its arrays as they are when all are plain 1-D columns (the
    warm path), else a Table (converted columns, unreadable ones skipped)."""
    if not all(type(a) is np.ndarray for a in d.values()):     # (the warm path: all are)
        d = {k: _shaped_host(a, "column {!r}", k) for k, a in d.items()}
    if any(isinstance(a, np.ndarray) and a.ndim >= 2 for a in d.values()):
        return Source("table", tuple(d.values()), tuple(d))     # shaped columns (shaped.py)
    table = dict_table(d)
    if not table.skipped and plain_columns(tuple(d.values())):
        return Source("table", tuple(d.values()), tuple(d))
    if not table.skipped and all(is_device_array(a) for a in d.values()):
        return Source("table", tuple(d.values()), tuple(d))     # CuPy columns, read in place
    return _table_source(table)


def _table_source(table: Table) -> Source:
    return Source("table", (table.frame,), table.fields, table=table)


def validated(src: Source) -> Source:
    """Check shapes and dtypes when the query is built, so the error points at qc.query(...)."""
    src.columns()
    return src


def from_range(start: int, stop: int | None, step: int) -> Source:
    if stop is None:
        start, stop = 0, start
    for v, nm in ((start, "start"), (stop, "stop"), (step, "step")):
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
            raise InputTypeError(f"qc.range {nm} must be an integer, got {v!r}")
    if step == 0:
        raise InputValueError("qc.range step must not be zero")
    return Source("range", (), range_args=(int(start), int(stop), int(step)))
