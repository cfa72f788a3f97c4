"""Issue 6 through the public API, in real processes: the cpu and opencl backends put their
kernels in the disk cache, a second process loads them instead of compiling (checked on the
trace), QUERYCOMPUTE_CACHE=0 compiles every time, a damaged entry is one warning, a correct
result and a rewrite, and QUERYCOMPUTE_DUMP_SOURCE=1 prints the source only on a compile.
CUDA (no device here) is checked one level down, on `prepare`, which NVRTC runs anywhere."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from cache_worker import child_env

SCRIPT = Path(__file__).with_name("cache_query_script.py")
# cpu: big enough for the parallel entry point, which numba compiles on first use (after
# `prepare` compiled the serial one), so the lazily compiled half must be cached too.
SIZES = {"cpu": 40_000, "cpu-numba": 40_000, "opencl": 5_000}
# "cpu" compiles its pass on the llvm route (an object file as the entry's binary, like
# OpenCL's); "cpu-numba" is the cpu backend with that route off (QUERYCOMPUTE_CPU_LLVM=0):
# a module numba compiles, with numba's own cache files beside it
ENV = {"cpu-numba": {"QUERYCOMPUTE_CPU_LLVM": "0"}}


def opencl_available() -> bool:
    from querycompute.backends.opencl.opencl_device import open_device
    try:
        open_device()
    except RuntimeError:
        return False
    return True


BACKENDS = ["cpu", "cpu-numba", pytest.param("opencl", marks=pytest.mark.skipif(
    not opencl_available(), reason="no OpenCL device (install pyopencl with pocl)"))]


def query(backend, cache_dir, **env):
    """Run the script once; (its JSON answer, its stderr)."""
    done = subprocess.run([sys.executable, str(SCRIPT), backend.split("-")[0], str(SIZES[backend])],
                          env=child_env(cache_dir, **ENV.get(backend, {}), **env), capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def origins(answer) -> set:
    return {k["cache"] for k in answer["kernels"]}


def check_result(answer, reference=None):
    assert answer["result"] == pytest.approx(answer["numpy"], rel=1e-5)
    if reference is not None:           # a cached kernel gives the very same bits
        assert answer["result"] == reference["result"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_second_process_loads_the_first_ones_kernels_without_compiling(tmp_path, backend):
    cold, cold_err = query(backend, tmp_path, QUERYCOMPUTE_DUMP_SOURCE="1")
    warm, warm_err = query(backend, tmp_path, QUERYCOMPUTE_DUMP_SOURCE="1")
    name = backend.split("-")[0]
    assert cold["backend"] == warm["backend"] == name
    assert origins(cold) == {"compiled"} and origins(warm) == {"disk"}
    assert warm["stats"]["compiles"] == 0 and warm["stats"]["disk_hits"] >= 1
    assert cold["warnings"] == warm["warnings"] == []
    assert cold["stats"]["entries_by_backend"] == {name: 1}
    check_result(cold)
    check_result(warm, cold)
    # the source is printed when compiled, and only then
    dialect, marker = {"cpu": ("llvm", "define void"), "cpu-numba": ("numba", "@njit("),
                       "opencl": ("opencl", "__kernel")}[backend]
    assert f"compiling {dialect} kernel" in cold_err and marker in cold_err
    assert "compiling" not in warm_err


@pytest.mark.parametrize("backend", BACKENDS)
def test_cache_switched_off_compiles_in_every_process(tmp_path, backend):
    cache = tmp_path / "cache"
    first, _ = query(backend, cache, QUERYCOMPUTE_CACHE="0")
    second, _ = query(backend, cache, QUERYCOMPUTE_CACHE="0")
    assert origins(first) == origins(second) == {"compiled"}
    assert second["stats"]["disk_hits"] == 0 and not second["stats"]["disk_enabled"]
    assert not cache.exists()
    check_result(second, first)


def damage(cache_dir: Path, backend: str) -> Path:
    """Flip bytes in the middle of the entry's binary: the OpenCL program binary or the cpu
    llvm route's object file, or a compiled-code file numba cached beside the cpu module."""
    (entry,) = (cache_dir / "v1").iterdir()
    if backend in ("opencl", "cpu"):
        target = entry / "kernel.bin"
    else:
        target = max((entry / "__pycache__").glob("*.nbc"), key=lambda f: f.stat().st_size)
    data = bytearray(target.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 16] = bytes(b ^ 0xFF for b in data[middle:middle + 16])
    target.write_bytes(bytes(data))
    return target


