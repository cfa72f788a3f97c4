"""The first call of a new query in a fresh process (issue 28 item 6, DESIGN.md section 5f).

    python benchmarks/cold_start.py                          # W1-W6 and the column operations
    python benchmarks/cold_start.py --n 1e6 --repeat 3
    python benchmarks/cold_start.py --cases Q1,Q6,Q3 --sf 0.1 # TPC-H queries beside DuckDB, polars
    QUERYCOMPUTE_TIERED=0 python benchmarks/cold_start.py    # compile first, for comparison
    python benchmarks/cold_start.py --cases G,K,J --primed G~,K~,J~   # new queries, kernels on the machine

A case is a workload (W1-W6 of workloads.py), a column operation (G: group_by(cat).agg(sum,
count); K: order_by().take(10); J: a join of two tables and a sum) or a TPC-H query of
tpch_queries.py (its data from tpch_data at --sf; loading it is not timed). For each case,
fresh Python processes measure:
* import: `import querycompute` (numpy already imported, as in any session that has data);
* first (empty cache): the first call with an empty QUERYCOMPUTE_CACHE_DIR and the tier that
  answered it (tiered execution, the default: the numpy tier answers while the kernel
  compiles in the background);
* kernel serves: from the start of that first call until a call answered by the compiled
  kernel ends (the process calls again until the trace says "kernel"; at most --patience s);
* first (warm cache): the first call in a second fresh process over the cache directory the
  first one filled (the disk cache loaded before answering);
* numpy first: the same query pinned to the numpy backend in its own fresh process;
* for TPC-H queries, DuckDB's and polars' first calls in fresh processes.
Medians over --repeat rounds. Issue 28's targets (cpu, this machine): kernel serves W1-W6
<= 1.0 s from an empty cache, G/K/J <= 1.5 s once their generic kernels are on the machine;
warm-cache first <= 2x numpy first; a TPC-H query never seen before: first <= 3x DuckDB's.
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
COLUMN_OPS = ("G", "K", "J")


def _column_op(key: str, n: int, backend: str):
    """The column-operation cases: (run, numpy reference run). `G~`, `K~`, `J~` are the same
    operations over the same types with other lambdas (--primed: the generic kernels they
    use are then on the machine, the case's own passes are not)."""
    import numpy as np
    import querycompute as qc
    rng = np.random.default_rng(0)
    cat = rng.integers(0, 1000, n, dtype=np.int32)
    price = (rng.random(n, dtype=np.float32) * 2000).astype(np.float64)
    if key == "G~":
        q = qc.query(cat=cat, price=price).on(backend).group_by(lambda r: r.cat)
        return (lambda: q.agg(total=qc.sum(lambda r: r.price * 2.0), n=qc.count)["total"].sum(),
                lambda: (price * 2.0).sum())
    if key == "G":
        q = qc.query(cat=cat, price=price).on(backend).group_by(lambda r: r.cat)
        return (lambda: q.agg(total=qc.sum(lambda r: r.price), n=qc.count)["total"].sum(),
                lambda: price.sum())
    if key in ("K", "K~"):
        q = qc.query(price).on(backend)
        q = (q.order_by(lambda v: v) if key == "K" else q.order_by(lambda v: v + 1.0)).take(10)
        return (lambda: q.to_array().sum(), lambda: np.sort(price)[:10].sum())
    keys = np.arange(1000, dtype=np.int32)
    dims = qc.query(k=keys, w=keys.astype(np.float64))
    if key == "J~":
        q = (qc.query(cat=cat, price=price).on(backend)
             .join(dims, lambda r: r.cat, lambda d: d.k, lambda r, d: r.price + d.w))
        return q.sum, lambda: float(price.sum() + cat.astype(np.float64).sum())
    q = (qc.query(cat=cat, price=price).on(backend)
         .join(dims, lambda r: r.cat, lambda d: d.k, lambda r, d: r.price * d.w))
    return q.sum, lambda: float(np.dot(price, cat.astype(np.float64)))


def _case(case: str, backend: str, n: int, sf: float):
    """(run, reference value or None) for one case in this process."""
    sys.path.insert(0, str(HERE))
    if case.rstrip("~") in COLUMN_OPS:
        run, ref = _column_op(case, n, backend)
        return run, ref()
    if case.startswith("W"):
        import numpy as np
        import workloads
        w = workloads.WORKLOADS[case]
        data = w.make(n, np.random.default_rng(0))
        return w.querycompute(data, backend), (w.kind, w.numpy(data)())
    import tpch_data
    import tpch_queries as Q
    tables = tpch_data.load(sf)
    if backend in ("duckdb", "polars"):
        return Q.PEERS[backend][case](tables), None
    return Q.QC[case](tables, backend), None


def child(case: str, backend: str, n: int, sf: float, patience: float) -> None:
    """In the subprocess: time the import, the first call, the wait for the kernel; one JSON
    line on stdout."""
    import numpy as np  # noqa: F401  (numpy is imported before the timer: a session has data)
    t0 = time.perf_counter()
    import querycompute as qc
    import_ms = (time.perf_counter() - t0) * 1e3
    run, ref = _case(case, backend, n, sf)
    t1 = time.perf_counter()
    got = run()
    first_ms = (time.perf_counter() - t1) * 1e3
    peer = backend in ("duckdb", "polars")
    tier = "-" if peer else qc.last_trace().tier
    serve_ms = first_ms if tier in ("kernel", "-") else None
    while serve_ms is None and time.perf_counter() - t1 < patience:
        time.sleep(0.005)
        run()
        if qc.last_trace().tier == "kernel":
            serve_ms = (time.perf_counter() - t1) * 1e3
    ok, why = True, ""
    if ref is not None:
        import workloads
        kind, value = ref if isinstance(ref, tuple) else ("sum", ref)
        ok, why = workloads.check(kind, got, value)
    print(json.dumps({"import_ms": import_ms, "first_ms": first_ms, "tier": tier,
                      "serve_ms": serve_ms, "right": ok, "why": why}))


def fresh(case: str, backend: str, args, cache_dir: str) -> dict:
    env = dict(os.environ, QUERYCOMPUTE_CACHE_DIR=cache_dir)
    env.pop("QUERYCOMPUTE_CACHE", None)
    env.setdefault("QUERYCOMPUTE_TIERED", "1")    # the default a user gets
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", case, backend,
                          str(int(args.n)), str(args.sf), str(args.patience)],
                         env=env, capture_output=True, text=True, timeout=1200)
    if out.returncode != 0:
        raise SystemExit(f"the fresh process for {case} on {backend} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(case: str, args) -> dict:
    """Medians over --repeat rounds of every figure of one case."""
    rounds = []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as cache_dir:
            for other in filter(None, args.primed.split(",")):
                fresh(other, args.backend, args, cache_dir)     # fills the cache, not timed
            empty = fresh(case, args.backend, args, cache_dir)
            warm = fresh(case, args.backend, args, cache_dir)
        with tempfile.TemporaryDirectory() as cache_dir:
            ref = fresh(case, "numpy", args, cache_dir)
        row = {"empty": empty, "warm": warm, "numpy": ref}
        if not case.startswith(("W", "G", "K", "J")):
            for peer in ("duckdb", "polars"):
                with tempfile.TemporaryDirectory() as cache_dir:
                    row[peer] = fresh(case, peer, args, cache_dir)
        rounds.append(row)
    bad = [r[k]["why"] for r in rounds for k in r if not r[k]["right"]]
    med = lambda k, f: statistics.median(  # noqa: E731
        float("inf") if r[k][f] is None else r[k][f] for r in rounds)
    out = {"case": case, "wrong": bad[0] if bad else "",
           "import_ms": med("empty", "import_ms"), "first_ms": med("empty", "first_ms"),
           "tier": ",".join(sorted({r["empty"]["tier"] for r in rounds})),
           "serve_ms": med("empty", "serve_ms"), "warm_ms": med("warm", "first_ms"),
           "warm_tier": ",".join(sorted({r["warm"]["tier"] for r in rounds})),
           "numpy_ms": med("numpy", "first_ms")}
    for peer in ("duckdb", "polars"):
        if peer in rounds[0]:
            out[f"{peer}_ms"] = med(peer, "first_ms")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=float, default=1e5, help="elements of W1-W6 and G, K, J")
    ap.add_argument("--sf", type=float, default=0.1, help="TPC-H scale factor")
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cases", default="W1,W2,W3,W4,W5,W6,G,K,J",
                    help="workloads W1-W6, G (group_by), K (order_by().take(10)), J (join), "
                         "TPC-H queries (Q1, Q6, ...)")
    ap.add_argument("--patience", type=float, default=120.0,
                    help="seconds a process waits for the kernel to serve")
    ap.add_argument("--primed", default="", metavar="CASES",
                    help="cases run first over each round's cache directory (untimed), so that "
                         "'first' is a query new to a machine that has their kernels: e.g. "
                         "--cases G,K,J --primed G~,K~,J~ (the same operations with other "
                         "lambdas) or --cases Q12 --primed Q1,Q3,Q5")
    ap.add_argument("--json", default=None, metavar="PATH")
    ap.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        case, backend, n, sf, patience = args.child
        child(case, backend, int(n), float(sf), float(patience))
        return
    tiered = os.environ.get("QUERYCOMPUTE_TIERED", "1")
    print(f"# a fresh process per figure: n = {args.n:.0e}, TPC-H SF {args.sf:g}, backend "
          f"{args.backend}, QUERYCOMPUTE_TIERED={tiered}, median of {args.repeat}, "
          f"{'primed by ' + args.primed + ', ' if args.primed else ''}"
          f"load {os.getloadavg()[0]:.1f}")
    print(f"{'case':5} {'import':>8} {'first':>9} {'tier':>6} {'serves':>9} {'warm 1st':>9} "
          f"{'numpy 1st':>9} {'warm/np':>7} {'duckdb':>8} {'polars':>8} {'1st/duck':>8}")
    rows = []
    for case in args.cases.split(","):
        r = measure(case, args)
        rows.append(r)
        if r["wrong"]:
            print(f"{case:5} WRONG: {r['wrong']}")
            continue
        duck = r.get("duckdb_ms")
        print(f"{case:5} {r['import_ms']:6.0f}ms {r['first_ms']:7.0f}ms {r['tier']:>6} "
              f"{r['serve_ms']:7.0f}ms {r['warm_ms']:7.0f}ms {r['numpy_ms']:7.0f}ms "
              f"{r['warm_ms'] / r['numpy_ms']:6.2f}x "
              + (f"{duck:6.0f}ms {r['polars_ms']:6.0f}ms {r['first_ms'] / duck:7.2f}x"
                 if duck else f"{'-':>8} {'-':>8} {'-':>8}"), flush=True)
    print(f"# load at the end {os.getloadavg()[0]:.1f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"load": os.getloadavg()[0], "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
