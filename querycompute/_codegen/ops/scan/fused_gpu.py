"""GPU kernels of a scan fused with the pass after it: `scan -> where/select -> count / sum /
first / agg / to_array` computes each running value in registers, in the scan's last pass,
and runs the pass's element and terminal on it; the scanned column is never stored.

The scan is ops/scan/gpu.py's, unchanged up to its last pass (one home for the multi-block
scan): OpenCL / Metal reduce-then-scan (partials, blocks, then the downsweep), CUDA the
single-pass look-back (init, then the look-back kernel). Its downsweep (scan.py step 3)
gives every thread `start` = carry of the tile folded with the earlier threads' folds, then
runs `run = combine(run, x_i)` over the thread's consecutive elements: exactly the values
the unfused scan stores, bit for bit. Here, instead of `out[i] = run`, element i of the
pass reads `run` as its input 0 (its filter `continue`s, its selects follow), and then:

Reduce (count, first, any, all; sum, min, max of integers): each thread folds the
  survivors into the reduce op's accumulators (reduce/gpu.py `make_acc`), the block tree
  (lower/block.block_reduce) leaves one partial per tile, and the reduce op's own finalize
  kernel folds the partials (its `lower_reduce`: one home for the algorithm).
    reduce-then-scan:  <scan>_scan_partials, <scan>_scan_blocks, <pass>_fused_reduce,
                       <pass>_reduce_finalize
    CUDA:              <scan>_scan_init, <pass>_fused_lookback_reduce, <pass>_reduce_finalize
ToArray with a filter (order-preserving compaction, as ops/compact/gpu.py's reduce-then-scan):
  the survivors of each tile are counted in the downsweep (which also keeps the tile's
  carry: `block_carry`), compact_gpu's scan of the counts (scan.py again) gives each tile's
  first rank, and a scatter kernel re-runs the tile's downsweep from the kept carry,
  ranks its survivors (block scan of the thread counts) and writes them in order.
    reduce-then-scan:  <scan>_scan_partials, <scan>_scan_blocks, <pass>_fused_count,
                       count scan (3 kernels), <pass>_fused_scatter
    CUDA:              <scan>_scan_init, <pass>_fused_lookback_count, count scan, <pass>_fused_scatter

What is not fused (`why_not` says which and why): a reduce whose result depends on the
order it combines in (float sums, float min / max, whose -0.0 / 0.0 pick depends on the
tree, and folds: the unfused reduce combines in its own grouping, and the fused result must
be the same bits), a map, a windowed compaction, and a pass reading more than the scanned
column. WGSL (webgpu) gets the same kernels: its 64-bit counts are i32 there, 64-bit sums
of narrow integers two u32 words (reduce/two_words.py), and the count scan's arrays are
renamed (WGSL declares each buffer and workgroup array once per kernel set); webgpu's
runtime keeps two stages for its 64-bit scans (the numpy reference) and where the fused
pass would not fit one storage binding (webgpu_stages.py: its passes then run in windows,
which would restart the scan).

The fused pass is `ScanFusedGpuPass`: the pass with the scan's params appended (as
`scan_<name>`) and `scan` set; its input 0 is the scan's INPUT column (contiguous, of the
scan's dtype). n == 0 runs the unfused plan (an empty scan launches nothing).

Bytes per element (`bytes_per_element`, input size S, survivor output size O, fraction f):
reduce-then-scan reduce 2S (the unfused plan: 3S scan + S pass), look-back reduce S (unfused:
2S + S); compaction 3S + f*O on every dialect (unfused: 3S or 2S scan, then 2S + f*O).
"""
from __future__ import annotations

from dataclasses import dataclass, fields, is_dataclass, replace

from ... import dtypes as D
from ...ir import expr as E
from ...ir import kernel_ir as K
from ...dialects.by_name import DIALECTS, printer
from ...launch import BLOCK, BufferSpec, KernelArg, KernelSet, KernelSpec
from ...lower.block import LID, Acc, block_inclusive_scan, block_reduce
from ...lower.element import INDEX, check_name, element, input_args, rename
from ...narrow_params import narrow_params
from ...ir.program import ParamSpec, Pass, Reduce, ToArray
from ...ir.stage_specs import ScanSpec
from ..compact import gpu as compact_gpu
from . import gpu as scan_op
from ..reduce.gpu import lower_reduce, make_acc
from .names import TILE, VALID

