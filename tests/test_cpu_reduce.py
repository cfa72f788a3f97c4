"""Reductions and compaction on the cpu (numba) backend: every Agg op, filters, empty
input, n not a multiple of the chunk size, the parallel entry (n >= SERIAL_MAX), strided
inputs, several aggs in one pass, determinism, and the trace/launch-shape bookkeeping."""
import numpy as np
import pytest

from querycompute._codegen.ir import expr as E
from querycompute._codegen.dialects.numba_py import CHUNK
from querycompute._codegen.ir.program import Agg, ElementProgram, Filter, InputSpec, Let, Pass, Reduce, ToArray
from querycompute.backends.cpu.cpu import SERIAL_MAX, CpuBackend
from querycompute.errors import CompileError

BACKEND = CpuBackend()
X32 = E.Load(0, "float32")
BIG = 3 * CHUNK + 17          # parallel entry, a ragged last chunk


def prepared(prog, terminal, name="t"):
    return BACKEND.prepare(Pass(prog, terminal, name))


def w1_program(dtype="float32"):
    """select(v*2).where(v>1000).select(v+100) over one input of `dtype` (float)."""
    x = E.Load(0, dtype)
    y = E.Var("y", dtype)
    return ElementProgram(
        (InputSpec("x", dtype),), (),
        (Let("y", E.Binary("mul", x, E.Const(2.0, dtype), dtype)),
         Filter(E.Compare("gt", y, E.Const(1000.0, dtype)))),
        (E.Binary("add", y, E.Const(100.0, dtype), dtype),))


def w1_numpy(x):
    y = x * x.dtype.type(2)
    return y[y > 1000] + x.dtype.type(100)


def all_aggs(prog, dtype):
    out = prog.outputs[0]
    add = E.Binary("add", E.Var("acc", dtype), E.Var("item", dtype), dtype)
    return Reduce((
        Agg("sum", (out,), dtype), Agg("count", (), "int64"),
        Agg("min", (out,), dtype), Agg("max", (out,), dtype),
        Agg("any", (E.Compare("gt", out, E.Const(3000.0, dtype)),), "bool"),
        Agg("all", (E.Compare("lt", out, E.Const(4000.0, dtype)),), "bool"),
        Agg("first", (out, E.Index()), "int64"),
        Agg("fold", (out,), dtype, combine=add, seed=E.Const(0.0, dtype))))


@pytest.mark.parametrize("n", [0, 1, 1000, BIG])
def test_every_agg_in_one_pass_matches_numpy(n):
    x = (np.random.default_rng(n).random(n, dtype=np.float32) * 2000).astype(np.float32)
    x[::97] = np.float32(600.0)       # some exact values to hit the filter edge
    prog = w1_program()
    got = prepared(prog, all_aggs(prog, "float32")).run_quick([x], [], n)[0]
    kept = w1_numpy(x)
    exact = np.sum(kept.astype(np.float64))
    assert isinstance(got[0], np.float32)
    assert abs(float(got[0]) - exact) <= 1e-5 * max(1.0, exact), "sum"
    assert got[1] == kept.size and isinstance(got[1], int)
    if kept.size:
        assert got[2] == kept.min() and got[3] == kept.max()
        idx = int(np.flatnonzero(x * np.float32(2) > 1000)[0])
        assert got[6] == (idx, (kept[0], np.int64(idx)))
    else:
        assert got[2] == np.inf and got[3] == -np.inf and got[6] == (-1, ())
    assert got[4] is bool(np.any(kept > 3000)) and got[5] is bool(np.all(kept < 4000))
    assert abs(float(got[7]) - exact) <= 1e-5 * max(1.0, exact), "fold"


def test_min_max_propagate_nan_and_sum_is_deterministic():
    x = (np.random.default_rng(3).random(BIG, dtype=np.float32) * 2000)
    prog = w1_program()
    p = prepared(prog, all_aggs(prog, "float32"))
    first = p.run_quick([x], [], BIG)[0]
    again = p.run_quick([x], [], BIG)[0]
    assert np.float32(first[0]).tobytes() == np.float32(again[0]).tobytes()
    x[CHUNK + 5] = np.nan
    x[1] = np.nan                      # NaN * 2 > 1000 is false: filtered out, no effect
    nan_free = p.run_quick([x], [], BIG)[0]
    assert not np.isnan(nan_free[2])
    nofilter = ElementProgram((InputSpec("x", "float32"),), (), (), (X32,))
    agg = Reduce((Agg("min", (X32,), "float32"), Agg("max", (X32,), "float32"),
                  Agg("sum", (X32,), "float32")))
    got = prepared(nofilter, agg).run_quick([x], [], BIG)[0]
    assert np.isnan(got[0]) and np.isnan(got[1]) and np.isnan(got[2])


