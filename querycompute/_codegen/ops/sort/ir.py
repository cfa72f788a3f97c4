"""Kernel IR building blocks of the GPU sort, top-k and distinct kernels (ops/sort/gpu.py,
ops/sort/topk_gpu.py): order bits of a key, a stable in-block sort of one tile by an 8-bit digit, the
digit runs of a sorted tile, and a one-block exclusive scan of per-(row, tile) counts.

Order bits: a key column is bound as its unsigned bits type (float32 as uint32, float16 as
uint16, bool as uint8: buffers are untyped on the device), widened to a 32- or 64-bit
register and transformed by order_keys.ir_bits (called there by the kernels): the rule and
its every spelling live in _codegen/order_keys.py.

Tile sort. A tile is TILE = BLOCK * EPT consecutive rows; its rows enter shared memory as
packed 32-bit words `out << 24 | digit << 16 | slot` (slot: the row's position in the tile;
out: not a live row — past n, or excluded by a top-k prefix). `tile_sort` sorts them stably
by bits first_bit.. first_bit + rounds - 1 with one 1-bit split per round: thread t owns the
EPT consecutive words t * EPT.., counts its zeros, a block-wide prefix sum of those counts
gives each word its place (zeros first, in order, then ones, in order), and the words move
to the other half of a double-length shared array. Splits are stable, so the rounds are an
LSD sort of the tile: stable by slot among equal digits. No atomics: the same tile gives the
same order, so counts and ranks are deterministic.

Digit runs. In a sorted tile, the live words come first, grouped by digit; `digit_runs`
records where each digit's run starts (and ends), which gives both the tile's histogram and
each row's rank among the tile's rows of its digit (its slot minus its run's start).
"""
from __future__ import annotations

from ...ir import kernel_ir as K
from ...launch import BLOCK
from ...lower.block import LID, block_inclusive_scan

RADIX = 256                 # 8-bit digits; BLOCK == RADIX: thread d owns digit d's counters
EPT = 4                     # rows per thread in a tile
TILE = BLOCK * EPT          # rows per tile (< 2**16: a slot fits the packed word)
assert BLOCK == RADIX and TILE <= 1 << 16

SH_KEYS = "sh_keys"         # uint32[2 * TILE]: packed words, two halves for the splits
SH_SCAN = "sh_scan"         # int32[BLOCK]: the splits' prefix sums
SH_START, SH_END = "sh_start", "sh_end"   # int32[RADIX]: digit runs of a sorted tile
DIGIT_BIT, OUT_BIT = 16, 24

U32, I32, I64 = "uint32", "int32", "int64"
GROUP = K.KThread("group_id")


def u32(v: int) -> K.KConst:
    return K.KConst(v, U32)


def shared(with_runs: bool, with_end: bool = False) -> tuple[K.SharedArray, ...]:
    arrays = [K.SharedArray(SH_KEYS, U32, 2 * TILE), K.SharedArray(SH_SCAN, I32, BLOCK)]
    if with_runs:
        arrays.append(K.SharedArray(SH_START, I32, RADIX))
    if with_end:
        arrays.append(K.SharedArray(SH_END, I32, RADIX))
    return tuple(arrays)



def digit_of(bits: K.KExpr, shift: K.KExpr) -> K.KExpr:
    """(bits >> shift) & 255 as a uint32."""
    return K.KCast(K.op("&", K.op(">>", bits, shift), K.KConst(RADIX - 1, bits.dtype)), U32)


def pack(digit: K.KExpr, slot: K.KExpr, out: K.KExpr | None = None) -> K.KExpr:
    word = K.op("|", K.op("<<", digit, u32(DIGIT_BIT)), K.KCast(slot, U32))
    return K.op("|", word, K.op("<<", K.KCast(out, U32), u32(OUT_BIT))) if out is not None else word


def word_digit(word: K.KExpr) -> K.KExpr:
    return K.KCast(K.op("&", K.op(">>", word, u32(DIGIT_BIT)), u32(RADIX - 1)), I32)


