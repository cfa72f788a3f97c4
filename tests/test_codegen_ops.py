"""Issue 12 item 2: the kernel compiler is organised by stage op. Every stage op a Pass can
name has one home in querycompute/_codegen/ops/ (its algorithm explained first, its GPU and
CPU lowerings, its result decoding), and one reference function in the numpy backend."""
from __future__ import annotations

import importlib

import numpy as np
import pytest

import querycompute as qc
from querycompute._codegen.ir import expr as E
from querycompute._codegen.ir import program as P
from querycompute._codegen.gpu import render
from querycompute._codegen.ops import STAGE_OPS
from querycompute.backends.reference.numpy_ref import RUN_STAGE_OP

X = E.Load(0, "float32")


def one_of_each_terminal() -> list[P.Pass]:
    """A pass of every terminal shape: ToArray without and with a filter, Reduce."""
    inputs = (P.InputSpec("x", "float32"),)
    plain = P.ElementProgram(inputs, (), (), (X,))
    filtered = P.ElementProgram(inputs, (), (P.Filter(E.Compare("gt", X, E.Const(0.0, "float32"))),), (X,))
    return [P.Pass(plain, P.ToArray()), P.Pass(filtered, P.ToArray()),
            P.Pass(filtered, P.Reduce((P.Agg("sum", (X,), "float32"),)))]


def test_item2_stage_ops_cover_every_stage_op():
    named = {p.stage_op for p in one_of_each_terminal()}
    assert named == set(STAGE_OPS) == set(RUN_STAGE_OP)
    for p in one_of_each_terminal():
        op = STAGE_OPS[p.stage_op]
        assert render(p, "opencl").shape == op.SHAPE
        for part in ("SHAPE", "lower_gpu", "render_numba", "describe"):
            assert hasattr(op, part), (p.stage_op, part)


@pytest.mark.parametrize("module", ["map", "compact", "reduce", "reduce.gpu", "reduce.cpu"])
def test_item2_every_op_module_explains_its_algorithm(module):
    doc = importlib.import_module(f"querycompute._codegen.ops.{module}").__doc__ or ""
    assert len(doc) > (150 if "." in module else 600), module
    if "." not in module:       # the op's own doc: what runs where, and why the result is fixed
        for word in ("Algorithm", "GPU", "CPU", "order", "decoding"):
            assert word in doc, (module, word)


def test_item2_ops_and_references_agree():
    """Each stage op on the cpu backend against its numpy reference function."""
    x = np.linspace(-3, 3, 1001).astype(np.float32)
    q = qc.query(x)
    for backend in ("numpy", "cpu"):
        np.testing.assert_array_equal(q.select(lambda v: v * 2).on(backend).to_array(), x * 2)
        np.testing.assert_array_equal(q.where(lambda v: v > 0).on(backend).to_array(), x[x > 0])
        assert q.where(lambda v: v > 0).on(backend).count() == int(np.count_nonzero(x > 0))
