"""Issue 26 item 8: error messages say what is wrong and what works instead."""
import os
import re

import numpy as np
import pandas as pd
import pytest

import querycompute as qc

os.environ.setdefault("WGPU_BACKEND_TYPE", "Vulkan")
_AVAILABLE = qc.backends()
BACKENDS = ["numpy", "cpu"] + (["opencl"] if _AVAILABLE["opencl"]["available"] else [])
HAVE_WEBGPU = bool(_AVAILABLE.get("webgpu", {}).get("available"))


def test_no_field_over_dataframe_lists_the_tables_columns():
    # The columns a query reads are narrowed (column_use.py); a name that is no column keeps
    # them all, so the message lists the table's columns, not only the ones the lambda read.
    df = pd.DataFrame({"price": np.arange(4.0), "qty": np.arange(4), "tax": np.ones(4)})
    with pytest.raises(qc.UnsupportedLambdaError, match="no field 'prise'; fields: price, qty, tax"):
        qc.query(df).select(lambda r: r.price * r.prise).to_array()


_RECORDS = np.array([(1.0, 2), (3.0, 4), (5.0, 6)], dtype=[("x", "f8"), ("y", "i8")])


@pytest.mark.parametrize("source, make_tuples", [(_RECORDS, False), (np.arange(3), True)])
def test_scan_over_records_suggests_a_pick_that_runs(source, make_tuples):
    # A record is indexed by name (r[0] is refused), so the suggestion names a field; the
    # lambda the message suggests (given back as text) runs.
    q = qc.query(source)
    if make_tuples:
        q = q.select(lambda v: (v, v * 2))
    with pytest.raises(qc.QueryError, match=r"select one value first") as e:
        q.scan(lambda a, b: a + b, 0).to_array()
    pick = re.search(r"\.select\((lambda r: [^)]*)\)\.scan", str(e.value)).group(1)
    assert pick == ("lambda r: r.x" if not make_tuples else "lambda r: r[0]")
    got = q.select(pick).scan(lambda a, b: a + b, 0).to_array()
    np.testing.assert_array_equal(got, np.cumsum([1.0, 3.0, 5.0] if not make_tuples else [0, 1, 2]))


def test_aggregate_and_sum_over_records_suggest_a_field():
    with pytest.raises(qc.QueryError, match=r"\.select\(lambda r: r\.x\)\.aggregate"):
        qc.query(_RECORDS).aggregate(lambda a, b: a + b, 0)
    with pytest.raises(qc.QueryError, match=r"\{x: float64, y: int64\}.*\.sum\(lambda r: r\.x\)"):
        qc.query(_RECORDS).sum()
    assert qc.query(_RECORDS).sum("lambda r: r.x") == 9.0


@pytest.mark.parametrize("backend", BACKENDS + (["webgpu"] if HAVE_WEBGPU else []))
def test_skip_beyond_int64_is_empty(backend):
    # (was "captured value 'n' = 10**20 does not fit the parameter type int64")
    dt = np.int32 if backend == "webgpu" else np.int64
    q = qc.query(np.arange(5, dtype=dt)).on(backend)
    assert q.skip(10 ** 20).to_array().tolist() == []
    assert q.take(10 ** 20).to_array().tolist() == [0, 1, 2, 3, 4]


@pytest.mark.skipif(not HAVE_WEBGPU, reason="webgpu unavailable")
def test_range_on_webgpu_names_qc_range_not_a_captured_value():
    # qc.range's start and step are int64 kernel parameters; the user captured nothing.
    with pytest.raises(qc.UnsupportedTypeError) as e:
        qc.range(2, 12).on("webgpu").where(lambda i: i % 2 == 0).to_array()
    msg = str(e.value)
    assert "captured value" not in msg
    assert "qc.range produces int64 indexes" in msg and "dtype=np.int32" in msg
    # the suggested int32 array runs on webgpu
    got = qc.query(np.arange(2, 12, 1, dtype=np.int32)).on("webgpu").where(lambda i: i % 2 == 0).to_array()
    assert got.tolist() == [2, 4, 6, 8, 10]
