"""Host inputs of every kind -> plain NumPy arrays, and table inputs -> named columns.

Kernels read 1-D arrays of one of the NumPy element dtypes, so every input is brought to one:

- numpy arrays pass as they are; `np.ma.MaskedArray` passes as its `.data` when nothing is
  masked (a view);
- pandas Series/arrays with an extension dtype (`Int64`, `Float64`, `boolean`,
  `int64[pyarrow]`...) become their `numpy_dtype` (`to_numpy(dtype=...)`, no copy where pandas
  can avoid one);
- pyarrow `Array`s are read zero-copy where Arrow's layout allows it (primitive types; bools
  are bit-packed and take one copy); a `ChunkedArray` of one chunk likewise, of several chunks
  one copy of that column only; polars Series through `to_numpy()`;
- objects exporting the Arrow PyCapsule interface (`__arrow_c_array__` /
  `__arrow_c_stream__`) go through pyarrow, which reads the capsules without a copy;
- anything else `np.asarray` accepts (lists, tuples, range, memoryview, array.array, mmap,
  `__array__` / `__array_interface__` objects, DLPack) is converted as NumPy would.

Nulls are never turned into NaN: a masked array with a masked element or a nullable column
holding a null raises `TypeError` naming the input and the ways out (`null_count`).

Tables (pandas / polars DataFrame, polars LazyFrame, pyarrow Table / RecordBatch, Arrow
streams, dicts of arrays, structured arrays) become a `Table`: the columns that can be kernel
columns are its `fields`; the others (strings, categories, dates, nested types, columns
holding nulls, 2-D columns) are `skipped` with the reason, which is reported only if a lambda
reads one (translate's field lookup), so an unused string column is no obstacle. The
classification reads the schema (and null counts), never the skipped columns' data.
"""
from __future__ import annotations

import sys
from typing import Any

import numpy as np

from querycompute._codegen import dtypes
from ..errors import InputTypeError
from . import string_columns as _strings
from ..frontend.datetimes import TZ_WAYS, column_problem

NULL_WAYS = ("fill the nulls (fill_null(...) in polars/pyarrow, fillna(...) in pandas) or "
             "drop them (drop_nulls() / dropna()) before querying")
MASK_WAYS = "use .filled(value) to replace the masked elements or .compressed() to drop them"


def _pkg(x: Any) -> str:
    return type(x).__module__.partition(".")[0]


def _is(x: Any, module: str, *names: str) -> bool:
    """isinstance against a class of a package the user already imported (never import it)."""
    mod = sys.modules.get(module)
    return mod is not None and any(isinstance(x, getattr(mod, n, ())) for n in names)


# --- one column -----------------------------------------------------------------------------
def null_count(a: Any) -> int:
    """The nulls a column-like holds: masked elements, Arrow/polars nulls, pandas NA in an
    extension dtype. 0 for plain arrays, where NaN is a value and not a null."""
    if isinstance(a, np.ma.MaskedArray):
        return int(np.ma.count_masked(a))
    pkg = _pkg(a)
    if pkg == "pyarrow" and hasattr(a, "null_count"):
        return int(a.null_count)
    if pkg == "polars" and callable(getattr(a, "null_count", None)):
        return int(a.null_count())
    if pkg == "pandas" and not isinstance(getattr(a, "dtype", None), np.dtype) and hasattr(a, "isna"):
        return int(np.asarray(a.isna()).sum())
    return 0


def null_error(what: str, nulls: int, masked: bool = False) -> InputTypeError:
    if masked:
        return InputTypeError(f"{what} is a masked array with {nulls} masked element(s); kernels have "
                         f"no nulls and would read the hidden values: {MASK_WAYS}")
    return InputTypeError(f"{what} holds {nulls} null(s); kernels have no nulls (they would read "
                     f"as NaN or garbage): {NULL_WAYS}")


# DLPack device types of memory a CUDA kernel reads in place (dlpack.h: kDLCUDA,
# kDLCUDAManaged); kDLCUDAHost (pinned host memory) is host memory and goes through NumPy.
_DLPACK_CUDA = (2, 13)


