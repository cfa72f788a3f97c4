"""The llvm dialect: prints a fused cpu pass directly as LLVM IR (llvmlite.ir).

Why it exists (issue 28, DESIGN.md section 5f): numba spends 1-3 s typing and compiling a
printed pass, and even a disk-cache hit costs ~1 s of numba's import and setup; the same pass
printed as LLVM IR compiles in ~0.2 s (O3 and MCJIT) and loads from its object file in a few
ms (benchmarks/llvm_route.py). The cpu backend takes this route for every pass this printer
supports (`unsupported(p)` says why not otherwise: the numba dialect then prints it) and the
result is the SAME, bit for bit: the IR spells the numba dialect's semantics (numba_py_expr,
numba_py_helpers) and its fixed float-sum order (_codegen/sum_order.py) operation by
operation, with no fast-math flags and no FMA contraction. tests/test_issue28_llvm_route.py
compares the two routes and the numpy backend on every supported node.

What it prints: ONE module per pass with C-ABI entry points over a range of chunks [c0, c1)
(the cpu backend's morsel scheduler, backends/cpu/morsels.py, hands ranges to the cores; a
ctypes call releases the GIL). An entry point takes ONE argument, a tuple of Python objects
(`_Module.unpack`: the integers and params packed in a bytes object, a bytearray for the
results, NumPy arrays); spelled as C-like signatures:

    reduce  void <name>_chunks(i64 c0, i64 c1, i64 nfin, i64 n, R, P_<state>...,
                               in..., params...)
            the partial states of chunks [c0, c1) into the per-chunk arrays P_<state>, then
            the first nfin chunks' partials combined in chunk order into R (one 8-byte slot
            per result value: `result_dtypes(p)`); nfin = 0 for a morsel
    map     void <name>_chunks(i64 c0, i64 c1, i64 n, out..., in..., params...)

The element is computed without branches (every Let and every filter for every element; a
Where evaluates both sides, so an integer division guards its divisor instead of trapping),
as in the numba dialect, so LLVM vectorises the loops.

Supported (everything else is refused by `unsupported` with the reason): plain passes and
passes after a join, read through its index columns (no scan fused in, no shaped element
arrays), stage ops map and compact (without a
window), or reduce with sum, count, min, max, any, all, first; dtypes bool, int8-64, uint8-64, float32, float64 (float16 is numba's);
every expr node except Lookup, pow, hypot, atan2 and the math functions other than sqrt,
floor, ceil, trunc, rint and the float predicates (libm's ulps are numba's business); float
// and % and fmod are exact (from `frem`, C's fmod), so they are here.
"""
from __future__ import annotations

from functools import lru_cache

from .. import dtypes as D
from ..ir import expr as E
from .. import pretty
from ..capabilities import DialectCaps
from ..order_keys import minmax_key, minmax_key_llvm
from ..ir.program import Filter, Let, Pass, Reduce
from ..sum_order import BLOCK, CHUNK, LANES
from .numba_indexed import IndexedPass

NAME = "llvm"                         # the cpu backend's other dialect (its `route`)
# every NumPy type this printer takes as a value; chunks handed to the cores as the numba
# dialect's are (no blocks, shuffles or atomics in the generated code)
CAPS = DialectCaps("LLVM IR (llvmlite)")
AGGS = ("sum", "count", "min", "max", "any", "all", "first")
_BINARY = ("add", "sub", "mul", "truediv", "floordiv", "mod", "bitand", "bitor", "bitxor",
           "lshift", "rshift", "min", "max", "and", "or", "copysign", "fmod")
_CALLS = ("sqrt", "floor", "ceil", "trunc", "rint", "isnan", "isinf", "isfinite")
_TYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float32", "float64")


# ---- what this printer takes ---------------------------------------------------------------
def unsupported(p: Pass) -> str | None:
    """Why pass `p` cannot be printed as LLVM IR (then the numba dialect prints it), or None."""
    if type(p) not in (Pass, IndexedPass):
        return f"{type(p).__name__} (a pass fused after a scan)"
    prog = p.program
    if p.stage_op not in ("map", "compact", "reduce"):
        return f"stage op {p.stage_op}"
    if getattr(p.terminal, "window", None) is not None:
        return "a compaction window"
    if any(s.element for s in prog.inputs) or getattr(p.terminal, "element", 0):
        return "shaped elements"
    for s in prog.inputs:
        if s.dtype not in _TYPES:
            return f"input dtype {s.dtype}"
    for s in prog.params:
        if s.table or s.dtype not in _TYPES:
            return "a string-function table parameter" if s.table else f"parameter dtype {s.dtype}"
    exprs = [s.expr if isinstance(s, Let) else s.cond for s in prog.body]
    if isinstance(p.terminal, Reduce):
        for agg in p.terminal.aggs:
            if agg.op not in AGGS:
                return f"aggregate {agg.op}"
            if agg.dtype not in _TYPES:
                return f"aggregate dtype {agg.dtype}"
            exprs += list(agg.values)
    else:
        exprs += list(prog.outputs)
    for root in exprs:
        for e in E.walk(root):
            why = _node_unsupported(e)
            if why:
                return why
    return None


def _node_unsupported(e: E.Expr) -> str | None:
    if e.dtype not in _TYPES:
        return f"dtype {e.dtype}"
    if isinstance(e, E.Lookup):
        return "a string function (table lookup)"
    if isinstance(e, E.Binary):
        if e.op not in _BINARY:
            return f"operator {e.op}"
    if isinstance(e, E.Call) and e.fn not in _CALLS:
        return f"function {e.fn}"
    if isinstance(e, E.Cast) and e.x.dtype not in _TYPES:
        return f"cast from {e.x.dtype}"
    return None


def result_dtypes(p: Pass) -> tuple[str, ...]:
    """The dtypes of a reduce entry's result slots, in order: one value per aggregate (a
    count is int64, any / all bool), a `first` its index (int64, -1: none) and its values
    (ops.reduce.cpu_result_width, as cpu.agg_converters reads them)."""
    out = []
    for a in p.terminal.aggs:
        out += ["int64"] + [v.dtype for v in a.values] if a.op == "first" else [a.dtype]
    return tuple(out)


def partial_dtypes(p: Pass) -> tuple[str, ...]:
    """The dtypes of a reduce entry's per-chunk partial arrays P_<state>, in order: every
    aggregate's states (`_states`)."""
    return tuple(d for a in p.terminal.aggs for d, _ in _states(a))


