"""Issue 11 item 4: a lambda whose source file was edited after import must not run the new text.

Python runs the code object compiled at import; the kernel is built from the re-read source.
When the two disagree the query raises UnsupportedLambdaError saying the file changed, and an
unchanged file (closures, defaults, nested lambdas, several per line, class bodies, defs)
still works exactly as plain Python computes."""
from __future__ import annotations

import importlib
import linecache
import os
import sys
import textwrap
import uuid

import numpy as np
import pytest

import querycompute as qc
from querycompute.errors import UnsupportedLambdaError
from querycompute.frontend import lambda_source

CHANGED = "changed since the function was defined"


@pytest.fixture
def module(tmp_path, monkeypatch):
    """make(text) imports `text` as a fresh module from tmp_path; edit(mod, text) rewrites
    its file (newer mtime, no .pyc) without re-importing it."""
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    names = []

    def make(text: str):
        name = f"qc_item4_{uuid.uuid4().hex[:10]}"
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(text))
        names.append(name)
        return importlib.import_module(name)

    def edit(mod, text: str):
        path = mod.__file__
        with open(path, "w") as f:
            f.write(textwrap.dedent(text))
        later = os.stat(path).st_mtime + 5
        os.utime(path, (later, later))       # so the import system and linecache see a change

    yield make, edit
    for name in names:
        sys.modules.pop(name, None)


X = np.arange(-5, 20, dtype=np.int64)


def _select(fn, backend="numpy"):
    return qc.query(X).select(fn).on(backend).to_array()


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_item4_edited_constant_raises_instead_of_running_the_new_text(module, backend):
    make, edit = module
    mod = make("F = lambda v: v * 2\n")
    edit(mod, "F = lambda v: v * 3\n")
    np.testing.assert_array_equal(mod.F(X), X * 2)          # Python still runs the old code
    with pytest.raises(UnsupportedLambdaError, match=CHANGED) as info:
        _select(mod.F, backend)
    assert f"{mod.__file__}:1" in str(info.value)
    assert "re-import" in str(info.value)


def test_item4_edit_that_shifts_lines_onto_another_lambda(module):
    make, edit = module
    mod = make("""\
        F = lambda v: v * 2
        G = lambda v: v - 1
    """)
    # A line inserted above: F's recorded position now holds another lambda's body.
    edit(mod, """\
        Z = lambda v: v + 100
        F = lambda v: v * 2
        G = lambda v: v - 1
    """)
    with pytest.raises(UnsupportedLambdaError, match=CHANGED):
        _select(mod.F)


def test_item4_edit_that_leaves_nothing_at_the_position(module):
    make, edit = module
    mod = make("F = lambda v: v * 2\n")
    edit(mod, "# nothing here any more\n\n\nF = lambda v: v * 2\n")
    with pytest.raises(UnsupportedLambdaError, match=CHANGED):
        _select(mod.F)


def test_item4_edited_def_and_closure_are_detected(module):
    make, edit = module
    text = """\
        def f(v):
            return v * 2

        def make(k):
            return lambda v: v * k + 1
    """
    mod = make(text)
    edit(mod, text.replace("v * 2", "v * 5").replace("k + 1", "k + 2"))
    with pytest.raises(UnsupportedLambdaError, match=CHANGED):
        _select(mod.f)
    with pytest.raises(UnsupportedLambdaError, match=CHANGED):
        _select(mod.make(3))


def test_item4_edit_that_only_changes_which_name_is_read(module):
    make, edit = module
    text = """\
        A = 2
        B = 7

        def make(k, j):
            return lambda v: v * k + A
    """
    mod = make(text)
    edit(mod, text.replace("v * k + A", "v * j + B"))
    with pytest.raises(UnsupportedLambdaError, match=CHANGED):
        _select(mod.make(3, 4))


def test_item4_float_constant_sign_change_is_detected(module):
    make, edit = module
    mod = make("F = lambda v: v + 0.0\n")
    edit(mod, "F = lambda v: v + -0.0\n")
    with pytest.raises(UnsupportedLambdaError, match=CHANGED):
        _select(mod.F)


