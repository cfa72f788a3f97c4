"""String columns, dictionary-encoded when the query binds (DESIGN.md section 3, Strings).

A table column of text (pandas object / `str` / `string` / categorical of strings; pyarrow
string, large_string, string_view and dictionary of strings; polars String, Categorical and
Enum; NumPy `U`, `S` (read as ASCII) and object arrays of str) is read as two parts on every
call:

- `codes`: an int32 array, one per row, the only thing a kernel sees;
- `dictionary`: the distinct strings, sorted (an object array of Python str).

The dictionary is *sorted* (Python's str order: code points), so code order is string order:
`s < "M"` and `s.startswith("ab")` become code ranges, `==` a code compare, and ordering or
grouping by codes orders and groups by the strings. What a kernel compares a code with is a
kernel parameter computed from this call's dictionary (frontend/strings.py), so new data never
recompiles and never reads a stale code. Results decode back with `dictionary[codes]`.

Dictionary inputs (categorical / Arrow dictionary / polars Categorical and Enum) keep their
codes: only their dictionary is sorted (and deduplicated) and the codes mapped once through
the permutation, one gather. Nulls are refused as everywhere (`null_error`).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

from ..artifacts import ArtifactCache
from ..errors import InputTypeError
from . import source_adapters as _adapters      # (null_error; it imports this module too)


@dataclass(frozen=True)
class Encoded:
    """One string column of one call: int32 codes into `dictionary` (sorted distinct str)."""
    codes: np.ndarray
    dictionary: np.ndarray


def _pkg(x) -> str:
    return type(x).__module__.partition(".")[0]


def is_text(col) -> bool:
    """Whether a table column (any input kind) holds strings, read from its type only (an
    object array: its first element)."""
    pkg = _pkg(col)
    dt = getattr(col, "dtype", None)
    if pkg == "pyarrow" and hasattr(col, "type"):
        return _arrow_text(col.type)
    if pkg == "polars" and dt is not None:
        return str(dt).split("(")[0] in ("String", "Utf8", "Categorical", "Enum")
    if pkg == "pandas" and dt is not None:
        name = str(dt)
        if name == "category":
            cats = col.cat.categories
            return len(cats) > 0 and _text_kind(np.asarray(cats))
        if name in ("str", "string") or name.startswith(("string[", "large_string[")):
            return True
        return name == "object" and _text_kind(col.to_numpy())
    if isinstance(col, (list, tuple)):
        return len(col) > 0 and isinstance(col[0], str)
    return isinstance(col, np.ndarray) and col.ndim == 1 and _text_kind(col)


def _text_kind(a: np.ndarray) -> bool:
    if a.dtype.kind in "US":
        return True
    return a.dtype == object and (len(a) == 0 or isinstance(a[0], str))   # (empty: no numbers)


def _arrow_text(t) -> bool:
    pa = sys.modules["pyarrow"]
    if pa.types.is_dictionary(t):
        return _arrow_text(t.value_type)
    return pa.types.is_string(t) or pa.types.is_large_string(t) or \
        getattr(pa.types, "is_string_view", lambda _: False)(t)


def encode(col, what: str) -> Encoded:
    """The codes and sorted dictionary of string column `col`; nulls and non-strings refused
    with `what` (the column's name) in the message."""
    pkg = _pkg(col)
    if pkg == "polars":
        if col.null_count():
            raise _adapters.null_error(what, col.null_count())
        col = col.to_arrow()
        pkg = "pyarrow"
    if pkg == "pyarrow":
        return _arrow(col, what)
    if pkg == "pandas":
        t = getattr(col.dtype, "pyarrow_dtype", None) or _pa_type_of(col)
        if t is not None and hasattr(col.array, "__arrow_array__") and _arrow_text(t):
            return _arrow(col.array.__arrow_array__(), what)     # Arrow-backed str: zero-copy
        if str(col.dtype) == "category":
            codes = col.cat.codes.to_numpy()
            if len(codes) and codes.min() < 0:
                raise _adapters.null_error(what, int((codes < 0).sum()))
            return _sorted(np.asarray(col.cat.categories, dtype=object), codes, what)
        codes, uniques = col.factorize(sort=False)
        if len(codes) and codes.min() < 0:
            raise _adapters.null_error(what, int((codes < 0).sum()))
        return _sorted(np.asarray(uniques, dtype=object), codes, what)
    a = np.asarray(col)
    if a.dtype.kind == "S":
        try:
            a = a.astype("U")
        except UnicodeDecodeError:
            raise InputTypeError(f"{what} is a NumPy bytes (S) array with non-ASCII bytes; "
                                 f"decode it to str first (np.char.decode(a, 'utf-8'))") from None
    if a.dtype == object:
        bad = [v for v in a if type(v) is not str]          # (one pass: nulls and other types)
        if bad:
            nulls = sum(1 for v in bad if v is None or (isinstance(v, float) and v != v))
            if nulls:
                raise _adapters.null_error(what, nulls)
            raise InputTypeError(f"{what} is an object array of str holding {bad[0]!r} "
                                 f"({type(bad[0]).__name__}); a string column holds str only")
    pd = sys.modules.get("pandas")
    if pd is not None:                  # a hash table, then a sort of the distinct values only:
        codes, uniques = pd.factorize(a)    # 1e6 rows of 1e4 words: 0.15 s, np.unique 1.4 s
        return _sorted(np.asarray(uniques, dtype=object), codes, what)
    uniq, inverse = np.unique(a, return_inverse=True)
    return Encoded(inverse.astype(np.int32).ravel(), uniq.astype(object))


def _pa_type_of(col):
    """The Arrow type behind a pandas Arrow-backed string column (pandas' `str` dtype with
    pyarrow storage, `string[pyarrow]`), else None."""
    if getattr(col.dtype, "storage", None) not in ("pyarrow", "pyarrow_numpy") or "pyarrow" not in sys.modules:
        return None
    return sys.modules["pyarrow"].string()


# Encodings of Arrow string columns, kept across calls: Arrow buffers never change, so the
# same buffers (addresses and sizes, their holders kept alive by the entry so an address is
# never reused meanwhile) are the same strings. 1e6 rows of 1e4 words: ~37 ms a call saved.
# Bounded by memory (the codes, and the dictionary's strings at about STR_BYTES each: up to
# CACHED_BYTES in all) and by rows (a larger column is encoded every call); RUNTIME.clear()
# drops them. NumPy / pandas object / categorical inputs can change in place: never kept.
STR_BYTES = 96
CACHED_BYTES = 512 << 20
CACHED_ROWS = 1 << 23


def _weight(entry) -> int:
    encoded = entry[0]
    return encoded.codes.nbytes + STR_BYTES * len(encoded.dictionary)


_ENCODED = ArtifactCache("sources: encoded Arrow string columns", 256, _weight, CACHED_BYTES)


def _buffers(col) -> tuple:
    """(a key naming col's exact Arrow buffers, the buffers) of an Array or ChunkedArray."""
    pa = sys.modules["pyarrow"]
    parts, held = [], []
    for c in (col.chunks if isinstance(col, pa.ChunkedArray) else (col,)):
        for a in (c, c.dictionary) if pa.types.is_dictionary(c.type) else (c,):
            bufs = a.buffers()
            held += [b for b in bufs if b is not None]
            parts.append((str(a.type), a.offset, len(a),
                          tuple(None if b is None else (b.address, b.size) for b in bufs)))
    return tuple(parts), held


def _arrow(col, what: str) -> Encoded:
    if col.null_count:
        raise _adapters.null_error(what, col.null_count)
    if len(col) > CACHED_ROWS:
        return _arrow_encode(col, what)
    key, held = _buffers(col)
    hit = _ENCODED.get(key)
    if hit is not None:
        return hit[0]
    return _ENCODED.put(key, (_arrow_encode(col, what), held))[0]


def _arrow_encode(col, what: str) -> Encoded:
    pa = sys.modules["pyarrow"]
    import pyarrow.compute as pc        # (pyarrow is imported: the column is one of its own)
    if not pa.types.is_dictionary(col.type):
        col = pc.dictionary_encode(col)
    if isinstance(col, pa.ChunkedArray):
        if col.num_chunks == 0:
            return Encoded(np.zeros(0, np.int32), np.zeros(0, object))
        col = col.unify_dictionaries()
        indices = np.concatenate([c.indices.to_numpy(zero_copy_only=False) for c in col.chunks])
        dictionary = col.chunk(0).dictionary
    else:
        indices, dictionary = col.indices.to_numpy(zero_copy_only=False), col.dictionary
    return _sorted(np.asarray(dictionary.to_pylist(), dtype=object), indices, what)


def _sorted(values: np.ndarray, codes: np.ndarray, what: str) -> Encoded:
    """A dictionary in any order (and maybe with repeats) and codes into it -> the sorted
    distinct dictionary and the codes mapped onto it (one gather)."""
    bad = next((v for v in values if type(v) is not str), None)
    if bad is not None:
        raise InputTypeError(f"{what} holds {bad!r} ({type(bad).__name__}) among its strings; "
                             f"a string column holds str only")
    if len(values) == 0:
        return Encoded(np.zeros(len(codes), np.int32), np.zeros(0, object))
    uniq, inverse = np.unique(values, return_inverse=True)
    return Encoded(inverse.astype(np.int32).ravel()[codes], uniq.astype(object))


def codes_in(dictionary: np.ndarray, strings) -> np.ndarray:
    """The int32 codes of `strings` (an object array of str) in a sorted `dictionary`, -1
    where a string is not in it: how a join matches the other side's string keys with this
    side's codes (a hash lookup through pandas when it is loaded, else binary searches)."""
    strings = np.asarray(strings, dtype=object)
    if len(dictionary) == 0 or len(strings) == 0:
        return np.full(len(strings), -1, np.int32)
    pd = sys.modules.get("pandas")
    if pd is not None:
        return pd.Index(dictionary).get_indexer(strings).astype(np.int32)
    at = np.minimum(np.searchsorted(dictionary, strings), len(dictionary) - 1)
    return np.where(dictionary[at] == strings, at, -1).astype(np.int32)


def decode(raw, strings: tuple, dictionaries: dict, grouped: bool, keep: bool = False):
    """A run's raw results with the string columns' codes as strings: `strings` holds (index,
    column) of the output columns (of the keys for a group_by's raw (keys, columns, counts))
    that hold codes; each becomes `dictionary[codes]`, an object array of str (`keep`: an
    Encoded of the codes and the dictionary, for a consumer that encodes them anyway)."""
    def text(codes, column):
        host = np.asarray(codes.get() if hasattr(codes, "get") and not isinstance(codes, np.ndarray) else codes)
        if keep:
            return Encoded(host.astype(np.int32, copy=False), dictionaries[column])
        return dictionaries[column][host]
    if grouped:
        keys = list(raw[0])
        for i, column in strings:
            keys[i] = text(keys[i], column)
        return (keys,) + tuple(raw[1:])
    out = list(raw)
    for i, column in strings:
        out[i] = text(out[i], column)
    return out
