"""The first call of a new query in a fresh process (issue 12's cold-start targets).

    python benchmarks/cold_start.py                  # W1-W6 at n = 1e5 on cpu, tiered as configured
    python benchmarks/cold_start.py --n 1e5 --backend cpu --repeat 3
    QUERYCOMPUTE_TIERED=0 python benchmarks/cold_start.py    # compile first, for comparison

For each workload, fresh Python processes with an empty QUERYCOMPUTE_CACHE_DIR measure
* import: `import querycompute` (numpy already imported, as in any session that has data)
  and `import numpy, querycompute` together;
* first: the first call of the workload's query on --backend (with tiered execution the
  numpy tier answers it while the kernel compiles in the background; the trace says which
  tier answered);
* numpy first: the first call of the same query pinned to the numpy backend, in its own
  fresh process: the reference the target is stated against (first <= 3x numpy first).
Medians over --repeat fresh processes. Targets (issue 12): first <= 3x numpy first,
import querycompute <= 120 ms.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def child(key: str, backend: str, n: int) -> None:
    """In the subprocess: time the imports and the first call; print one JSON line."""
    t0 = time.perf_counter()
    import numpy as np
    t1 = time.perf_counter()
    import querycompute as qc
    t2 = time.perf_counter()
    sys.path.insert(0, str(HERE))
    import workloads
    w = workloads.WORKLOADS[key]
    data = w.make(n, np.random.default_rng(0))
    run = w.querycompute(data, backend)
    t3 = time.perf_counter()
    got = run()
    first_ms = (time.perf_counter() - t3) * 1e3
    ok, why = workloads.check(w.kind, got, w.numpy(data)())
    trace = qc.last_trace()
    print(json.dumps({"numpy_import_ms": (t1 - t0) * 1e3, "qc_import_ms": (t2 - t1) * 1e3,
                      "first_ms": first_ms, "backend": trace.backend,
                      "tier": getattr(trace, "tier", trace.backend), "right": ok, "why": why}))


def fresh(key: str, backend: str, n: int) -> dict:
    with tempfile.TemporaryDirectory() as cache_dir:
        env = dict(os.environ, QUERYCOMPUTE_CACHE_DIR=cache_dir)
        env.pop("QUERYCOMPUTE_CACHE", None)
        env.setdefault("QUERYCOMPUTE_TIERED", "1")    # the default a user gets
        out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", key,
                              backend, str(n)], env=env, capture_output=True, text=True,
                             timeout=600)
    if out.returncode != 0:
        raise SystemExit(f"the fresh process for {key} on {backend} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=float, default=1e5)
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workloads", default="W1,W2,W3,W4,W5,W6")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        key, backend, n = args.child
        child(key, backend, int(n))
        return
    n = int(args.n)
    load = os.getloadavg()[0]
    tiered = os.environ.get("QUERYCOMPUTE_TIERED", "1")    # (what fresh() passes on)
    print(f"# first call in a fresh process, n = {n:.0e}, backend {args.backend}, "
          f"QUERYCOMPUTE_TIERED={tiered}, median of {args.repeat}, load {load:.1f}")
    print(f"{'':4} {'import qc':>10} {'numpy+qc':>10} {'first':>10} {'numpy 1st':>10} "
          f"{'ratio':>7}  tier")
    for key in args.workloads.split(","):
        runs = [fresh(key, args.backend, n) for _ in range(args.repeat)]
        refs = [fresh(key, "numpy", n) for _ in range(args.repeat)]
        bad = [r["why"] for r in runs + refs if not r["right"]]
        if bad:
            print(f"{key}: WRONG ({bad[0]})")
            continue
        med = lambda rows, f: statistics.median(r[f] for r in rows)     # noqa: E731
        imp = med(runs, "qc_import_ms")
        both = statistics.median(r["qc_import_ms"] + r["numpy_import_ms"] for r in runs)
        first, ref = med(runs, "first_ms"), med(refs, "first_ms")
        tiers = sorted({r["tier"] for r in runs})
        print(f"{key:4} {imp:8.1f}ms {both:8.1f}ms {first:8.1f}ms {ref:8.1f}ms "
              f"{first / ref:6.2f}x  {','.join(tiers)}")


if __name__ == "__main__":
    main()
