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


def test_polars_string_enum_categorical_inputs_are_named_by_their_polars_dtype():
    pl = pytest.importorskip("polars")
    strings = pl.Series(["a", "b", "a"])
    enum = pl.Series(["a", "b", "a"], dtype=pl.Enum(["a", "b"]))
    cats = strings.cast(pl.Categorical)
    # a Series input (was "the input has dtype object")
    for s, name in ((strings, "String"), (enum, "Enum"), (cats, "Categorical")):
        with pytest.raises(qc.InputTypeError, match=rf"has polars dtype {name}") as e:
            qc.query(s).to_array()
        assert "dtype object" not in str(e.value) and ".to_physical()" in str(e.value)
    with pytest.raises(qc.InputTypeError, match=r"encode them as integer codes first, "
                                                r"\.cast\(pl\.Categorical\)\.to_physical\(\)"):
        qc.query(strings).to_array()
    # a DataFrame column: the same hint
    df = pl.DataFrame({"s": enum, "v": [1, 2, 3]})
    # (issue 29 item 4: a string column is read, as codes: summing them is refused)
    with pytest.raises(qc.QueryError, match=r"string column 's'.*\.to_physical\(\)"):
        qc.query(df).sum(lambda r: r.s)
    # what the hints say runs
    assert qc.query(enum.to_physical()).to_array().tolist() == [0, 1, 0]
    assert qc.query(strings.cast(pl.Categorical).to_physical()).to_array().tolist() == [0, 1, 0]
    assert qc.query(df.with_columns(pl.col("s").to_physical())).sum(lambda r: r.s) == 1


def test_datetime_and_categorical_inputs_say_how_to_read_them():
    # (issue 33: dates are read as ticks typed with their unit; what is still refused says
    # what to do: a unitless datetime64, a time-zone-aware column, a sum of dates)
    ticks = np.array([1, 2, 3]).astype("datetime64[s]")
    assert qc.query(ticks).to_array().tolist() == ticks.tolist()
    with pytest.raises(qc.InputTypeError, match=r"datetime64 without a unit; give it one, e\.g\. \.astype\('M8\[s\]'\)"):
        qc.query(np.zeros(3, "M8")).to_array()
    df = pd.DataFrame({"t": pd.to_datetime(ticks), "c": pd.Categorical(["x", "y", "x"]), "v": [1, 2, 3],
                       "z": pd.to_datetime(ticks).tz_localize("UTC")})
    with pytest.raises(qc.QueryError, match=r"sum\(\) of datetime64\[s\] values is not supported"):
        qc.query(df).sum(lambda r: r.t)
    with pytest.raises(qc.UnsupportedTypeError, match=r"column 'z'.*time-zone aware.*convert it to UTC"):
        qc.query(df).max(lambda r: r.z)
    with pytest.raises(qc.QueryError, match=r"string column 'c'.*\.cat\.codes"):   # (issue 29 item 4)
        qc.query(df).sum(lambda r: r.c)
    with pytest.raises(qc.InputTypeError, match=r"\.cat\.codes"):
        qc.query(df["c"]).to_array()
    assert qc.query(df["c"].cat.codes).to_array().tolist() == [0, 1, 0]
    assert qc.query(df.assign(t=df.t.astype("int64"))).max(lambda r: r.t) == df.t.astype("int64").max()
    assert qc.query(df).max(lambda r: r.t) == df.t.max()
