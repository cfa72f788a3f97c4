"""Issue 12 item 4: a process forked after queries ran (threads of numba's pool, pocl's driver,
background compiles and held locks do not survive fork) gets right answers or a clear error,
never a hang. Each scenario runs in a fresh interpreter that forks; the test waits for both."""
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")

SCRIPT = textwrap.dedent('''
    import os, sys, threading
    import numpy as np
    import querycompute as qc
    x = np.arange(100_000, dtype=np.float32)
    backend = sys.argv[1]
    parent = qc.query(x).on(backend).select(lambda v: v * 2).sum()
    held = qc.run.engine._memo._lock        # a lock another thread holds at the fork
    if backend == "cpu":
        threading.Thread(target=held.acquire, daemon=True).start()
        while not held.locked():
            pass
    pid = os.fork()
    if pid == 0:
        out = []
        try:
            out.append(str(qc.query(x).on(backend).select(lambda v: v * 2).sum() == parent))
            out.append(str(np.isclose(qc.query(x).on(backend).select(lambda v: v * 3).sum(),
                                      (x.astype(np.float64) * 3).sum(), rtol=1e-6)))
        except qc.BackendUnavailableError as exc:
            out.append("unavailable: " + str(exc))
        out.append(str(qc.query(x).select(lambda v: v - 1).max() == x.max() - 1))   # auto
        print("|".join(out), flush=True)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    print("status", status, flush=True)
''')


def _run(backend: str, tmp_path) -> list[str]:
    script = tmp_path / "fork_script.py"        # a file: lambdas are read from source
    script.write_text(SCRIPT)
    env = dict(os.environ, QUERYCOMPUTE_TIERED="0")
    out = subprocess.run([sys.executable, str(script), backend], capture_output=True, text=True,
                         timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.strip().splitlines()
    assert lines[-1] == "status 0", out.stdout + out.stderr[-2000:]
    return lines[-2].split("|")


def test_fork_after_a_cpu_query_with_its_thread_pool_started_and_a_lock_held(tmp_path):
    assert _run("cpu", tmp_path) == ["True", "True", "True"]


def test_fork_after_an_opencl_query(tmp_path, ocl):
    child = _run("opencl", tmp_path)
    assert child[0].startswith("unavailable: ") and "fork" in child[0] and "spawn" in child[0]
    assert child[1] == "True"             # auto picks a backend that works in the child
