"""GPU kernels for long rows (DESIGN.md section 4b, seed 002): X of shape (m, k), k large,
bound as its flat C-ordered buffer (element (i, j) at i * k + j).

Row steps ("rows" kernel set, n = m rows; one work-group per row, grid rule "n"):
  block i owns row i. For each row step s (row_s = reduce_j entry_s(x[i, j], row_0..)) every
  thread folds entries j = t, t + BLOCK, ... (consecutive threads read consecutive values:
  coalesced) into a register, then the block combines the BLOCK registers with the fixed
  shared-memory tree of lower/block.block_reduce; every thread reads the result, so the next
  step may use it (its entries re-read the row from global memory: L2 for rows of 1e4).
  Thread 0 evaluates the final expression of the row scalars and writes out[i].
  float16 values accumulate in float32; min/max are expr.Binary's (NaN wins, as np.min).
  Bytes per element: itemsize per row step (the row is read once per step).

Column reductions ("columns" kernel set, n = k columns; X.<op>(axis=0), no transpose copy):
  chunks = chunk_count(m) (param 1: at most CHUNKS, at least MIN_CHUNK_ROWS rows each).
  <name>_partials, grid tiles * CHUNKS: block b covers column block b % tiles (BLOCK
  consecutive columns: a warp's loads of one row are consecutive, coalesced) and row chunk
  b / tiles (rows chunk * step .. chunk * step + step - 1, step = ceil(m / chunks); blocks of
  chunk >= chunks do nothing); each thread folds its column over the chunk's rows in row
  order into part[chunk * k + j].
  <name>_combine, grid tiles: thread j folds part[0 * k + j], part[1 * k + j], ... in chunk
  order into out[j]. The shape and order depend on m and k only: the same input gives the
  same bits on every run. Bytes per element: itemsize, plus 2 * chunks * acc size per column
  (partials written and read back: <= 2 * acc size / MIN_CHUNK_ROWS per element).
"""
from __future__ import annotations

from types import SimpleNamespace

from ... import dtypes as D
from ...ir import expr as E
from ...ir import kernel_ir as K
from ...dialects.by_name import printer
from ...errors import UnsupportedType
from ...launch import BLOCK, BufferSpec, KernelArg, KernelSet, KernelSpec
from ...lower.block import LID, Acc, block_reduce
from ...lower.element import rename

CHUNKS = 32                    # most row chunks of a column reduction (its grid: tiles * CHUNKS)
MIN_CHUNK_ROWS = 64            # a chunk of fewer rows costs more in partials than it reads
I64 = "int64"
GROUP = K.KThread("group_id")
_OPS = {"sum": "add", "prod": "mul", "min": "min", "max": "max", "and": "bitand", "or": "bitor"}
_ROW = SimpleNamespace(inputs=[SimpleNamespace(name="row")])     # rename: Load(0) -> x_row
X_VAR = "x_row"


def acc_dtype(op: str, dtype: str) -> str:
    """The register a step accumulates in: float16 in float32, bool and/or as uint32 0/1."""
    if op in ("and", "or"):
        return "uint32"
    return "float32" if dtype == "float16" else dtype


def identity(op: str, dtype: str):
    if op in ("sum", "or"):
        return 0
    if op in ("prod", "and"):
        return 1
    if D.is_float(dtype):
        return float("inf") if op == "min" else float("-inf")
    lo, hi = D.int_limits(dtype)
    return hi if op == "min" else lo


def _fold(var: K.KVar, op: str, value: E.Expr) -> K.Assign:
    """var = var <op> value (value cast to var's dtype)."""
    if value.dtype != var.dtype:
        value = E.Cast(value, var.dtype)
    return K.Assign(var, K.Elem(E.Binary(_OPS[op], E.Var(var.name, var.dtype), value, var.dtype)))


def _acc(var: K.KVar, op: str) -> Acc:
    return Acc((var,), (K.KConst(identity(op, var.dtype), var.dtype),), lambda src: [_fold(var, op, src[0])])


def check_values(dialect: str, named) -> None:
    """Refuse, naming the value, a 64-bit value (`named`: (dtype, what) pairs) in a dialect
    whose 64-bit types are index types only (DialectCaps.int64 False; WGSL: int64 prints as
    i32, float64 not at all): never a silently truncated sum."""
    pr = printer(dialect)
    if pr.CAPS.int64:                  # (dialects with 64-bit values)
        return
    for dtype, what in named:
        if D.bits(dtype) == 64:
            raise UnsupportedType(dtype, pr.name, f"long rows: {what} is {dtype} and {pr.CAPS.language} has "
                                  f"no 64-bit types (only the cpu, opencl and cuda kernels hold it)")


