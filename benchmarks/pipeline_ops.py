"""Pipeline operators (issue 13) on the cpu backend against numpy, pandas and polars.

    python benchmarks/pipeline_ops.py                 # float32 and int64, n = 1e3 .. 1e7
    python benchmarks/pipeline_ops.py --quick         # n = 1e3, 1e5; 3 samples
    python benchmarks/pipeline_ops.py --n 1e7 --cases sort,top100 --dtypes float32

Cases (the querycompute query, then what it is compared with):
    sort      qc.query(x).order_by().to_array()                  np.sort(x), polars Series.sort
    argsort   order_by(lambda r: r.key).select(lambda r: r.pay)  pay[np.argsort(key, kind="stable")]
    top100    order_by().take(100).to_array()                    np.sort(np.partition(x, 99)[:100])
    scan      scan(lambda a, v: a + v, 0).to_array()              np.cumsum(x)
    distinct  distinct().to_array()                              pd.unique(x), polars unique(maintain_order=True)
Every querycompute case runs twice: through the public API ("qc") and as direct calls of the
cpu StageRuntime (backends/cpu_stages.py, "runtime": the column operations alone, plus the
gather/compaction numpy would do). Data: float32 uniform in [0, 2000) (DESIGN.md section 8),
int64 uniform in [0, 1e9). Every result is checked against the reference before anything is
timed (a wrong one is reported, never timed); samples are taken round-robin
(timing.interleaved). Writes results/pipeline_ops.json; prints a table with each time's
ratio to the first reference (np.sort, np.argsort + take, np.partition + sort, np.cumsum,
pd.unique).
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
from querycompute._codegen.ir import expr as E
from querycompute._codegen.ir.stage_specs import ScanSpec, SortSpec  # noqa: E402

CASES = ("sort", "argsort", "top100", "scan", "distinct")
REFERENCE = {"sort": "np.sort", "argsort": "np.argsort+take", "top100": "np.partition+sort",
             "scan": "np.cumsum", "distinct": "pd.unique"}
BACKEND = "cpu"


def np_sort_kernel() -> str:
    """Which sort np.sort runs here, as NumPy's build and CPU dispatch say (NumPy >= 2.0
    dispatches its 16/32/64-bit sorts to x86-simd-sort on AVX-512 (X86_V4) or AVX2
    (X86_V3) and to Highway's VQSort on Arm; else, and before 2.0 without AVX-512, its
    scalar introsort). The ratios against np.sort depend on it: an AVX-512 np.sort is
    about twice as fast as an AVX2 one."""
    major = int(np.__version__.split(".")[0])
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as has
    except ImportError:                       # NumPy 1.x
        from numpy.core._multiarray_umath import __cpu_features__ as has
    found = [k for k in ("AVX512_SKX", "AVX2", "ASIMD", "SVE") if has.get(k)]
    if has.get("AVX512_SKX"):
        kernel = "x86-simd-sort, AVX-512"
    elif has.get("AVX2") and major >= 2:
        kernel = "x86-simd-sort, AVX2"
    elif (has.get("ASIMD") or has.get("SVE")) and major >= 2:
        kernel = "Highway VQSort"
    else:
        kernel = "scalar introsort"
    return f"NumPy {np.__version__}: {kernel} (CPU features {', '.join(found) or 'none of AVX2/AVX-512/ASIMD'})"


def make(dtype: str, n: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    if dtype == "float32":
        x = rng.random(n, dtype=np.float32) * np.float32(2000)
    else:
        x = rng.integers(0, 10**9, n, dtype=np.int64)
    return {"x": x, "pay": rng.random(n, dtype=np.float32)}


# ---- implementations: setup(data) -> a callable that computes the result ---------------------
def qc_impls(case: str):
    def sort(d):
        return qc.query(d["x"]).on(BACKEND).order_by().to_array

    def argsort(d):
        q = qc.query({"key": d["x"], "pay": d["pay"]}).on(BACKEND)
        return q.order_by(lambda r: r.key).select(lambda r: r.pay).to_array

    def top100(d):
        return qc.query(d["x"]).on(BACKEND).order_by().take(100).to_array

    def scan(d):
        return qc.query(d["x"]).on(BACKEND).scan(lambda a, v: a + v, 0).to_array

    def distinct(d):
        return qc.query(d["x"]).on(BACKEND).distinct().to_array
    return locals()[case]


def runtime_impls(case: str):
    from querycompute.backends.cpu.cpu_stages import CpuStages
    rt = CpuStages()

    def spec(x):
        return SortSpec((str(x.dtype),), (False,))

    def sort(d):
        x = d["x"]
        return lambda: rt.sort_values(spec(x), x, [])

    def argsort(d):
        x, pay = d["x"], d["pay"]
        return lambda: rt.gather([pay], rt.sort(spec(x), [x], None, []), [])[0]

    def top100(d):
        x = d["x"]
        return lambda: rt.gather([x], rt.sort(spec(x), [x], 100, []), [])[0]

    def scan(d):
        x = d["x"]
        t = str(x.dtype)
        s = ScanSpec(t, E.Binary("add", E.Var("acc", t), E.Var("item", t), t), E.Const(0, t), (),
                     "bench_cumsum")
        return lambda: rt.scan(s, x, (), [])

    def distinct(d):
        x = d["x"]

        def run():
            return x[rt.first_occurrence(spec(x), [x], [])]
        return run
    return locals()[case]


def peer_impls(case: str) -> dict:
    """name -> setup of the numpy / pandas / polars versions (the first is the reference)."""
    out = {}
    if case == "sort":
        out["np.sort"] = lambda d: (lambda: np.sort(d["x"]))
    elif case == "argsort":
        out["np.argsort+take"] = lambda d: (lambda: d["pay"][np.argsort(d["x"], kind="stable")])
    elif case == "top100":
        out["np.partition+sort"] = lambda d: (lambda: np.sort(np.partition(d["x"], min(99, len(d["x"]) - 1))[:100]))
    elif case == "scan":
        out["np.cumsum"] = lambda d: (lambda: np.cumsum(d["x"]))
    elif case == "distinct":
        import pandas as pd
        out["pd.unique"] = lambda d: (lambda: pd.unique(d["x"]))
    try:
        import polars as pl
    except ImportError:
        return out
    if case == "sort":
        out["polars"] = lambda d: (lambda s=pl.Series(d["x"]): s.sort().to_numpy())
    elif case == "distinct":
        out["polars"] = lambda d: (lambda s=pl.Series(d["x"]): s.unique(maintain_order=True).to_numpy())
    return out


def check(case: str, got, ref) -> tuple[bool, str]:
    got, ref = np.asarray(got), np.asarray(ref)
    if got.shape != ref.shape:
        return False, f"shape {got.shape} != {ref.shape}"
    if case == "scan" and ref.dtype.kind == "f":
        # both are float32 running sums in different groupings: compare with the float64 one
        return (bool(np.allclose(got, ref, rtol=1e-2)), "float32 running sums differ by > 1%")
    return bool(np.array_equal(got, ref)), "values differ"


def run_case(case, dtype, n, samples) -> list[dict]:
    d = make(dtype, n)
    impls = dict(peer_impls(case))
    ref_name = next(iter(impls))
    impls["qc"] = qc_impls(case)
    impls["runtime"] = runtime_impls(case)
    ref = impls[ref_name](d)()
    if case == "scan" and ref.dtype.kind == "f":
        ref = np.cumsum(d["x"], dtype=np.float64)
    rows, runs = [], {}
    for name, setup in impls.items():
        row = {"case": case, "dtype": dtype, "n": n, "impl": name}
        try:
            run = setup(d)
            got, first_ms = timing.first_call(run)
            ok, why = check(case, got, ref) if name != ref_name or case == "scan" else (True, "")
        except Exception as exc:   # an operator the public API lacks yet: reported, not timed
            ok, why, first_ms = False, f"{type(exc).__name__}: {exc}"[:200], None
        row.update(status="ok" if ok else "wrong", why="" if ok else why, first_ms=first_ms)
        if ok:
            runs[name] = run
        rows.append(row)
    times = timing.interleaved(runs, samples)
    base = times[ref_name].median_ms if ref_name in times else float("nan")
    for row in rows:
        t = times.get(row["impl"])
        if t is not None:
            row.update(median_ms=t.median_ms, min_ms=t.min_ms, samples=t.samples,
                       ratio=t.median_ms / base)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", default=None, help="comma-separated sizes (default 1e3,1e4,1e5,1e6,1e7)")
    ap.add_argument("--dtypes", default="float32,int64")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--repeat", type=int, default=5, help="warm samples per implementation")
    ap.add_argument("--quick", action="store_true", help="n = 1e3,1e5 and 3 samples")
    ap.add_argument("--out", default=str(HERE / "results"), help="directory for pipeline_ops.json")
    timing.busy_arg(ap)
    args = ap.parse_args(argv)
    if args.busy:
        timing.busy()
    sizes = ([int(float(s)) for s in args.n.split(",")] if args.n else
             [10**3, 10**5] if args.quick else [10**3, 10**4, 10**5, 10**6, 10**7])
    samples = 3 if args.quick and args.repeat == 5 else args.repeat
    cases = args.cases.split(",")
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        ap.error(f"unknown case(s) {unknown}; choose from {CASES}")
    results = []
    print(f"pipeline operators on {BACKEND}, {os.cpu_count()} cpus, 1-minute load average "
          f"{timing.load_average():.2f} (other load skews every figure)")
    print(f"np.sort here: {np_sort_kernel()}")
    print(f"{'case':9s} {'dtype':8s} {'n':>8s}  {'impl':18s} {'median ms':>10s} {'x ref':>7s}  status")
    for dtype in args.dtypes.split(","):
        for n in sizes:
            for case in cases:
                for row in run_case(case, dtype, n, samples):
                    results.append(row)
                    ms = f"{row['median_ms']:10.3f}" if "median_ms" in row else f"{'-':>10s}"
                    ratio = f"{row['ratio']:7.2f}" if "ratio" in row else f"{'-':>7s}"
                    print(f"{case:9s} {dtype:8s} {n:8.0e}  {row['impl']:18s} {ms} {ratio}  "
                          f"{row['status']} {row['why']}".rstrip(), flush=True)
    print(f"load average at the end: {timing.load_average():.2f}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report = {"benchmark": "pipeline_ops", "backend": BACKEND, "machine": platform.processor() or platform.machine(),
              "cpus": os.cpu_count(), "load_average": timing.load_average(), "np_sort": np_sort_kernel(),
              "time": time.strftime("%Y-%m-%d %H:%M:%S"), "references": REFERENCE, "results": results}
    (out / "pipeline_ops.json").write_text(json.dumps(report, indent=1))
    print(f"wrote {out / 'pipeline_ops.json'}")


if __name__ == "__main__":
    main()
