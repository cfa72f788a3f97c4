"""Issue 33 item 2: a lambda may call helper functions defined in a file (DESIGN.md section 4).

A helper (a def of straight-line assignments and one return, or a lambda) is inlined into the
kernel; its own captured scalars are kernel parameters; an edit of its source (re-imported)
changes the signature. Loops, if statements, recursion, side effects and unsupported calls in
it are refused at the helper's own file:line:col. Helpers live in modules written to tmp_path,
so their file is not this one.
"""
from __future__ import annotations

import importlib
import itertools
import os
import sys
import textwrap

os.environ.setdefault("WGPU_BACKEND_TYPE", "Vulkan")     # before the device opens

import numpy as np
import pytest

import querycompute as qc

RUNNABLE = ["numpy", "cpu"] + [b for b in ("opencl",) if qc.backends()[b]["available"]]
WEBGPU = ["webgpu"] if qc.backends()["webgpu"]["available"] else []
_count = itertools.count()

PRICING = """\
import numpy as np
RATE = 7
FACTOR = 1.5


def tax(v):
    return v * RATE // 100 + 3


def scale(v):
    \"\"\"A float helper.\"\"\"
    return v * FACTOR + 0.5


def base(v):
    return v * 2


def total(v):
    t = base(v)
    t += 1
    a, b = t, v
    return tax(a) + b


half = lambda v: v / 2


def clipped(v, lo):
    x: float = np.maximum(v, lo)
    return half(x) if x > 10 else x
"""


@pytest.fixture
def module(tmp_path, monkeypatch):
    """write(text) -> a freshly imported module with that source, in its own file. No
    bytecode is written for it: a test that rewrites the file and reloads must read the new
    text (Python trusts a .pyc whose recorded mtime and size match, and a rewrite within the
    same second to a text of the same size matches)."""
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)

    def write(text: str, name: str | None = None):
        name = name or f"qc_helpers_{next(_count)}"
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(text))
        importlib.invalidate_caches()
        return importlib.import_module(name)
    return write