def device_array(a: Any):
    """A CUDA-resident input as a CuPy array sharing its memory (no copy), or None for host
    data: CuPy arrays as they are, objects with `__cuda_array_interface__` (Numba, PyTorch,
    JAX...) and DLPack objects on a CUDA device. CuPy is imported only for such an object."""
    cp = sys.modules.get("cupy")
    if cp is not None and isinstance(a, cp.ndarray):
        return a
    if isinstance(a, np.ndarray):
        return None
    try:
        cai = hasattr(a, "__cuda_array_interface__")      # a CPU torch tensor raises: host data
    except Exception:
        cai = False
    dev = None
    if not cai and hasattr(a, "__dlpack_device__"):
        try:
            dev = int(a.__dlpack_device__()[0])
        except Exception:
            dev = None
    if not cai and dev not in _DLPACK_CUDA:
        return None
    try:
        import cupy
    except ImportError:
        raise InputTypeError(f"{type(a).__name__} lives on a CUDA device; querycompute reads device "
                        f"memory through CuPy: pip install 'querycompute[cuda12]' (or cuda13), "
                        f"or copy the data to the host first") from None
    return cupy.asarray(a) if cai else cupy.from_dlpack(a)


def host_array(a: Any, what: str) -> np.ndarray:
    """`a` as a NumPy array (any shape; the caller checks ndim and dtype), nulls refused."""
    nulls = null_count(a)
    if nulls:
        raise null_error(what, nulls, masked=isinstance(a, np.ma.MaskedArray))
    if isinstance(a, np.ma.MaskedArray):
        return a.data
    if isinstance(a, np.ndarray):
        return a
    pkg = _pkg(a)
    if pkg == "pyarrow" and hasattr(a, "type"):
        return _arrow_numpy(a, what)
    if pkg == "polars" and hasattr(a, "to_numpy") and hasattr(a, "null_count"):
        problem = _polars_problem(a)                  # (nulls were refused above)
        if problem:
            raise InputTypeError(f"{what} {problem}; supported element types are {', '.join(dtypes.ALL)}")
        return a.to_numpy()
    if pkg == "pandas" and hasattr(a, "dtype") and not isinstance(a.dtype, np.dtype):
        numpy_dtype = getattr(a.dtype, "numpy_dtype", None)
        if numpy_dtype is None or numpy_dtype == np.dtype(object):
            raise InputTypeError(f"{what} has pandas dtype {a.dtype}, which has no numeric NumPy "
                            f"equivalent{read_hint(a.dtype)}; supported element types are "
                            f"{', '.join(dtypes.ALL)}")
        return a.to_numpy(dtype=numpy_dtype)
    if hasattr(a, "__array__"):
        return np.asarray(a)
    if hasattr(a, "__dlpack__"):
        return np.from_dlpack(a)
    if hasattr(a, "__arrow_c_array__") or hasattr(a, "__arrow_c_stream__"):
        return host_array(_pyarrow_array(a, what), what)
    try:
        out = np.asarray(a)
    except (TypeError, ValueError) as e:
        raise InputTypeError(f"{what} must be an array or anything np.asarray accepts (a list, "
                        f"tuple, range, buffer...); np.asarray failed: {e}") from None
    if out.dtype == object:
        raise InputTypeError(f"{what} ({type(a).__name__}) becomes an object array in np.asarray; "
                        f"give numbers of one kind (a list of floats, ints or bools)")
    return out


def _arrow_numpy(a, what: str) -> np.ndarray:
    """A pyarrow Array / ChunkedArray without nulls as NumPy: zero-copy where Arrow's layout
    is NumPy's (primitive types, one chunk); several chunks are concatenated (one copy of
    this column only)."""
    t = a.type
    pa = sys.modules["pyarrow"]
    if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)
            or _temporal(t) == ""):
        raise InputTypeError(f"{what} has Arrow type {t}{read_hint(t)}; supported element types are "
                        f"{', '.join(dtypes.ALL)}")
    if hasattr(a, "num_chunks"):
        if a.num_chunks == 1:
            a = a.chunk(0)
        else:
            return a.to_numpy()        # 0 or several chunks: one contiguous copy
    return a.to_numpy(zero_copy_only=False)   # zero-copy unless bools (bit-packed)


def _pyarrow():
    try:
        import pyarrow
    except ImportError:
        raise InputTypeError("reading an Arrow PyCapsule (__arrow_c_array__ / __arrow_c_stream__) "
                        "object needs pyarrow; pip install pyarrow, or pass a NumPy array") from None
    return pyarrow


def _pyarrow_array(a, what: str):
    pa = _pyarrow()
    if hasattr(a, "__arrow_c_array__"):
        return pa.array(a)
    return pa.chunked_array(a)


