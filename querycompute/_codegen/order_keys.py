"""The order-preserving key transform: the one home of the rule and of every spelling of it.
Sort, top-k, distinct, group_by and join keys (all backends), and the float min/max keys of
the numba reductions, are this transform; no other file spells its steps or its constants.

For a key column of dtype d, `bits_dtype(d)` is the unsigned type of d's width (bool and
int8/uint8: uint8; float16/int16/uint16: uint16; ...). `transform(x, descending)` maps every
value to bits such that comparing the bits as unsigned integers orders the values the way
DESIGN.md section 3 wants:

    1. NaN (floats)          -> all ones (the largest bits), in BOTH directions: NaN last
    2. -0.0 (floats)         -> the bits of +0.0 first (so -0.0 == 0.0; stability decides)
    3. floats                -> negative: ~bits; positive: bits | sign bit
       signed ints           -> bits ^ sign bit
       unsigned ints, bool   -> bits
    4. descending, not NaN   -> ~(the bits of step 3)  (never all ones: that would be a NaN)

Equal keys give equal bits and unequal keys unequal bits (all NaNs are one value), so
`distinct` tests equality on these bits too. A sort is stable: among equal bits the element
that came first stays first (LINQ's OrderBy and OrderByDescending are both stable).
A multi-key sort (then_by, tuple keys) orders by the first key's bits, then the next's...:
an LSD radix sort runs the passes of the LAST key first.

Every spelling computes the steps with integer operations on the key's raw bits, from the
numbers `constants(d)` gives: the key kind (UNSIGNED, SIGNED, FLOAT), the sign bit, all ones
and, for floats, the bits of +inf (a float's magnitude above them is a NaN). Written without
branches: m = ones for a negative float, sign for a signed int or a positive float, 0
otherwise; bits ^ m is step 3 (for a positive float bits ^ sign == bits | sign).

The float min/max reductions of the numba dialect use step 3 alone, read as a SIGNED integer
of the float's width: key = bits ^ ((bits >> (w - 1)) & (sign - 1)) (an arithmetic shift),
which is step 3's bits ^ sign. It orders like the floats with -0.0 just below +0.0 (no
step 2: min/max keep the zero they saw) and NaN handled apart (a flag: the result is NaN);
the same operation turns a key back into the float's bits.

The spellings, all here:
    transform(x, descending)        NumPy reference over whole columns
    stable_order, first_occurrence  the references of a sort and of distinct built on it
    run_starts(keys, order)         where runs of equal keys start in a stable sort (group_by's
                                    groups, distinct's first occurrences: every host caller)
    constants(dtype)                (kind, sign, ones, inf): what the other spellings read
    ir_bits(dtype, desc, raw, name) kernel IR statements (the GPU sort, top-k, distinct,
                                    group_by and join kernels call it)
    NUMBA_SOURCE                    numba's `order_bits(u, kind, desc, sign, ones, inf)`, the
                                    text the cpu backend's kernel modules start with
    numba_call(raw, dtype, desc)    the text of a call of it with dtype's constants
    minmax_key_text(b, width)       the signed min/max key (and its inverse) as numba text
    minmax_key_llvm(b, bits, width) the same as LLVM IR (llvmlite), for the llvm dialect
    minmax_key(value, dtype)        the same key of a Python float, for printing constants
"""
from __future__ import annotations

import numpy as np

from . import dtypes
from .ir import kernel_ir as K

_BITS = {1: "uint8", 2: "uint16", 4: "uint32", 8: "uint64"}
UNSIGNED, SIGNED, FLOAT = 0, 1, 2           # key kinds (bool is UNSIGNED)
_EXP_BITS = {2: 5, 4: 8, 8: 11}             # float16/32/64 exponent widths


def bits_dtype(dtype: str) -> str:
    """The unsigned type whose values order keys of `dtype`."""
    if dtype == "bool":
        return "uint8"
    return _BITS[dtypes.itemsize(dtype)]


def raw_bits(x: np.ndarray) -> np.ndarray:
    """The keys' raw bits as the unsigned type of their width (a view of x made contiguous):
    what the cpu kernels sort and hash, computing order bits where they need an order."""
    x = np.ascontiguousarray(x)
    return x.view(bits_dtype(str(x.dtype)))


