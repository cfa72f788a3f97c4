"""GPU lowering of the reduce op: the two-stage reduction in kernel IR (the algorithm: see
this package's __init__). `lower_gpu` picks the plain shape, or the order-keeping one for a
pass with a fold (`ordered_partials`, `ordered_finalize`); stage 2 is stage 1's last block
(`last_block_epilogue`, one launch) where the dialect has a device-scope fence, else a
finalize kernel."""
from __future__ import annotations

from ... import dtypes as D
from ...ir import expr as E
from ...ir import kernel_ir as K
from ...elements import run_elements
from ...launch import BLOCK, BufferSpec, KernelArg, KernelSpec, ResultSlot
from ...lower.block import LID, Acc, block_reduce, fold_from, shared_name
from ...lower.element import (BASE, INDEX, check_name, element, elems_per_thread, grid_stride_runs, input_args,
                              rename, variant)
from ...ir.program import Agg, Pass
from ..common import GpuKernels
from . import two_words

INT64_MAX = 2 ** 63 - 1


def _binary_acc(slot: K.KVar, op: str):
    """The combine function of a one-slot accumulator folded with one expr.Binary op (whose
    semantics the printer reproduces: wrap-around for integers, NaN wins for min/max)."""
    def combine(src):
        return [K.Assign(slot, K.Elem(E.Binary(op, E.Var(slot.name, slot.dtype), src[0], slot.dtype)))]
    return combine


def _extreme(op: str, dtype: str):
    if D.is_float(dtype):
        return float("inf") if op == "min" else float("-inf")
    lo, hi = D.int_limits(dtype)
    return hi if op == "min" else lo


def make_acc(j: int, agg: Agg, prog, name: str = "", two_word_sums: bool = False
             ) -> tuple[Acc, tuple[E.Expr, ...], tuple[str, ...], tuple]:
    """Accumulator of agg number j (registers named after `name`, default acc<j>), the
    element's contribution to it, the buffer dtype of each slot (partials) and, per slot,
    the result slot it fills (None: a slot that only travels between the stages).
    `two_word_sums`: 64-bit sums of narrow integers in two uint32 words (two_words.py)."""
    name = name or f"acc{j}"
    narrow = two_words.narrow_value(agg) if two_word_sums else None
    if narrow is not None:
        return two_words.two_word_acc(j, agg, rename(narrow, prog), name)
    if agg.op == "first":
        idx = K.KVar(f"{name}_idx", "int64")
        # bool values travel as uint8 registers: no bool shuffles / shared bool arrays needed
        vals = [K.KVar(f"{name}_v{k}", "uint8" if v.dtype == "bool" else v.dtype) for k, v in enumerate(agg.values)]

        def combine(src):
            take = [K.Assign(idx, K.Elem(src[0]))] + [K.Assign(v, K.Elem(s)) for v, s in zip(vals, src[1:])]
            return [K.If(K.Elem(E.Compare("lt", src[0], E.Var(idx.name, "int64"))), tuple(take))]
        identity = (K.KConst(INT64_MAX, "int64"),) + tuple(K.KConst(0, v.dtype) for v in vals)
        contrib = (E.Var(INDEX.name, "int64"),) + tuple(
            E.Cast(rename(v, prog), s.dtype) if v.dtype == "bool" else rename(v, prog)
            for v, s in zip(agg.values, vals))
        buffers = ("int64",) + tuple(v.dtype for v in agg.values)
        slots = (ResultSlot(j, "index", "int64"),) + tuple(
            ResultSlot(j, "value", v.dtype, k) for k, v in enumerate(agg.values))
        return Acc((idx, *vals), identity, combine), contrib, buffers, slots
    if agg.op in ("any", "all"):
        slot = K.KVar(name, "uint32")
        acc = Acc((slot,), (K.KConst(int(agg.op == "all"), "uint32"),),
                  _binary_acc(slot, "bitor" if agg.op == "any" else "bitand"))
        return acc, (E.Cast(rename(agg.values[0], prog), "uint32"),), ("uint32",), (ResultSlot(j, "flag", "uint32"),)
    if agg.op == "count":
        slot = K.KVar(name, "int64")
        # a plain C add: a count never exceeds n, so it cannot overflow
        count = Acc((slot,), (K.KConst(0, "int64"),), lambda src: [K.Assign(slot, K.op("+", slot, K.Elem(src[0])))])
        return (count, (E.Const(1, "int64"),),
                ("int64",), (ResultSlot(j, "count", "int64"),))
    slot = K.KVar(name, agg.dtype)
    if agg.op == "fold":
        return _fold_acc(j, agg, prog, slot)
    if agg.op in ("sum", "min", "max"):
        start = 0 if agg.op == "sum" else _extreme(agg.op, agg.dtype)
        acc = Acc((slot,), (K.KConst(start, agg.dtype),), _binary_acc(slot, {"sum": "add"}.get(agg.op, agg.op)))
    else:
        raise ValueError(f"unknown aggregate {agg.op!r}; expected one of sum min max count any all first fold")
    return acc, (rename(agg.values[0], prog),), (agg.dtype,), (ResultSlot(j, "value", agg.dtype),)


