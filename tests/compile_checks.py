"""The compile checks the kernel tests share, neither needing a device: NVRTC (CUDA C to
PTX for a given arch) and g++ type-checking Metal source as C++17 against metal_compat.h.
Each skips the calling test when its tool is missing."""
import shutil
import subprocess
from pathlib import Path

import pytest

COMPAT = Path(__file__).with_name("metal_compat.h")

ARCHS = ("sm_80", "sm_90")


def ptx_of(ks, arch: str, name: str = "kernels.cu") -> str:
    """The PTX NVRTC makes of `ks.source` for `arch` (fails the test with the log if it
    does not compile); every kernel of the set must be an entry of it."""
    nvrtc = pytest.importorskip("cupy_backends.cuda.libs.nvrtc", reason="NVRTC bindings missing")
    try:
        nvrtc.getVersion()
    except Exception as exc:
        pytest.skip(f"NVRTC library not loadable ({exc})")
    prog = nvrtc.createProgram(ks.source, name, [], [])
    try:
        nvrtc.compileProgram(prog, [f"--gpu-architecture={arch}", *ks.options])
    except nvrtc.NVRTCError as exc:
        pytest.fail(f"NVRTC {arch}: {exc}\n{nvrtc.getProgramLog(prog)}\n{ks.source}")
    ptx = nvrtc.getPTX(prog)
    ptx = ptx.decode() if isinstance(ptx, bytes) else ptx
    nvrtc.destroyProgram(prog)
    for k in ks.kernels:
        assert f".entry {k.name}(" in ptx, f"{k.name} missing from the PTX for {arch}"
    return ptx


def metal_compiles(source: str, tmp_path: Path, name: str = "kernels") -> None:
    """g++ -fsyntax-only accepts `source` as Metal-compat C++17 (fails the test with the log)."""
    if shutil.which("g++") is None:
        pytest.skip("g++ not installed: apt-get install g++")
    inc = tmp_path / "metal_include"
    inc.mkdir(exist_ok=True)
    (inc / "metal_stdlib").write_text(f'#include "{COMPAT}"\n')     # what <metal_stdlib> finds
    f = tmp_path / f"{name}.metal.cpp"
    f.write_text(source)
    r = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", "-Wno-attributes", "-I", str(inc), str(f)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[:4000] + "\n" + source
