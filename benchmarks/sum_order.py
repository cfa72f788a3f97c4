"""The cpu kernel's float sum in its fixed order (issue 28 item 3, _codegen/sum_order.py):
best and median warm ms of a sum, a filtered sum and an agg bundle, n = 2e7, float32 and
float64, on the cpu backend.

    PYTHONPATH=<tree> python benchmarks/sum_order.py      # once per tree to compare
"""
from __future__ import annotations

import os
import time

os.environ.setdefault("QUERYCOMPUTE_TIERED", "0")     # time kernels, not the numpy tier

import numpy as np  # noqa: E402

import querycompute as qc  # noqa: E402

CASES = [("sum", lambda q: q.sum()),
         ("where.sum", lambda q: q.where(lambda v: v > 0).sum()),
         ("agg", lambda q: q.agg(s=qc.sum(lambda v: v * v), m=qc.max()))]


def main(n: int = 20_000_000, repeat: int = 25) -> None:
    rng = np.random.default_rng(0)
    for dt in ["float32", "float64"]:
        x = rng.standard_normal(n).astype(dt)
        for name, f in CASES:
            q = qc.query(x).on("cpu")
            f(q)
            f(q)
            ts = []
            for _ in range(repeat):
                t = time.perf_counter()
                f(q)
                ts.append(time.perf_counter() - t)
            ts.sort()
            print(f"{dt} {name}: {ts[0] * 1e3:.2f} ms (median {ts[len(ts) // 2] * 1e3:.2f})")


if __name__ == "__main__":
    main()