__all__ = ["ScanFusedGpuPass", "why_not", "fuse", "render", "bytes_per_element", "describe"]
ONE = K.i64(1)
# aggregates whose result does not depend on the order survivors are combined in, for any
# dtype / for integer (and bool) dtypes only
_ANY_ORDER = ("count", "first", "any", "all")
_INT_ORDER = ("sum", "min", "max")
TILES = "tiles/1"                    # a buffer / value per scan tile, whatever kernel comes first


@dataclass(frozen=True)
class ScanFusedGpuPass(Pass):
    """Pass `name` whose input 0 is the running value of scan `scan` (module doc)."""
    scan: ScanSpec = None


def why_not(p: Pass, spec: ScanSpec) -> str:
    """"" when pass `p` (input 0: the scanned column) can run in the scan's last pass, else
    why not (explain() prints it)."""
    prog, t = p.program, p.terminal
    if len(prog.inputs) != 1:
        return "the pass reads more than the scanned column"
    if isinstance(t, ToArray):
        if not prog.has_filter:
            return "a map after a scan is the scan's own output pass (nothing to fuse)"
        if t.window is not None:
            return "a take / skip window on the survivors"
        return ""
    for a in t.aggs:
        if a.op in _ANY_ORDER or (a.op in _INT_ORDER and not D.is_float(a.dtype)):
            continue
        return (f"its {a.op} of {a.dtype} depends on the order of combining: the unfused reduce's "
                f"grouping gives the bits, which a fused pass would change")
    return ""


def _rename_params(e: E.Expr, names: dict) -> E.Expr:
    if isinstance(e, E.Param):
        return E.Param(names[e.name], e.dtype)
    kids = {f.name: _rename_params(getattr(e, f.name), names)
            for f in fields(e) if isinstance(getattr(e, f.name), E.Expr)}
    return replace(e, **kids) if kids else e


def fuse(p: Pass, spec: ScanSpec) -> ScanFusedGpuPass:
    """Pass `p` reading the running values of `spec` instead of the scanned column; its
    params are p's, then the scan's (as scan_<name>)."""
    why = why_not(p, spec)
    if why:
        raise ValueError(f"pass {p.name} cannot run inside scan {spec.name}: {why}")
    names = {q.name: f"scan_{q.name}" for q in spec.params}
    scan = replace(spec, combine=_rename_params(spec.combine, names),
                   params=tuple(ParamSpec(names[q.name], q.dtype) for q in spec.params))
    prog = replace(p.program, params=p.program.params + scan.params)
    return ScanFusedGpuPass(prog, p.terminal, f"{p.name}_in_{spec.name}", scan)


