"""Run one element expression on every backend this machine can run, and compute what Python
computes on NumPy scalars (the oracle), for the issue-11 expression tests.

Backends: numpy, cpu (numba), opencl (pocl, when present), cuda (a real device, when present)
and the CUDA C / Metal kernels through the CPU harness (tests/harness), which execute the
generated source with g++.
Lambdas are given as text and written to a real module file (chains.load_lambdas), so the
frontend reads them from source like any user lambda.
"""
from __future__ import annotations

import functools
import math
import warnings

import numpy as np

import querycompute as qc
from chains import load_lambdas
from harness import runner
from harness.plans import run_pass
from querycompute._codegen.errors import UnsupportedType
from querycompute.run.engine import assemble
from querycompute.errors import UnsupportedTypeError
from querycompute.plan.plan import param_values

RUNNABLE = ["numpy", "cpu"] + [b for b in ("opencl", "cuda") if qc.backends()[b]["available"]]
# A real CUDA device (never in CI) replaces the harness's CUDA run: the same kernels, on the GPU.
HARNESS = [d for d in ("cuda", "metal") if d not in RUNNABLE] if runner.available()[0] else []
ALL = RUNNABLE + HARNESS


def harness_run(q, terminal, dialect: str):
    """What the cuda/metal backend returns: the plan's kernels, run on CPU threads."""
    lowered, req, cols, infos = q.lowered(terminal)
    params = param_values(lowered, infos, q._source) if lowered.bindings else ()
    raw = run_pass(lowered.pass_, dialect, cols, params)
    return assemble(lowered, raw, req)


def run(q, backend: str, terminal: str = "to_array"):
    """The terminal's result on `backend` (None: float64 on Metal, which has no double)."""
    if backend in HARNESS:
        try:
            return harness_run(q, terminal, backend)
        except UnsupportedType:
            return None
    return getattr(q.on(backend), terminal)()


# webgpu (lavapipe in CI) joins the element-expression comparisons wherever its types reach:
# a query WGSL can't hold (a 64-bit value) is refused with the type named, and left out of
# the results (tests/test_issue15_*.py test those errors).
WEBGPU = ["webgpu"] if qc.backends()["webgpu"]["available"] else []


def select_everywhere(x, text: str, backends=None) -> dict:
    """{backend: result} of `qc.query(x).select(<text>)` on each backend (`x` a tuple of
    arrays: a zip); by default every backend here, webgpu where the types fit WGSL."""
    (f,) = load_lambdas([text])
    q = qc.query(*x).select(f) if isinstance(x, tuple) else qc.query(x).select(f)
    out = {b: run(q, b) for b in (ALL if backends is None else backends)}
    for b in WEBGPU if backends is None else ():
        try:
            out[b] = q.on(b).to_array()
        except UnsupportedTypeError as exc:
            assert "64" in str(exc), exc          # only 64-bit values are refused
    return out


def oracle(x, text: str, globals_: dict | None = None) -> np.ndarray:
    """Python on NumPy scalars, element by element (`min`/`max` act as np.minimum/maximum,
    as in the lambda language)."""
    env = {"np": np, "math": math,
           "min": lambda *xs: functools.reduce(np.minimum, xs),
           "max": lambda *xs: functools.reduce(np.maximum, xs)}
    env.update(globals_ or {})
    f = eval(text, env)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        rows = [f(*v) if isinstance(x, tuple) else f(v) for v in (zip(*x) if isinstance(x, tuple) else x)]
    if rows and isinstance(rows[0], tuple):      # a tuple-valued lambda: one array per field
        return tuple(np.array(col) for col in zip(*rows))
    return np.array(rows)


def same_bits(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Element-wise: equal values with equal sign bits (any NaN equals any NaN)."""
    got, want = np.asarray(got), np.asarray(want)
    if got.dtype.kind != "f":
        return got == want
    both_nan = np.isnan(got) & np.isnan(want)
    return both_nan | ((got == want) & (np.signbit(got) == np.signbit(want)))


def assert_same_bits(got, want, context="") -> None:
    if isinstance(want, tuple):                  # tuple elements: field by field
        assert isinstance(got, tuple) and len(got) == len(want), (context, got)
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same_bits(g, w, f"{context} [field {i}]")
        return
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (context, got.dtype, want.dtype)
    ok = same_bits(got, want)
    assert ok.all(), f"{context}: at {np.flatnonzero(~ok)[:8]} got {got[~ok][:8]} want {want[~ok][:8]}"
