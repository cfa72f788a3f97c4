"""The `metal` backend: Metal Shading Language source generation only.

This version has no Metal runtime binding, so `availability()` is always False (with the
reason) and `prepare()` raises BackendUnavailableError; `source()` and `launch_shape()` work
on any machine. The generated MSL is verified without Apple hardware by compiling it as C++
against a compatibility header and running it on CPU threads (tests/harness/, see
docs/backends.md).
"""
from __future__ import annotations

import platform

from querycompute._codegen.ir.program import Pass

from ...errors import BackendUnavailableError
from ..gpu.generated import GeneratedSourceBackend
from ..base import BackendCaps, Prepared


class MetalBackend(GeneratedSourceBackend):
    name = "metal"
    dialect = "metal"
    is_gpu = False           # never picked by "auto": it cannot run kernels in this version
    # MSL source only: no runtime, so no column operations or long rows of its own
    caps = BackendCaps(device="gpu", stage_runtime=False)

    def availability(self) -> tuple[bool, str]:
        where = ("this is macOS, but " if platform.system() == "Darwin"
                 else f"this machine runs {platform.system() or 'an unknown OS'}, not macOS, and ")
        return False, (f"{where}querycompute {_version()} has no Metal runtime: the metal "
                       "backend generates MSL source only (.source('metal')); run queries on "
                       "'cpu', 'opencl' or 'cuda'")

    def prepare(self, p: Pass) -> Prepared:
        self.kernel_set(p)        # type errors (float64) first: they hold on any machine
        raise BackendUnavailableError(f"backend 'metal' can't run here: {self.availability()[1]}")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("querycompute")
    except PackageNotFoundError:
        return "(source tree)"