class _Fused(scan_op._Lower):
    """scan.py's lowering whose downsweep runs pass `fp` on each running value."""

    def __init__(self, fp: ScanFusedGpuPass, runs: int):
        bind = {"num_blocks": KernelArg("num_blocks", "value", "int64", rule="tiles"),
                # the look-back's inclusive prefixes: not compact_gpu's block_incl (int64)
                "block_incl": KernelArg("block_incl", "scratch", fp.scan.dtype, scratch="scan_incl")}
        super().__init__(fp.scan, runs, bind)
        self.fp, self.prog = fp, fp.program
        first = len(fp.program.params) - len(fp.scan.params)
        self.params = tuple(replace(a, index=first + k) for k, a in enumerate(self.params))
        self.use_shuffles = False   # the reduce tail's block tree (_reduce sets it)
        self.tail = None            # (extra args, shared arrays, statements after the loops)
        self.mode = ""

    # ---- the fused downsweep --------------------------------------------------------------
    def start(self, carry: K.KExpr) -> list:
        """start = carry, then the earlier threads' fold (scan.py step 3's first half)."""
        start, prev = self.var("start"), self.var("prev")
        return [K.Comment("Step 3, fused: carry, then the earlier threads' fold; each running value then\n"
                          "feeds the pass's element instead of being stored."),
                K.Declare(start, carry),
                K.If(K.op("&&", VALID, K.op(">", LID, K.i32(0))),
                     (K.Declare(prev, K.KLoad(scan_op.SH, K.op("-", LID, K.i32(1)), self.dtype)),
                      K.Assign(start, self.combine(start, prev))))]

    def elements(self, consumed, after: list, first: bool = True) -> list:
        """run = start, then per element: run = combine(run, x_i), the pass's element on run
        (input 0 = run; a dropped element `continue`s), then `after`."""
        run, x, k = self.var("run"), self.var("x"), K.KVar("k", "int32")
        name0 = f"x_{self.prog.inputs[0].name}"
        body = [K.Declare(s.var, run) if isinstance(s, K.Declare) and s.var.name == name0 else s
                for s in element(self.prog, False, consumed)]
        loop = K.For(k, K.i32(0), K.op("<", k, K.i32(self.ept)), K.op("+", k, K.i32(1)), (
            K.Declare(INDEX, K.op("+", scan_op.BASE, K.KCast(k, "int64"))),
            K.If(K.op(">=", INDEX, scan_op.N), (K.Break(),)),
            K.Declare(x, K.KLoad(self.IN, INDEX, self.dtype)),
            K.Assign(run, self.combine(run, x)),
            *body, *after), unroll=True)
        set_run = K.Declare(run, self.var("start")) if first else K.Assign(run, self.var("start"))
        return [set_run, loop]

    def downsweep(self, carry: K.KExpr) -> list:
        return self.start(carry) + self.tail[2]

    def args(self, *names) -> tuple:
        out = []
        for nm in names:
            out += self.tail[0] if nm == "out" else super().args(nm)
        return tuple(out)

    def kernel(self, suffix: str, args, body, doc: str, shared: tuple = (scan_op.SH,)) -> K.Kernel:
        k = super().kernel(suffix, args, body, doc, shared)
        if suffix in ("downsweep", "lookback"):
            k = replace(k, name=f"{self.fp.name}_fused_{self.mode}" if suffix == "downsweep"
                        else f"{self.fp.name}_fused_lookback_{self.mode}", shared=k.shared + tuple(self.tail[1]))
        return k

    def pass_params(self) -> list:
        """The pass's own params (the scan's follow them in the program's list)."""
        own = len(self.prog.params) - len(self.fp.scan.params)
        return [a for a in input_args(self.prog, False) if a.kind == "param"][:own]


def _scratch(name: str, dtype: str) -> KernelArg:
    return KernelArg(name, "scratch", dtype, scratch=name)


def _reduce(lo: _Fused, pr) -> tuple:
    """The reduce tail: accumulate survivors, block tree, one partial per tile; and the
    reduce op's finalize -> (finalize kernel, its spec, outputs, result slots, partial buffers)."""
    fp = lo.fp
    two_words = not pr.CAPS.int64      # no 64-bit values (WGSL): NumPy's 64-bit sums in two u32 words
    built = [make_acc(j, a, fp.program, "", two_words) for j, a in enumerate(fp.terminal.aggs)]
    accs = [b[0] for b in built]
    slots = [s for a in accs for s in a.slots]
    dtypes = [d for b in built for d in b[2]]
    consumed = [v for a in fp.terminal.aggs for v in a.values]
    fold = [st for a, b in zip(accs, built) for st in a.combine(b[1])]
    lo.use_shuffles = pr.CAPS.shuffles and all(s.dtype in pr.SHUFFLE_TYPES for s in slots)
    shared, tree = block_reduce(accs, lo.use_shuffles)
    parts = [_scratch(f"part_{s.name}", d) for s, d in zip(slots, dtypes)]
    write = K.If(K.op("==", LID, K.i32(0)), tuple(K.Store(a.name, TILE, s) for a, s in zip(parts, slots)))
    stmts = ([s for a in accs for s in a.declare()] + lo.elements(consumed, fold)
             + [K.Comment("One partial per tile: the reduce op's block tree, then its finalize kernel."),
                *tree, write])
    lo.tail, lo.mode = (tuple(lo.pass_params()) + tuple(parts), shared, stmts), "reduce"
    plain = Pass(replace(fp.program, params=fp.program.params[:len(fp.program.params) - len(fp.scan.params)]),
                 fp.terminal, fp.name)
    kernels, specs, outputs, _, result_slots = lower_reduce(plain, lo.ept, pr.SHUFFLE_TYPES if pr.CAPS.shuffles else (),
                                                            False, two_words)
    per_tile = lambda a: replace(a, rule="tiles") if a.kind == "value" else a  # noqa: E731
    final = replace(kernels[-1], args=tuple(per_tile(a) for a in kernels[-1].args))
    final_spec = replace(specs[-1], args=final.args)
    return final, final_spec, outputs, result_slots, tuple(BufferSpec(a.name, a.dtype, TILES) for a in parts)


