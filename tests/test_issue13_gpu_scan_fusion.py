"""Issue 13 item 1 ("a where after a scan in its last pass") on the GPU dialects: `scan ->
where/select -> count / sum / first / agg / to_array` runs the pass inside the scan's last
pass (ops/scan/fused_gpu.py): the scanned column is never stored. On OpenCL (pocl) and,
through the CPU harness, CUDA C (single-pass look-back) and MSL (reduce-then-scan), results
equal plain Python (exact data) and the unfused plan's bits (arbitrary floats: the GPU
scan's own output, filtered), for n = 0, 1, the tile edges and more than three tiles, with
selects before and after. Items 3 and 4: explain() shows one stage with its bytes per
element, .source() the fused kernels, every fused kernel compiles with NVRTC (sm_80,
sm_90) and passes the Metal compile check, and the transfer counter shows nothing of size n
read back."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from compile_checks import ARCHS, metal_compiles, ptx_of

import querycompute as qc
from querycompute.plan import stage_kinds as S
from querycompute._codegen.ops.scan import fused_gpu as scan_fused
from querycompute.backends.gpu.device_columns import TRANSFERS

OPENCL = qc.backends()["opencl"]["available"]
K = 5                      # captured: a kernel parameter


def _data(dt: str, n: int) -> np.ndarray:
    rng = np.random.default_rng(n + len(dt))
    if dt.startswith("float"):
        return (rng.random(n) * 4 - 1.5).astype(dt)        # arbitrary floats: inexact sums
    return rng.integers(-3, 5, n).astype(dt)


def _tile(dt: str, dialect: str) -> int:
    ks = scan_fused.render(_fused(qc.query(_data(dt, 4)).scan(lambda a, v: a + v, 0)
                                  .where(lambda v: v > K), "count"), dialect)
    return ks.block * ks.elems_per_thread


def _sizes(dt: str, dialect: str) -> list[int]:
    t = _tile(dt, dialect)
    return [0, 1, t - 1, t, t + 1, 3 * t + 5]


def _fused(q, terminal: str):
    staged = q.lowered(terminal)[0]
    fp, why = S.gpu_scan_fused(staged.stages, [type(s) for s in staged.stages].index(S.ScanStage))
    assert fp is not None, why
    return fp


ALL = ("count", "select_after_to_array", "select_before_to_array", "first")


def _queries(x, names=ALL[:2]):
    """(name, query over x ending before its terminal, terminal) for each of `names`: a
    reduce, a compaction with a select after the where, one with a select before the scan,
    and first (a fused reduce, where the unfused plan would stop early)."""
    scan = qc.query(x).scan(lambda a, v: a + v, 1)
    every = [
        ("count", scan.where(lambda v: v > K), "count"),
        ("select_after_to_array", scan.where(lambda v: v > K).select(lambda v: v * 3 + 1), "to_array"),
        ("select_before_to_array", qc.query(x).select(lambda v: v * 2).scan(lambda a, v: a + v, 1)
         .where(lambda v: v < K), "to_array"),
        ("first", scan.where(lambda v: v > K), "first"),
    ]
    return [c for c in every if c[0] in names]


def _expected(x: np.ndarray, scanned: np.ndarray, name: str, before: np.ndarray | None = None):
    """The unfused plan's result from the scanned column (plain NumPy / Python on it)."""
    s = scanned
    if name == "count":
        return int((s > K).sum())
    if name == "select_before_to_array":
        return s[s < K]
    if name == "select_after_to_array":
        t = s[s > K]
        return t * s.dtype.type(3) + s.dtype.type(1)
    keep = s[s > K]
    return keep[0] if len(keep) else None


def _python_scan(x: np.ndarray) -> np.ndarray:
    acc, out = x.dtype.type(1), []
    for v in x:
        acc = x.dtype.type(acc + v)
        out.append(acc)
    return np.array(out, dtype=x.dtype)


def _check(got, want, context) -> None:
    if want is None:
        assert got is None, context
    elif isinstance(want, np.ndarray):
        assert got.dtype == want.dtype and np.array_equal(got, want), context
    else:
        assert got == want and type(np.asarray(got).item()) is type(np.asarray(want).item()), (context, got, want)


def _run(q, terminal: str):
    if terminal == "first":
        return q.first(default=None)
    return getattr(q, terminal)()


