"""Per-call overhead of querycompute on a small input: W1 on 1,000 float32 elements.

    python benchmarks/overhead.py               # warm vs numpy, then cold and disk-warm first calls
    python benchmarks/overhead.py --profile     # also a cProfile of the warm path (top entries)

warm:      median end-to-end time of a repeated call (compiled kernel in the memory cache)
           against numpy's idiomatic version. Target: warm <= numpy.
cold:      a fresh Python process with an empty QUERYCOMPUTE_CACHE_DIR: import time and the
           first call (capture, lower, compile, run), measured inside that subprocess.
disk-warm: a second fresh process on the same cache directory: the first call now loads the
           compiled kernel from disk.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
N = 1000


def child(backend: str) -> None:
    """Runs in the subprocess: time the import and the first call, print one JSON line."""
    t0 = time.perf_counter()
    import numpy as np
    import querycompute as qc
    sys.path.insert(0, str(HERE))
    import workloads
    import_ms = (time.perf_counter() - t0) * 1e3
    data = workloads.WORKLOADS["W1"].make(N, np.random.default_rng(0))
    t0 = time.perf_counter()
    workloads.qc_w1(data, backend)()
    first_ms = (time.perf_counter() - t0) * 1e3
    trace = qc.last_trace()
    print(json.dumps({"import_ms": import_ms, "first_ms": first_ms, "backend": trace.backend,
                      "compile_ms": sum(k.compile_ms for k in trace.kernels),
                      "cache": sorted({k.cache for k in trace.kernels})}))


def fresh_process(backend: str, cache_dir: str) -> dict:
    # the first call compiles (or loads) before it answers: tiered execution, where the
    # numpy tier answers first, is what benchmarks/cold_start.py measures
    env = dict(os.environ, QUERYCOMPUTE_CACHE_DIR=cache_dir, QUERYCOMPUTE_TIERED="0")
    env.pop("QUERYCOMPUTE_CACHE", None)          # the disk cache must be on for this measurement
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", backend],
                         env=env, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise SystemExit(f"the cold-start subprocess failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def warm(backends: list[str], repeat: int) -> None:
    import numpy as np
    sys.path.insert(0, str(HERE))
    import querycompute as qc
    import timing
    import workloads
    data = workloads.WORKLOADS["W1"].make(N, np.random.default_rng(0))
    ref = workloads.np_w1(data)
    t_np = timing.warm(ref, repeat).median_ms
    print(f"W1, n={N} float32, warm medians of {repeat} samples (load {timing.load_average():.1f})")
    print(f"  {'numpy':<44} {t_np * 1e3:9.1f} us")
    for b in backends:
        for how, run in (("query built once", workloads.qc_w1(data, b)),
                         ("whole chain per call", lambda _b=b: whole_chain(data["x"], _b))):
            run()
            label = f"qc {b} (ran {qc.last_trace().backend}), {how}"
            t = timing.warm(run, repeat).median_ms
            verdict = "meets target (<= numpy)" if t <= t_np else "slower than numpy"
            print(f"  {label:<44} {t * 1e3:9.1f} us   {t / t_np:5.2f}x numpy  {verdict}")


def whole_chain(x, backend):
    """W1 as a user writes it inline: the chain (three new lambdas) is rebuilt on every call."""
    import querycompute as qc
    return (qc.query(x).select(lambda v: v * 2).where(lambda v: v > 1000)
            .select(lambda v: v + 100).on(backend).sum())


def profile(backend: str) -> None:
    import numpy as np
    sys.path.insert(0, str(HERE))
    import timing
    import workloads
    print(f"\nwarm W1 calls on {backend}:")
    timing.profile(workloads.qc_w1(workloads.WORKLOADS["W1"].make(N, np.random.default_rng(0)), backend))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backends", default="auto,cpu", help="querycompute backends to time warm (default auto,cpu)")
    ap.add_argument("--cold-backend", default="auto", help="backend of the cold-start measurement")
    ap.add_argument("--repeat", type=int, default=21, help="warm samples; the median is reported")
    ap.add_argument("--profile", action="store_true", help="print a cProfile of the warm path")
    ap.add_argument("--child", metavar="BACKEND", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child(args.child)
    warm([b.strip() for b in args.backends.split(",") if b.strip()], args.repeat)
    with tempfile.TemporaryDirectory(prefix="qc-cold-cache-") as cache_dir:
        print(f"\nfirst call in a fresh process (backend {args.cold_backend}, cache dir {cache_dir}):")
        for label in ("cold (empty cache)", "disk-warm"):
            r = fresh_process(args.cold_backend, cache_dir)
            print(f"  {label:<19} import {r['import_ms']:7.1f} ms   first call {r['first_ms']:8.1f} ms   "
                  f"(ran {r['backend']}; kernel from {','.join(r['cache'])}, compile {r['compile_ms']:.1f} ms)")
    if args.profile:
        profile("cpu")


if __name__ == "__main__":
    main()
