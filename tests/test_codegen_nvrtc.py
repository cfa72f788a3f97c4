"""Every kernel shape in every CUDA dtype compiled by NVRTC for sm_80 and sm_90 (no GPU or
driver needed when the architecture is given)."""
from __future__ import annotations

import pytest

from querycompute._codegen.ir import expr as E
from querycompute._codegen.ir import program as P
from querycompute._codegen.gpu import render

import gpu_passes as G

nvrtc = pytest.importorskip("cupy_backends.cuda.libs.nvrtc",
                            reason="NVRTC bindings missing: pip install cupy-cuda12x nvidia-cuda-nvrtc-cu12")


def _nvrtc_or_skip():
    try:
        return nvrtc.getVersion()
    except Exception as exc:  # the shared library itself is absent
        pytest.skip(f"NVRTC library not loadable ({exc}); pip install nvidia-cuda-nvrtc-cu12")


def compile_cuda(source: str, options, arch: str) -> str:
    prog = nvrtc.createProgram(source, "querycompute.cu", [], [])
    try:
        nvrtc.compileProgram(prog, [f"--gpu-architecture={arch}", *options])
    except nvrtc.NVRTCError as exc:
        pytest.fail(f"NVRTC {arch} failed: {exc}\n{nvrtc.getProgramLog(prog)}\n{source}")
    finally:
        log = nvrtc.getProgramLog(prog)
    ptx = nvrtc.getPTX(prog)
    nvrtc.destroyProgram(prog)
    return ptx.decode() if isinstance(ptx, bytes) else ptx, log


@pytest.mark.parametrize("dtype", G.ALL_DTYPES)
def test_every_shape_compiles_for_sm80_and_sm90(dtype):
    _nvrtc_or_skip()
    for p in G.shape_passes(dtype):
        ks = render(p, "cuda")
        assert "--fmad=false" in ks.options
        for arch in ("sm_80", "sm_90"):
            ptx, log = compile_cuda(ks.source, ks.options, arch)
            for k in ks.kernels:
                assert f".entry {k.name}(" in ptx, f"{k.name} missing from the PTX"


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_multiply_add_is_not_contracted_into_fma(dtype):
    _nvrtc_or_skip()
    a, b = E.Load(0, dtype), E.Load(1, dtype)
    prog = P.ElementProgram((P.InputSpec("a", dtype), P.InputSpec("b", dtype)), (), (),
                            (E.Binary("add", E.Binary("mul", a, b, dtype), a, dtype),))
    ks = render(P.Pass(prog, P.ToArray(), "qc_madd"), "cuda")
    ptx, _ = compile_cuda(ks.source, ks.options, "sm_80")
    assert "fma.rn" not in ptx and "mul.rn" in ptx, "a*b+a must round twice, like NumPy"


def test_reductions_use_warp_shuffles():
    _nvrtc_or_skip()
    x = E.Load(0, "float32")
    simple = P.Pass(P.ElementProgram((P.InputSpec("x", "float32"),), (), (), ()),
                    P.Reduce((P.Agg("sum", (x,), "float32"), P.Agg("max", (x,), "float32"))), "qc_w5")
    ks = render(simple, "cuda")
    assert "__shfl_down_sync(0xffffffffu, acc0, offset)" in ks.source
    ptx, _ = compile_cuda(ks.source, ks.options, "sm_80")
    assert "shfl.sync.down" in ptx
