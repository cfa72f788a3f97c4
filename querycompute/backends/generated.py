"""What every backend that runs generated GPU source shares: rendering a pass once (per
backend object) into a codegen KernelSet, its source text and its launch shapes.

Codegen errors (a type the dialect lacks, e.g. float64 on Metal) become QueryErrors that name
the backend and the type."""
from __future__ import annotations

from querycompute._codegen import launch as L
from querycompute._codegen.gpu import render
from querycompute._codegen.program import Pass

from ..errors import codegen_errors
from .base import Backend


class GeneratedSourceBackend(Backend):
    """A Backend whose kernels are codegen's `dialect` (cuda, opencl, metal)."""

    def __init__(self):
        self._sets: dict[Pass, L.KernelSet] = {}

    def kernel_set(self, p: Pass) -> L.KernelSet:
        ks = self._sets.get(p)
        if ks is None:
            with codegen_errors(self.name):
                ks = render(p, self.dialect)
            self._sets[p] = ks
        return ks

    def source(self, p: Pass) -> str:
        return self.kernel_set(p).source

    def launch_shape(self, p: Pass, n: int) -> list[dict]:
        return L.launch_shapes(self.kernel_set(p), n)
