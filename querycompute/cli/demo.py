"""`querycompute demo`: example queries on this machine's default backend, checked against
NumPy, with timings (the first call, answered by the numpy tier while the kernel compiles;
when the kernel was ready; warm calls) and one generated kernel source."""
from __future__ import annotations

import time

import numpy as np

import querycompute as qc


def _best(fn, repeat: int = 5) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def examples(x: np.ndarray, a: np.ndarray, b: np.ndarray):
    """(title, query, terminal, numpy callable) per example."""
    return [
        ("W1 select(v*2).where(v>1000).select(v+100).sum()",
         qc.query(x).select(lambda v: v * 2).where(lambda v: v > 1000).select(lambda v: v + 100),
         "sum", lambda: ((x * 2)[(x * 2) > 1000] + 100).sum()),
        ("W2 where(v%3<1).select(v*2+1).to_array() (length)",
         qc.query(x).where(lambda v: v % 3 < 1).select(lambda v: v * 2 + 1), "to_array",
         lambda: x[x % 3 < 1] * 2 + 1),
        ("W3 count(500 < v < 1500)",
         qc.query(x), qc.count(lambda v: 500 < v < 1500),
         lambda: int(np.count_nonzero((x > 500) & (x < 1500)))),
        ("W4 zip(a, b).select(a*b+1).sum()",
         qc.query(a, b).select(lambda p, q: p * q + 1), "sum", lambda: (a * b + 1).sum()),
    ]


def _summary(value):
    """An array's length, a NumPy scalar as the plain Python number it holds (no np.float32(..))."""
    if isinstance(value, np.ndarray) and value.ndim:
        return len(value)
    return value.item() if isinstance(value, (np.generic, np.ndarray)) else value


def run_demo(n: int = 5_000_000) -> int:
    rng = np.random.default_rng(0)
    x = rng.random(n, dtype=np.float32) * 2000
    a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    avail = {k: v for k, v in qc.backends().items() if v["available"]}
    print(f"querycompute {qc.__version__} demo, n = {n:,} float32 elements")
    print("backends here: " + ", ".join(avail))
    print("W1-W4 are the benchmark workloads of DESIGN.md section 8: fused map-filter-sum, "
          "filter to an array, predicate count, zip of two arrays")
    ok = True
    for title, query, terminal, run_np in examples(x, a, b):
        t = time.perf_counter()
        cq = query.compile(terminal)          # tiered: returns at once, compiles behind
        got = cq()
        first = time.perf_counter() - t
        tier = cq.trace.tier
        t = time.perf_counter()
        cq.wait()                             # the kernel, for the warm timing
        ready = time.perf_counter() - t + first
        cq()                                  # the kernel's first run: where it came from
        origin = cq.trace.kernels[0].cache if cq.trace.kernels else "memory"
        got, want = _summary(got), _summary(run_np())
        same = bool(np.isclose(float(got), float(want), rtol=1e-4))
        ok &= same
        warm, ref = _best(cq), _best(run_np)
        answered = ("by the numpy tier while the kernel compiled" if tier == "numpy"
                    else "by the kernel")
        print(f"\n{title}\n  result {got!r} (numpy {want!r}) {'ok' if same else 'MISMATCH'}"
              f"\n  backend {cq.backend}: first call {first * 1e3:.1f} ms, answered {answered}; "
              f"kernel ready after {ready * 1e3:.0f} ms ({origin})"
              f"\n  warm {warm * 1e3:.2f} ms, numpy {ref * 1e3:.2f} ms ({ref / warm:.1f}x)")
    q = qc.query(x).select(lambda v: v * 2).where(lambda v: v > 1000)
    backend = qc.last_trace().backend
    print(f"\nGenerated source of select(v*2).where(v>1000).sum() for backend {backend!r}:\n")
    print(q.source(backend if backend != "numpy" else "cpu", terminal="sum"))
    return 0 if ok else 1