@pytest.mark.parametrize("d", ["int8", "uint16", "int32", "int64", "uint64", "float16", "float64"])
def test_sum_min_max_over_integer_and_other_float_dtypes(d):
    """Sums wrap in the accumulator dtype (int64 for narrow ints, as np.sum); float16
    accumulates in float32; min/max keep float16."""
    rng = np.random.default_rng(5)
    if d.startswith("float"):
        x = (rng.standard_normal(5000) * 100).astype(d)
    else:
        info = np.iinfo(d)
        x = rng.integers(info.min, info.max, 5000, dtype=d, endpoint=True)
    acc = {"int8": "int64", "int32": "int64", "uint16": "uint64", "float16": "float32"}.get(d, d)
    X = E.Load(0, d)
    val = E.Cast(X, acc) if acc != d else X
    prog = ElementProgram((InputSpec("x", d),), (), (), (X,))
    got = prepared(prog, Reduce((Agg("sum", (val,), acc), Agg("min", (X,), d),
                                 Agg("max", (X,), d)))).run_quick([x], [], x.size)[0]
    assert got[1] == x.min() and got[2] == x.max() and type(got[1]) is np.dtype(d).type
    if d.startswith("float"):
        assert got[0] == pytest.approx(float(np.sum(x, dtype=np.float64)), rel=1e-4, abs=1e-2)
    else:
        with np.errstate(all="ignore"):
            assert got[0] == np.sum(x, dtype=acc) and type(got[0]) is np.dtype(acc).type


def test_fold_combines_chunks_in_source_order():
    """A non-commutative (but associative) fold, "keep the first value that isn't -1",
    must see chunks in order: the result is the first kept value, even across chunks."""
    n = BIG
    x = np.full(n, -1, dtype=np.int64)
    x[[2 * CHUNK + 3, CHUNK + 11, n - 2]] = [30, 20, 40]
    X = E.Load(0, "int64")
    acc, item = E.Var("acc", "int64"), E.Var("item", "int64")
    keep_first = E.Where(E.Compare("eq", acc, E.Const(-1, "int64")), item, acc, "int64")
    prog = ElementProgram((InputSpec("x", "int64"),), (), (), (X,))
    fold = Agg("fold", (X,), "int64", combine=keep_first, seed=E.Const(-1, "int64"))
    p = prepared(prog, Reduce((fold,)))
    assert p.run_quick([x], [], n)[0] == [20]
    assert p.run_quick([x[:CHUNK]], [], CHUNK)[0] == [-1]


def test_params_may_arrive_as_python_numbers_and_inputs_read_only():
    """A float32 param given as a Python float is still float32 arithmetic."""
    from querycompute._codegen.ir.program import ParamSpec
    x = np.linspace(0, 1, 101, dtype=np.float32)
    x.flags.writeable = False
    k = E.Param("k", "float32")
    prog = ElementProgram((InputSpec("x", "float32"),), (ParamSpec("k", "float32"),), (),
                          (E.Binary("mul", X32, k, "float32"),))
    (got,) = prepared(prog, ToArray()).run_quick([x], [0.1], x.size)[0]
    np.testing.assert_array_equal(got, x * np.float32(0.1))


def test_first_only_pass_stops_per_chunk_and_finds_smallest_index():
    n = BIG
    x = np.zeros(n, dtype=np.int32)
    x[[5 + 2 * CHUNK, 9 + CHUNK, n - 1]] = 7
    X = E.Load(0, "int32")
    prog = ElementProgram((InputSpec("x", "int32"),), (),
                          (Filter(E.Compare("eq", X, E.Const(7, "int32"))),), (X,))
    p = prepared(prog, Reduce((Agg("first", (X, E.Index()), "int64"),)))
    assert p.run_quick([x], [], n)[0] == [(9 + CHUNK, (np.int32(7), np.int64(9 + CHUNK)))]
    assert p.run_quick([np.zeros(n, np.int32)], [], n)[0] == [(-1, ())]


@pytest.mark.parametrize("n", [0, 7, 1000, BIG])
def test_filtered_to_array_keeps_source_order(n):
    x = np.random.default_rng(n).random(n, dtype=np.float32) * 2000
    prog = w1_program()
    (got,) = prepared(prog, ToArray()).run_quick([x], [], n)[0]
    np.testing.assert_array_equal(got, w1_numpy(x))
    assert got.dtype == np.float32


