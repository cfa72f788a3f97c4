"""Device-resident inputs (DESIGN.md section 3: CuPy arrays, __cuda_array_interface__ and CUDA
DLPack objects, read without a copy) and where results land: a query over host arrays returns
host arrays whatever stayed on the device between its stages. The first real-GPU run (an
H100) found dict tables of CuPy columns refused and staged plans over host arrays returning
CuPy arrays; the device cases run where a CUDA device is present, the detection everywhere."""
from __future__ import annotations

import sys

import numpy as np
import pytest

import querycompute as qc
from querycompute.sources.source_adapters import device_array


class _DLPackOnly:
    """An array reachable only through DLPack (no __array__), on `device` (1: CPU, 2: CUDA)."""

    def __init__(self, a: np.ndarray, device: int = 1):
        self._a, self._device = a, device

    def __dlpack__(self, **kw):
        return self._a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return (self._device, 0)


def test_host_dlpack_objects_are_host_data():
    x = np.arange(10, dtype=np.float32)
    obj = _DLPackOnly(x)
    assert device_array(obj) is None and device_array(x) is None
    assert qc.query(obj).on("numpy").sum() == x.sum()
    assert qc.query({"a": obj, "b": x}).on("numpy").sum(lambda r: r.a * r.b) == (x * x).sum()


def test_a_cuda_object_without_cupy_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)        # import cupy -> ImportError
    with pytest.raises(TypeError, match=r"CUDA device.*querycompute\[cuda12\]"):
        qc.query(_DLPackOnly(np.arange(3.0), device=2))


def _cuda():
    if not qc.backends()["cuda"]["available"]:
        pytest.skip(f"cuda: {qc.backends()['cuda']['reason']}")
    import cupy
    return cupy


@pytest.mark.gpu
def test_dict_of_cupy_columns_runs_on_the_device():
    cp = _cuda()
    rng = np.random.default_rng(0)
    price, qty = rng.random(1000).astype(np.float32), rng.integers(0, 10, 1000).astype(np.int32)
    q = qc.query({"price": cp.asarray(price), "qty": cp.asarray(qty)})
    got = q.where(lambda r: r.qty > 2).sum(lambda r: r.price * r.qty)
    assert qc.last_trace().backend == "cuda"
    want = qc.query({"price": price, "qty": qty}).on("numpy").where(lambda r: r.qty > 2).sum(lambda r: r.price * r.qty)
    assert np.isclose(float(got), float(want), rtol=1e-5)


@pytest.mark.gpu
def test_staged_plans_over_host_arrays_return_host_arrays():
    cp = _cuda()
    x = np.random.default_rng(1).integers(-50, 50, 5000).astype(np.float32)
    q = qc.query(x).on("cuda")
    got = q.order_by_descending(lambda v: v).select(lambda v: v + 1).to_array()
    assert type(got) is np.ndarray
    assert np.array_equal(got, np.sort(x)[::-1] + 1)
    g = q.group_by(lambda v: v > 0).agg(n=qc.count, s=qc.sum(lambda v: v))
    assert all(type(c) is np.ndarray for c in g.values())
    on_device = qc.query(cp.asarray(x)).order_by().to_array()
    assert isinstance(on_device, cp.ndarray)
