"""Lowering of a Reduce pass into a two-stage reduction in kernel IR.

Stage 1 (`<pass>_reduce_partials`, contiguous and strided variants): a grid-stride loop in
which each thread takes runs of `ept` consecutive elements (16-byte wide reads, as the
elementwise kernels do) and folds them in order into private accumulators, then a block reduction;
thread 0 writes one partial per block and accumulator slot. Stage 2
(`<pass>_reduce_finalize`, one block): each thread folds partials t, t + block, ... in order,
then the same block reduction writes the results. The grid depends only on n and every tree
has a fixed shape: the same input always gives the same bits. No atomics.

A pass with a fold (LINQ's Aggregate: associative, maybe not commutative) needs every combine
to keep element order, which the grid-stride loop and the halving trees do not: such passes
take the order-keeping shape of lower_ordered.py instead (the others keep this one).
"""
from __future__ import annotations

from . import dtypes as D
from . import expr as E
from . import kernel_ir as K
from .launch import BufferSpec, KernelArg, KernelSpec, ResultSlot
from .lower_block import LID, Acc, block_reduce, fold_from
from .lower_element import INDEX, check_name, element, grid_stride_runs, input_args, rename, variant
from .lower_ordered import TILE_RUNS, ordered_finalize, ordered_partials
from .program import Agg, Pass

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


def make_acc(j: int, agg: Agg, prog, name: str = "") -> tuple[Acc, tuple[E.Expr, ...], tuple[str, ...], tuple]:
    """Accumulator of agg number j (registers named after `name`, default acc<j>), the
    element's contribution to it, the buffer dtype of each slot (partials) and, per slot,
    the result slot it fills (None: a slot that only travels between the stages)."""
    name = name or f"acc{j}"
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
    seed never is one (lower_ordered.apply_seeds applies it once, at the end)."""
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


def lower_reduce(p: Pass, ept: int, shuffle_types: tuple[str, ...], fold_runs_apart: bool = False):
    """-> (kernels, kernel specs, outputs, scratch, result slots) of the two-stage reduction;
    stage 1 threads take runs of `ept` consecutive elements. With `fold_runs_apart`, each
    run is folded into fresh accumulators (acc<j>) that then fold into the thread's
    (thread_acc<j>): the runs' chains of combines are independent, so a CPU device overlaps
    consecutive runs instead of waiting on one chain through all of a thread's elements.
    Either way the order of combines depends only on n. A pass with a fold takes the
    order-keeping shape (lower_ordered.py)."""
    prog = p.program
    name = check_name(p.name, "pass")
    built = [make_acc(j, a, prog) for j, a in enumerate(p.terminal.aggs)]
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
    out_pairs = list(zip([o.name for o in outputs], [s for s, r in zip(slots, slot_results) if r is not None]))
    consumed = [v for a in p.terminal.aggs for v in a.values]
    stage1_args = lambda strided: tuple(input_args(prog, strided)) + (KernelArg("n", "n", "int64"),) + partial_args  # noqa: E731
    final_args = partial_args + (KernelArg("num_partials", "value", "int64"),) + tuple(
        KernelArg(o.name, "output", o.dtype, k) for k, o in enumerate(outputs))

    kernels, specs = [], []
    ordered = any(a.op == "fold" for a in p.terminal.aggs)
    for strided in (False, True):
        # filtered-out elements `continue` before the fold
        body = element(prog, strided, consumed)
        if ordered:
            shared, stmts, block_accs = ordered_partials(
                p.terminal.aggs, accs, contribs, body, ept, use_shuffles,
                lambda j, a: make_acc(j, a, prog, f"tile_acc{j}")[0],
                TILE_RUNS["cpu" if fold_runs_apart else "gpu"])
        else:
            shared, stmts, block_accs = _partials(p, accs, contribs, body, ept, use_shuffles, fold_runs_apart)
        stmts.append(_write(zip(partial_names, [s for a in block_accs for s in a.slots]), K.KThread("group_id")))
        kname, doc = variant(f"{name}_reduce_partials", strided,
                             f"Stage 1 of {name}: one partial per block and accumulator.")
        kernels.append(K.Kernel(kname, stage1_args(strided), tuple(shared), tuple(stmts), doc=doc))
        specs.append(KernelSpec(kname, stage1_args(strided), "reduce", "strided" if strided else "contiguous",
                                "partials"))

    partial_dtype = {s.name: d for s, d in zip(slots, buf_dtypes)}
    read = lambda s, j: K.KLoad(f"part_{s.name}", j, partial_dtype[s.name])  # noqa: E731
    if ordered:
        shared, stmts = ordered_finalize(p.terminal.aggs, accs, read,
                                         lambda a, acc, item: fold_combine(a, prog, acc, item))
    else:
        shared, stmts = _finalize(accs, read, use_shuffles)
    stmts.append(_write(out_pairs, K.i32(0)))
    fname = f"{name}_reduce_finalize"
    kernels.append(K.Kernel(fname, final_args, tuple(shared), tuple(stmts),
                            doc=f"Stage 2 of {name}: one block folds the per-block partials into the results."))
    specs.append(KernelSpec(fname, final_args, "one", "any", "finalize"))
    return kernels, specs, outputs, scratch, result_slots


def _partials(p: Pass, accs, contribs, body, ept: int, use_shuffles: bool, fold_runs_apart: bool):
    """Stage 1 without a fold: grid-stride runs, then the block tree."""
    run_start, run_end, thread_accs = [], [], accs
    if fold_runs_apart:
        thread_accs = [make_acc(j, a, p.program, f"thread_acc{j}")[0] for j, a in enumerate(p.terminal.aggs)]
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