@pytest.mark.skipif(not OPENCL, reason="no OpenCL device")
@pytest.mark.parametrize("dt,names", [("int32", ALL), ("float64", ALL[:2]), ("int64", ALL[1:2]),
                                      ("float32", ALL[1:2])])
def test_item1_scan_where_fused_on_opencl(dt, names):
    """Every size on pocl: one fused stage, equal to plain Python (integers) and to the
    unfused plan's bits (floats: the GPU scan's own output, then the pass in NumPy). Each
    query shape is a pocl build (5-20 s): int32 takes every chain, the others fewer."""
    for n in _sizes(dt, "opencl"):
        x = _data(dt, n)
        for name, q, term in _queries(x, names):
            q = q.on("opencl")
            got = _run(q, term)
            names = [r.name for r in qc.last_trace().kernels]
            assert not n or any("_fused_" in k for k in names) and "qc_scan0_scan_downsweep" not in names, names
            base = x * x.dtype.type(2) if name == "select_before_to_array" else x
            if dt.startswith("float"):     # the unfused plan's scanned column: the scan alone
                scanned = qc.query(base).on("opencl").scan(lambda a, v: a + v, 1).to_array()
            else:
                scanned = _python_scan(base)
            _check(got, _expected(x, scanned, name), (dt, n, name))


@pytest.mark.skipif(not OPENCL, reason="no OpenCL device")
def test_item1_agg_and_sum_fused_on_opencl():
    """agg of order-free aggregates (integer sum / min / max, count, any, all, first) in one
    fused pass; a float sum stays two stages (its grouping gives the bits) and says why."""
    empty = qc.query(_data("int32", 0)).on("opencl").scan(lambda a, v: a + v, 1).where(lambda v: v > K)
    assert empty.sum() == 0 and empty.count() == 0
    for n in (_tile("int32", "opencl") + 1, 30_000):
        x = _data("int32", n)
        s = _python_scan(x)
        q = qc.query(x).on("opencl").scan(lambda a, v: a + v, 1).where(lambda v: v > K)
        got = q.agg(s=qc.sum, lo=qc.min, hi=qc.max, c=qc.count, a=qc.any(lambda v: v > 50),
                    b=qc.all(lambda v: v > 6), f=qc.first)
        keep = s[s > K]
        want = dict(s=keep.sum(dtype=np.int64), c=len(keep), a=bool((keep > 50).any()), b=bool((keep > 6).all()))
        for key, v in want.items():
            assert got[key] == v, (n, key, got[key], v)
        assert got["lo"] == keep.min() and got["hi"] == keep.max() and got["f"] == keep[0]
        assert any("_fused_reduce" in r.name for r in qc.last_trace().kernels)
        assert q.sum() == keep.sum(dtype=np.int64)
    f = _data("float32", 5000)
    qf = qc.query(f).on("opencl").scan(lambda a, v: a + v, 1).where(lambda v: v > K)
    text = qf.explain(backend="opencl", terminal="sum")
    assert "staged plan: 2 stages on opencl" in text and "depends on the order of combining" in text
    scanned = qc.query(f).on("opencl").scan(lambda a, v: a + v, 1).to_array()
    assert np.isclose(qf.sum(), scanned[scanned > K].sum(dtype=np.float64), rtol=1e-4)


@pytest.mark.skipif(not OPENCL, reason="no OpenCL device")
def test_item1_scanned_column_never_read_back_or_stored():
    """The transfer counter: the source goes over once, back only the survivors and their
    count (a reduce: its result slots); the fused kernel set has no buffer of n elements
    but the survivors' outputs."""
    n = 50_000
    x = _data("int64", n)
    s = _python_scan(x)
    q = qc.query(x).on("opencl").scan(lambda a, v: a + v, 1).where(lambda v: v % 5 == 0)
    for term, want in (("count", int((s % 5 == 0).sum())), ("to_array", s[s % 5 == 0])):
        _run(q, term)                                   # compiled and warm
        before = dict(TRANSFERS)
        got = _run(q, term)
        moved = {k: TRANSFERS[k] - before[k] for k in TRANSFERS}
        _check(got, want, term)
        assert moved["to_device"] <= 1, moved
        assert moved["to_host_bytes"] <= np.asarray(got).nbytes + 4 * 8 < n * 8, (term, moved)
        ks = scan_fused.render(_fused(q, term), "opencl")
        sized_n = [b.name for b in ks.scratch + ks.outputs if b.size == "n"]
        assert sized_n == ([] if term == "count" else ["out0"]), sized_n


