"""Issue 28: the cpu backend's llvm route (LLVM IR printed from the pass, compiled with
llvmlite: _codegen/dialects/llvm_ir.py, backends/cpu/llvm_loader.py).

Every supported node and aggregate runs on the llvm route and gives the numpy backend's bits
(the oracle, whose semantics and float-sum order the numba route is tested against too) on
adversarial inputs: NaN, +-inf, -0.0, integer extremes, zero and -1 divisors, shift counts
out of range, float -> int conversions out of range. Passes the dialect does not print take
the numba route, and the trace says which dialect ran."""
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import querycompute as qc
from querycompute._codegen.dialects import llvm_ir
from querycompute.backends.cpu import cpu as cpu_backend

FLOATS = np.array([0.0, -0.0, 1.5, -2.5, 3.0, -7.0, np.nan, np.inf, -np.inf, 1e300, -1e300,
                   2.0 ** 63, -(2.0 ** 63), 2.0 ** 64, 2.0 ** 31, -(2.0 ** 31) - 1, 0.49999997,
                   1e-310, 255.5, -129.0])
INTS = [0, 1, -1, 2, -2, 3, -3, 7, -7, 63, 64, 100, -100]


def ints(dtype):
    info = np.iinfo(dtype)
    vals = [v for v in INTS + [info.min, info.max, info.min + 1, info.max - 1]
            if info.min <= v <= info.max]
    return np.array(vals, dtype)


def same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    assert a.shape == b.shape
    assert a.tobytes() == b.tobytes() or (a.dtype.kind == "f" and np.array_equal(a, b, equal_nan=True)
                                          and np.array_equal(np.signbit(a), np.signbit(b))), (a, b)


def dialect():
    return {k.dialect for k in qc.last_trace().kernels}


FLOAT_MAPS = [
    lambda v: v * 2 + 1, lambda v: v / 3, lambda v: -v, lambda v: abs(v),
    lambda v: np.minimum(v, 1.0), lambda v: np.maximum(v, -0.0), lambda v: np.sqrt(v),
    lambda v: np.floor(v), lambda v: np.ceil(v), lambda v: np.trunc(v), lambda v: np.rint(v),
    lambda v: np.isnan(v), lambda v: np.isinf(v), lambda v: np.isfinite(v),
    lambda v: v if v > 0 else -v, lambda v: v != 0, lambda v: v == v, lambda v: np.copysign(2.0, v),
    lambda v: np.int64(v), lambda v: np.int32(v), lambda v: np.uint64(v), lambda v: np.uint32(v),
    lambda v: np.int8(v), lambda v: np.uint16(v), lambda v: bool(v), lambda v: np.float32(v),
]


@pytest.mark.parametrize("k", range(len(FLOAT_MAPS)))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float_nodes_match_numpy_bits(k, dtype):
    f = FLOAT_MAPS[k]
    with np.errstate(all="ignore"):
        x = FLOATS.astype(dtype)
    with np.errstate(all="ignore"):
        got = qc.query(x).on("cpu").select(f).to_array()
        assert dialect() == {"llvm"}
        want = qc.query(x).on("numpy").select(f).to_array()
    same(got, want)


INT_MAPS = [
    lambda v: v + 1, lambda v: v - 3, lambda v: v * 3, lambda v: -v, lambda v: abs(v), lambda v: ~v,
    lambda v: v // 3, lambda v: v % 3, lambda v: v // -1, lambda v: v % -7,
    lambda v: v & 6, lambda v: v | 1, lambda v: v ^ 5, lambda v: min(v, 5), lambda v: max(v, -5),
    lambda v: v > 2, lambda v: v <= -1, lambda v: np.float64(v), lambda v: np.float32(v),
    lambda v: np.int8(v), lambda v: np.uint64(v), lambda v: bool(v),
]