def fold_combine(agg: Agg, prog, acc: E.Expr, item: E.Expr) -> E.Expr:
    """The user's combine(acc, item) as an element expression over kernel locals."""
    return rename(agg.combine, prog, {"acc": acc, "item": item})


def _fold_acc(j: int, agg: Agg, prog, value: K.KVar):
    """A fold's state is (has, value): `has` (uint32 0/1) says whether any element went in.
    Combining the state of LATER elements (src) into it: nothing if src is empty, src's value
    if this one is, else combine(value, src value). The empty state is the identity, so the
    seed never is one (apply_seeds applies it once, at the end)."""
    if agg.combine is None or agg.seed is None:
        raise ValueError(f"fold aggregate {j} needs both `combine` and `seed`")
    has = K.KVar(f"{value.name}_has", "uint32")

    def combine(src):
        mine = E.Var(value.name, value.dtype)
        has_some = E.Compare("ne", E.Var(has.name, "uint32"), E.Const(0, "uint32"))
        both = fold_combine(agg, prog, mine, src[1])
        if isinstance(src[0], E.Const):         # an element: always there (filters `continue`)
            # a select, not a branch: the per-element loop stays straight (3-6x faster on pocl)
            return [K.Assign(value, K.Elem(E.Where(has_some, both, src[1], value.dtype))),
                    K.Assign(has, K.KConst(1, "uint32"))]
        take = (K.If(K.Elem(has_some), (K.Assign(value, K.Elem(both)),), (K.Assign(value, K.Elem(src[1])),)),
                K.Assign(has, K.KConst(1, "uint32")))
        return [K.If(K.Elem(E.Compare("ne", src[0], E.Const(0, "uint32"))), take)]
    acc = Acc((has, value), (K.KConst(0, "uint32"), K.KConst(0, agg.dtype)), combine)
    return (acc, (E.Const(1, "uint32"), rename(agg.values[0], prog)), ("uint32", agg.dtype),
            (None, ResultSlot(j, "value", agg.dtype)))


def _write(pairs, at) -> K.If:
    """Thread 0 stores each (buffer name, slot) pair at index `at`."""
    return K.If(K.op("==", LID, K.i32(0)), tuple(K.Store(b, at, s) for b, s in pairs))


def lower_gpu(p: Pass, pr) -> GpuKernels:
    """The two-stage reduction for the dialect printer `pr`: its shuffles (when it has them)
    and whether a thread folds its runs apart (dialects that often run on CPU devices)."""
    ept = run_elements(elems_per_thread([s.dtype for s in p.program.inputs]), p.program)
    kernels, specs, outputs, scratch, slots = lower_reduce(
        p, ept, pr.SHUFFLE_TYPES if pr.CAPS.shuffles else (), pr.FOLD_RUNS_APART,
        not pr.CAPS.int64, pr.FINALIZE_BUFFERS,      # no 64-bit values: two-word sums
        one_launch=pr.CAPS.device_fence)             # a device-scope fence: the last block finalizes
    return GpuKernels(ept, kernels, specs, outputs, scratch, slots)


TICKET = "blocks_done"        # the one-launch shape's counter of finished blocks (int32[1])
SH_LAST = "sh_is_last"        # shared int32[1]: whether this block drew the last ticket


