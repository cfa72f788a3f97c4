"""The metal backend shell: source generation on any machine, an honest availability reason,
a clear error for float64, and its source running correctly through the CPU harness."""
from __future__ import annotations

import pytest

from harness import plans, runner
from harness.passes import assert_same, data, expected, passes
from querycompute.backends.base import Backend
from querycompute.backends.metal.metal import MetalBackend
from querycompute.errors import BackendUnavailableError, QueryError


def test_is_a_source_only_backend_and_says_so():
    backend = MetalBackend()
    assert isinstance(backend, Backend) and backend.name == "metal" and backend.dialect == "metal"
    ok, why = backend.availability()
    assert not ok
    assert "no Metal runtime" in why and "source" in why


def test_source_and_launch_shape_work_anywhere():
    backend = MetalBackend()
    src = backend.source(passes("float32")["reduce_plain"])
    assert "#include <metal_stdlib>" in src and "kernel void" in src
    assert backend.launch_shape(passes("float32")["map"], 5000)[0]["block"] == (256,)


def test_float64_is_a_query_error_naming_type_and_backend():
    with pytest.raises(QueryError, match=r"metal.*float64|float64.*metal"):
        MetalBackend().source(passes("float64")["map"])
    with pytest.raises(QueryError, match="float64"):
        MetalBackend().prepare(passes("float64")["reduce_plain"])


def test_prepare_raises_backend_unavailable():
    with pytest.raises(BackendUnavailableError, match="metal"):
        MetalBackend().prepare(passes("int32")["map"])


@pytest.mark.skipif(not runner.available()[0], reason=runner.available()[1])
@pytest.mark.parametrize("kind", ["where", "reduce_filtered"])
def test_backend_source_runs_correctly_on_the_harness(kind):
    backend = MetalBackend()
    ks = backend.kernel_set(passes("int32")[kind])
    assert ks.source == backend.source(passes("int32")[kind])
    x = data("int32", 3000, seed=4)
    got = plans.run_kernel_set(ks, plans.module_for([ks]), [x])
    assert_same(kind, "int32", got, expected(kind, "int32", x))