def _kernel_set(kernels: list, specs: list, dialect: str, name: str, shape: str, outputs, scratch) -> KernelSet:
    pr = printer(dialect)
    header = (f"// querycompute long rows {name}: {shape}, {len(kernels)} kernel(s), {dialect}\n"
              f"// compile options: {' '.join(pr.OPTIONS) or '(none)'}")
    return KernelSet(dialect=dialect, pass_name=name, shape=shape, source=pr.render(kernels, header),
                     options=pr.OPTIONS, kernels=tuple(specs), outputs=tuple(outputs),
                     scratch=tuple(scratch), block=BLOCK)


def render_rows(steps, final: E.Expr, dtype: str, params: tuple, param_dtypes: tuple, dialect: str,
                name: str = "qc_rows") -> KernelSet:
    """One work-group per row: inputs [X flat], params [k, *params], n = rows, output 0 the
    final value per row (final.dtype)."""
    check_values(dialect, [(dtype, "the input"), (final.dtype, "the row's result")]
                 + [(d, f"captured value {p!r}") for p, d in zip(params, param_dtypes)]
                 + [(d, f"row step {st.name} ({st.op} of {st.dtype})")
                    for st in steps for d in (st.dtype, acc_dtype(st.op, st.dtype))])
    X = KernelArg("X", "input", dtype, 0)
    k = KernelArg("k", "param", I64, 0)
    ps = [KernelArg(f"p_{p}", "param", d, i + 1) for i, (p, d) in enumerate(zip(params, param_dtypes))]
    out = KernelArg("out", "output", final.dtype, 0)
    kv, row, j = K.KVar("k", I64), K.KVar("row_base", I64), K.KVar("j", I64)
    body: list = [K.Declare(row, K.op("*", K.KCast(GROUP, I64), kv))]
    shared: list = []
    for st in steps:
        acc = K.KVar(f"a_{st.name}", acc_dtype(st.op, st.dtype))
        entry = rename(st.entry, _ROW)
        loop = K.For(j, K.KCast(LID, I64), K.op("<", j, kv), K.op("+", j, K.i64(BLOCK)),
                     (K.Declare(K.KVar(X_VAR, dtype), K.KLoad(X.name, K.op("+", row, j), dtype)),
                      _fold(acc, st.op, entry)))
        sh, tree = block_reduce([_acc(acc, st.op)], use_shuffles=False)
        shared += sh
        a = E.Var(acc.name, acc.dtype)
        value = (E.Compare("ne", a, E.Const(0, acc.dtype)) if st.dtype == "bool"
                 else a if st.dtype == acc.dtype else E.Cast(a, st.dtype))
        body += [K.Comment(f"row step {st.name} = {st.op}_j(...): strided loop, then the block tree"),
                 K.Declare(acc, K.KConst(identity(st.op, acc.dtype), acc.dtype)), loop, *tree,
                 K.Declare(K.KVar(f"v_{st.name}", st.dtype), K.Elem(value))]
    body.append(K.If(K.op("==", LID, K.i32(0)),
                     (K.Store(out.name, K.KCast(GROUP, I64), K.Elem(rename(final, _ROW))),)))
    args = (X, k, *ps, KernelArg("n", "n", I64), out)
    kern = K.Kernel(name, args, tuple(shared), tuple(body),
                    doc=f"{name}: one work-group per row, {len(steps)} row step(s), each a block tree.")
    spec = KernelSpec(name, args, "n", "any", "map", (X.name,), (out.name,))
    return _kernel_set([kern], [spec], dialect, name, "rows", [BufferSpec("out", final.dtype, "n")], [])


def column_acc(kind: str, dtype: str) -> str:
    """The accumulator (and output) dtype of X.<kind>(axis=0) on the GPU."""
    if kind in ("min", "max"):
        return "float32" if dtype == "float16" else dtype
    if kind == "mean":
        return "float32" if dtype in ("float16", "float32") else "float64"
    if dtype == "bool" or dtype.startswith("int"):
        return "int64"
    if dtype.startswith("uint"):
        return "uint64"
    return "float32" if dtype == "float16" else dtype          # float32 / float64 sums


