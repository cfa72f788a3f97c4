"""Membership in lambdas: `v in (1, 5, 9)`, `v not in codes`, `np.isin(v, codes)`.

A captured value set (tuple, list, set, frozenset or 1-D NumPy array of numbers) is a table of
kernel parameters, never compiled-in constants: `expand` (called by capture.py for the names a
lambda uses on the right of `in` / as np.isin's second argument) puts a `Members` record in
the lambda's env under the name, and each element under "<name>[i]". The translator makes
each "<name>[i]" a parameter like any captured scalar, so a new set of the same size bucket
and element types reuses the compiled kernel; capture_key reads only the bucket and the types.

The table is padded to a power of two (`bucket`) with copies of its last element (a copy
changes no answer), so a set that grows from 5 to 8 values keeps its kernel. The kernel tests
`x == t0 or x == t1 or ...` over the bucket: comparisons a GPU dialect spells like any other,
with no array parameter in the kernel ABI. At most MAX_MEMBERS values: a larger set is a join.

Semantics (DESIGN.md section 4, NumPy's): `x in s` is Python's `any(x == c for c in s)` on
NumPy scalars: each Python number is a weak scalar (NEP 50: `float32_x in (0.1,)` compares in
float32, `uint8_x in (300,)` is False), a NumPy scalar or an array's element is typed. `np.isin`
converts the set with np.asarray first, so its elements all have that array's dtype
(`np.isin(float32_x, (0.1,))` compares in float64). NaN is in no set; -0.0 == 0.0.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Optional

import numpy as np

# Larger value sets are a semi-join (intersect_by) or a join, not a kernel's parameters: the
# cpu's count over 1e7 int32 values took 37 ms with 32 values, 480 ms with 64 (np.isin: 100 ms).
MAX_MEMBERS = 32
CONTAINERS = (tuple, list, set, frozenset, np.ndarray)
NUMBERS = (bool, int, float, np.bool_, np.integer, np.floating)
INSTEAD = ("put the values in a query and keep the matching rows with a join on them "
           "(q.join(qc.query(values), key, lambda c: c, ...)) or the semi-join .intersect_by")


@dataclass(frozen=True)
class Members:
    """A captured value set, as capture_values puts it in a lambda's env: its elements are
    env["<name>[i]"] for i < bucket. `dtype` is np.asarray(values).dtype (np.isin's), or
    None when that is not a number type; `refused` says why the set can't be a table."""
    kind: str                   # the container's type name, for messages
    size: int                   # how many values the set holds
    bucket: int                 # how many parameters the kernel has for it
    dtype: Optional[str]
    refused: Optional[str] = None

    def key(self) -> tuple:
        return ("members", self.bucket, self.dtype, self.refused is None)


def member_names(body: ast.expr, stmts: tuple = ()) -> frozenset:
    """The names a lambda tests membership in: `x in name`, `x not in name`, `isin(x, name)`."""
    out = set()
    for part in (*stmts, body):
        for n in ast.walk(part):
            if isinstance(n, ast.Compare):
                for op, right in zip(n.ops, n.comparators):
                    if isinstance(op, (ast.In, ast.NotIn)) and isinstance(right, ast.Name):
                        out.add(right.id)
            elif isinstance(n, ast.Call) and len(n.args) >= 2 and isinstance(n.args[1], ast.Name):
                f = n.func
                if (isinstance(f, ast.Attribute) and f.attr == "isin") or \
                        (isinstance(f, ast.Name) and f.id == "isin"):
                    out.add(n.args[1].id)
    return frozenset(out)


def bucket(size: int) -> int:
    return 0 if size == 0 else 1 << (size - 1).bit_length()


def expand(out: dict, name: str, obj) -> None:
    """Put obj (a value set captured as `name`) into `out` as a Members record and its
    padded elements; anything else stays as it is (the translator names what it is)."""
    if not isinstance(obj, CONTAINERS):
        return
    kind = type(obj).__name__
    if isinstance(obj, np.ndarray):
        if obj.ndim != 1:
            out[name] = Members(kind, obj.size, 0, None,
                                f"is a {obj.ndim}-D array of shape {obj.shape}; a value set is 1-D")
            return
        if obj.dtype.kind not in "biuf":
            out[name] = Members(kind, obj.size, 0, None,
                                f"is an array of {obj.dtype}; membership is tested on numbers "
                                f"(bool, int, float)")
            return
        items = list(obj[:MAX_MEMBERS + 1])
        dtype = obj.dtype.name
    else:
        items = list(obj) if len(obj) <= MAX_MEMBERS else []
        if items and all(type(v) is str for v in items):
            items = sorted(items)                   # (a set's order is no one's: fix it)
            n = bucket(len(items))                  # strings: tested on a string column's
            out[name] = Members(kind, len(obj), n, "str")   # codes (frontend/strings.py)
            for i in range(n):
                out[f"{name}[{i}]"] = items[min(i, len(items) - 1)]
            return
        bad = next((v for v in items if not isinstance(v, NUMBERS)), None)
        if bad is not None:
            what = "strings" if isinstance(bad, (str, bytes)) else f"a {type(bad).__name__}"
            out[name] = Members(kind, len(obj), 0, None,
                                f"holds {bad!r}: membership is tested on numbers (bool, int, "
                                f"float); {what} are not supported in a value set")
            return
        dtype = _asarray_dtype(items)
    size = len(obj)
    if size > MAX_MEMBERS:
        out[name] = Members(kind, size, 0, None,
                            f"holds {size} values; a value set in a lambda holds at most "
                            f"{MAX_MEMBERS} (kernel parameters); {INSTEAD}")
        return
    n = bucket(size)
    out[name] = Members(kind, size, n, dtype)
    for i in range(n):
        out[f"{name}[{i}]"] = items[min(i, size - 1)]


def _asarray_dtype(items: list) -> Optional[str]:
    kinds = {type(v) for v in items}
    if kinds == {int} and all(-2 ** 63 <= v < 2 ** 63 for v in items):
        return "int64"                  # the common cases without building an array
    if kinds == {float}:
        return "float64"
    try:
        d = np.asarray(items).dtype
    except (OverflowError, ValueError, TypeError):
        return None
    return d.name if d.kind in "biuf" else None