def word_slot(word: K.KExpr) -> K.KExpr:
    return K.KCast(K.op("&", word, u32(0xFFFF)), I32)


def word_live(word: K.KExpr) -> K.KExpr:
    return K.op("==", K.op(">>", word, u32(OUT_BIT)), u32(0))


def slots_strided(body) -> K.For:
    """for e in 0..EPT: s = e * BLOCK + lid  (coalesced global accesses)."""
    e, s = K.KVar("e", I32), K.KVar("s", I32)
    return K.For(e, K.i32(0), K.op("<", e, K.i32(EPT)), K.op("+", e, K.i32(1)),
                 (K.Declare(s, K.op("+", K.op("*", e, K.i32(BLOCK)), LID)), *body), unroll=True)


SLOT = K.KVar("s", I32)


# ---- the in-block split sort -----------------------------------------------------------------
def tile_sort(rounds: int, first_bit: int = DIGIT_BIT) -> tuple[list, int]:
    """Statements sorting the TILE words in sh_keys[0, TILE) stably by `rounds` bits from
    `first_bit` (a barrier must precede them); -> (statements, offset of the sorted words:
    0 or TILE)."""
    r, src, dst = K.KVar("round", I32), K.KVar("src", I32), K.KVar("dst", I32)
    zeros, incl, zb = K.KVar("zeros", I32), K.KVar("incl", I32), K.KVar("zb", I32)
    total, e, s, w, bit = K.KVar("total0", I32), K.KVar("e", I32), K.KVar("s", I32), K.KVar("w", U32), K.KVar("bit", I32)
    own = lambda body: K.For(e, K.i32(0), K.op("<", e, K.i32(EPT)), K.op("+", e, K.i32(1)),  # noqa: E731
                             (K.Declare(s, K.op("+", K.op("*", LID, K.i32(EPT)), e)),
                              K.Declare(w, K.KLoad(SH_KEYS, K.op("+", src, s), U32)),
                              K.Declare(bit, K.KCast(K.op("&", K.op(">>", w, K.KCast(K.op("+", r, K.i32(first_bit)), U32)),
                                                          u32(1)), I32)),
                              *body), unroll=True)
    body = [K.Declare(src, K.op("*", K.op("&", r, K.i32(1)), K.i32(TILE))),
            K.Declare(dst, K.op("-", K.i32(TILE), src)),
            K.Declare(zeros, K.i32(0)),
            own([K.Assign(zeros, K.op("+", zeros, K.op("-", K.i32(1), bit)))]),
            *block_inclusive_scan(zeros, incl, SH_SCAN),
            K.Declare(total, K.KLoad(SH_SCAN, K.i32(BLOCK - 1), I32)),
            K.Declare(zb, K.op("-", incl, zeros)),
            K.Comment("zeros go to their rank among zeros, ones after all zeros: a stable split"),
            own([K.Store(SH_KEYS, K.op("+", dst, K.KSelect(K.op("==", bit, K.i32(0)), zb,
                                                           K.op("-", K.op("+", total, s), zb), I32)), w),
                 K.Assign(zb, K.op("+", zb, K.op("-", K.i32(1), bit)))]),
            K.Barrier()]
    loop = K.For(r, K.i32(0), K.op("<", r, K.i32(rounds)), K.op("+", r, K.i32(1)), tuple(body))
    return [K.Comment(f"Stable in-block sort of the tile: {rounds} one-bit splits (LSD)."), loop], (rounds % 2) * TILE


