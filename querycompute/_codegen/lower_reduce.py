"""Lowering of a Reduce pass into a two-stage reduction in kernel IR.

Stage 1 (`<pass>_reduce_partials`, contiguous and strided variants): a grid-stride loop in
which each thread takes runs of `ept` consecutive elements (16-byte wide reads, as the
elementwise kernels do) and folds them in order into private accumulators, then a block reduction;
thread 0 writes one partial per block and accumulator slot. Stage 2
(`<pass>_reduce_finalize`, one block): each thread folds partials t, t + block, ... in order,
then the same block reduction writes the results. The grid depends only on n and every tree
has a fixed shape: the same input always gives the same bits. No atomics.
"""
from __future__ import annotations

from . import dtypes as D
from . import expr as E
from . import kernel_ir as K
from .launch import BufferSpec, KernelArg, KernelSpec, ResultSlot
from .lower_block import LID, Acc, block_reduce, fold_from
from .lower_element import INDEX, check_name, element, grid_stride_runs, input_args, rename, variant
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


def make_acc(j: int, agg: Agg, prog, name: str = "") -> tuple[Acc, tuple[E.Expr, ...], tuple[str, ...], tuple[ResultSlot, ...]]:
    """Accumulator of agg number j (registers named after `name`, default acc<j>), the
    element's contribution to it, the buffer dtype of each slot (partials and result) and
    the result slots it fills."""
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
        if agg.combine is None or agg.identity is None:
            raise ValueError(f"fold aggregate {j} needs both `combine` and `identity`")

        def fold(src):
            both = {"acc": E.Var(slot.name, slot.dtype), "item": src[0]}
            return [K.Assign(slot, K.Elem(rename(agg.combine, prog, both)))]
        acc = Acc((slot,), (K.KConst(agg.identity.value, agg.dtype),), fold)
    elif agg.op in ("sum", "min", "max"):
        start = 0 if agg.op == "sum" else _extreme(agg.op, agg.dtype)
        acc = Acc((slot,), (K.KConst(start, agg.dtype),), _binary_acc(slot, {"sum": "add"}.get(agg.op, agg.op)))
    else:
        raise ValueError(f"unknown aggregate {agg.op!r}; expected one of sum min max count any all first fold")
    return acc, (rename(agg.values[0], prog),), (agg.dtype,), (ResultSlot(j, "value", agg.dtype),)


def _write(accs, names, at) -> K.If:
    """Thread 0 stores every slot to buffers `names` at index `at`."""
    stores = [K.Store(b, at, s) for b, s in zip(names, [s for a in accs for s in a.slots])]
    return K.If(K.op("==", LID, K.i32(0)), tuple(stores))


def lower_reduce(p: Pass, ept: int, shuffle_types: tuple[str, ...], fold_runs_apart: bool = False):
    """-> (kernels, kernel specs, outputs, scratch, result slots) of the two-stage reduction;
    stage 1 threads take runs of `ept` consecutive elements. With `fold_runs_apart`, each
    run is folded into fresh accumulators (acc<j>) that then fold into the thread's
    (thread_acc<j>): the runs' chains of combines are independent, so a CPU device overlaps
    consecutive runs instead of waiting on one chain through all of a thread's elements.
    Either way the order of combines depends only on n."""
    prog = p.program
    name = check_name(p.name, "pass")
    built = [make_acc(j, a, prog) for j, a in enumerate(p.terminal.aggs)]
    accs = [b[0] for b in built]
    contribs = [b[1] for b in built]
    buf_dtypes = [d for b in built for d in b[2]]
    result_slots = tuple(r for b in built for r in b[3])
    slots = [s for a in accs for s in a.slots]
    use_shuffles = bool(shuffle_types) and all(s.dtype in shuffle_types for s in slots)

    partial_names = [f"part_{s.name}" for s in slots]
    partial_args = tuple(KernelArg(nm, "scratch", d, scratch=nm) for nm, d in zip(partial_names, buf_dtypes))
    scratch = tuple(BufferSpec(nm, d, "blocks") for nm, d in zip(partial_names, buf_dtypes))
    outputs = tuple(BufferSpec(f"res{k}", d, "one") for k, d in enumerate(buf_dtypes))
    consumed = [v for a in p.terminal.aggs for v in a.values]

    # The element's value folds into `accs`; the block tree reduces `thread_accs`.
    run_start, run_end, thread_accs = [], [], accs
    if fold_runs_apart:
        thread_accs = [make_acc(j, a, prog, f"thread_acc{j}")[0] for j, a in enumerate(p.terminal.aggs)]
        run_start = [s for a in accs for s in a.declare()]
        run_end = [st for t, a in zip(thread_accs, accs)
                   for st in t.combine(tuple(E.Var(s.name, s.dtype) for s in a.slots))]
    loop_doc = f"Grid-stride loop over runs of {ept} consecutive elements, folded into private accumulators" + (
        ": each run apart, then into the thread's." if fold_runs_apart else ".")

    kernels, specs = [], []
    for strided in (False, True):
        # filtered-out elements `continue` before the fold
        body = element(prog, strided, consumed) + [st for a, c in zip(accs, contribs) for st in a.combine(c)]
        loop = grid_stride_runs(ept, body, run_start, run_end)
        shared, reduce_stmts = block_reduce(thread_accs, use_shuffles)
        kname, doc = variant(f"{name}_reduce_partials", strided,
                             f"Stage 1 of {name}: one partial per block and accumulator.")
        args = tuple(input_args(prog, strided)) + (KernelArg("n", "n", "int64"),) + partial_args
        stmts = [s for a in thread_accs for s in a.declare()] + [
            K.Comment(loop_doc), loop, *reduce_stmts, _write(thread_accs, partial_names, K.KThread("group_id"))]
        kernels.append(K.Kernel(kname, args, tuple(shared), tuple(stmts), doc=doc))
        specs.append(KernelSpec(kname, args, "reduce", "strided" if strided else "contiguous", "partials"))

    partial_dtype = {s.name: d for s, d in zip(slots, buf_dtypes)}
    count = K.KVar("num_partials", "int64")
    j = K.KVar("j", "int64")
    gather = K.For(j, K.KCast(LID, "int64"), K.op("<", j, count),
                   K.op("+", j, K.KCast(K.KThread("local_size"), "int64")),
                   tuple(fold_from(accs, lambda s: K.KLoad(f"part_{s.name}", j, partial_dtype[s.name]))))
    shared, reduce_stmts = block_reduce(accs, use_shuffles)
    out_names = [o.name for o in outputs]
    args = partial_args + (KernelArg("num_partials", "value", "int64"),) + tuple(
        KernelArg(o.name, "output", o.dtype, k) for k, o in enumerate(outputs))
    stmts = [s for a in accs for s in a.declare()] + [
        K.Comment("Each thread folds partials t, t + block, ... in order (a fixed order: deterministic)."),
        gather, *reduce_stmts, _write(accs, out_names, K.i32(0))]
    fname = f"{name}_reduce_finalize"
    kernels.append(K.Kernel(fname, args, tuple(shared), tuple(stmts),
                            doc=f"Stage 2 of {name}: one block folds the per-block partials into the results."))
    specs.append(KernelSpec(fname, args, "one", "any", "finalize"))
    return kernels, specs, outputs, scratch, result_slots

