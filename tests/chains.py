"""Random query chains for property tests: real lambdas written to a real module file.

Lambdas are read from source, so a generated chain is written as Python text into a module
under a temp directory and imported; `linecache` then finds it like any user file. The
generator keeps each lambda inside one kind (int, float or bool) so chains stay well typed,
and avoids operations whose plain-Python evaluation raises (int(nan), math domain errors).
"""
from __future__ import annotations

import hashlib
import math
import importlib.util
import os
import sys
import tempfile
import warnings

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

MODULE_DIR = tempfile.mkdtemp(prefix="qc_chains_")

INT_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
FLOAT_DTYPES = ["float16", "float32", "float64"]
ALL_DTYPES = INT_DTYPES + FLOAT_DTYPES + ["bool"]


def kind_of(dtype: str) -> str:
    return "bool" if dtype == "bool" else ("float" if dtype.startswith("float") else "int")


@st.composite
def expr(draw, kind: str, depth: int = 0, unsigned: bool = False) -> str:
    """A Python expression over `v` that keeps `kind` (constant-only sub-expressions are
    avoided: Python would evaluate them with its own int semantics, e.g. 7 // 0 raises)."""
    leaf = depth >= 2 or draw(st.booleans())
    if kind == "bool":
        if leaf:
            return draw(st.sampled_from(["v", "(not v)", "True"]))
        a, b = draw(expr("bool", depth + 1)), draw(expr("bool", depth + 1))
        return draw(st.sampled_from([f"({a} & {b})", f"({a} | {b})", f"({a} ^ {b})", f"({a} == {b})"]))
    consts = (["1", "2", "3", "7"] + ([] if unsigned else ["-1"]) if kind == "int"
              else ["2.0", "0.5", "-1.5", "1000.0", "3"])
    if leaf:
        return draw(st.sampled_from(["v", "v", "v", draw(st.sampled_from(consts))]))
    a, b = draw(expr(kind, depth + 1, unsigned)), draw(expr(kind, depth + 1, unsigned))
    if "v" not in a and "v" not in b:
        a = "v"
    ops = [f"({a} + {b})", f"({a} - {b})", f"({a} * {b})", f"({a} // {b})", f"({a} % {b})",
           f"abs({a})", f"max({a}, {b})", f"min({a}, {b})"]
    if "v" in a:            # -(constant) is a negative literal: out of range for unsigned
        ops.append(f"(-{a})")
    if "v" in a and "v" in b:   # both branches NumPy-typed, as the typed kernels assume
        ops.append(f"({a} if {a} > {b} else {b})")
    if kind == "int":
        ops += [f"({a} & {b})", f"({a} | {b})", f"({a} ^ {b})"]
    else:
        # (sqrt and floor are exact in every libm; tanh and friends are not: TRANSCENDENTAL)
        ops += [f"({a} / {b})", f"np.sqrt(abs({a}))", f"np.floor({a})"]
    return draw(st.sampled_from(ops))


@st.composite
def predicate(draw, kind: str, unsigned: bool = False) -> str:
    if kind == "bool":
        return draw(st.sampled_from(["v", "not v"]))
    a = draw(expr(kind, 1, unsigned))
    if "v" not in a:
        a = "v"
    c = draw(st.sampled_from(["0", "1", "5", "-2"] if kind == "int" else ["0.0", "1000.0", "-0.5"]))
    return draw(st.sampled_from([f"{a} > {c}", f"{a} <= {c}", f"{a} != {c}", f"-3 < {a} < 50"]))


# Casts that change the element kind. Only NumPy casts and bool(): a Python int or float
# (int(v), float(v)) would make the oracle raise ZeroDivisionError on x // 0 where NumPy
# scalars give 0 / inf, and float -> int of NaN/inf is undefined in NumPy too.
CASTS = {
    "int": [("float", "np.float64(v)"), ("float", "np.float32(v)"), ("float", "np.float16(v)"),
            ("bool", "bool(v)"), ("int", "np.int16(v)")],
    "float": [("float", "np.float64(v)"), ("float", "np.float32(v)"), ("bool", "bool(v)")],
    "bool": [("int", "np.int64(v)"), ("float", "np.float32(v)"), ("int", "np.uint8(v)")],
}
# Functions whose results may differ by a few ulp between libms (DESIGN.md section 4: "the
# dialect's documented ulp"): never compared exactly across implementations.
TRANSCENDENTAL = ["np.tanh({})", "np.exp({} / 1000)", "np.sin({})", "np.log1p(abs({}))"]


