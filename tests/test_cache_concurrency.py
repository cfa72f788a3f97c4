"""Issue 6 point 4: several processes compiling the same cold entry at once all get correct
results and leave one valid entry, which the next process hits without a warning."""
import json
import time

import pytest

from cache_worker import result_of, run_worker, start_worker


def race(tmp_path, job: dict, n: int) -> list[dict]:
    """Start n workers that wait on one go-file, then release them together."""
    go = tmp_path / "go"
    cache = tmp_path / "cache"
    workers = [start_worker(cache, job, QC_GO_FILE=go) for _ in range(n)]
    deadline = time.monotonic() + 60
    while len(list(tmp_path.glob("go.ready.*"))) < n:    # all imported, all waiting
        assert time.monotonic() < deadline and all(w.poll() is None for w in workers)
        time.sleep(0.01)
    go.write_text("go")
    return [result_of(w) for w in workers]


def assert_one_clean_entry(cache, key: str) -> None:
    (entry,) = [p for p in (cache / "v1").iterdir()]
    assert entry.name == key
    leftovers = [p.name for p in entry.rglob("*") if p.name.endswith(".tmp")]
    assert leftovers == []
    meta = json.loads((entry / "meta.json").read_text())
    assert meta["key"] == key


@pytest.mark.parametrize("n", [2, 4])
def test_processes_racing_on_one_cold_binary_entry(tmp_path, n):
    job = {"action": "binary", "compiler": "fakecc 1.0", "source": "__kernel void race() {}\n",
           "compile_seconds": 0.3, "touch_again": True}
    results = race(tmp_path, job, n)
    assert all(r["origin"] == "compiled" for r in results)      # the race really happened
    assert all(r["right"] and r["second"]["right"] for r in results)
    assert all(r["warnings"] == [] for r in results)
    assert all(r["second"]["origin"] == "disk" for r in results)
    assert_one_clean_entry(tmp_path / "cache", results[0]["key"])
    after = run_worker(tmp_path / "cache", job)
    assert after["origin"] == "disk" and after["right"] and after["warnings"] == []


def test_processes_racing_on_one_cold_numba_module(tmp_path):
    job = {"action": "module", "scale": 5}
    results = race(tmp_path, job, 3)
    assert sum(r["origin"] == "compiled" for r in results) >= 2
    assert all(r["right"] for r in results)
    assert_one_clean_entry(tmp_path / "cache", results[0]["key"])
    after = run_worker(tmp_path / "cache", job)
    assert after["origin"] == "disk" and after["right"] and after["warnings"] == []
    assert after["numba_hits"] == 1 and after["numba_misses"] == 0


def test_processes_racing_on_one_cold_opencl_program(tmp_path, ocl):
    results = race(tmp_path, {"action": "opencl"}, 2)
    assert all(r["right"] for r in results)
    assert_one_clean_entry(tmp_path / "cache", results[0]["key"])
    after = run_worker(tmp_path / "cache", {"action": "opencl"})
    assert after["origin"] == "disk" and after["right"] and after["warnings"] == []
