"""Issue 13 item 1 ("data between stages stays on the device"): reverse() runs the reverse
kernel (ops/sort/gather_gpu.py) on the GPU dialects, so on opencl a staged plan with a reverse in the
middle still crosses to the host only at its ends; a plan whose first stage is a column
operation (order_by, distinct, scan, reverse) copies its source to the device once
(GpuStages.to_device). The reverse kernel itself runs for CUDA C and MSL through the CPU
harness against NumPy."""
from __future__ import annotations

import numpy as np
import pytest

import querycompute as qc
from querycompute._codegen.ops.sort import gather_gpu as gather_op
from querycompute.backends.gpu.device_columns import TRANSFERS
from harness import plans, runner


def chains(q):
    return [
        ("order_by->select", lambda: q.order_by().select(lambda v: v + 1).to_array()),
        ("reverse->where", lambda: q.reverse().where(lambda v: v > 0).to_array()),
        ("distinct->count", lambda: q.distinct().count()),
        ("scan->to_array", lambda: q.scan(lambda a, v: a + v, 0).to_array()),
        ("where->reverse->select", lambda: q.where(lambda v: v > -5).reverse().select(lambda v: v * 2).to_array()),
        ("select->order_by->reverse->take", lambda: q.select(lambda v: v + 1).order_by().reverse().take(9).to_array()),
        ("where->reverse->count", lambda: q.where(lambda v: v > 0).reverse().count()),
    ]


@pytest.mark.skipif(not qc.backends()["opencl"]["available"], reason="no OpenCL device")
def test_item1_reverse_keeps_columns_on_the_device():
    n = 3 * 4096 + 17
    x = (np.random.default_rng(n).integers(-50, 50, n) / 4).astype(np.float32)
    ref = dict(chains(qc.query(x).on("numpy")))
    for name, run in chains(qc.query(x).on("opencl")):
        run()                                        # compiled and warm
        if "reverse" in name and not name.endswith("count"):     # (a count needs no reverse)
            assert "qc_reverse" in [k.name for k in qc.last_trace().kernels], name
        before = dict(TRANSFERS)
        got = run()
        moved = {k: TRANSFERS[k] - before[k] for k in TRANSFERS}
        assert np.array_equal(np.asarray(got), np.asarray(ref[name]())), name
        assert moved["to_device"] == 1, (name, moved)
        assert moved["to_host_bytes"] <= np.asarray(got).nbytes + 4 * 8, (name, moved)


@pytest.mark.parametrize("dialect", ["cuda", "metal"])
def test_item2_reverse_kernel_on_the_harness(dialect):
    ok, why = runner.available()
    if not ok:
        pytest.skip(why)
    dtypes = ("uint32", "uint8", "uint16") if dialect == "metal" else ("uint32", "uint64", "uint8")
    ks = gather_op.render_reverse(dtypes, dialect)
    module = plans.module_for([ks])
    rng = np.random.default_rng(1)
    for n in (1, 255, 3 * 1024 + 5):
        cols = [rng.integers(0, np.iinfo(d).max, n, dtype=d) for d in dtypes]
        got = plans.run_kernel_set(ks, module, cols)
        for g, c in zip(got, cols):
            np.testing.assert_array_equal(g, c[::-1])


def test_item3_explain_names_the_reverse_kernel_and_its_bytes():
    x = np.arange(10, dtype=np.float32)
    text = qc.query(x).where(lambda v: v > 2).reverse().explain("cuda", terminal="to_array")
    assert "qc_reverse: 8 B per element" in text
    assert gather_op.reverse_bytes_per_element(("uint32", "uint64")) == 24