def last_block_epilogue(partial_of: dict, finalize) -> tuple[K.Epilogue, list]:
    """The one-launch shape's end of stage 1 (the package doc) -> (the epilogue, its shared
    arrays): thread 0 (whose partials are stored) fences, draws a ticket from the counter
    TICKET and tells the block whether it drew the last one; that block runs
    `finalize(read)` -> (shared arrays, the finalize kernel's statements), `read(slot, j)`
    loading partial j of a slot through a volatile load (`partial_of`: slot name -> (partial
    buffer, its dtype)), and resets the counter for the next launch."""
    done = K.KVar("done_before", "int32")
    is_last = K.KVar("is_last", "int32")
    read = lambda s, j: K.KLoad(partial_of[s.name][0], j, partial_of[s.name][1], volatile=True)  # noqa: E731
    shared, stmts = finalize(read)
    last = K.op("==", done, K.op("-", K.KThread("num_groups"), K.i32(1)))
    ticket = K.If(K.op("==", LID, K.i32(0)), (
        K.Fence(),                                   # this block's partials, before its ticket
        K.Declare(done, K.i32(0)),
        K.AtomicAdd(done, TICKET, K.i32(0), K.i32(1)),
        K.Fence(),                                   # the others' partials, after the last ticket
        K.Store(SH_LAST, K.i32(0), K.KSelect(last, K.i32(1), K.i32(0), "int32"))))
    body = (K.Comment("One launch: the block that draws the last ticket folds every block's partials\n"
                      "in the finalize kernel's order (the same bits), then resets the counter."),
            ticket, K.Barrier(),
            K.Declare(is_last, K.KLoad(SH_LAST, K.i32(0), "int32")),
            K.If(K.op("!=", is_last, K.i32(0)), (
                *stmts,
                K.If(K.op("==", LID, K.i32(0)), (K.Store(TICKET, K.i32(0), K.i32(0)),)))))
    return K.Epilogue(body), shared


def _merge_shared(*groups) -> tuple:
    """Shared arrays of several parts of one kernel, each name once, at the largest size a
    part needs (parts that run one after the other, barriers between them, reuse them)."""
    merged = {}
    for group in groups:
        for a in group:
            have = merged.setdefault(a.name, a)
            if have.dtype != a.dtype:
                raise ValueError(f"shared array {a.name} declared twice with other types: {have}, {a}")
            if a.size > have.size:
                merged[a.name] = a
    return tuple(merged.values())


