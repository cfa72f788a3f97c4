"""Issue 27: WGSL was a second printer (1,094 lines in 4 files). Now one walk over kernel IR
(`_codegen/dialects/kernel_print.py`) and one element-expression printer (`c_family.py`)
print all four GPU dialects; WGSL is a class of spellings (table entries and hooks) over
them, plus its helper text (`wgsl_helpers.py`)."""
from __future__ import annotations

import numpy as np
import pytest

import querycompute as qc
from querycompute._codegen.dialects.by_name import DIALECTS
from querycompute._codegen.dialects.c_family import CFamily
from querycompute._codegen.dialects.kernel_print import KernelPrinter

WALK = ("kcode", "stmt", "stmts", "kernel", "render", "_conv", "_operands", "_update", "_if")


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_every_gpu_dialect_is_printed_by_the_one_walk(dialect):
    cls = DIALECTS[dialect]
    for name in WALK:
        assert getattr(cls, name) is getattr(KernelPrinter, name), f"{dialect} overrides {name}"
    for name in ("code", "binary", "call", "cast", "compare", "explicit", "lit", "float_literal", "ex", "need"):
        assert getattr(cls, name) is getattr(CFamily, name), f"{dialect} overrides {name}"


def test_wgsl_spells_the_shared_walk_from_its_table():
    """Declarations, ternaries and braces come out in WGSL's spelling, C's in CUDA's."""
    x = np.arange(64, dtype=np.int32)
    q = qc.query(x).where(lambda v: v > 3).select(lambda v: v * 2 if v % 3 == 0 else v)
    wgsl, cuda = q.source("webgpu"), q.source("cuda")
    assert "var " in wgsl and "select(" in wgsl and " ? " not in wgsl
    assert "var " not in cuda and " ? " in cuda and "select(" not in cuda
    assert "@compute @workgroup_size(" in wgsl and "__global__" in cuda
