"""group_by on the cpu backend (issue 14) against np.bincount, pandas and polars.

    python benchmarks/group_by.py                   # n = 6e6: 4 groups, 1 key and 2 keys; n unique
    python benchmarks/group_by.py --quick           # n = 1e5; 3 samples
    python benchmarks/group_by.py --n 6e6 --cases low4 --samples 9

Cases (every one computes per group: sum of v, count, mean of v = sum / count):
    low4      key: int8 codes 0..3 (TPC-H Q1 has 4 groups), v: float64 standard normal
    low4x2    two int8 keys (2 x 2 codes, as Q1's returnflag/linestatus), the same v
    unique    key: a permutation of 0..n-1 (int64): every row its own group
Implementations:
    runtime   CpuStages.group_by alone (backends/cpu_group.py), the key and v as given
    qc        the public API: qc.query(k=..., v=...).group_by(...).agg(s=sum, n=count, m=mean)
    bincount  np.bincount(k, weights=v) and np.bincount(k) (low4 only: it needs codes 0..G-1;
              low4x2 packs the two codes into one first)
    pandas    DataFrame.groupby(keys, sort=True)["v"].agg(["sum", "count", "mean"])
    polars    DataFrame.group_by(keys).agg(sum, len, mean).sort(keys)
Every result is checked against numpy (sums within 1e-9 relative) before it is timed;
samples are taken round-robin (timing.interleaved). Writes benchmarks/results/group_by.json.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ.setdefault("QUERYCOMPUTE_TIERED", "0")        # time kernels, never the numpy tier

import querycompute as qc  # noqa: E402
import timing  # noqa: E402
from querycompute._codegen.ir.stage_specs import GroupAgg, GroupSpec  # noqa: E402
from querycompute.backends.cpu.cpu_stages import CpuStages  # noqa: E402

CASES = ("low4", "low4x2", "unique")


def make(case: str, n: int, seed: int = 0) -> tuple[list, np.ndarray]:
    rng = np.random.default_rng(seed)
    v = rng.standard_normal(n)
    if case == "low4":
        return [rng.integers(0, 4, n).astype(np.int8)], v
    if case == "low4x2":
        return [rng.integers(0, 2, n).astype(np.int8), rng.integers(0, 2, n).astype(np.int8)], v
    return [rng.permutation(n).astype(np.int64)], v


def expected(keys, v) -> tuple:
    """(sum, count) per group in ascending key order, by numpy (np.unique + bincount)."""
    _, inv = np.unique(np.stack(keys, axis=1), axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    return np.bincount(inv, weights=v), np.bincount(inv)


def implementations(case: str, keys: list, v: np.ndarray) -> dict:
    import pandas as pd
    import polars as pl
    stages = CpuStages()
    spec = GroupSpec(tuple(str(k.dtype) for k in keys), (GroupAgg("sum", "float64"), GroupAgg("count", "int64")))

    def runtime():
        _, (s, c), _ = stages.group_by(spec, keys, [v, None], [], [])
        return s, c, s / c

    cols = {f"k{j}": k for j, k in enumerate(keys)}
    names = list(cols)
    q = qc.query(v=v, **cols)
    key = (lambda r: r.k0) if len(keys) == 1 else (lambda r: (r.k0, r.k1))

    def api():
        out = q.group_by(key).agg(s=qc.sum(lambda r: r.v), n=qc.count, m=qc.mean(lambda r: r.v))
        return out["s"], out["n"], out["m"]

    df = pd.DataFrame({**cols, "v": v})

    def pandas():
        out = df.groupby(names, sort=True)["v"].agg(["sum", "count", "mean"])
        return out["sum"].to_numpy(), out["count"].to_numpy(), out["mean"].to_numpy()

    pf = pl.DataFrame({**cols, "v": v})

    def polars():
        out = pf.group_by(names).agg(pl.col("v").sum().alias("s"), pl.len().alias("n"),
                                     pl.col("v").mean().alias("m")).sort(names)
        return out["s"].to_numpy(), out["n"].to_numpy(), out["m"].to_numpy()

    runs = {"runtime": runtime, "qc": api, "pandas": pandas, "polars": polars}
    if case != "unique":
        code = keys[0].astype(np.intp) if len(keys) == 1 else keys[0].astype(np.intp) * 2 + keys[1]

        def bincount():
            s, c = np.bincount(code, weights=v), np.bincount(code)
            return s, c, s / c
        runs = {"bincount": bincount, **runs}
    return runs


def check(name: str, got, want) -> None:
    s, c = want
    gs, gc, gm = (np.asarray(x) for x in got)
    ok = (np.array_equal(gc, c) and np.allclose(gs, s, rtol=1e-9, atol=1e-9 * np.abs(s).max())
          and np.allclose(gm, s / c, rtol=1e-9, atol=1e-9))
    if not ok:
        raise AssertionError(f"{name}: wrong result")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=float, default=6e6)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--samples", type=int, default=7)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    n = int(1e5 if args.quick else args.n)
    samples = 3 if args.quick else args.samples
    print(f"n = {n:,}, load average {timing.load_average():.1f}, {os.cpu_count()} cpus, {platform.processor()}")
    results = []
    for case in args.cases.split(","):
        keys, v = make(case, n)
        want = expected(keys, v)
        runs = implementations(case, keys, v)
        for name, run in runs.items():
            got, first_ms = timing.first_call(run)
            check(name, got, want)
            results.append({"case": case, "impl": name, "first_ms": first_ms})
        t = timing.interleaved(runs, samples)
        ref = t["pandas"].median_ms
        for name in runs:
            row = next(r for r in results if r["case"] == case and r["impl"] == name)
            row.update(median_ms=t[name].median_ms, min_ms=t[name].min_ms)
            print(f"{case:8s} {name:9s} {t[name].median_ms:9.2f} ms  ({t[name].median_ms / ref:5.2f}x pandas)")
    out = HERE / "results" / "group_by.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"n": n, "results": results}, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