COUNT, INCL = compact_gpu.COUNT, compact_gpu.INCL


def _count_tail(lo: _Fused, keep_carry: bool) -> None:
    """Count the tile's survivors -> block_counts[TILE] (and keep the tile's carry)."""
    counts = _scratch("block_counts", "int64")
    sum_counts = Acc((COUNT,), (K.i64(0),), lambda src: [K.Assign(COUNT, K.op("+", COUNT, K.Elem(src[0])))])
    shared, tree = block_reduce([sum_counts], use_shuffles=False)
    stmts = [K.Declare(COUNT, K.i64(0))] + lo.elements((), [K.Assign(COUNT, K.op("+", COUNT, ONE))]) + tree
    keep = []
    extra = (counts,)
    if keep_carry:      # the look-back's carry, for the scatter kernel to start from
        carry = _scratch("block_carry", lo.dtype)
        keep = [K.Store("block_carry", TILE, K.KLoad("sh_carry", K.i32(0), lo.dtype))]
        extra = (counts, carry)
    stmts.append(K.If(K.op("==", LID, K.i32(0)), tuple(keep + [K.Store("block_counts", TILE, COUNT)])))
    lo.tail, lo.mode = (tuple(lo.pass_params()) + extra, shared, stmts), "count"


def _scatter_kernel(lo: _Fused, outs: tuple) -> K.Kernel:
    """Re-run the tile's downsweep from block_carry, rank the survivors, write them in order."""
    prog = lo.prog
    pos, start, end = K.KVar("pos", "int64"), K.KVar("tile_start", "int64"), K.KVar("tile_end", "int64")
    writes = [K.Store(a.name, pos, K.Elem(rename(e, prog))) for a, e in zip(outs, prog.outputs)]
    writes.append(K.Assign(pos, K.op("+", pos, ONE)))
    last = K.op("&&", K.op("==", LID, K.i32(0)), K.op("==", TILE, K.op("-", K.KVar("num_blocks", "int64"), ONE)))
    body = (lo.tile_start(K.KCast(K.KThread("group_id"), "int64")) + lo.thread_fold() + lo.block_scan(lo.var("tacc"))
            + lo.start(K.KLoad("block_carry", TILE, lo.dtype))
            + [K.Declare(end, K.KLoad("block_incl", TILE, "int64")),
               K.Declare(start, K.op("-", end, K.KLoad("block_counts", TILE, "int64"))),
               K.If(last, (K.Store("total", K.i32(0), end),)),
               K.Declare(COUNT, K.i64(0))]
            + lo.elements((), [K.Assign(COUNT, K.op("+", COUNT, ONE))])
            + block_inclusive_scan(COUNT, INCL, "sh_count")
            + [K.Comment("This thread's survivors go right after those of earlier tiles and threads."),
               K.Declare(pos, K.op("+", start, K.op("-", INCL, COUNT)))]
            + lo.elements(prog.outputs, writes, first=False))
    args = (KernelArg(lo.IN, "input", lo.dtype, 0), *lo.params, *lo.pass_params(), KernelArg("n", "n", "int64"),
            KernelArg("num_blocks", "value", "int64", rule="tiles"), _scratch("block_carry", lo.dtype),
            _scratch("block_counts", "int64"), _scratch("block_incl", "int64"), _scratch("total", "int64"), *outs)
    shared = (K.SharedArray(scan_op.SH, lo.dtype, BLOCK), K.SharedArray("sh_count", "int64", BLOCK))
    return K.Kernel(f"{lo.fp.name}_fused_scatter", args, shared, tuple(body),
                    doc=f"{lo.fp.name}: the tile's scan again from its carry; survivors ranked and written in order.")


