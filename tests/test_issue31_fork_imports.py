"""Issue 31 items 4-5, issue 26 items 7 and 10: fork during a background compile, threads
making their first queries at once, and the trace's compile/run split.

Each scenario runs in a fresh process (its imports and threads are what is under test),
bounded by a subprocess timeout: a regression fails, it does not hang the suite.
"""
from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import querycompute as qc
from querycompute import log as qc_log
from querycompute.backends import registry

pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or not registry.availability("cpu")[0],
                                reason="needs fork() and the cpu backend")


def _run(tmp_path, code: str, timeout: float = 240, args=(), **env) -> str:
    """Run `code` in a fresh interpreter with tiering on and a private empty cache."""
    script = tmp_path / "scenario.py"          # (a file: lambdas need their source)
    script.write_text(textwrap.dedent(code))
    full = dict(os.environ, QUERYCOMPUTE_TIERED="1",
                QUERYCOMPUTE_CACHE_DIR=str(tmp_path / "cache"), **env)
    try:
        out = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True,
                             timeout=timeout, env=full, cwd=str(tmp_path))
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the scenario hung (no exit within {timeout} s); output so far: "
                    f"{exc.stdout!r} {exc.stderr!r}")
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def test_a_child_forked_during_a_background_compile_compiles_its_next_query(tmp_path):
    out = _run(tmp_path, """
        import os, warnings
        import numpy as np
        import querycompute as qc
        warnings.simplefilter("error", qc.FallbackWarning)
        x = np.arange(1000, dtype=np.float64)
        assert qc.query(x).select(lambda v: v * 2).sum() == 999000.0
        assert qc.last_trace().tier == "numpy"        # cold: its kernel compiles now
        pid = os.fork()                                # at once, as a pre-forking server
        if pid == 0:
            code = 1
            try:
                cq = qc.query(x).where(lambda v: v > 3).compile("sum")
                assert cq.wait(120)
                assert cq() == 499494.0
                trace = cq.trace
                assert (trace.backend, trace.tier) == ("cpu", "kernel"), trace
                # the parent's query, whose compile the fork interrupted, gets its kernel too
                q = qc.query(x).select(lambda v: v * 2)
                for _ in range(2000):
                    assert q.sum() == 999000.0
                    if qc.last_trace().tier == "kernel":
                        break
                    qc.query(x).select(lambda v: v * 2).compile("sum").wait(1)
                assert qc.last_trace().tier == "kernel"
                code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, status
        print("ok")
        """)
    assert out.strip() == "ok"


def test_a_fork_pool_right_after_a_cold_tiered_query(tmp_path):
    out = _run(tmp_path, """
        import multiprocessing as mp
        import numpy as np
        import querycompute as qc
        x = np.arange(1000, dtype=np.float64)

        def work(k):
            cq = qc.query(x).where(lambda v: v > k).compile("sum")
            assert cq.wait(120)
            return float(cq()), cq.trace.backend, cq.trace.tier

        if __name__ == "__main__":
            qc.query(x).select(lambda v: v * 2).sum()
            assert qc.last_trace().tier == "numpy"
            with mp.get_context("fork").Pool(3) as pool:
                got = pool.map_async(work, [1, 2, 3, 4]).get(timeout=180)
            want = [float(x[x > k].sum()) for k in (1, 2, 3, 4)]
            assert got == [(w, "cpu", "kernel") for w in want], got
            print("ok")
        """)
    assert out.strip() == "ok"


def test_threads_making_their_first_queries_at_once(tmp_path):
    """Tiered and synchronous compiles on every backend here, started together: on the old
    code numba (or a backend module) came out half imported in one of the threads."""
    code = """
        import sys, threading, warnings
        import numpy as np
        import querycompute as qc
        warnings.simplefilter("error")
        here = sys.argv[1].split(",")     # (asked here, this process would import them)
        x = np.arange(5000, dtype=np.float32)
        chains = [lambda q: q.select(lambda v: v * 2), lambda q: q.where(lambda v: v > 3),
                  lambda q: q.select(lambda v: v - 2), lambda q: q.select(lambda v: -v),
                  lambda q: q.where(lambda v: v > 7), lambda q: q.select(lambda v: v + 1),
                  lambda q: q.where(lambda v: v < 50), lambda q: q.select(lambda v: v * v)]
        # five threads on cpu, compiling in the background or in the calling thread
        wanted = ["cpu", "opencl", "cpu", "webgpu", "cpu", "opencl", "cpu", "cpu"]
        tiered = [True, False, False, True, True, False, False, True]
        errors, start = [], threading.Barrier(8)

        def work(i):
            backend = wanted[i] if wanted[i] in here else "cpu"
            try:
                start.wait()
                q = chains[i](qc.query(x).on(backend))
                cq = q.compile("sum", tiered=tiered[i])
                assert cq.wait(180)
                assert cq() == q.on("numpy").sum()
                assert cq.tier == "kernel", (backend, cq.tier)
            except BaseException as exc:
                errors.append(f"{backend}: {type(exc).__name__}: {exc}")

        threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        print("ok")
        """
    here = ",".join(b for b in ("cpu", "opencl", "webgpu") if registry.availability(b)[0])
    for k in range(5):                    # fresh processes: the race is at first import
        (tmp_path / str(k)).mkdir()
        out = _run(tmp_path / str(k), code, args=[here], WGPU_BACKEND_TYPE="Vulkan")
        assert out.strip() == "ok"


def test_the_trace_books_numbas_first_call_compile_as_compile(caplog, monkeypatch):
    """The pass's entry points compile on its first call, inside the call: the trace
    row counts numba's compiler time (measured here by numba's own event) as compile, not
    run; a compile running long logs its progress at INFO."""
    from numba.core import event
    monkeypatch.setenv("QUERYCOMPUTE_CPU_LLVM", "0")  # the numba route (not the llvm one)
    x = np.arange(200_000, dtype=np.float64)          # several chunks: morsels
    monkeypatch.setattr(qc_log, "PROGRESS_AFTER", 0.0)  # any compile counts as long here
    seen = []

    class Timer(event.Listener):           # numba's compiler time in this thread
        def on_start(self, ev):
            seen.append(-time.perf_counter())

        def on_end(self, ev):
            seen.append(time.perf_counter())

    caplog.set_level(logging.INFO, logger="querycompute")
    q = qc.query(x).on("cpu").select(lambda v: v * 3.5).where(lambda v: v > 11.0)
    with event.install_listener("numba:compiler_lock", Timer()):
        t0 = time.perf_counter()
        q.sum()
        wall_ms = (time.perf_counter() - t0) * 1e3
    (row,) = qc.last_trace().kernels
    assert row.name.endswith("_morsels") and row.cache == "compiled"
    # numba's compiler spans (outermost start/end pairs) inside the call
    depth, jit_ms, begin = 0, 0.0, 0.0
    for t in seen:
        if t < 0:
            begin = -t if depth == 0 else begin
            depth += 1
        else:
            depth -= 1
            jit_ms += (t - begin) * 1e3 if depth == 0 else 0.0
    assert jit_ms > 0
    assert row.compile_ms >= jit_ms * 0.99
    # run time + numba's compiler time fit in the call (the old row's run held the compile)
    assert row.run_ms + jit_ms <= wall_ms
    assert any("still compiling" in r.getMessage() and "qc_" in r.getMessage()
               for r in caplog.records), [r.getMessage() for r in caplog.records]
