"""A cpu float sum depends only on the values summed: a strided input gives the same bits
as the same values in a contiguous array (the chunk loop's `reassoc` would otherwise
vectorise the two layouts into different lane sums), serially and in parallel."""
import numpy as np
import pytest

from querycompute._codegen.ir import expr as E
from querycompute._codegen.ir.program import Agg, ElementProgram, InputSpec, Pass, Reduce
from querycompute.backends.cpu.cpu import SERIAL_MAX, CpuBackend

BACKEND = CpuBackend()


def sum_pass(dtype: str) -> Pass:
    x = E.Load(0, dtype)
    prog = ElementProgram((InputSpec("x", dtype),), (), (), (x,))
    return Pass(prog, Reduce((Agg("sum", (x,), dtype), Agg("count", (), "int64"))),
                f"layout_sum_{dtype}")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n", [5_000, SERIAL_MAX + 12_345])       # serial, parallel entry
def test_strided_and_contiguous_inputs_sum_to_the_same_bits(dtype, n):
    prepared = BACKEND.prepare(sum_pass(dtype))
    base = (np.random.default_rng(5).random(3 * n) * 2000).astype(dtype)
    strided = base[::3]
    reversed_ = np.ascontiguousarray(strided[::-1])[::-1]          # negative stride
    contiguous = np.ascontiguousarray(strided)
    want = prepared.run_quick([contiguous], (), n)[0]
    for layout in (strided, reversed_):
        got = prepared.run_quick([layout], (), n)[0]
        assert got[1] == n
        assert got[0].tobytes() == want[0].tobytes(), (got[0], want[0])
    assert strided.base is base                                    # the caller's array is
    assert np.array_equal(strided, contiguous)                      # left untouched


def test_render_switches_numbas_cache_on_every_function_or_none():
    from querycompute._codegen.dialects import numba_py
    from querycompute.backends.cpu.numba_loader import module_source
    p = sum_pass("float32")
    off, on = numba_py.render(p), numba_py.render(p, cache=True)
    functions = off.count("@njit(")
    assert functions >= 4 and off.count("cache=False)") == functions
    assert on.count("cache=True)") == functions and on.replace("cache=True)", "cache=False)") == off
    assert module_source(p).endswith(on)
