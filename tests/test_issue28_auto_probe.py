"""Issue 28 item 4: `auto` never opens a device it would not pick (pocl's CPU device, a CPU
WebGPU adapter) and writes nothing to stderr; qc.backends() probes only when asked."""
import os
import subprocess
import sys
import textwrap

import pytest

from querycompute.backends.gpu.generated import gpu_device_files

# A machine with a GPU may rightly import its driver to find it; the point here is the
# machine without one, where pocl and lavapipe are the only devices.
pytestmark = pytest.mark.skipif(bool(gpu_device_files()),
                                reason="this machine has GPU device files; auto may probe them")

CHILD = textwrap.dedent("""
    import sys
    import numpy as np
    import querycompute as qc
    from querycompute.backends import registry

    x = np.array([5, -3, 9, 0, -3, 7, 2], dtype=np.int32)
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


@pytest.mark.skipif(not _installed("pyopencl"), reason="needs pyopencl (pocl)")
def test_a_pin_still_opens_the_cpu_device_auto_declined(tmp_path):
    child = tmp_path / "child.py"
    child.write_text(PINNED)
    env = dict(os.environ, QUERYCOMPUTE_GPU_MIN_ELEMENTS="1", QUERYCOMPUTE_TIERED="1")
    done = subprocess.run([sys.executable, str(child)], env=env, capture_output=True,
                          text=True, timeout=240)
    assert done.returncode == 0 and done.stdout.startswith("ok"), done.stderr
