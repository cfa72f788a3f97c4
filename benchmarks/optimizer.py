"""The logical plan's optimizer (plan/logical.py), on and off, in one process.

    python benchmarks/optimizer.py [--n 1000000] [--samples 7] [--backend cpu]

Each case is one query over a 12-column table (int32 / float32 / float64 columns, like
lineitem's), planned twice: once with logical.PASSES emptied (the plan as written) and once
with the optimizer's passes, then timed warm, interleaved (benchmarks/timing.py), so load
from other processes lands on both alike. The two plans are kept apart by their lambdas'
texts (one extra space), so both stay in the memo. Results are checked equal first.

Cases:
  topk        order_by(k).where(p).take(10): the where moves before the sort, which then
              is a top-k (push_predicates)
  sort_gather order_by(k).select(one field): the sort gathers 1 column, not 12 (project)
  join_where  join(...).where(p over this side's field): the where runs before the join,
              so fewer rows probe (push_predicates into the join's side)
  join_twice  a dimension joined twice (two roles): it runs once per call (share_subplans)
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

import querycompute as qc
from querycompute.plan import logical

from timing import interleaved, load_average


def table(n: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    cols = {}
    for i in range(12):
        kind = i % 3
        if kind == 0:
            cols[f"c{i}"] = rng.integers(0, 1000, n).astype(np.int32)
        elif kind == 1:
            cols[f"c{i}"] = rng.random(n).astype(np.float32)
        else:
            cols[f"c{i}"] = rng.random(n)
    return cols


def cases(t: dict, dim: dict, sp: str) -> dict:
    """The four queries; `sp` varies their lambdas' text (one plan per value of it)."""
    L = lambda body: f"lambda r:{sp}{body}"                              # noqa: E731
    q = qc.query(t)
    d = qc.query(dim)
    return {
        "topk": lambda b: q.on(b).order_by(L("r.c1")).where(L("r.c0 < 100")).take(10)
                           .sum(L("r.c2")),
        "sort_gather": lambda b: q.on(b).order_by(L("r.c1")).select(L("r.c2")).to_array(),
        "join_where": lambda b: q.on(b).join(d, L("r.c0"), "lambda o: o.k",
                                             f"lambda r, o:{sp}{{'x': r.c3, 'v': o.v}}")
                                 .where(L("r.x < 50")).sum(L("r.v")),
        "join_twice": lambda b: q.on(b).join(d, L("r.c0"), "lambda o: o.k",
                                             f"lambda r, o:{sp}{{'x': r.c6, 'v': o.v}}")
                                 .join(d, L("r.x"), "lambda o: o.k", f"lambda a, o:{sp}a.v + o.v")
                                 .sum(),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=float, default=1e6)
    ap.add_argument("--samples", type=int, default=7)
    ap.add_argument("--backend", default="cpu")
    args = ap.parse_args(argv)
    n = int(args.n)
    t = table(n)
    dim = {"k": np.arange(1000, dtype=np.int32), "v": np.random.default_rng(1).random(1000)}
    saved = logical.PASSES
    try:
        logical.PASSES = ()
        off = cases(t, dim, " ")
        got_off = {k: f(args.backend) for k, f in off.items()}          # planned without passes
    finally:
        logical.PASSES = saved
    on = cases(t, dim, "  ")
    got_on = {k: f(args.backend) for k, f in on.items()}
    for k in on:
        a, b = np.asarray(got_off[k]), np.asarray(got_on[k])
        assert a.shape == b.shape and np.allclose(a, b, rtol=1e-6, equal_nan=True), k
    print(f"optimizer off / on, {args.backend}, n={n:.0e}, warm medians of {args.samples} "
          f"(load {load_average():.1f})")
    for k in on:
        tm = interleaved({"off": lambda f=off[k]: f(args.backend), "on": lambda f=on[k]: f(args.backend)},
                         args.samples)
        print(f"  {k:<12} off {tm['off'].median_ms:9.2f} ms   on {tm['on'].median_ms:9.2f} ms   "
              f"{tm['off'].median_ms / tm['on'].median_ms:5.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