def bits_width(dtype: str) -> int:
    """Bits of `dtype`'s order bits (8 for bool)."""
    return np.dtype(bits_dtype(str(dtype))).itemsize * 8


def constants(dtype) -> tuple[int, int, int, int]:
    """(kind, sign, ones, inf) of a key dtype, as Python ints: UNSIGNED / SIGNED / FLOAT, the
    sign bit and all ones of its width, and +inf's bits (0 for integers)."""
    d = np.dtype(dtype)
    w = bits_width(str(d))
    if d.kind == "f":
        e = _EXP_BITS[d.itemsize]
        return FLOAT, 1 << (w - 1), (1 << w) - 1, ((1 << e) - 1) << (w - 1 - e)
    return (SIGNED if d.kind == "i" else UNSIGNED), 1 << (w - 1), (1 << w) - 1, 0


def transform(x: np.ndarray, descending: bool = False) -> np.ndarray:
    """The order bits of a key column (numpy reference of the steps above)."""
    x = np.asarray(x)
    kind, sign, ones, inf = constants(x.dtype)
    dt = np.dtype(bits_dtype(str(x.dtype)))
    sign, ones = dt.type(sign), dt.type(ones)
    if x.dtype == np.bool_:
        t = x.view(np.uint8).copy()
    elif kind == UNSIGNED:
        t = x.astype(dt, copy=True)
    elif kind == SIGNED:
        t = x.view(dt) ^ sign
    else:
        nan = np.isnan(x)
        bits = (x + x.dtype.type(0.0)).view(dt)       # -0.0 + 0.0 == +0.0 (round to nearest)
        t = np.where(bits & sign, ~bits, bits | sign).astype(dt, copy=False)
        if descending:
            t = ~t
        t[nan] = ones
        return t
    return ~t if descending else t


def stable_order(keys, descending) -> np.ndarray:
    """The stable sort permutation (int64) of the rows of key columns `keys` (the first key
    primary), each ascending or descending: the reference the backends' sorts must equal."""
    if not keys:
        raise ValueError("stable_order needs at least one key column")
    bits = [transform(k, d) for k, d in zip(keys, descending)]
    return np.lexsort(bits[::-1]).astype(np.int64, copy=False)   # lexsort: last key primary, stable


def run_starts(keys, order) -> np.ndarray:
    """new[i]: row order[i] starts a run of equal keys (equal bits in every key column) in
    the rows put in `order` (a stable sort of the keys: stable_order): group_by's groups and,
    each run's first row, distinct's first occurrences."""
    return _run_starts([transform(k) for k in keys], order)


def _run_starts(bits, order) -> np.ndarray:
    new_run = np.ones(len(order), dtype=bool)
    new_run[1:] = False
    for b in bits:
        s = b[order]
        new_run[1:] |= s[1:] != s[:-1]
    return new_run


def first_occurrence(keys) -> np.ndarray:
    """keep[i]: no j < i has equal bits in every key column (distinct's first occurrence)."""
    n = len(keys[0])
    if n == 0:
        return np.zeros(0, dtype=bool)
    bits = [transform(k) for k in keys]
    order = np.lexsort(bits[::-1])          # stable_order's, the bits made once
    keep = np.empty(n, dtype=bool)
    keep[order] = _run_starts(bits, order)  # the first of each run of equal keys is its smallest index
    return keep


# ---- kernel IR ---------------------------------------------------------------------------------
def register_type(key_dtype: str) -> str:
    """The unsigned register the order bits of `key_dtype` are computed in (GPU kernels)."""
    return "uint64" if dtypes.itemsize(key_dtype) == 8 else "uint32"


