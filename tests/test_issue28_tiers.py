"""Issue 28 item 3: tiers that never change a result.

* The numpy tier (the numpy backend) gives the cpu kernel's bits on every reduce terminal and
  dtype: float sums and means follow the kernel's fixed order (_codegen/sum_order.py), min /
  max rank -0.0 below 0.0 as the kernels do (hypothesis, with NaN, infinities, signed zeros).
* Where the numpy tier can't (a GPU backend's float sum, a float fold) the first call waits
  for the kernel (tiers.differs).
* A long first call moves to the kernel between morsels, and its result is the kernel's.
* Interpreter exit does not wait for a background compile.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import querycompute as qc
from querycompute._codegen import sum_order
from querycompute.backends import registry
from querycompute.run import tiers, windows

DTYPES = ["float16", "float32", "float64", "int8", "int32", "uint64", "bool"]
SPECIAL = [0.0, -0.0, np.nan, np.inf, -np.inf, 1e30, -1e-30, 65504.0, 5e-8]


def _data(dt: str, n: int, seed: int, specials: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dt == "bool":
        return rng.random(n) < 0.5
    if dt.startswith("float"):
        x = (rng.standard_normal(n) * 3.0 ** rng.integers(0, 6)).astype(dt)
        if n:
            with np.errstate(over="ignore"):
                x[rng.integers(0, n, specials)] = np.array(SPECIAL, dt)[rng.integers(0, len(SPECIAL), specials)]
        return x
    info = np.iinfo(dt)
    return rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)


def _terminals(q):
    """Every reduce terminal (three kernels: the standalone sum, then the rest as agg
    bundles, without and with a where)."""
    preds = dict(c=qc.count(lambda v: v > 0), a=qc.any(lambda v: v > 0), l=qc.all(lambda v: v > 0))
    return {
        "sum": q.sum(),
        "agg": q.agg(s=qc.sum(), m=qc.mean(default=0), lo=qc.min(default=0), hi=qc.max(default=0),
                     **preds),
        "where.agg": q.where(lambda v: v > 0).agg(s=qc.sum(), m=qc.mean(default=0), lo=qc.min(default=0)),
    }


def _bits(v):
    if isinstance(v, dict):
        return {k: _bits(x) for k, x in v.items()}
    a = np.asarray(v)
    return (str(a.dtype), a.tobytes())


# lengths across the lane, block and chunk edges (8, 512, 65536) and a numpy window (2**20)
LENGTHS = st.sampled_from([0, 1, 7, 9, 511, 513, 4099, 65535, 65537, 200_003, (1 << 20) + 77])


@pytest.mark.parametrize("dt", DTYPES)
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=LENGTHS, seed=st.integers(0, 2**32 - 1), specials=st.integers(0, 40))
def test_numpy_tier_bits_equal_the_cpu_kernels_on_every_terminal_and_dtype(dt, n, seed, specials):
    x = _data(dt, n, seed, specials)
    want = _terminals(qc.query(x).on("cpu"))
    got = _terminals(qc.query(x).on("numpy"))
    for name in want:
        assert _bits(got[name]) == _bits(want[name]), (dt, n, name, got[name], want[name])


def test_sum_order_is_the_documented_one():
    """sum_order.chunk_totals against the order written out in plain Python (float32)."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal(sum_order.CHUNK + 1000).astype(np.float32)

    def tree(v):
        v = list(v)
        while len(v) > 1:
            v = [np.float32(a + b) for a, b in zip(v[0::2], v[1::2])] + ([v[-1]] if len(v) % 2 else [])
        return v[0]

    def chunk(c):
        blocks = []
        for b in range(0, len(c), sum_order.BLOCK):
            lanes = [np.float32(-0.0)] * sum_order.LANES
            for i, v in enumerate(c[b:b + sum_order.BLOCK]):
                lanes[i % sum_order.LANES] = np.float32(lanes[i % sum_order.LANES] + v)
            blocks.append(tree(lanes))
        return tree(blocks)

    chunks = [chunk(x[c:c + sum_order.CHUNK]) for c in range(0, len(x), sum_order.CHUNK)]
    assert sum_order.chunk_totals(x).tolist() == chunks
    assert sum_order.total(sum_order.chunk_totals(x), "float32") == np.float32(tree(chunks) + np.float32(0))
    assert sum_order.total(np.empty(0, np.float32), "float32") == 0 and \
        not np.signbit(sum_order.total(np.empty(0, np.float32), "float32"))