def test_dense_to_array_with_strided_inputs_and_two_outputs():
    base = np.arange(3 * BIG, dtype=np.float64)
    a, b = base[::3], base[1::3][::-1]          # strided, one of them negatively
    A, B = E.Load(0, "float64"), E.Load(1, "float64")
    prog = ElementProgram((InputSpec("a", "float64"), InputSpec("b", "float64")), (), (),
                          (E.Binary("sub", A, B, "float64"), E.Cast(A, "int16")))
    got = prepared(prog, ToArray()).run_quick([a, b], [], BIG)[0]
    np.testing.assert_array_equal(got[0], a - b)
    np.testing.assert_array_equal(got[1], a.astype(np.int16))


def test_float16_inputs_and_outputs_through_compaction():
    x = np.random.default_rng(2).standard_normal(2000).astype(np.float16)[::2]
    X = E.Load(0, "float16")
    prog = ElementProgram((InputSpec("x", "float16"),), (),
                          (Filter(E.Compare("gt", X, E.Const(0.0, "float16"))),),
                          (E.Binary("mul", X, E.Const(3.0, "float16"), "float16"),))
    (got,) = prepared(prog, ToArray()).run_quick([x], [], x.size)[0]
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, x[x > 0] * np.float16(3))


def test_index_only_pass_without_inputs():
    """qc.range-like: no input buffers, values from Index only."""
    i = E.Index()
    prog = ElementProgram((), (), (Filter(E.Compare("eq", E.Binary(
        "mod", i, E.Const(3, "int64"), "int64"), E.Const(0, "int64"))),), (i,))
    (got,) = prepared(prog, ToArray()).run_quick([], [], 100)[0]
    np.testing.assert_array_equal(got, np.arange(0, 100, 3))


@pytest.mark.parametrize("llvm", ["1", "0"])
def test_trace_cache_and_launch_shape(llvm, monkeypatch):
    """Both cpu routes (issue 28: the llvm dialect, or numba with QUERYCOMPUTE_CPU_LLVM=0)."""
    monkeypatch.setenv("QUERYCOMPUTE_CPU_LLVM", llvm)
    prog = w1_program()
    p = Pass(prog, Reduce((Agg("count", (), "int64"),)), f"traced{llvm}")
    first = BACKEND.prepare(p)
    rows = first.trace_rows(first.run_quick([np.ones(10, np.float32)], [], 10)[1])
    assert first.compile_ms > 0 and rows[0].cache == "compiled"
    assert rows[0].dialect == ("llvm" if llvm == "1" else "numba") and rows[0].name == f"traced{llvm}_inline"
    again = BACKEND.prepare(p)                 # the memory dict keyed by the Pass
    rows2 = again.trace_rows(again.run_quick([np.ones(10, np.float32)], [], 10)[1])
    assert rows2[0].cache == "memory" and again.compile_ms == 0.0
    assert BACKEND.launch_shape(p, SERIAL_MAX)[0]["name"] == f"traced{llvm}_inline"     # one chunk
    shape = BACKEND.launch_shape(p, 64 * CHUNK)
    assert shape[0]["name"] == f"traced{llvm}_morsels" and shape[0]["block"] == (CHUNK,)
    text = BACKEND.source(p)
    assert (f"define void @\"traced{llvm}_chunks\"" in text) if llvm == "1" else ("def traced0_element" in text)


@pytest.mark.parametrize("llvm", ["1", "0"])
def test_untypeable_program_raises_compile_error_with_source(llvm, monkeypatch):
    """An ill-typed program (bitwise and of floats) fails numba's typing, or LLVM's verifier
    on the llvm route: a CompileError showing the source."""
    monkeypatch.setenv("QUERYCOMPUTE_CPU_LLVM", llvm)
    bad = ElementProgram((InputSpec("x", "float32"),), (), (),
                         (E.Binary("bitand", X32, X32, "float32"),))
    with pytest.raises(CompileError) as info:
        BACKEND.prepare(Pass(bad, ToArray(), f"broken{llvm}"))
    if llvm == "1":
        assert info.value.dialect == "llvm" and "broken1" in info.value.source
    else:
        assert info.value.dialect == "numba" and "def broken0_element" in info.value.source


def test_availability_says_numba_version():
    ok, why = BACKEND.availability()
    assert ok and "numba" in why
