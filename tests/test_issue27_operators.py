"""Issue 27 item 2 (DESIGN.md section 2, "An operator is one object"): each operator node
class declares what the planner, column pruning, `auto`, Dask and the CLI ask of it; no other
module keeps a table of operator letters; the planner and the executor dispatch on the node
and on the stage kind, never through a chain of cases."""
from __future__ import annotations

import ast
import inspect
import itertools
import os
import re

import numpy as np
import pytest

import querycompute as qc
from querycompute.api.query import Query
from querycompute.graph import graph as G
from querycompute.plan import stage_kinds as S
from querycompute.plan.group_plan import GroupStage
from querycompute.plan.join_plan import JoinStage, SemiJoinStage
from querycompute.plan.stages import _Planner as Planner
from querycompute.run import pipeline

ROOT = os.path.dirname(os.path.abspath(qc.__file__))


def test_every_node_declares_itself_consistently():
    assert len(set(G.OPERATORS)) == len(G.OPERATORS)
    for cls in G.OPERATORS:
        assert issubclass(cls, G.Op) and cls.kind != "?"
        assert "letter" not in vars(cls) and not hasattr(cls, "letter")     # no letter codes
        if cls.breaks_stage:
            # planned by its own step, or a further key of the sort before it (then_by)
            assert cls.stage is not None or cls.then, cls
            if cls.stage is not None:
                assert callable(getattr(Planner, "plan_" + cls.stage, None)), cls
        else:
            assert cls.stage is None and not cls.heavy, cls
        assert cls.dask in (None, "operator", "last")
        if cls.cli:
            assert callable(getattr(Query, cls.kind, None)), cls     # a Query method of that name


def test_the_derived_rules():
    s, w = G.Select, G.Where
    assert G.heavy((s, w, G.OrderBy)) and G.heavy((G.Distinct,)) and G.heavy((G.GroupBy,))
    assert G.heavy((s, G.Join, G.JoinOther, G.JoinResult))
    assert not G.heavy((s, w, G.Scan)) and not G.heavy((G.Take, G.Skip, G.TakeWhile, G.SkipWhile, G.Reverse))
    assert G.first_breaker((s, w, G.GroupBy)) == -1        # a trailing group_by ends the chain
    assert G.first_breaker((s, w, G.Distinct, G.GroupBy)) == 2
    assert G.CLI_OPERATORS == ("order_by", "order_by_descending", "then_by", "then_by_descending",
                               "take", "skip", "take_while", "skip_while", "reverse", "distinct",
                               "scan")


def _sources():
    for d, _, files in os.walk(ROOT):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(d, f)
                yield os.path.relpath(path, ROOT), open(path).read()


def test_a_chain_keeps_node_classes_and_no_table_decodes_them():
    q = qc.query(np.arange(4.0)).select(lambda v: v * 2).where(lambda v: v > 1).order_by()
    assert q._kinds == (G.Select, G.Where, G.OrderBy)
    assert [type(n) for n in q.nodes()] == list(q._kinds)
    # no module keeps a table from codes back to node classes, or sets of operator names
    found = [f"{rel}: {m.group(0)}" for rel, text in _sources()
             for m in re.finditer(r"\bNODES\b|\.letter\b|\bnode_class\(", text)]
    assert not found, found


def test_no_case_per_stage_kind_in_the_executor_or_explain():
    for rel in (os.path.join("run", "pipeline.py"), os.path.join("api", "explain_stages.py")):
        tree = ast.parse(open(os.path.join(ROOT, rel)).read())
        cases = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "isinstance":
                cases.append(ast.unparse(node))
            if isinstance(node, ast.Compare) and any(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops) \
                    and "Stage" in ast.unparse(node):
                cases.append(ast.unparse(node))
        stage_cases = [c for c in cases if "Stage" in c]
        # one stays: a pass fuses with the group_by after it (pipeline.fused_group)
        assert len(stage_cases) <= 1, (rel, stage_cases)


def test_every_stage_kind_runs_itself():
    kinds = [c for _, c in inspect.getmembers(S, inspect.isclass)
             if issubclass(c, S.Stage) and c is not S.Stage] + [GroupStage, JoinStage, SemiJoinStage]
    assert len(kinds) == 11
    for cls in kinds:
        assert cls.run is not S.Stage.run, cls
    assert "isinstance" not in inspect.getsource(pipeline.StagedPrepared._run_stages)


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
def test_every_stage_kind_through_the_executor_matches_numpy(backend):
    x = (np.arange(60, dtype=np.int32) * 7) % 23
    y = np.arange(10, dtype=np.int32)
    q = qc.query(x).on(backend)
    assert q.order_by(lambda v: -v).take(4).to_list() == sorted(x.tolist(), reverse=True)[:4]
    assert q.distinct().to_list() == list(dict.fromkeys(x.tolist()))
    assert q.scan(lambda a, v: a + v, 0).to_list() == np.cumsum(x).tolist()
    assert q.reverse().take_while(lambda v: v > 2).to_list() == \
        list(itertools.takewhile(lambda v: v > 2, x[::-1].tolist()))
    assert q.skip(3).take(2).to_list() == x[3:5].tolist()
    assert q.last() == x[-1] and q.element_at(5) == x[5]
    got = q.join(qc.query(y).on(backend), lambda v: v, lambda w: w, lambda a, b: a + b).to_list()
    assert got == [2 * v for v in x.tolist() if v < 10]
    assert q.except_by(qc.query(y), lambda v: v, lambda w: w).to_list() == [v for v in x.tolist() if v >= 10]
    groups = q.group_by(lambda v: v % 3).count()
    keys, counts = np.unique(x % 3, return_counts=True)
    assert groups["key"].tolist() == keys.tolist() and groups["count"].tolist() == counts.tolist()
