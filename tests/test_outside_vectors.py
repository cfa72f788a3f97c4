"""Outside tests of the lambda language's numerical semantics with NumPy's kinds of test
vectors (numpy/_core/tests/test_umath.py style: signed zeros, infinities, NaN, the smallest
subnormal, the largest finite value, rounding ties, huge arguments of sin / cos, values next
to exp / cosh overflow, the integer extremes), run on every backend here: numpy, cpu,
opencl, webgpu (where the values are 32-bit) and the CUDA C / Metal kernels through the CPU
harness (tests/expr_backends.py).

The oracle is NumPy itself: Python calling the lambda on NumPy scalars of the element dtypes
(DESIGN.md section 4), or NumPy on the whole arrays for the terminals. Exact operations
(+ - * / // %, comparisons, casts, floor / rint / sqrt, min / max, copysign) must agree bit
for bit; math functions (exp, sin, ..., `**`) within 4 ulp of the result (the guide's "a few
ulp"; the WGSL helpers claim 5 and measure 3) with their special values (a NaN, an infinity
or a zero from NumPy) exact. Float -> int casts of NaN / inf / out-of-range values follow the
guide's x86-64 rule ("Semantics"), which NumPy on this x86-64 machine computes.

Values left out, because NumPy's own answer is not one thing: np.power(x, y) called on NumPy
*scalars* takes a sqrt fast path when y == 0.5 (np.power(np.float32(-0.0), np.float32(0.5))
is -0.0, its array loop and `x ** y` give +0.0, as C's pow does): `**` is tested, not
np.power on scalars. `a if c else 0.5` is float32 for float32 `a` (NEP 50, as the kernels
type it) while Python returns a Python float from one branch: only both-array branches.

Each query holds every special value in one array and all its operations in one tuple, so
each backend compiles it once.

The last test is webgpu's: on lavapipe a captured 0.0 that also steered a helper's loop
multiplied inf / NaN to 0 while scalars travelled in a uniform buffer.
"""
from __future__ import annotations

import itertools
import re
import warnings

import numpy as np
import pytest

import querycompute as qc
from chains import load_lambdas
from expr_backends import ALL, HARNESS, WEBGPU, harness_run, oracle, same_bits, select_everywhere

# ---- values ----------------------------------------------------------------------------------


def float_values(dtype: str) -> np.ndarray:
    fi = np.finfo(dtype)
    tiny = float(fi.smallest_subnormal)
    vals = [0.0, -0.0, np.inf, -np.inf, np.nan, tiny, -tiny, 3 * tiny, float(fi.max), -float(fi.max),
            1.0, -1.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 3.5, -3.5, 0.1, -3.0, 100.0,
            1e22, -1e22,            # sin / cos of huge arguments (inf in float16)
            11.09, 11.1,            # exp / cosh overflow of float16 (65504)
            88.72, 89.0,            # float32 (cosh(89) is finite, e^89 is not)
            709.78, 710.0]          # float64
    with np.errstate(all="ignore"):
        return np.array(vals, np.float64).astype(dtype)


def pairs(vals) -> tuple[np.ndarray, np.ndarray]:
    a, b = zip(*itertools.product(vals, vals))
    return np.array(a), np.array(b)


def float_pairs(dtype: str):
    tiny = float(np.finfo(dtype).smallest_subnormal)
    vals = [0.0, -0.0, np.inf, -np.inf, np.nan, tiny, 3 * tiny, -1.0, 0.5, 1.0, -2.5, 3.0, 7.0, 1e-3,
            float(np.finfo(dtype).max)]
    a, b = pairs(vals)
    return a.astype(dtype), b.astype(dtype)


# ---- comparison ------------------------------------------------------------------------------


def within_ulps(got: np.ndarray, want: np.ndarray, ulps: int = 4) -> np.ndarray:
    """Same bits, or (for a finite, non-zero NumPy result) within `ulps` of its ulps."""
    ok = same_bits(got, want)
    finite = np.isfinite(want) & (want != 0) & np.isfinite(got)
    with np.errstate(all="ignore"):
        err = np.abs(got.astype(np.float64) - want.astype(np.float64))
        return ok | (finite & (err <= ulps * np.abs(np.spacing(want)).astype(np.float64)))


def expand(templates: list[str], names: dict[str, str]) -> list[str]:
    """Templates over v / a / b, spelled for one set of columns ({"a": "a_int8", ...})."""
    return [re.sub(r"\b([vab])\b", lambda m: names.get(m.group(1), m.group(1)), t) for t in templates]


