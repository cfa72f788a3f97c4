"""Test-session settings shared by every test file.

The backends read and write the disk kernel cache. Tests must neither fill the user's real
cache (~/.cache/querycompute) nor find kernels an earlier run left there (a test that checks
"compiled" in the trace would see "disk"), so each session gets an empty cache directory of
its own, set before anything uses the cache. Tests that start processes pass their own
QUERYCOMPUTE_CACHE_DIR (tests/cache_worker.py child_env).
"""
import os
import shutil
import tempfile

_SESSION_CACHE = tempfile.mkdtemp(prefix="querycompute-test-cache-")
os.environ["QUERYCOMPUTE_CACHE_DIR"] = _SESSION_CACHE
os.environ.pop("QUERYCOMPUTE_CACHE", None)
# Tests check what the backend they pin computed, so compiles happen before the first result
# (tiered execution is on by default for users; tests/test_tiered.py turns it on explicitly).
os.environ["QUERYCOMPUTE_TIERED"] = "0"


def pytest_sessionfinish(session, exitstatus):
    shutil.rmtree(_SESSION_CACHE, ignore_errors=True)


# CI explores the same examples on every run (a red run then means a change broke something,
# not that a new random draw found an old edge); locally each run draws new examples.
from hypothesis import settings as _hsettings  # noqa: E402

_hsettings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    _hsettings.load_profile("ci")


import pytest  # noqa: E402


@pytest.fixture(scope="module")
def ocl():
    """The opencl backend, for tests that drive it directly; skips without a device."""
    from querycompute.backends.opencl.opencl import OpenCLBackend
    b = OpenCLBackend()
    ok, why = b.availability()
    if not ok:
        pytest.skip(f"no OpenCL device: {why}")
    return b


@pytest.fixture(scope="module")
def gpu():
    """GpuStages over the opencl device (the column operations' kernels, driven directly);
    skips without a device."""
    from querycompute.backends.gpu.gpu_stages import opencl_stages
    try:
        return opencl_stages()
    except RuntimeError as exc:
        pytest.skip(f"no OpenCL device: {exc}")


@pytest.fixture
def private_cache(monkeypatch, tmp_path):
    """The process-wide disk cache, pointed at an empty directory for one test."""
    from querycompute.cache import disk_cache
    monkeypatch.setenv("QUERYCOMPUTE_CACHE_DIR", str(tmp_path / "cache"))
    disk_cache.reset()
    yield disk_cache
    monkeypatch.undo()
    disk_cache.reset()


@pytest.fixture(scope="module")
def client():
    """A real Dask cluster for the issue-19 tests: two worker processes of one thread each
    (the chunks are the parallelism), one per test module."""
    distributed = pytest.importorskip("distributed", reason="distributed is not installed (pip install -e '.[dask]')")
    cluster = distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                       dashboard_address=None, silence_logs=40)
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


@pytest.fixture(scope="session")
def tpch_tables(tmp_path_factory):
    """benchmarks/tpch_data's tables at scale factor 0.01 (generated once per test process
    into a temporary directory); skips, saying which, without tpchgen-cli, duckdb, pyarrow
    or polars."""
    import sys
    from pathlib import Path
    for module in ("duckdb", "pyarrow", "polars"):
        pytest.importorskip(module, reason=f"{module} is not installed (pip install -e '.[bench]')")
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import tpch_data
    if tpch_data.generator() is None:
        pytest.skip("tpchgen-cli is not installed (pip install tpchgen-cli)")
    return tpch_data.load(0.01, tmp_path_factory.mktemp("tpch") / "sf0.01")
