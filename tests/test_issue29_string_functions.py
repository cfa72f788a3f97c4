"""Issue 29 item 4 (DESIGN.md section 3, Strings): string functions that are no code range --
s.endswith(x), a substring `in`, len(s), and any bool / int valued Python expression of one
string column (s.lower() == x, s[:2] == x, int(s[:2]), re.search(p, s), s.count(x)) --
evaluated by Python once per distinct string into a table the kernel reads by code
(frontend/strings.py, expr.Lookup), against Python's own str methods on the host backends;
the GPU dialects refuse them (HostOnlyError) and `auto` runs them on cpu."""
from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import querycompute as qc
from querycompute.errors import HostOnlyError, QueryError

SETTINGS = dict(deadline=None, max_examples=5,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
AVAILABLE = qc.backends()
HOST = ["numpy", "cpu"]
# empty strings, non-ASCII (2-, 3- and 4-byte UTF-8), suffixes and substrings of one another
WORDS = ["", "a", "ab", "abc", "cab", "B", "é", "aé", "日本", "本", "😀x", "x😀", "BRASS", "a BRASS"]
PROBES = ["", "a", "b", "ab", "é", "本", "😀", "BRASS", "absent"]


@pytest.mark.parametrize("backend", HOST)
@given(data=st.data())
@settings(**SETTINGS)
def test_string_functions_match_python(backend, data):
    names = data.draw(st.lists(st.sampled_from(WORDS), max_size=14))
    t = data.draw(st.sampled_from(PROBES))
    vals = np.arange(len(names), dtype=np.int64)
    q = qc.query({"n": np.array(names, dtype=object), "v": vals}).on(backend)
    preds = [
        (lambda r: r.n.endswith(t), lambda n, v: n.endswith(t)),
        (lambda r: t in r.n, lambda n, v: t in n),
        (lambda r: t not in r.n, lambda n, v: t not in n),
        (lambda r: len(r.n) > 1, lambda n, v: len(n) > 1),
        (lambda r: len(r.n) > r.v, lambda n, v: len(n) > v),           # len per string, v per row
        (lambda r: r.n.lower() == t.lower(), lambda n, v: n.lower() == t.lower()),
        (lambda r: r.n[:1] == t, lambda n, v: n[:1] == t),
        (lambda r: re.search("a.", r.n) is not None, lambda n, v: re.search("a.", n) is not None),
        (lambda r: r.n.isupper() or r.n.endswith(("b", "本")), lambda n, v: n.isupper() or n.endswith(("b", "本"))),
        (lambda r: not r.n.endswith("S") and r.v % 2 == 0, lambda n, v: not n.endswith("S") and v % 2 == 0),
    ]
    for pred, want in preds:
        got = q.where(pred).select(lambda r: r.v).to_list()
        assert got == [v for n, v in zip(names, vals.tolist()) if want(n, v)], (t, names)
    assert q.select(lambda r: len(r.n)).to_list() == [len(n) for n in names]
    assert q.select(lambda r: r.n.count("a") + r.v).to_list() == [n.count("a") + v for n, v in zip(names, vals.tolist())]
    assert q.sum(lambda r: r.n.find("a")) == sum(n.find("a") for n in names)


@pytest.mark.parametrize("backend", HOST)
def test_every_input_kind(backend):
    pa = pytest.importorskip("pyarrow")
    pd = pytest.importorskip("pandas")
    names = ["PROMO BRASS", "x", "STANDARD BRASS", "", "é BRASS"]
    want = [0, 2, 4]
    for data in ({"n": np.array(names), "v": np.arange(5)},
                 pd.DataFrame({"n": names, "v": np.arange(5)}),
                 pd.DataFrame({"n": pd.Categorical(names), "v": np.arange(5)}),
                 pa.table({"n": pa.array(names), "v": np.arange(5)}),
                 pa.table({"n": pa.array(names).dictionary_encode(), "v": np.arange(5)})):
        q = qc.query(data).on(backend)
        assert q.where(lambda r: r.n.endswith("BRASS")).select(lambda r: r.v).to_list() == want


def test_captured_values_change_without_recompiling():
    q = qc.query(n=np.array(["ab", "b", "cab", "abc"]), v=np.arange(4)).on("cpu")
    suffix = "b"
    assert q.where(lambda r: r.n.endswith(suffix)).count() == 3
    for suffix, n in (("ab", 2), ("absent", 0), ("c", 1)):
        assert q.where(lambda r: r.n.endswith(suffix)).count() == n
        assert qc.last_trace().kernels[0].cache == "memory"     # a new table, the same kernel
    q2 = qc.query(n=np.array(["c", "cc", "x"]), v=np.arange(3)).on("cpu")   # new data, dictionary
    assert q2.where(lambda r: r.n.endswith(suffix)).count() == 2
    assert qc.last_trace().kernels[0].cache == "memory"


def test_in_operators_joins_and_groups():
    q = qc.query(n=np.array(["apple", "kiwi", "fig", "banana", "apple"]), v=np.arange(5)).on("cpu")
    assert q.order_by(lambda r: len(r.n)).then_by(lambda r: r.n).select(lambda r: r.n).to_list() == \
        ["fig", "kiwi", "apple", "apple", "banana"]
    g = q.group_by(lambda r: len(r.n)).agg(c=qc.count(lambda r: "a" in r.n), s=qc.sum(lambda r: r.v))
    assert g["key"].tolist() == [3, 4, 5, 6] and g["c"].tolist() == [0, 0, 2, 1] and g["s"].tolist() == [2, 1, 4, 3]
    assert q.distinct(lambda r: r.n.endswith("a")).select(lambda r: r.v).to_list() == [0, 3]
    other = qc.query(k=np.arange(5), label=np.array(["x1", "y2", "x3", "y4", "x5"]))
    j = q.join(other, lambda r: r.v, lambda o: o.k, lambda r, o: {"v": r.v, "label": o.label})
    assert j.where(lambda r: r.label.endswith(("2", "4"))).select(lambda r: r.v).to_list() == [1, 3]
    left = q.left_join(other.where(lambda o: o.k < 2), lambda r: r.v, lambda o: o.k,
                       lambda r, o: {"v": r.v, "label": o.label})
    # an unmatched (None) joined string: False / 0 in a string function
    assert left.where(lambda r: "x" in r.label).select(lambda r: r.v).to_list() == [0]
    assert left.select(lambda r: len(r.label)).to_list() == [2, 2, 0, 0, 0]


def test_explain_names_the_table_and_gpu_dialects_refuse():
    q = qc.query(n=np.array(["ab", "b"]), v=np.arange(2, dtype=np.int32))
    text = q.where(lambda r: r.n.endswith("b")).explain("cpu", "count")
    assert "`n.endswith('b')` per distinct string of n (bool table)" in text, text
    assert "p0[in0[i]]" in text
    if AVAILABLE["opencl"]["available"]:
        with pytest.raises(HostOnlyError, match="opencl kernels don't read string functions"):
            q.on("opencl").where(lambda r: r.n.endswith("b")).count()
        with pytest.raises(HostOnlyError):
            q.on("opencl").where(lambda r: len(r.n) == 1).source()
    assert q.where(lambda r: r.n.endswith("b")).count() == 2        # auto: cpu here


def test_errors_name_the_lambda_and_the_string():
    q = qc.query(n=np.array(["a1", "b"]), v=np.arange(2))
    with pytest.raises(QueryError, match=r"test_issue29_string_functions\.py:\d+:\d+: the string "
                                         r"function `int\(n\[1:\]\)` raised ValueError.*'b'"):
        q.select(lambda r: int(r.n[1:])).to_array()
    with pytest.raises(QueryError, match=r"mixes string column 'n' with `r.v`, a value per row"):
        q.where(lambda r: r.n.count(str(r.v)) > 0).count()
    unknown = object()
    with pytest.raises(QueryError, match="in a string function: it may read"):
        q.where(lambda r: r.n.endswith(unknown)).count()
