"""Issue 13 item 1 ("a where after a scan in its last pass"): on the cpu backend
`scan -> where -> count / sum / to_array / first` runs the scan's chunk carries and then ONE
fused pass whose element reads the running value (ops/scan/fused_cpu.py): the
scanned column is never stored. Results equal NumPy and the unfused plan (numpy backend)
for n = 0, 1, one chunk and more than three chunks (the parallel kernels); explain() shows
the scan and the pass as one stage."""
from __future__ import annotations

import numpy as np
import pytest

import querycompute as qc
from querycompute._codegen.dialects.numba_py import CHUNK

pytestmark = pytest.mark.skipif(not qc.backends()["cpu"]["available"], reason="numba missing")
SIZES = [0, 1, 3 * CHUNK + 5]


def _kernels() -> list:
    return [r.name for r in qc.last_trace().kernels]


@pytest.mark.parametrize("n", SIZES)
def test_item1_scan_where_terminals_fused_on_cpu(n):
    x = (np.arange(n) % 7 - 2).astype(np.int64)
    cs = 5 + np.cumsum(x)
    lim = 4
    q = qc.query(x).on("cpu").scan(lambda a, v: a + v, 5).where(lambda v: v > lim)
    assert q.count() == int((cs > lim).sum())
    if n >= 2:
        names = _kernels()
        assert any("_carries" in k for k in names) and any("_in_qc_scan" in k for k in names), names
        assert not any(k.startswith("qc_scan0_chunks") for k in names)      # no second pass
    assert q.sum() == cs[cs > lim].sum()
    assert np.array_equal(q.to_array(), cs[cs > lim])
    ref = qc.query(x).on("numpy").scan(lambda a, v: a + v, 5).where(lambda v: v > lim).to_array()
    assert np.array_equal(q.to_array(), ref)
    lim = 1_000_000                   # a captured value is a parameter: no recompile
    assert q.count() == int((cs > lim).sum())


@pytest.mark.parametrize("n", [3 * CHUNK + 5])
def test_item1_float16_noncommutative_scan_then_where_equals_unfused(n):
    h = (np.random.default_rng(n).random(n) * 2 - 0.9).astype(np.float16)
    q = qc.query(h).on("cpu").scan(lambda a, v: max(a, v) * 0.5 + v, 1.0)
    scanned = q.to_array()                          # the scan stage alone (not fused)
    got = q.where(lambda v: v < 1.5).to_array()     # fused
    assert got.dtype == scanned.dtype and np.array_equal(got, scanned[scanned < 1.5])
    # the plain Python fold, in float16 steps as NumPy's half loops round
    acc, want = np.float16(1.0), []
    for v in h[:2000]:
        acc = np.float16(np.float16(max(acc, v) * np.float16(0.5)) + v)
        want.append(acc)
    assert np.array_equal(scanned[:2000], np.array(want, dtype=np.float16))


def test_item1_explain_shows_scan_and_pass_as_one_stage():
    q = qc.query(np.arange(10, dtype=np.int64)).scan(lambda a, v: a + v, 0).where(lambda v: v > 3)
    text = q.explain(backend="cpu", terminal="count")
    assert "staged plan: 1 stage on cpu" in text and "stage 2" not in text
    assert "scanned column is never stored" in text
    two = q.explain(backend="numpy", terminal="count")
    assert "staged plan: 2 stages on numpy" in two
    if qc.backends()["opencl"]["available"]:          # GPU dialects: fused too (ops/scan/fused_gpu.py)
        gpu = q.explain(backend="opencl", terminal="count")
        assert "staged plan: 1 stage on opencl" in gpu and "scanned column is never stored" in gpu
