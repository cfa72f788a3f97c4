"""Issue 28 item 2: one cpu entry point per kernel step, parallel by morsels
(backends/cpu/morsels.py, DESIGN.md 5f). Results do not depend on the morsel size or the
number of pool threads; a forked child runs kernels on its own pool; many Python threads
launch at once; a small call runs inline (no pool thread); the first big call compiles
nothing more than the first small one."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import querycompute as qc
from querycompute._codegen.dialects.numba_py import CHUNK
from querycompute.backends import registry
from querycompute.backends.cpu import morsels

pytestmark = pytest.mark.skipif(not registry.availability("cpu")[0], reason="needs numba")


# A pool thread takes morsels: the caller runs morsel 0 alone (a compile happens on its
# thread), then of morsels 1 and 2 the first taken waits for the other, so two threads ran
# them, one of them the pool's. Run here and, as text, in a forked child's script.
POOL_CHECK = textwrap.dedent("""
    import threading
    from querycompute.backends.cpu import morsels


    def pool_thread_ran() -> bool:
        names, go = set(), threading.Event()

        def pair(c0, c1):
            if c0 == 0:
                return
            names.add(threading.current_thread().name)
            if c0 == 1:
                go.wait(60)
            else:
                go.set()
        morsels.run(pair, 3, ())
        return go.is_set() and len(names) == 2 and any(
            n.startswith("querycompute-morsels-") for n in names)
""")


@pytest.fixture(autouse=True)
def _default_morsels():
    yield
    morsels.configure()


def _data(n: int, seed: int) -> np.ndarray:
    """float32 with negatives, NaNs, infinities and extremes sprinkled in."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(n) * 1e3).astype(np.float32)
    if n:
        k = rng.integers(0, n, size=min(n, 8))
        x[k[:2]] = np.nan
        x[k[2:4]] = np.inf
        x[k[4:6]] = -np.float32(3.4e38)
        x[k[6:]] = -0.0
    return x


def _results(x: np.ndarray, backend: str = "cpu") -> list:
    q = qc.query(x).on(backend)
    return [q.sum(), q.where(lambda v: v > 0).sum(), q.min(default=0.0), q.max(default=0.0),
            q.where(lambda v: v < -500).count(),
            q.where(lambda v: v > 0).select(lambda v: v * 2 + 1).to_array(),
            q.where(lambda v: v > 3000).to_array(),               # few survivors: sparse writer
            q.select(lambda v: v - 1).to_array(),
            q.skip(CHUNK + 5).take(CHUNK).to_array()]             # a window across chunks


def _same(a: list, b: list) -> None:
    for u, v in zip(a, b):
        np.testing.assert_array_equal(np.asarray(u), np.asarray(v))
        assert np.asarray(u).dtype == np.asarray(v).dtype


@settings(max_examples=6, deadline=None)
@given(n=st.integers(0, 5 * CHUNK + 17), seed=st.integers(0, 2**16),
       workers=st.integers(0, 3), step=st.integers(1, 3))
def test_results_equal_across_morsel_sizes_and_worker_counts(n, seed, workers, step):
    x = _data(n, seed)
    morsels.configure(workers=0)                 # everything in one call on this thread
    one_call = _results(x)
    morsels.configure(workers=workers, step=step)
    _same(_results(x), one_call)                 # the same bits, whoever ran which chunk
    numpy = _results(x, "numpy")                 # the oracle (float sums: NumPy's pairwise)
    for k in (2, 3, 4, 5, 6, 7, 8):              # extrema, counts and arrays exactly
        _same([one_call[k]], [numpy[k]])


