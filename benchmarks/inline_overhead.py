"""Per-call cost of chains written inline (the Query built anew on every call) at small n.

    python benchmarks/inline_overhead.py                 # W1-W6, n = 1e3, cpu backend
    python benchmarks/inline_overhead.py --n 1e3 --backend cpu --repeat 31 --profile W3

For each workload: numpy as a user writes it, querycompute with the chain built once
(`workloads.WORKLOADS[k].querycompute`) and with the whole chain inline
(`workloads.INLINE[k]`), medians of interleaved warm samples (timing.interleaved), and the
ratio inline / numpy. Issue 12's target: inline <= 1.0x numpy on the cpu backend.
`--profile Wk` prints a cProfile of 20,000 inline calls of that workload.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=float, default=1e3)
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--repeat", type=int, default=21)
    ap.add_argument("--workloads", default="W1,W2,W3,W4,W5,W6")
    ap.add_argument("--profile", metavar="WK", help="cProfile 20,000 inline calls of one workload")
    args = ap.parse_args(argv)
    import numpy as np

    import timing
    import workloads
    n = int(args.n)
    print(f"# n = {n}, backend {args.backend}, medians of {args.repeat} interleaved samples, "
          f"load {timing.load_average():.1f}")
    print(f"{'':4} {'numpy':>9} {'qc once':>9} {'qc inline':>10} {'inline/numpy':>13}")
    for key in args.workloads.split(","):
        w = workloads.WORKLOADS[key]
        data = w.make(n, np.random.default_rng(0))
        impls = {"numpy": w.numpy(data), "once": w.querycompute(data, args.backend),
                 "inline": workloads.INLINE[key](data, args.backend)}
        ref = impls["numpy"]()
        for name, run in impls.items():
            ok, why = workloads.check(w.kind, run(), ref)
            if not ok:
                raise SystemExit(f"{key} {name}: WRONG ({why})")
        t = timing.interleaved(impls, args.repeat)
        us = {k: v.median_ms * 1e3 for k, v in t.items()}
        print(f"{key:4} {us['numpy']:7.1f}us {us['once']:7.1f}us {us['inline']:8.1f}us "
              f"{us['inline'] / us['numpy']:12.2f}x")
    if args.profile:
        w = workloads.WORKLOADS[args.profile]
        print(f"\n{args.profile} written inline, on {args.backend}:")
        timing.profile(workloads.INLINE[args.profile](w.make(n, np.random.default_rng(0)), args.backend),
                       top=18)


if __name__ == "__main__":
    main()
