"""A join whose other side has operators (a filtered dimension table: TPC-H Q3's customer by
segment, Q5's region): issue 27's "common subplans run once". Prints the warm median of the
join on each backend; run it on two commits to compare.

    python benchmarks/join_filtered_side.py [--n 2000000] [--m 200000] [--repeat 7]
"""
from __future__ import annotations

import argparse
import os

import numpy as np

os.environ.setdefault("QUERYCOMPUTE_TIERED", "0")
import querycompute as qc  # noqa: E402
import timing  # noqa: E402   (benchmarks/ is the script's folder)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=2_000_000)
    ap.add_argument("--m", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--backends", default="cpu,numpy")
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    orders = {"custkey": rng.integers(0, a.m, a.n).astype(np.int32), "price": rng.random(a.n)}
    customer = {"custkey": np.arange(a.m, dtype=np.int32), "segment": rng.integers(0, 5, a.m).astype(np.int8),
                "balance": rng.random(a.m)}
    for backend in a.backends.split(","):
        def run():
            building = qc.query(customer).where(lambda c: c.segment == 1)
            return qc.query(orders).on(backend).join(building, lambda o: o.custkey, lambda c: c.custkey,
                                                     lambda o, c: o.price + c.balance).sum()
        run()
        t = timing.warm(run, a.repeat)
        print(f"{backend:6} n={a.n} m={a.m}: {t.median_ms:.1f} ms (median of {a.repeat})")


if __name__ == "__main__":
    main()