def lower_reduce(p: Pass, ept: int, shuffle_types: tuple[str, ...], fold_runs_apart: bool = False,
                 two_word_sums: bool = False, finalize_buffers: int | None = None, one_launch: bool = False):
    """-> (kernels, kernel specs, outputs, scratch, result slots) of the two-stage reduction;
    stage 1 threads take runs of `ept` consecutive elements. With `fold_runs_apart`, each
    run is folded into fresh accumulators (acc<j>) that then fold into the thread's
    (thread_acc<j>): the runs' chains of combines are independent, so a CPU device overlaps
    consecutive runs instead of waiting on one chain through all of a thread's elements.
    Either way the order of combines depends only on n. A pass with a fold takes the
    order-keeping shape (ordered_partials, ordered_finalize). With `finalize_buffers`
    (webgpu: a device binds a limited number of storage buffers per kernel), stage 2 is
    split by aggregate into several one-block kernels (`<pass>_reduce_finalize`,
    `..._finalize1`, ...) that each bind at most that many partial and result buffers, or
    one aggregate's: each aggregate's result is folded exactly as in one kernel. With
    `one_launch` (a dialect with a device-scope fence) there is no finalize kernel: stage 1's
    last block to finish runs its statements (`last_block_epilogue`)."""
    prog = p.program
    name = check_name(p.name, "pass")
    acc = lambda j, a, nm="": make_acc(j, a, prog, nm, two_word_sums)  # noqa: E731
    built = [acc(j, a) for j, a in enumerate(p.terminal.aggs)]
    accs = [b[0] for b in built]
    contribs = [b[1] for b in built]
    buf_dtypes = [d for b in built for d in b[2]]
    slot_results = [r for b in built for r in b[3]]
    result_slots = tuple(r for r in slot_results if r is not None)
    slots = [s for a in accs for s in a.slots]
    use_shuffles = bool(shuffle_types) and all(s.dtype in shuffle_types for s in slots)

    partial_names = [f"part_{s.name}" for s in slots]
    partial_args = tuple(KernelArg(nm, "scratch", d, scratch=nm) for nm, d in zip(partial_names, buf_dtypes))
    scratch = tuple(BufferSpec(nm, d, "blocks") for nm, d in zip(partial_names, buf_dtypes))
    outputs = tuple(BufferSpec(f"res{k}", r.dtype, "one") for k, r in enumerate(result_slots))
    consumed = [v for a in p.terminal.aggs for v in a.values]
    stage1_args = lambda strided: tuple(input_args(prog, strided)) + (KernelArg("n", "n", "int64"),) + partial_args  # noqa: E731
    # a fold's combine may read captured values (aggregate(lambda a, v: min(max(a, v), cap)));
    # the finalize kernel combines partials with it, so it takes the parameters too
    reads_params = any(isinstance(n, E.Param) for a in p.terminal.aggs if a.combine is not None
                       for n in E.walk(a.combine))
    param_args = tuple(a for a in input_args(prog, False) if reads_params and a.kind == "param")
    out_index = {o.name: k for k, o in enumerate(outputs)}
    out_of_slot = dict(zip((s.name for s, r in zip(slots, slot_results) if r is not None), (o.name for o in outputs)))

    kernels, specs = [], []
    ordered = any(a.op == "fold" for a in p.terminal.aggs)
    for strided in (False, True):
        # filtered-out elements `continue` before the fold
        body = element(prog, strided, consumed)
        if ordered:
            shared, stmts, block_accs = ordered_partials(
                p.terminal.aggs, accs, contribs, body, ept, use_shuffles,
                lambda j, a: acc(j, a, f"tile_acc{j}")[0],
                TILE_RUNS["cpu" if fold_runs_apart else "gpu"])
        else:
            shared, stmts, block_accs = _partials(p, accs, contribs, body, ept, use_shuffles, fold_runs_apart,
                                                  two_word_sums)
        block_slots = [s for a in block_accs for s in a.slots]
        stmts.append(_write(zip(partial_names, block_slots), K.KThread("group_id")))
        args = stage1_args(strided)
        doc = f"Stage 1 of {name}: one partial per block and accumulator."
        if one_launch:
            # the finalize kernel's statements, over accumulators like the block's (so the
            # same shared arrays); a fold's combine reads its params from stage 1's arguments
            def finalize(read, accs=block_accs, block_slots=block_slots):
                if ordered:
                    fin_shared, fin = ordered_finalize(p.terminal.aggs, accs, read,
                                                       lambda a, acc, item: fold_combine(a, prog, acc, item))
                else:
                    fin_shared, fin = _finalize(accs, read, use_shuffles)
                out_slots = [s for s, r in zip(block_slots, slot_results) if r is not None]
                return fin_shared, fin + [_write(zip((o.name for o in outputs), out_slots), K.i32(0))]
            partial_of = {s.name: (nm, d) for s, nm, d in zip(block_slots, partial_names, buf_dtypes)}
            tail, tail_shared = last_block_epilogue(partial_of, finalize)
            stmts.append(tail)
            shared = _merge_shared(shared, tail_shared, (K.SharedArray(SH_LAST, "int32", 1),))
            args = args + (KernelArg("num_partials", "value", "int64"),) + tuple(
                KernelArg(o.name, "output", o.dtype, k) for k, o in enumerate(outputs)) + (
                KernelArg(TICKET, "scratch", "int32", scratch=TICKET),)
            doc = (f"{name} in one launch: one partial per block and accumulator; the last block "
                   f"to finish folds them into the results.")
        kname, doc = variant(f"{name}_reduce_partials", strided, doc)
        kernels.append(K.Kernel(kname, args, tuple(shared), tuple(stmts), doc=doc))
        specs.append(KernelSpec(kname, args, "reduce", "strided" if strided else "contiguous", "partials"))
    if one_launch:
        return kernels, specs, outputs, scratch + (BufferSpec(TICKET, "int32", "1", zeroed=True),), result_slots

    partial_dtype = {s.name: d for s, d in zip(slots, buf_dtypes)}
    read = lambda s, j: K.KLoad(f"part_{s.name}", j, partial_dtype[s.name])  # noqa: E731
    for g, js in enumerate(_finalize_groups(accs, out_of_slot, finalize_buffers)):
        g_accs = [accs[j] for j in js]
        g_slots = [s for a in g_accs for s in a.slots]
        g_outs = [(out_of_slot[s.name], s) for s in g_slots if s.name in out_of_slot]
        final_args = tuple(KernelArg(f"part_{s.name}", "scratch", partial_dtype[s.name], scratch=f"part_{s.name}")
                           for s in g_slots) + (KernelArg("num_partials", "value", "int64"),) + tuple(
            KernelArg(o, "output", outputs[out_index[o]].dtype, out_index[o]) for o, _ in g_outs) + param_args
        if ordered:
            shared, stmts = ordered_finalize([p.terminal.aggs[j] for j in js], g_accs, read,
                                             lambda a, acc, item: fold_combine(a, prog, acc, item))
        else:
            shared, stmts = _finalize(g_accs, read, use_shuffles)
        stmts.append(_write(g_outs, K.i32(0)))
        fname = f"{name}_reduce_finalize" + (str(g) if g else "")
        kernels.append(K.Kernel(fname, final_args, tuple(shared), tuple(stmts),
                                doc=f"Stage 2 of {name}: one block folds the per-block partials into the results."))
        specs.append(KernelSpec(fname, final_args, "one", "any", "finalize"))
    return kernels, specs, outputs, scratch, result_slots


