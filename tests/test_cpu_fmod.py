"""The cpu backend's float32 fmod fast path (numba_py_helpers._FMOD) is exact: `%` and `//`
of float32 (and float16, computed in float32) are bit-identical to np.remainder and
np.floor_divide over random bit patterns, quotients near the 2**28 switch to libm, exact
multiples, subnormals, signed zeros, inf and nan."""
import numpy as np

from querycompute._codegen.ir import expr as E
from querycompute._codegen.ir.program import ElementProgram, InputSpec, Pass, ToArray
from querycompute.backends.cpu.cpu import CpuBackend

BACKEND = CpuBackend()


def run_ops(a: np.ndarray, b: np.ndarray) -> tuple:
    """(a % b, a // b) computed by one cpu kernel of a's dtype."""
    d = str(a.dtype)
    x, y = E.Load(0, d), E.Load(1, d)
    prog = ElementProgram(inputs=(InputSpec("a", d), InputSpec("b", d)), params=(), body=(),
                          outputs=(E.Binary("mod", x, y, d), E.Binary("floordiv", x, y, d)))
    prepared = BACKEND.prepare(Pass(prog, ToArray(), f"fmod_{d}"))
    return prepared.run_quick([a, b], (), len(a))[0]


def assert_bits_equal(got: np.ndarray, want: np.ndarray, a, b, what: str):
    itype = np.uint32 if got.dtype == np.float32 else np.uint16
    bad = got.view(itype) != want.view(itype)
    bad &= ~(np.isnan(got) & np.isnan(want))      # NaN payloads are libm's business
    assert not bad.any(), (f"{what}: {a[bad][:5]} , {b[bad][:5]} -> {got[bad][:5]}, "
                           f"NumPy {want[bad][:5]}")


def float32_pairs() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    m = 200_000
    # any bit pattern: every binade, subnormals, inf and nan included
    a = [rng.integers(0, 2**32, m, dtype=np.uint64).astype(np.uint32).view(np.float32)]
    b = [rng.integers(0, 2**32, m, dtype=np.uint64).astype(np.uint32).view(np.float32)]
    # quotients near 2**28 and other powers of two where the fast path switches to libm
    for e in (0, 1, 23, 24, 27, 28, 29, 40):
        bb = (rng.random(m // 20) * 10 + 0.5).astype(np.float32) * np.float32(rng.choice([-1, 1]))
        q = np.float32(2.0 ** e) * (1 + rng.standard_normal(m // 20).astype(np.float32) * 1e-6)
        a.append((q * bb).astype(np.float32))
        b.append(bb)
    # exact multiples and one ulp either side: remainders of zero and of nearly b
    bb = (rng.standard_normal(m // 10) * 100).astype(np.float32)
    k = rng.integers(-1_000_000, 1_000_000, m // 10).astype(np.float32)
    mult = (k * bb).astype(np.float32)
    for shift in (mult, np.nextafter(mult, np.float32(np.inf)), np.nextafter(mult, np.float32(-np.inf))):
        a.append(shift.astype(np.float32))
        b.append(bb)
    # the usual data: uniform values modulo small constants (W2's v % 3)
    u = (rng.random(m) * 2000).astype(np.float32)
    a += [u, -u]
    b += [np.full(m, 3, np.float32), np.full(m, -3, np.float32)]
    edge = np.array([0.0, -0.0, 1.0, -1.0, 3.0, 0.1, np.inf, -np.inf, np.nan, 1e-45, -1e-45,
                     1.1754942e-38, 1.1754944e-38, 3.4028235e38, -3.4028235e38, 2.0 ** 28,
                     2.0 ** -126, 7.0, 16777216.0, 16777217.0], np.float32)
    a.append(np.repeat(edge, len(edge)))
    b.append(np.tile(edge, len(edge)))
    return np.concatenate(a), np.concatenate(b)


def test_float32_remainder_and_floor_divide_are_bit_identical_to_numpy():
    a, b = float32_pairs()
    mod, div = run_ops(a, b)
    with np.errstate(all="ignore"):
        assert_bits_equal(mod, np.remainder(a, b), a, b, "float32 %")
        assert_bits_equal(div, np.floor_divide(a, b), a, b, "float32 //")


def test_float16_remainder_and_floor_divide_are_bit_identical_to_numpy():
    every = np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    rng = np.random.default_rng(3)
    a = np.concatenate([every, rng.choice(every, 2**16)])
    b = np.concatenate([rng.choice(every, 2**16), every])
    mod, div = run_ops(a, b)
    with np.errstate(all="ignore"):
        assert_bits_equal(mod, np.remainder(a, b), a, b, "float16 %")
        assert_bits_equal(div, np.floor_divide(a, b), a, b, "float16 //")