@pytest.mark.parametrize("k", range(len(INT_MAPS)))
@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint8", "uint32", "uint64"])
def test_int_nodes_match_numpy_bits(k, dtype):
    f = INT_MAPS[k]
    x = ints(dtype)
    try:
        want = qc.query(x).on("numpy").select(f).to_array()
    except qc.QueryError:
        pytest.skip("not a query for this dtype")
    got = qc.query(x).on("cpu").select(f).to_array()
    assert dialect() == {"llvm"}
    same(got, want)


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint8", "uint64"])
def test_division_and_shifts_by_every_divisor(dtype):
    """Each element divided / shifted by each value of the column: b == 0 -> 0, MIN // -1 wraps,
    Python signs, shift counts out of range."""
    x = ints(dtype)
    a, b = np.repeat(x, len(x)), np.tile(x, len(x))
    for f in (lambda r: r.a // r.b, lambda r: r.a % r.b, lambda r: r.a << r.b, lambda r: r.a >> r.b):
        got = qc.query(a=a, b=b).on("cpu").select(f).to_array()
        assert dialect() == {"llvm"}
        same(got, qc.query(a=a, b=b).on("numpy").select(f).to_array())


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float_floor_division_remainder_and_fmod_by_every_divisor(dtype):
    """np.floor_divide / np.remainder / np.fmod of every pair of special values (NaN, +-inf,
    +-0.0, subnormals, huge quotients): from `frem`, exactly NumPy's bits."""
    with np.errstate(all="ignore"):
        x = np.array([0.0, -0.0, 1.5, -2.5, 3.0, -7.0, np.nan, np.inf, -np.inf, 1e300, -1e-300,
                      5e-324, 0.1, 7.0, 2.0 ** 60, 1e-30], dtype)
    a, b = np.repeat(x, len(x)), np.tile(x, len(x))
    for f in (lambda r: r.a % r.b, lambda r: r.a // r.b, lambda r: np.fmod(r.a, r.b)):
        with np.errstate(all="ignore"):
            got = qc.query(a=a, b=b).on("cpu").select(f).to_array()
            assert dialect() == {"llvm"}
            same(got, qc.query(a=a, b=b).on("numpy").select(f).to_array())


def _reduce_cases():
    return [
        ("sum", lambda q: q.sum()), ("count", lambda q: q.count()),
        ("min", lambda q: q.min()), ("max", lambda q: q.max()),
        ("mean", lambda q: q.mean()),
        ("any", lambda q: q.any(lambda v: v > 2)), ("all", lambda q: q.all(lambda v: v < 1e308)),
        ("agg", lambda q: tuple(q.agg(s=qc.sum, lo=qc.min, hi=qc.max, n=qc.count).values())),
        ("first", lambda q: q.first(default=None)),
        ("first_tuple", lambda q: q.where(lambda v: v > 1).select(lambda v: (v, v > 2)).first(default=None)),
    ]


@pytest.mark.parametrize("case", range(len(_reduce_cases())))
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "uint8", "int64"])
@pytest.mark.parametrize("n", [0, 1, 4095, 4097, 70_000, 200_001])
def test_reductions_match_numpy_bits(case, dtype, n):
    """Chunks, blocks and lanes (sum_order) at their edges, with a filter dropping some."""
    name, term = _reduce_cases()[case]
    rng = np.random.default_rng(n)
    if dtype.startswith("float"):
        x = (rng.standard_normal(n) * 1e3).astype(dtype)
        if n > 10:
            x[3] = -0.0
            x[n // 2] = np.nan if name in ("min", "max", "agg") and n % 2 else x[n // 2]
    else:
        info = np.iinfo(dtype)
        x = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)

    def run(backend):
        q = qc.query(x).on(backend).where(lambda v: v != 3)
        try:
            return term(q)
        except qc.QueryError as exc:
            return type(exc)

    want = run("numpy")
    got = run("cpu")
    if isinstance(want, type):
        assert got is want
        return
    assert dialect() == {"llvm"}
    if isinstance(want, tuple):
        for g, w in zip(got, want):
            same(g, w)
    elif want is None:
        assert got is None
    else:
        same(got, want)


def test_params_and_index_and_several_inputs():
    x = np.arange(-50, 50, dtype=np.int32)
    y = np.linspace(-3, 3, 100)
    lo, scale, flag = np.int32(-7), 0.25, True
    f = lambda r: (r.x * scale + r.y) if (r.x > lo) == flag else -r.y      # noqa: E731
    got = qc.query(x=x, y=y).on("cpu").select(f).to_array()
    assert dialect() == {"llvm"}
    same(got, qc.query(x=x, y=y).on("numpy").select(f).to_array())
    got = qc.query(x=x[::3], y=y[::3]).on("cpu").where(lambda r: r.x % 2 == 0).sum(lambda r: r.y)
    same(got, qc.query(x=x[::3], y=y[::3]).on("numpy").where(lambda r: r.x % 2 == 0).sum(lambda r: r.y))


