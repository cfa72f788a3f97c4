"""The kernel-IR names every scan kernel shares (ops/scan/gpu.py builds the tiles, the
reduce-then-scan kernels and the downsweep; ops/scan/lookback_gpu.py the CUDA look-back)."""
from __future__ import annotations

from ...ir import kernel_ir as K

N = K.KVar("n", "int64")
TILE = K.KVar("tile", "int64")              # the tile this block scans
BASE = K.KVar("base", "int64")              # this thread's first element
VALID = K.KVar("valid", "bool")             # this thread has elements
NUM_BLOCKS = K.KVar("num_blocks", "int64")
SH = "sh_scan"                              # the block scan's shared array


def as_i64(e) -> K.KExpr:
    return K.KCast(e, "int64")
