"""64-bit sums of narrow integers in two 32-bit words, for dialects without 64-bit types (WGSL).

NumPy sums bool and integers of at most 32 bits in int64 (uint32 in uint64), and means them
in float64. A dialect with no 64-bit type (`CAPS.int64` False on its printer) still computes
those sums exactly: the accumulator is a pair of uint32 words (lo, hi) holding the sum's
two's-complement bits, and every combine is a 64-bit add spelled in 32-bit arithmetic:

    hi = hi + src_hi + (lo + src_lo < src_lo)      (the carry out of the low word)
    lo = lo + src_lo

An element x contributes (u32(x), x < 0 ? 0xFFFFFFFF : 0): its sign extension to 64 bits.
Partials, the block trees and the finalize kernel combine word pairs the same way, so the
result is exact whatever the grid (the add is associative and commutative mod 2^64). The
host assembles the words (`assemble`) with NumPy's wrap-around: int64 / uint64 from the
bits, float64 (a mean of integers) from the exact integer sum, rounded once (NumPy's
pairwise float64 sum is the same whenever it is exact, i.e. below 2^53).

Sums whose VALUES are 64-bit (float64 data, int64 columns, `v + 1` on a bool promoted to
int64) are not narrow sums: the dialect's pass check refuses them with the type named.
"""
from __future__ import annotations

import numpy as np

from ... import dtypes as D
from ...ir import expr as E
from ...ir import kernel_ir as K
from ...launch import ResultSlot
from ...lower.block import Acc
from ...ir.program import WIDE, narrow_cast, narrow_value   # (which sums are narrow: program.py)

__all__ = ["WIDE", "ROLE", "narrow_value", "narrow_cast", "two_word_acc", "assemble"]
ROLE = "words"                              # launch.ResultSlot role: k = 0 low word, 1 high word
_ALL_ONES = 0xFFFFFFFF


def _u32(v) -> E.Const:
    return E.Const(v, "uint32")


def two_word_acc(j: int, agg, x: E.Expr, name: str):
    """make_acc's tuple (accumulator, contribution, partial dtypes, result slots) for sum agg
    number j over the narrow expression `x` (already renamed to kernel locals)."""
    lo, hi = K.KVar(f"{name}_lo", "uint32"), K.KVar(f"{name}_hi", "uint32")

    def combine(src):
        s_lo, s_hi = src
        mine_lo, mine_hi = E.Var(lo.name, "uint32"), E.Var(hi.name, "uint32")
        low = E.Binary("add", mine_lo, s_lo, "uint32")
        carry = E.Cast(E.Compare("lt", low, s_lo), "uint32")
        high = E.Binary("add", E.Binary("add", mine_hi, s_hi, "uint32"), carry, "uint32")
        # hi first: it reads the old low word
        return [K.Assign(hi, K.Elem(high)), K.Assign(lo, K.Elem(low))]

    if D.is_signed(x.dtype):
        sign = E.Where(E.Compare("lt", x, E.Const(0, x.dtype)), _u32(_ALL_ONES), _u32(0), "uint32")
    else:
        sign = _u32(0)
    acc = Acc((lo, hi), (K.KConst(0, "uint32"), K.KConst(0, "uint32")), combine)
    slots = tuple(ResultSlot(j, ROLE, "uint32", k, wide=agg.dtype) for k in (0, 1))
    return acc, (E.Cast(x, "uint32"), sign), ("uint32", "uint32"), slots


def assemble(lo, hi, dtype: str):
    """The sum of result dtype `dtype` from its two words (NumPy's wrap-around for int64 /
    uint64; a float64 from the exact signed integer)."""
    bits = (int(hi) & _ALL_ONES) << 32 | (int(lo) & _ALL_ONES)
    if dtype == "uint64":
        return np.uint64(bits)
    signed = bits - (1 << 64) if bits >> 63 else bits
    return np.dtype(dtype).type(signed)
