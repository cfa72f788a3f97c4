"""What a lambda parameter or result can be while it is being translated.

A `Scalar` is one typed expression. `weak` records NEP 50 "weak" Python scalars (literals,
captured Python numbers, results of float()/int()/round()/math.*): they adopt the dtype of a
NumPy-typed operand (float32 * 2 -> float32) and only fall back to their own concrete dtype
(bool, int64, float64 -- the one in `expr.dtype`) when nothing else decides.
Tuples and records are structure only: they exist while translating (indexing, field access,
building a select's result) and are flattened by the caller.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

from querycompute._codegen.expr import Expr

WEAK_KINDS = ("bool", "int", "float")
# The concrete dtype a weak Python scalar materialises as when nothing else decides.
WEAK_DTYPE = {"bool": "bool", "int": "int64", "float": "float64"}


@dataclass(frozen=True)
class Scalar:
    expr: Expr
    weak: Optional[str] = None      # None, or a WEAK_KINDS entry

    @property
    def dtype(self) -> str:
        return self.expr.dtype


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
