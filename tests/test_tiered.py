"""Issue 12 items 3 and 5: CompiledQuery, the bounded memo, and tiered execution (the numpy
tier answers the first call of a new signature while the kernel compiles in the background)."""
import subprocess
import sys
import threading
import warnings

import numpy as np
import pytest

import querycompute as qc
from querycompute.run import engine
from querycompute.backends import registry
from querycompute.errors import CompileError

X = np.arange(1, 2001, dtype=np.float64)


def test_first_call_is_answered_by_the_numpy_tier_then_by_the_kernel():
    q = qc.query(X).on("cpu").select(lambda v: v * 3 - 1).where(lambda v: v > 100)
    cq = q.compile("sum", tiered=True)
    want = (X * 3 - 1)[X * 3 - 1 > 100].sum()
    assert cq() == want
    first = cq.trace
    assert first.backend == "cpu"
    if first.tier == "numpy":           # (a fast machine may have finished compiling already)
        assert [k.dialect for k in first.kernels] == ["numpy"]
    assert cq.wait(timeout=300)
    assert cq() == want
    assert cq.tier == "kernel" and cq.trace.tier == "kernel"
    assert [k.dialect for k in cq.trace.kernels] == ["llvm"]      # the cpu backend's llvm route


def test_tiering_follows_the_environment(monkeypatch):
    monkeypatch.setenv("QUERYCOMPUTE_TIERED", "1")
    q = qc.query(X).on("cpu").select(lambda v: v / 7 + 0.5)
    assert q.max() == (X / 7 + 0.5).max()
    assert qc.last_trace().tier in ("numpy", "kernel")
    assert q.compile("max").wait(timeout=300)
    assert q.max() == (X / 7 + 0.5).max() and qc.last_trace().tier == "kernel"
    monkeypatch.setenv("QUERYCOMPUTE_TIERED", "0")
    q2 = qc.query(X).on("cpu").select(lambda v: v / 9 + 0.5)
    assert q2.max() == (X / 9 + 0.5).max() and qc.last_trace().tier == "kernel"


def _broken_cpu_compile(monkeypatch):
    """Make the cpu backend's compiler fail, as a numba typing error would."""
    cpu = registry.get("cpu")

    def prepare(p):
        raise CompileError("numba", "TypingError: injected for the test", "# source", ())
    monkeypatch.setattr(cpu, "prepare", prepare)


