"""The cpu compaction's branch-free write pass: every element is stored at the next free
slot and only survivors advance it, so these check the cases where a dropped element's
store could land somewhere wrong: chunks with no survivor, chunks whose last elements are
dropped (next to a neighbour chunk's first slot, in parallel), every element kept, and two
outputs at once."""
import numpy as np
import pytest

from querycompute._codegen.ir import expr as E
from querycompute._codegen.dialects.numba_py import CHUNK
from querycompute._codegen.ir.program import ElementProgram, Filter, InputSpec, Pass, ToArray
from querycompute.backends.cpu.cpu import SERIAL_MAX, CpuBackend

BACKEND = CpuBackend()
N = 4 * CHUNK + 321                     # parallel entry, a ragged last chunk


def keep_flags(pattern: str, n: int) -> np.ndarray:
    rng = np.random.default_rng(11)
    c = np.arange(n) // CHUNK
    if pattern == "random":
        return rng.random(n) < 0.3
    if pattern == "last_of_each_chunk_dropped":
        keep = rng.random(n) < 0.5
        keep[(np.arange(n) % CHUNK) >= CHUNK - 100] = False
        return keep
    if pattern == "empty_chunks":
        return (c % 2 == 1) & (rng.random(n) < 0.5)
    if pattern == "only_first_of_each_chunk":
        return np.arange(n) % CHUNK == 0
    return np.ones(n, bool)             # "all"


@pytest.mark.parametrize("pattern", ["random", "last_of_each_chunk_dropped", "empty_chunks",
                                     "only_first_of_each_chunk", "all"])
@pytest.mark.parametrize("n", [SERIAL_MAX - 1, N])
def test_compaction_writes_exactly_the_survivors_in_order(pattern, n):
    keep = keep_flags(pattern, n)
    flag = keep.astype(np.int32)
    value = np.random.default_rng(12).standard_normal(n)
    F, V = E.Load(0, "int32"), E.Load(1, "float64")
    prog = ElementProgram((InputSpec("flag", "int32"), InputSpec("value", "float64")), (),
                          (Filter(E.Compare("ne", F, E.Const(0, "int32"))),),
                          (V, E.Index()))
    prepared = BACKEND.prepare(Pass(prog, ToArray(), "compact"))
    got_values, got_index = prepared.run_quick([flag, value], (), n)[0]
    np.testing.assert_array_equal(got_values, value[keep])
    np.testing.assert_array_equal(got_index, np.flatnonzero(keep))