def test_scheduler_runs_every_chunk_once_and_reraises():
    """morsels.run over a plain Python function: each chunk is visited exactly once, in
    morsels of `step` chunks, and an exception in any morsel reaches the caller."""
    morsels.configure(workers=2, step=3)
    seen, lock = [], threading.Lock()

    def visit(c0, c1, out):
        with lock:
            out.extend(range(c0, c1))
            assert c1 - c0 <= 3
    assert morsels.run(visit, 100, (seen,)) == 34
    assert sorted(seen) == list(range(100))

    morsels.configure(workers=1, step=1)
    before = morsels.stats()["pooled"]
    ns = {}
    exec(POOL_CHECK, ns)                          # noqa: S102  (this file's own code)
    assert ns["pool_thread_ran"]()
    assert morsels.stats()["pooled"] >= before + 1

    def fail(c0, c1):
        if c0 <= 50 < c1:
            raise ZeroDivisionError(f"chunk 50 in [{c0}, {c1})")
    with pytest.raises(ZeroDivisionError, match="chunk 50"):
        morsels.run(fail, 100, ())
    with pytest.raises(ValueError, match="workers must be >= 0 and step >= 1"):
        morsels.configure(step=0)


def test_small_call_runs_inline_and_big_call_uses_the_pool():
    morsels.configure(workers=1, step=1)
    x = _data(10_000, 1)
    q = qc.query(x).on("cpu").where(lambda v: v > 0)
    q.sum()
    before = morsels.stats()["pooled"]
    assert q.sum() == q.on("numpy").sum() and q.to_array().size == (x > 0).sum()
    assert morsels.stats()["pooled"] == before          # no pool thread ran a morsel
    assert qc.last_trace().kernels[0].name.endswith("_inline")
    big = _data(8 * CHUNK, 2)
    qb = qc.query(big).on("cpu").where(lambda v: v > 0)
    assert qb.count() == int((big > 0).sum())
    (row,) = qc.last_trace().kernels
    assert row.name.endswith("_morsels") and row.grid == (8,)


def test_first_big_call_compiles_nothing_more():
    """One entry point for every n: compiled by the first (small) call, so a big call later
    finds it in memory (the old parallel flavour compiled on the first big call)."""
    q = qc.query(_data(1000, 3)).on("cpu").select(lambda v: v * 0.25 + 7.0)
    q.to_array()
    qc.query(_data(6 * CHUNK, 4)).on("cpu").select(lambda v: v * 0.25 + 7.0).to_array()
    (row,) = qc.last_trace().kernels
    assert row.name.endswith("_morsels") and row.cache == "memory" and row.compile_ms == 0.0


def test_many_python_threads_launch_at_once():
    morsels.configure(workers=2, step=1)
    inputs = [_data(3 * CHUNK + k, k) for k in range(8)]
    want = [(float(qc.query(x).on("numpy").where(lambda v: v > 0).sum()),
             x[x < -100]) for x in inputs]
    got, errors = [None] * 8, []
    start = threading.Barrier(8)

    def work(k):
        try:
            start.wait()
            for _ in range(5):
                q = qc.query(inputs[k]).on("cpu")
                got[k] = (float(q.where(lambda v: v > 0).sum()), q.where(lambda v: v < -100).to_array())
        except BaseException as exc:          # reported below
            errors.append(exc)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert errors == []
    for (gs, ga), (ws, wa) in zip(got, want):
        assert gs == pytest.approx(ws, rel=1e-5)
        np.testing.assert_array_equal(ga, wa)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_forked_child_runs_kernels_on_its_own_pool(tmp_path):
    script = tmp_path / "fork_morsels.py"           # lambdas need a real file
    script.write_text(POOL_CHECK + textwrap.dedent("""
        import os
        import numpy as np, querycompute as qc
        morsels.configure(workers=1, step=1)
        x = np.arange(5 * 65536, dtype=np.float64) - 1000.5
        q = qc.query(x).on("cpu").where(lambda v: v > 0)
        parent = q.sum()
        assert pool_thread_ran()                      # the parent's pool is started
        pid = os.fork()
        if pid == 0:                                  # none of its threads exist here
            ok = q.sum() == parent and (q.to_array() == x[x > 0]).all()
            os._exit(0 if ok and pool_thread_ran() else 3)
        _, status = os.waitpid(pid, 0)
        print("CHILD", os.waitstatus_to_exitcode(status))
    """))
    env = dict(os.environ, QUERYCOMPUTE_TIERED="0", QUERYCOMPUTE_CACHE_DIR=str(tmp_path / "cache"))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "CHILD 0" in out.stdout