def _used(expr: str, cols: dict) -> list[str]:
    return [c for c in cols if re.search(rf"\b{c}\b", expr)]


def _chunks(ks: list[int], exprs: list[str], cols: dict, buffers: int):
    """Consecutive runs of the fields `ks` whose columns and outputs together stay within
    `buffers` storage buffers (webgpu: 32 per shader stage)."""
    out, cur, used = [], [], set()
    for k in ks:
        more = used | set(_used(exprs[k], cols))
        if cur and len(more) + len(cur) + 1 > buffers:
            out.append(cur)
            cur, more = [], set(_used(exprs[k], cols))
        cur.append(k)
        used = more
    return out + ([cur] if cur else [])


def check_everywhere(cols: dict[str, np.ndarray], exprs: list[str], spelled=None, inexact=()):
    """One tuple lambda of `exprs` over the columns `cols` (a zip): numpy, cpu, opencl and
    CUDA C (harness) run it whole; Metal (no float64) runs the 32-bit fields in one query,
    webgpu (no 64-bit types, 32 storage buffers per shader) in a few. Each field is
    compared with the oracle (`spelled`: the same value spelled for Python on NumPy scalars)."""
    spelled = spelled or exprs
    x = tuple(cols.values())
    args = ", ".join(cols)
    want = oracle(x, f"lambda {args}: ({', '.join(spelled)},)")
    got = {b: dict(zip(exprs, r)) for b, r in
           select_everywhere(x, f"lambda {args}: ({', '.join(exprs)},)", [b for b in ALL if b != "metal"]).items()}
    narrow = [k for k, e in enumerate(exprs)         # 32-bit values in, computed and out
              if want[k].dtype.itemsize <= 4 and np.result_type(*(cols[c] for c in _used(e, cols))).itemsize <= 4]
    for backend in (["metal"] if "metal" in ALL else []) + WEBGPU:
        got[backend] = {}
        for chunk in _chunks(narrow, exprs, cols, 30 if backend == "webgpu" else len(exprs) * 3):
            used = [c for c in cols if any(c in _used(exprs[k], cols) for k in chunk)]
            sub = select_everywhere(tuple(cols[c] for c in used),
                                    f"lambda {', '.join(used)}: ({', '.join(exprs[k] for k in chunk)},)", [backend])
            got[backend].update(zip((exprs[k] for k in chunk), sub[backend]))
    failures = []
    for backend, fields in got.items():
        for e, w in zip(exprs, want):
            if e not in fields:
                continue
            g = np.asarray(fields[e])
            if g.dtype != w.dtype:
                failures.append(f"{backend}: {e}: dtype {g.dtype}, NumPy {w.dtype}")
                continue
            ok = within_ulps(g, w) if e in inexact else same_bits(g, w)
            if not ok.all():
                at = np.flatnonzero(~ok)[:4]
                xs = {c: cols[c][at] for c in _used(e, cols)}
                failures.append(f"{backend}: {e} at {xs}: got {g[at]}, NumPy {w[at]}")
    assert not failures, "\n".join(failures)


# ---- floats: one value at a time ---------------------------------------------------------------

FLOATS = ["float16", "float32", "float64"]
EXACT_UNARY = ["-v", "abs(v)", "np.sqrt(v)", "np.floor(v)", "np.trunc(v)", "np.rint(v)", "np.sign(v)",
               "v / 0.0", "v / -0.0", "0.0 / v", "0.0 - v", "0.0 // v", "v // 0.0", "v % 0.0", "v // 2.5", "v % -1.5", "np.copysign(1.0, v)",
               "np.minimum(v, -0.0)", "np.maximum(0.0, v)", "np.isfinite(v)", "v != v",
               "(v if v > 1 else -v)", "v ** 0.5", "v * 0.0", "not v", "np.int32(v)", "np.uint8(v)",
               # 64-bit results (not on webgpu; Metal: float16 / float32 in, float64 out refused)
               "int(v)", "round(v)", "math.floor(v)", "np.uint64(v)", "float(v)", "math.sqrt(v)"]
ORACLE_SPELLING = {"int(v)": "np.int64(v)", "round(v)": "np.int64(np.rint(v))",
                   "math.floor(v)": "np.int64(np.floor(v))", "math.sqrt(v)": "np.sqrt(np.float64(v))",
                   "math.exp(v)": "np.exp(np.float64(v))", "math.cosh(v)": "np.cosh(np.float64(v))",
                   "math.sin(v)": "np.sin(np.float64(v))", "math.log(v)": "np.log(np.float64(v))",
                   "math.log1p(v)": "np.log1p(np.float64(v))", "math.atanh(v)": "np.arctanh(np.float64(v))"}