def digit_runs(base: int, with_end: bool) -> list:
    """Where each digit's run of live words starts (sh_start) and ends (sh_end) in the sorted
    words at sh_keys[base..]; digits with no word get 0 and 0. Ends with a barrier."""
    d, w = K.KVar("d", I32), K.KVar("w", U32)
    at = lambda off: K.KLoad(SH_KEYS, K.op("+", K.i32(base), off), U32)  # noqa: E731
    before, after = at(K.op("-", SLOT, K.i32(1))), at(K.op("+", SLOT, K.i32(1)))
    first = K.op("||", K.op("==", SLOT, K.i32(0)), K.op("!=", word_digit(before), d))
    last = K.op("||", K.op("==", SLOT, K.i32(TILE - 1)),
                K.op("||", K.op("!=", K.op(">>", after, u32(OUT_BIT)), u32(0)), K.op("!=", word_digit(after), d)))
    ends = [K.If(last, (K.Store(SH_END, d, K.op("+", SLOT, K.i32(1))),))] if with_end else []
    body = [K.Declare(w, at(SLOT)),
            K.If(word_live(w), (K.Declare(d, word_digit(w)),
                                K.If(first, (K.Store(SH_START, d, SLOT),)), *ends))]
    init = [K.Store(SH_START, LID, K.i32(0))] + ([K.Store(SH_END, LID, K.i32(0))] if with_end else [])
    return [K.Comment("Digit runs of the sorted tile: a run starts where the digit changes."),
            *init, K.Barrier(), slots_strided(body), K.Barrier()]


# ---- one-block exclusive scan of counts --------------------------------------------------------
def scan_counts_kernel(name: str, counts: str, dtype: str = I64, other: str | None = None) -> K.Kernel:
    """`counts[0, rows * tiles)` (`dtype`, row-major: row r's count of tile b at r * tiles + b)
    replaced by its exclusive prefix sum, by one block a BLOCK-sized chunk at a time. For
    radix digits this is each (digit, tile)'s first output position: the rows of smaller
    digits first, then those of the same digit in earlier tiles.
    With `other` (a second counts buffer; value "cpar"), the kernel scans `counts` when
    cpar == 0, else `other`, and zeroes the one it does not scan: ops/sort/gpu.py's scatter adds
    the next pass's counts into it with atomics (this one block runs between two scatters)."""
    from ...launch import KernelArg
    length, carry, chunk = K.KVar("length", I64), K.KVar("carry", dtype), K.KVar("chunk", I64)
    j, c, incl = K.KVar("j", I64), K.KVar("c", dtype), K.KVar("incl", dtype)
    n, rows = K.KVar("n", I64), K.KVar("rows", I64)
    in_range = K.op("<", j, length)
    zero = K.KConst(0, dtype)
    if other is None:
        load = K.KLoad(counts, j, dtype)
        store = lambda v: (K.Store(counts, j, v),)  # noqa: E731
    else:
        first = K.op("==", K.KVar("cpar", I64), K.i64(0))
        load = K.KSelect(first, K.KLoad(counts, j, dtype), K.KLoad(other, j, dtype), dtype)
        store = lambda v: (K.If(first, (K.Store(counts, j, v), K.Store(other, j, zero)),  # noqa: E731
                                (K.Store(other, j, v), K.Store(counts, j, zero))),)
    body = [K.Declare(j, K.op("+", chunk, K.KCast(LID, I64))),
            K.Declare(c, K.KSelect(in_range, load, zero, dtype)),
            *block_inclusive_scan(c, incl, "sh_carry"),
            K.If(in_range, store(K.op("+", carry, K.op("-", incl, c)))),
            K.Assign(carry, K.op("+", carry, K.KLoad("sh_carry", K.i32(BLOCK - 1), dtype))),
            K.Barrier()]
    stmts = (K.Declare(length, K.op("*", rows, K.op("/", K.op("+", n, K.i64(TILE - 1)), K.i64(TILE)))),
             K.Declare(carry, zero),
             K.For(chunk, K.i64(0), K.op("<", chunk, length), K.op("+", chunk, K.i64(BLOCK)), tuple(body)))
    bufs = [KernelArg(counts, "scratch", dtype, scratch=counts)]
    if other is not None:
        bufs.append(KernelArg(other, "scratch", dtype, scratch=other))
    args = (*bufs, KernelArg("n", "n", I64), KernelArg("rows", "value", I64),
            *([KernelArg("cpar", "value", I64)] if other is not None else []))
    return K.Kernel(name, args, (K.SharedArray("sh_carry", dtype, BLOCK),), stmts,
                    doc=f"{name}: exclusive prefix sum of the per-(row, tile) counts, in place (one block).")
