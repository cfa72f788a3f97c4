"""The order-keeping shape of a two-stage reduction, for passes with a fold.

A fold's combine (LINQ's Aggregate) is associative but may not be commutative ("last
non-zero"), so every combine must join the state of earlier elements (left) with the state
of the elements right after them. The plain shape (lower_reduce.py) does neither: its
grid-stride loop hands a thread runs that lie a whole grid apart, and its halving trees join
thread t with thread t + BLOCK / 2. Here:

Stage 1  Block b owns one contiguous segment of the input (whole tiles; every block the same
         number, the last ones fewer or none) and walks it tile by tile. In a tile, thread t
         folds the t-th stretch of TILE_RUNS * ept consecutive elements (runs of ept, so
         contiguous inputs are still read 16 bytes at a time); the doubling tree joins the
         threads' states in thread order, and the tile's state is folded into the block's.
         The other aggregates of the pass (sum, min, ...) need no order: they accumulate per
         thread over the whole segment, and the usual block tree joins them once at the end.
Stage 2  Thread t folds a contiguous range of the partials, the doubling tree joins the
         threads, and each fold's seed is applied once: the seed if nothing survived,
         else combine(seed, total).

The empty state (has = 0) is the identity of a fold's combine (lower_reduce._fold_acc), so
empty segments, tiles past n and filtered-out elements need no special case. Each tile costs
one tree of log2(BLOCK) barrier steps, which TILE_RUNS runs per thread amortise. Only a pass
with a fold pays for this shape; its grid is the plain one (launch.grid_size), and its
combines depend only on n: deterministic.
"""
from __future__ import annotations

from . import expr as E
from . import kernel_ir as K
from .launch import BLOCK
from .lower_block import LID, block_reduce, fold_from, shared_name
from .lower_element import BASE, INDEX

# Runs of ept elements per thread and tile: one block tree per tile. GPUs keep a warp's reads
# close together (8 runs: 128 bytes a thread); CPU devices (pocl), where each tree's barriers
# cost most, take 32 (the fold then runs as fast as the old unordered one: 10.7 ms for 1e7
# int64 on pocl, against 13.5 ms with 16 and 18 ms with 8).
TILE_RUNS = {"gpu": 8, "cpu": 32}


def ordered_block_reduce(accs) -> tuple[list[K.SharedArray], list]:
    """Shared-memory tree with doubling strides: at stride s, thread t (a multiple of 2s)
    folds thread t + s's state into its own, so thread t always holds threads t..t+2s-1 in
    order, and slot 0 ends with all of them. Every thread reads the result. (The halving
    tree of lower_block.block_reduce joins t with t + BLOCK/2: right for commutative
    combines only.) Values cross barriers in shared memory only, as in block_reduce."""
    slots = [s for a in accs for s in a.slots]
    shared = [K.SharedArray(shared_name(s), s.dtype, BLOCK) for s in slots]
    publish = [K.Store(shared_name(s), LID, s) for s in slots]
    reload = lambda at: [K.Assign(s, K.KLoad(shared_name(s), at, s.dtype)) for s in slots]  # noqa: E731
    stride = K.KVar("stride", "int32")
    leader = K.op("==", K.op("%", LID, K.op("*", stride, K.i32(2))), K.i32(0))
    step = (K.If(leader, tuple(reload(LID)
                               + fold_from(accs, lambda s: K.KLoad(shared_name(s), K.op("+", LID, stride), s.dtype))
                               + publish)),
            K.Barrier())
    loop = K.For(stride, K.i32(1), K.op("<", stride, K.i32(BLOCK)), K.op("<<", stride, K.i32(1)), step)
    return shared, [K.Comment("Order-keeping tree: doubling strides join neighbouring threads, lower first."),
                    *publish, K.Barrier(), loop, *reload(K.i32(0))]


def _i64(e) -> K.KExpr:
    return K.KCast(e, "int64")


def _min(a, b) -> K.KExpr:
    return K.KSelect(K.op("<", a, b), a, b, "int64")