def _finalize_groups(accs, out_of_slot: dict, limit: int | None) -> list[list[int]]:
    """Consecutive runs of aggregate indexes whose partial and result buffers stay within
    `limit` (all of them in one run when there is no limit; an aggregate alone may exceed it)."""
    if limit is None:
        return [list(range(len(accs)))]
    groups, cur, used = [], [], 0
    for j, a in enumerate(accs):
        need = sum(1 + (s.name in out_of_slot) for s in a.slots)
        if cur and used + need > limit:
            groups.append(cur)
            cur, used = [], 0
        cur.append(j)
        used += need
    return groups + [cur]


def _partials(p: Pass, accs, contribs, body, ept: int, use_shuffles: bool, fold_runs_apart: bool,
              two_word_sums: bool = False):
    """Stage 1 without a fold: grid-stride runs, then the block tree."""
    run_start, run_end, thread_accs = [], [], accs
    if fold_runs_apart:
        thread_accs = [make_acc(j, a, p.program, f"thread_acc{j}", two_word_sums)[0] for j, a in enumerate(p.terminal.aggs)]
        run_start = [s for a in accs for s in a.declare()]
        run_end = [st for t, a in zip(thread_accs, accs)
                   for st in t.combine(tuple(E.Var(s.name, s.dtype) for s in a.slots))]
    loop_doc = f"Grid-stride loop over runs of {ept} consecutive elements, folded into private accumulators" + (
        ": each run apart, then into the thread's." if fold_runs_apart else ".")
    body = body + [st for a, c in zip(accs, contribs) for st in a.combine(c)]
    loop = grid_stride_runs(ept, body, run_start, run_end)
    shared, reduce_stmts = block_reduce(thread_accs, use_shuffles)
    stmts = [s for a in thread_accs for s in a.declare()] + [K.Comment(loop_doc), loop, *reduce_stmts]
    return shared, stmts, thread_accs


def _finalize(accs, read, use_shuffles: bool):
    """Stage 2 without a fold: thread t folds partials t, t + block, ..., then the block tree."""
    count = K.KVar("num_partials", "int64")
    j = K.KVar("j", "int64")
    gather = K.For(j, K.KCast(LID, "int64"), K.op("<", j, count),
                   K.op("+", j, K.KCast(K.KThread("local_size"), "int64")),
                   tuple(fold_from(accs, lambda s: read(s, j))))
    shared, reduce_stmts = block_reduce(accs, use_shuffles)
    return shared, [s for a in accs for s in a.declare()] + [
        K.Comment("Each thread folds partials t, t + block, ... in order (a fixed order: deterministic)."),
        gather, *reduce_stmts]


# ---- the order-keeping shape (passes with a fold) ----------------------------------------
# Runs of ept elements per thread and tile: one block tree per tile. GPUs keep a warp's reads
# close together (8 runs: 128 bytes a thread); CPU devices (pocl), where each tree's barriers
# cost most, take 32 (the fold then runs as fast as the old unordered one: 10.7 ms for 1e7
# int64 on pocl, against 13.5 ms with 16 and 18 ms with 8).
TILE_RUNS = {"gpu": 8, "cpu": 32}


def ordered_block_reduce(accs) -> tuple[list[K.SharedArray], list]:
    """Shared-memory tree with doubling strides: at stride s, thread t (a multiple of 2s)
    folds thread t + s's state into its own, so thread t always holds threads t..t+2s-1 in
    order, and slot 0 ends with all of them. Every thread reads the result. (The halving
    tree of lower/block.block_reduce joins t with t + BLOCK/2: right for commutative
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
    """Stage 1 statements (the package doc) -> (shared arrays, statements, the
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
