"""Issue 28 item 4: `auto` never opens a device it would not pick (pocl's CPU device, a CPU
WebGPU adapter) and writes nothing to stderr; qc.backends() probes only when asked, and what
the drivers print while it does goes to the `querycompute` logger, not to stderr."""
import glob
import os
import subprocess
import sys
import textwrap

import pytest

from querycompute.backends.gpu.generated import gpu_device_files

# A machine with a GPU may rightly import its driver to find it; the point here is the
# machine without one, where pocl and lavapipe are the only devices.
no_gpu = pytest.mark.skipif(bool(gpu_device_files()),
                            reason="this machine has GPU device files; auto may probe them")

CHILD = textwrap.dedent("""
    import sys
    import numpy as np
    import querycompute as qc
    from querycompute.backends import registry

    x = np.array([5, -3, 9, 0, -3, 7, 2], dtype=np.int32)
    assert qc.query(x).sum() == x.sum()
    assert qc.last_trace().backend in ("cpu", "numpy"), qc.last_trace().backend
    s = qc.query(x).order_by(lambda v: v).to_array()
    assert s.tolist() == sorted(x.tolist()), s
    assert qc.last_trace().backend == "cpu", qc.last_trace().backend
    g = qc.query(x).group_by(lambda v: v > 0).agg(n=qc.count)
    assert qc.last_trace().backend == "cpu", qc.last_trace().backend
    assert registry.choose_auto(len(x), False, True) == "cpu"
    # the process that would fail had auto opened pocl or lavapipe: neither driver was loaded
    loaded = sorted(m for m in ("pyopencl", "wgpu") if m in sys.modules)
    assert not loaded, f"auto imported {loaded}"
    assert not any(b.initialised for n, b in registry._instances.items() if n in ("opencl", "webgpu"))
    print("ok", g)
""")


def _installed(mod: str) -> bool:
    import importlib.util
    return importlib.util.find_spec(mod) is not None


@no_gpu
@pytest.mark.skipif(not (_installed("pyopencl") and _installed("wgpu")),
                    reason="needs pyopencl and wgpu installed (the test extras)")
def test_auto_opens_no_cpu_device_and_writes_nothing_to_stderr(tmp_path):
    child = tmp_path / "child.py"          # a file: lambdas are read from source
    child.write_text(CHILD)
    env = dict(os.environ, QUERYCOMPUTE_GPU_MIN_ELEMENTS="1", WGPU_BACKEND_TYPE="Vulkan",
               QUERYCOMPUTE_TIERED="1")        # the first answer from the interpreted tier
    env.pop("XDG_RUNTIME_DIR", None)         # what makes Mesa print when wgpu asks it
    done = subprocess.run([sys.executable, str(child)], env=env, capture_output=True,
                          text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok"), done.stdout
    assert done.stderr == ""


PINNED = textwrap.dedent("""
    import numpy as np
    import querycompute as qc
    from querycompute.backends import registry

    x = np.arange(10, dtype=np.int32)
    assert qc.query(x).order_by(lambda v: -v).to_array()[0] == 9
    assert qc.last_trace().backend == "cpu"
    # auto declined opencl without opening it; a pin still opens pocl's CPU device
    assert qc.query(x).select(lambda v: v * 3).on("opencl").to_array().tolist() == (x * 3).tolist()
    assert registry.get("opencl").initialised and not registry.get("opencl").is_gpu
    print("ok")
""")


@no_gpu
@pytest.mark.skipif(not _installed("pyopencl"), reason="needs pyopencl (pocl)")
def test_a_pin_still_opens_the_cpu_device_auto_declined(tmp_path):
    child = tmp_path / "child.py"
    child.write_text(PINNED)
    env = dict(os.environ, QUERYCOMPUTE_GPU_MIN_ELEMENTS="1", QUERYCOMPUTE_TIERED="1")
    done = subprocess.run([sys.executable, str(child)], env=env, capture_output=True,
                          text=True, timeout=240)
    assert done.returncode == 0 and done.stdout.startswith("ok"), done.stderr


PROBE = textwrap.dedent("""
    import logging
    import sys
    import querycompute as qc

    caught = []
    class Keep(logging.Handler):
        def emit(self, record):
            caught.append(record.getMessage())
    logging.getLogger("querycompute").addHandler(Keep())
    logging.getLogger("querycompute").setLevel(logging.DEBUG)
    info = qc.backends()
    print(info["webgpu"]["available"], info["opencl"]["available"])
    print("\\n".join(caught))
""")


def _quiet_env() -> dict:
    """What makes wgpu and Mesa print while an adapter is requested."""
    env = dict(os.environ, WGPU_BACKEND_TYPE="Vulkan")
    env.pop("XDG_RUNTIME_DIR", None)
    return env


@pytest.mark.parametrize("how", ["api", "cli"])
def test_backends_probe_keeps_the_drivers_chatter_off_stderr(tmp_path, how):
    """qc.backends() / `querycompute backends` open every device (they are asked), with fd 2
    captured: no "Forcing backend" / "XDG_RUNTIME_DIR is invalid" on stderr, the webgpu
    backend still available where lavapipe is, and the lines kept at DEBUG on the logger."""
    child = tmp_path / "child.py"
    child.write_text(PROBE)
    args = [str(child)] if how == "api" else ["-m", "querycompute", "backends", "--json"]
    done = subprocess.run([sys.executable, *args], env=_quiet_env(), capture_output=True,
                          text=True, timeout=240, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "XDG_RUNTIME_DIR" not in done.stderr and "Forcing backend" not in done.stderr, done.stderr
    assert done.stderr == ""
    if not _installed("wgpu"):
        return
    if how == "api":
        available, *logged = done.stdout.splitlines()
        webgpu = available.split()[0] == "True"
        if webgpu:       # wgpu's own warning went to the logger (Mesa's lines, where it printed)
            assert any("Forcing backend" in line for line in logged), done.stdout
    else:
        import json
        webgpu = json.loads(done.stdout)["webgpu"]["available"]
    if glob.glob("/usr/share/vulkan/icd.d/lvp_icd*.json"):
        assert webgpu, done.stdout        # lavapipe (the test machines' Vulkan) still found