# --- tables ---------------------------------------------------------------------------------
class Table:
    """A table input: `fields` (str names of the columns kernels can read, in table order),
    `skipped` ({name: why not}), `column(name)` -> that column as a host array."""
    __slots__ = ("frame", "fields", "keys", "skipped", "get", "narrowed", "strings", "dictionaries")

    def __init__(self, frame, names: list, get, problem, text=None):
        self.frame = frame
        self.get = get                 # (frame, key) -> the column object
        fields, keys, skipped = [], {}, {}
        # String columns (string_columns.py): read as int32 codes, their sorted dictionary
        # kept per call in `dictionaries` (the kernel parameters and the decoding read it).
        self.strings: frozenset = frozenset()
        self.dictionaries: dict = {}
        strings = set()
        strs = [key if isinstance(key, str) else str(key) for key in names]
        for key, name in zip(names, strs):
            if strs.count(name) > 1:   # usable while no lambda reads it
                skipped[name] = (f"is the name of {strs.count(name)} columns (column names are "
                                 f"read as strings); rename one")
                continue
            if text is not None and text(key):
                strings.add(name)
                why = None
            else:
                why = problem(key)
            if why is None:
                fields.append(name)
                keys[name] = key
            else:
                skipped[name] = why
        if not fields:
            raise InputTypeError("none of the table's columns can be read by a kernel: "
                            + "; ".join(f"{k!r} {v}" for k, v in skipped.items()))
        self.fields = tuple(fields)
        self.keys = keys
        self.skipped = skipped
        self.strings = frozenset(strings)
        self.narrowed = {}             # field subset -> its Source (sources.Source.narrow)

    def column(self, name: str):
        col = self.get(self.frame, self.keys[name])
        if name in self.strings:       # this call's codes; its dictionary kept for the call
            enc = _strings.encode(col, f"column {name!r}")
            self.dictionaries[name] = enc.dictionary
            return enc.codes
        return col


# Strings are read as a table's columns (string_columns.py: a record field r.name), not as
# the elements themselves.
STRINGS_HINT = (", or query them as a table's column: qc.query(name=a) (or a DataFrame's "
                "column), then r.name in the lambdas")


def _temporal(dt) -> str | None:
    """For a pandas / polars / Arrow date or duration type: "" when a kernel reads it (as
    int64 ticks typed with its unit: frontend/datetimes.py), the reason when it is
    time-zone aware or a time of day; None for any other type."""
    pkg, name = _pkg(dt), str(dt)
    if pkg == "polars":
        base = name.split("(")[0]
        if base in ("Date", "Duration") or (base == "Datetime" and getattr(dt, "time_zone", None) is None):
            return ""
        if base == "Datetime":
            return f"is time-zone aware ({name}); {TZ_WAYS}"
        return None
    if pkg == "pyarrow":
        pa = sys.modules["pyarrow"]
        if pa.types.is_timestamp(dt):
            return "" if dt.tz is None else f"is time-zone aware ({name}); {TZ_WAYS}"
        if pa.types.is_date(dt) or pa.types.is_duration(dt):
            return ""
        return None
    if getattr(dt, "tz", None) is not None and name.startswith("datetime64"):
        return f"is time-zone aware ({name}); {TZ_WAYS}"
    return None


def read_hint(dt) -> str:
    """"; what to read instead" for a dtype no kernel reads (NumPy, pandas, polars or Arrow),
    or "" when there is nothing specific to say: dates and durations as their integer ticks,
    categories and enums as their integer codes, strings encoded as codes first."""
    pkg, name = _pkg(dt), str(dt)
    if _temporal(dt):
        return "; it " + _temporal(dt)
    if pkg == "polars":
        base = name.split("(")[0]
        if base in ("Enum", "Categorical"):
            return "; read its integer codes instead: .to_physical()"
        if base in ("String", "Utf8"):
            return ("; strings are not readable: encode them as integer codes first, "
                    ".cast(pl.Categorical).to_physical()" + STRINGS_HINT)
        if base == "Time":
            return "; read its integer ticks instead: .to_physical()"
        return ""
    if pkg == "pyarrow":
        if name.startswith("time"):
            return "; read its integer ticks instead: .cast(pa.int64())"
        if name.startswith("dictionary"):
            return "; read its integer codes instead: .indices"
        return ""
    if name == "category":
        return "; read its integer codes instead: .cat.codes"
    if name.startswith(("datetime64", "timedelta64")) and isinstance(dt, np.dtype):
        return "; " + (column_problem(dt) or "").replace("has dtype", "it has dtype")
    if name in ("object", "string", "str") or name.startswith(("<U", "|S", "string[")):
        return ("; strings are not readable: encode them as integer codes first "
                "(np.unique(a, return_inverse=True)[1], or .astype(\"category\").cat.codes in pandas)"
                + STRINGS_HINT)
    return ""


