"""Issue 29 item 2: intersect_by / except_by (semi- and anti-joins by key) and a left join's
matched test (`b is None`, `b is not None`, `qc.matched(b)`), against plain Python on every
backend that runs here (numpy, cpu, opencl, webgpu with the dtypes WGSL has)."""
from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import querycompute as qc
from querycompute.errors import QueryError, UnsupportedLambdaError

SETTINGS = dict(deadline=None, max_examples=12,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
AVAILABLE = qc.backends()
BACKENDS = [b for b in ("numpy", "cpu", "opencl", "webgpu") if AVAILABLE[b]["available"]]
# webgpu: WGSL has no 64-bit values (its semi-join runs the numpy reference: no 64-bit counts)
KEY_DTYPE = {"webgpu": "float32"}
INT_DTYPE = {"webgpu": "int32"}


def same(a, b) -> bool:
    """The join's key equality: all NaNs one value, -0.0 == 0.0."""
    if isinstance(a, tuple):
        return all(same(x, y) for x, y in zip(a, b))
    a, b = float(a), float(b)
    return (math.isnan(a) and math.isnan(b)) or a == b


def py_semi(left: list, keys: list, right_keys: list, anti: bool) -> list:
    """LINQ's IntersectBy / ExceptBy by key, this side's duplicates kept."""
    return [v for v, k in zip(left, keys) if any(same(k, r) for r in right_keys) != anti]


def as_floats(values) -> list:
    return [float(v) for v in values]


def equal_lists(got, want) -> bool:
    return len(got) == len(want) and all(same(g, w) for g, w in zip(got, want))


KEYS = st.sampled_from([0.0, -0.0, 1.5, 2.0, 7.0, np.nan])


@pytest.mark.parametrize("backend", BACKENDS)
@given(data=st.data(), anti=st.booleans())
@settings(**SETTINGS)
def test_semi_and_anti_join_match_plain_python(backend, data, anti):
    """Duplicates on both sides, empty sides, NaN and -0.0 keys; this side's order kept, the
    other side's duplicates never duplicate a row; a where before and after it."""
    fd = KEY_DTYPE.get(backend, "float64")
    lk = np.array(data.draw(st.lists(KEYS, max_size=14)), dtype=fd)
    rk = np.array(data.draw(st.lists(KEYS, max_size=10)), dtype=fd)
    lv = np.arange(len(lk), dtype=INT_DTYPE.get(backend, "int64")) * 3 - 5
    left = qc.query(k=lk, v=lv).on(backend)
    right = qc.query(k=rk)
    op = left.except_by if anti else left.intersect_by
    got = op(right, lambda r: r.k, lambda o: o.k).select(lambda r: r.v).to_list()
    want = py_semi(lv.tolist(), lk.tolist(), rk.tolist(), anti)
    assert got == want
    # a where on each side of it, the other side with operators of its own
    pre = left.where(lambda r: r.v != 1)
    got = ((pre.except_by if anti else pre.intersect_by)(right.where(lambda o: o.k == o.k), lambda r: r.k,
                                                          lambda o: o.k)
           .where(lambda r: r.v >= -5).select(lambda r: r.v).to_list())
    nonnan = [k for k in rk.tolist() if k == k]
    want = [v for v in py_semi(lv.tolist(), lk.tolist(), nonnan, anti) if v != 1]
    assert got == want


@pytest.mark.parametrize("backend", BACKENDS)
@given(data=st.data(), anti=st.booleans())
@settings(**SETTINGS)
def test_tuple_keys_and_integer_keys(backend, data, anti):
    """Two-field keys (tuples compared item by item) of integer columns of different dtypes
    (compared in their common type), negative values; the elements are records and stay records."""
    it = INT_DTYPE.get(backend, "int64")
    small = st.integers(-3, 3)
    n = data.draw(st.integers(0, 12))
    m = data.draw(st.integers(0, 8))
    la = np.array(data.draw(st.lists(small, min_size=n, max_size=n)), dtype=it)
    lb = np.array(data.draw(st.lists(small, min_size=n, max_size=n)), dtype="int16")
    ra = np.array(data.draw(st.lists(small, min_size=m, max_size=m)), dtype="int16")
    rb = np.array(data.draw(st.lists(small, min_size=m, max_size=m)), dtype=it)
    left = qc.query(a=la, b=lb).on(backend)
    op = left.except_by if anti else left.intersect_by
    q = op(qc.query(a=ra, b=rb), lambda r: (r.a, r.b), lambda o: (o.a, o.b))
    got = q.to_list()
    rows = [{"a": a, "b": b} for a, b in zip(la.tolist(), lb.tolist())]
    want = py_semi(rows, list(zip(la.tolist(), lb.tolist())), list(zip(ra.tolist(), rb.tolist())), anti)
    assert got == want
    assert q.count() == len(want)
    assert q.select(lambda r: r.a * 10 + r.b).to_list() == [r["a"] * 10 + r["b"] for r in want]


@pytest.mark.parametrize("backend", BACKENDS)
def test_it_chains_after_and_before_every_kind_of_operator(backend):
    """order_by, distinct, take, scan and a join before it; order_by, group_by, distinct and
    terminals after it (one plan: the flags filter the next pass)."""
    it = INT_DTYPE.get(backend, "int64")
    x = np.array([5, 3, 9, 3, -1, 7, 5, 0, 12, -4], dtype=it)
    ok = qc.query(np.array([3, 5, 12, -4, 3], dtype=it))
    q = qc.query(x).on(backend)
    member = lambda v: v in {3, 5, 12, -4}  # noqa: E731  (plain Python's answer)

    assert q.order_by().intersect_by(ok, lambda v: v, lambda o: o).to_list() == sorted(v for v in x.tolist() if member(v))
    assert q.distinct().except_by(ok, lambda v: v, lambda o: o).to_list() == [9, -1, 7, 0]
    assert q.take(4).intersect_by(ok, lambda v: v, lambda o: o).to_list() == [5, 3, 3]
    assert q.scan(lambda a, v: a + v, 0, associative=True).intersect_by(ok, lambda v: v, lambda o: o).to_list() \
        == [v for v in np.cumsum(x).tolist() if member(v)]
    assert q.intersect_by(ok, lambda v: v, lambda o: o).order_by_descending().to_list() == sorted(
        (v for v in x.tolist() if member(v)), reverse=True)
    assert q.except_by(ok, lambda v: v, lambda o: o).sum() == sum(v for v in x.tolist() if not member(v))
    g = q.intersect_by(ok, lambda v: v, lambda o: o).group_by(lambda v: v).count()
    assert dict(zip(g["key"].tolist(), g["count"].tolist())) == {-4: 1, 3: 2, 5: 2, 12: 1}
    assert q.intersect_by(ok, lambda v: v, lambda o: o).intersect_by(
        qc.query(np.array([5, 12], dtype=it)), lambda v: v, lambda o: o).to_list() == [5, 5, 12]
    # after a join: its result's records
    tags = qc.query(k=np.array([3, 9, 0], dtype=it), t=np.array([30, 90, 0], dtype=it))
    got = (q.join(tags, lambda v: v, lambda t: t.k, lambda v, t: {"v": v, "t": t.t})
           .except_by(qc.query(np.array([9], dtype=it)), lambda r: r.v, lambda o: o)
           .select(lambda r: r.t).to_list())
    assert got == [30, 30, 0]
    assert q.where(lambda v: v > 100).intersect_by(ok, lambda v: v, lambda o: o).to_list() == []


@pytest.mark.parametrize("backend", BACKENDS)
def test_records_from_a_pandas_table(backend):
    pd = pytest.importorskip("pandas")
    it = INT_DTYPE.get(backend, "int64")
    orders = pd.DataFrame({"okey": np.array([1, 2, 3, 4, 5, 6], dtype=it),
                           "prio": np.array([1, 2, 1, 3, 2, 1], dtype=it),
                           "price": np.array([10, 20, 30, 40, 50, 60], dtype=KEY_DTYPE.get(backend, "float64"))})
    lines = pd.DataFrame({"okey": np.array([2, 2, 4, 9, 6, 6, 6], dtype=it),
                          "late": np.array([1, 0, 1, 1, 0, 1, 1], dtype=it)})
    late = qc.query(lines).where(lambda l: l.late == 1)
    # TPC-H Q4's shape: orders with a late line, counted per priority
    q = qc.query(orders).on(backend).intersect_by(late, lambda o: o.okey, lambda l: l.okey)
    assert q.select(lambda o: o.okey).to_list() == [2, 4, 6]
    g = q.group_by(lambda o: o.prio).agg(n=qc.count, s=qc.sum(lambda o: o.price))
    assert g["key"].tolist() == [1, 2, 3] and g["n"].tolist() == [1, 1, 1]
    assert g["s"].tolist() == [60.0, 20.0, 40.0]
    rest = qc.query(orders).on(backend).except_by(late, lambda o: o.okey, lambda l: l.okey)
    assert rest.to_list() == [{"okey": k, "prio": p, "price": float(c)} for k, p, c in
                              [(1, 1, 10), (3, 1, 30), (5, 2, 50)]]


@pytest.mark.parametrize("backend", BACKENDS)
def test_left_join_matched_flag(backend):
    """`b is None`, `b is not None` and qc.matched(b), per row; the unmatched row's fields
    keep their fill values; the flag in a where, a count and a group_by after the join."""
    it = INT_DTYPE.get(backend, "int64")
    fd = KEY_DTYPE.get(backend, "float64")
    a = qc.query(k=np.array([1, 2, 3, 2, 8], dtype=it), v=np.array([0.5, 1.5, 2.5, 3.5, 4.5], dtype=fd)).on(backend)
    b = qc.query(k=np.array([2, 5, 2, 1], dtype=it), w=np.array([10, 20, 30, 40], dtype=it),
                 f=np.array([1, 2, 3, 4], dtype=fd))
    q = a.left_join(b, lambda x: x.k, lambda y: y.k,
                    lambda x, y: (x.v, y.w, y.f, y is None, y is not None, qc.matched(y)))
    got = q.to_list()
    want = [(0.5, 40, 4.0, False, True, True), (1.5, 10, 1.0, False, True, True), (1.5, 30, 3.0, False, True, True),
            (2.5, 0, None, True, False, False), (3.5, 10, 1.0, False, True, True), (3.5, 30, 3.0, False, True, True),
            (4.5, 0, None, True, False, False)]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g[:2] == w[:2] and g[3:] == w[3:]
        assert math.isnan(g[2]) if w[2] is None else g[2] == w[2]
    # Q13's count(o_orderkey): the matched rows per key, no constant column carried
    counted = a.left_join(b, lambda x: x.k, lambda y: y.k, lambda x, y: {"k": x.k, "m": qc.matched(y)}) \
        .group_by(lambda r: r.k).agg(n=qc.sum(lambda r: r.m))
    assert dict(zip(counted["key"].tolist(), counted["n"].tolist())) == {1: 1, 2: 4, 3: 0, 8: 0}
    misses = a.left_join(b, lambda x: x.k, lambda y: y.k, lambda x, y: x.k if y is None else -1) \
        .where(lambda k: k >= 0).to_list()
    assert misses == [3, 8]
    # an empty other side: nothing matched
    empty = qc.query(k=np.zeros(0, dtype=it), w=np.zeros(0, dtype=it))
    assert a.left_join(empty, lambda x: x.k, lambda y: y.k, lambda x, y: qc.matched(y)).to_list() == [False] * 5


def test_matched_in_plain_python():
    assert qc.matched(None) is False and qc.matched(3) is True


def test_trace_and_explain_name_what_ran():
    """cpu: the join's hash table (join_build + join_member); a key the hash table can't pack
    (two float64 fields): the numpy reference, named by explain() and the trace."""
    x = np.arange(6, dtype=np.int64)
    other = qc.query(np.array([1, 4, 4], dtype=np.int64))
    q = qc.query(x).on("numpy").intersect_by(other, lambda v: v, lambda o: o)
    assert q.to_list() == [1, 4]
    assert "semi_join_sorted_probe" in [r.name for r in qc.last_trace().kernels]
    if AVAILABLE["cpu"]["available"]:
        q = qc.query(x).on("cpu").except_by(other, lambda v: v, lambda o: o)
        assert q.to_list() == [0, 2, 3, 5]
        names = [r.name for r in qc.last_trace().kernels]       # keys of a dense range: a bitmap
        assert "semi_member_dense_build" in names and "semi_member_dense_chunks_inline" in names
        spread = qc.query(x << 40).on("cpu").except_by(qc.query(other.to_array() << 40), lambda v: v,
                                                        lambda o: o)
        assert spread.to_list() == [0, 2 << 40, 3 << 40, 5 << 40]     # else the hash table
        names = [r.name for r in qc.last_trace().kernels]
        assert "semi_join_build" in names and "join_member_chunks_inline" in names
        text = q.explain()
        assert "except_by: the other query's key columns (run once)" in text
        assert "join_member" in text and "keep if (not " in text and "member_dense" in text
        f = np.array([0.5, 1.5, np.nan, 0.5])
        wide = qc.query(a=f, b=f).on("cpu").intersect_by(qc.query(a=f[:1], b=f[:1]), lambda r: (r.a, r.b),
                                                         lambda o: (o.a, o.b))
        assert wide.select(lambda r: r.a).to_list() == [0.5, 0.5]
        assert [r.dialect for r in qc.last_trace().kernels if "semi_join" in r.name] == ["numpy"]
        assert "numpy reference (ops/join/reference.semi_reference" in wide.explain()
    if AVAILABLE["opencl"]["available"]:
        q = qc.query(x).on("opencl").intersect_by(other, lambda v: v, lambda o: o)
        assert q.to_list() == [1, 4]
        names = [r.name for r in qc.last_trace().kernels]
        assert "qc_join_count" in names and "qc_join_gather_filled" in names
        assert "semi-join: the device hash join's build" in q.explain()
    if AVAILABLE["webgpu"]["available"]:
        xi = x.astype(np.int32)
        q = qc.query(xi).on("webgpu").intersect_by(qc.query(xi[1:3]), lambda v: v, lambda o: o)
        assert q.to_list() == [1, 2]
        assert [r.dialect for r in qc.last_trace().kernels if "semi_join" in r.name] == ["numpy"]
        assert "semi-join: the numpy reference on the host" in q.explain()


def test_errors_say_what_and_what_to_do():
    q = qc.query(np.arange(3))
    with pytest.raises(TypeError, match=r"intersect_by\(\) takes another Query .*got ndarray.*qc.query\(other\)"):
        q.intersect_by(np.arange(3), lambda a: a, lambda b: b)
    with pytest.raises(TypeError, match=r"except_by\(\) takes another Query"):
        q.except_by([1, 2], lambda a: a, lambda b: b)
    with pytest.raises(qc.InputTypeError, match=r"except_by\(\) other_key"):
        q.except_by(qc.query(np.arange(2)), lambda a: a, None)
    with pytest.raises(QueryError, match=r"intersect_by\(\) keys differ in arity: this side's key has 1 value, "
                                         r"the other's 2"):
        q.intersect_by(qc.query(a=np.arange(2), b=np.arange(2)), lambda a: a, lambda o: (o.a, o.b)).to_list()
    t = qc.query(k=np.arange(3), v=np.arange(3.0))
    with pytest.raises(UnsupportedLambdaError, match=r"test_issue29_semi_join.py:\d+:\d+: `y is None` tests "
                                                     r"whether a left join's row matched"):
        t.join(t, lambda x: x.k, lambda y: y.k, lambda x, y: y is None).to_list()
    with pytest.raises(UnsupportedLambdaError, match=r"qc.matched\(b\) tests whether a left join's row matched.*got x"):
        t.left_join(t, lambda x: x.k, lambda y: y.k, lambda x, y: qc.matched(x)).to_list()
    with pytest.raises(UnsupportedLambdaError, match="elements and fields are never None"):
        t.where(lambda r: r.v is not None).to_list()


def test_dask_refuses_it_clearly():
    da = pytest.importorskip("dask.array")
    x = da.from_array(np.arange(10), chunks=5)
    q = qc.query(x).intersect_by(qc.query(np.array([1, 2])), lambda v: v, lambda o: o)
    with pytest.raises(QueryError, match=r"intersect_by\(\) is not distributed over Dask chunks"):
        q.to_array()


ROOT = Path(__file__).resolve().parent.parent


def _section_blocks(path: Path, heading: str) -> list[str]:
    text = path.read_text()
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return re.findall(r"```python\n(.*?)```", text[start:end if end >= 0 else None], re.S)


@pytest.mark.parametrize("path,heading", [
    ("docs/guide.md", "## Semi- and anti-joins: intersect_by and except_by"),
    ("docs/guide.md", "## Joining: join and left_join"),
    ("docs/api.md", "## Inside a left join's result")])
def test_doc_examples_run(path, heading, tmp_path):
    """The guide's and the API page's examples, each block run alone from a file of its own
    (lambdas are read from their source file)."""
    blocks = _section_blocks(ROOT / path, heading)
    assert blocks
    for i, code in enumerate(blocks):
        f = tmp_path / f"block{i}.py"
        f.write_text(code)
        exec(compile(code, str(f), "exec"), {"__name__": f"block{i}"})  # noqa: S102  (the docs' own code)


# ---- GpuStages.semi_join driven directly: OpenCL (pocl), CUDA C and MSL through the harness -----------
def _semi_cases(rng):
    """(left keys, right keys): several tiles, both sides' sizes either way, a run of one key,
    no matches, empty sides, a two-field key."""
    from test_issue14_gpu_join import BIG, keys_of
    yield [keys_of(rng, "int32", BIG, 300)], [keys_of(rng, "int32", 200, 300)]
    yield [keys_of(rng, "int16", 300, 50)], [keys_of(rng, "int16", BIG, 50)]
    yield [keys_of(rng, "int32", 40, 1)], [keys_of(rng, "int32", 90, 1)]
    yield [keys_of(rng, "int32", 50)], [keys_of(rng, "int32", 20) + 1000]
    yield [keys_of(rng, "int32", 0)], [keys_of(rng, "int32", 9)]
    yield [keys_of(rng, "int32", 9)], [keys_of(rng, "int32", 0)]
    yield ([keys_of(rng, "int16", 200, 6), keys_of(rng, "float32", 200)],
           [keys_of(rng, "int16", 30, 6), keys_of(rng, "float32", 30)])


def _check_semi(stages, dialect: str) -> None:
    from querycompute._codegen.ops.join.reference import semi_reference
    rng = np.random.default_rng(29)
    for left, right in _semi_cases(rng):
        rows: list = []
        got = np.asarray(stages.semi_join(left, right, rows))
        want = semi_reference(left, right)
        assert got.dtype == np.bool_ and np.array_equal(got, want), (len(left[0]), len(right[0]))
        if len(left[0]) and len(right[0]):          # the device kernels ran, nothing on the host
            names = [r.name for r in rows]
            assert {r.dialect for r in rows} == {dialect} and "qc_join_count" in names, rows
            assert "qc_join_gather_filled" in names and "qc_join_pairs" not in names, names


def test_opencl_semi_join_flags_equal_the_reference(gpu):
    _check_semi(gpu, "opencl")


@pytest.mark.parametrize("dialect", ["cuda", "metal"])
def test_harness_semi_join_flags_equal_the_reference(dialect):
    from test_issue14_gpu_join import harness_stages
    _check_semi(harness_stages(dialect), dialect)


@pytest.mark.parametrize("anti", [False, True])
def test_a_much_larger_other_side_is_cut_to_its_keys_that_occur_here(anti):
    """cpu: an other side over SEMI_SHRINK times this side's rows is first cut to its keys that
    occur on this side (this side built, the other probed), then built as usual: the flags
    equal the reference's, duplicates on both sides, none matching, all matching."""
    from querycompute.backends.cpu.cpu_join import SEMI_SHRINK
    rng = np.random.default_rng(3)
    spread = 1 << 40            # keys far apart: no dense bitmap (test_a_dense_other_side_...)
    for this, other in ((rng.integers(0, 50, 40), rng.integers(0, 5000, 40 * SEMI_SHRINK * 3)),
                        (np.arange(10), np.arange(100, 100 + 10 * SEMI_SHRINK + 1)),     # none occurs
                        (np.array([7, 7, 8]), np.array([7] * (3 * SEMI_SHRINK + 4) + [2_000_000]))):
        this, other = this * spread, other * spread
        q = qc.query(k=this, i=np.arange(len(this))).on("cpu")
        op = q.except_by if anti else q.intersect_by
        got = op(qc.query(other), lambda r: r.k, lambda o: o).select(lambda r: r.i).to_list()
        occurs = set(other.tolist())
        assert got == [i for i, k in enumerate(this.tolist()) if (k in occurs) != anti]
        names = [k.name for k in qc.last_trace().kernels]
        assert any(n.startswith("semi_this_join_build") for n in names), names


@pytest.mark.parametrize("anti", [False, True])
def test_a_dense_other_side_is_a_bitmap(anti):
    """cpu: other keys filling a dense range (at most DENSE_BITS bits of range per key) are a
    bitmap of that range (member_dense_*), not the hash table: the flags equal plain Python's
    for signed, unsigned and narrow keys, this side's keys below, inside and above the range,
    a float key with -0.0 (order bits: equal to 0.0), and a two-field int64 key packed in one
    word by its fields' value ranges;
    a range too wide for the bitmap takes the hash table."""
    from querycompute.backends.cpu.cpu_join import DENSE_BITS, DENSE_MIN_ROWS
    if not AVAILABLE["cpu"]["available"]:
        pytest.skip("no cpu backend")
    rng = np.random.default_rng(5)
    cases = [(rng.integers(-300, 300, 70_001), rng.integers(-200, 200, 500)),
             (rng.integers(0, 250, 1000).astype(np.uint8), rng.integers(3, 200, 50).astype(np.uint8)),
             (rng.integers(-9, 9, 2000).astype(np.int16), np.array([-3, 0, 5], np.int16)),
             (rng.integers(0, 6_000_000, 200_000), rng.integers(1, 6_000_000, 300_000)),
             (np.array([0.0, -0.0, 1.0, 2.5, -1.0]), np.array([-0.0, 0.0]))]       # one order word
    for this, other in cases:
        q = qc.query(k=this, i=np.arange(len(this))).on("cpu")
        op = q.except_by if anti else q.intersect_by
        got = op(qc.query(other), lambda r: r.k, lambda o: o).select(lambda r: r.i).to_array()
        occurs = set(other.tolist())
        want = [i for i, k in enumerate(this.tolist()) if (k in occurs) != anti]
        assert got.tolist() == want
        names = [k.name for k in qc.last_trace().kernels]
        assert "semi_member_dense_build" in names and "semi_join_build" not in names, names
    a, b = rng.integers(0, 40, 5000), rng.integers(0, 40, 5000)     # int64: packed by their ranges
    oa, ob = rng.integers(0, 40, 300), rng.integers(0, 40, 300)
    q = qc.query(a=a, b=b, i=np.arange(5000)).on("cpu")
    op = q.except_by if anti else q.intersect_by
    got = op(qc.query(a=oa, b=ob), lambda r: (r.a, r.b), lambda o: (o.a, o.b)).select(lambda r: r.i).to_list()
    pairs = set(zip(oa.tolist(), ob.tolist()))
    assert got == [i for i, k in enumerate(zip(a.tolist(), b.tolist())) if (k in pairs) != anti]
    assert "semi_member_dense_build" in [k.name for k in qc.last_trace().kernels]
    wide = np.array([0, DENSE_BITS * DENSE_MIN_ROWS])        # the first range past the limit
    q = qc.query(k=np.array([0, 1, DENSE_BITS * DENSE_MIN_ROWS]), i=np.arange(3)).on("cpu")
    op = q.except_by if anti else q.intersect_by
    assert op(qc.query(wide), lambda r: r.k, lambda o: o).select(lambda r: r.i).to_list() == ([1] if anti else [0, 2])
    assert "semi_join_build" in [k.name for k in qc.last_trace().kernels]