def _states(agg) -> list:
    """(dtype, initial value) of an aggregate's state variables, in order: its value state,
    then a float min / max's NaN flag (bool), a `first`'s values."""
    d = agg.dtype
    if agg.op == "sum":
        return [(d, -0.0 if D.is_float(d) else 0)]
    if agg.op == "count":
        return [("int64", 0)]
    if agg.op in ("min", "max") and D.is_float(d):
        kd = "int64" if d == "float64" else "int32"
        return [(kd, minmax_key(float("inf") if agg.op == "min" else float("-inf"), d)),
                ("bool", 0)]
    if agg.op in ("min", "max"):
        lo, hi = D.int_limits(d) if D.is_int(d) else (0, 1)
        return [(d, hi if agg.op == "min" else lo)]
    if agg.op == "first":                   # the index (-1: none yet), then its values
        return [("int64", -1)] + [(v.dtype, 0) for v in agg.values]
    return [("bool", 1 if agg.op == "all" else 0)]


# ---- printing --------------------------------------------------------------------------------
@lru_cache(maxsize=None)
def _ir():
    import llvmlite.ir as ir          # a heavy optional dependency: only when printing
    return ir


def render(p: Pass, layout: tuple = (24, 32, 40, 16)) -> str:
    """The LLVM IR module text of pass `p` (`unsupported(p)` must be None). `layout`: where
    the objects an entry point is called with keep their data (_Module.unpack; these are a
    64-bit CPython 3.11's, the loader measures them)."""
    why = unsupported(p)
    if why:
        raise ValueError(f"pass {p.name}: the llvm dialect does not print {why}")
    return _header(p) + str(_Module(p, layout).build())


def _header(p: Pass) -> str:
    """The module's first lines: what it computes, as comments (the program as explain()
    prints it), so the IR reads like the other dialects' sources."""
    prog = p.program
    ins = ", ".join(f"{s.name}: {s.dtype}" for s in prog.inputs) or "none (index only)"
    params = ", ".join(f"{s.name}: {s.dtype}" for s in prog.params) or "none"
    if isinstance(p.terminal, Reduce):
        what = [f"aggregate {pretty.agg_text(a)}" for a in p.terminal.aggs]
    else:
        outs = ", ".join(f"{pretty.fmt(e)}:{e.dtype}" for e in prog.outputs)
        what = [f"store in order{' (compacted)' if prog.has_filter else ''}: {outs}"]
    lines = [f"querycompute cpu kernels for pass {p.name!r} (dialect llvm, generated: "
             f"querycompute/_codegen/dialects/llvm_ir.py)", f"inputs: {ins}", f"params: {params}",
             *pretty.program_lines(prog), *what]
    return "".join(f"; {line}\n" for line in lines)


def _t(dtype: str):
    """The register type of a value of `dtype` (bool: i1)."""
    ir = _ir()
    if dtype == "bool":
        return ir.IntType(1)
    if dtype == "float32":
        return ir.FloatType()
    if dtype == "float64":
        return ir.DoubleType()
    return ir.IntType(D.bits(dtype))


def _mem(dtype: str):
    """The type of a value of `dtype` in memory (bool: one byte, as NumPy stores it)."""
    return _ir().IntType(8) if dtype == "bool" else _t(dtype)


