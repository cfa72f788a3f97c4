"""Issue 26 items 4, 8 (parts): duplicate DataFrame column names; input errors."""
import numpy as np
import pytest

import querycompute as qc
from querycompute.errors import QueryError

pd = pytest.importorskip("pandas")


def test_item4_duplicate_columns_work_while_unused():
    df = pd.DataFrame(np.arange(6.0).reshape(2, 3), columns=["a", "b", "b"])
    got = qc.query(df).select(lambda r: r["a"] * 2).to_array()
    assert np.array_equal(got, np.array([0.0, 6.0]))


def test_item4_duplicate_column_read_names_it():
    df = pd.DataFrame(np.arange(6.0).reshape(2, 3), columns=["a", "b", "b"])
    with pytest.raises(TypeError, match="column 'b'.*name of 2 columns.*rename one") as e:
        qc.query(df).select(lambda r: r["b"] * 2).to_array()
    assert isinstance(e.value, QueryError)


def test_item8_walrus_is_a_clear_unsupported_lambda_error():
    x = np.arange(4.0)
    with pytest.raises(qc.UnsupportedLambdaError,
                       match=r"test_issue26_errors_docs\.py:\d+:\d+: assignment expressions "
                             r"\(:=\) are not supported; write a helper value as a separate "
                             r"select"):
        qc.query(x).select(lambda v: (w := v * 2) + w).to_array()


def test_item8_source_accepts_wgsl_as_the_dialect_name():
    q = qc.query(np.arange(4, dtype=np.float32)).select(lambda v: v * 2)
    assert q.source("wgsl") == q.source("webgpu")
    assert "@compute" in q.source("wgsl")


def test_item8_cli_backend_accepts_wgsl(capsys):
    from querycompute.cli.main import main
    assert main(["source", "select(lambda v: v * 2)", "--backend", "wgsl"]) in (0, None)
    assert "@compute" in capsys.readouterr().out


@pytest.mark.parametrize("build, base, match", [
    (lambda: qc.query(np.array(["a", "b"])).sum(), TypeError, "dtype <U1"),
    (lambda: qc.query(np.arange(3.0), np.arange(4.0)).sum(lambda a, b: a + b), ValueError,
     "equal lengths"),
    (lambda: qc.query(pd.Series([1.0, None], dtype="Float64")).sum(), TypeError, "null"),
    (lambda: qc.query(np.arange(3.0)).take(2.5).to_array(), TypeError, r"take\(\) takes an integer"),
])
def test_item8_input_errors_are_query_errors_and_builtin_errors(build, base, match):
    with pytest.raises(base, match=match) as e:
        build()
    assert isinstance(e.value, QueryError)


def test_item9_guide_states_2d_inputs_run_and_on_lists_webgpu():
    import pathlib
    guide = (pathlib.Path(__file__).parents[1] / "docs" / "guide.md").read_text()
    assert "2-D inputs and object, string or complex dtypes raise" not in guide
    x = np.arange(6.0).reshape(3, 2)
    assert np.array_equal(qc.query(x).select(lambda r: r.sum()).to_array(), x.sum(axis=1))
    on_line = next(line for line in guide.splitlines() if line.startswith("- `.on(backend)`"))
    assert '"webgpu"' in on_line


def test_item9_demo_labels_in_order_explained_and_plain_values(capsys):
    from querycompute.cli.demo import run_demo
    run_demo(n=2000)
    out = capsys.readouterr().out
    results = [line for line in out.splitlines() if line.strip().startswith("result ")]
    assert len(results) == 4
    assert not any("np.float32(" in r or "np.int64(" in r for r in results)
    labels = [line.split()[0] for line in out.splitlines() if line[:2] in ("W1", "W2", "W3", "W4")
              and "(" in line.split()[1]]
    assert labels == ["W1", "W2", "W3", "W4"]
    assert "W1-W4 are the benchmark workloads of DESIGN.md section 8" in out