def _harness_run(q, terminal: str, dialect: str, fused: bool = True):
    """The terminal's value with the plan's kernels in `dialect` run by the CPU harness
    (test_issue13_harness.run_staged), the scan fused into the next pass or not."""
    harness = pytest.importorskip("harness.plans")
    ok, why = harness.runner.available()
    if not ok:
        pytest.skip(why)
    from test_issue13_harness import HarnessPass
    from querycompute.run import pipeline
    from querycompute.backends.gpu.gpu_stages import GpuStages
    from querycompute.run.engine import assemble
    from querycompute.plan.plan import param_values
    staged, term, cols, infos = q.lowered(terminal)
    stages = GpuStages(dialect, lambda ks: (harness.HarnessRuntime(ks, harness.module_for([ks])), "compiled", 0.0))
    stages.caps = replace(stages.caps, scan_fused_passes=fused)
    prepared = pipeline.StagedPrepared(staged, lambda lowered: HarnessPass(lowered, dialect), stages)
    assert (len(prepared.scan_fused) == 1) == fused
    raw, _ = prepared.run_quick(cols, param_values(staged, infos, q._source), q._source.length(cols))
    return assemble(staged, raw, term)


@pytest.mark.parametrize("dialect,dt", [("cuda", "int32"), ("cuda", "float64"), ("metal", "int64"),
                                        ("metal", "float32")])
def test_item1_scan_where_fused_through_the_harness(dialect, dt):
    """CUDA C (the look-back kernel carries the pass) and MSL, run by the CPU harness: equal
    to the same dialect's unfused plan, bit for bit, and to plain Python for integers."""
    sizes = _sizes(dt, dialect)
    for n in (sizes[1], sizes[-1]):
        x = _data(dt, n)
        for name, q, term in _queries(x):
            got = _harness_run(q, "count" if name == "count" else term, dialect)
            want = _harness_run(q, "count" if name == "count" else term, dialect, fused=False)
            if isinstance(want, np.ndarray):
                assert got.dtype == want.dtype and np.array_equal(got, want), (dialect, dt, n, name)
            else:
                assert got == want, (dialect, dt, n, name)
            if not dt.startswith("float"):
                _check(got, _expected(x, _python_scan(x), name), (dialect, dt, n, name))


@pytest.mark.parametrize("dt", ["int32", "float64"])
def test_item2_fused_kernels_compile_nvrtc_and_metal(dt, tmp_path):
    """The fused reduce (look-back) and compaction kernels: NVRTC sm_80 / sm_90, and the
    Metal compile check of the MSL (float32 there: Metal has no float64)."""
    x = _data(dt, 8)
    q = qc.query(x).scan(lambda a, v: a + v, 1).where(lambda v: v > K)
    for term in ("count", "first", "to_array"):
        ks = scan_fused.render(_fused(q, term), "cuda")
        for arch in ARCHS:
            ptx_of(ks, arch)
    xm = _data("float32" if dt == "float64" else dt, 8)
    qm = qc.query(xm).scan(lambda a, v: a + v, 1).where(lambda v: v > K).select(lambda v: v * 2)
    for term in ("first", "to_array"):
        metal_compiles(scan_fused.render(_fused(qm, term), "metal").source, tmp_path, f"fused_{term}")


def test_item3_explain_and_source_show_the_fused_stage():
    q = qc.query(_data("int64", 100)).scan(lambda a, v: a + v, 1).where(lambda v: v > K)
    for dialect in ("opencl", "cuda"):
        if dialect == "opencl" and not OPENCL:
            continue
        from querycompute.api import explain_stages
        from querycompute.run import pipeline
        staged = q.lowered("to_array")[0]
        rt = pipeline.stage_runtime(dialect)
        text = explain_stages.explain(q, staged, q.lowered("to_array")[1], q.lowered("to_array")[3],
                                      dialect, 100, rt)
        assert f"staged plan: 1 stage on {dialect}" in text, text
        assert "scanned column is never stored" in text and "B per element" in text
        assert "_fused_scatter" in text
        src = explain_stages.source(staged, dialect, rt)
        assert "_fused_scatter" in src and "_fused_count" in src or "_fused_lookback_count" in src
    if qc.backends()["webgpu"]["available"]:          # webgpu: fused too (WGSL)
        qw = qc.query(_data("float32", 100)).scan(lambda a, v: a + v, 1).where(lambda v: v > K)
        text = qw.explain(backend="webgpu", terminal="count")
        assert "staged plan: 1 stage on webgpu" in text and "_fused_reduce" in text


