"""Issue 11 item 10: CUDA CUBINs read whole, the arch rule for devices NVRTC doesn't know, and
kernels loaded per device. Compile paths need NVRTC only; device runs are `gpu`-marked."""
from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import querycompute as qc
from harness.passes import assert_same, expected, passes
from querycompute._codegen import gpu
from querycompute.backends.cuda import cuda as cuda_mod
from querycompute.backends import registry
from querycompute.backends.cuda.cuda_compile import (ARCH_VAR, choose_targets, compile_cuda, nvrtc,
    supported_archs, targets)
from querycompute.backends.cuda.cuda_cubin import elf_extent
from querycompute.backends.cuda.cuda_device import CudaDevice, probe
from querycompute.errors import BackendUnavailableError

pytest.importorskip("cupy")
try:
    nvrtc()
except BackendUnavailableError as exc:
    pytest.skip(f"NVRTC unavailable: {exc}", allow_module_level=True)
HAS_DEVICE = probe()[0] is not None
SUPPORTED = supported_archs()


@pytest.fixture(autouse=True)
def no_arch_override(monkeypatch):
    monkeypatch.delenv(ARCH_VAR, raising=False)


def _cubin(arch: str, kind: str = "reduce_filtered") -> bytes:
    ks = gpu.render(passes("float32")[kind], "cuda")
    return compile_cuda(ks.source, ks.options, arch)


def _nvdisasm() -> str | None:
    """nvdisasm from PATH or from the nvidia-cuda-nvdisasm wheel (the `test` extra)."""
    found = shutil.which("nvdisasm")
    if found:
        return found
    for site in sys.path:
        hits = glob.glob(os.path.join(site, "nvidia", "*", "bin", "nvdisasm"))
        if hits:
            return hits[0]
    return None


# --- the CUBIN is the whole ELF image ------------------------------------------------------

@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("kind", ["map", "reduce_filtered", "where"])
def test_item10_cubin_is_a_complete_elf(arch, kind):
    cubin = _cubin(arch, kind)
    assert cubin[:4] == b"\x7fELF"
    assert elf_extent(cubin) == len(cubin), "the CUBIN ends before its ELF headers say it does"