def _dtype_problem(dt) -> str | None:
    if isinstance(dt, np.dtype) and dt.kind in "mM":
        return column_problem(dt)
    try:
        dtypes.normalize(np.dtype(dt))
        return None
    except TypeError:
        return f"has dtype {dt}{read_hint(dt)}"


def _pandas_problem(col) -> str | None:
    dt = col.dtype
    if not isinstance(dt, np.dtype):
        numpy_dtype = getattr(dt, "numpy_dtype", None)
        if numpy_dtype is None or _dtype_problem(numpy_dtype):
            return f"has pandas dtype {dt}{read_hint(dt)}"
    elif _dtype_problem(dt):
        return _dtype_problem(dt)
    nulls = null_count(col)
    return f"holds {nulls} null(s): {NULL_WAYS}" if nulls else None


def _arrow_problem(col) -> str | None:
    pa = sys.modules["pyarrow"]
    t = col.type
    if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)
            or _temporal(t) == ""):
        return f"has Arrow type {t}{read_hint(t)}"
    return f"holds {col.null_count} null(s): {NULL_WAYS}" if col.null_count else None


def _polars_problem(col) -> str | None:
    t = col.dtype
    if not (t.is_numeric() and not str(t).startswith("Decimal")) and str(t) != "Boolean" \
            and _temporal(t) != "":
        return f"has polars dtype {t}{read_hint(t)}"
    return f"holds {col.null_count()} null(s): {NULL_WAYS}" if col.null_count() else None


def _array_problem(a) -> str | None:
    try:
        arr = device_array(a)
        arr = host_array(a, "the column") if arr is None else arr
    except TypeError as e:
        return str(e).replace("the column ", "", 1)
    if arr.ndim != 1:
        return f"has {arr.ndim} dimensions (table columns are 1-D)"
    return _dtype_problem(arr.dtype)


def table_of(x: Any) -> Table | None:
    """The Table of a table input, or None when `x` is not one (dicts and structured arrays
    are sources.py's own)."""
    if _is(x, "pandas", "DataFrame"):
        return Table(x, list(x.columns), lambda f, k: f[k], lambda k: _pandas_problem(x[k]),
                     lambda k: _strings.is_text(x[k]))
    if _is(x, "polars", "LazyFrame"):
        schema = x.collect_schema()
        x = x.select([n for n, t in schema.items() if t.is_numeric() or str(t) == "Boolean"
                      or str(t).split("(")[0] in ("String", "Utf8", "Categorical", "Enum")
                      or _temporal(t) == ""]
                     or list(schema)[:1]).collect()     # only the columns a kernel can read
    if _is(x, "polars", "DataFrame"):
        return Table(x, list(x.columns), lambda f, k: f.get_column(k),
                     lambda k: _polars_problem(x.get_column(k)), lambda k: _strings.is_text(x.get_column(k)))
    if _is(x, "pyarrow", "RecordBatchReader"):     # an Arrow stream: read once, here
        x = x.read_all()
    if _is(x, "pyarrow", "Table", "RecordBatch"):
        return Table(x, list(x.schema.names), lambda f, k: f.column(k),
                     lambda k: _arrow_problem(x.column(k)), lambda k: _strings.is_text(x.column(k)))
    if _pkg(x) not in ("numpy", "pandas", "polars", "pyarrow") and not hasattr(x, "__array__") \
            and (hasattr(x, "__arrow_c_stream__") or hasattr(x, "__arrow_c_array__")):
        pa = _pyarrow()
        try:
            t = pa.table(x) if hasattr(x, "__arrow_c_stream__") else pa.record_batch(x)
        except (TypeError, ValueError, pa.ArrowException):
            return None                # an Arrow array, not a table: read as one column
        return table_of(t)
    if hasattr(x, "columns") and hasattr(x, "dtypes") and not hasattr(x, "__dlpack__"):
        # another DataFrame-like object (column access by [name], to_numpy())
        return Table(x, list(x.columns), lambda f, k: f[k].to_numpy(), lambda k: None)
    return None


def dict_table(d: dict) -> Table:
    for k in d:                        # any string (r["my col"]), as for a DataFrame's columns
        if not isinstance(k, str):
            raise InputTypeError(f"table column names must be strings, got {k!r}; name the column "
                            f"{str(k)!r} and read it as r[{str(k)!r}]")
    return Table(d, list(d), lambda f, k: f[k], lambda k: _array_problem(d[k]), lambda k: _strings.is_text(d[k]))


def structured_table(rec: np.ndarray) -> Table:
    return Table(rec, list(rec.dtype.names), lambda f, k: f[k],
                 lambda k: _array_problem(rec[k]), lambda k: _strings.is_text(rec[k]))
