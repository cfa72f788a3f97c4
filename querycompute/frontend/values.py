"""What a lambda parameter or result can be while it is being translated.

A `Scalar` is one typed expression. `weak` records NEP 50 "weak" Python scalars (literals,
captured Python numbers, results of float()/int()/round()/math.*): they adopt the dtype of a
NumPy-typed operand (float32 * 2 -> float32) and only fall back to their own concrete dtype
(bool, int64, float64 -- the one in `expr.dtype`) when nothing else decides.
Tuples and records are structure only: they exist while translating (indexing, field access,
building a select's result) and are flattened by the caller.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional, Union

from querycompute._codegen.ir.expr import Expr

WEAK_KINDS = ("bool", "int", "float")
# The concrete dtype a weak Python scalar materialises as when nothing else decides.
WEAK_DTYPE = {"bool": "bool", "int": "int64", "float": "float64"}


@dataclass(frozen=True)
class Exact:
    """A weak Python int/bool built only from captured values and constants (`t * 4 // 8`):
    its value is computed with Python's exact integers at launch (plan.param_values), never in
    the kernel, so it can't wrap. `tree` is ("cap", name) | ("const", v) | ("bin", op, a, b) |
    ("un", op, a); `param(key, dtype)` makes the kernel parameter that carries a value derived
    from it (the translator's new_param; key = ("exact", role, tree, ...))."""
    tree: tuple
    param: Callable = field(compare=False, hash=False, repr=False)


@dataclass(frozen=True)
class Scalar:
    expr: Expr
    weak: Optional[str] = None      # None, or a WEAK_KINDS entry
    exact: Optional[Exact] = None   # a weak int/bool of captures and constants (see Exact)
    # A date or a duration: its time type ("datetime64[us]", "timedelta64[D]"); the expr is
    # then its int64 ticks (frontend/datetimes.py).
    time: Optional[str] = None

    @property
    def dtype(self) -> str:
        return self.expr.dtype


@dataclass(frozen=True)
class StrCodes(Scalar):
    """A string column's value: its int32 code into the column's sorted dictionary of this
    call (sources/string_columns.py). Only the string operations of frontend/strings.py read
    it (each a code compare against kernel parameters computed from the dictionary); passed
    through as it is (a field, a key) it is decoded back to strings in the results."""
    column: str = ""


@dataclass(frozen=True)
class TupleVal:
    items: tuple["Value", ...]


@dataclass(frozen=True)
class RecordVal:
    fields: tuple[tuple[str, "Value"], ...]     # ordered (name, value)
    # A table's columns a kernel can't read (strings, nulls...): name -> why; reading one is
    # an error that says so (sources.Source.skipped), not "no such field".
    skipped: tuple[tuple[str, str], ...] = ()

    def get(self, name: str):
        for key, value in self.fields:
            if key == name:
                return value
        return None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(k for k, _ in self.fields)


Value = Union[Scalar, TupleVal, RecordVal]


@dataclass(frozen=True)
class OuterSide:
    """A left join's other side `b` in result(a, b): its value (NaN / 0 / False fields where
    the row found no match) and `matched`, a bool Scalar per row. `b is None`, `b is not None`
    and `qc.matched(b)` read `matched` (translate.py); every other use of b reads `value`."""
    value: Value
    matched: Scalar


def matched(b) -> bool:
    """Inside `left_join(..., result=lambda a, b: ...)`: whether this row of a found a match
    (the same test as `b is not None`). Called in plain Python, `b is not None`.

    Args:
        b: The result lambda's other-side parameter.

    Returns:
        A bool per row: True where the row matched, False where b's fields hold the fill
        values (NaN / 0 / False).

    Example:
        ```python
        qc.query(orders).left_join(qc.query(users), lambda o: o.uid, lambda u: u.id,
                                   lambda o, u: qc.matched(u)).count(lambda m: m)
        ```
    """
    return b is not None
