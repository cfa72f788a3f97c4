"""Thread safety (issue 12 item 4): many threads running queries at once, in fresh processes
so the in-memory state and the disk cache start cold (and then warm), on every backend that
runs here. Each result is checked against NumPy; any exception in any thread fails the test.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

WORKER = Path(__file__).with_name("thread_worker.py")
BACKENDS = ["numpy", "cpu", "opencl"]


def _run(args, cache_dir) -> dict:
    env = dict(os.environ, QUERYCOMPUTE_CACHE_DIR=str(cache_dir), QUERYCOMPUTE_TIERED="0")
    out = subprocess.run([sys.executable, str(WORKER), *map(str, args)], env=env,
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("backend", BACKENDS)
def test_8_threads_16_chains_cold_then_warm_disk_cache(backend, tmp_path, request):
    if backend == "opencl":
        request.getfixturevalue("ocl")        # skips without a device that compiles
    for state in ("cold", "warm"):
        result = _run(["chains", backend, 8, 2], tmp_path)
        assert result["errors"] == [], f"{state} disk cache: {result['errors']}"
        assert result["checked"] == 8 * 16 * 2
        assert result["backends"] == [backend]


@pytest.mark.parametrize("backend", BACKENDS)
def test_8_threads_5000_calls_of_one_query(backend, tmp_path, request):
    if backend == "opencl":
        request.getfixturevalue("ocl")        # skips without a device that compiles
    result = _run(["repeat", backend, 8, 5000], tmp_path)
    assert result["errors"] == []
    assert result["checked"] == 8 * 5000


def test_last_trace_is_per_thread():
    """qc.last_trace() tells each thread about its own last terminal."""
    import threading

    import numpy as np

    import querycompute as qc
    x = np.arange(100, dtype=np.float32)
    seen = {}
    ready = threading.Barrier(2)

    def worker(name, run):
        run()
        ready.wait()                   # both have run before either reads its trace
        seen[name] = qc.last_trace().terminal
    a = threading.Thread(target=worker, args=("a", lambda: qc.query(x).on("numpy").sum()))
    b = threading.Thread(target=worker, args=("b", lambda: qc.query(x).on("numpy").count()))
    a.start(); b.start(); a.join(); b.join()
    assert seen == {"a": "sum", "b": "count"}


def test_keyed_locks_compile_once_and_leave_nothing_behind():
    import threading
    import time

    from querycompute.locks import KeyedLocks
    locks, memo, builds = KeyedLocks(), {}, []
    go = threading.Barrier(8)

    def get(key):
        go.wait()
        if key not in memo:
            with locks.hold(key):
                if key not in memo:
                    builds.append(key)
                    time.sleep(0.05)       # a slow compile: the other threads must wait
                    memo[key] = key * 2
        assert memo[key] == key * 2
    threads = [threading.Thread(target=get, args=(t % 2,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(builds) == [0, 1]       # each key built once, the two concurrently
    assert len(locks) == 0
