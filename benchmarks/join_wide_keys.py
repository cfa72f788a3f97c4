"""A join on two integer key fields wider than 64 bits together (TPC-H's lineitem on
(l_orderkey int64, l_linenumber int32), Q17/Q20-shaped): issue 27's key packing. Prints the
warm median of the join on the cpu backend; run it on two commits to compare.

    python benchmarks/join_wide_keys.py [--n 1000000] [--repeat 5]
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
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    orders = rng.integers(0, a.n // 4, a.n).astype(np.int64) * 32      # order keys, int64
    line = rng.integers(1, 8, a.n).astype(np.int32)
    left = {"okey": orders, "line": line, "qty": rng.random(a.n)}
    pick = rng.permutation(a.n)[: a.n // 10]
    right = {"okey": orders[pick], "line": line[pick], "price": rng.random(len(pick))}

    def run():
        return qc.query(left).on("cpu").join(qc.query(right), lambda l: (l.okey, l.line),
                                             lambda r: (r.okey, r.line), lambda l, r: l.qty * r.price).sum()
    run()
    t = timing.warm(run, a.repeat)
    ran = sorted({f"{k.name}:{k.dialect}" for k in qc.last_trace().kernels if "join" in k.name})
    print(f"cpu n={a.n}: {t.median_ms:.1f} ms (median of {a.repeat}); join kernels: {ran}")


if __name__ == "__main__":
    main()
