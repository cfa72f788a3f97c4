"""Issue 29 item 4: string columns, dictionary-encoded when the query binds (kernels see int32
codes; sources/string_columns.py, frontend/strings.py), against Python's own str methods on
every backend that runs here (numpy, cpu, opencl; webgpu with 32-bit values)."""
from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import querycompute as qc
from querycompute.errors import InputTypeError, QueryError, UnsupportedLambdaError

SETTINGS = dict(deadline=None, max_examples=5,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
AVAILABLE = qc.backends()
BACKENDS = [b for b in ("numpy", "cpu", "opencl") if AVAILABLE[b]["available"]]
# empty strings, non-ASCII (2-, 3- and 4-byte UTF-8), prefixes of one another
WORDS = ["", "a", "ab", "abc", "b", "B", "é", "éa", "日本", "日", "😀", "z"]
PROBES = WORDS + ["aa", "absent", "\U0010ffff"]


def py_rows(names, vals, pred):
    return [v for n, v in zip(names, vals) if pred(n)]


@pytest.mark.parametrize("backend", BACKENDS)
@given(data=st.data())
@settings(**SETTINGS)
def test_predicates_match_python_str(backend, data):
    names = data.draw(st.lists(st.sampled_from(WORDS), max_size=12))
    t = data.draw(st.sampled_from(PROBES))          # a constant that may be absent
    names_set = tuple(data.draw(st.lists(st.sampled_from(PROBES), max_size=4)))
    vals = np.arange(len(names), dtype=np.int32)
    q = qc.query({"n": np.array(names, dtype=object), "v": vals}).on(backend)
    cases = [
        (lambda r: r.n == t, lambda n: n == t),
        (lambda r: r.n != t, lambda n: n != t),
        (lambda r: r.n < t, lambda n: n < t),
        (lambda r: r.n <= t, lambda n: n <= t),
        (lambda r: t < r.n, lambda n: t < n),
        (lambda r: r.n >= t, lambda n: n >= t),
        (lambda r: r.n.startswith(t), lambda n: n.startswith(t)),
        (lambda r: r.n in names_set, lambda n: n in names_set),
        (lambda r: r.n not in ("a", "é"), lambda n: n not in ("a", "é")),
        (lambda r: "a" <= r.n < "b", lambda n: "a" <= n < "b"),
        (lambda r: r.n.startswith(("a", "日")), lambda n: n.startswith(("a", "日"))),
    ]
    for pred, want in cases:
        got = q.where(pred).select(lambda r: r.v).to_list()
        assert got == py_rows(names, vals.tolist(), want), (t, names_set)


def _inputs():
    """The same column as every input kind DESIGN.md lists (those installed)."""
    names = ["b", "", "é", "a", "b"]
    out = {"numpy U": {"n": np.array(names), "v": np.arange(5)},
           "numpy object": {"n": np.array(names, dtype=object), "v": np.arange(5)},
           "numpy S": {"n": np.array([s.encode() if s.isascii() else b"e" for s in names]),
                       "v": np.arange(5)}}
    pd = pytest.importorskip("pandas")
    for dt in ("object", "str", "string", "category"):
        out[f"pandas {dt}"] = pd.DataFrame({"n": pd.Series(names, dtype=dt), "v": np.arange(5)})
    pa = pytest.importorskip("pyarrow")
    for ty in (pa.string(), pa.large_string()):
        out[f"arrow {ty}"] = pa.table({"n": pa.array(names, ty), "v": np.arange(5)})
    out["arrow dictionary"] = pa.table({"n": pa.array(names).dictionary_encode(), "v": np.arange(5)})
    out["arrow chunked"] = pa.table({"n": pa.chunked_array([names[:2], names[2:]]), "v": np.arange(5)})
    pl = pytest.importorskip("polars")
    out["polars String"] = pl.DataFrame({"n": names, "v": np.arange(5)})
    out["polars Categorical"] = pl.DataFrame({"n": pl.Series(names, dtype=pl.Categorical), "v": np.arange(5)})
    out["polars Enum"] = pl.DataFrame({"n": pl.Series(names, dtype=pl.Enum(["é", "b", "a", ""])),
                                       "v": np.arange(5)})
    return out


@pytest.mark.parametrize("kind", list(_inputs()))
def test_every_input_kind(kind):
    src = _inputs()[kind]
    want = ["b", "", "é" if kind != "numpy S" else "e", "a", "b"]
    q = qc.query(src)
    assert q.select(lambda r: r.n).to_list() == want
    assert q.where(lambda r: r.n == "b").select(lambda r: r.v).to_list() == [0, 4]
    assert q.where(lambda r: r.n < "b").select(lambda r: r.v).to_list() == [1, 3]
    g = q.group_by(lambda r: r.n).agg(c=qc.count())
    assert g["key"].tolist() == sorted(set(want)) and g["c"].tolist() == [1, 1, 2, 1]


@pytest.mark.parametrize("backend", BACKENDS)
def test_relational_operators_decode(backend):
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"n": ["pear", "apple", "fig", "apple", "", "Äpfel"], "v": [1, 2, 3, 4, 5, 6]})
    q = qc.query(df).on(backend)
    assert q.order_by(lambda r: r.n).select(lambda r: r.n).to_list() == sorted(df.n)
    assert q.order_by_descending(lambda r: r.n).then_by(lambda r: r.v).select(lambda r: (r.n, r.v)).to_list() == \
        sorted(zip(df.n, df.v), key=lambda p: (p[0], -p[1]), reverse=True)
    assert q.distinct(lambda r: r.n).select(lambda r: r.n).to_list() == list(dict.fromkeys(df.n))
    g = q.group_by(lambda r: r.n).agg(s=qc.sum(lambda r: r.v))
    assert dict(zip(g["key"].tolist(), g["s"].tolist())) == df.groupby("n").v.sum().to_dict()
    arr = q.where(lambda r: r.n != "fig").select(lambda r: r.n).to_array()
    assert arr.dtype == object and arr.tolist() == [s for s in df.n if s != "fig"]
    out = q.where(lambda r: r.n.startswith("a")).to_pandas()
    assert out.n.tolist() == ["apple", "apple"] and out.v.tolist() == [2, 4]
    picked = q.select(lambda r: {"n": r.n if r.v > 2 else r.n, "v": r.v}).take(2).to_list()
    assert picked == [{"n": "pear", "v": 1}, {"n": "apple", "v": 2}]