def _rename_buffers(node, names: dict):
    """Kernel IR `node` with the buffers and shared arrays (loads, stores, atomics,
    arguments, declarations) of `names` renamed."""
    if isinstance(node, tuple):
        return tuple(_rename_buffers(x, names) for x in node)
    if isinstance(node, KernelArg):
        return replace(node, name=names.get(node.name, node.name)) if node.is_buffer else node
    if isinstance(node, K.SharedArray):
        return replace(node, name=names.get(node.name, node.name))
    if not is_dataclass(node) or isinstance(node, (type, E.Expr)):
        return node
    changes = {}
    for f in fields(node):
        v = getattr(node, f.name)
        if f.name == "buffer" and isinstance(v, str):
            new = names.get(v, v)
        else:
            new = _rename_buffers(v, names)
        if new is not v:
            changes[f.name] = new
    return replace(node, **changes) if changes else node


def lower(fp: ScanFusedGpuPass, dialect: str, pr, group: int = scan_op.LOOKBACK):
    """-> (kernels, specs, outputs, scratch, result slots, ept, shape)."""
    runs = scan_op.RUNS["cpu" if pr.FOLD_RUNS_APART else "gpu"]
    lo = _Fused(fp, runs)
    lookback = scan_op.algorithm(dialect) == "lookback"
    kernels, specs = [], []

    def add(kernel, grid, role):
        kernels.append(kernel)
        specs.append(KernelSpec(kernel.name, kernel.args, grid, "any", role))

    scan_scratch = (("block_aggs", fp.scan.dtype), ("scan_incl", fp.scan.dtype), ("block_flags", "uint32")) \
        if lookback else (("block_aggs", fp.scan.dtype), ("block_carry", fp.scan.dtype))
    scratch = [BufferSpec(nm, d, TILES) for nm, d in scan_scratch] + ([BufferSpec("ticket", "uint32", "one")]
                                                                        if lookback else [])
    if isinstance(fp.terminal, Reduce):
        shape = "reduce"
        final, final_spec, outputs, slots, parts = _reduce(lo, pr)
        scratch += parts
    else:
        shape = "compact"
        _count_tail(lo, keep_carry=lookback)
        outs = tuple(KernelArg(f"out{k}", "output", d, k) for k, d in enumerate(fp.program.output_dtypes))
        outputs = tuple(BufferSpec(a.name, a.dtype, "n") for a in outs)
        if lookback:
            scratch.append(BufferSpec("block_carry", fp.scan.dtype, TILES))
    if lookback:
        add(lo.init(), "one", "init")
        add(lo.lookback(group), "tiles", "scan")
    else:
        add(lo.partials(), "tiles", "partials")
        add(lo.blocks(), "one", "scan")
        add(lo.downsweep_kernel(), "tiles", "downsweep")
    if shape == "reduce":
        add(final, "one", "finalize")
        specs[-1] = final_spec
        return kernels, specs, outputs, tuple(scratch), slots, lo.ept, shape
    counts = compact_gpu._counts_scan(fp.name, dialect)
    # the count scan's arrays under names of their own: WGSL declares a buffer or workgroup
    # array once per kernel set, of one dtype, and the value scan's have the same names
    own = {"block_aggs": "count_aggs", "block_carry": "count_carry", scan_op.SH: "sh_count_scan"}
    add(_rename_buffers(counts.partials(), own), counts.grid, "partials")
    add(_rename_buffers(counts.blocks(), own), "one", "scan")
    add(_rename_buffers(counts.downsweep_kernel(), own), counts.grid, "downsweep")
    add(_scatter_kernel(lo, outs), "tiles", "scatter")
    scratch += [BufferSpec("block_counts", "int64", TILES), BufferSpec("block_incl", "int64", TILES),
                BufferSpec("count_aggs", "int64", counts.grid), BufferSpec("count_carry", "int64", counts.grid),
                BufferSpec("total", "int64", "one")]
    return kernels, specs, outputs, tuple(scratch), (), lo.ept, shape


