"""Dask inputs: `qc.query(dask_array)`, zips of Dask arrays, Dask dataframes, dicts of Dask
arrays, and out-of-core arrays (`qc.query(np.memmap, chunks=N)`) -> a `DaskSource`.

A DaskSource describes the same element shape as an in-memory Source (kind "array", "zip" or
"table", the same field names), so the plan, `.source()` and `.explain()` treat it like any
other input: `columns()` gives zero-length NumPy columns of the right dtypes (the "meta").
What differs is how a terminal runs (dask_run.py): once per chunk, on whatever scheduler is
active. The blocks of every input are aligned first: a zip / table is rechunked so that
every column has the chunks of the first one (block i of each column holds the same
elements), which is what lets one chunk task read one block of each column.

Dask is imported only when a Dask object is seen (or `chunks=` is given).
"""
from __future__ import annotations

import sys

import numpy as np

from ..sources.sources import Source
from .run import DASK_STRINGS


def is_dask(x) -> bool:
    """A Dask array or dataframe (without importing dask to ask)."""
    if "dask" not in sys.modules:
        return False
    mod = type(x).__module__ or ""
    return mod.startswith("dask.") and hasattr(x, "__dask_graph__")


def wants_dask(arrays: tuple, columns: dict) -> bool:
    items = arrays[0].values() if len(arrays) == 1 and isinstance(arrays[0], dict) else arrays
    return any(is_dask(a) for a in (*items, *columns.values()))


class DaskSource(Source):
    """A Source whose columns are Dask collections with aligned blocks.
    `blocks()` -> one tuple of delayed per-chunk inputs per chunk, in order."""
    __slots__ = ("collections", "frame", "meta", "compute", "frame_skipped")
    runs_elsewhere = True                # terminals: one fused pass per chunk (dask/run.py)

    def __init__(self, kind: str, collections: tuple, fields: tuple, frame=None):
        self.collections = collections   # aligned 1-D dask arrays (zip / table / array)
        self.frame = frame               # or a dask dataframe (table)
        self.frame_skipped = {}          # its columns a kernel can't read (strings...): why
        if frame is None:
            self.meta = tuple(np.empty((0, *c.shape[1:]), dtype=c.dtype) for c in collections)
        else:                            # the pandas meta read as qc.query(pandas_frame) reads it
            from ..sources.source_adapters import table_of
            from ..sources.sources import _as_1d
            table = table_of(frame._meta)
            fields = tuple(f for f in fields if f in table.fields and f not in table.strings)
            self.frame_skipped = dict(table.skipped, **{f: DASK_STRINGS for f in table.strings})
            self.meta = tuple(_as_1d(table.column(f), f"column {f!r}") for f in fields)
        self.compute = True              # False: terminals return Dask objects (dask_run.lazy)
        super().__init__(kind, self.meta, fields)

    @property
    def skipped(self) -> dict:
        return self.frame_skipped

    def run_terminal(self, q, term, fns):
        from .run import run       # dask/run.py reads this module's DaskSource
        return run(q, term, fns)

    def columns(self) -> tuple:
        return self.meta

    def length(self, cols: tuple):
        """The number of elements; NaN for a dataframe (Dask knows it only by computing)."""
        if self.frame is not None:
            return float("nan")
        n = self.collections[0].shape[0]
        return int(n) if n == n else float("nan")     # unknown after a distributed operator

    def nchunks(self) -> int:
        if self.frame is not None:
            return self.frame.npartitions
        return len(self.collections[0].chunks[0])

    def chunk_lengths(self) -> tuple:
        """Known lengths of the chunks (NaN where Dask does not know them)."""
        if self.frame is not None:
            return (float("nan"),) * self.frame.npartitions
        return self.collections[0].chunks[0]

    def blocks(self) -> list:
        """Per chunk, the tuple of delayed inputs the chunk's Source holds (a dataframe
        partition for a dataframe table; one block per column otherwise)."""
        if self.frame is not None:
            return [(d,) for d in self.frame.to_delayed()]
        per_col = [list(c.to_delayed().ravel()) for c in self.collections]
        return list(zip(*per_col))