UNCHANGED = """\
    from __future__ import annotations
    import numpy as np

    K = 3
    PAIR = (lambda v: v + 1), (lambda v: v * 2)
    OUTER = lambda w: (lambda u: u + w)

    def plain(v: int) -> int:
        "A docstring."
        return v * K

    def make(k, j=4):
        scale = k * 2
        return lambda v: v * scale + j

    def nested(k):
        def inner(v):
            return np.abs(v - k)
        return inner

    def chain(xs):
        import querycompute as qc
        return (qc.query(xs)
                  .select(lambda v: v * K
                          + 1)
                  .where(lambda v: v % 2 == 0)
                  .on("numpy")
                  .to_array())

    class Holder:
        __hidden = 5
        F = staticmethod(lambda v: v - 7)

        def method(self):
            __local = 2
            return lambda v: v * __local

    PER_K = [lambda v, k=k: v + k for k in range(2)]
    IN_COMP = [(lambda v: v * k) for k in range(1, 3)]
"""


def test_item4_unchanged_files_still_work(module):
    make, _ = module
    mod = make(UNCHANGED)
    cases = [mod.PAIR[0], mod.PAIR[1], mod.OUTER(5), mod.plain, mod.make(3), mod.nested(2),
             mod.Holder.F, mod.Holder().method(), *mod.IN_COMP]
    for fn in cases:
        want = np.array([fn(v) for v in X.tolist()], dtype=np.int64)
        np.testing.assert_array_equal(_select(fn), want, err_msg=lambda_source(fn).text)
    np.testing.assert_array_equal(mod.chain(X), [v * 3 + 1 for v in X.tolist() if (v * 3 + 1) % 2 == 0])
    # A default value is refused for what it is, not taken for an edited file.
    with pytest.raises(UnsupportedLambdaError, match="default values"):
        _select(mod.PER_K[0])


def test_item4_text_lambdas_have_no_file_to_check():
    from querycompute.frontend import parse_chain
    (_, (src,), _), = parse_chain("select(lambda v: v * 2 + 1)")
    assert src.code is None           # the CLI's lambdas: text only, nothing to compare with
    np.testing.assert_array_equal(qc.query(X).select(src).on("numpy").to_array(), X * 2 + 1)


def test_item4_reloaded_module_runs_its_new_text_even_with_a_stale_linecache(module):
    make, edit = module
    mod = make("F = lambda v: v * 2\n")
    np.testing.assert_array_equal(_select(mod.F), X * 2)     # linecache now holds "* 2"
    assert any("v * 2" in line for line in linecache.getlines(mod.__file__))
    edit(mod, "F = lambda v: v * 3\n")
    importlib.reload(mod)
    np.testing.assert_array_equal(_select(mod.F), X * 3)


def test_item4_check_runs_once_per_code_object(module):
    make, edit = module
    mod = make("F = lambda v: v * 2\n")
    np.testing.assert_array_equal(_select(mod.F), X * 2)
    edit(mod, "F = lambda v: v * 3\n")
    # The first query already matched the code against the text it was compiled from: the
    # kernel is that text's, whatever the file says now.
    np.testing.assert_array_equal(_select(mod.F), X * 2)


def _ipython_cell(text: str, name: str) -> dict:
    """Run `text` the way IPython runs a cell: its text in linecache under the cell's name,
    each top-level statement compiled as a module of its own."""
    import ast
    linecache.cache[name] = (len(text), None, text.splitlines(True), name)
    ns: dict = {}
    for stmt in ast.parse(text).body:
        exec(compile(ast.Module([stmt], []), name, "exec", dont_inherit=True), ns)
    return ns


def test_item4_ipython_cells_are_checked_without_false_alarms():
    name = f"<ipython-input-{uuid.uuid4().hex[:8]}>"
    try:
        ns = _ipython_cell("import numpy as np\nF = lambda v: np.abs(v) * 2\n", name)
        np.testing.assert_array_equal(_select(ns["F"]), np.abs(X) * 2)
        ns = _ipython_cell("import numpy as np\nG = lambda v: np.abs(v) * 2\n", name + "2")
        linecache.cache[name + "2"] = (0, None, ["import numpy as np\n",
                                                 "G = lambda v: np.abs(v) * 3\n"], name + "2")
        with pytest.raises(UnsupportedLambdaError, match=CHANGED):
            _select(ns["G"])
    finally:
        linecache.cache.pop(name, None)
        linecache.cache.pop(name + "2", None)


def test_item4_recursive_def_is_refused_for_recursion_not_for_a_changed_file(module):
    make, _ = module
    mod = make("""\
        def f(v):
            return v if v < 1 else f(v - 1)
    """)
    with pytest.raises(UnsupportedLambdaError) as info:
        _select(mod.f)
    assert CHANGED not in str(info.value)