def test_background_compile_error_is_a_warning_and_the_numpy_tier_keeps_answering(monkeypatch):
    _broken_cpu_compile(monkeypatch)
    q = qc.query(X).on("cpu").select(lambda v: v * 11 + 2)
    cq = q.compile("sum", tiered=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert cq() == (X * 11 + 2).sum()
        cq.wait(timeout=60)
        for _ in range(3):
            assert cq() == (X * 11 + 2).sum()
    assert cq.tier == "numpy" and cq.trace.tier == "numpy"
    msgs = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(msgs) == 1 and "background compile" in msgs[0] and "TypingError" in msgs[0]


def test_a_synchronous_compile_raises_compile_error(monkeypatch):
    _broken_cpu_compile(monkeypatch)
    q = qc.query(X).on("cpu").select(lambda v: v * 13 + 2)
    with pytest.raises(CompileError, match="injected"):
        q.compile("sum", tiered=False)


def test_compiled_query_reads_current_contents_and_captures():
    x = np.arange(10, dtype=np.int64)
    k = 3
    cq = qc.query(x).on("cpu").select(lambda v: v * k).compile("sum", tiered=False)
    assert cq() == 135 and cq.tier == "kernel" and cq.backend == "cpu"
    x[:] = 1
    k = 5
    assert cq() == 50                      # new contents, new captured value, no recompile
    assert cq.trace.kernels[0].cache == "memory"
    assert "qc_sum_chunks" in cq.source() and "define void" in cq.source()   # the llvm route's IR
    assert "__kernel" in cq.source("opencl")
    assert "fused plan" in cq.explain()
    assert repr(cq).startswith("<CompiledQuery sum")


def test_compiled_query_terminals_by_spec_and_bundle():
    q = qc.query(X).on("cpu").where(lambda v: v > 1e9)
    assert q.compile(qc.min(default=-1.0), tiered=False)() == -1.0
    got = q.compile(qc.agg(n=qc.count, total=qc.sum), tiered=False)()
    assert got == {"n": 0, "total": 0.0}
    with pytest.raises(qc.EmptySequenceError):
        q.compile("max", tiered=False)()
    with pytest.raises(TypeError, match="options"):
        q.compile("count", tiered=False)(stream=1)


def test_compiled_query_trace_is_per_thread():
    cq = qc.query(X).on("numpy").select(lambda v: v + 1).compile("sum")
    seen = {}

    def call(name, n):
        cq.query._source._items[0][:1]   # (the same arrays: only the trace differs)
        cq()
        seen[name] = cq.trace.n
    threads = [threading.Thread(target=call, args=(i, i)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert set(seen.values()) == {len(X)}
    assert cq.trace is None                # this thread never called it


def test_memo_stays_bounded_with_thousands_of_distinct_lambdas():
    old = engine._memo.size
    qc.set_memo_size(16)
    try:
        x = np.arange(5, dtype=np.int64)
        for i in range(300):                     # each text lambda is a new signature
            assert qc.query(x).on("numpy").select(f"lambda v: v * {i}").sum() == 10 * i
        assert len(engine._memo) <= 16
        assert len(engine._compiling) == 0
    finally:
        qc.set_memo_size(old)
    with pytest.raises(ValueError):
        qc.set_memo_size(0)


def test_import_does_not_import_compilers():
    code = ("import sys, querycompute; "
            "print(sorted(m for m in ('numba', 'pyopencl', 'cupy', 'llvmlite', 'filelock') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_lambdas_given_as_text():
    x = np.arange(6, dtype=np.int32)
    q = qc.query(x).on("numpy").select("lambda v: v * 2").where("lambda v: v > 3")
    assert q.to_array().tolist() == [4, 6, 8, 10]
    assert qc.query(x).on("numpy").select("lambda v: np.sqrt(v)").max() == np.sqrt(np.int32(5))
    with pytest.raises(qc.UnsupportedLambdaError, match="one lambda"):
        qc.query(x).select("v * 2")
    with pytest.raises(qc.UnsupportedLambdaError, match="no value"):
        qc.query(x).select("lambda v: v * k")


XI = np.arange(-500, 1500, dtype=np.int64)


def _opencl_refuses(monkeypatch):
    """The opencl backend's compile says it can't serve this device (as NVRTC does for a GPU
    newer than it knows): BackendUnavailableError, not a compile error."""
    if not registry.availability("opencl")[0]:
        pytest.skip("no OpenCL device here")
    ocl = registry.get("opencl")

    def prepare(p):
        raise qc.BackendUnavailableError("injected: this device is beyond the compiler")
    monkeypatch.setattr(ocl, "prepare", prepare)


def test_background_backend_unavailable_is_raised_for_a_pinned_backend(monkeypatch):
    _opencl_refuses(monkeypatch)
    # (integers: a float sum on a GPU backend has no numpy tier, see test_issue28_tiers.py)
    cq = qc.query(XI).on("opencl").select(lambda v: v * 17 + 3).compile("sum", tiered=True)
    assert cq() == (XI * 17 + 3).sum()          # the numpy tier, while "compiling"
    assert cq.wait(timeout=60)
    with pytest.raises(qc.BackendUnavailableError, match="beyond the compiler"):
        cq()


def test_background_backend_unavailable_makes_auto_fall_back_to_cpu(monkeypatch):
    _opencl_refuses(monkeypatch)
    monkeypatch.setattr(registry, "_auto", {False: "opencl", True: "opencl"})
    monkeypatch.setattr(registry, "_broken", {})
    cq = qc.query(XI).select(lambda v: v * 19 + 3).compile("sum", tiered=True)
    assert cq.backend == "opencl"
    assert cq() == (XI * 19 + 3).sum()
    assert cq.wait(timeout=60)
    with pytest.warns(RuntimeWarning, match="falling back to 'cpu'"):
        assert cq() == (XI * 19 + 3).sum()
    assert cq.trace.backend == "cpu" and "opencl failed" in cq.trace.fallback
