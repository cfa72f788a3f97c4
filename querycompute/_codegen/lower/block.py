"""Block-level building blocks in kernel IR: reduce a set of accumulators across a block,
inclusive prefix sum across a block. Every tree has a fixed shape, so results are
deterministic (same input -> same bits); the shuffle tree's shape also depends on the device's
SIMD width (Metal GPUs differ), so float sums may differ in the last bits between GPUs."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .. import dtypes
from ..ir import expr as E
from ..ir import kernel_ir as K
from ..launch import BLOCK

LID = K.KThread("local_id")
LANE = K.KThread("lane")
WARP = K.KThread("warp")
# Lanes per warp / SIMD group: a device value each dialect spells (CUDA: 32; Metal:
# [[threads_per_simdgroup]], 8 to 64 depending on the GPU). The shuffle tree must be right
# for every power-of-two width from MIN_SIMD_WIDTH up to 64 that divides the block.
SIMD_WIDTH = K.KThread("simd_width")
MIN_SIMD_WIDTH = 8


@dataclass(frozen=True)
class Acc:
    """Per-thread accumulator registers of one aggregate.
    `combine(src)` returns statements folding the values `src` (element expressions, one per
    slot) into the slots; it must be associative, and `identity` its identity."""
    slots: tuple[K.KVar, ...]
    identity: tuple[K.KExpr, ...]
    combine: Callable[[tuple[E.Expr, ...]], list]

    def declare(self) -> list:
        return [K.Declare(s, i) for s, i in zip(self.slots, self.identity)]


def fold_from(accs, read) -> list:
    """Read the other party's slots through `read(slot)` into temporaries, then combine."""
    stmts = []
    for acc in accs:
        temps = []
        for s in acc.slots:
            t = K.KVar(f"{s.name}_o", s.dtype)
            stmts.append(K.Declare(t, read(s)))
            temps.append(E.Var(t.name, t.dtype))
        stmts += acc.combine(tuple(temps))
    return stmts


def shared_name(slot: K.KVar) -> str:
    return f"sh_{slot.name}"


def _halving_loop(var: str, start, body) -> K.For:
    off = K.KVar(var, "int32")
    start = K.i32(start) if isinstance(start, int) else start
    return K.For(off, start, K.op(">", off, K.i32(0)), K.op(">>", off, K.i32(1)), tuple(body(off)))


# Shared memory one block tree may take: WebGPU's default workgroup storage (Metal guarantees
# 32 KiB, CUDA 48 KiB static). Many accumulators (a sum of 64-value shaped elements: 64 slots,
# 128 KiB at 8 bytes x BLOCK) run the tree over groups that fit, reusing the same arrays.
SHARED_BUDGET = 16 * 1024


def block_reduce(accs: list[Acc], use_shuffles: bool) -> tuple[list[K.SharedArray], list]:
    """Statements after which thread 0 of the block holds every accumulator folded over all
    threads of the block; plus the shared arrays they need."""
    slots = [s for a in accs for s in a.slots]
    if use_shuffles:
        return _shuffle_reduce(accs, slots)
    groups = _groups(accs)
    if len(groups) == 1:
        return [K.SharedArray(shared_name(s), s.dtype, BLOCK) for s in slots], _tree(accs, shared_name)
    arrays, stmts = {}, [K.Comment(f"{len(slots)} accumulators: one tree per group of them, the groups "
                                   f"reusing the same shared arrays ({SHARED_BUDGET // 1024} KiB at most).")]
    for group in groups:
        names, count = {}, {}
        for s in (s for a in group for s in a.slots):       # the k-th slot of a dtype: sh_<dtype>_<k>
            k = count[s.dtype] = count.get(s.dtype, -1) + 1
            names[s.name] = f"sh_{s.dtype}_{k}"
            arrays.setdefault(names[s.name], K.SharedArray(names[s.name], s.dtype, BLOCK))
        # the barrier: every thread has read slot 0 of this group before the next one publishes
        stmts += _tree(group, lambda s, names=names: names[s.name]) + [K.Barrier()]
    return list(arrays.values()), stmts


def _groups(accs: list[Acc]) -> list[list[Acc]]:
    """Consecutive accumulators in groups (a single group: all) such that the arrays all the
    groups share -- per dtype, as many as the largest group holds of it -- fit SHARED_BUDGET."""
    def add(counts: dict, a: Acc) -> dict:
        counts = dict(counts)
        for s in a.slots:
            counts[s.dtype] = counts.get(s.dtype, 0) + 1
        return counts

    def union(x: dict, y: dict) -> dict:
        return {d: max(x.get(d, 0), y.get(d, 0)) for d in {*x, *y}}

    groups, current, shared = [[]], {}, {}
    for a in accs:
        trial = add(current, a)
        nbytes = sum(dtypes.itemsize(d) * k for d, k in union(shared, trial).items()) * BLOCK
        if groups[-1] and nbytes > SHARED_BUDGET:
            groups.append([])
            trial = add({}, a)
        groups[-1].append(a)
        current, shared = trial, union(shared, trial)
    return groups