def from_dask(arrays: tuple, columns: dict, chunks) -> DaskSource:
    """qc.query(...)'s arguments when one of them is a Dask collection or chunks= is given."""
    import dask.array as da
    if columns:
        if arrays:
            raise TypeError("qc.query takes either positional arrays or named columns, not both")
        names, items, kind = tuple(columns), tuple(columns.values()), "table"
    elif len(arrays) == 1 and isinstance(arrays[0], dict):
        names, items, kind = tuple(arrays[0]), tuple(arrays[0].values()), "table"
    elif len(arrays) == 1 and _is_dataframe(arrays[0]):
        frame = arrays[0]
        names = tuple(str(c) for c in frame.columns)
        return DaskSource("table", (), names, frame=frame)
    else:
        names, items, kind = (), tuple(arrays), ("array" if len(arrays) == 1 else "zip")
    if not items:
        raise TypeError("qc.query needs at least one array (or named columns)")
    for nm in names:                   # any string (r["my col"]), as without Dask
        if not isinstance(nm, str):
            raise TypeError(f"table column names must be strings, got {nm!r}; name the column "
                            f"{str(nm)!r} and read it as r[{str(nm)!r}]")
    cols = [_as_dask(a, chunks, da, nm) for a, nm in zip(items, names or [f"input {i}" for i in range(len(items))])]
    first = cols[0]
    for c, nm in zip(cols[1:], (names or [f"input {i}" for i in range(len(items))])[1:]):
        if c.shape[0] != first.shape[0]:
            raise ValueError(f"zipped inputs must have equal lengths, got {first.shape[0]} and "
                             f"{c.shape[0]} ({nm})")
    cols = [cols[0]] + [c if c.chunks == first.chunks else c.rechunk(first.chunks) for c in cols[1:]]
    return DaskSource(kind, tuple(cols), names)


def _is_dataframe(x) -> bool:
    return is_dask(x) and hasattr(x, "columns") and hasattr(x, "npartitions")


def _as_dask(a, chunks, da, what: str):
    """One column as a 1-D dask array with known chunk sizes (numpy arrays and memmaps are
    wrapped with `chunks`, read chunk by chunk when the task runs)."""
    if not is_dask(a):
        if chunks is None:
            raise TypeError(f"{what}: mixing Dask and in-memory inputs needs chunks=N "
                            f"(qc.query(..., chunks=N) wraps the in-memory ones)")
        a = _memmap_blocks(a, int(chunks), da) if _file_backed(a) else \
            da.from_array(a, chunks=(chunks, *np.shape(a)[1:]))
    elif chunks is not None:
        a = a.rechunk({0: chunks})
    if a.ndim == 0:
        raise TypeError(f"{what} is a 0-d array; query a sequence (1-D, or (n, *s) elements)")
    if a.ndim > 1 and any(len(c) > 1 for c in a.chunks[1:]):
        a = a.rechunk({i: -1 for i in range(1, a.ndim)})   # (n, *s): whole elements per block
    if any(c != c for c in a.chunks[0]):
        raise ValueError(f"{what} has unknown chunk sizes (after a filter?); call "
                         f".compute_chunk_sizes() on it first")
    if a.dtype.kind in "OUSVcM m":
        raise TypeError(f"{what} has dtype {a.dtype}; supported element types are bool, ints "
                        f"and floats (object, string and complex arrays are not)")
    return a


def _file_backed(a) -> bool:
    return isinstance(a, np.memmap) and a.ndim == 1 and isinstance(getattr(a, "filename", None), str) \
        and a.flags.c_contiguous and a._mmap is not None


def from_memmap(mm: np.memmap, chunks: int):
    """A file-backed 1-D memmap as a Dask array read chunk by chunk where the tasks run (what
    qc.query(mm, chunks=N) uses; also handy for the same input to plain dask.array)."""
    import dask.array as da
    return _memmap_blocks(mm, int(chunks), da)


def _memmap_blocks(mm: np.memmap, chunks: int, da):
    """A 1-D memmap as a dask array whose tasks open the file themselves: a task carries
    (file, dtype, byte offset, length), never the data, so a worker process reads only its
    chunk (pickling the memmap would copy the whole array into every task)."""
    import dask
    if chunks <= 0:
        raise ValueError(f"chunks must be a positive number of elements, got {chunks}")
    base = _byte_offset(mm)
    n, dt = len(mm), mm.dtype
    read = dask.delayed(read_memmap, pure=True)
    parts = [da.from_delayed(read(mm.filename, dt.str, base + lo * dt.itemsize, min(chunks, n - lo)),
                             shape=(min(chunks, n - lo),), dtype=dt) for lo in range(0, n, chunks)]
    if not parts:
        return da.from_array(np.empty(0, dtype=dt), chunks=1)
    return da.concatenate(parts)


def _byte_offset(mm: np.memmap) -> int:
    """Where element 0 of `mm` lies in its file (a slice of a memmap starts later)."""
    import mmap as _mmap
    start = np.frombuffer(mm._mmap, dtype=np.uint8).ctypes.data
    return mm.__array_interface__["data"][0] - start + (mm.offset - mm.offset % _mmap.ALLOCATIONGRANULARITY)


def read_memmap(filename: str, dtype: str, offset: int, n: int) -> np.ndarray:
    """One chunk of a file-backed array, read where the task runs."""
    return np.array(np.memmap(filename, dtype=np.dtype(dtype), mode="r", offset=offset, shape=(n,)))
