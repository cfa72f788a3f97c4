"""Results in the caller's world (DESIGN.md section 3): a query's elements or a group_by's
columns as a pandas DataFrame, a polars DataFrame or a pyarrow Table.

    to_array() result          to_pandas()           to_polars()           to_arrow()
    dict of columns (records,  pd.DataFrame          pl.DataFrame          pa.Table
      tables, group_by)        columns named and ordered as the dict's keys
    tuple of columns           pd.DataFrame          pl.DataFrame          pa.Table
                               columns "0", "1", ...: the tuple position, as a string
    one array (scalar          pd.Series             pl.Series             pa.Array
      elements)                (unnamed)             (name "")

Each column keeps its NumPy dtype (int32 stays int32, bool stays bool, float16 stays float16,
NaN stays a NaN value, never a null); an empty result keeps its columns and their dtypes.
datetime64/timedelta64 keep their unit where the library has it; a coarser one becomes the
same instants in the library's coarsest unit: polars "ms" (datetime64[D] is its Date), Arrow
"s" (datetime64[D] is date32), pandas "s" (its own rule).
Dask results (to_array() gives Dask arrays) are computed first; CuPy results are copied to
the host. pandas, polars and pyarrow are optional: each is imported only here, when asked.
"""
from __future__ import annotations

import numpy as np

from ..errors import QueryError

_PIP = {"pandas": "pandas", "polars": "polars", "pyarrow": "pyarrow"}


def _library(name: str):
    """The optional library `name`, or an ImportError that says what to install."""
    try:
        if name == "pandas":
            import pandas as lib
        elif name == "polars":
            import polars as lib
        else:
            import pyarrow as lib
    except ImportError as exc:
        raise ImportError(f"to_{'arrow' if name == 'pyarrow' else name}() needs {name}, which is "
                          f"not installed: pip install {_PIP[name]}") from exc
    return lib


def _columns(result) -> "tuple[list | None, list]":
    """(names or None for one unnamed column, host arrays) of a to_array()-shaped result."""
    if isinstance(result, dict):
        names, cols = [str(k) for k in result], list(result.values())
    elif isinstance(result, tuple):
        names, cols = [str(i) for i in range(len(result))], list(result)
    else:
        names, cols = None, [result]
    cols = _host(cols)
    for name, col in zip(names or ["the result"], cols):
        if not isinstance(col, np.ndarray) or col.ndim != 1:
            what = f"column {name!r}" if names else "the result"
            shape = getattr(col, "shape", type(col).__name__)
            raise QueryError(f"{what} is not one value per row (shape {shape}): a table has 1-D "
                             "columns; select its parts as fields (select(lambda r: {...})) or "
                             "use to_array()")
    return names, cols


def _host(cols: list) -> list:
    """Dask arrays computed (together, in one graph) and CuPy arrays copied to the host."""
    lazy = [i for i, c in enumerate(cols) if hasattr(c, "dask") and hasattr(c, "compute")]
    if lazy:
        import dask
        done = dask.compute(*[cols[i] for i in lazy])
        cols = list(cols)
        for i, c in zip(lazy, done):
            cols[i] = c
    return [c.get() if type(c) is not np.ndarray and hasattr(c, "__cuda_array_interface__")
            else c for c in cols]


def to_pandas(result):
    """pd.DataFrame (named columns), or pd.Series for one unnamed column."""
    pd = _library("pandas")
    names, cols = _columns(result)
    if names is None:
        return pd.Series(cols[0], copy=False)
    return pd.DataFrame({name: pd.Series(col, copy=False) for name, col in zip(names, cols)},
                        columns=names)


def to_polars(result):
    """pl.DataFrame (named columns), or pl.Series for one unnamed column."""
    pl = _library("polars")
    names, cols = _columns(result)
    cols = [_time_unit(c, ("ms", "us", "ns"), "ms", "polars") for c in cols]
    if names is None:
        return pl.Series("", cols[0])
    return pl.DataFrame([pl.Series(name, col) for name, col in zip(names, cols)])


def _time_unit(col: np.ndarray, units: tuple, coarse: str, lib: str) -> np.ndarray:
    """A datetime64/timedelta64 column in a unit `lib` reads (`units`, and a datetime64[D]
    as a date): a coarser unit (minutes, hours, ...) -> the same instants in `coarse`; a finer
    one than ns is refused (it would lose digits)."""
    if col.dtype.kind not in "mM":
        return col
    unit = np.datetime_data(col.dtype)[0]
    if unit in units or (unit == "D" and col.dtype.kind == "M"):
        return col
    if unit in ("ps", "fs", "as"):
        raise QueryError(f"a {col.dtype} column has no {lib} type ({lib} keeps {', '.join(units)}); "
                         "cast it in the query, or use to_array()")
    return col.astype(np.dtype(f"{col.dtype.kind}8[{coarse}]"))


def to_arrow(result):
    """pa.Table (named columns), or pa.Array for one unnamed column."""
    pa = _library("pyarrow")
    names, cols = _columns(result)
    arrays = [pa.array(_time_unit(c, ("s", "ms", "us", "ns"), "s", "Arrow")) for c in cols]
    if names is None:
        return arrays[0]
    return pa.Table.from_arrays(arrays, names=names)
