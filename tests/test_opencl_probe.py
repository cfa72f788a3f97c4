"""The opencl backend's compile probe (querycompute/backends/opencl/opencl_device.py, probe):
a listed device that can't compile (the pyopencl[pocl] wheel's pocl 3.0 / LLVM 14 on a CPU
its LLVM predates, such as AMD Zen 5: "unknown target CPU 'generic'") makes the backend
unavailable with the compiler's reason, on stderr nothing, once per device and process;
another device that compiles is used instead; `auto` opens no CPU device to find out.

The build failure is monkeypatched where a machine's devices all compile: what is under test
is the reporting, not pocl."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import querycompute as qc
from querycompute.backends import registry
from querycompute.errors import CompileError

cl = pytest.importorskip("pyopencl")
from querycompute.backends.opencl import opencl_device as od  # noqa: E402
from querycompute.backends.opencl.opencl import OpenCLBackend  # noqa: E402

POCL_LOG = ("error: unknown target CPU 'generic'\n"
            "Device pthread-AMD EPYC failed to build the program\n")


def _devices() -> list:
    try:
        return [d for p in cl.get_platforms() for d in p.get_devices()]
    except cl.Error:
        return []


@pytest.fixture
def fresh(monkeypatch):
    """No device probed yet in this process, and a record of the probe's builds."""
    if not _devices():
        pytest.skip("no OpenCL device listed")
    monkeypatch.setattr(od, "_probed", {})
    builds = []
    return builds


def _failing(builds, fails=lambda device: True):
    real = od.build_quietly

    def build(cl_, ctx, device, source, options):
        builds.append(device)
        if fails(device):
            raise CompileError("opencl", POCL_LOG, source, options)
        return real(cl_, ctx, device, source, options)
    return build


def test_a_device_that_cannot_compile_is_unavailable_with_the_compilers_reason(fresh, monkeypatch, capfd):
    monkeypatch.setattr(od, "build_quietly", _failing(fresh))
    backend = OpenCLBackend()
    ok, why = backend.availability()
    assert not ok
    assert "unknown target CPU 'generic'" in why
    if all("pocl" in d.platform.version.lower() for d in _devices()):
        assert why.startswith("pocl cannot compile for this CPU: unknown target CPU 'generic'"), why
    assert len(fresh) == len(_devices())               # every device asked, each once
    # qc.backends() says so; a query pinned to opencl raises with the reason, not a compile error
    monkeypatch.setitem(registry._instances, "opencl", backend)
    assert qc.backends()["opencl"] == {"available": False, "reason": why}
    with pytest.raises(qc.BackendUnavailableError, match="unknown target CPU 'generic'"):
        # (a lambda of its own: no earlier test of this process has this query in the memo)
        qc.query(np.arange(10, dtype=np.float32)).on("opencl").select(lambda v: v * 3 + 7).sum()
    # once per device and process: a second backend object (opencl_stages opens its own
    # device too) does not build again
    assert OpenCLBackend().availability() == (False, why)
    with pytest.raises(RuntimeError, match="unknown target CPU"):
        od.open_device()
    assert len(fresh) == len(_devices())
    out, err = capfd.readouterr()
    assert err == ""


def test_a_device_that_cannot_compile_is_passed_over_for_one_that_can(fresh, monkeypatch):
    devices = _devices()
    if len(devices) < 2:
        pytest.skip("one OpenCL device: nothing to pass over to")
    first = od.open_device().device                     # the one picked when all compile
    others = [d for d in devices if d != first and not od.probe(cl, d, cl.Context([d]))]
    monkeypatch.setattr(od, "_probed", {})
    monkeypatch.setattr(od, "build_quietly", _failing(fresh, lambda d: d == first))
    if not others:              # the other devices can't compile either (for real): all say why
        with pytest.raises(RuntimeError, match="unknown target CPU 'generic'") as info:
            od.open_device()
        assert all(d.name.strip() in str(info.value) for d in devices), info.value
        return
    dev = od.open_device()
    assert dev.device in others and first in fresh
    assert "unknown target CPU 'generic'" in od._probed[first.int_ptr]
    assert od._probed[dev.device.int_ptr] == ""


def test_the_device_opened_builds_the_probe_for_real(ocl):
    dev = ocl.require_device()
    assert od._probed[dev.device.int_ptr] == ""
    assert "cannot compile" not in registry.availability("opencl")[1]


def test_import_and_auto_probe_no_cpu_device():
    """`import querycompute` probes nothing; `auto` asks for a GPU without opening pocl."""
    code = (
        "import sys, numpy as np, querycompute as qc\n"
        "from querycompute.backends import registry\n"
        "assert 'querycompute.backends.opencl.opencl_device' not in sys.modules\n"
        "registry.choose_auto(10**9, False)\n"
        "od = sys.modules.get('querycompute.backends.opencl.opencl_device')\n"
        "if od is not None:\n"
        "    import pyopencl as cl\n"
        "    devs = [d for p in cl.get_platforms() for d in p.get_devices()]\n"
        "    gpu_failed = any(od._probed.get(d.int_ptr) for d in devs if d.type & cl.device_type.GPU)\n"
        "    cpus = [d for d in devs if not d.type & cl.device_type.GPU]\n"
        "    assert gpu_failed or not any(d.int_ptr in od._probed for d in cpus), od._probed\n"
        "print('ok')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
    assert done.stderr == ""