def chunk_count(m: int) -> int:
    """Row chunks of a column reduction over m rows (param 1 of the column kernels)."""
    return max(1, min(CHUNKS, -(-m // MIN_CHUNK_ROWS)))


def render_columns(kind: str, dtype: str, dialect: str, name: str = "qc_cols") -> KernelSet:
    """X.<kind>(axis=0) before the mean's division: inputs [X flat], params [m, chunk_count(m)],
    n = k columns, output 0 (column_acc dtype) one value per column."""
    op = "sum" if kind == "mean" else kind
    acc_t = column_acc(kind, dtype)
    check_values(dialect, [(dtype, "the input"), (acc_t, f"X.{kind}(axis=0)'s accumulator (NumPy's for {dtype})")])
    X = KernelArg("X", "input", dtype, 0)
    m = KernelArg("m", "param", I64, 0)
    chunks = KernelArg("chunks", "param", I64, 1)
    n = KernelArg("n", "n", I64)
    tiles = KernelArg("tiles", "value", I64, rule="tiles")
    part = KernelArg("part", "scratch", acc_t, scratch="part")
    out = KernelArg("out", "output", acc_t, 0)
    mv, nv, tv, cv = K.KVar("m", I64), K.KVar("n", I64), K.KVar("tiles", I64), K.KVar("chunks", I64)
    b, col, chunk, step, lo, hi, i, c = (K.KVar(v, I64) for v in ("b", "col", "chunk", "step", "lo", "hi", "i", "c"))
    acc = K.KVar("acc", acc_t)
    x = K.KVar("x_col", dtype)
    init = K.KConst(identity(op, acc_t), acc_t)
    ev = E.Var(x.name, dtype)
    partials_body = (
        K.Declare(b, K.KCast(GROUP, I64)),
        K.Declare(col, K.op("+", K.op("*", K.op("%", b, tv), K.i64(BLOCK)), K.KCast(LID, I64))),
        K.Declare(chunk, K.op("/", b, tv)),
        K.Declare(step, K.op("/", K.op("+", mv, K.op("-", cv, K.i64(1))), cv)),
        K.Declare(lo, K.op("*", chunk, step)),
        K.Declare(hi, K.KSelect(K.op("<", K.op("+", lo, step), mv), K.op("+", lo, step), mv, I64)),
        K.If(K.op("&&", K.op("<", col, nv), K.op("<", chunk, cv)), (
            K.Declare(acc, init),
            K.For(i, lo, K.op("<", i, hi), K.op("+", i, K.i64(1)),
                  (K.Declare(x, K.KLoad(X.name, K.op("+", K.op("*", i, nv), col), dtype)),
                   _fold(acc, op, ev))),
            K.Store(part.name, K.op("+", K.op("*", chunk, nv), col), acc))))
    combine_body = (
        K.Declare(col, K.op("+", K.op("*", K.KCast(GROUP, I64), K.i64(BLOCK)), K.KCast(LID, I64))),
        K.If(K.op("<", col, nv), (
            K.Declare(acc, init),
            K.For(c, K.i64(0), K.op("<", c, cv), K.op("+", c, K.i64(1)),
                  (K.Declare(K.KVar("p", acc_t), K.KLoad(part.name, K.op("+", K.op("*", c, nv), col), acc_t)),
                   _fold(acc, op, E.Var("p", acc_t)))),
            K.Store(out.name, col, acc))))
    pa = (X, m, chunks, n, tiles, part)
    ca = (chunks, n, part, out)
    kerns = [K.Kernel(f"{name}_partials", pa, (), partials_body,
                      doc=f"{name}_partials: column block x row chunk tiles, one column per thread"),
             K.Kernel(f"{name}_combine", ca, (), combine_body,
                      doc=f"{name}_combine: the chunk partials of a column, in chunk order")]
    specs = [KernelSpec(f"{name}_partials", pa, f"tiles*{CHUNKS}", "any", "partials", (X.name,), (part.name,)),
             KernelSpec(f"{name}_combine", ca, "tiles", "any", "finalize", (part.name,), (out.name,))]
    return _kernel_set(kerns, specs, dialect, name, "columns", [BufferSpec("out", acc_t, "n")],
                       [BufferSpec("part", acc_t, f"n*{CHUNKS}")])
