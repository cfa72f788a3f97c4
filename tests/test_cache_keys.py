"""Issue 6 point 2: the key is a SHA-256 over everything that changes the binary, the same in
every process, and each ingredient changes it."""
import json
import subprocess
import sys

import pytest

from cache_worker import child_env
from querycompute.cache import make_key, numba_identity, nvrtc_identity, opencl_identity
from querycompute.cache.keys import package_version

BASE = dict(backend="opencl", compiler="pocl 6.0 / driver 6.0", device="cpu-znver3",
            options=("-cl-std=CL1.2",), source="__kernel void k(__global float *x) {}\n")


def test_key_is_a_sha256_hex_digest_and_keeps_its_parts():
    key = make_key(**BASE)
    assert len(key.digest) == 64 and int(key.digest, 16) >= 0
    assert (key.backend, key.compiler, key.device, key.options, key.source) == (
        BASE["backend"], BASE["compiler"], BASE["device"], BASE["options"], BASE["source"])
    assert str(key) == key.digest


def test_same_inputs_give_the_same_key_in_processes_with_different_hash_seeds(tmp_path):
    code = ("import json, sys; from querycompute.cache import make_key\n"
            "b = json.loads(sys.argv[1]); b['options'] = tuple(b['options'])\n"
            "print(make_key(**b).digest)")
    digests = set()
    for seed in ("1", "2", "random"):
        out = subprocess.run([sys.executable, "-c", code, json.dumps(BASE)], text=True,
                             capture_output=True, check=True,
                             env=child_env(tmp_path, PYTHONHASHSEED=seed)).stdout.strip()
        digests.add(out)
    assert digests == {make_key(**BASE).digest}


@pytest.mark.parametrize("change", [
    {"compiler": "pocl 6.1 / driver 6.0"},          # compiler version
    {"compiler": "pocl 6.0 / driver 6.1"},          # driver version
    {"device": "cpu-haswell"},                      # device / arch
    {"backend": "cuda"},
    {"options": ("-cl-std=CL2.0",)},                # option string
    {"options": ("-cl-std=CL1.2", "-cl-fast-relaxed-math")},
    {"options": ()},
    {"source": BASE["source"].replace("x", "y")},
    {"source": BASE["source"] + " "},               # even whitespace: it is the final source
])
def test_every_ingredient_changes_the_key(change):
    assert make_key(**{**BASE, **change}).digest != make_key(**BASE).digest


def test_option_order_is_part_of_the_key():
    a = make_key(**{**BASE, "options": ("-a", "-b")})
    b = make_key(**{**BASE, "options": ("-b", "-a")})
    assert a.digest != b.digest


def test_package_version_comes_from_the_installed_metadata():
    assert package_version() not in ("", None)


@pytest.mark.parametrize("bad, error, words", [
    ({"options": "-O3"}, TypeError, "sequence of strings"),
    ({"options": ("-O3", 3)}, TypeError, "every option"),
    ({"compiler": ""}, ValueError, "compiler"),
    ({"source": b"bytes"}, TypeError, "source must be a str"),
])
def test_bad_key_parts_are_refused_with_a_clear_message(bad, error, words):
    with pytest.raises(error, match=words):
        make_key(**{**BASE, **bad})


def test_numba_identity_names_numba_llvmlite_python_and_the_cpu():
    import llvmlite
    import numba
    compiler, device = numba_identity()
    assert numba.__version__ in compiler and llvmlite.__version__ in compiler
    assert f"python {sys.version_info.major}.{sys.version_info.minor}" in compiler
    assert device


def test_opencl_identity_names_platform_driver_and_device():
    pytest.importorskip("pyopencl")
    from querycompute.backends.opencl.opencl_device import open_device
    try:
        device = open_device().device
    except RuntimeError as exc:
        pytest.skip(f"no OpenCL device: {exc}")
    compiler, device_id = opencl_identity(device)
    assert device.driver_version in compiler and device.platform.version in compiler
    assert device.name in device_id


def test_nvrtc_identity_names_the_nvrtc_version_and_the_arch():
    pytest.importorskip("cupy")
    try:
        from cupy.cuda import nvrtc
        major, minor = nvrtc.getVersion()
    except Exception as exc:          # the NVRTC shared library is an optional install
        pytest.skip(f"NVRTC not loadable: {exc}")
    compiler, device = nvrtc_identity("sm_80")
    assert compiler.startswith(f"nvrtc {major}.{minor}") and device == "sm_80"