MATH = [f"np.{f}(v)" for f in ("exp", "expm1", "cosh", "sinh", "tanh", "sin", "cos", "tan", "log", "log2",
                              "log10", "log1p", "arcsin", "arccos", "arctan", "arcsinh", "arccosh", "arctanh")]
MATH += ["math.exp(v)", "math.sin(v)", "math.log1p(v)"]


def float_columns(prefix: str = "v") -> dict:
    return {f"{prefix}{d[5:]}": float_values(d) for d in FLOATS}


def per_float_dtype(templates: list[str]) -> tuple[list[str], list[str]]:
    exprs = [e for d in FLOATS for e in expand(templates, {"v": f"v{d[5:]}"})]
    spelled = [e for d in FLOATS
               for e in expand([ORACLE_SPELLING.get(t, t) for t in templates], {"v": f"v{d[5:]}"})]
    return exprs, spelled


def test_float_special_values_one_at_a_time():
    """Signs of zero, NaN, inf, subnormals, ties of rint, division by +-0 (webgpu's driver
    folded `v / 0.0` and `0.0 / v` to 0, and `0.0 - v` to -v), // and % by zero, casts of NaN / inf / huge values (the guide's
    x86-64 rule); math functions: exp / cosh next to overflow (webgpu's cosh(89) was inf), log
    of negatives, zero and subnormals (webgpu's log2(1e-45) was -127), sin / cos of 1e22,
    expm1 / log1p of inf and of the largest float (Metal's prelude helpers gave NaN)."""
    exprs, spelled = per_float_dtype(EXACT_UNARY + MATH)
    check_everywhere(float_columns(), exprs, spelled, inexact=set(per_float_dtype(MATH)[0]))


# ---- floats: pairs ---------------------------------------------------------------------------

PAIR_EXACT = ["a + b", "a - b", "a * b", "a / b", "a // b", "a % b", "np.remainder(a, b)",
              "np.copysign(a, b)", "np.minimum(a, b)", "np.maximum(a, b)", "min(a, b)", "max(a, b)",
              "a < b", "a == b", "a != b", "a >= b", "(a if a < b else b)",
              "b + 3 + 3", "3 - (b + 3)",   # lavapipe rewrote these (b + 6, -b) before qc_exact
              "((a < 3) if a > 1 else (a > b))"]   # WGSL select() of comparisons (a template list to naga)
PAIR_MATH = ["a ** b", "np.hypot(a, b)", "np.arctan2(a, b)"]


def test_float_pairs_of_special_values():
    """Every pair of special values: IEEE arithmetic, Python-signed // and % (also by a
    subnormal: webgpu's fmod lost subnormals), NaN in min / max and comparisons, 0 ** 0,
    inf ** 0, 1 ** nan, (-2.5) ** 0.5, hypot(inf, nan) = inf and hypot(0, nan) = nan (Metal's
    helper gave 0), atan2 of signed zeros."""
    cols, exprs, inexact = {}, [], set()
    for d in FLOATS:
        names = {"a": f"a{d[5:]}", "b": f"b{d[5:]}"}
        cols[names["a"]], cols[names["b"]] = float_pairs(d)
        exprs += expand(PAIR_EXACT + PAIR_MATH, names)
        inexact |= set(expand(PAIR_MATH, names))
    check_everywhere(cols, exprs, inexact=inexact)


# ---- integers ----------------------------------------------------------------------------------

INTS = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"]
INT_OPS = ["a + b", "a * b", "a // b", "a % b", "a << b", "a >> b", "np.minimum(a, b)", "a < b", "-a",
           "abs(a)", "a ** b"]
# NumPy raises on a negative integer exponent; read at run time it gives 0 (the guide)
INT_ORACLE = {"a ** b": "(a ** b if b >= 0 else a - a)"}


def int_pairs(dtype: str):
    """min, min + 1, -7, -1, 0, 1, 2, 7, shift counts width - 1 .. width + 1, max - 1, max
    (negative values wrapped into the unsigned types), every pair."""
    ii = np.iinfo(dtype)
    w = ii.bits
    vals = [int(ii.min), int(ii.min) + 1, -7, -1, 0, 1, 2, 7, w - 1, w, w + 1, int(ii.max) - 1, int(ii.max)]
    bits = np.array([v % 2 ** w for v in vals], f"uint{w}").view(dtype)   # two's complement
    a, b = pairs(range(len(vals)))
    return bits[a], bits[b]


