"""Issue 26 item 7: explain() says what really runs (DESIGN.md section 5e).

A join whose key tuple is wider than 64 bits together runs the numpy reference on the cpu
(cpu_join.reference_reason, the rule CpuJoin follows): explain() names it, never "cpu: hash
join"; on the GPU backends the host reference likewise (gpu_join.dtype_reason). On the cpu
backend explain() speaks of its own numba passes: no CUDA kernel traffic, no finalize kernel.
"""
import numpy as np
import pytest

import querycompute as qc

N = 64


def _wide_tables():
    """(int64, int64) keys whose values need more than 32 bits each."""
    i = np.arange(N, dtype=np.int64)
    left = {"a": (i % 5) << 40, "b": (i % 3) << 35, "v": i.astype(np.float64)}
    right = {"a": (i % 4) << 40, "b": (i % 2) << 35, "w": (i * 10).astype(np.float64)}
    return left, right


def _wide_join(backend):
    left, right = _wide_tables()
    return qc.query(left).on(backend).join(qc.query(right), lambda l: (l.a, l.b), lambda r: (r.a, r.b),
                                           lambda l, r: l.v + r.w)


def _stage_lines(text, what):
    """The lines of explain()'s stages (after the logical plan, whose pack_keys note may say
    the same of a key) that mention `what`."""
    stages = text.split("staged plan:", 1)[-1]
    return [line for line in stages.splitlines() if what in line]


def test_wide_key_join_on_cpu_names_the_numpy_reference():
    q = _wide_join("cpu")
    cq = q.compile("sum")
    text = cq.explain()
    assert "cpu: hash join: the smaller side" not in text, text     # no unconditional claim
    (line,) = _stage_lines(text, "numpy reference")                  # (ranges too wide here: 78 bits)
    assert "2 fields, 128 bits together (int64, int64)" in line, line
    # what explain() says is what runs: the pairs come from the numpy reference
    left, right = _wide_tables()
    expected = sum(left["v"][li] + right["w"][ri] for li in range(N) for ri in range(N)
                   if left["a"][li] == right["a"][ri] and left["b"][li] == right["b"][ri])
    assert cq() == expected
    kernel = qc.query(left).on("cpu").join(qc.query(right), lambda l: (l.a, l.b), lambda r: (r.a, r.b),
                                           lambda l, r: l.v + r.w).compile("sum", tiered=False)
    assert kernel() == expected
    runs = [(r.name, r.dialect) for r in kernel.trace.kernels]
    assert ("join_sorted_probe", "numpy") in runs and not any("join_probe" in name for name, _ in runs), runs


def test_narrow_key_join_on_cpu_says_the_cpu_runs_it():
    i = np.arange(N, dtype=np.int32)
    t = {"k": i % 7, "v": i.astype(np.float64)}
    cq = qc.query(t).on("cpu").join(qc.query(t), lambda l: l.k, lambda r: r.k,
                                    lambda l, r: l.v + r.v).compile("sum", tiered=False)
    text = cq.explain()
    assert _stage_lines(text, "cpu: hash join"), text
    assert "numpy reference" not in text
    cq()
    runs = [(r.name, r.dialect) for r in cq.trace.kernels]
    # (its 7 key values are dense: the direct index, cpu_join's join_dense_*, probes them)
    assert any(("join_probe" in name or "join_dense" in name) and dialect == "numba" for name, dialect in runs), runs


def test_wide_key_join_on_opencl_names_the_host_reference(ocl):
    text = _wide_join("opencl").explain(terminal="sum")
    assert "device hash join" not in text and "qc_join_count" not in text, text
    (line,) = _stage_lines(text, "numpy reference on the host")
    assert "wider than 64 bits together" in line


def test_cpu_distinct_names_its_path():
    i = np.arange(N)
    narrow = {"a": (i % 5).astype(np.int32), "b": (i % 3).astype(np.int32)}
    pair = {"a": (i % 5).astype(np.int64), "b": (i % 3).astype(np.int32), "c": i % 2}
    wide = {"a": (i % 5).astype(np.int64), "b": (i % 3).astype(np.int32), "c": i % 2}
    for t, key, what in ((narrow, lambda r: (r.a, r.b), "hash sets of the keys' order bits (one 64-bit word"),
                         (pair, lambda r: (r.a, r.b), "hash sets of the keys' order bits (two 64-bit words"),
                         (wide, lambda r: (r.a, r.b, r.c), "don't fit two 64-bit words")):
        text = qc.query(t).on("cpu").distinct(key).select(lambda r: r.a).explain(terminal="sum")
        assert _stage_lines(text, "cpu:") and what in "".join(_stage_lines(text, "cpu:")), text


@pytest.mark.parametrize("terminal", ["sum", qc.agg(s=qc.sum(), m=qc.max(), c=qc.count()), "to_array"])
def test_cpu_explain_speaks_of_the_cpu(terminal):
    x = np.arange(1000, dtype=np.float64)
    text = qc.query(x).on("cpu").where(lambda v: v > 3).explain(terminal=terminal)
    lowered = text.lower()
    assert "cuda" not in lowered and "finalize kernel" not in lowered and "kernel traffic" not in lowered, text
    assert "kernels (cpu):" in text


def test_opencl_explain_keeps_its_kernel_traffic():
    x = np.arange(1000, dtype=np.float64)
    text = qc.query(x).where(lambda v: v > 3).explain("opencl", terminal="sum")
    assert "kernel traffic at n=1000 (opencl kernels" in text and "the last block to finish folds" in text, text
