"""A where after a scan, fused into the scan's last pass (ops/scan/fused_gpu.py) against
the same staged plan with the scan and the pass as two stages (`scan_fused_passes = False`):
`scan(lambda a, v: a + v, 0).where(lambda v: v > 1000)` then count / to_array, int64 and
float32. Both plans' results are compared (identical bits) before timing; medians of
`--repeat` warm runs, with the load average (this machine's 2 cores are shared).

    python benchmarks/gpu_scan_fusion.py                       # opencl (pocl here), n = 1e6
    python benchmarks/gpu_scan_fusion.py --backend cuda --n 1e8

The figures in docs/performance.md's "Pipeline operators" section come from this script.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
from dataclasses import replace

import numpy as np

os.environ.setdefault("QUERYCOMPUTE_TIERED", "0")      # time kernels, never the numpy tier
import querycompute as qc  # noqa: E402
from querycompute.run import pipeline  # noqa: E402
from querycompute.backends import registry  # noqa: E402
from querycompute.run.engine import assemble  # noqa: E402
from querycompute.plan.plan import param_values  # noqa: E402


def runner(q, terminal: str, backend: str, fused: bool):
    """A no-argument function running the plan of `q.<terminal>()` on `backend`, the scan
    fused into the next pass or not."""
    from querycompute.backends.gpu import gpu_stages
    staged, term, cols, infos = q.lowered(terminal)
    rt = getattr(gpu_stages, f"{backend}_stages")()
    rt.caps = replace(rt.caps, scan_fused_passes=fused)
    be = registry.get(backend)
    prepared = pipeline.StagedPrepared(staged, lambda lowered: be.prepare(lowered.pass_), rt, backend)
    assert bool(prepared.scan_fused) == fused
    params, n = param_values(staged, infos, q._source), q._source.length(cols)
    return lambda: assemble(staged, prepared.run_quick(cols, params, n)[0], term)


def median_ms(f, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="opencl", choices=("opencl", "cuda"))
    ap.add_argument("--n", type=float, default=1e6)
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args(argv)
    if not qc.backends()[args.backend]["available"]:
        print(f"{args.backend} is not available here")
        return 2
    n = int(args.n)
    rng = np.random.default_rng(1)
    for dt in ("int64", "float32"):
        x = (rng.random(n) * 4 - 1.5).astype(dt) if dt == "float32" else rng.integers(-3, 5, n).astype(dt)
        q = qc.query(x).scan(lambda a, v: a + v, 0).where(lambda v: v > 1000)
        for terminal in ("count", "to_array"):
            runs = {fused: runner(q, terminal, args.backend, fused) for fused in (False, True)}
            got = {fused: f() for fused, f in runs.items()}
            a, b = got[False], got[True]
            same = np.array_equal(a, b) if isinstance(a, np.ndarray) else a == b
            assert same, f"{dt} {terminal}: fused {b!r} != unfused {a!r}"
            ms = {fused: median_ms(f, args.repeat) for fused, f in runs.items()}
            print(f"{args.backend} n={n:.0e} {dt:8} {terminal:9} two stages {ms[False]:8.2f} ms  "
                  f"fused {ms[True]:8.2f} ms  ({ms[False] / ms[True]:.2f}x)  "
                  f"load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
