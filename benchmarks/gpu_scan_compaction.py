"""Compaction (W2's where -> select -> to_array) and the scan operator on a CUDA device:
every result checked against NumPy (several runs each, so a timing-dependent look-back bug
shows), then timed; scans against cupy.cumsum. The figures in docs/performance.md's H100
section come from this script.

    python benchmarks/gpu_scan_compaction.py                                # CUDA's default algorithms
    python benchmarks/gpu_scan_compaction.py --compaction reduce_then_scan  # the two-pass compaction

Without CuPy or a CUDA device it says so and exits with status 2.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

os.environ.setdefault("QUERYCOMPUTE_TIERED", "0")      # time kernels, never the numpy tier
import querycompute as qc  # noqa: E402
from querycompute._codegen.ops.compact import gpu as compact_gpu

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_bandwidth import median_ms  # noqa: E402

SIZES = (1, 1000, 4099, 100_003, 10**7, 10**8)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compaction", choices=("default", "lookback", "reduce_then_scan"), default="default")
    args = ap.parse_args(argv)
    try:
        import cupy as cp
        if cp.cuda.runtime.getDeviceCount() < 1:
            raise RuntimeError("no CUDA device")
    except Exception as exc:
        print(f"gpu_scan_compaction.py needs an NVIDIA GPU with CuPy: {type(exc).__name__}: {exc}",
              file=sys.stderr)
        return 2
    if args.compaction != "default":
        compact_gpu.ALGORITHM["cuda"] = args.compaction
    print(f"compaction: {compact_gpu.ALGORITHM['cuda']}")
    rng = np.random.default_rng(5)
    wrong = 0
    for n in SIZES:
        xh = rng.random(n, dtype=np.float32) * 2000
        q = qc.query(cp.asarray(xh)).where(lambda v: v % 3 < 1).select(lambda v: v * 2 + 1).on("cuda")
        want = xh[xh % 3 < 1] * 2 + 1
        ok = all(np.array_equal(q.to_array().get(), want) for _ in range(3))
        wrong += not ok
        print(f"compaction n={n:>9}: {'ok' if ok else 'WRONG'}"
              + (f"  {median_ms(cp, q.to_array, 7):.3f} ms" if ok and n >= 10**7 else ""))
    for dt in ("int32", "int64", "float32"):
        for n in SIZES:
            xh = rng.integers(-100, 100, n).astype(dt)
            x = cp.asarray(xh)
            q = qc.query(x).scan(lambda a, v: a + v, 0).on("cuda")
            want = np.cumsum(xh, dtype=dt)
            ok = all(np.array_equal(q.to_array().get(), want) for _ in range(2))   # small ints: exact
            wrong += not ok
            line = f"scan {dt} n={n:>9}: {'ok' if ok else 'WRONG'}"
            if ok and n >= 10**7:
                line += f"  {median_ms(cp, q.to_array, 7):.3f} ms, cupy.cumsum {median_ms(cp, lambda: cp.cumsum(x), 7):.3f} ms"
            print(line)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
