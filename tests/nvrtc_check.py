"""Compile a kernel set with NVRTC for a given arch (no GPU needed): the shared check of the
NVRTC compile tests. Skips the calling test when NVRTC is not loadable."""
import pytest

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
