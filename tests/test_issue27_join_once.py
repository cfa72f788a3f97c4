"""Issue 27 ("common subplans run once", DESIGN.md section 5e): a joined query with operators
runs once per join; its key is computed from the columns it gave, not by running its
operators a second time. Results are unchanged (checked against plain Python)."""
from __future__ import annotations

import numpy as np
import pytest

import querycompute as qc
from querycompute.graph import graph as qc_graph
from querycompute.api.query import Query
from querycompute.run import engine


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_a_joined_query_with_operators_runs_once(backend, monkeypatch):
    rng = np.random.default_rng(7)
    a = {"id": rng.integers(0, 40, 300).astype(np.int32), "v": rng.random(300)}
    b = {"id": np.arange(40, dtype=np.int32), "w": rng.random(40), "flag": (np.arange(40) % 3).astype(np.int8)}
    runs, queries = [], []
    real_side = engine.run_side

    def counted(chain, term, rows=None):   # the sub-plans the planner and the executor run
        assert not isinstance(chain, Query)       # a Chain, never the user's Query
        runs.append(chain._kinds)
        return real_side(chain, term, rows)

    def no_query(self, *args, **kwargs):
        queries.append(self._kinds)
        raise AssertionError("the other side ran as a Query")
    monkeypatch.setattr(engine, "run_side", counted)
    for method in ("to_array", "_to_codes", "to_list", "lowered"):
        monkeypatch.setattr(Query, method, no_query)
    other = qc.query(b).where(lambda r: r.flag > 0)
    got = qc.query(a).on(backend).join(other, lambda r: r.id, lambda o: o.id, lambda x, y: x.v * y.w).sum()
    assert not queries
    # the plan's schema probes ran it on zero rows, (..., Take); at run time it ran once:
    # the where ran once, a select after it keeping the fields the join reads (id, w: its own
    # `flag` is not carried to the join, logical.project's other_out); the key picked in place
    W, S = qc_graph.Where, qc_graph.Select
    assert [r for r in runs if r in ((W,), (W, S))] == [(W, S)]
    want = [v * b["w"][i] for i, v in zip(a["id"], a["v"]) if b["flag"][i] > 0]
    assert runs[-1] == (W, S) and all(r[-1] is qc_graph.Take for r in runs[:-1])
    np.testing.assert_allclose(got, np.sum(want), rtol=1e-12)


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_a_computed_key_over_the_joined_querys_result(backend):
    ids = np.arange(30, dtype=np.int32)
    other = qc.query(ids).where(lambda v: v % 2 == 0).select(lambda v: v * 3)   # a scalar element
    x = np.array([0, 3, 4, 6, 7, 12, 12], dtype=np.int32)
    got = qc.query(x).on(backend).join(other, lambda v: v, lambda o: o // 3 * 3, lambda v, o: v + o).to_list()
    others = [v * 3 for v in range(30) if v % 2 == 0]
    want = [int(v + o) for v in x for o in others if o // 3 * 3 == v]
    assert got == want
    pairs = qc.query(ids, ids * 2).where(lambda i, j: i > 25)                     # a tuple element
    got = qc.query(x).on(backend).left_join(pairs, lambda v: v, lambda o: o[1] - 40, lambda v, o: v).count()
    assert got == len(x)


def test_no_layer_below_the_api_runs_a_query_method():
    """Issue 27 item 6: the executor runs sub-plans (Chains through the engine), never Query
    objects: no module under plan/, run/, backends/, sources/ or graph/ calls a Query's
    terminal or builder methods (the AST: calls, not the error messages that name them; the
    names here are Query's own, where a plan's Lowering or NumPy have no method of that name)."""
    import ast
    import os
    root = os.path.dirname(os.path.abspath(qc.__file__))
    methods = {"to_list", "_to_codes", "lowered", "on", "order_by", "left_join", "then_by",
               "intersect_by", "except_by", "to_dict", "to_pandas"}
    found = []
    for layer in ("plan", "run", "backends", "sources", "graph"):
        for d, _, files in os.walk(os.path.join(root, layer)):
            for f in files:
                if f.endswith(".py"):
                    path = os.path.join(d, f)
                    for node in ast.walk(ast.parse(open(path).read())):
                        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                                and node.func.attr in methods:
                            found.append(f"{os.path.relpath(path, root)}:{node.lineno} .{node.func.attr}(")
    assert not found, found
