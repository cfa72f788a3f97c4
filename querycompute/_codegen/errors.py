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


class InvalidName(CodegenError):
    """A name in the Pass is not a valid C identifier."""