def test_item10_elf_extent_notices_a_missing_last_byte():
    cubin = _cubin("sm_80")
    assert elf_extent(cubin) <= len(cubin)
    assert elf_extent(cubin[:-1]) > len(cubin) - 1


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_item10_nvdisasm_accepts_the_cubin(tmp_path, arch):
    tool = _nvdisasm()
    if tool is None:
        pytest.skip("nvdisasm not installed (pip install nvidia-cuda-nvdisasm)")
    path = tmp_path / f"k_{arch}.cubin"
    path.write_bytes(_cubin(arch))
    done = subprocess.run([tool, str(path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    ks = gpu.render(passes("float32")["reduce_filtered"], "cuda")
    assert all(k.name in done.stdout for k in ks.kernels)


# --- the arch rule ------------------------------------------------------------------------

LIST = (50, 60, 70, 75, 80, 86, 87, 90, 100, 120)


@pytest.mark.parametrize("device,want", [
    (86, ["sm_86", "compute_86"]),          # a device NVRTC knows: its CUBIN and PTX
    (None, ["sm_80", "compute_80"]),        # no device: sm_80
    (130, ["compute_120"]),                 # newer than NVRTC: PTX the driver JITs forward
    (89, ["compute_87"]),                   # between two listed archs: PTX of the one below
])
def test_item10_arch_rule_picks_what_the_device_can_load(device, want):
    assert choose_targets(device, LIST, None) == want


def test_item10_arch_rule_device_older_than_nvrtc_is_unavailable():
    with pytest.raises(BackendUnavailableError, match=r"sm_35.*older than every.*sm_50"):
        choose_targets(35, LIST, None, "12.9")


@pytest.mark.parametrize("env,want", [("sm_90", ["sm_90", "compute_90"]), ("compute_75", ["compute_75"]),
                                      ("8.6", ["sm_86", "compute_86"])])
def test_item10_arch_rule_override_wins_over_the_device(env, want):
    assert choose_targets(130, LIST, env) == want


def test_item10_arch_rule_override_nvrtc_lacks_is_unavailable_not_a_query_error():
    with pytest.raises(BackendUnavailableError, match=r"sm_89 is not supported.*sm_87"):
        choose_targets(None, LIST, "sm_89")


def test_item10_arch_rule_without_a_supported_list_trusts_the_device():
    assert choose_targets(130, (), None) == ["sm_130", "compute_130"]


def test_item10_device_newer_than_this_nvrtc_gets_ptx_that_compiles():
    newest = max(SUPPORTED)
    want = [f"compute_{newest}"]
    assert targets(device_arch=newest + 10) == want
    ks = gpu.render(passes("int32")["map"], "cuda")
    ptx = compile_cuda(ks.source, ks.options, want[0]).decode()
    assert f".target sm_{newest}" in ptx
    assert all(f".entry {k.name}" in ptx for k in ks.kernels)


@pytest.fixture
def fake_device(monkeypatch):
    """The cuda backend believing it found a device of a given compute capability (the
    device itself is never reached: prepare is where the arch rule applies)."""
    def install(arch: int):
        backend = registry.get("cuda")
        monkeypatch.setattr(backend, "_probed", True)
        monkeypatch.setattr(backend, "_device", CudaDevice(0, f"test GPU sm_{arch}", arch))
        monkeypatch.setattr(registry, "_THRESHOLD", 0)      # auto sends every input to a GPU
        monkeypatch.delitem(registry._broken, "cuda", raising=False)
        registry._auto.clear()
        return backend
    yield install
    registry._auto.clear()
    registry._broken.pop("cuda", None)


@pytest.mark.skipif(HAS_DEVICE, reason="pretends a device; a real one is tested below")
def test_item10_auto_falls_back_when_nvrtc_cannot_serve_the_device(fake_device, private_cache):
    fake_device(min(SUPPORTED) - 5)
    x = np.arange(1000, dtype=np.float32)
    # a sort-based plan: `auto` sends host arrays to a GPU only for work that pays for PCIe
    # (graph.heavy); a fused select/where/sum stays on the cpu backend
    with pytest.warns(RuntimeWarning, match="backend 'cuda' failed"):
        got = qc.query(x).select(lambda v: v * 2).where(lambda v: v > 100).order_by(lambda v: -v).first()
    assert got == (x * 2)[x * 2 > 100].max()
    trace = qc.last_trace()
    assert trace.backend == "cpu" and "older than every architecture" in trace.fallback


@pytest.mark.skipif(HAS_DEVICE, reason="pretends a device; a real one is tested below")
def test_item10_prepare_for_a_device_newer_than_nvrtc_compiles_ptx(fake_device, private_cache):
    backend = fake_device(max(SUPPORTED) + 10)
    prepared = backend.prepare(passes("float32")["map"])
    assert set(prepared.binaries) == {f"compute_{max(SUPPORTED)}"}


# --- kernels loaded per device ------------------------------------------------------------

def test_item10_pick_image_per_device_arch():
    bins = {"sm_86": b"cubin86", "compute_86": b"ptx86", "compute_75": b"ptx75"}
    assert cuda_mod.pick_image(bins, 86) == ("sm_86", b"cubin86")
    assert cuda_mod.pick_image(bins, 90) == ("compute_86", b"ptx86")    # PTX JITs forward
    assert cuda_mod.pick_image(bins, 80) == ("compute_75", b"ptx75")    # never backward
    assert cuda_mod.pick_image(bins, 70) is None


def test_item10_modules_are_keyed_by_device():
    loads = []

    def load(device):
        loads.append(device.index)
        return {"kernel": f"function on device {device.index}"}

    modules = cuda_mod.DeviceModules(load)
    d0, d1 = CudaDevice(0, "a", 80), CudaDevice(1, "b", 90)
    assert modules.functions(d0)["kernel"] == "function on device 0"
    assert modules.functions(d1)["kernel"] == "function on device 1"
    assert modules.functions(d0)["kernel"] == "function on device 0"
    assert loads == [0, 1] and modules.devices == (0, 1)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_DEVICE, reason=f"no CUDA device: {probe()[1]}")
def test_item10_one_prepared_kernel_runs_on_every_device(private_cache):
    import cupy as cp
    from harness.passes import data
    prepared = cuda_mod.CudaBackend().prepare(passes("float32")["map"])
    count = cp.cuda.runtime.getDeviceCount()
    for index in range(count):
        with cp.cuda.Device(index):
            x = data("float32", 1000, seed=index)
            assert_same("map", "float32", prepared.run_quick([x], [], 1000)[0],
                        expected("map", "float32", x))
    assert prepared.modules.devices == tuple(range(count))