@st.composite
def chain(draw, dtype: str, transcendental: bool = False):
    """[(op, lambda text)] of 1..3 select/where/cast steps; each lambda keeps its kind."""
    kind, unsigned = kind_of(dtype), dtype.startswith("uint")
    steps = []
    for _ in range(draw(st.integers(1, 3))):
        step = draw(st.sampled_from(["where", "select", "select", "cast"]))
        if step == "where":
            steps.append(("where", f"lambda v: {draw(predicate(kind, unsigned))}"))
        elif step == "cast":
            kind, text = draw(st.sampled_from(CASTS[kind]))
            unsigned = text == "np.uint8(v)"
            steps.append(("select", f"lambda v: {text}"))
        elif transcendental and kind == "float" and draw(st.booleans()):
            fn, e = draw(st.sampled_from(TRANSCENDENTAL)), draw(expr(kind, 1, unsigned))
            steps.append(("select", f"lambda v: {fn.format(e if 'v' in e else 'v')}"))
        else:
            # a constant result would make later lambdas fold constants with Python's own
            # semantics (2 // 0 raises there), so every select reads v
            e = draw(expr(kind, 0, unsigned))
            steps.append(("select", f"lambda v: {e if 'v' in e else 'v'}"))
    return steps


def edge_values(dtype: str) -> list:
    if dtype == "bool":
        return [True, False]
    if dtype.startswith("float"):
        fi = np.finfo(dtype)
        return [0.0, -0.0, 1.0, -1.0, float("nan"), float("inf"), float("-inf"), float(fi.max),
                float(fi.min), float(fi.tiny), 1000.5, -7.0]
    ii = np.iinfo(dtype)
    return [0, 1, -1 if ii.min < 0 else 2, int(ii.min), int(ii.max), 7, -7 if ii.min < 0 else 9]


@st.composite
def arrays(draw, dtype: str, max_size: int = 40):
    size = draw(st.integers(0, max_size))
    edges = edge_values(dtype)
    if dtype.startswith("float"):
        elements = st.one_of(st.sampled_from(edges), st.floats(-3000, 3000, width=np.dtype(dtype).itemsize * 8))
    else:
        elements = st.one_of(st.sampled_from(edges), hnp.from_dtype(np.dtype(dtype)))
    return np.array(draw(st.lists(elements, min_size=size, max_size=size)), dtype=dtype)


def load_lambdas(texts: list[str]) -> list:
    """Write the lambdas into a module file (named by content hash), import it, return them."""
    body = "import math\nimport numpy as np\n\nFNS = [\n" + "".join(f"    {t},\n" for t in texts) + "]\n"
    name = "qc_chain_" + hashlib.sha256(body.encode()).hexdigest()[:16]
    if name in sys.modules:
        return sys.modules[name].FNS
    path = os.path.join(MODULE_DIR, name + ".py")
    with open(path, "w") as fh:
        fh.write(body)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod.FNS


# The builtins min/max act as np.minimum/np.maximum in the lambda language (NaN propagates,
# NumPy promotion), unlike Python's, so the oracle evaluates the lambdas with those bound.
ORACLE_GLOBALS = {"np": np, "math": math, "min": np.minimum, "max": np.maximum}


def oracle_lambdas(texts: list[str]) -> list:
    return [eval(t, dict(ORACLE_GLOBALS)) for t in texts]


def python_oracle(x: np.ndarray, steps: list) -> list:
    """Plain Python: call the lambdas on NumPy scalars, element by element."""
    fns = oracle_lambdas([t for _, t in steps])
    out = []
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        for item in x:
            v, keep = item, True
            for (op, _), f in zip(steps, fns):
                if op == "select":
                    v = f(v)
                elif not f(v):
                    keep = False
                    break
            if keep:
                out.append(v)
    return out
