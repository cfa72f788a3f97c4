"""ArtifactCache bounded by bytes (artifacts.py) and the encoded Arrow string columns it keeps
(sources/string_columns.py): a working set of more columns than the old count bound (16) stays
encoded across calls, so queries run in turn do not re-encode their strings every call."""
import numpy as np
import pytest

import querycompute as qc
from querycompute.artifacts import ArtifactCache
from querycompute.sources import string_columns as S

pa = pytest.importorskip("pyarrow")


def test_bytes_bound_drops_least_recent():
    c = ArtifactCache("test: weighed", 100, weigh=len, max_bytes=10)
    c.put("a", "xxxx")
    c.put("b", "yyyy")
    assert c.get("a") == "xxxx"          # a is now the most recent
    c.put("c", "zzzz")                   # 12 bytes > 10: b (least recent) goes
    assert c.get("b") is None and c.get("a") == "xxxx" and c.get("c") == "zzzz"
    assert c.bytes == 8
    c.put("c", "zz")                     # a replaced entry's old weight is taken off
    assert c.bytes == 6
    c.put("big", "q" * 50)               # larger than the bound alone: kept, the rest dropped
    assert len(c) == 1 and c.bytes == 50
    c.clear()
    assert c.bytes == 0 and len(c) == 0


def test_many_string_columns_stay_encoded():
    S._ENCODED.clear()
    cols = [pa.array([f"c{k}-{i % 7}" for i in range(50)]) for k in range(40)]
    first = [S.encode(col, f"col{k}") for k, col in enumerate(cols)]
    again = [S.encode(col, f"col{k}") for k, col in enumerate(cols)]
    assert all(a is b for a, b in zip(first, again))        # every one a hit the second time
    assert S._ENCODED.bytes == sum(S._weight((e, ())) for e in first)
    for k, e in enumerate(first):
        assert e.dictionary[e.codes].tolist() == cols[k].to_pylist()


def test_queries_over_many_string_columns_in_turn():
    S._ENCODED.clear()
    n = 60
    table = pa.table({f"s{k}": [f"v{(i * (k + 1)) % 5}" for i in range(n)] for k in range(20)})
    want = [sum(1 for i in range(n) if (i * (k + 1)) % 5 == 1) for k in range(20)]
    got = []
    for _ in range(2):                   # 20 string columns read in turn, twice
        got.append([qc.query(pa.table({"s": table.column(f"s{k}")})).on("numpy")
                    .where(lambda r: r.s == "v1").count() for k in range(20)])
    assert got[0] == want and got[1] == want
    assert len(S._ENCODED) >= 20
