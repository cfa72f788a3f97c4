"""The cpu join's three routes for one integer key (backends/cpu/cpu_join.py): the hash table,
the direct index of a dense build side (keys spanning at most DENSE_SPAN values per row,
TPC-H's primary keys) and the ranked index (a bitmap of the range and its ranks: at most
DENSE_BITS values per row, from RANKED_MIN_ROWS rows; a filtered primary key). Each case runs
the StageRuntime's join (the pairs alone, no query around it) by each route its keys allow
(the others disabled: DENSE_SPAN = 0, RANKED_MIN_ROWS past the build side), interleaved round
by round, checks all give the same pairs, and prints the medians.

    python benchmarks/join_dense.py [--repeat 7] [--scale 1] [--busy]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from querycompute.backends.cpu import cpu_join
from querycompute.backends.cpu.cpu_stages import CpuStages
import timing  # noqa: E402   (benchmarks/ is the script's folder)


def cases(rng, scale: float) -> dict:
    """(probe keys, build keys) shaped as TPC-H's joins at SF `scale`."""
    def n(x):
        return max(1, int(x * scale))
    return {
        "Q19: lines -> part keys": (rng.integers(1, n(200_000) + 1, n(214_000)).astype(np.int64),
                                   rng.permutation(np.arange(1, n(200_000) + 1, dtype=np.int64))),
        "Q3/Q12: lines -> order keys (1 in 4 of 1..6M)": (
            np.sort(rng.integers(1, n(6_000_000) + 1, n(6_000_000))).astype(np.int64),
            np.sort(rng.choice(np.arange(1, n(6_000_000) + 1), n(1_500_000), replace=False)).astype(np.int64)),
        "Q5: lines -> one year of orders (227K of 1.5M keys in 1..6M)": (
            np.sort(rng.integers(1, n(6_000_000) + 1, n(6_000_000))).astype(np.int64),
            rng.choice(np.arange(1, n(6_000_000) + 1), n(227_000), replace=False).astype(np.int64)),
        "Q5/Q10: orders -> customer keys (int32)": (rng.integers(1, n(150_000) + 1, n(1_500_000)).astype(np.int32),
                                                   np.arange(1, n(150_000) + 1, dtype=np.int32)),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--scale", type=float, default=1.0, help="TPC-H scale factor of the sizes")
    timing.busy_arg(ap)
    a = ap.parse_args()
    if a.busy:
        timing.busy()
    st = CpuStages()
    span, ranked = cpu_join.DENSE_SPAN, cpu_join.RANKED_MIN_ROWS
    routes = {"hash table": (0, 2**62), "ranked index": (0, ranked), "direct index": (span, ranked)}
    print(f"cpu join at SF {a.scale:g}, load average {timing.load_average():.2f}; median ms of {a.repeat}, "
          f"interleaved")
    for name, (probe, build) in cases(np.random.default_rng(0), a.scale).items():
        times: dict = {r: [] for r in routes}
        pairs, took = {}, {}
        for _ in range(a.repeat + 1):                   # the first round compiles: not timed
            for route, (dense, rank_rows) in routes.items():
                cpu_join.DENSE_SPAN, cpu_join.RANKED_MIN_ROWS = dense, rank_rows
                rows: list = []
                t0 = time.perf_counter()
                pairs[route] = st.join([probe], [build], False, rows)
                times[route].append(1e3 * (time.perf_counter() - t0))
                took[route] = rows[0].name
        cpu_join.DENSE_SPAN, cpu_join.RANKED_MIN_ROWS = span, ranked
        for route in routes:
            for got in zip(pairs["hash table"], pairs[route]):
                np.testing.assert_array_equal(*got)
        ran: dict = {}                                  # (a route its keys do not allow: the next)
        for r in routes:
            ran.setdefault(took[r], r)
        line = ", ".join(f"{r} {float(np.median(times[r][1:])):.1f} ms" for r in ran.values())
        print(f"  {name}: {line}, {len(pairs['hash table'][0])} pairs")

if __name__ == "__main__":
    main()