def render(fp: ScanFusedGpuPass, dialect: str, group: int = scan_op.LOOKBACK) -> KernelSet:
    """Every kernel of the fused pass in `dialect` ("cuda", "opencl", "metal" or "webgpu");
    `group` (CUDA) as scan.render's. Raises codegen.errors.UnsupportedType where the dialect
    can't hold a dtype (WGSL: any 64-bit value)."""
    from ...traffic import touched
    if dialect not in DIALECTS:
        raise ValueError(f"no fused scan pass in {dialect!r} (cuda, opencl, metal and webgpu have one)")
    check_name(fp.name, "pass")
    pr = printer(dialect)
    if not (pr.CAPS.float64 and pr.CAPS.int64):
        fp = narrow_params(fp)    # a captured 64-bit value cast on the host, as gpu.render does
    prog = fp.program
    for d in [s.dtype for s in prog.inputs] + [s.dtype for s in prog.params] + list(prog.output_dtypes):
        pr.check(d)
    pr.check_pass(fp)             # WGSL: no 64-bit values
    kernels, specs, outputs, scratch, slots, ept, shape = lower(fp, dialect, pr, group)
    header = (f"// querycompute pass {fp.name}: {describe(fp, dialect)}\n"
              f"// compile options: {' '.join(pr.OPTIONS) or '(none)'}"
              + (f" ({pr.OPTIONS_WHY})" if pr.OPTIONS_WHY else ""))
    by_name = {k.name: k for k in kernels}
    specs = tuple(replace(s, **dict(zip(("reads", "writes"), touched(by_name[s.name])))) for s in specs)
    return KernelSet(dialect=dialect, pass_name=fp.name, shape=shape, source=pr.render(kernels, header),
                     options=pr.OPTIONS, kernels=specs, outputs=outputs, scratch=scratch,
                     result_slots=slots, elems_per_thread=ept)


def bytes_per_element(fp: ScanFusedGpuPass, dialect: str) -> list[tuple[str, int]]:
    """(kernel, DRAM bytes read + written per element) of the launches that touch every
    element (the module doc). The scatter reads its tile three times (fold, count, write)
    but from DRAM once: the tile (BLOCK x ept elements, 16-32 KiB) stays in L1 / L2; its
    writes count every element as a survivor (an upper bound: f = 1)."""
    s, name = D.itemsize(fp.scan.dtype), fp.name
    lookback = scan_op.algorithm(dialect) == "lookback"
    if isinstance(fp.terminal, Reduce):
        if lookback:
            return [(f"{name}_fused_lookback_reduce", s)]
        return [(f"{fp.scan.name}_scan_partials", s), (f"{name}_fused_reduce", s)]
    out = sum(D.itemsize(d) for d in fp.program.output_dtypes)
    first = [(f"{name}_fused_lookback_count", s)] if lookback else \
        [(f"{fp.scan.name}_scan_partials", s), (f"{name}_fused_count", s)]
    return first + [(f"{name}_fused_scatter", s + out)]


def describe(fp: ScanFusedGpuPass, dialect: str) -> str:
    """One line for explain() and the source header."""
    total = sum(b for _, b in bytes_per_element(fp, dialect))
    scan = "single-pass look-back" if scan_op.algorithm(dialect) == "lookback" else "reduce-then-scan"
    what = "reduce" if isinstance(fp.terminal, Reduce) else "order-preserving compaction"
    return (f"inclusive scan of {fp.scan.dtype} ({scan}) fused with the {what} after it: the running "
            f"values stay in registers, {total} B per element at most")
