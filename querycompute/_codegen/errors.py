"""Errors codegen raises on purpose; the query layer converts them to QueryError subclasses."""
from __future__ import annotations


class CodegenError(Exception):
    """Base class: a Pass can't be printed in the requested dialect."""


class UnsupportedType(CodegenError):
    """The dialect has no such type (e.g. float64 on Metal)."""

    def __init__(self, dtype: str, dialect: str, hint: str = ""):
        self.dtype = dtype
        self.dialect = dialect
        super().__init__(f"{dialect} kernels cannot use {dtype}"
                         + (f": {hint}" if hint else "")
                         + "; cast to a supported type or run this query on another backend")


class HostOnly(CodegenError):
    """The pass reads a table parameter (expr.Lookup: a string function's value per distinct
    string), which kernels of this dialect don't take."""

    def __init__(self, dialect: str):
        super().__init__(f"{dialect} kernels don't read string functions' tables (s.endswith(x), "
                         f"\"x\" in s, len(s): one value per distinct string, computed on the host); "
                         f"run this query on cpu or numpy (auto does), or compare the string "
                         f"column by ==, <, `in` a set or .startswith(), which are code ranges")


class InvalidName(CodegenError):
    """A name in the Pass is not a valid C identifier."""
