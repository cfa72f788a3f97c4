"""Issue 28 item 5: the trace shows compile and run separately, and a compile longer than
about a second logs its progress (which kernel, how long so far) at INFO through the
`querycompute` logger (log.compiling); a fast compile logs nothing of it, and a warm call
never enters it."""
from __future__ import annotations

import logging
import time

import numpy as np
import pytest

import querycompute as qc
from querycompute import log as qc_log


def _progress(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "querycompute" and ("so far" in r.getMessage() or
                                            r.getMessage().startswith("compiled "))]


def test_a_long_compile_logs_so_far_then_its_total(caplog, monkeypatch):
    monkeypatch.setattr(qc_log, "PROGRESS_AFTER", 0.1)
    monkeypatch.setattr(qc_log, "PROGRESS_EVERY", 0.2)
    caplog.set_level(logging.INFO, logger="querycompute")
    with qc_log.compiling("the test kernel qc_slow"):
        time.sleep(0.8)
    lines = _progress(caplog)
    so_far = [m for m in lines if "so far" in m]
    assert so_far and all("qc_slow" in m for m in so_far), lines
    assert len(so_far) >= 2, lines                     # again every PROGRESS_EVERY
    assert lines[-1].startswith("compiled the test kernel qc_slow in "), lines


def test_a_fast_compile_logs_nothing(caplog):
    caplog.set_level(logging.INFO, logger="querycompute")
    with qc_log.compiling("the test kernel qc_fast"):
        pass
    time.sleep(0.3)                                    # (the watcher's poll)
    assert _progress(caplog) == []


def test_without_info_enabled_nothing_is_watched(caplog, monkeypatch):
    monkeypatch.setattr(qc_log, "PROGRESS_AFTER", 0.0)
    caplog.set_level(logging.WARNING, logger="querycompute")
    with qc_log.compiling("the test kernel qc_quiet"):
        time.sleep(0.3)
    assert _progress(caplog) == []


def test_a_slow_opencl_build_logs_the_kernels_names(caplog, monkeypatch, private_cache):
    """The dialect compiles go through DiskCache.obtain, which names the kernels it builds;
    a build made slow here logs its progress (the query is pinned, so it waits for it)."""
    from querycompute.backends import registry
    if not registry.availability("opencl")[0]:
        pytest.skip("no OpenCL device")
    from querycompute.backends.opencl import opencl_device
    build = opencl_device.build_program

    def slow(*args, **kwargs):
        time.sleep(0.7)
        return build(*args, **kwargs)

    monkeypatch.setattr(opencl_device, "build_program", slow)
    monkeypatch.setattr(qc_log, "PROGRESS_AFTER", 0.2)
    caplog.set_level(logging.INFO, logger="querycompute")
    x = np.arange(1000, dtype=np.int32)
    assert qc.query(x).on("opencl").select(lambda v: v * 7 + 3).sum() == int((x * 7 + 3).sum())
    (row, *_) = qc.last_trace().kernels
    assert row.cache == "compiled" and row.compile_ms >= 700, row
    so_far = [m for m in _progress(caplog) if "so far" in m]
    assert any("opencl" in m and row.name in m for m in so_far), _progress(caplog)
    assert any(m.startswith("compiled the opencl kernels") for m in _progress(caplog))


@pytest.mark.parametrize("backend", ["cpu", "opencl", "webgpu"])
def test_a_warm_call_never_enters_compiling(monkeypatch, backend):
    from querycompute.backends import registry
    if not registry.availability(backend)[0]:
        pytest.skip(f"no {backend} here")
    monkeypatch.setenv("QUERYCOMPUTE_TIERED", "0")     # the cold calls compile, in this thread
    x = np.arange(5000, dtype=np.int32) % 97
    y = np.arange(50, dtype=np.int32)
    calls = [
        lambda: qc.query(x).on(backend).select(lambda v: v * 5).where(lambda v: v > 9).sum(),
        lambda: qc.query(x).on(backend).group_by(lambda v: v % 5).agg(n=qc.count),
        lambda: qc.query(x).on(backend).order_by(lambda v: -v).to_array(),
        lambda: qc.query(x).on(backend).distinct().to_array(),
        lambda: qc.query(x).on(backend).join(qc.query(y), lambda a: a, lambda b: b,
                                             lambda a, b: a + b).to_array(),
    ]
    cold = [call() for call in calls]
    entered = []
    begin = qc_log.compiling_begin
    monkeypatch.setattr(qc_log, "compiling_begin", lambda what: (entered.append(what), begin(what)))
    for call, first in zip(calls, cold):
        again = call()
        if isinstance(first, dict):
            assert {k: np.asarray(v).tolist() for k, v in again.items()} == \
                   {k: np.asarray(v).tolist() for k, v in first.items()}
        else:
            assert np.asarray(again).tolist() == np.asarray(first).tolist()
        assert all(r.cache == "memory" for r in qc.last_trace().kernels), qc.last_trace()
    assert entered == []
