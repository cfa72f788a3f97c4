"""Issue 33 item 3: distinct counts. `q.count_distinct(f=None)` and `qc.count_distinct(f)` in
agg / group_by(...).agg: SQL COUNT(DISTINCT f), polars n_unique, pandas nunique(dropna=False).

Equality is distinct()'s (all NaNs one value, -0.0 == 0.0): the oracle is plain Python over
canonical values (NaN -> one token, -0.0 -> 0.0), and q.count_distinct(f) must equal
len(q.distinct(f).to_array()) on every backend; per group, pandas nunique(dropna=False).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import querycompute as qc

SETTINGS = dict(deadline=None, max_examples=15,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
BACKENDS = ["numpy"] + [b for b in ("cpu", "opencl", "webgpu", "cuda") if qc.backends()[b]["available"]]
# WebGPU has no 64-bit values (DialectCaps int64/float64): its tests use 32-bit columns.
NARROW = {"webgpu"}


def _canon(v):
    v = v.item() if hasattr(v, "item") else v
    if isinstance(v, float) and math.isnan(v):
        return "nan"
    return v + 0 if not isinstance(v, bool) else v      # -0.0 + 0 == 0.0


def distinct_oracle(values) -> int:
    return len({_canon(v) if not isinstance(v, tuple) else tuple(map(_canon, v)) for v in values})


def _dtypes(backend):
    return ("int32", "float32") if backend in NARROW else ("int64", "float64")


# ---- the terminal ---------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_item3_terminal_matches_distinct_and_python(backend):
    idt, fdt = _dtypes(backend)
    x = np.array([3.0, -0.0, 0.0, np.nan, 1.5, np.nan, -2.0, 3.0, np.inf, -np.inf], fdt)
    k = np.array([1, 2, 1, 3, 2, 2, -7, 7, 2 ** 31 - 1, -2 ** 31], idt)
    q = qc.query(x).on(backend)
    n = q.count_distinct()
    assert type(n) is np.int64
    assert n == distinct_oracle(list(x)) == len(q.distinct().to_array()) == 7
    assert qc.query(x).on(backend).count_distinct(lambda v: v * v) == distinct_oracle(list(x * x))
    t = qc.query(k=k, x=x).on(backend)
    pairs = list(zip(k.tolist(), x.tolist()))
    got = t.count_distinct(lambda r: (r.k % 2, r.x))
    assert got == distinct_oracle([(a % 2, b) for a, b in pairs]) == \
        len(t.distinct(lambda r: (r.k % 2, r.x)).to_array()["k"])
    assert qc.query(np.zeros(0, fdt)).on(backend).count_distinct() == 0
    assert qc.query(x).on(backend).where(lambda v: v > 100).count_distinct() == 1    # inf


def test_item3_text_lambda_and_trace():
    x = np.arange(-20, 30, dtype=np.int64)
    q = qc.query(x).on("cpu")
    assert q.count_distinct("lambda v: v % 7") == 7
    trace = qc.last_trace()
    # what ran: the distinct's hash sets (first-occurrence flags), then the count pass
    assert any("distinct" in k.name for k in trace.kernels), str(trace)
    text = q.explain("cpu", qc.count_distinct(lambda v: v % 7))
    assert "runs as distinct(f).count()" in text and "hash sets" in text
    assert q.compile(qc.count_distinct(lambda v: v % 7))() == 7


@settings(**SETTINGS)
@given(st.lists(st.sampled_from([0.0, -0.0, 1.0, -1.0, float("nan"), 1e308, -1e308, 5e-324,
                                 float("inf"), 2.5]) | st.floats(allow_nan=True), max_size=40))
def test_item3_hypothesis_floats(values):
    x = np.array(values, np.float64)
    want = distinct_oracle(values)
    for backend in ("numpy", "cpu"):
        assert qc.query(x).on(backend).count_distinct() == want
    if "opencl" in BACKENDS:
        assert qc.query(x).on("opencl").count_distinct() == want


# ---- inside agg -----------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_item3_agg_with_other_aggregates(backend):
    idt, fdt = _dtypes(backend)
    k = np.array([5, 1, 5, -3, 1, 1, 5, 9], idt)
    x = np.array([1.0, np.nan, -0.0, 0.0, np.nan, 2.0, 1.0, 0.0], fdt)
    q = qc.query(k=k, x=x).on(backend)
    got = q.agg(s=qc.sum(lambda r: r.k), n=qc.count_distinct(lambda r: r.x), c=qc.count,
                nk=qc.count_distinct(lambda r: r.k))
    assert list(got) == ["s", "n", "c", "nk"]
    assert got["s"] == k.sum() and got["c"] == 8
    assert got["n"] == 4 and got["nk"] == 4 and type(got["n"]) is np.int64
    trace = qc.last_trace()
    assert {k.name.split(":")[0] for k in trace.kernels} >= {"n", "nk"}
    assert qc.query(k=k[:0], x=x[:0]).on(backend).agg(n=qc.count_distinct(lambda r: r.x),
                                                       m=qc.max(lambda r: r.x, default=-1)) == {"n": 0, "m": -1}


def _pandas_nunique(keys, vals) -> dict:
    s = pd.DataFrame({"k": keys, "v": vals}).groupby("k", dropna=False, sort=True)["v"]
    return s.nunique(dropna=False)


@pytest.mark.parametrize("backend", BACKENDS)
def test_item3_grouped_against_pandas(backend):
    idt, fdt = _dtypes(backend)
    rng = np.random.default_rng(33)
    keys = rng.integers(-4, 4, 300).astype(idt)
    vals = rng.choice(np.array([0.0, -0.0, np.nan, 1.0, -1.0, 3.5, np.inf], fdt), 300)
    q = qc.query(k=keys, v=vals).on(backend)
    got = q.group_by(lambda r: r.k).agg(n=qc.count_distinct(lambda r: r.v),
                                        total=qc.sum(lambda r: r.k), c=qc.count)
    want = _pandas_nunique(keys, vals)
    assert list(got) == ["key", "n", "total", "c"]
    assert got["key"].tolist() == want.index.tolist()
    assert got["n"].dtype == np.int64 and got["n"].tolist() == want.tolist()
    assert got["c"].tolist() == pd.Series(keys).value_counts().sort_index().tolist()
    # a tuple-valued f counts distinct tuples; the shorthand counts distinct elements
    t = q.group_by(lambda r: r.k).count_distinct(lambda r: (r.v, r.k % 2))
    assert t["count_distinct"].tolist() == want.tolist()
    e = qc.query(keys).on(backend).group_by(lambda v: v % 3).count_distinct()
    assert e["count_distinct"].tolist() == \
        pd.Series(keys).groupby(keys % 3).nunique().tolist()
    empty = qc.query(k=keys[:0], v=vals[:0]).on(backend).group_by(lambda r: r.k).agg(
        n=qc.count_distinct(lambda r: r.v), c=qc.count)
    assert len(empty["key"]) == len(empty["n"]) == 0 and empty["n"].dtype == np.int64


@settings(**SETTINGS)
@given(st.lists(st.tuples(st.sampled_from([0.0, -0.0, float("nan"), 1.0, -5.0]),
                          st.sampled_from([0.0, -0.0, float("nan"), 2.0, 1e300, -1e300])),
                max_size=30))
def test_item3_hypothesis_grouped_nan_keys(rows):
    keys = np.array([r[0] for r in rows], np.float64)
    vals = np.array([r[1] for r in rows], np.float64)
    want = _pandas_nunique(keys, vals)
    for backend in ("numpy", "cpu"):
        got = qc.query(k=keys, v=vals).on(backend).group_by(lambda r: r.k).agg(
            n=qc.count_distinct(lambda r: r.v), s=qc.count)
        # groups: NaN keys are one group, sorted last (as pandas' dropna=False)
        assert got["n"].tolist() == want.tolist()
        assert got["s"].sum() == len(rows)


def test_item3_text_lambdas_grouped_and_errors():
    x = np.arange(-50, 50, dtype=np.int64)
    got = qc.query(x).on("cpu").group_by("lambda v: v % 3").agg(n=qc.count_distinct("lambda v: v % 7"))
    want = pd.Series(x % 7).groupby(x % 3).nunique()
    assert got["n"].tolist() == want.tolist()
    with pytest.raises(qc.QueryError, match="both be Python functions or both lambdas as text"):
        qc.query(x).group_by(lambda v: v % 3).agg(n=qc.count_distinct("lambda v: v % 7"))
    with pytest.raises(TypeError, match="qc.count_distinct takes a function"):
        qc.count_distinct(3)
    with pytest.raises(qc.QueryError, match="runs as several plans"):
        qc.query(x).compile(qc.agg(n=qc.count_distinct, s=qc.sum))


def test_item3_composed_key_reads_captured_values_each_call():
    x = np.arange(-30, 30, dtype=np.int64)
    q = qc.query(x).on("cpu")
    m, d = 3, 5

    def per_group():                # the same lambdas (code objects) on every call
        return q.group_by(lambda v: v % m).agg(n=qc.count_distinct(lambda v: v // d))["n"].tolist()
    assert per_group() == pd.Series(x // 5).groupby(x % 3).nunique().tolist()
    m, d = 4, 7                     # captured values are kernel parameters: no stale kernel
    assert per_group() == pd.Series(x // 7).groupby(x % 4).nunique().tolist()


def test_item3_grouped_explain_names_every_part():
    k = np.array([1, 2, 1], np.int64)
    g = qc.query(k=k, v=k * 2).group_by(lambda r: r.k)
    text = g.explain("cpu", n=qc.count_distinct(lambda r: r.v), s=qc.sum(lambda r: r.v))
    assert "part 1/2: the other aggregates in one pass" in text
    assert "part 2/2: n: count_distinct(lambda r: r.v) runs as distinct((key, f)) with key = lambda r: r.k" in text
    assert "distinct: first-occurrence flags of 2 key columns" in text


# ---- Dask -----------------------------------------------------------------------------------
def test_item3_dask_array_and_dataframe():
    da = pytest.importorskip("dask.array")
    dd = pytest.importorskip("dask.dataframe")
    base = np.array([1, 2, 2, 3, 3, 3, 4, 4, 4, 4, -1, 0] * 3, np.int64)
    x = da.from_array(base, chunks=7)                       # 6 chunks: sets merged, not summed
    assert qc.query(x).count_distinct() == 6
    assert qc.query(x).count_distinct(lambda v: v % 3) == 3
    got = qc.query(x).group_by(lambda v: v % 2).agg(n=qc.count_distinct(), s=qc.sum)
    assert got["n"].tolist() == pd.Series(base).groupby(base % 2).nunique().tolist()
    assert got["s"].tolist() == pd.Series(base).groupby(base % 2).sum().tolist()
    lazy = qc.query(x).agg(n=qc.count_distinct(), s=qc.sum, compute=False)
    assert lazy.compute() == {"n": 6, "s": base.sum()}
    vals = np.array([0.5, np.nan, -0.0, 0.0, 0.5, np.nan] * 6)
    frame = pd.DataFrame({"k": base % 4, "v": vals})
    df = dd.from_pandas(frame, npartitions=3)
    got = qc.query(df).group_by(lambda r: r.k).agg(n=qc.count_distinct(lambda r: r.v))
    assert got["n"].tolist() == frame.groupby("k")["v"].nunique(dropna=False).tolist()


# ---- the cpu's two-word hash sets (a (group key, value) pair of 64-bit values) ------------------
@pytest.mark.parametrize("n", [0, 7, 3 * (1 << 16) + 5])        # serial, parallel partitions
def test_item3_cpu_two_word_hash_sets(n):
    from querycompute._codegen.ir.stage_specs import SortSpec
    from querycompute.backends.cpu.cpu_stages import CpuStages, key_words
    from querycompute.backends.stage_runtime import NumpyStages
    rng = np.random.default_rng(n)
    a = rng.integers(-2 ** 63, 2 ** 63 - 1, 50, dtype=np.int64, endpoint=True)[rng.integers(0, 50, n)]
    b = np.array([0.0, -0.0, np.nan, -np.nan, 1e308, -5e-324, np.inf], np.float64)[rng.integers(0, 7, n)]
    spec = SortSpec(("int64", "float64"), (False, False), "qc_cd")
    assert key_words(spec.key_dtypes) == ((0,), (1,))
    rows: list = []
    got = CpuStages().first_occurrence(spec, [a, b], rows)
    assert np.array_equal(got, NumpyStages().first_occurrence(spec, [a, b], []))
    if n:
        assert any(r.name.startswith("qc_cd_distinct_") for r in rows) and \
            not any("radix" in r.name for r in rows), rows
    k = qc.query(k=a, v=b).on("cpu").group_by(lambda r: r.k).agg(n=qc.count_distinct(lambda r: r.v))
    assert k["n"].tolist() == _pandas_nunique(a, b).tolist()
    assert "two 64-bit words" in qc.query(k=a, v=b).on("cpu").group_by(lambda r: r.k).explain(
        "cpu", n=qc.count_distinct(lambda r: r.v))


# ---- a first field already in order: distinct within its runs (cpu) ------------------------------
@pytest.mark.parametrize("case", ["short runs", "long run", "unsorted", "one chunk", "floats"])
def test_issue29_cpu_distinct_in_runs_of_a_sorted_first_field(case):
    """A (group key, f) tuple whose group key ascends (lines sorted by their order key):
    distinct_runs compares each row with the earlier rows of its run (runs across chunk
    boundaries); a run over RUN_MAX rows or a descent anywhere takes the hash sets; the flags
    equal the numpy reference's, and the per-group counts pandas'."""
    from querycompute._codegen.ir.stage_specs import SortSpec
    from querycompute.backends.cpu.cpu_stages import CpuStages
    from querycompute.backends.stage_runtime import NumpyStages
    rng = np.random.default_rng(len(case))
    n = 7 if case == "one chunk" else 3 * (1 << 16) + 5
    a = np.sort(rng.integers(0, n // 4, n))
    b = rng.integers(0, 6, n).astype(np.int32)
    if case == "long run":
        a[1000:1100] = a[1000]                       # 100 equal keys: over RUN_MAX
        a = np.sort(a)
    if case == "unsorted":
        a[-1], a[0] = a[0], a[-1]
    if case == "floats":
        a = np.sort(np.concatenate([a[: n - 4] / 3.0, [np.nan, np.nan, 0.0, -0.0]]))
        b = np.array([0.0, -0.0, np.nan, 1.5])[rng.integers(0, 4, n)]
    spec = SortSpec((str(a.dtype), str(b.dtype)), (False, False), "qc_cd")
    rows: list = []
    got = CpuStages().first_occurrence(spec, [a, b], rows)
    assert np.array_equal(got, NumpyStages().first_occurrence(spec, [a, b], []))
    names = [r.name for r in rows]
    hashed = any("distinct_sets" in x for x in names)
    assert any("distinct_runs" in x for x in names), names
    assert hashed == (case in ("long run", "unsorted")), names
    k = qc.query(k=a, v=b).on("cpu").group_by(lambda r: r.k).agg(n=qc.count_distinct(lambda r: r.v))
    assert k["n"].tolist() == _pandas_nunique(a, b).tolist()