def test_where_the_numpy_tier_would_differ_the_first_call_waits_for_the_kernel(caplog):
    x = np.linspace(-3, 7, 5000)
    q = qc.query(x).on("cpu")

    def differs(query, terminal, backend):
        return tiers.differs(query.lowered(terminal)[0], backend)
    assert differs(q, "sum", "cpu") is None and differs(q, "mean", "cpu") is None
    assert "tree order" in differs(q, "sum", "opencl")
    assert differs(qc.query(x.astype(np.int64)), "sum", "opencl") is None
    assert "fold" in differs(q, qc.aggregate(lambda a, b: a + b, 0.0, associative=True), "cpu")
    # an in-order fold runs sequentially on both tiers: the same bits
    assert differs(q, qc.aggregate(lambda a, b: a * 0.5 + b, 0.0), "cpu") is None
    if not registry.availability("opencl")[0]:
        return
    with caplog.at_level("INFO", logger="querycompute"):
        cq = qc.query(x).on("opencl").select(lambda v: v * 3).compile("sum", tiered=True)
    assert cq.tier == "kernel"                      # no numpy tier: it compiled first
    assert cq() == qc.query(x).on("opencl").select(lambda v: v * 3).sum()
    assert any("waits for the opencl kernel" in r.getMessage() for r in caplog.records)
    ci = qc.query(np.arange(-50, 5000, dtype=np.int64)).on("opencl").select(lambda v: v * 3).compile(
        "sum", tiered=True)
    first = ci()                                    # integers: the numpy tier may answer
    assert ci.wait(timeout=120) and ci.tier == "kernel"
    assert _bits(ci()) == _bits(first)


@pytest.fixture
def held_compiles(monkeypatch):
    """Background compiles wait for the returned event; morsels are one cpu chunk long."""
    gate = threading.Event()
    monkeypatch.setattr(tiers, "hold_compiles", gate)
    monkeypatch.setattr(windows.TierSwitch, "morsel", sum_order.CHUNK)
    yield gate
    gate.set()


@pytest.mark.parametrize("source", ["array", "range"])
def test_a_long_first_call_switches_to_the_kernel_between_morsels(held_compiles, monkeypatch, source):
    n = 5 * sum_order.CHUNK + 123
    seen = []

    def between(k, pending):
        seen.append(k)
        if k == 2:                      # two morsels on the numpy tier, then the kernel is ready
            held_compiles.set()
            assert pending.wait(timeout=300)
    monkeypatch.setattr(tiers, "between_morsels", between)
    x = np.arange(n, dtype=np.int64) * 7919 % 100_003 - 50_000
    if source == "array":
        q = qc.query(x).on("cpu").select(lambda v: v * 3 + 1)
    else:
        q = qc.range(-50_000, n - 50_000).on("cpu").select(lambda v: v * 3 + 1)
    want = {"count": q.count(lambda v: v % 5 == 2), "sum": q.sum(), "min": q.min(), "max": q.max()}
    os.environ["QUERYCOMPUTE_TIERED"] = "1"
    try:
        got = q.agg(count=qc.count(lambda v: v % 5 == 2), sum=qc.sum(), min=qc.min(), max=qc.max())
        trace = qc.last_trace()
    finally:
        os.environ["QUERYCOMPUTE_TIERED"] = "0"
    assert seen == [1, 2]
    assert _bits(got) == _bits(want)
    caches = [k.cache for k in trace.kernels]
    assert caches[:2] == ["interpreted", "interpreted"] and len(caches) == 3, caches
    assert trace.tier == "kernel"


