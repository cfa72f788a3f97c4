"""The GPU dialects by name: each printer class (its table of spellings) and the capabilities
it declares (`CAPS`: capabilities.DialectCaps). The ops take a dialect's name and look it up
here; no dialect module imports the ops, so they import this at module level."""
from __future__ import annotations

from ..capabilities import DialectCaps
from .c_family import CFamily
from .cuda import Cuda
from .metal import Metal
from .opencl import OpenCL
from .wgsl import Wgsl

DIALECTS: dict[str, type[CFamily]] = {cls.name: cls for cls in (Cuda, OpenCL, Metal, Wgsl)}


def printer(dialect: str) -> CFamily:
    """A fresh printer of `dialect` (one prints one KernelSet)."""
    try:
        return DIALECTS[dialect]()
    except KeyError:
        raise ValueError(f"unknown GPU dialect {dialect!r}; expected one of {', '.join(DIALECTS)}") from None


def caps(dialect: str) -> DialectCaps:
    """What `dialect` declares it has (KeyError for a name no GPU dialect has)."""
    return DIALECTS[dialect].CAPS