@pytest.mark.parametrize("n", [0, 1, 63, 64, 65, 4097, 65536, 65537, 200_001])
def test_compaction_dense_and_sparse_match_numpy(n):
    """Both writers (dense; sparse under 1 survivor in compact.SPARSE) at word and chunk
    edges, several outputs of several dtypes, a strided input."""
    rng = np.random.default_rng(n)
    x = rng.integers(-1000, 1000, 2 * n).astype(np.int64)[::2]
    y = rng.standard_normal(n).astype(np.float32)
    for f in (lambda r: r.x % 3 < 1, lambda r: r.x == 7, lambda r: r.x > -5000, lambda r: r.y != r.y):
        sel = lambda r: (r.x * 2 + 1, r.y > 0, np.float64(r.y))      # noqa: E731
        got = qc.query(x=x, y=y).on("cpu").where(f).select(sel).to_array()
        assert dialect() == {"llvm"}
        want = qc.query(x=x, y=y).on("numpy").where(f).select(sel).to_array()
        for g, w in zip(got, want):
            same(g, w)


def test_what_the_dialect_does_not_print_takes_numba():
    """float16 and libm functions go to numba, named in the trace; unsupported() says why."""
    x = np.linspace(0.5, 2, 50)
    got = qc.query(x).on("cpu").select(lambda v: np.exp(v)).to_array()
    assert dialect() == {"numba"}
    # a math function within its libm's ulp (DESIGN.md section 4): NumPy's float64 exp takes
    # a SIMD path on AVX-512 machines that differs from the C library's by 1 ulp at times
    np.testing.assert_array_max_ulp(got, qc.query(x).on("numpy").select(lambda v: np.exp(v)).to_array(),
                                    maxulp=1)
    h = x.astype(np.float16)
    got = qc.query(h).on("cpu").sum()
    assert dialect() == {"numba"}
    same(got, qc.query(h).on("numpy").sum())


def test_explain_names_the_compiler():
    x = np.arange(10, dtype=np.float32)
    q = qc.query(x).on("cpu").select(lambda v: v * 2)
    assert "(LLVM IR via llvmlite)" in q.explain(terminal="sum")
    assert "(numba: the llvm dialect does not print function exp)" in \
        q.select(lambda v: np.exp(v)).explain(terminal="sum")


def test_unsupported_names_the_reason():
    from querycompute._codegen.ir import expr as E
    from querycompute._codegen.ir.program import ElementProgram, InputSpec, Pass, Reduce, ToArray, Agg
    x = E.Load(0, "float64")
    prog = ElementProgram((InputSpec("x", "float64"),), (), (), (E.Call("exp", x, "float64"),))
    assert llvm_ir.unsupported(Pass(prog, ToArray(), "p")) == "function exp"
    prog = ElementProgram((InputSpec("x", "float64"),), (), (), (x,))
    fold = Agg("fold", (x,), "float64", combine=E.Binary("add", E.Var("acc", "float64"), E.Var("item", "float64"),
                                                         "float64"), seed=E.Const(0.0, "float64"))
    assert llvm_ir.unsupported(Pass(prog, Reduce((fold,)), "p")) == "aggregate fold"
    assert llvm_ir.unsupported(Pass(prog, ToArray(), "p")) is None
    assert cpu_backend.route(Pass(prog, ToArray(), "p")) == "llvm"


def test_switch_off_and_first_call_without_numba(tmp_path):
    """A fresh process: QUERYCOMPUTE_CPU_LLVM=0 compiles with numba; by default a query the
    dialect prints never imports numba, and its second process loads the object file."""
    script = tmp_path / "s.py"
    script.write_text(textwrap.dedent('''
        import sys, numpy as np, querycompute as qc
        x = np.arange(100000, dtype=np.float32)
        r = qc.query(x).on("cpu").select(lambda v: v * 2).where(lambda v: v > 10).sum()
        t = qc.last_trace().kernels[0]
        print(float(r), t.dialect, t.cache, "numba" in sys.modules)
    '''))
    env = {**__import__("os").environ, "QUERYCOMPUTE_CACHE_DIR": str(tmp_path / "c"),
           "QUERYCOMPUTE_TIERED": "0"}
    out = [subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                          check=True).stdout.split() for _ in range(2)]
    assert out[0][1:] == ["llvm", "compiled", "False"]
    assert out[1][1:] == ["llvm", "disk", "False"]
    off = subprocess.run([sys.executable, str(script)], env={**env, "QUERYCOMPUTE_CPU_LLVM": "0"},
                         capture_output=True, text=True, check=True).stdout.split()
    assert off[1] == "numba" and off[0] == out[0][0]