def test_a_first_call_that_cannot_switch_waits_for_its_kernel_when_long(monkeypatch):
    """A float sum can't be split between tiers without other bits: from
    NUMPY_TIER_MAX_UNSPLIT elements on, its first call waits for the kernel."""
    monkeypatch.setattr(tiers, "NUMPY_TIER_MAX_UNSPLIT", 10_000)
    x = np.linspace(-1, 1, 20_000)
    cq = qc.query(x).on("cpu").select(lambda v: v * 1.5).compile("sum", tiered=True)
    assert cq._entry.pending.numpy_max == 10_000
    r = cq()
    assert cq.trace.tier == "kernel"
    assert _bits(r) == _bits(qc.query(x).on("numpy").select(lambda v: v * 1.5).sum())


def test_interpreter_exit_does_not_wait_for_a_background_compile(tmp_path):
    """A script whose compiles never end (held by the test hook) still exits: the one in
    flight is waited for at most tiers.EXIT_WAIT_S, the queued one is dropped."""
    script = textwrap.dedent("""
        import threading, numpy as np, querycompute as qc
        from querycompute.run import tiers
        tiers.hold_compiles = threading.Event()          # never set: no compile ever ends
        x = np.arange(1000, dtype=np.int64)
        print(qc.query(x).on("cpu").select("lambda v: v * 3").sum(),
              qc.query(x).on("cpu").where("lambda v: v > 5").count(), qc.last_trace().tier)
    """)
    env = dict(os.environ, QUERYCOMPUTE_TIERED="1", QUERYCOMPUTE_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=os.pathsep.join([os.path.dirname(os.path.dirname(qc.__file__))]
                                          + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                         timeout=240)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1498500", "994", "numpy"]


def test_the_sum_order_benchmark_runs(capsys):
    import importlib.util
    import pathlib
    path = pathlib.Path(__file__).parent.parent / "benchmarks" / "sum_order.py"
    spec = importlib.util.spec_from_file_location("sum_order_bench", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.main(n=70_000, repeat=1)
    assert capsys.readouterr().out.count(" ms (median ") == 6


def test_cpu_availability_while_the_compile_thread_imports_numba(monkeypatch):
    """The compile thread imports numba in the background; a query on the main thread that
    asks whether the cpu backend is there meanwhile finds numba in sys.modules without its
    __version__ yet (a partly initialised module): that is "available", not an error."""
    import types
    pytest.importorskip("numba")
    from querycompute.backends.cpu.cpu import CpuBackend
    monkeypatch.setitem(sys.modules, "numba", types.ModuleType("numba"))
    ok, why = CpuBackend().availability()
    assert ok and why.startswith("numba (LLVM JIT")


def test_staged_float_plans_answer_on_the_numpy_tier_with_the_kernels_bits():
    """A sort, a top-k or a join over floats is exact on every runtime, and the sum after it
    follows the one float-sum order: the numpy tier answers their first call (no wait for
    the kernel), with the bits the kernel gives later. (A group_by's or a scan's float adds
    follow each runtime's own order: Stage.adds_floats_in_own_order; those wait.)"""
    x = np.random.default_rng(5).random(20_000, dtype=np.float32) * 2000
    keys = np.arange(100, dtype=np.int64)
    dims = qc.query(k=keys, w=keys.astype(np.float32))
    plans = [qc.query(x).on("cpu").order_by(lambda v: -v).take(700),
             qc.query(x=x, k=np.arange(20_000, dtype=np.int64) % 100).on("cpu")
             .join(dims, lambda r: r.k, lambda d: d.k, lambda r, d: r.x * d.w)]
    for q in plans:
        cq = q.compile("sum", tiered=True)
        first = cq()
        assert cq.trace.tier == "numpy"
        assert cq.wait(timeout=300) and cq.tier == "kernel"
        later = cq()
        assert cq.trace.tier == "kernel" and np.float32(first).tobytes() == np.float32(later).tobytes()