WEBGPU = qc.backends()["webgpu"]["available"]


@pytest.mark.skipif(not WEBGPU, reason="no WebGPU adapter")
@pytest.mark.parametrize("dt", ["int32", "float32"])
def test_item1_scan_where_fused_on_webgpu(dt):
    """WGSL (lavapipe here): count / first (the fused reduce) and to_array with a select
    after the where, every size; equal to plain Python (int32) or to the unfused plan's
    bits (float32: the scan alone, then the pass in NumPy)."""
    for n in _sizes(dt, "webgpu"):
        x = _data(dt, n)
        scanned = qc.query(x).on("webgpu").scan(lambda a, v: a + v, 1).to_array() if dt == "float32" \
            else _python_scan(x)
        for name, q, term in _queries(x, ("count", "select_after_to_array", "first")):
            got = _run(q.on("webgpu"), term)
            names = [r.name for r in qc.last_trace().kernels]
            assert not n or any("_fused_" in k for k in names), names
            _check(got, _expected(x, scanned, name), (dt, n, name))


@pytest.mark.skipif(not WEBGPU, reason="no WebGPU adapter")
def test_item1_webgpu_two_stages_beyond_one_binding(monkeypatch):
    """Where the fused pass would need more than one storage binding (webgpu runs such a pass
    in windows, which would restart the scan), the scan and the pass run as two stages."""
    from querycompute.backends.webgpu import webgpu_windows
    x = _data("int32", 30_000)
    s = _python_scan(x)
    q = qc.query(x).on("webgpu").scan(lambda a, v: a + v, 1).where(lambda v: v > K)
    assert q.count() == int((s > K).sum())
    # 1 MiB: the scan's column fits one binding, the pass runs in windows (30,000 x 64 B)
    monkeypatch.setattr(webgpu_windows, "TEST_BINDING_LIMIT", 1 << 20)
    assert q.count() == int((s > K).sum())
    names = [r.name for r in qc.last_trace().kernels]
    assert not any("_fused_" in k for k in names) and "qc_scan0_scan_downsweep" in names, names


@pytest.mark.skipif(not OPENCL, reason="no OpenCL device")
def test_item1_captured_values_of_scan_and_where_are_parameters():
    """The scan's captured values follow the pass's in the fused kernel's parameters (as
    scan_<name>): both change between calls without a recompile, results as plain Python."""
    x = _data("int32", 20_000)
    mask, lim = 1023, 500
    # (a + v) & mask is associative for masks 2**k - 1 only: a captured mask is stated so
    # (issue 26 item 3: the compiler proves it for a literal mask, not for a captured one)
    q = qc.query(x).on("opencl").scan(lambda a, v: (a + v) & mask, 0, associative=True).where(lambda v: v > lim)
    for mask, lim in ((1023, 500), (255, 100)):
        acc, s = 0, []
        for v in x.tolist():
            acc = (acc + v) & mask
            s.append(acc)
        s = np.array(s, dtype=np.int32)
        assert q.count() == int((s > lim).sum())
        _check(q.to_array(), s[s > lim], (mask, lim))
        runs = qc.last_trace().kernels
        assert any("_fused_scatter" in r.name for r in runs)
        if (mask, lim) == (255, 100):
            assert all(r.cache == "memory" for r in runs), [(r.name, r.cache) for r in runs]


def test_item1_metal_captured_float_narrowed_in_the_fused_pass():
    """A captured Python float (float64) cast to float32 becomes a float32 parameter on Metal
    (narrow_params, as for any pass): the fused pass compiles and equals the unfused plan."""
    x = (np.random.default_rng(2).random(9000) - 0.45).astype(np.float32)
    lim = 12.5
    q = qc.query(x).scan(lambda a, v: a + v, 0).where(lambda v: v > lim).select(lambda v: v * lim)
    got, want = _harness_run(q, "to_array", "metal"), _harness_run(q, "to_array", "metal", fused=False)
    assert got.dtype == np.float32 and len(got) and np.array_equal(got, want)
