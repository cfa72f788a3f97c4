"""Workloads W1-W6 (DESIGN.md section 8): their input data, the querycompute query and the
NumPy version a user would write, plus the check that decides whether a result is right.

Every implementation, ours or a peer's, is a *setup* function: setup(data) -> a callable with
no arguments that computes the result. Setup does what a user does once (build a polars frame,
define the query); the callable is what gets timed.

The lambdas live in this file because querycompute reads them from source.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

# Benchmarks time kernels: the first call compiles, so warm samples never time the numpy tier
# that tiered execution would put in front of a kernel still compiling. (cold_start.py, which
# measures the tiered first call itself, sets QUERYCOMPUTE_TIERED for its processes.)
os.environ.setdefault("QUERYCOMPUTE_TIERED", "0")

import querycompute as qc  # noqa: E402


@dataclass(frozen=True)
class Workload:
    key: str                 # "W1"
    title: str               # the query, as DESIGN.md writes it
    kind: str                # how to compare results: "sum", "count", "array" or "agg"
    make: Callable[[int, np.random.Generator], dict]
    querycompute: Callable[[dict, str], Callable[[], Any]]   # (data, backend) -> run
    numpy: Callable[[dict], Callable[[], Any]]


def _uniform(n: int, rng: np.random.Generator) -> np.ndarray:
    # float32 uniform in [0, 2000): the distribution every workload uses unless it says otherwise
    return rng.random(n, dtype=np.float32) * np.float32(2000)


def _one_array(n, rng):
    return {"x": _uniform(n, rng)}


def _two_arrays(n, rng):
    return {"a": _uniform(n, rng), "b": _uniform(n, rng)}


def _orders(n, rng):
    return {"price": _uniform(n, rng),
            "qty": rng.integers(0, 10, n, dtype=np.int32),
            "cat": rng.integers(0, 8, n, dtype=np.int32)}


def input_bytes(data: dict) -> int:
    """Bytes of input a pass must read: the denominator of every GB/s figure."""
    return sum(a.nbytes for a in data.values())


# ---- querycompute ---------------------------------------------------------------------------
def qc_w1(d, backend):
    q = (qc.query(d["x"]).select(lambda v: v * 2).where(lambda v: v > 1000)
         .select(lambda v: v + 100).on(backend))
    return q.sum


def qc_w2(d, backend):
    q = qc.query(d["x"]).where(lambda v: v % 3 < 1).select(lambda v: v * 2 + 1).on(backend)
    return q.to_array


def qc_w3(d, backend):
    q = qc.query(d["x"]).on(backend)
    return lambda: q.count(lambda v: 500 < v < 1500)


def qc_w4(d, backend):
    q = qc.query(d["a"], d["b"]).select(lambda a, b: a * b + 1).on(backend)
    return q.sum


def qc_w5(d, backend):
    q = qc.query(d["x"]).where(lambda v: v > 10).select(lambda v: np.sqrt(v) + 1).on(backend)

    def run():
        r = q.agg(mean=qc.mean, peak=qc.max)
        return (r["mean"], r["peak"])
    return run


def qc_w6(d, backend):
    q = qc.query(d).where(lambda r: r.cat == 3 and r.qty > 2).on(backend)
    return lambda: q.sum(lambda r: r.price * r.qty)


# ---- querycompute, the whole chain written inline (built anew on every call) -----------------
# What a user writes in a loop or a notebook cell: the per-call cost of building the Query,
# finding its kernel and launching it decides small-n speed (issue 12's n = 1e3 target).
def inline_w1(d, backend):
    x = d["x"]
    return lambda: (qc.query(x).select(lambda v: v * 2).where(lambda v: v > 1000)
                    .select(lambda v: v + 100).on(backend).sum())


def inline_w2(d, backend):
    x = d["x"]
    return lambda: qc.query(x).where(lambda v: v % 3 < 1).select(lambda v: v * 2 + 1).on(backend).to_array()


def inline_w3(d, backend):
    x = d["x"]
    return lambda: qc.query(x).on(backend).count(lambda v: 500 < v < 1500)


def inline_w4(d, backend):
    a, b = d["a"], d["b"]
    return lambda: qc.query(a, b).select(lambda a, b: a * b + 1).on(backend).sum()


def inline_w5(d, backend):
    x = d["x"]

    def run():
        r = (qc.query(x).where(lambda v: v > 10).select(lambda v: np.sqrt(v) + 1).on(backend)
             .agg(mean=qc.mean, peak=qc.max))
        return (r["mean"], r["peak"])
    return run


def inline_w6(d, backend):
    return lambda: (qc.query(d).where(lambda r: r.cat == 3 and r.qty > 2).on(backend)
                    .sum(lambda r: r.price * r.qty))


INLINE = {"W1": inline_w1, "W2": inline_w2, "W3": inline_w3, "W4": inline_w4, "W5": inline_w5,
          "W6": inline_w6}


# ---- numpy, as a user writes it ------------------------------------------------------------
def np_w1(d):
    x = d["x"]

    def run():
        y = x * 2
        return (y[y > 1000] + 100).sum()
    return run


def np_w2(d):
    x = d["x"]
    return lambda: x[x % 3 < 1] * 2 + 1


def np_w3(d):
    x = d["x"]
    return lambda: int(np.count_nonzero((x > 500) & (x < 1500)))


def np_w4(d):
    a, b = d["a"], d["b"]
    return lambda: (a * b + 1).sum()


def np_w5(d):
    x = d["x"]

    def run():
        y = np.sqrt(x[x > 10]) + 1
        return (y.mean(), y.max())
    return run


def np_w6(d):
    price, qty, cat = d["price"], d["qty"], d["cat"]

    def run():
        m = (cat == 3) & (qty > 2)
        return (price[m] * qty[m]).sum()
    return run


WORKLOADS = {w.key: w for w in [
    Workload("W1", "select(v*2).where(v>1000).select(v+100).sum()", "sum", _one_array, qc_w1, np_w1),
    Workload("W2", "where(v%3<1).select(v*2+1).to_array()", "array", _one_array, qc_w2, np_w2),
    Workload("W3", "count(500<v<1500)", "count", _one_array, qc_w3, np_w3),
    Workload("W4", "zip(a,b).select(a*b+1).sum()", "sum", _two_arrays, qc_w4, np_w4),
    Workload("W5", "where(v>10).select(sqrt(v)+1) agg(mean, max)", "agg", _one_array, qc_w5, np_w5),
    Workload("W6", "table.where(cat==3 and qty>2).sum(price*qty)", "sum", _orders, qc_w6, np_w6),
]}

# Relative tolerance for float sums and means. Sums may reassociate, so bits can differ; 1e-5 is
# ~100 float32 ulps: loose enough for any tree/pairwise order, tight enough to catch a naive
# sequential float32 accumulator (about 1e-4 off at n = 1e6) or a float32 result where NumPy
# promotes to float64.
RTOL = {"float32": 1e-5, "float64": 1e-9}


def _close(got, ref) -> tuple[bool, float]:
    ref_f, got_f = float(ref), float(got)
    if np.isnan(ref_f):
        return bool(np.isnan(got_f)), 0.0
    if np.isinf(ref_f):                   # (a float16 sum past 65504, as NumPy's overflows)
        return got_f == ref_f, 0.0
    err = abs(got_f - ref_f) / max(abs(ref_f), 1e-300)
    rtol = RTOL.get(str(np.asarray(ref).dtype), 1e-9)
    return err <= rtol, err


def check(kind: str, got, ref) -> tuple[bool, str]:
    """(agrees with the NumPy reference, a short reason when it does not)."""
    if kind == "count":
        return (int(got) == int(ref), f"count {int(got)} != {int(ref)}")
    if kind == "array":
        got = np.asarray(got)
        if got.shape != ref.shape:
            return False, f"length {got.shape} != {ref.shape}"
        if got.dtype != ref.dtype:
            return False, f"dtype {got.dtype} != {ref.dtype}"
        # elementwise float ops are bit-identical to NumPy by contract, so demand exact equality
        return bool(np.array_equal(got, ref, equal_nan=True)), "elements differ"
    if kind == "sum":
        ok, err = _close(got, ref)
        got_dt, ref_dt = np.asarray(got).dtype, np.asarray(ref).dtype
        dtypes = f" ({got_dt} result, numpy's is {ref_dt})" if got_dt != ref_dt else ""
        return ok, f"relative error {err:.1e}{dtypes}"
    if kind == "agg":
        ok_mean, err = _close(got[0], ref[0])
        ok_max = float(got[1]) == float(ref[1])
        return ok_mean and ok_max, f"mean rel. error {err:.1e}, max {got[1]} vs {ref[1]}"
    raise ValueError(f"unknown result kind {kind!r}; expected sum, count, array or agg")
