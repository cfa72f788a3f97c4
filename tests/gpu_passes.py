"""Hand-built Passes covering every kernel shape and the element ops, for the GPU codegen
tests (NVRTC, Metal via g++, OpenCL on pocl). The lambda frontend is not involved."""
from __future__ import annotations

from querycompute._codegen import dtypes as D
from querycompute._codegen.ir import expr as E
from querycompute._codegen.ir import program as P

ALL_DTYPES = ("bool",) + D.INTEGERS + D.FLOATS


def binary_ops(dtype: str) -> tuple[str, ...]:
    if dtype == "bool":
        return ("bitand", "bitor", "bitxor", "and", "or", "min", "max")
    if D.is_int(dtype):
        return ("add", "sub", "mul", "floordiv", "mod", "pow", "min", "max",
                "bitand", "bitor", "bitxor", "lshift", "rshift")
    return ("add", "sub", "mul", "truediv", "floordiv", "mod", "min", "max", "pow", "hypot", "atan2", "copysign")


def unary_exprs(x: E.Expr) -> list[E.Expr]:
    d = x.dtype
    if d == "bool":
        return [E.Unary("not", x, d), E.Cast(x, "int32"), E.Cast(x, "float32")]
    out = [E.Unary("neg", x, d), E.Unary("abs", x, d), E.Cast(x, "bool"), E.Cast(x, "int8"),
           E.Cast(x, "uint16"), E.Cast(x, "int32"), E.Cast(x, "int64"), E.Cast(x, "uint64"),
           E.Cast(x, "float16"), E.Cast(x, "float32"), E.Cast(x, "float64")]
    if D.is_int(d):
        out.append(E.Unary("invert", x, d))
    else:
        out += [E.Call(f, x, d) for f in ("sqrt", "floor", "ceil", "trunc", "rint", "exp", "log1p")]
        out += [E.Call(f, x, "bool") for f in E.FLOAT_PREDICATES]
    return out


def ops_program(dtype: str, with_float64: bool = True) -> P.ElementProgram:
    """Two inputs a, b of `dtype`; one output per binary op and per unary expression of a."""
    a, b = E.Load(0, dtype), E.Load(1, dtype)
    outs = [E.Binary(o, a, b, dtype) for o in binary_ops(dtype)]
    outs += [E.Compare(c, a, b) for c in E.COMPARE_OPS]
    outs += [e for e in unary_exprs(a) if with_float64 or e.dtype != "float64"]
    return P.ElementProgram((P.InputSpec("a", dtype), P.InputSpec("b", dtype)), (), (), tuple(outs))


def sum_dtype(dtype: str) -> str:
    if dtype == "bool" or D.is_signed(dtype):
        return "int64"
    if D.is_unsigned(dtype):
        return "uint64"
    return "float32" if dtype == "float16" else dtype


def filter_program(dtype: str) -> P.ElementProgram:
    """Input x, parameter `lo`; keeps x > lo (x itself for bool); outputs (x, index, x + x)."""
    x = E.Load(0, dtype)
    keep = x if dtype == "bool" else E.Compare("gt", x, E.Param("lo", dtype))
    twice = E.Binary("or" if dtype == "bool" else "add", x, x, dtype)
    return P.ElementProgram((P.InputSpec("x", dtype),), (P.ParamSpec("lo", dtype),),
                            (P.Let("y", twice), P.Filter(keep)), (x, E.Index(), E.Var("y", dtype)))


def reduce_aggs(dtype: str) -> tuple[P.Agg, ...]:
    """sum, min, max, count, first, any, all and a fold of the filtered x, in one pass."""
    x = E.Load(0, dtype)
    s = sum_dtype(dtype)
    nonzero = E.Cast(x, "bool")
    aggs = [P.Agg("sum", (E.Cast(x, s),), s), P.Agg("count", (), "int64"),
            P.Agg("first", (x, E.Var("y", dtype)), "int64"),
            P.Agg("any", (nonzero,), "bool"), P.Agg("all", (nonzero,), "bool")]
    if dtype != "bool":
        aggs += [P.Agg("min", (x,), dtype), P.Agg("max", (x,), dtype),
                 P.Agg("fold", (x,), dtype, combine=E.Binary("max", E.Var("acc", dtype), E.Var("item", dtype), dtype),
                       seed=E.Const(_lowest(dtype), dtype))]
    return tuple(aggs)


def _lowest(dtype: str):
    return float("-inf") if D.is_float(dtype) else D.int_limits(dtype)[0]


def shape_passes(dtype: str, with_float64: bool = True) -> list[P.Pass]:
    """One Pass per kernel shape: elementwise (all ops), compaction, multi-agg reduction."""
    tag = dtype
    return [P.Pass(ops_program(dtype, with_float64), P.ToArray(), f"qc_ops_{tag}"),
            P.Pass(filter_program(dtype), P.ToArray(), f"qc_filter_{tag}"),
            P.Pass(filter_program(dtype), P.Reduce(reduce_aggs(dtype)), f"qc_reduce_{tag}")]
