"""Issue 12 item 4: processes that start the same cold query at once compile it once (a lock
file beside the cache entry); the others wait and load the entry it stored."""
import pytest

from test_cache_concurrency import race


@pytest.mark.parametrize("backend", ["cpu", "opencl"])
def test_four_processes_starting_one_cold_query_compile_it_once(tmp_path, backend, request):
    if backend == "opencl":
        request.getfixturevalue("ocl")        # skips without a device that compiles
    results = race(tmp_path, {"action": "query", "backend": backend}, 4)
    assert all(r["right"] for r in results)
    assert all(r["warnings"] == [] for r in results)
    assert sorted(r["origin"] for r in results) == ["compiled", "disk", "disk", "disk"]
    assert sum(r["stats"]["compiles"] for r in results) == 1
    lock_files = list((tmp_path / "cache" / "locks").glob("*.lock"))
    assert len(lock_files) == 1
