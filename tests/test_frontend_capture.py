"""lambda_source / capture_values: finding the exact lambda in its file and its captured values."""
import ast
import functools
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from querycompute.errors import UnsupportedLambdaError
from querycompute.frontend import capture_key, capture_values, lambda_source

GLOBAL_K = 10

PAIR = (lambda v: v + 1), (lambda v: v * 2)
TWINS = (lambda v: v + 1), (lambda v: v + 1)
OUTER = lambda w: (lambda u: u + w)  # noqa: E731
MULTI = dict(a=lambda v: v * 2,
             b=lambda v: (v
                          + 1) if v > 3
             else v - 1)
BACKSLASH = lambda v: v + \
    3  # noqa: E731
NON_ASCII = ("héllo → wörld ✓", lambda v: v * 3)[1]


def plain(v):
    "A docstring is allowed before the return."
    return v * GLOBAL_K


def two_statements(v):
    w = v * 2
    return w


def text(fn):
    return lambda_source(fn).text


def test_several_lambdas_on_one_line():
    assert text(PAIR[0]) == "lambda v: v + 1"
    assert text(PAIR[1]) == "lambda v: v * 2"


def test_identical_lambdas_on_one_line_are_told_apart_by_column():
    a, b = lambda_source(TWINS[0]), lambda_source(TWINS[1])
    assert a.text == b.text == "lambda v: v + 1"
    assert a.body.col_offset < b.body.col_offset


def test_nested_lambdas():
    outer = lambda_source(OUTER)
    assert outer.params == ("w",) and isinstance(outer.body, ast.Lambda)
    inner_fn = OUTER(5)
    inner = lambda_source(inner_fn)
    assert inner.params == ("u",) and inner.captures == ("w",)
    assert capture_values(inner_fn, inner) == {"w": 5}


def test_multi_line_and_backslash():
    assert ast.unparse(lambda_source(MULTI["a"]).body) == "v * 2"
    assert ast.unparse(lambda_source(MULTI["b"]).body) == "v + 1 if v > 3 else v - 1"
    assert ast.unparse(lambda_source(BACKSLASH).body) == "v + 3"


def test_non_ascii_text_before_the_lambda():
    src = lambda_source(NON_ASCII)
    assert src.text == "lambda v: v * 3"
    line = src.body.lineno
    # the location is counted in UTF-8 bytes, as ast does
    with open(__file__, encoding="utf-8") as f:
        source_line = f.read().splitlines()[line - 1]
    assert source_line.encode()[src.body.col_offset:].startswith(b"v * 3")


def test_def_with_docstring():
    src = lambda_source(plain)
    assert src.params == ("v",) and ast.unparse(src.body) == "v * GLOBAL_K"
    assert src.captures == ("GLOBAL_K",)
    assert capture_values(plain, src) == {"GLOBAL_K": 10}
    assert src.text.startswith("def plain(v):")


def test_def_with_statements_is_rejected_with_location():
    with pytest.raises(UnsupportedLambdaError) as e:
        lambda_source(two_statements)
    assert e.value.construct == "Assign"
    assert "single `return expr`" in str(e.value)
    line = two_statements.__code__.co_firstlineno + 1
    assert e.value.where == f"{__file__}:{line}:5"


def test_exec_lambda_has_no_source():
    ns = {}
    exec("f = lambda v: v + 1", ns)
    with pytest.raises(UnsupportedLambdaError, match="no source.*IPython"):
        lambda_source(ns["f"])


@pytest.mark.parametrize("fn, what", [
    (abs, "builtin function 'abs'"),
    (np.sqrt, "numpy ufunc 'sqrt'"),
    (functools.partial(plain), "functools.partial"),
    ("abc".upper, "builtin function 'upper'"),
])
def test_non_functions_are_rejected_with_what_is_accepted(fn, what):
    with pytest.raises(UnsupportedLambdaError) as e:
        lambda_source(fn)
    assert what in str(e.value) and "a lambda" in str(e.value)


def test_bound_methods_are_rejected():
    class Holder:
        def m(self, v):
            return v
    lambda_source(Holder.m)     # the plain function is fine, and cached...
    with pytest.raises(UnsupportedLambdaError, match="bound method"):
        lambda_source(Holder().m)   # ...but that cache never serves the bound method


@pytest.mark.parametrize("fn, what", [
    (lambda v, k=2: v * k, "default values"),
    (lambda *vs: vs[0], "*vs"),
    (lambda v, *, k: v, "keyword-only"),
    (lambda **kw: 1, "**kw"),
])
def test_unsupported_parameters(fn, what):
    with pytest.raises(UnsupportedLambdaError, match="parameters") as e:
        lambda_source(fn)
    assert what in str(e.value)
    assert e.value.where.startswith(f"{__file__}:")


def test_cached_per_code_object():
    fns = [lambda v: v + i for i in range(3)]
    assert lambda_source(fns[0]) is lambda_source(fns[2])
    assert [capture_values(f, lambda_source(f)) for f in fns] == [{"i": 2}] * 3


def test_closure_wins_over_global_and_builtins_are_found():
    GLOBAL_K = 3  # noqa: F841 -- shadows the module global inside the lambda
    f = lambda v: abs(v) * GLOBAL_K  # noqa: E731
    src = lambda_source(f)
    assert src.captures == ("abs", "GLOBAL_K")
    assert capture_values(f, src) == {"abs": abs, "GLOBAL_K": 3}


def test_unbound_names_are_named_with_location():
    f = lambda v: v + later  # noqa: E731,F821
    with pytest.raises(UnsupportedLambdaError, match="'later'") as e:
        capture_values(f, lambda_source(f))
    assert e.value.where.startswith(f"{__file__}:")
    g = lambda v: v + not_defined_anywhere  # noqa: E731,F821
    with pytest.raises(UnsupportedLambdaError, match="not_defined_anywhere"):
        capture_values(g, lambda_source(g))
    later = 1  # noqa: F841 -- assigned after the lambda: the cell is empty above


def test_no_debug_ranges_is_explained(tmp_path):
    script = tmp_path / "nd.py"
    script.write_text(textwrap.dedent("""
        from querycompute.errors import UnsupportedLambdaError
        from querycompute.frontend import lambda_source
        try:
            lambda_source(lambda v: v + 1)
        except UnsupportedLambdaError as e:
            print(e)
    """))
    out = subprocess.run([sys.executable, "-X", "no_debug_ranges", str(script)],
                         capture_output=True, text=True, check=True).stdout
    assert "no_debug_ranges" in out and "nd.py:5" in out


def test_capture_key_holds_types_not_values():
    def make(k):
        return lambda v: np.sqrt(v) * k
    keys = []
    for k in (1, 2, 2.5, np.float32(2), np.float32(3)):
        f = make(k)
        keys.append(capture_key(capture_values(f, lambda_source(f))))
    assert keys[0] == keys[1] and keys[3] == keys[4]
    assert len({keys[0], keys[2], keys[3]}) == 3
    assert ("np", np) in keys[0]