@pytest.mark.parametrize("backend", RUNNABLE)
def test_tax_is_inlined(module, backend):
    m = module(PRICING)
    tax = m.tax
    a = np.arange(-50, 400, dtype=np.int64)
    got = qc.query(a).on(backend).select(lambda v: tax(v) + 1).to_array()
    np.testing.assert_array_equal(got, a * 7 // 100 + 3 + 1)
    assert got.dtype == np.int64


@pytest.mark.parametrize("backend", RUNNABLE + WEBGPU)
def test_tax_int32_and_float32(module, backend):
    m = module(PRICING)
    tax, scale = m.tax, m.scale
    a = np.arange(-50, 400, dtype=np.int32)
    got = qc.query(a).on(backend).select(lambda v: tax(v) + 1).to_array()
    want = tax(a) + 1           # the helper itself on the array: NumPy's own result
    assert got.dtype == want.dtype == np.int32
    np.testing.assert_array_equal(got, want)
    x = np.linspace(-3, 700, 301, dtype=np.float32)
    got = qc.query(x).on(backend).where(lambda v: scale(v) > 1).select(lambda v: scale(v)).to_array()
    want = scale(x)[scale(x) > 1]
    assert got.dtype == want.dtype == np.float32
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("backend", RUNNABLE)
def test_helpers_calling_helpers(module, backend):
    m = module(PRICING)
    total, clipped = m.total, m.clipped
    a = np.arange(-50, 400, dtype=np.int64)
    got = qc.query(a).on(backend).select(lambda v: total(v) * 2).to_array()
    np.testing.assert_array_equal(got, ((a * 2 + 1) * 7 // 100 + 3 + a) * 2)
    x = np.linspace(-5, 40, 91)
    got = qc.query(x).on(backend).select(lambda v: clipped(v, 2.0)).to_array()
    np.testing.assert_array_equal(got, np.where(np.maximum(x, 2.0) > 10, np.maximum(x, 2.0) / 2,
                                                np.maximum(x, 2.0)))


def test_lambda_valued_helper_and_explain(module):
    m = module(PRICING)
    half, tax = m.half, m.tax
    x = np.arange(10, dtype=np.float64)
    q = qc.query(x).on("cpu").select(lambda v: half(v) + 1)
    np.testing.assert_array_equal(q.to_array(), x / 2 + 1)
    # the inlined expression shows in explain() and in the kernel source
    text = qc.query(np.arange(5)).on("cpu").select(lambda v: tax(v) + 1).explain()
    assert "// 100" in text and "+ 3" in text
    assert "100:int64" in qc.query(np.arange(5)).on("cpu").select(lambda v: tax(v)).source("cpu")


def test_helper_capture_is_a_parameter(module):
    m = module(PRICING)
    tax = m.tax
    a = np.arange(0, 300, dtype=np.int64)
    q = qc.query(a).on("cpu").select(lambda v: tax(v))
    np.testing.assert_array_equal(q.to_array(), a * 7 // 100 + 3)
    m.RATE = 9                                        # a new value: no recompile
    np.testing.assert_array_equal(q.to_array(), a * 9 // 100 + 3)
    assert [k.cache for k in qc.last_trace().kernels] == ["memory"]
    m.RATE = 11
    np.testing.assert_array_equal(qc.query(a).on("cpu").select(lambda v: tax(v)).to_array(),
                                  a * 11 // 100 + 3)
    # the same helper name in the caller and in the helper: two parameters, no clash
    RATE = 1000
    np.testing.assert_array_equal(q.on("cpu").select(lambda v: v + RATE).to_array(),
                                  a * 11 // 100 + 3 + 1000)


def test_closure_helper_capture(module):
    def make(k):
        def helper(v):
            return v * k
        return helper
    x = np.arange(6, dtype=np.int64)
    for k in (2, 5):
        h = make(k)                   # a new function object, the same code: one kernel
        np.testing.assert_array_equal(qc.query(x).on("cpu").select(lambda v: h(v) + 1).to_array(),
                                      x * k + 1)
    assert [r.cache for r in qc.last_trace().kernels] == ["memory"]


def test_editing_the_helper_file_recompiles(module, tmp_path):
    name = f"qc_helpers_edit_{next(_count)}"
    m = module("RATE = 7\n\ndef tax(v):\n    return v * RATE // 100 + 3\n", name)
    tax = m.tax
    a = np.arange(0, 300, dtype=np.int64)
    q = qc.query(a).on("cpu").select(lambda v: tax(v) + 1)
    np.testing.assert_array_equal(q.to_array(), a * 7 // 100 + 3 + 1)
    np.testing.assert_array_equal(q.to_array(), a * 7 // 100 + 3 + 1)
    # a different body (the fixture writes no bytecode that could stand for it)
    (tmp_path / f"{name}.py").write_text("RATE = 7\n\ndef tax(v):\n    return v * RATE // 10 - 50\n")
    importlib.invalidate_caches()
    m = importlib.reload(m)
    tax = m.tax
    np.testing.assert_array_equal(q.to_array(), a * 7 // 10 - 50 + 1)
    assert qc.last_trace().kernels[0].cache != "memory"


def test_edited_but_not_reimported_is_refused(module, tmp_path):
    name = f"qc_helpers_stale_{next(_count)}"
    m = module("def f(v):\n    return v + 1\n", name)
    f = m.f
    # Python still runs `v + 1`; the kernel must not compute the new text
    (tmp_path / f"{name}.py").write_text("def f(v):\n    return v * 20\n")
    with pytest.raises(qc.UnsupportedLambdaError, match="source file changed") as e:
        qc.query(np.arange(4)).on("cpu").select(lambda v: f(v)).to_array()
    assert e.value.where.startswith(m.__file__)


REFUSED = """\
import numpy as np
K = [1, 2]
OBJ = object()


def loop(v):
    for i in range(3):
        v = v + i
    return v


def branch(v):
    if v > 0:
        return v
    return -v


def rec(v):
    return rec(v - 1) + 1


def ping(v):
    return pong(v) + 1


def pong(v):
    t = v * 2
    return ping(t)


def shout(v):
    print(v)
    return v


def store(v):
    OBJ.last = v
    return v


def text(v):
    return str(v)


def where_global(v):
    global K
    K = v
    return v
"""


@pytest.mark.parametrize("helper,line,col,construct,words", [
    ("loop", 7, 5, "loop", "loops are not supported"),
    ("branch", 13, 5, "If", "if statements are not supported"),
    ("rec", 19, 12, "recursion", "recursively"),
    ("ping", 28, 12, "recursion", "recursively"),
    ("shout", 32, 5, "side effect", "side effect"),
    ("store", 37, 5, "side effect", "side effect"),
    ("text", 42, 12, "call", "calling str"),
    ("where_global", 46, 5, "Global", "global declarations"),
])
def test_refusals_point_at_the_helper(module, helper, line, col, construct, words):
    m = module(REFUSED)
    fn = getattr(m, helper)
    with pytest.raises(qc.UnsupportedLambdaError) as e:
        qc.query(np.arange(4)).on("cpu").select(lambda v: fn(v) + 1).to_array()
    assert e.value.where == f"{m.__file__}:{line}:{col}"
    assert e.value.construct == construct
    assert str(e.value).startswith(f"{m.__file__}:{line}:{col}: ") and words in str(e.value)
    assert f"(in helper fn() called at {__file__}:" in str(e.value)


def test_helper_without_source_is_refused():
    ns = {}
    exec("def h(v):\n    return v + 1\n", ns)
    h = ns["h"]
    with pytest.raises(qc.UnsupportedLambdaError, match="no source for h"):
        qc.query(np.arange(4)).on("cpu").select(lambda v: h(v)).to_array()


def test_helper_argument_count_and_defaults(module):
    m = module("def two(v, w):\n    return v + w\n\ndef dflt(v, k=2):\n    return v * k\n")
    two, dflt = m.two, m.dflt
    with pytest.raises(qc.UnsupportedLambdaError, match=r"two\(\) takes 2 argument"):
        qc.query(np.arange(4)).on("cpu").select(lambda v: two(v)).to_array()
    with pytest.raises(qc.UnsupportedLambdaError, match="default values are not supported") as e:
        qc.query(np.arange(4)).on("cpu").select(lambda v: dflt(v, 3)).to_array()
    assert e.value.where == f"{m.__file__}:4:1"


def test_helper_called_through_its_module(module, tmp_path):
    name = f"qc_helpers_mod_{next(_count)}"
    pricing = module("RATE = 7\n\ndef tax(v):\n    return v * RATE // 100 + 3\n", name)
    a = np.arange(0, 300, dtype=np.int64)
    q = qc.query(a).on("cpu").select(lambda v: pricing.tax(v) + 1)
    np.testing.assert_array_equal(q.to_array(), a * 7 // 100 + 3 + 1)
    pricing.RATE = 9                       # the module's capture is a kernel parameter
    np.testing.assert_array_equal(q.to_array(), a * 9 // 100 + 3 + 1)
    assert [k.cache for k in qc.last_trace().kernels] == ["memory"]
    # reload keeps the module object but makes a new tax: a new signature, not a stale kernel
    (tmp_path / f"{name}.py").write_text("RATE = 7\n\ndef tax(v):\n    return v * RATE // 10 - 50\n")
    importlib.invalidate_caches()
    importlib.reload(pricing)
    np.testing.assert_array_equal(q.to_array(), a * 7 // 10 - 50 + 1)


def test_a_def_with_assignments_passed_directly_points_to_helpers(module):
    m = module(PRICING)
    with pytest.raises(qc.UnsupportedLambdaError, match=r"called as a helper: select\(lambda v: total\(v\)\)"):
        qc.query(np.arange(4)).on("cpu").select(m.total).to_array()


def test_numba_njit_helper_inlines_its_python_function(module):
    pytest.importorskip("numba")
    m = module("import numba\nRATE = 7\n\n@numba.njit\ndef tax(v):\n    return v * RATE // 100 + 3\n")
    tax = m.tax
    a = np.arange(0, 300, dtype=np.int64)
    np.testing.assert_array_equal(qc.query(a).on("cpu").select(lambda v: tax(v) + 1).to_array(),
                                  a * 7 // 100 + 3 + 1)