class _Module:
    def __init__(self, p: Pass, layout: tuple):
        ir = _ir()
        self.p, self.prog = p, p.program
        self.layout = layout
        self.m = ir.Module(name=p.name)
        self.i64 = ir.IntType(64)
        self.reduce = isinstance(p.terminal, Reduce)

    def c64(self, v: int):
        return self.i64(v)

    # ---- intrinsics ----------------------------------------------------------------------
    def intrinsic(self, name: str, dtype: str, nargs: int = 1):
        """llvm.<name>.<f32|f64>: exact IEEE operations LLVM inlines (sqrt, fabs, floor...)."""
        ir = _ir()
        t = _t(dtype)
        full = f"llvm.{name}.{'f64' if dtype == 'float64' else 'f32'}"
        fn = self.m.globals.get(full)
        if fn is None:
            fn = ir.Function(self.m, ir.FunctionType(t, [t] * nargs), full)
        return fn

    # ---- loops ---------------------------------------------------------------------------
    def loop(self, b, fn, start, stop, step: int = 1, name: str = "i"):
        """A counted loop [start, stop) by `step` (i64, signed compare); returns (i, done):
        the builder is positioned in the body with the induction value i; call done()
        at the body's end, which positions the builder after the loop."""
        pre = b.block
        cond, body, end = (fn.append_basic_block(f"{name}.{s}") for s in ("cond", "body", "end"))
        b.branch(cond)
        b.position_at_end(cond)
        i = b.phi(self.i64, name=name)
        i.add_incoming(start, pre)
        b.cbranch(b.icmp_signed("<", i, stop), body, end)
        b.position_at_end(body)

        def done():
            nxt = b.add(i, self.c64(step))
            i.add_incoming(nxt, b.block)
            b.branch(cond)
            b.position_at_end(end)
        return i, done

    @staticmethod
    def local(b, t, count: int = 1):
        """A stack slot of type t (count of them) at the start of the function's entry block,
        wherever `b` is: an alloca inside a loop would grow the stack every iteration (and
        mem2reg promotes only the entry block's)."""
        with b.goto_entry_block():         # (before its terminator, if it has one)
            return b.alloca(t, count) if count > 1 else b.alloca(t)

    def minimum(self, b, x, y):
        return b.select(b.icmp_signed("<", x, y), x, y)

    # ---- the element ---------------------------------------------------------------------
    def element(self, b, i, loads, params, values):
        """(keep, [value of each expr in `values`]) of element i: every Let and filter."""
        ex = _Expr(self, b, i, loads, params)
        keep = _ir().IntType(1)(1)
        for stmt in self.prog.body:
            if isinstance(stmt, Let):
                ex.vars[stmt.name] = ex.value(stmt.expr)
            elif isinstance(stmt, Filter):
                keep = b.and_(keep, ex.value(stmt.cond))
        return keep, [ex.value(v) for v in values]

    def input_loader(self, b, ins):
        """input number -> (element index -> its value in register type). A pass after a
        join (numba_indexed.IndexedPass) reads input k through its index column via[k]:
        in_k[idx[i]], and where `filled[k]` (a left join's other side) an index of -1 reads
        the fill value (NaN, 0, False: ops/join/reference.fill_value) - a branch, as in the
        numba dialect, so a row without a match never loads (the column may be empty)."""
        via, filled = getattr(self.p, "via", ()), getattr(self.p, "filled", ())

        def raw(k: int, i):
            if via and via[k] >= 0:
                at = b.load(b.gep(ins[via[k]], [i], inbounds=True))
                if filled[k]:
                    return self._filled(b, ins[k], at, self.prog.inputs[k].dtype)
                i = at
            return b.load(b.gep(ins[k], [i], inbounds=True))

        def load(k: int, i):
            v = raw(k, i)
            return b.icmp_unsigned("!=", v, v.type(0)) if self.prog.inputs[k].dtype == "bool" else v
        return load

    def _filled(self, b, ptr, at, dtype: str):
        """ptr[at], or dtype's fill value where at < 0 (memory type)."""
        t = _mem(dtype)
        fill = t(float("nan")) if D.is_float(dtype) else t(0)
        with b.if_else(b.icmp_signed(">=", at, at.type(0))) as (then, otherwise):
            with then:
                got, got_at = b.load(b.gep(ptr, [at], inbounds=True)), b.block
            with otherwise:
                none_at = b.block
        out = b.phi(t)
        out.add_incoming(got, got_at)
        out.add_incoming(fill, none_at)
        return out

    def param_values(self, b, args):
        out = {}
        for s, a in zip(self.prog.params, args):
            out[s.name] = b.icmp_unsigned("!=", a, a.type(0)) if s.dtype == "bool" else a
        return out

    def unpack(self, b, args, scalars: int, arrays, params, results: bool = False):
        """The entry point's one argument, the tuple (head, [results,] arrays...) its caller
        built (PyTupleObject*; backends/cpu/llvm_loader.py's LlvmEntry): head a bytes object
        of 8-byte slots, the `scalars` leading integers (c0, c1, ...) and then the params
        (each in its own slot, in its memory type), `results` a bytearray of 8-byte slots the
        entry writes, then NumPy arrays of `arrays` dtypes (C-contiguous). Returns (the
        integers, the results' pointer or None, the arrays' data pointers, the params'
        values). One object argument, because ctypes converts each argument at ~1 us: seven
        cost more than the kernel at n = 1e3. Where the objects keep their data is the
        loader's measurement (`layout`: the offsets of a tuple's first item, a bytes
        object's characters, a bytearray's start pointer and an array's data pointer)."""
        ir = _ir()
        ptr = ir.IntType(8).as_pointer()
        item_at, bytes_at, bytearray_at, data_at = self.layout

        def item(k: int):
            return b.load(b.bitcast(b.gep(args, [self.c64(item_at + 8 * k)]), ptr.as_pointer()))

        def pointer_in(obj, at: int, dtype: str):
            raw = b.load(b.bitcast(b.gep(obj, [self.c64(at)]), ptr.as_pointer()))
            return b.bitcast(raw, _mem(dtype).as_pointer())

        head = b.gep(item(0), [self.c64(bytes_at)])

        def slot(j: int, dtype: str):
            return b.load(b.bitcast(b.gep(head, [self.c64(8 * j)]), _mem(dtype).as_pointer()))

        ints = [slot(j, "int64") for j in range(scalars)]
        vals = [slot(scalars + j, d) for j, d in enumerate(params)]
        first = 2 if results else 1
        out = pointer_in(item(1), bytearray_at, "uint8") if results else None
        ptrs = [pointer_in(item(first + j), data_at, d) for j, d in enumerate(arrays)]
        return ints, out, ptrs, vals

    def arg_types(self):
        """The chunk function's pointer types of the inputs and memory types of the params."""
        return ([_mem(s.dtype).as_pointer() for s in self.prog.inputs],
                [_mem(s.dtype) for s in self.prog.params])

    def build(self):
        if self.reduce:
            _Reduce(self).build()
        elif self.p.stage_op == "compact":
            self.build_compact()
        else:
            self.build_map()
        return self.m

    def entry(self, suffix: str, scalars: int, arrays: list):
        """(function, builder, integers, array pointers, param values) of entry point
        <name>_<suffix> taking the tuple `unpack` reads: `scalars` integers, the arrays of
        dtypes `arrays` and then the program's inputs and params."""
        ir = _ir()
        fn = ir.Function(self.m, ir.FunctionType(ir.VoidType(), [ir.IntType(8).as_pointer()]),
                         f"{self.p.name}_{suffix}")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        ints, _, ptrs, ps = self.unpack(b, fn.args[0], scalars, arrays + [s.dtype for s in self.prog.inputs],
                                        [s.dtype for s in self.prog.params])
        return fn, b, ints, ptrs, self.param_values(b, ps)

    def store_outputs(self, b, ptrs, vals, at) -> None:
        for ptr, v, d in zip(ptrs, vals, self.prog.output_dtypes):
            b.store(b.zext(v, _mem(d)) if d == "bool" else v, b.gep(ptr, [at], inbounds=True))

    def build_compact(self):
        """ops/compact.py's cpu entry points (the same chunks, bits and offsets):
        <name>_count(c0, c1, scan, n, bits, offsets, in..., params...),
        <name>_write(c0, c1, n, offsets, out..., in..., params...) and
        <name>_write_sparse(c0, c1, n, offsets, bits, out..., in..., params...)."""
        ir = _ir()
        i64, c = self.i64, self.c64
        outs = list(self.prog.output_dtypes)
        # count: each chunk's survivors into offsets[c + 1], keep flags as bits, then (scan)
        # the prefix sum over all ceil(n / CHUNK) chunks
        fn, b, (c0, c1, scan, n), (bits, offsets, *xs), params = self.entry("count", 4, ["uint64", "int64"])
        ch, ch_done = self.loop(b, fn, c0, c1, name="c")
        lo = b.mul(ch, c(CHUNK))
        hi = self.minimum(b, n, b.add(lo, c(CHUNK)))
        cnt = self.local(b, i64)
        b.store(c(0), cnt)
        w0, w_done = self.loop(b, fn, lo, hi, 64, "w")
        word = self.local(b, i64)
        b.store(c(0), word)
        i, done = self.loop(b, fn, w0, self.minimum(b, hi, b.add(w0, c(64))))
        keep, _ = self.element(b, i, lambda k: self.input_loader(b, xs)(k, i), params, [])
        k64 = b.zext(keep, i64)
        b.store(b.or_(b.load(word), b.shl(k64, b.sub(i, w0))), word)
        b.store(b.add(b.load(cnt), k64), cnt)
        done()
        b.store(b.load(word), b.gep(bits, [b.ashr(w0, c(6))], inbounds=True))
        w_done()
        b.store(b.load(cnt), b.gep(offsets, [b.add(ch, c(1))], inbounds=True))
        ch_done()
        with b.if_then(b.icmp_signed("!=", scan, c(0))):
            nch = b.sdiv(b.add(n, c(CHUNK - 1)), c(CHUNK))
            j, jdone = self.loop(b, fn, c(0), nch, name="s")
            at = b.gep(offsets, [b.add(j, c(1))], inbounds=True)
            b.store(b.add(b.load(at), b.load(b.gep(offsets, [j], inbounds=True))), at)
            jdone()
        b.ret_void()
        # write: every element stored at the next free slot, which only a survivor moves on
        fn, b, (c0, c1, n), (offsets, *rest), params = self.entry("write", 3, ["int64"] + outs)
        o, xs = rest[:len(outs)], rest[len(outs):]
        ch, ch_done = self.loop(b, fn, c0, c1, name="c")
        pos = self.local(b, i64)
        b.store(b.load(b.gep(offsets, [ch], inbounds=True)), pos)
        end = b.load(b.gep(offsets, [b.add(ch, c(1))], inbounds=True))
        lo = b.mul(ch, c(CHUNK))
        i, done = self.loop(b, fn, lo, self.minimum(b, n, b.add(lo, c(CHUNK))))
        keep, vals = self.element(b, i, lambda k: self.input_loader(b, xs)(k, i), params, self.prog.outputs)
        at = b.load(pos)
        with b.if_then(b.icmp_signed("<", at, end)):
            self.store_outputs(b, o, vals, at)
        b.store(b.add(at, b.zext(keep, i64)), pos)
        done()
        ch_done()
        b.ret_void()
        # write_sparse: only the set bits of the count pass's words (few survivors)
        fn, b, (c0, c1, n), (offsets, bits, *rest), params = self.entry("write_sparse", 3, ["int64", "uint64"] + outs)
        o, xs = rest[:len(outs)], rest[len(outs):]
        cttz = ir.Function(self.m, ir.FunctionType(i64, [i64, ir.IntType(1)]), "llvm.cttz.i64")
        ch, ch_done = self.loop(b, fn, c0, c1, name="c")
        pos = self.local(b, i64)
        b.store(b.load(b.gep(offsets, [ch], inbounds=True)), pos)
        lo = b.mul(ch, c(CHUNK))
        w0, w_done = self.loop(b, fn, lo, self.minimum(b, n, b.add(lo, c(CHUNK))), 64, "w")
        word = self.local(b, i64)
        b.store(b.load(b.gep(bits, [b.ashr(w0, c(6))], inbounds=True)), word)
        cond, body, after = (fn.append_basic_block(f"bit.{x}") for x in ("cond", "body", "end"))
        b.branch(cond)
        b.position_at_end(cond)
        b.cbranch(b.icmp_unsigned("!=", b.load(word), c(0)), body, after)
        b.position_at_end(body)
        wv = b.load(word)
        i = b.add(w0, b.call(cttz, [wv, ir.IntType(1)(1)]))
        _, vals = self.element(b, i, lambda k: self.input_loader(b, xs)(k, i), params, self.prog.outputs)
        at = b.load(pos)
        self.store_outputs(b, o, vals, at)
        b.store(b.add(at, c(1)), pos)
        b.store(b.and_(wv, b.sub(wv, c(1))), word)
        b.branch(cond)
        b.position_at_end(after)
        w_done()
        ch_done()
        b.ret_void()

    def build_map(self):
        """<name>_chunks(c0, c1, n, out..., in..., params...): element i of chunks [c0, c1)
        stored at index i of every output."""
        outs = list(self.prog.output_dtypes)
        fn, b, (c0, c1, n), arrays, params = self.entry("chunks", 3, outs)
        lo = b.mul(c0, self.c64(CHUNK))
        hi = self.minimum(b, n, b.mul(c1, self.c64(CHUNK)))
        body, bb, (lo_, hi_), ptrs, ps = self.internal("map", 2, outs + [s.dtype for s in self.prog.inputs], params)
        o, xs = ptrs[:len(outs)], ptrs[len(outs):]
        i, done = self.loop(bb, body, lo_, hi_)
        load = self.input_loader(bb, xs)
        _, vals = self.element(bb, i, lambda k: load(k, i), ps, self.prog.outputs)
        self.store_outputs(bb, o, vals, i)
        done()
        bb.ret_void()
        b.call(body, [lo, hi] + arrays + list(params.values()))
        b.ret_void()

    def internal(self, suffix: str, scalars: int, pointers: list, params: dict):
        """(function, builder, integers, pointers, params by name) of an internal function
        <name>_<suffix>(i64 x scalars, pointers to `pointers` dtypes, the param values
        `params` holds): its pointers are `noalias` (the arrays never overlap), which an
        entry point's pointers, read from objects, cannot say; LLVM inlines it and keeps that."""
        ir = _ir()
        names = list(params)
        types = [self.i64] * scalars + [_mem(d).as_pointer() for d in pointers] + [v.type for v in params.values()]
        fn = ir.Function(self.m, ir.FunctionType(ir.VoidType(), types), f"{self.p.name}_{suffix}")
        fn.linkage = "internal"
        args = list(fn.args)
        ptrs = args[scalars:scalars + len(pointers)]
        _noalias(ptrs)
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        return fn, b, args[:scalars], ptrs, dict(zip(names, args[scalars + len(pointers):]))