def test_int_extremes_division_shifts_and_wrap():
    """Every integer width: // and % by 0 give 0, MIN // -1 wraps to MIN, MIN % -1 is 0,
    shifts by >= the width or by negative counts as NumPy, abs(MIN) == MIN, -MIN == MIN,
    a negative run-time exponent gives 0, overflow wraps."""
    cols, exprs, spelled = {}, [], []
    for d in INTS:
        names = {"a": f"a_{d}", "b": f"b_{d}"}
        cols[names["a"]], cols[names["b"]] = int_pairs(d)
        exprs += expand(INT_OPS, names)
        spelled += expand([INT_ORACLE.get(e, e) for e in INT_OPS], names)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_everywhere(cols, exprs, spelled)


# bool pairs, and NEP 50 pairs of dtypes: int8 + float16 -> float16, int16 + float16 ->
# float32, int32 + float32 -> float64, int64 + uint64 -> float64; Python scalars are weak
MIXED = [("bool", "bool"), ("int8", "float16"), ("int16", "float16"), ("uint8", "int8"),
         ("int32", "float32"), ("int64", "uint64")]
MIXED_OPS = ["a + b", "a / b", "a // b", "a % b", "a < b", "min(a, b)", "a + 1", "a * 1.5", "b * 2", "abs(a)", "~a"]


def test_bool_arithmetic_and_mixed_promotion():
    """NumPy's bool loops (+ is or, * is and, // and % give int8, abs keeps bool) and NEP 50
    promotion of mixed pairs, with weak Python scalars (int8 + 1 -> int8, int8 * 1.5 ->
    float64, float16 * 2 -> float16)."""
    va = {"bool": [0, 0, 1, 1, 1, 0, 1, 0, 1, 1], "int": [0, 1, 2, 3, 7, 100, 127, 5, 9, 64]}
    vb = {"bool": [0, 1, 0, 1, 1, 0, 0, 1, 1, 0], "int": [1, 0, 2, 3, 0, 4, 5, 6, 7, 8],
          "float": [1.5, -0.0, 2.0, np.nan, -np.inf, 3.0, 0.0, 1e-3, -7.0, 2.5]}
    cols, exprs = {}, []
    for k, (da, db) in enumerate(MIXED):
        names = {"a": f"a{k}_{da}", "b": f"b{k}_{db}"}
        ka, kb = ("bool" if d == "bool" else "int" if d[0] in "iu" else "float" for d in (da, db))
        with np.errstate(all="ignore"):
            cols[names["a"]] = np.array(va[ka if ka != "float" else "int"], np.float64).astype(da)
            cols[names["b"]] = np.array(vb[kb], np.float64).astype(db)
        ops = [o for o in MIXED_OPS if not ("~" in o and da[0] == "f")]
        exprs += expand(ops, names)
    check_everywhere(cols, exprs)


# ---- terminals --------------------------------------------------------------------------------

KINDS = {"s": qc.sum, "m": qc.mean, "lo": qc.min, "hi": qc.max, "f": qc.first}


def terminal_cases() -> dict:
    """Data sets of equal length per dtype kind: NaN first / last / only, zeros, infinities,
    integer extremes (int8 sums wrap in int64 only past 2^63: here they just need int64),
    3000 multiples of 1/8 below 10 (exact in float32 in any order, while a float16
    accumulator would stall: float16 sums accumulate in float32), and nothing."""
    rng = np.random.default_rng(7)
    many = rng.integers(0, 80, 3000)
    return {"nan first": ([np.nan, 1, 2, -3], [0, 1, "max", "min"], [1, 0, 1, 1]),
            "nan last": ([1, 2, -3, np.nan], ["min", "max", "max", -1], [0, 0, 0, 0]),
            "nan only": ([np.nan], ["min"], [1]),
            "zeros": ([-0.0, -0.0, -0.0], [-1, 0, -1], [0, 1, 0]),
            "infs": ([np.inf, -np.inf, 1.0], ["max", "max", "max"], [1, 1, 1]),
            "many": (many / 8.0, np.where(many < 40, "max", "min").tolist(), many % 2),
            "empty": ([], [], [])}


