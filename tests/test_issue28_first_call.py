"""Issue 28: a new query's first call compiles only what depends on its lambdas.

- the group_by aggregates' module is one text per aggregates' layout, whatever the query
  (ops/group/cpu.py NAME), so a second query with the same aggregates loads it;
- the fused group_by has no merge of its own (the group kernels' group_merge_ids and that
  module's merge run it) and, before compiling its module, gives up at once when the first
  chunk's survivors already hold more than `limit` keys (fused_cpu.head_groups);
- a lambda's source text is cut from its file split once (capture.source_segment).
Results are compared with the numpy backend (the oracle) and plain Python.
"""
import ast
import math

import numpy as np
import pytest

import querycompute as qc
from querycompute._codegen.ir.stage_specs import GroupAgg, GroupSpec
from querycompute._codegen.ops.group import cpu as numba_group
from querycompute._codegen.sum_order import CHUNK
from querycompute.frontend.capture import source_segment
from querycompute.run import pipeline


def test_aggregates_module_is_one_text_per_layout():
    aggs = (GroupAgg("sum", "float64"), GroupAgg("count", "int64"), GroupAgg("min", "int32"))
    a = numba_group.render(GroupSpec(("int32",), aggs, name="qc_group3"), cache=True)
    b = numba_group.render(GroupSpec(("uint8", "int64"), aggs, name="qc_group11"), cache=True)
    assert a == b and f"def {numba_group.NAME}_merge(" in a and "qc_group" not in a
    c = numba_group.render(GroupSpec(("int32",), aggs[:2], name="qc_group3"), cache=True)
    assert c != a


def _fused_modules() -> list:
    rt = pipeline.stage_runtime("cpu")
    return [] if rt._fused is None else list(rt._fused._mods._entries.values())


def keyed(k: np.ndarray, v: np.ndarray, backend: str) -> dict:
    """A filter, one int64 key, a sum, a min and a count."""
    return (qc.query(k, v).on(backend).where(lambda k, v: v > -4).group_by(lambda k, v: k)
            .agg(s=qc.sum(lambda k, v: v), lo=qc.min(lambda k, v: v), n=qc.count))


def python_keyed(k: np.ndarray, v: np.ndarray) -> dict:
    groups: dict = {}
    for key, x in zip(k.tolist(), v.tolist()):
        if x > -4:
            groups.setdefault(key, []).append(x)
    keys = sorted(groups)
    return {"key": keys, "lo": [min(groups[g]) for g in keys], "n": [len(groups[g]) for g in keys],
            "s": [math.fsum(groups[g]) for g in keys]}


def kernels() -> list:
    return [r.name for r in qc.last_trace().kernels]


@pytest.mark.parametrize("distinct", [1, 3, 4096, 4097, 9000])
def test_fused_group_by_first_chunk_limit(distinct):
    """At most `limit` keys among the first chunk's survivors: the fused module; more: the
    two-step path at once, no fused module compiled (head_groups is exact at the limit:
    every row survives the filter). Both equal numpy and Python."""
    n = CHUNK + 1000
    rng = np.random.default_rng(distinct)
    k = (np.arange(n) % distinct).astype(np.int64) - distinct // 2           # negatives too
    k[k == k.max()] = np.iinfo(np.int64).max if distinct > 2 else k.max()   # extreme ints
    k = k[rng.permutation(n)]
    k[:CHUNK] = np.sort(k[:CHUNK])[np.argsort(rng.random(CHUNK))]
    v = rng.uniform(-3, 5, n)
    v[::5] = -4.5                                                             # filtered out
    first = k[:CHUNK][v[:CHUNK] > -4]
    rt = pipeline.stage_runtime("cpu")
    if rt._fused is not None:
        rt._fused._mods.clear()          # a first call of the fused path (the text stays loaded)
    before = len(_fused_modules())
    got = keyed(k, v, "cpu")
    fused = any("_fchunks_" in name for name in kernels())
    assert fused == (len(np.unique(first)) <= 4096), (kernels(), len(np.unique(first)))
    if not fused:
        assert len(_fused_modules()) == before          # nothing compiled only to give up
    ref = keyed(k, v, "numpy")
    for name in ("key", "n", "lo"):
        np.testing.assert_array_equal(got[name], ref[name], err_msg=name)
    py = python_keyed(k, v)
    for name in ("key", "n", "lo"):
        np.testing.assert_array_equal(got[name], np.asarray(py[name], dtype=got[name].dtype))
    tol = 4 * got["n"] * np.finfo(np.float64).eps * np.abs(v).sum()
    assert np.all(np.abs(got["s"] - np.asarray(py["s"])) <= tol)


def test_fused_module_has_no_merge_nor_numpy_allocation():
    """The per-query module holds the lambdas' part only: the merge is generic and the
    tables come from the group kernels (no np.full / np.searchsorted to type per query)."""
    t = {"k": (np.arange(3000) % 7).astype(np.uint8), "v": np.arange(3000.0)}
    got = qc.query(t).on("cpu").where(lambda r: r.v > 10).group_by(lambda r: r.k) \
        .agg(s=qc.sum(lambda r: r.v), n=qc.count)
    assert any("_fchunks_" in name for name in kernels()) and \
        any(name.endswith("_aggs_merge") for name in kernels()), kernels()
    np.testing.assert_array_equal(got["n"], [np.sum((t["k"] == j) & (t["v"] > 10)) for j in range(7)])
    texts = [m.source for m in _fused_modules()]
    assert texts
    for text in texts:
        for banned in ("_fmerge", "_merge(", "np.full(", "np.searchsorted("):
            assert banned not in text, banned


def test_empty_input_and_nan_values():
    k = np.zeros(0, np.int64)
    v = np.zeros(0)
    got, ref = keyed(k, v, "cpu"), keyed(k, v, "numpy")
    assert list(got) == list(ref) and all(len(x) == 0 for x in got.values())
    k = np.array([2, 1, 2, 1, 3], np.int64)
    v = np.array([np.nan, 1.0, 2.0, -5.0, 0.5])
    got, ref = keyed(k, v, "cpu"), keyed(k, v, "numpy")
    for name in got:
        np.testing.assert_array_equal(got[name], ref[name], err_msg=name)      # NaN wins min / sum


@pytest.mark.parametrize("text", [
    "f = (lambda a,\n     b: a + b)\n",
    "f = (lambda a,\r\n     b: a + 'é')\r\n",
    "x = 1\rf = lambda a: a * 2\r",
    "f = lambda a: a  # no newline at the end",
    "",
])
def test_source_segment_equals_ast(text):
    for node in ast.walk(ast.parse(text)):
        if hasattr(node, "lineno"):
            assert source_segment(text, node) == (ast.get_source_segment(text, node) or "")
