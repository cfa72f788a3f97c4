"""Generated Metal source type-checked as C++17 by g++ against tests/metal_compat.h (the
real Metal compiler only exists on macOS); float64 on Metal is a clear error."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from querycompute._codegen.ir import expr as E
from querycompute._codegen.ir import program as P
from querycompute._codegen.errors import UnsupportedType
from querycompute._codegen.gpu import render

import gpu_passes as G

COMPAT = Path(__file__).with_name("metal_compat.h")


@pytest.fixture(scope="module")
def include_dir(tmp_path_factory):
    if shutil.which("g++") is None:
        pytest.skip("g++ not installed: apt-get install g++")
    d = tmp_path_factory.mktemp("metal_include")
    (d / "metal_stdlib").write_text(f'#include "{COMPAT}"\n')     # what `#include <metal_stdlib>` finds
    return d


def gxx_check(source: str, include_dir: Path, tmp_path: Path) -> None:
    f = tmp_path / "kernels.metal.cpp"
    f.write_text(source)
    r = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", "-Wno-attributes", "-I", str(include_dir), str(f)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[:4000] + "\n" + source


@pytest.mark.parametrize("dtype", [d for d in G.ALL_DTYPES if d != "float64"])
def test_every_shape_compiles_as_cpp(dtype, include_dir, tmp_path):
    for p in G.shape_passes(dtype, with_float64=False):
        ks = render(p, "metal")
        assert ks.options == ("-fno-fast-math", "-ffp-contract=off") and "fastMathEnabled = false" in ks.source
        gxx_check(ks.source, include_dir, tmp_path)


def test_reductions_use_simdgroup_shuffles(include_dir, tmp_path):
    x = E.Load(0, "float32")
    p = P.Pass(P.ElementProgram((P.InputSpec("x", "float32"),), (), (), ()),
               P.Reduce((P.Agg("sum", (x,), "float32"), P.Agg("min", (x,), "float32"))), "qc_w5")
    src = render(p, "metal").source
    assert "simd_shuffle_down(acc0, (ushort)offset)" in src
    # one partial slot per SIMD group of the narrowest width (8 lanes): 256 / 8
    assert "[[thread_index_in_simdgroup]]" in src and "threadgroup float sh_acc0[32];" in src
    assert "[[threads_per_simdgroup]]" in src
    gxx_check(src, include_dir, tmp_path)


@pytest.mark.parametrize("where", ["input", "output"])  # an unread 64-bit param is declared 32-bit (narrow_params)
def test_float64_on_metal_is_a_clear_error(where):
    x = E.Load(0, "float64" if where == "input" else "float32")
    out = E.Cast(x, "float64") if where == "output" else x
    params = (P.ParamSpec("k", "float64"),) if where == "param" else ()
    prog = P.ElementProgram((P.InputSpec("x", x.dtype),), params, (), (out,))
    with pytest.raises(UnsupportedType, match="metal kernels cannot use float64: Metal has no double") as info:
        render(P.Pass(prog, P.ToArray(), "qc_f64"), "metal")
    assert info.value.dtype == "float64" and info.value.dialect == "metal"
