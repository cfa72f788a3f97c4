"""Outside tests of shaped elements, tables, Dask, the CLI / cache, explain / source and
threads (DESIGN.md sections 3, 4b, 5b, 5c, 6), written as a user would: each one reproduces
a bug found by probing the documented promises, checked against NumPy / pandas / plain
Python. Small inputs, few query shapes (compiles are the cost)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import querycompute as qc
from querycompute.errors import UnsupportedTypeError


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_dict_table_column_names_that_are_not_identifiers(backend):
    # A DataFrame's "my col" is read as r["my col"]; a dict of arrays with the same names
    # used to be refused ("table column names must be identifiers").
    a, b = np.arange(5.0), np.arange(5, dtype=np.int32)
    q = qc.query({"my col": a, "x-y": b, "class": a}).on(backend)
    np.testing.assert_array_equal(q.select(lambda r: r["my col"] * r["x-y"] + r["class"]).to_array(),
                                  a * b + a)
    got = q.where(lambda r: r["x-y"] > 2).to_array()
    assert list(got) == ["my col", "x-y", "class"]
    np.testing.assert_array_equal(got["x-y"], b[b > 2])
    assert qc.query(**{"my col": a}).on(backend).to_list()[1] == {"my col": 1.0}
    with pytest.raises(TypeError, match="column names must be strings"):
        qc.query({0: a})


def test_staged_plan_reading_an_unreadable_column_says_why():
    # where() said "column 's' can't be read by a kernel"; group_by / order_by / join said
    # "the record has no field 's'", as if the DataFrame had no such column.
    df = pd.DataFrame({"s": list("abcab"), "x": np.arange(5.0)})
    q = qc.query(df).on("numpy")
    for run in (lambda: q.group_by(lambda r: r.s).count(),
                lambda: q.order_by(lambda r: r.s).to_list(),
                lambda: q.join(qc.query(x=np.arange(2.0)), lambda r: r.s, lambda o: o.x,
                               lambda r, o: r.x).to_list()):
        with pytest.raises(qc.QueryError, match="column 's' can't be read by a kernel"):
            run()


def _cli_exit(argv, capsys) -> tuple[int, str]:
    from querycompute.cli import main
    try:
        code = main(argv)
    except SystemExit as stop:                 # argparse: usage errors
        code = stop.code
    return code, capsys.readouterr().err


@pytest.mark.parametrize("argv", [
    ["source", "sum()", "--dtype", "nope"],
    ["source", "sum()", "--input", "a"],                       # no dtype
    ["explain", "sum()", "--field", "price:nope"],
    ["source", "sum()", "--dtype", "float32", "--input", "a:float32"],   # used to ignore --input
    ["source", "sum()", "--input", "a:float32", "--field", "b:int32"],
])
def test_cli_bad_input_arguments_are_usage_errors(argv, capsys):
    # A malformed or contradictory --dtype / --input / --field is a usage error (exit 2,
    # argparse's message), like --backend banana; it was exit 1, or silently ignored.
    code, err = _cli_exit(argv, capsys)
    assert code == 2 and "usage:" in err and "Traceback" not in err
    assert _cli_exit(["source", "select(lambda a, b: a * b).sum()", "--input", "a:float32",
                      "--input", "b:int32", "--backend", "opencl"], capsys)[0] == 0


def test_grouped_source_and_explain_take_terminal_like_query():
    # DESIGN.md section 3: source()/explain()'s terminal= is a name, a spec or qc.agg(...);
    # on a group_by it became an aggregate named "terminal" (TypeError).
    k = np.array([1, 0, 1], dtype=np.int32)
    v = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    g = qc.query(k=k, v=v).group_by(lambda r: r.k)
    spec = qc.agg(s=qc.sum(lambda r: r.v), n=qc.count)
    assert g.source("opencl", terminal=spec) == g.source("opencl", s=qc.sum(lambda r: r.v), n=qc.count)
    assert g.explain("cpu", terminal="count") == g.explain("cpu")
    assert "qc_stage1" in g.source("cuda", terminal=qc.max(lambda r: r.v))
    with pytest.raises(TypeError, match="not both"):
        g.source("cuda", terminal="count", n=qc.count)


@pytest.mark.parametrize("backend", ["webgpu", "metal"])
def test_source_of_a_64_bit_scan_raises_unsupported_type_error(backend):
    # The column operation's kernels leaked querycompute._codegen's UnsupportedType (not a
    # QueryError) where the passes raise qc.UnsupportedTypeError naming the backend.
    q = qc.query(np.arange(5.0)).scan(lambda a, v: a + v, 0.0)
    with pytest.raises(UnsupportedTypeError, match=f"backend '{backend}'.*float64"):
        q.source(backend)