def _tree(accs: list[Acc], name) -> list:
    """The shared-memory tree over accs, slot s living in the shared array `name(s)`."""
    slots = [s for a in accs for s in a.slots]
    publish = [K.Store(name(s), LID, s) for s in slots]
    # Values cross barriers only in shared memory: each step re-reads the thread's own slots,
    # and every thread reads the result at the end. A register live across a barrier costs
    # pocl a per-thread spill (its work-item loops split at barriers): ~7% of W1 stage 1 at 1e6.
    reload = lambda at: [K.Assign(s, K.KLoad(name(s), at, s.dtype)) for s in slots]  # noqa: E731
    step = lambda off: [  # noqa: E731  (tiny closures keep the tree readable)
        K.If(K.op("<", LID, off),
             tuple(reload(LID)
                   + fold_from(accs, lambda s: K.KLoad(name(s), K.op("+", LID, off), s.dtype))
                   + publish)),
        K.Barrier()]
    return [K.Comment("Shared-memory tree: halve the active threads each step; slot 0 ends with the block's result."),
            *publish, K.Barrier(), _halving_loop("stride", BLOCK // 2, step), *reload(K.i32(0))]


def _shuffle_reduce(accs, slots):
    # Sized for the narrowest SIMD group; only the first BLOCK / width slots are used.
    shared = [K.SharedArray(shared_name(s), s.dtype, BLOCK // MIN_SIMD_WIDTH) for s in slots]
    warps = K.op("/", K.i32(BLOCK), SIMD_WIDTH)
    half_width = K.op("/", SIMD_WIDTH, K.i32(2))
    shuffle = lambda off: fold_from(accs, lambda s: K.KShuffleDown(s, off, s.dtype))  # noqa: E731
    first_level = [
        K.Comment("Warp-level tree with shuffles: lane 0 of each warp ends with its warp's result."),
        _halving_loop("offset", half_width, shuffle),
        K.If(K.op("==", LANE, K.i32(0)), tuple(K.Store(shared_name(s), WARP, s) for s in slots)),
        K.Barrier()]
    has_result = K.op("<", LANE, warps)
    gather = tuple(K.Assign(s, K.KSelect(has_result, K.KLoad(shared_name(s), LANE, s.dtype), i, s.dtype))
                   for a in accs for s, i in zip(a.slots, a.identity))
    # More warp results than lanes only on SIMD groups narrower than sqrt(BLOCK): lane l also
    # folds results l + width, l + 2 * width, ... (in order) before the shuffles.
    w = K.KVar("w", "int32")
    rest = K.For(w, K.op("+", LANE, SIMD_WIDTH), K.op("<", w, warps), K.op("+", w, SIMD_WIDTH),
                 tuple(fold_from(accs, lambda s: K.KLoad(shared_name(s), w, s.dtype))))
    second_level = [K.Comment("Warp 0 folds the block / warp-width warp results the same way."),
                    K.If(K.op("==", WARP, K.i32(0)), gather + (rest, _halving_loop("offset", half_width, shuffle)))]
    return shared, first_level + second_level


def block_inclusive_scan(value: K.KVar, result: K.KVar, shared: str) -> list:
    """result = sum of `value` over threads 0..local_id (Hillis-Steele in shared memory).
    Afterwards shared[BLOCK - 1] holds the block total, until the next write to `shared`."""
    step = lambda off: [  # noqa: E731
        K.Declare(K.KVar("left", value.dtype), _left(shared, off, value.dtype)),
        K.Barrier(),
        K.Store(shared, LID, K.op("+", K.KLoad(shared, LID, value.dtype), K.KVar("left", value.dtype))),
        K.Barrier()]
    off = K.KVar("offset", "int32")
    loop = K.For(off, K.i32(1), K.op("<", off, K.i32(BLOCK)), K.op("<<", off, K.i32(1)), tuple(step(off)))
    return [K.Comment("Block-wide inclusive prefix sum (Hillis-Steele): log2(block) steps."),
            K.Store(shared, LID, value), K.Barrier(), loop,
            K.Declare(result, K.KLoad(shared, LID, value.dtype))]


def _left(shared: str, off, dtype: str) -> K.KExpr:
    """shared[local_id - off], or 0 for the first `off` threads (C's ?: evaluates only the
    chosen operand, so no thread reads out of bounds)."""
    return K.KSelect(K.op(">=", LID, off), K.KLoad(shared, K.op("-", LID, off), dtype), K.KConst(0, dtype), dtype)