@pytest.mark.parametrize("backend", BACKENDS)
def test_damaged_entry_is_one_warning_a_correct_result_and_a_rewrite(tmp_path, backend):
    cold, _ = query(backend, tmp_path)
    damage(tmp_path, backend)
    hurt, _ = query(backend, tmp_path)
    assert len(hurt["warnings"]) == 1 and "damaged" in hurt["warnings"][0]
    assert origins(hurt) == {"compiled"} and hurt["stats"]["damaged"] == 1
    check_result(hurt, cold)
    healed, _ = query(backend, tmp_path)     # the recompile rewrote the entry
    assert origins(healed) == {"disk"} and healed["warnings"] == []
    check_result(healed, cold)


@pytest.mark.skipif(not opencl_available(), reason="no OpenCL device (install pyopencl with pocl)")
def test_opencl_build_failure_is_a_compile_error_with_log_and_numbered_source():
    import querycompute as qc
    from querycompute.backends.opencl.opencl_device import cached_program, open_device
    source = "__kernel void broken(__global float *y) {\n    y[0] = undefined_name;\n}\n"
    with pytest.raises(qc.CompileError) as caught:
        cached_program(open_device(), source, ("-cl-std=CL1.2",), ["broken"])
    text = str(caught.value)
    assert caught.value.dialect == "opencl" and "undefined_name" in caught.value.log
    assert "   2 |     y[0] = undefined_name;" in text and "-cl-std=CL1.2" in text


CUDA_PREPARE = """
import hashlib, json, sys, warnings
sys.path.insert(0, {tests!r})
from gpu_passes import filter_program
from querycompute._codegen.ir import program as P
from querycompute.backends.cuda.cuda import CudaBackend
import querycompute as qc
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    prep = CudaBackend().prepare(P.Pass(filter_program("float32"), P.ToArray(), "qc_cached"))
print(json.dumps({{"origin": prep.origin,
                  "binaries": {{a: hashlib.sha256(b).hexdigest() for a, b in prep.binaries.items()}},
                  "warnings": [str(w.message) for w in caught
                               if w.category.__name__ == "CacheWarning"]}}))
"""


def nvrtc_available() -> bool:
    from querycompute.backends.cuda.cuda_compile import nvrtc
    from querycompute.errors import BackendUnavailableError
    try:
        nvrtc()
    except BackendUnavailableError:
        return False
    return True


@pytest.mark.skipif(not nvrtc_available(), reason="NVRTC is not installed "
                    "(pip install nvidia-cuda-nvrtc-cu12)")
def test_cuda_cubin_and_ptx_are_stored_then_loaded_and_healed_after_damage(tmp_path):
    """No GPU needed: NVRTC compiles for an explicit arch, so `prepare` runs anywhere."""
    code = CUDA_PREPARE.format(tests=str(Path(__file__).parent))

    def prepare():
        done = subprocess.run([sys.executable, "-c", code],     # sm_80 with a device too
                              env=child_env(tmp_path, QUERYCOMPUTE_CUDA_ARCH="sm_80"),
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.strip().splitlines()[-1])

    cold = prepare()
    warm = prepare()
    assert cold["origin"] == "compiled" and warm["origin"] == "disk"
    assert set(cold["binaries"]) == {"sm_80", "compute_80"}      # CUBIN and PTX
    assert warm["binaries"] == cold["binaries"] and warm["warnings"] == []
    entries = sorted((tmp_path / "v1").iterdir())
    assert len(entries) == 2
    target = entries[0] / "kernel.bin"
    target.write_bytes(target.read_bytes()[:-7])                  # truncated
    hurt = prepare()
    assert hurt["origin"] == "compiled" and len(hurt["warnings"]) == 1
    assert hurt["binaries"] == cold["binaries"]
    assert prepare()["origin"] == "disk"


def test_cpu_entry_points_compiled_later_are_sealed_for_the_next_process(tmp_path):
    """One entry point per step serves every size (issue 28 item 2: a small input runs it
    inline, a big one in morsels), compiled once: a later process with a big input loads it
    from disk and compiles nothing. A strided input makes numba add a specialisation to the
    entry point's existing cache files: resealed, so no process sees them as damaged."""
    def run(n, *layout):
        done = subprocess.run([sys.executable, str(SCRIPT), "cpu", str(n), *layout],
                              env=child_env(tmp_path), capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 0, done.stderr
        answer = json.loads(done.stdout.strip().splitlines()[-1])
        assert answer["warnings"] == []
        (kernel,) = answer["kernels"]
        return kernel["name"].rsplit("_", 1)[-1], kernel["cache"], answer["stats"]["compiles"]

    assert run(1_000) == ("inline", "compiled", 1)
    assert run(300_000) == ("morsels", "disk", 0)
    assert run(1_000) == ("inline", "disk", 0)
    first = run(1_000, "strided")         # (a float sum's strided input is copied: no new one)
    assert first[:2] == ("inline", "compiled") or first == ("inline", "disk", 0), first
    assert run(1_000, "strided") == ("inline", "disk", 0)
    assert run(1_000) == ("inline", "disk", 0)