def ir_bits(key_dtype: str, descending: bool, raw: K.KExpr, name: str) -> tuple[list, K.KVar]:
    """Kernel IR statements declaring `name`: transform() of the key whose raw bits `raw`
    reads (a KLoad of the bits-typed buffer), widened to register_type(key_dtype). `~` is
    `^ ones` of the key's own width, so the register holds exactly transform()'s bits."""
    r_t = register_type(key_dtype)
    kind, sign, ones, inf = constants(key_dtype)
    c = lambda v: K.KConst(v, r_t)  # noqa: E731
    t = K.KVar(name, r_t)
    stmts = [K.Declare(t, K.KCast(raw, r_t))]
    if kind == FLOAT:
        mag = K.KVar(f"{name}_mag", r_t)
        neg = K.op("!=", K.op("&", t, c(sign)), c(0))
        stmts += [K.Comment("order bits of a float: -0.0 -> +0.0; negative: ~bits, else bits | sign;\n"
                            "descending: ~; NaN (magnitude above inf) -> all ones in both directions"),
                  K.Declare(mag, K.op("&", t, c(sign - 1))),
                  K.Assign(t, K.KSelect(K.op("==", mag, c(0)), c(0), t, r_t)),
                  K.Assign(t, K.KSelect(neg, K.op("^", t, c(ones)), K.op("|", t, c(sign)), r_t))]
        if descending:
            stmts.append(K.Assign(t, K.op("^", t, c(ones))))
        stmts.append(K.Assign(t, K.KSelect(K.op(">", mag, c(inf)), c(ones), t, r_t)))
        return stmts, t
    flip = (sign if kind == SIGNED else 0) ^ (ones if descending else 0)
    if flip:
        stmts.append(K.Assign(t, K.op("^", t, c(flip))))
    return stmts, t


# ---- numba ---------------------------------------------------------------------------------------
NUMBA_SOURCE = f'''
# ---- order bits (querycompute/_codegen/order_keys.py: the rule and all its spellings) --------
import numpy as np
from numba import njit

UNSIGNED, SIGNED, FLOAT = {UNSIGNED}, {SIGNED}, {FLOAT}          # key kinds (bool is UNSIGNED)


@njit(cache=True)
def order_bits(u, kind, desc, sign, ones, inf):
    """order_keys.transform of one raw key `u` (uint of the key's width), as uint64; sign,
    ones, inf: order_keys.constants of the key's dtype. Written without branches (selects of
    loop-invariant choices), so loops vectorise."""
    x = np.uint64(u)
    isf = kind == FLOAT
    nan = isf & ((x & (sign - np.uint64(1))) > inf)
    x = np.uint64(0) if isf & (x == sign) else x
    m = ones if isf & ((x & sign) != np.uint64(0)) else (np.uint64(0) if kind == UNSIGNED else sign)
    t = x ^ m ^ (ones if desc else np.uint64(0))
    return ones if nan else t
'''


def numba_consts(dtype) -> tuple:
    """constants(dtype) as order_bits takes them: the kind, then uint64 sign, ones, inf."""
    kind, sign, ones, inf = constants(dtype)
    return kind, np.uint64(sign), np.uint64(ones), np.uint64(inf)


def numba_call(raw: str, dtype, descending: bool = False) -> str:
    """The numba text of order_bits of the raw key bits `raw` (an expression) of `dtype`."""
    kind, sign, ones, inf = constants(dtype)
    return (f"order_bits({raw}, {kind}, {descending}, np.uint64({sign}), "
            f"np.uint64({ones}), np.uint64({inf}))")


def minmax_key_text(b: str, width: int) -> str:
    """numba text of the float min/max key of the float bits `b` (a signed integer of the
    float's `width`); applied to a key it gives the bits back."""
    return f"{b} ^ (({b} >> {width - 1}) & {(1 << (width - 1)) - 1})"


def minmax_key_llvm(b, bits, width: int):
    """The same key (and inverse) of the float bits `bits` (an llvmlite integer value of the
    float's `width`) as LLVM IR built by the llvmlite IRBuilder `b` (the llvm dialect's float
    min / max: dialects/llvm_ir.py)."""
    return b.xor(bits, b.and_(b.ashr(bits, bits.type(width - 1)), bits.type((1 << (width - 1)) - 1)))


def minmax_key(value: float, dtype: str) -> int:
    """The min/max key of a float32 / float64 value, as a Python int (printed as a constant)."""
    ftype, itype = (np.float64, np.int64) if dtype == "float64" else (np.float32, np.int32)
    b = int(np.array(value, ftype).view(itype))
    width = 64 if dtype == "float64" else 32
    return b ^ ((b >> (width - 1)) & ((1 << (width - 1)) - 1))
