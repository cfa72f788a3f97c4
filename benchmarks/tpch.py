"""All 22 TPC-H queries (Q1, Q6, Q12, the joins Q3, Q5, Q17, the dated Q7, Q8, Q9 and Q2, Q4,
Q10, Q11, Q13, Q14, Q15, Q16, Q18, Q19, Q20, Q21, Q22) on querycompute against DuckDB, polars and hand-written NumPy (Q1, Q6, Q12 only);
`qc-<backend>-strings` rows run the tpch_queries.TEXTED queries again over the parquet
files' real string columns.

    python benchmarks/tpch.py                         # SF 1, 5 samples, qc backends cpu,opencl,numpy
    python benchmarks/tpch.py --quick                 # SF 0.1, 3 samples
    python benchmarks/tpch.py --sf 0.01 --repeat 1 --json out.json

Data: lineitem, orders, customer, supplier, nation, region, part and partsupp from `tpchgen-cli parquet
-s SF --tables=...` (PyPI tpchgen-cli, in the `bench` extra; this script installs nothing),
generated once into --data (default ~/.cache/querycompute-tpch/sf<SF>) and loaded as
tpch_data.py says: decimals float64, dates int32 days, short strings uint8 codes. Every
engine reads those same in-memory columns (DuckDB and polars through zero-copy Arrow
tables). The queries: tpch_queries.py (Q3, Q5, Q7, Q8, Q9, Q17 are shaped on querycompute:
its docstring says how).

Every result is checked against DuckDB's before anything is timed: keys and counts exactly,
float sums and means within a relative 1e-9 (float64 sums of up to 6e6 positive terms in any
summation order differ by far less; a float32 accumulator or a lost row is far more). A result
that disagrees is WRONG (the script then exits 1) and is not timed; a query querycompute cannot
express yet is n/a with the operator it needs. The numpy backend of querycompute (`qc-numpy`)
is a correctness row: checked, not timed.

Timings: median of --repeat warm samples per implementation, taken round-robin in a rotating
order (timing.interleaved); the first call (querycompute: compile + run) is reported apart.
"x best peer" is the median over the faster of DuckDB's and polars' medians (issue 14's
targets for Q1 and Q6), "x duckdb" over DuckDB's (the Q12 target). GB/s (Q1, Q6) is
the bytes of the lineitem columns the query reads over the median: the memory-bandwidth view.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ.setdefault("QUERYCOMPUTE_TIERED", "0")        # time kernels, never the numpy tier

import querycompute as qc  # noqa: E402
import timing  # noqa: E402
import tpch_data  # noqa: E402
import tpch_queries as Q  # noqa: E402

RTOL = 1e-9
CHECK_ONLY = ("qc-numpy",)        # correctness rows: not timed
BEST_OF = ("duckdb", "polars")    # the ratio's denominator: the faster of these


def check(got, ref) -> tuple[bool, str]:
    """(got agrees with DuckDB's ref, the reason when not)."""
    if isinstance(ref, float):
        err = abs(got - ref) / max(abs(ref), 1e-300)
        return err <= RTOL, f"relative error {err:.1e}"
    if list(got) != list(ref):
        return False, f"columns {list(got)} != {list(ref)}"
    for name, r in ref.items():
        g = np.asarray(got[name])
        if g.shape != r.shape:
            return False, f"{name}: {len(g)} groups, DuckDB has {len(r)}"
        if r.dtype.kind == "f":
            err = np.max(np.abs(g - r) / np.maximum(np.abs(r), 1e-300), initial=0.0)
            if not err <= RTOL:
                return False, f"{name}: relative error {err:.1e}"
        elif not np.array_equal(g.astype(np.int64), r.astype(np.int64)):
            return False, f"{name}: {g.tolist()} != {r.tolist()}"
    return True, ""


def implementations(query: str, backends: list[str]) -> dict:
    """name -> setup(tables) for one query: DuckDB first (the reference), then the peers and
    querycompute's backends (and, for the queries in tpch_queries.DATED, each backend again over
real datetime64 date columns: `qc-<backend>-dates`)."""
    impls = {name: per_query[query] for name, per_query in Q.PEERS.items() if query in per_query}
    for b in backends:
        impls[f"qc-{b}"] = (lambda b: lambda t: Q.QC[query](t, b))(b)
        if query in Q.DATED:          # the same query over datetime64 columns
            impls[f"qc-{b}-dates"] = (lambda b: lambda t: Q.QC[query](t, b, dated=True))(b)
        if query in Q.TEXTED:         # ... and over the parquet files' real string columns
            impls[f"qc-{b}-strings"] = (lambda b: lambda t: Q.QC[query](t, b, texted=True))(b)
    return impls


def run_query(query: str, t, backends: list[str], samples: int) -> list[dict]:
    available = qc.backends()
    rows, runs = [], {}
    ref = None
    for name, setup in implementations(query, backends).items():
        row = {"query": query, "impl": name, "status": "OK", "why": ""}
        rows.append(row)
        backend = name[3:].removesuffix("-dates").removesuffix("-strings") if name.startswith("qc-") else None
        if backend and not available.get(backend, {}).get("available"):
            row.update(status="n/a", why=f"backend unavailable: {available.get(backend, {}).get('reason', '?')}")
            continue
        try:
            run = setup(t)
            got, row["first_ms"] = timing.first_call(run)
        except Q.NotBuilt as exc:
            row.update(status="n/a", why=str(exc))
            continue
        except Exception as exc:         # reported (and fails the run), never hides the others
            row.update(status="ERROR", why=f"{type(exc).__name__}: {exc}"[:300])
            continue
        if ref is None:
            ref = got                    # DuckDB's result: the reference
        else:
            ok, why = check(got, ref)
            if not ok:
                row.update(status="WRONG", why=why)
                continue
        if name.removesuffix("-dates").removesuffix("-strings") not in CHECK_ONLY:
            runs[name] = run
        else:
            row["why"] = "checked, not timed"
    times = timing.interleaved(runs, samples) if runs else {}
    peers = [times[p].median_ms for p in BEST_OF if p in times]
    best = min(peers) if peers else float("nan")
    nbytes = tpch_data.column_bytes(t.lineitem, Q.READS[query]) if query in ("Q1", "Q6") else None
    for row in rows:
        tm = times.get(row["impl"])
        if tm is None:
            continue
        row.update(median_ms=tm.median_ms, min_ms=tm.min_ms, samples=tm.samples,
                   ratio=tm.median_ms / best)
        if "duckdb" in times:
            row["ratio_duckdb"] = tm.median_ms / times["duckdb"].median_ms
        if nbytes:
            row["gbps"] = nbytes / tm.median_ms / 1e6
    return rows


def _fmt(row: dict, key: str, spec: str, width: int) -> str:
    return format(row[key], spec) if key in row else "-".rjust(width)


def print_row(row: dict) -> None:
    print(f"{row['query']:4s} {row['impl']:15s} {_fmt(row, 'median_ms', '10.2f', 10)} "
          f"{_fmt(row, 'ratio', '11.2f', 11)} {_fmt(row, 'ratio_duckdb', '8.2f', 8)} "
          f"{_fmt(row, 'gbps', '6.1f', 6)} "
          f"{_fmt(row, 'first_ms', '9.1f', 9)}  {row['status']} {row['why']}".rstrip(), flush=True)


def header(t, samples: int) -> dict:
    import duckdb
    import polars as pl
    li = t.lineitem
    info = {"sf": t.sf, "lineitem_rows": len(li["l_orderkey"]), "orders_rows": len(t.orders["o_orderkey"]),
            "cpus": os.cpu_count(), "duckdb": duckdb.__version__,
            "duckdb_threads": duckdb.connect().execute("select current_setting('threads')").fetchone()[0],
            "polars": pl.__version__, "polars_threads": pl.thread_pool_size(),
            "numpy": np.__version__, "samples": samples, "rtol": RTOL,
            "bytes_read": {q: tpch_data.column_bytes(li, Q.READS[q]) for q in ("Q1", "Q6")}}
    print(f"TPC-H SF {t.sf:g}: lineitem {info['lineitem_rows']:,} rows, orders {info['orders_rows']:,}; "
          f"{info['cpus']} cpus, 1-minute load {timing.load_average():.2f} (other load skews every figure)")
    print(f"duckdb {info['duckdb']} ({info['duckdb_threads']} threads), polars {info['polars']} "
          f"({info['polars_threads']} threads), numpy {info['numpy']}; median of {samples} samples; "
          f"Q1 reads {info['bytes_read']['Q1'] / 1e6:.0f} MB, Q6 {info['bytes_read']['Q6'] / 1e6:.0f} MB")
    print(f"{'':4s} {'impl':15s} {'median ms':>10s} {'x best peer':>11s} {'x duckdb':>8s} {'GB/s':>6s} {'first ms':>9s}  status")
    return info


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sf", type=float, default=None, help="scale factor (default 1; --quick: 0.1)")
    ap.add_argument("--data", default=None, help="directory of the generated parquet files "
                    "(default ~/.cache/querycompute-tpch/sf<SF>)")
    ap.add_argument("--repeat", type=int, default=None, help="warm samples per implementation (default 5; --quick: 3)")
    ap.add_argument("--backends", default="cpu,opencl,numpy", help="querycompute backends")
    ap.add_argument("--queries", default=",".join(Q.QUERIES))
    ap.add_argument("--quick", action="store_true", help="SF 0.1 and 3 samples unless given")
    ap.add_argument("--json", default=None, metavar="PATH", help="write the results as JSON")
    timing.busy_arg(ap)
    args = ap.parse_args(argv)
    if args.busy:
        timing.busy()
    sf = args.sf if args.sf is not None else 0.1 if args.quick else 1.0
    samples = args.repeat if args.repeat is not None else 3 if args.quick else 5
    queries = args.queries.split(",")
    unknown = [q for q in queries if q not in Q.QUERIES]
    if unknown:
        ap.error(f"unknown query {unknown}; choose from {Q.QUERIES}")
    try:
        tables = tpch_data.load(sf, args.data)
    except (RuntimeError, ImportError) as exc:
        print(f"cannot load TPC-H data: {exc}", file=sys.stderr)
        return 2
    info = header(tables, samples)
    results = []
    for query in queries:
        for row in run_query(query, tables, args.backends.split(","), samples):
            results.append(row)
            print_row(row)
    print(f"load average at the end: {timing.load_average():.2f}")
    if args.json:
        report = {"benchmark": "tpch", "machine": platform.processor() or platform.machine(),
                  "time": time.strftime("%Y-%m-%d %H:%M:%S"), "load_average": timing.load_average(),
                  **info, "results": results}
        Path(args.json).write_text(json.dumps(report, indent=1))
        print(f"wrote {args.json}")
    failed = [r for r in results if r["status"] in ("WRONG", "ERROR")]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
