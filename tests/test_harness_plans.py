"""Generated CUDA C and MSL, run through the CPU harness exactly as the GPU backends launch them
(codegen.launch.plan), for every kernel shape and dtype, on small and odd sizes (one element,
a warp and one more, a partial last block, many blocks), compared with NumPy."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from querycompute._codegen import dtypes, gpu
from querycompute._codegen.errors import UnsupportedType
from harness import plans, runner
from harness.passes import assert_same, data, expected, passes

pytestmark = pytest.mark.skipif(not runner.available()[0], reason=runner.available()[1])

KINDS = ("map", "where", "reduce_filtered", "reduce_plain")
DTYPES = ("bool",) + dtypes.INTEGERS + dtypes.FLOATS
SIZES = (0, 1, 31, 32, 33, 255, 257, 1000)
BIG = 65537
# 65537 elements costs seconds per dtype on the threaded harness; every dtype instead gets
# "several blocks and a partial last one" at its own tile size, and one dtype per element
# size class (plus bool) also runs 65537.
BIG_DTYPES = ("bool", "int8", "float32", "float64")
# Up to this size runs use the warp-ordered schedule that makes a missing barrier show up
# deterministically (races are per block, so one block is enough); larger ones run freely,
# which is several times cheaper per barrier.
ORDERED_UP_TO = 257


def supported(dialect: str, d: str) -> bool:
    return not (dialect == "metal" and d == "float64")


_modules: dict[tuple[str, str], tuple[dict, runner.Module]] = {}


def compiled(dialect: str, d: str):
    """Kernel sets of every pass for (dialect, dtype), compiled together in one g++ run."""
    key = (dialect, d)
    if key not in _modules:
        sets = {kind: gpu.render(p, dialect) for kind, p in passes(d).items()}
        _modules[key] = (sets, plans.module_for(list(sets.values())))
    return _modules[key]


def run(dialect, d, kind, x, schedule="alternate"):
    sets, module = compiled(dialect, d)
    got = plans.run_kernel_set(sets[kind], module, [x], schedule=schedule)
    assert_same(kind, d, got, expected(kind, d, x))


def several_blocks(dialect: str, d: str) -> int:
    """3 full tiles and 5 elements: several blocks in every shape and a partial last block."""
    sets, _ = compiled(dialect, d)
    return max(3 * ks.block * ks.elems_per_thread + 5 for ks in sets.values())


@pytest.mark.parametrize("dialect", ["cuda", "metal"])
@pytest.mark.parametrize("d", DTYPES)
def test_every_shape_on_small_and_odd_sizes(dialect, d):
    if not supported(dialect, d):
        pytest.skip("Metal has no float64")
    for n in SIZES + (several_blocks(dialect, d),):
        x = data(d, n, seed=n)
        for kind in KINDS:
            run(dialect, d, kind, x, schedule="alternate" if n <= ORDERED_UP_TO else "free")


@pytest.mark.parametrize("dialect", ["cuda", "metal"])
@pytest.mark.parametrize("d", BIG_DTYPES)
def test_every_shape_on_many_blocks(dialect, d):
    """Free thread scheduling here: the warp-ordered schedule that makes races deterministic
    costs a sleep/wake per thread per barrier, and the smaller sizes already run the same
    kernels under it."""
    if not supported(dialect, d):
        pytest.skip("Metal has no float64")
    x = data(d, BIG, seed=1)
    for kind in KINDS:
        run(dialect, d, kind, x, schedule="free")


@pytest.mark.parametrize("dialect", ["cuda", "metal"])
@pytest.mark.parametrize("d", ["float32", "int16"])
def test_strided_inputs_take_the_strided_kernels(dialect, d):
    base = data(d, 3 * 700, seed=5)
    for x in (base[::3], base[::-2]):
        for kind in KINDS:
            run(dialect, d, kind, x, schedule="free")


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dialect=st.sampled_from(["cuda", "metal"]),
       d=st.sampled_from(["int8", "uint32", "float32", "float16"]),
       kind=st.sampled_from(KINDS),
       n=st.integers(0, 600), seed=st.integers(0, 2**32 - 1))
def test_random_sizes_and_values(dialect, d, kind, n, seed):
    run(dialect, d, kind, data(d, n, seed))


def test_metal_rejects_float64_naming_type_and_dialect():
    with pytest.raises(UnsupportedType, match="float64"):
        gpu.render(passes("float64")["map"], "metal")


@pytest.mark.parametrize("dialect", ["cuda", "metal"])
def test_scalar_params_of_every_width(dialect):
    """Captured values arrive as kernel parameters (bool as uint8, float16 as float32)."""
    from querycompute._codegen.ir import expr as E
    from querycompute._codegen.ir.program import ElementProgram, InputSpec, ParamSpec, Pass, ToArray
    x = E.Load(0, "float16")
    scaled = E.Binary("mul", x, E.Param("h", "float16"), "float16")
    shifted = E.Binary("add", E.Cast(x, "int8"), E.Param("k", "int8"), "int8")
    prog = ElementProgram(inputs=(InputSpec("x", "float16"),),
                          params=(ParamSpec("h", "float16"), ParamSpec("b", "bool"), ParamSpec("k", "int8")),
                          body=(), outputs=(E.Where(E.Param("b", "bool"), scaled, x, "float16"), shifted))
    xs = data("float16", 300, seed=9)
    xs[np.isnan(xs) | np.isinf(xs)] = 1.0
    xs = np.clip(xs, -100, 100).astype(np.float16)
    for flag in (True, False):
        got = plans.run_pass(Pass(prog, ToArray(), "h_params"), dialect, [xs], [np.float16(1.5), flag, np.int8(120)])
        np.testing.assert_array_equal(got[0], xs * np.float16(1.5) if flag else xs)
        np.testing.assert_array_equal(got[1], xs.astype(np.int8) + np.int8(120))