def test_empty_column_and_nulls():
    pd = pytest.importorskip("pandas")
    q = qc.query(pd.DataFrame({"n": pd.Series([], dtype=object), "v": np.zeros(0)}))
    assert q.where(lambda r: r.n == "x").count() == 0
    assert q.select(lambda r: r.n).to_list() == []
    for col in (pd.Series(["a", None]), pd.Series(["a", None], dtype="string"),
                pd.Series(["a", None], dtype="category"), np.array(["a", None], dtype=object)):
        with pytest.raises(InputTypeError, match="null"):
            qc.query({"n": col, "v": np.arange(2)}).where(lambda r: r.n == "a").count()
    pa = pytest.importorskip("pyarrow")
    with pytest.raises(InputTypeError, match="null"):
        qc.query(pa.table({"n": pa.array(["a", None]), "v": [1, 2]})).where(lambda r: r.n == "a").count()


def test_captured_string_changes_without_recompiling():
    q = qc.query(n=np.array(["x", "y", "x", "z"]), v=np.arange(4)).on("cpu")
    want = "x"
    assert q.where(lambda r: r.n == want).count() == 2
    for want, n in (("y", 1), ("absent", 0), ("z", 1)):
        assert q.where(lambda r: r.n == want).count() == n
        assert qc.last_trace().kernels[0].cache == "memory"     # no new kernel for a new value
    # new data: a new dictionary and new codes, the same kernel
    q2 = qc.query(n=np.array(["a", "z", "z"]), v=np.arange(3)).on("cpu")
    assert q2.where(lambda r: r.n == want).count() == 2
    assert qc.last_trace().kernels[0].cache == "memory"


def test_refusals_are_located():
    q = qc.query(n=np.array(["a", "b"]), m=np.array(["c", "d"]), v=np.arange(2))
    line = lambda: None  # noqa: E731  (this file's name in the messages)
    for fn, pattern in (
            (lambda r: r.n + "x", "builds a string"),
            (lambda r: f"{r.n}!", "f-string"),
            (lambda r: r.n.upper(), "makes a string"),
            (lambda r: r.n.endswith(r.m), "reads string columns"),
            (lambda r: r.n.count(str(r.v)) > 0, "mixes string column"),
            (lambda r: r.n == r.m, "dictionaries of their own"),
            (lambda r: r.n * 2, "as a number"),
            (lambda r: r.n == 1, "not a string")):
        with pytest.raises(UnsupportedLambdaError, match=pattern) as e:
            q.select(fn).to_array()
        assert re.search(r"test_issue29_strings\.py:\d+:\d+", str(e.value)), str(e.value)
    del line
    with pytest.raises(QueryError, match="aggregates compute on numbers"):
        q.max(lambda r: r.n)
    with pytest.raises(QueryError, match="is a string on this side only"):
        q.join(qc.query(n=np.array([1]), w=np.arange(1)), lambda r: r.n, lambda o: o.n,
               lambda a, b: a.v).to_list()