def _noalias(args) -> None:
    for a in args:
        a.add_attribute("noalias")


class _Reduce:
    """The reduce op's entry, chunk loop and combine: ops/reduce/cpu.py's numba text spelled
    as IR (the same states, updates, combine order and finish; see that module's doc)."""

    def __init__(self, mod: _Module):
        self.mod, self.p = mod, mod.p
        self.aggs = mod.p.terminal.aggs
        self.float_sums = [k for k, a in enumerate(self.aggs) if a.op == "sum" and D.is_float(a.dtype)]
        self.pdtypes = partial_dtypes(mod.p)

    def states(self, k: int):
        """(dtype, initial value) of agg k's state variables (`_states`)."""
        return _states(self.aggs[k])

    def const(self, dtype: str, value):
        return _t(dtype)(value)

    def build(self):
        ir = _ir()
        mod, i64 = self.mod, self.mod.i64
        self.pairwise = {d: self._pairwise_fn(d) for d in sorted({self.aggs[k].dtype for k in self.float_sums})}
        ins, params = mod.arg_types()
        parts = [_mem(d).as_pointer() for d in self.pdtypes]
        chunk = self._chunk_fn(ins, params, parts)
        fn = ir.Function(mod.m, ir.FunctionType(ir.VoidType(), [ir.IntType(8).as_pointer()]),
                         f"{self.p.name}_chunks")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        (c0, c1, nfin, n), R, arrays, ps = mod.unpack(
            b, fn.args[0], 4, list(self.pdtypes) + [s.dtype for s in mod.prog.inputs],
            [s.dtype for s in mod.prog.params], results=True)
        P = arrays[:len(parts)]
        rest = arrays[len(parts):] + ps
        c, done = mod.loop(b, fn, c0, c1, name="c")
        lo = b.mul(c, mod.c64(CHUNK))
        hi = mod.minimum(b, n, b.add(lo, mod.c64(CHUNK)))
        b.call(chunk, [lo, hi, c] + P + rest)
        done()
        # the first nfin chunks' partials, combined in chunk order (float sums: a tree)
        tot = self._state_slots(b)
        pk = self._partial_index()
        if any(k not in self.float_sums for k in range(len(self.aggs))):
            c, done = mod.loop(b, fn, mod.c64(0), nfin, name="f")
            for k, agg in enumerate(self.aggs):
                if k in self.float_sums:
                    continue
                vals = [self._load_part(b, P[pk[k, j]], c, d) for j, (d, _) in enumerate(self.states(k))]
                cur = [b.load(tot[k, j]) for j in range(len(vals))]
                for j, v in enumerate(self._merge(b, agg, cur, vals, None, None)):
                    b.store(v, tot[k, j])
            done()
        slots = b.bitcast(R, i64.as_pointer())
        at = 0                                            # the next result slot
        for k, agg in enumerate(self.aggs):
            d = agg.dtype
            if agg.op == "first":
                for j, (dj, _) in enumerate(self.states(k)):
                    at = self._result(b, slots, at, b.load(tot[k, j]), dj)
                continue
            if k in self.float_sums:
                s = b.call(self.pairwise[d], [P[pk[k, 0]], nfin, self.const(d, -0.0)])
                r = b.fadd(s, self.const(d, 0.0))          # a sum of -0.0s is +0.0
            elif agg.op in ("min", "max") and D.is_float(d):
                key = b.load(tot[k, 0])
                w = D.bits(d)
                bits = minmax_key_llvm(b, key, w)
                r = b.select(b.load(tot[k, 1]), self.const(d, float("nan")), b.bitcast(bits, _t(d)))
            else:
                r = b.load(tot[k, 0])
            at = self._result(b, slots, at, r, d)
        b.ret_void()

    def _result(self, b, slots, at: int, r, d: str) -> int:
        """Store result value `r` (of dtype d) in 8-byte slot `at`; the next slot."""
        if d == "bool":
            r = b.zext(r, self.mod.i64)
        b.store(r, b.bitcast(b.gep(slots, [self.mod.c64(at)]), r.type.as_pointer()))
        return at + 1

    def _state_slots(self, b) -> dict:
        """(agg k, state j) -> a stack slot holding that state, set to its initial value."""
        slots = {}
        for k in range(len(self.aggs)):
            for j, (d, init) in enumerate(self.states(k)):
                slots[k, j] = self.mod.local(b, _t(d))
                b.store(self.const(d, init), slots[k, j])
        return slots

    def _partial_index(self) -> dict:
        out, j = {}, 0
        for k in range(len(self.aggs)):
            for s in range(len(self.states(k))):
                out[k, s] = j
                j += 1
        return out

    def _load_part(self, b, ptr, c, d):
        v = b.load(b.gep(ptr, [c], inbounds=True))
        return b.icmp_unsigned("!=", v, v.type(0)) if d == "bool" else v

    def _merge(self, b, agg, cur, vals, keep, i):
        """agg's state `cur` after taking `vals` (element i's, when `keep` is its keep
        flag; another chunk's partial state when keep is None)."""
        d, s = agg.dtype, cur[0]
        if agg.op == "first":               # the smallest kept index and its values
            none = b.icmp_signed("<", s, s.type(0))
            if keep is None:
                take = b.and_(none, b.icmp_signed(">=", vals[0], s.type(0)))
                new = vals
            else:
                take, new = b.and_(keep, none), [i] + list(vals)
            return [b.select(take, x, c) for x, c in zip(new, cur)]
        if agg.op == "count":
            return [b.add(s, b.zext(keep, s.type) if keep is not None else vals[0])]
        if agg.op == "sum":                               # integers: wraps like NumPy
            v = vals[0] if keep is None else b.select(keep, vals[0], self.const(d, 0))
            return [b.add(s, v)]
        if agg.op in ("min", "max") and D.is_float(d):    # order keys and a NaN flag
            cmp = b.icmp_signed("<" if agg.op == "min" else ">", vals[0], s)
            return [b.select(cmp, vals[0], s), b.or_(cur[1], vals[1])]
        if agg.op in ("min", "max"):
            sym = "<" if agg.op == "min" else ">"
            cmp = (b.icmp_signed if D.is_signed(d) else b.icmp_unsigned)(sym, vals[0], s)
            if keep is not None:
                cmp = b.and_(keep, cmp)
            return [b.select(cmp, vals[0], s)]
        v = vals[0]
        if agg.op == "any":
            return [b.or_(s, b.and_(keep, v) if keep is not None else v)]
        return [b.and_(s, b.or_(v, b.not_(keep)) if keep is not None else v)]     # all

    def _element_values(self, b, keep, vals):
        """Per agg, the values the chunk loop folds (a float min / max: its order key and a
        kept-NaN flag, ops/reduce/cpu.py's element_returns)."""
        out, j = [], 0
        for agg in self.aggs:
            vs = vals[j:j + len(agg.values)]
            j += len(agg.values)
            d = agg.dtype
            if agg.op in ("min", "max") and D.is_float(d):
                v = vs[0]
                ident = self.const(d, float("inf") if agg.op == "min" else float("-inf"))
                ok = b.and_(keep, b.fcmp_ordered("==", v, v))
                w = D.bits(d)
                bits = b.bitcast(b.select(ok, v, ident), _ir().IntType(w))
                key = minmax_key_llvm(b, bits, w)
                out.append([key, b.and_(keep, b.fcmp_unordered("uno", v, v))])
            else:
                out.append(vs)
        return out

    def _chunk_fn(self, ins, params, parts):
        """chunk(lo, hi, c, P..., in..., params...): the partial states of elements [lo, hi)
        stored at P[c]; float sums by blocks, lanes and trees (sum_order)."""
        ir = _ir()
        mod, i64 = self.mod, self.mod.i64
        fn = ir.Function(mod.m, ir.FunctionType(ir.VoidType(), [i64] * 3 + parts + ins + params),
                         f"{self.p.name}_chunk")
        fn.linkage = "internal"
        args = list(fn.args)
        lo, hi, c = args[:3]
        P = args[3:3 + len(parts)]
        xs = args[3 + len(parts):3 + len(parts) + len(ins)]
        ps = args[3 + len(parts) + len(ins):]
        _noalias(P + xs)
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        params_v = mod.param_values(b, ps)
        st = self._state_slots(b)
        bufs = {}
        for k in self.float_sums:
            t = _t(self.aggs[k].dtype)
            bufs[k] = (mod.local(b, t, BLOCK), mod.local(b, t, LANES), mod.local(b, t, CHUNK // BLOCK))
        load = mod.input_loader(b, xs)
        values = [v for agg in self.aggs for v in agg.values]

        def body(i, V_base=None):
            keep, vals = mod.element(b, i, lambda k: load(k, i), params_v, values)
            per = self._element_values(b, keep, vals)
            for k, agg in enumerate(self.aggs):
                if k in self.float_sums:
                    d = agg.dtype
                    v = b.select(keep, per[k][0], self.const(d, -0.0))
                    b.store(v, b.gep(bufs[k][0], [b.sub(i, V_base)], inbounds=True))
                    continue
                cur = [b.load(st[k, j]) for j in range(len(self.states(k)))]
                for j, v in enumerate(self._merge(b, agg, cur, per[k], keep, i)):
                    b.store(v, st[k, j])

        if not self.float_sums:
            i, done = mod.loop(b, fn, lo, hi)
            body(i)
            done()
        else:
            nb = mod.local(b, i64)
            b.store(mod.c64(0), nb)
            blk, blk_done = mod.loop(b, fn, lo, hi, BLOCK, "blk")
            be = mod.minimum(b, hi, b.add(blk, mod.c64(BLOCK)))
            i, done = mod.loop(b, fn, blk, be)
            body(i, blk)
            done()
            z, zdone = mod.loop(b, fn, b.sub(be, blk), mod.c64(BLOCK), name="z")
            for k in self.float_sums:
                b.store(self.const(self.aggs[k].dtype, -0.0), b.gep(bufs[k][0], [z], inbounds=True))
            zdone()
            for k in self.float_sums:
                V, A, B = bufs[k]
                j, jdone = mod.loop(b, fn, mod.c64(0), mod.c64(LANES), name="l")
                b.store(b.load(b.gep(V, [j], inbounds=True)), b.gep(A, [j], inbounds=True))
                jdone()
                r, rdone = mod.loop(b, fn, mod.c64(LANES), mod.c64(BLOCK), LANES, "r")
                j, jdone = mod.loop(b, fn, mod.c64(0), mod.c64(LANES), name="k")
                a = b.gep(A, [j], inbounds=True)
                b.store(b.fadd(b.load(a), b.load(b.gep(V, [b.add(r, j)], inbounds=True))), a)
                jdone()
                rdone()
                d = self.aggs[k].dtype
                cur = b.load(nb)
                b.store(b.call(self.pairwise[d], [A, mod.c64(LANES), self.const(d, -0.0)]),
                        b.gep(B, [cur], inbounds=True))
            b.store(b.add(b.load(nb), mod.c64(1)), nb)
            blk_done()
            for k in self.float_sums:
                st_k = st[k, 0]
                b.store(b.call(self.pairwise[self.aggs[k].dtype], [bufs[k][2], b.load(nb), b.load(st_k)]), st_k)
        pk = self._partial_index()
        for k in range(len(self.aggs)):
            for j, (d, _) in enumerate(self.states(k)):
                v = b.load(st[k, j])
                b.store(b.zext(v, _mem(d)) if d == "bool" else v, b.gep(P[pk[k, j]], [c], inbounds=True))
        b.ret_void()
        return fn

    def _pairwise_fn(self, d: str):
        """pairwise(buf, m, empty): buf[:m] added as a balanced tree in place (sum_order)."""
        ir = _ir()
        mod, i64 = self.mod, self.mod.i64
        t = _t(d)
        fn = ir.Function(mod.m, ir.FunctionType(t, [t.as_pointer(), i64, t]), f"{self.p.name}_pairwise_{d}")
        fn.linkage = "internal"
        buf, m, empty = fn.args
        entry = fn.append_basic_block("entry")
        cond, body, end = (fn.append_basic_block(s) for s in ("w.cond", "w.body", "w.end"))
        b = ir.IRBuilder(entry)
        b.branch(cond)
        b.position_at_end(cond)
        cur = b.phi(i64)
        cur.add_incoming(m, entry)
        b.cbranch(b.icmp_signed(">", cur, mod.c64(1)), body, end)
        b.position_at_end(body)
        half = b.sdiv(cur, mod.c64(2))
        j, done = mod.loop(b, fn, mod.c64(0), half, name="j")
        j2 = b.mul(j, mod.c64(2))
        pair = b.fadd(b.load(b.gep(buf, [j2])), b.load(b.gep(buf, [b.add(j2, mod.c64(1))])))
        b.store(pair, b.gep(buf, [j]))
        done()
        odd = b.srem(cur, mod.c64(2))
        with b.if_then(b.icmp_signed("!=", odd, mod.c64(0))):
            b.store(b.load(b.gep(buf, [b.sub(cur, mod.c64(1))])), b.gep(buf, [half]))
        cur.add_incoming(b.add(half, odd), b.block)
        b.branch(cond)
        b.position_at_end(end)
        one = b.icmp_signed("==", cur, mod.c64(1))
        b.ret(b.select(one, b.load(b.gep(buf, [mod.c64(0)])), empty))
        return fn


class _Expr:
    """Expression trees (codegen.expr) as IR values, the numba dialect's semantics
    (numba_py_expr and numba_py_helpers: wrap-around integers, Python-signed division with
    b == 0 -> 0, NumPy shifts and min / max, x86's float -> int conversions). Equal
    sub-trees are computed once."""

    def __init__(self, mod: _Module, b, i, load, params):
        self.mod, self.b, self.i, self.load, self.params = mod, b, i, load, params
        self.vars: dict = {}
        self.memo: dict = {}

    def value(self, e: E.Expr):
        hit = self.memo.get(e)
        if hit is None:
            hit = self.memo[e] = self._spell(e)
        return hit

    def _spell(self, e: E.Expr):
        b = self.b
        if isinstance(e, E.Const):
            return _t(e.dtype)(bool(e.value) if e.dtype == "bool" else e.value)
        if isinstance(e, E.Param):
            return self.params[e.name]
        if isinstance(e, E.Load):
            return self.load(e.input)
        if isinstance(e, E.Index):
            return self.i
        if isinstance(e, E.Var):
            if e.name not in self.vars:
                raise ValueError(f"Var {e.name!r} is used before a Let defines it")
            return self.vars[e.name]
        if isinstance(e, E.Unary):
            return self._unary(e.op, self.value(e.x), e.dtype)
        if isinstance(e, E.Binary):
            return self._binary(e.op, self.value(e.a), self.value(e.b), e.dtype)
        if isinstance(e, E.Compare):
            return self._compare(e.op, self.value(e.a), self.value(e.b), e.a.dtype)
        if isinstance(e, E.Call):
            return self._call(e.fn, self.value(e.x), e.x.dtype)
        if isinstance(e, E.Where):
            return b.select(self.value(e.cond), self.value(e.a), self.value(e.b))
        if isinstance(e, E.Cast):
            return self._cast(self.value(e.x), e.x.dtype, e.dtype)
        raise TypeError(f"the llvm dialect cannot print {type(e).__name__}")

    def _unary(self, op, x, d):
        b = self.b
        if op == "not" or (op == "invert" and d == "bool"):
            return b.not_(x)
        if op == "invert":
            return b.xor(x, x.type(-1))
        if op == "neg":
            return b.fneg(x) if D.is_float(d) else b.sub(x.type(0), x)
        if op == "abs":
            if D.is_float(d):
                return b.call(self.mod.intrinsic("fabs", d), [x])
            if D.is_unsigned(d) or d == "bool":
                return x
            return b.select(b.icmp_signed("<", x, x.type(0)), b.sub(x.type(0), x), x)
        raise ValueError(f"unknown unary op {op!r}")

    def _compare(self, op, a, c, d):
        b = self.b
        sym = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}[op]
        if D.is_float(d):            # any comparison with NaN is false, except !=
            return b.fcmp_unordered(sym, a, c) if op == "ne" else b.fcmp_ordered(sym, a, c)
        if D.is_signed(d):
            return b.icmp_signed(sym, a, c)
        return b.icmp_unsigned(sym, a, c)

    def _binary(self, op, a, c, d):
        b = self.b
        f = D.is_float(d)
        if op in ("add", "sub", "mul"):
            name = {"add": "add", "sub": "sub", "mul": "mul"}[op]
            return getattr(b, ("f" if f else "") + name)(a, c)
        if op == "truediv":
            return b.fdiv(a, c)
        if op in ("bitand", "and"):
            return b.and_(a, c)
        if op in ("bitor", "or"):
            return b.or_(a, c)
        if op == "bitxor":
            return b.xor(a, c)
        if op == "copysign":
            return b.call(self.mod.intrinsic("copysign", d, 2), [a, c])
        if op in ("min", "max"):
            sym = "<" if op == "min" else ">"
            if f:                    # np.minimum / np.maximum: a NaN wins (a first), ties give b
                pick = b.or_(b.fcmp_ordered(sym, a, c), b.fcmp_unordered("uno", a, a))
            elif D.is_signed(d):
                pick = b.icmp_signed(sym, a, c)
            else:
                pick = b.icmp_unsigned(sym, a, c)
            return b.select(pick, a, c)
        if op == "fmod":
            return self._fmod(a, c, d)
        if op in ("floordiv", "mod") and f:
            return self._float_divide(op, a, c, d)
        if op in ("floordiv", "mod"):
            return self._divide(op, a, c, d)
        if op in ("lshift", "rshift"):
            return self._shift(op, a, c, d)
        raise ValueError(f"unknown binary op {op!r}")

    def _divide(self, op, a, c, d):
        """Integer // and % (numba_py_helpers' sfloordiv / smod / ufloordiv / umod), without
        branches: the divisor is replaced by 1 where dividing would trap (b == 0, and
        INT_MIN / -1), and the result chosen after."""
        b = self.b
        zero, one = a.type(0), a.type(1)
        if d == "bool":
            raise ValueError("// and % of bool values are integer operations; cast them first")
        if D.is_unsigned(d):
            bad = b.icmp_unsigned("==", c, zero)
            safe = b.select(bad, one, c)
            r = b.udiv(a, safe) if op == "floordiv" else b.urem(a, safe)
            return b.select(bad, zero, r)
        is0, ism1 = b.icmp_signed("==", c, zero), b.icmp_signed("==", c, a.type(-1))
        safe = b.select(b.or_(is0, ism1), one, c)
        q, r = b.sdiv(a, safe), b.srem(a, safe)
        # Python's signs: a remainder whose sign differs from the divisor's moves the
        # quotient down by one and the remainder up by the divisor
        adjust = b.and_(b.icmp_signed("!=", r, zero),
                        b.icmp_signed("!=", b.icmp_signed("<", r, zero), b.icmp_signed("<", safe, zero)))
        if op == "floordiv":
            q = b.select(adjust, b.sub(q, one), q)
            return b.select(is0, zero, b.select(ism1, b.sub(zero, a), q))
        r = b.select(adjust, b.add(r, safe), r)
        return b.select(b.or_(is0, ism1), zero, r)

    def _fmod(self, a, c, d):
        """C's fmod (exact). float32: computed in float64 without the libm call whenever
        |a / b| < 2**28 (numba_py_helpers' _fmod_float32 says why that is exact), else `frem`
        (the libm call), so the common case stays a few instructions."""
        b = self.b
        if d != "float32":
            return b.frem(a, c)
        ir = _ir()
        f64 = ir.DoubleType()
        x, y = b.fpext(a, f64), b.fpext(c, f64)
        q = b.fdiv(x, y)
        fabs = self.mod.intrinsic("fabs", "float64")
        fast = b.and_(b.fcmp_ordered("<", b.call(fabs, [q]), f64(268435456.0)),
                      b.fcmp_ordered("<", b.call(fabs, [y]), f64(float("inf"))))
        with b.if_else(fast) as (then, otherwise):
            with then:
                t = b.call(self.mod.intrinsic("trunc", "float64"), [q])
                r = b.call(self.mod.intrinsic("copysign", "float64", 2), [b.fsub(x, b.fmul(t, y)), x])
                quick, quick_at = b.fptrunc(r, a.type), b.block
            with otherwise:             # an opaque libm call: an `frem` here LLVM would
                fmodf = self.mod.m.globals.get("fmodf") or ir.Function(   # hoist into the loop
                    self.mod.m, ir.FunctionType(a.type, [a.type, a.type]), "fmodf")
                slow, slow_at = b.call(fmodf, [a, c]), b.block
        out = b.phi(a.type)
        out.add_incoming(quick, quick_at)
        out.add_incoming(slow, slow_at)
        return out

    def _float_divide(self, op, a, c, d):
        """Float // and % as np.floor_divide / np.remainder (numba_py_helpers' ffloordiv /
        fremainder, transcribed from NumPy's npy_divmod, in the operands' type): from C's
        fmod, which `frem` is exactly (fmod is exact: every implementation agrees)."""
        b = self.b
        zero, one = a.type(0.0), a.type(1.0)
        mod = self._fmod(a, c, d)
        b_neg = b.fcmp_ordered("<", c, zero)
        fix = b.and_(b.fcmp_unordered("!=", mod, zero), b.xor(b_neg, b.fcmp_ordered("<", mod, zero)))
        copysign = self.mod.intrinsic("copysign", d, 2)
        if op == "mod":                 # b == 0: fmod's NaN; a zero takes b's sign
            fixed = b.select(fix, b.fadd(mod, c), mod)
            nonzero = b.fcmp_unordered("!=", mod, zero)
            out = b.select(nonzero, fixed, b.call(copysign, [zero, c]))
            return b.select(b.fcmp_ordered("==", c, zero), mod, out)
        quot = b.fdiv(a, c)
        div = b.fdiv(b.fsub(a, mod), c)
        div = b.select(fix, b.fsub(div, one), div)
        fl = b.call(self.mod.intrinsic("floor", d), [div])
        fl = b.select(b.fcmp_ordered(">", b.fsub(div, fl), a.type(0.5)), b.fadd(fl, one), fl)
        out = b.select(b.fcmp_unordered("!=", div, zero), fl, b.call(copysign, [zero, quot]))
        return b.select(b.fcmp_ordered("==", c, zero), quot, out)

    def _shift(self, op, a, c, d):
        """NumPy's shifts: a count outside [0, width) gives 0, or -1 for >> of a negative."""
        b = self.b
        w = D.bits(d)
        if d == "bool":
            raise ValueError("shifts of bool values are integer operations; cast them first")
        if D.is_unsigned(d):
            ok = b.icmp_unsigned("<", c, c.type(w))
        else:
            ok = b.and_(b.icmp_signed(">=", c, c.type(0)), b.icmp_signed("<", c, c.type(w)))
        n = b.select(ok, c, c.type(0))
        if op == "lshift":
            return b.select(ok, b.shl(a, n), a.type(0))
        if D.is_unsigned(d):
            return b.select(ok, b.lshr(a, n), a.type(0))
        over = b.select(b.icmp_signed("<", a, a.type(0)), a.type(-1), a.type(0))
        return b.select(ok, b.ashr(a, n), over)

    def _call(self, fn, x, d):
        b = self.b
        if fn == "isnan":
            return b.fcmp_unordered("uno", x, x)
        if fn in ("isinf", "isfinite"):
            mag = b.call(self.mod.intrinsic("fabs", d), [x])
            inf = x.type(float("inf"))
            return b.fcmp_ordered("==" if fn == "isinf" else "<", mag, inf)
        return b.call(self.mod.intrinsic(fn, d), [x])

    def _cast(self, x, src, dst):
        b = self.b
        if src == dst:
            return x
        t = _t(dst)
        if dst == "bool":
            return (b.fcmp_unordered("!=", x, x.type(0.0)) if D.is_float(src)
                    else b.icmp_unsigned("!=", x, x.type(0)))
        if src == "bool":
            return b.uitofp(x, t) if D.is_float(dst) else b.zext(x, t)
        if D.is_float(src) and D.is_float(dst):
            return b.fpext(x, t) if D.bits(dst) > D.bits(src) else b.fptrunc(x, t)
        if D.is_int(src) and D.is_float(dst):
            return b.sitofp(x, t) if D.is_signed(src) else b.uitofp(x, t)
        if D.is_int(src) and D.is_int(dst):
            ws, wd = D.bits(src), D.bits(dst)
            if wd < ws:
                return b.trunc(x, t)
            if wd > ws:
                return b.sext(x, t) if D.is_signed(src) else b.zext(x, t)
            return x                 # same width: the same bits
        return self._float_to_int(x, dst)

    def _float_to_int(self, x, dst):
        """NumPy's float -> int on x86-64 (expr.Cast; numba_py_helpers' f2i64 / f2i32 /
        f2u64): the in-range test first (fptosi of an out-of-range value is poison)."""
        ir = _ir()
        b = self.b
        dx = b.fpext(x, ir.DoubleType()) if x.type == ir.FloatType() else x
        zero = dx.type(0.0)

        def f2i(width: int):
            lo, hi = (-9223372036854775808.0, 9223372036854775808.0) if width == 64 else (-2147483649.0, 2147483648.0)
            ok = b.and_(b.fcmp_ordered(">=" if width == 64 else ">", dx, dx.type(lo)),
                        b.fcmp_ordered("<", dx, dx.type(hi)))
            v = b.fptosi(b.select(ok, dx, zero), ir.IntType(width))
            return b.select(ok, v, ir.IntType(width)(D.int_limits(f"int{width}")[0]))

        t = _t(dst)
        if dst == "uint64":
            big = b.fcmp_ordered(">=", dx, dx.type(9223372036854775808.0))
            fits = b.fcmp_ordered("<", dx, dx.type(18446744073709551616.0))
            exact = b.fptoui(b.select(b.and_(big, fits), dx, zero), t)
            return b.select(big, b.select(fits, exact, t(0)), f2i(64))
        wide = f2i(64) if dst in ("int64", "uint32") else f2i(32)
        return wide if D.bits(dst) == wide.type.width else b.trunc(wide, t)