def test_tiered_first_call_loads_a_disk_hit_before_answering(tmp_path):
    """Issue 28 item 3: with tiers on, a pass whose object file is in the disk cache is
    loaded before the first call answers (the kernel answers it, not the numpy tier)."""
    script = tmp_path / "t.py"
    script.write_text(textwrap.dedent('''
        import numpy as np, querycompute as qc
        x = np.arange(100000, dtype=np.float32)
        q = qc.query(x).on("cpu").select(lambda v: v * 3).where(lambda v: v > 10)
        r = q.sum()
        t = qc.last_trace()
        first = (t.tier, [(k.dialect, k.cache) for k in t.kernels])
        assert q.compile("sum").wait(timeout=120)
        print(float(r), first)
    '''))
    env = {**__import__("os").environ, "QUERYCOMPUTE_CACHE_DIR": str(tmp_path / "c"),
           "QUERYCOMPUTE_TIERED": "1"}
    runs = [subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                           check=True).stdout.strip() for _ in range(2)]
    assert runs[0].split()[0] == runs[1].split()[0]
    assert "('kernel', [('llvm', 'disk')])" in runs[1], runs


def test_threads_compile_different_passes_at_once():
    """llvmlite's parses share LLVM's global context: llvm_loader's lock keeps eight threads
    compiling eight passes at once correct."""
    import threading
    x = np.arange(100_000, dtype=np.float64)
    results, errors = {}, []

    def work(k):
        try:
            q = qc.query(x).on("cpu").select(f"lambda v: v * {k} + 0.5").where(lambda v: v > 10)
            results[k] = q.compile("sum", tiered=False)()
        except Exception as exc:          # noqa: BLE001 - reported below
            errors.append(exc)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(3, 11)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for k, got in results.items():
        same(got, qc.query(x).on("numpy").select(f"lambda v: v * {k} + 0.5").where(lambda v: v > 10).sum())
    assert len(results) == 8


@pytest.mark.parametrize("n", [0, 1, 1000, 140_000])
def test_passes_after_a_join_read_through_its_index_columns(n):
    """An IndexedPass (the pass after a join reads in_k[li[i]] / in_k[ri[i]]; a left join's
    rows without a match read the fill value, NaN / 0 / False, and load nothing) takes the
    llvm route; the other side may be empty."""
    rng = np.random.default_rng(n)
    a = qc.query(k=rng.integers(0, 500, n).astype(np.int64), v=rng.standard_normal(n))
    for m in (0, 250):
        b = qc.query(k=np.arange(0, 2 * m, 2, dtype=np.int64), w=rng.standard_normal(m).astype(np.float32),
                     f=np.arange(m) % 3 == 0)
        out = {}
        for be in ("cpu", "numpy"):
            j = a.on(be).join(b, lambda r: r.k, lambda s: s.k, lambda r, s: {"x": r.v * s.w, "f": s.f})
            lj = a.on(be).left_join(b, lambda r: r.k, lambda s: s.k, lambda r, s: {"x": r.v + s.w, "f": s.f})
            out[be] = (j.where(lambda t: t.f).sum(lambda t: t.x), lj.select(lambda t: t.x).to_array(),
                       lj.count(lambda t: t.f), lj.where(lambda t: t.x == t.x).select(lambda t: t.f).to_array())
            if be == "cpu" and n:
                assert "llvm" in dialect()
        for g, w in zip(out["cpu"], out["numpy"]):
            same(g, w)


def test_every_stack_slot_is_in_its_functions_entry_block():
    """An alloca inside a loop would grow the stack every iteration (a compaction's 64-row
    words at n = 1e9 would overflow it): every one sits in its function's entry block."""
    x = np.arange(10, dtype=np.float32)
    q = qc.query(x).on("cpu").where(lambda v: v > 3)
    for text in (q.source("cpu", terminal="to_array"), q.source("cpu", terminal="sum"),
                 q.select(lambda v: (v, v * 2)).source("cpu", terminal="to_array")):
        blocks = 0
        for fn in text.split("\ndefine ")[1:]:
            lines = fn[fn.index("{"):fn.index("\n}")].splitlines()[1:]
            labels = [k for k, line in enumerate(lines) if re.fullmatch(r'"?[\w.]+"?:', line.strip())]
            assert labels[0] == 0                     # the entry block's label
            blocks += len(labels)
            later = lines[labels[1]:] if len(labels) > 1 else []
            assert not any("alloca" in line for line in later), fn[:80]
        assert blocks > 10                            # loops: many blocks were looked at