@pytest.mark.skipif(not AVAILABLE["webgpu"]["available"], reason="no WebGPU adapter")
def test_webgpu_with_32_bit_values():
    q = qc.query(n=np.array(["b", "a", "c", "é", ""]), v=np.arange(5, dtype=np.int32)).on("webgpu")
    assert q.where(lambda r: r.n >= "b").select(lambda r: r.v).to_list() == [0, 2, 3]
    assert q.where(lambda r: r.n.startswith("é")).count() == 1
    assert q.order_by(lambda r: r.n).select(lambda r: r.n).to_list() == ["", "a", "b", "c", "é"]


@pytest.mark.skipif("opencl" not in BACKENDS, reason="no OpenCL device")
def test_opencl_kernels_see_codes_only():
    q = qc.query(n=np.array(["b", "a", "c"]), v=np.arange(3, dtype=np.int32)).on("opencl")
    wanted = q.where(lambda r: r.n >= "b")
    assert wanted.select(lambda r: r.v).to_list() == [0, 2]
    src = wanted.source(backend="opencl", terminal="count")
    assert "int" in src and '"b"' not in src and "char" not in src.replace("uchar", "")


def test_strings_flow_through_renames_grouped_queries_and_lazy_frames():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"a": [1, 2, 3, 4, 5], "n": ["b", "a", "b", "ça", ""]})
    q = qc.query(df).on("numpy")
    # a renamed string field keeps its dictionary: its tests and its decoding follow it
    assert q.select(lambda r: {"k": r.n, "a2": r.a * 2}).where(lambda r: r.k >= "b").to_list() == \
        [{"k": "b", "a2": 2}, {"k": "b", "a2": 6}, {"k": "ça", "a2": 8}]
    # a group_by result as a query: its string keys are a string column again
    g = q.group_by(lambda r: r.n).agg(s=qc.sum(lambda r: r.a))
    assert g.where(lambda k: k.key != "b").to_list() == \
        [{"key": "", "s": 5}, {"key": "a", "s": 2}, {"key": "ça", "s": 4}]
    pl = pytest.importorskip("polars")
    lazy = pl.DataFrame({"n": ["x", "y"], "v": [1, 2]}).lazy()
    assert qc.query(lazy).where(lambda r: r.n == "y").to_list() == [{"n": "y", "v": 2}]
    out = q.where(lambda r: r.n == "b").to_polars()
    assert out["n"].dtype == pl.String and out["n"].to_list() == ["b", "b"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_join_on_numbers_carries_this_sides_strings(backend):
    pd = pytest.importorskip("pandas")
    a = pd.DataFrame({"id": [1, 2, 3, 1], "n": ["b", "a", "c", "é"]})
    b = pd.DataFrame({"id": [1, 3], "w": [10.0, 30.0]})
    j = qc.query(a).on(backend).join(qc.query(b), lambda r: r.id, lambda o: o.id,
                                     lambda r, o: {"n": r.n, "w": o.w})
    assert j.to_list() == [{"n": "b", "w": 10.0}, {"n": "c", "w": 30.0}, {"n": "é", "w": 10.0}]
    assert j.where(lambda r: r.n < "c").to_list() == [{"n": "b", "w": 10.0}]
    lj = qc.query(a).on(backend).left_join(qc.query(b), lambda r: r.id, lambda o: o.id,
                                           lambda r, o: {"n": r.n, "m": qc.matched(o)})
    assert lj.order_by(lambda r: r.n).select(lambda r: (r.n, r.m)).to_list() == \
        [("a", False), ("b", True), ("c", True), ("é", True)]
    assert qc.query(a).on(backend).intersect_by(qc.query(b), lambda r: r.id, lambda o: o.id) \
        .select(lambda r: r.n).to_list() == ["b", "c", "é"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_join_carries_the_other_sides_strings(backend):
    """The other side's string columns reach the result (a dictionary of their own per join,
    made when the join runs), as fields, keys of order_by / group_by / distinct, and decoded
    in every result form; against plain Python."""
    pd = pytest.importorskip("pandas")
    orders = pd.DataFrame({"ok": np.arange(8), "ck": [10, 20, 10, 30, 99, 20, 30, 10],
                           "amt": np.arange(8, dtype=np.float64) + 0.5})
    cust = pd.DataFrame({"ck": [30, 10, 20, 40], "name": ["émile", "zoe", "", "日本"],
                         "seg": pd.Categorical(["B", "A", "B", "A"])})
    by_ck = {k: (n, s) for k, n, s in zip(cust.ck, cust.name, cust.seg)}
    want = [{"ok": o, "name": by_ck[c][0], "seg": by_ck[c][1], "amt": a}
            for o, c, a in zip(orders.ok, orders.ck, orders.amt) if c in by_ck]
    j = qc.query(orders).on(backend).join(qc.query(cust), lambda o: o.ck, lambda c: c.ck,
                                          lambda o, c: {"ok": o.ok, "name": c.name, "seg": c.seg,
                                                        "amt": o.amt})
    assert j.to_list() == want
    assert list(j.order_by(lambda r: r.name).then_by(lambda r: r.ok).select(lambda r: r.name)
                .to_array()) == [w["name"] for w in sorted(want, key=lambda w: (w["name"], w["ok"]))]
    g = j.group_by(lambda r: r.name).agg(total=qc.sum(lambda r: r.amt), n=qc.count)
    names = sorted({w["name"] for w in want})
    assert list(g["key"]) == names
    assert list(g["n"]) == [sum(w["name"] == k for w in want) for k in names]
    assert j.where(lambda r: r.amt > 3).select(lambda r: r.seg).distinct().to_list() == \
        list(dict.fromkeys(w["seg"] for w in want if w["amt"] > 3))
    assert j.to_pandas()["name"].tolist() == [w["name"] for w in want]
    # the other side filtered on its strings before the join; two joins, each its own dictionary
    city = pd.DataFrame({"ck": [10, 30, 50], "city": ["Oslo", "Åre", "Rome"]})
    j2 = (qc.query(orders).on(backend)
          .join(qc.query(cust).where(lambda c: c.name != ""), lambda o: o.ck, lambda c: c.ck,
                lambda o, c: {"ok": o.ok, "ck": o.ck, "name": c.name})
          .join(qc.query(city), lambda r: r.ck, lambda t: t.ck,
                lambda r, t: {"ok": r.ok, "name": r.name, "city": t.city}))
    towns = dict(zip(city.ck, city.city))
    assert j2.to_list() == [{"ok": o, "name": by_ck[c][0], "city": towns[c]}
                            for o, c in zip(orders.ok, orders.ck)
                            if c in by_ck and by_ck[c][0] != "" and c in towns]


def test_join_other_sides_strings_refusals_and_new_data():
    pd = pytest.importorskip("pandas")
    a = pd.DataFrame({"id": [1, 2, 3], "v": [1.0, 2.0, 3.0]})
    b = pd.DataFrame({"id": [1, 3], "n": ["x", "y"]})
    j = qc.query(a).on("cpu").join(qc.query(b), lambda r: r.id, lambda o: o.id,
                                   lambda r, o: {"v": r.v, "n": o.n})
    assert j.to_list() == [{"v": 1.0, "n": "x"}, {"v": 3.0, "n": "y"}]
    # new data on the other side: a new dictionary, the same kernels
    b2 = pd.DataFrame({"id": [3, 2, 1], "n": ["c", "b", "a"]})
    j2 = qc.query(a).on("cpu").join(qc.query(b2), lambda r: r.id, lambda o: o.id,
                                    lambda r, o: {"v": r.v, "n": o.n})
    assert j2.order_by(lambda r: r.n).to_list() == [{"v": 1.0, "n": "a"}, {"v": 2.0, "n": "b"},
                                                    {"v": 3.0, "n": "c"}]
    # compared with a string after the join: the parameter is computed when the join has
    # encoded the column (each call: new data, new codes, the same kernels)
    assert j.where(lambda r: r.n == "x").to_list() == [{"v": 1.0, "n": "x"}]
    assert j2.where(lambda r: r.n >= "b").select(lambda r: (r.n, r.n.startswith("c"))).to_list() == \
        [("b", False), ("c", True)]
    want = "y"
    assert j.count(lambda r: r.n == want) == 1
    want = "absent"
    assert j.count(lambda r: r.n == want) == 0 and qc.last_trace().kernels[-1].cache == "memory"
    # a left join: an unmatched row's joined string is None (sorting first)
    lj = qc.query(a).on("cpu").left_join(qc.query(b), lambda r: r.id, lambda o: o.id,
                                         lambda r, o: {"v": r.v, "n": o.n})
    assert lj.to_list() == [{"v": 1.0, "n": "x"}, {"v": 2.0, "n": None}, {"v": 3.0, "n": "y"}]
    assert lj.order_by(lambda r: r.n).select(lambda r: r.n).to_list() == [None, "x", "y"]
    assert lj.where(lambda r: r.n == "y" or r.n < "a").select(lambda r: r.v).to_list() == [2.0, 3.0]
    # this side without string columns (plain arrays): the call's dictionaries are its own
    got = qc.query(np.array([1, 3, 2])).on("cpu").join(qc.query(b), lambda r: r, lambda o: o.id,
                                                      lambda r, o: {"v": r, "n": o.n})
    for _ in range(3):                                          # (a warm query decodes too)
        assert got.to_list() == [{"v": 1, "n": "x"}, {"v": 3, "n": "y"}]
        assert list(got.select(lambda r: r.n).to_array()) == ["x", "y"]
    assert got.where(lambda r: r.n == "y").count() == 1
    with pytest.raises(QueryError, match="select a dict in the other query"):
        qc.query(a).join(qc.query(b).select(lambda o: (o.id, o.n)), lambda r: r.id,
                         lambda o: o[0], lambda r, o: {"v": r.v, "n": o[1]}).to_list()


@pytest.mark.parametrize("backend", BACKENDS)
def test_join_on_string_keys(backend):
    """A string key matches the other side's strings through this side's dictionary (the
    other's strings looked up in it once per call: codes, -1 for a string this side lacks);
    join, left join, intersect_by, except_by and tuple keys, against plain Python."""
    pd = pytest.importorskip("pandas")
    a = pd.DataFrame({"k": ["x", "y", "é", "x", "zz", ""], "v": np.arange(6.0)})
    b = pd.DataFrame({"k": pd.Categorical(["x", "é", "q", "x", ""]), "w": [10, 20, 30, 40, 50]})
    pairs = [(r, o) for r in range(len(a)) for o in range(len(b)) if a.k[r] == b.k[o]]
    j = qc.query(a).on(backend).join(qc.query(b), lambda r: r.k, lambda o: o.k,
                                     lambda r, o: {"v": r.v, "w": o.w, "k": o.k})
    assert j.to_list() == [{"v": a.v[r], "w": b.w[o], "k": b.k[o]} for r, o in pairs]
    lj = qc.query(a).on(backend).left_join(qc.query(b), lambda r: r.k, lambda o: o.k,
                                           lambda r, o: (r.v, qc.matched(o)))
    assert lj.to_list() == [(a.v[r], any(a.k[r] == x for x in b.k)) for r in range(len(a))
                            for _ in range(max(1, sum(a.k[r] == x for x in b.k)))]
    inside = set(b.k)
    assert qc.query(a).on(backend).intersect_by(qc.query(b), lambda r: r.k, lambda o: o.k) \
        .select(lambda r: r.v).to_list() == [v for k, v in zip(a.k, a.v) if k in inside]
    assert qc.query(a).on(backend).except_by(qc.query(b), lambda r: r.k, lambda o: o.k) \
        .select(lambda r: r.v).to_list() == [v for k, v in zip(a.k, a.v) if k not in inside]
    t = qc.query(a).on(backend).join(qc.query(b), lambda r: (r.k, r.v < 4), lambda o: (o.k, o.w < 45),
                                     lambda r, o: o.w)
    assert t.to_list() == [b.w[o] for r, o in pairs if (a.v[r] < 4) == (b.w[o] < 45)]


def test_arrow_string_encodings_are_kept_across_calls():
    """An Arrow string column (and a pandas Arrow-backed str column) is encoded once while its
    buffers live: the same Encoded object comes back; new data (new buffers), a pandas
    assignment (pandas swaps in new buffers) and numpy / object columns are encoded again."""
    pa = pytest.importorskip("pyarrow")
    pd = pytest.importorskip("pandas")
    from querycompute.sources import string_columns as S
    arr = pa.chunked_array([pa.array(["b", "a", "é"]), pa.array(["a", "c"])])
    first = S.encode(arr, "n")
    assert S.encode(arr, "n") is first
    assert S.encode(pa.chunked_array(arr.chunks), "n") is first      # a new wrapper, same buffers
    assert list(first.dictionary[first.codes]) == ["b", "a", "é", "a", "c"]
    other = S.encode(pa.array(["b", "a", "x"]), "n")
    assert other is not first and list(other.dictionary[other.codes]) == ["b", "a", "x"]
    q = qc.query({"n": arr, "v": np.arange(5)}).on("cpu")
    assert q.where(lambda r: r.n == "a").count() == 2
    assert q.where(lambda r: r.n == "a").count() == 2
    if hasattr(pd, "ArrowDtype"):
        s = pd.Series(["b", "a", "a"], dtype="string[pyarrow]")
        df = pd.DataFrame({"n": s, "v": np.arange(3)})
        assert qc.query(df).where(lambda r: r.n == "a").count() == 2
        df.loc[0, "n"] = "a"                                    # in place: new buffers
        assert qc.query(df).where(lambda r: r.n == "a").count() == 3
    words = np.array(["a", "b"], dtype=object)
    assert S.encode(words, "n") is not S.encode(words, "n")     # mutable: never kept


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_a_joined_query_with_operators_hands_over_codes(backend, monkeypatch):
    """A joined side with operators returns its string columns as this call's codes and
    dictionaries (Terminal.codes), not decoded Python str encoded again; its string key is
    decoded for the key only; left joins and a left join of a left join keep None first."""
    from querycompute.sources import string_columns
    calls = []
    real = string_columns.encode
    monkeypatch.setattr(string_columns, "encode", lambda *a, **k: calls.append(a[1]) or real(*a, **k))
    import querycompute.plan.join_plan as JP
    monkeypatch.setattr(JP, "encode", string_columns.encode)
    cust = {"id": np.array([1, 2, 3, 4]), "name": np.array(["ann", "bob", "cy", "dee"], dtype=object),
            "city": np.array(["Oslo", "Åre", "Oslo", "Bergen"], dtype=object)}
    sales = {"cust": np.array([3, 1, 9, 3, 2]), "qty": np.arange(5)}
    big = qc.query(cust).where(lambda c: c.id > 1)                   # operators: it runs per call
    j = qc.query(sales).on(backend).join(big, lambda s: s.cust, lambda c: c.id,
                                         lambda s, c: {"qty": s.qty, "name": c.name, "city": c.city})
    calls.clear()
    r = j.where(lambda r: r.city != "Åre").to_array()
    assert r["name"].tolist() == ["cy", "cy"] and r["qty"].tolist() == [0, 3]
    assert not [c for c in calls if "joined string column" in c]     # no decode / encode again
    by_name = qc.query(sales).on(backend).join(                       # a string key of that side
        big.select(lambda c: {"name": c.name, "id": c.id}), lambda s: "cy" if s.cust == 3 else "zz",
        lambda c: c.name, lambda s, c: {"qty": s.qty, "id": c.id})
    with pytest.raises(QueryError):       # a string built in the lambda: refused as before
        by_name.to_list()
    keyed = qc.query(k=np.array(["bob", "cy", "x"], dtype=object), v=np.arange(3)).on(backend).join(
        big, lambda a: a.k, lambda c: c.name, lambda a, c: {"v": a.v, "city": c.city})
    assert keyed.to_list() == [{"v": 0, "city": "Åre"}, {"v": 1, "city": "Oslo"}]
    left = qc.query(sales).on(backend).left_join(big, lambda s: s.cust, lambda c: c.id,
                                                 lambda s, c: {"qty": s.qty, "city": c.city})
    assert left.select(lambda r: r.city).to_list() == ["Oslo", None, None, "Oslo", "Åre"]
    twice = qc.query(k=np.array([0, 1, 2, 3, 4])).on(backend).left_join(
        left.where(lambda r: r.qty < 3), lambda a: a.k, lambda r: r.qty, lambda a, r: {"k": a.k, "city": r.city})
    assert twice.select(lambda r: r.city).to_list() == ["Oslo", None, None, None, None]
    assert twice.where(lambda r: r.city > "A").select(lambda r: r.k).to_list() == [0]   # None: below all
