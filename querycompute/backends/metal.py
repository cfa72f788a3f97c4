"""The `metal` backend: Metal Shading Language source generation only.

This version has no Metal runtime binding, so `availability()` is always False (with the
reason) and `prepare()` raises BackendUnavailableError; `source()` and `launch_shape()` work
on any machine. The generated MSL is verified without Apple hardware by compiling it as C++
against a compatibility header and running it on CPU threads (tests/harness/, see
docs/verification.md).
"""
from __future__ import annotations

import platform

from codegen import launch as L
from codegen.errors import CodegenError, UnsupportedType
from codegen.gpu import render
from codegen.program import Pass

from ..errors import BackendUnavailableError, QueryError
from .base import Backend, Prepared


class MetalBackend(Backend):
    name = "metal"
    dialect = "metal"
    is_gpu = False           # never picked by "auto": it cannot run kernels in this version

    def __init__(self):
        self._sets: dict[Pass, L.KernelSet] = {}

    def availability(self) -> tuple[bool, str]:
        where = ("this is macOS, but " if platform.system() == "Darwin"
                 else f"this machine runs {platform.system() or 'an unknown OS'}, not macOS, and ")
        return False, (f"{where}querycompute {_version()} has no Metal runtime: the metal "
                       "backend generates MSL source only (.source('metal')); run queries on "
                       "'cpu', 'opencl' or 'cuda'")

    def kernel_set(self, p: Pass) -> L.KernelSet:
        ks = self._sets.get(p)
        if ks is None:
            try:
                ks = render(p, self.dialect)
            except UnsupportedType as exc:
                raise QueryError(f"metal backend: {exc.dtype} is not supported (Metal has no "
                                 f"{exc.dtype}); cast to a supported type such as float32, or "
                                 f"use the cpu, cuda or opencl backend") from None
            except CodegenError as exc:
                raise QueryError(f"metal backend: {exc}") from None
            self._sets[p] = ks
        return ks

    def source(self, p: Pass) -> str:
        return self.kernel_set(p).source

    def launch_shape(self, p: Pass, n: int) -> list[dict]:
        return L.launch_shapes(self.kernel_set(p), n)

    def prepare(self, p: Pass) -> Prepared:
        self.kernel_set(p)        # type errors (float64) first: they hold on any machine
        raise BackendUnavailableError(f"backend 'metal' can't run here: {self.availability()[1]}")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("querycompute")
    except PackageNotFoundError:
        return "(source tree)"
