"""`auto` never falls back silently: a GPU backend failing at run time warns once, is marked
unavailable for the process, the query reruns on cpu, and qc.last_trace() says so. A pinned
backend's failure is raised, never hidden."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import querycompute as qc
from querycompute.backends import registry

X = np.arange(1000, dtype=np.float32)


@pytest.fixture
def broken_gpu(monkeypatch):
    """auto picks opencl (as on a machine whose OpenCL device is a GPU) and its launch fails
    the way a driver does; the engine's reaction is what is under test."""
    if not registry.availability("opencl")[0]:
        pytest.skip("no OpenCL device here")
    ocl = registry.get("opencl")

    def out_of_resources(p):
        raise RuntimeError("clEnqueueNDRangeKernel failed: OUT_OF_RESOURCES (injected)")

    monkeypatch.setattr(ocl, "prepare", out_of_resources)
    monkeypatch.setattr(registry, "_auto", {False: "opencl", True: "opencl"})
    monkeypatch.setattr(registry, "_broken", {})
    return ocl


def test_auto_falls_back_to_cpu_with_warning_and_trace(broken_gpu):
    with pytest.warns(RuntimeWarning, match="opencl.*falling back to 'cpu'"):
        got = qc.query(X).select(lambda v: v + 1).sum()
    assert got == np.float32(X.sum() + len(X))
    t = qc.last_trace()
    assert t.backend == "cpu" and "opencl failed at run time" in t.fallback
    assert "FALLBACK" in str(t)
    assert qc.backends()["opencl"]["available"] is False        # for the rest of the process
    assert "failed earlier in this process" in qc.backends()["opencl"]["reason"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")                           # no second warning: auto
        qc.query(X).select(lambda v: v + 2).sum()                # now picks cpu directly
    assert qc.last_trace().backend == "cpu" and qc.last_trace().fallback is None


def test_pinned_backend_failure_is_raised(broken_gpu):
    with pytest.raises(RuntimeError, match="OUT_OF_RESOURCES"):
        qc.query(X).select(lambda v: v + 3).on("opencl").sum()


def test_pinned_unavailable_backend_says_why():
    with pytest.raises(qc.BackendUnavailableError, match="metal.*can't run here"):
        qc.query(X).on("metal").sum()
