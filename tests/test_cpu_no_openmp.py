"""The cpu backend runs every kernel on its morsel pool (backends/cpu/morsels.py), long rows
included, so it never starts numba's OpenMP pool: a fresh interpreter that runs long-row
queries big enough for morsels loads no OpenMP (GNU OpenMP would print its settings with
OMP_DISPLAY_ENV=true), never sets OMP_WAIT_POLICY, spends no CPU while idle after them (the
pool's threads block, they do not spin), and a child forked after them runs them again on
its own pool with the same bits. (This replaces the test of the OMP_WAIT_POLICY=passive rule
the long rows' prange loops needed.)"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import os, sys, time
    import numpy as np
    import querycompute as qc
    from querycompute.backends.cpu import morsels
    morsels.configure(workers=2, step=1)          # morsels on pool threads, even on 1 core
    X = np.linspace(-1, 1, 4 * 300_000, dtype=np.float32).reshape(4, -1)   # long rows, 1.2M
    Y = X.reshape(-1, 1000)

    def run():
        rows = qc.query(X).on("cpu").select(lambda r: np.exp(r).sum()).to_array()
        names = [k.name for k in qc.last_trace().kernels]
        cols = qc.query(Y).on("cpu").sum()
        names += [k.name for k in qc.last_trace().kernels]
        return rows, cols, names == ["qc_rows_morsels", "qc_rows_morsels"]
    rows, cols, by_morsels = run()
    ok = bool(np.allclose(rows, np.exp(X.astype(np.float64)).sum(axis=1), rtol=1e-5)
              and np.allclose(cols, Y.astype(np.float64).sum(axis=0), rtol=1e-5, atol=1e-3))
    import numba.np.ufunc.parallel as npp
    cpu0 = time.process_time()
    time.sleep(0.5)
    idle_cpu = time.process_time() - cpu0
    pid = os.fork()
    if pid == 0:
        again = run()
        same = all(a.tobytes() == b.tobytes() for a, b in zip(again[:2], (rows, cols)))
        own_pool = morsels._state["pid"] == os.getpid()     # the child started its own
        print("CHILD", same, again[2], own_pool, flush=True)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    print("RESULT", ok, by_morsels, npp._is_initialized, os.environ.get("OMP_WAIT_POLICY"),
          round(idle_cpu, 3), status, flush=True)
""")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_long_rows_run_on_the_morsel_pool_without_openmp(tmp_path):
    script = tmp_path / "no_openmp.py"          # lambdas are read from a real file
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env.update(QUERYCOMPUTE_TIERED="0", OMP_DISPLAY_ENV="true")
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    result = next(line for line in lines if line.startswith("RESULT")).split()
    assert result[1:5] == ["True", "True", "False", "None"], result   # right, morsels, no OpenMP
    assert float(result[5]) < 0.1, result                               # no thread spins idle
    assert result[6] == "0"
    assert "CHILD True True True" in lines, done.stdout
    assert "OMP_WAIT_POLICY" not in done.stdout + done.stderr           # OpenMP never loaded


def test_no_cpu_kernel_text_asks_for_a_parallel_loop():
    """No generated or fixed numba text can compile a prange loop: the modules' namespace
    has no prange, and no fixed kernel file asks numba for `parallel`."""
    from pathlib import Path

    import querycompute._codegen.ops as ops
    from querycompute._codegen.dialects import numba_py_runtime
    pytest.importorskip("numba")
    assert "prange" not in numba_py_runtime.namespace()
    assert "prange" not in numba_py_runtime.NAMESPACE_NAMES
    files = sorted(Path(ops.__file__).parent.glob("*/cpu_kernels.py"))
    assert files
    for f in files:
        text = f.read_text()
        assert "prange" not in text and "parallel=True" not in text, f