def case_column(dtype: str, case: tuple) -> np.ndarray:
    floats, ints, bools = case
    if dtype == "bool":
        return np.array(bools, bool)
    if dtype.startswith("float"):
        return np.array(floats, np.float64).astype(dtype)
    ii = np.iinfo(dtype)
    named = {"max": int(ii.max), "min": int(ii.min)}
    return np.array([named.get(v, v) % 2 ** ii.bits for v in ints], np.uint64).astype(f"uint{ii.bits}").view(dtype)


def numpy_terminal(kind: str, x: np.ndarray):
    if len(x) == 0:
        return np.sum(x) if kind == "s" else None
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return {"s": np.sum, "m": np.mean, "lo": np.min, "hi": np.max, "f": lambda c: c[0]}[kind](x)


def agg_query(dtypes: list[str]):
    """One `agg` over a zip of one column per dtype: each spec's final select picks a column."""
    args = ", ".join(f"c_{d}" for d in dtypes)
    picks = load_lambdas([f"lambda {args}: c_{d}" for d in dtypes])
    named = {f"{k}_{d}": (spec(f) if k == "s" else spec(f, default=None))
             for d, f in zip(dtypes, picks) for k, spec in KINDS.items()}
    named["n"] = qc.count
    return named


def terminal_plans() -> list[tuple[str, list[str], dict]]:
    """(backend, dtypes, named aggregates): one agg over a zip of float16, int8 and float32
    columns (numpy, cpu, opencl, CUDA C); Metal (no float64, so no mean of int8) the same
    without the int8 mean; webgpu (32 storage buffers per shader) one agg per dtype. Not one
    agg of every dtype: pocl's compile time grows faster than the number of aggregates (9
    dtypes: ~200 s), so float64 reductions are left to the files that test them."""
    dtypes = ["float16", "int8", "float32"]
    plans = [(b, dtypes, agg_query(dtypes)) for b in ALL if b != "metal"]
    if "metal" in ALL:
        plans.append(("metal", dtypes, {k: v for k, v in agg_query(dtypes).items() if k != "m_int8"}))
    plans += [(b, [d], agg_query([d])) for b in WEBGPU for d in dtypes]
    return plans


def test_terminals_on_special_values():
    """sum / mean / min / max / first / count in one agg: NumPy's result dtypes (int8 sum
    -> int64, mean of ints -> float64, float16 accumulated in float32), NaN first / last /
    only propagating through min / max, infinities, zeros, empty inputs (0 and defaults)."""
    plans = terminal_plans()
    failures = []
    for name, case in terminal_cases().items():
        for b, dtypes, named in plans:
            cols = [case_column(d, case) for d in dtypes]
            q = qc.query(*cols)
            got = harness_run(q, qc.agg(**named), b) if b in HARNESS else q.on(b).agg(**named)
            if got["n"] != len(cols[0]) or type(got["n"]) is not int:
                failures.append(f"{name}: count on {b}: {got['n']!r}")
            for d, x in zip(dtypes, cols):
                for k in KINDS:
                    if f"{k}_{d}" not in named:
                        continue
                    g, w = got[f"{k}_{d}"], numpy_terminal(k, x)
                    if w is None:
                        ok = g is None
                    elif np.asarray(g).dtype != np.asarray(w).dtype:
                        ok = False
                    elif k in ("lo", "hi") and w == 0:
                        ok = g == w                 # min / max of zeros: either zero (the guide)
                    else:
                        ok = bool(same_bits(np.asarray(g), np.asarray(w)))
                    if not ok:
                        failures.append(f"{name}: {k} of {d} on {b}: got {g!r}, NumPy {w!r}")
    assert not failures, "\n".join(failures)


# ---- webgpu: scalars out of the uniform buffer ----------------------------------------------


K_ZERO = 0.0


@pytest.mark.skipif(not WEBGPU, reason="no webgpu adapter")
def test_webgpu_captured_zero_steering_a_loop():
    """lavapipe specialised the shader on a uniform that steers a loop (here pow's and fmod's:
    Mesa's inlined uniforms), then folded x * 0.0 to 0 (NIR treats WGSL floats as inexact):
    a captured 0.0 times inf / NaN gave 0. Scalars now travel in a read-only storage buffer
    (wgsl.py), whose values no compiler sees."""
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -2.5], np.float32)
    got = qc.query(x).select(lambda v: (v * K_ZERO, v ** K_ZERO)).on("webgpu").to_array()
    with np.errstate(all="ignore"):
        want = (x * np.float32(K_ZERO), x ** np.float32(K_ZERO))
    assert all(same_bits(g, w).all() for g, w in zip(got, want))