def ordered_partials(aggs, accs, contribs, body: list, ept: int, use_shuffles: bool, make_tile_acc,
                     tile_runs: int = TILE_RUNS["gpu"]):
    """Stage 1 statements (see the module doc) -> (shared arrays, statements, the
    accumulators thread 0 then holds the block's partials in). `body` computes element i
    (and `continue`s when it is dropped); `make_tile_acc(j, agg)` builds a per-tile fold
    state like agg j's; each thread takes `tile_runs` runs of `ept` per tile."""
    n = K.KVar("n", "int64")
    tile_size = BLOCK * tile_runs * ept
    folds = [j for j, a in enumerate(aggs) if a.op == "fold"]
    others = [j for j in range(len(aggs)) if j not in folds]
    tile_accs = {j: make_tile_acc(j, aggs[j]) for j in folds}
    into = {j: tile_accs.get(j, accs[j]) for j in range(len(aggs))}

    tiles, per, seg_lo, seg_hi, tile = (K.KVar(nm, "int64") for nm in ("tiles", "per_block", "seg_lo", "seg_hi", "tile"))
    r, k = K.KVar("r", "int32"), K.KVar("k", "int32")
    head = [K.Comment(f"This block's segment: whole tiles of {tile_size} elements "
                      f"({tile_runs} runs of {ept} per thread), walked in order."),
            K.Declare(tiles, K.op("/", K.op("+", n, K.i64(tile_size - 1)), K.i64(tile_size))),
            K.Declare(per, K.op("/", K.op("+", tiles, K.op("-", _i64(K.KThread("num_groups")), K.i64(1))),
                                _i64(K.KThread("num_groups")))),
            K.Declare(seg_lo, K.op("*", K.op("*", _i64(K.KThread("group_id")), per), K.i64(tile_size))),
            K.Declare(seg_hi, _min(K.op("+", seg_lo, K.op("*", per, K.i64(tile_size))), n))]
    elems = (K.Declare(INDEX, K.op("+", BASE, _i64(k))),
             K.If(K.op(">=", INDEX, seg_hi), (K.Break(),)),
             *body,
             *[st for j in range(len(aggs)) for st in into[j].combine(contribs[j])])
    run = K.For(k, K.i32(0), K.op("<", k, K.i32(ept)), K.op("+", k, K.i32(1)), elems, unroll=True)
    stretch = K.op("*", K.op("+", K.op("*", _i64(LID), K.i64(tile_runs)), _i64(r)), K.i64(ept))
    runs = K.For(r, K.i32(0), K.op("<", r, K.i32(tile_runs)), K.op("+", r, K.i32(1)),
                 (K.Declare(BASE, K.op("+", tile, stretch)), run))
    tree_shared, tree = ordered_block_reduce([tile_accs[j] for j in folds])
    fold_tile = [st for j in folds
                 for st in accs[j].combine(tuple(E.Var(s.name, s.dtype) for s in tile_accs[j].slots))]
    walk = K.For(tile, seg_lo, K.op("<", tile, seg_hi), K.op("+", tile, K.i64(tile_size)), (
        *[st for j in folds for st in tile_accs[j].declare()],
        runs, *tree,
        K.Comment("Every thread read the tile's state: fold it into the block's (thread 0's counts)."),
        *fold_tile,
        K.Barrier()))      # the next tile's tree overwrites the slots just read
    shared, stmts = list(tree_shared), [s for a in accs for s in a.declare()] + head + [walk]
    if others:
        rest_shared, rest = block_reduce([accs[j] for j in others], use_shuffles)
        shared += rest_shared
        stmts += rest
    return shared, stmts, accs


def ordered_finalize(aggs, accs, read, combine):
    """Stage 2 statements -> (shared arrays, statements); afterwards thread 0 holds every
    result, each fold's seed applied. `read(slot, j)` loads partial j of a slot;
    `combine(agg, acc, item)` is agg's combine as an element expression."""
    count, per, first, last = (K.KVar(nm, "int64") for nm in ("num_partials", "per_thread", "first", "last"))
    j = K.KVar("j", "int64")
    gather = [K.Comment("Thread t folds partials [t * per_thread, (t + 1) * per_thread) in order."),
              K.Declare(per, K.op("/", K.op("+", count, K.op("-", _i64(K.KThread("local_size")), K.i64(1))),
                                  _i64(K.KThread("local_size")))),
              K.Declare(first, K.op("*", _i64(LID), per)),
              K.Declare(last, _min(K.op("+", first, per), count)),
              K.For(j, first, K.op("<", j, last), K.op("+", j, K.i64(1)),
                    tuple(fold_from(accs, lambda s: read(s, j))))]
    shared, tree = ordered_block_reduce(accs)
    return shared, [s for a in accs for s in a.declare()] + gather + tree + apply_seeds(aggs, accs, combine)


def apply_seeds(aggs, accs, combine) -> list:
    """value = has ? combine(seed, value) : seed, for every fold: the seed goes in once."""
    out = []
    for agg, acc in zip(aggs, accs):
        if agg.op != "fold":
            continue
        has, value = acc.slots
        seed = E.Const(agg.seed.value, agg.dtype)
        out.append(K.If(K.Elem(E.Compare("ne", E.Var(has.name, "uint32"), E.Const(0, "uint32"))),
                        (K.Assign(value, K.Elem(combine(agg, seed, E.Var(value.name, value.dtype)))),),
                        (K.Assign(value, K.Elem(seed)),)))
    if out:
        out.insert(0, K.Comment("Each fold's seed, applied once: combine(seed, total), or the seed alone."))
    return out
