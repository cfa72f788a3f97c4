"""qc on Dask against dask.array's own expression of the same query, on 1 and 2 workers
(issue 19; DESIGN.md section 5c). The inputs are float32 / int32 memmaps on disk (out of
core: each task reads its own chunk from the file), n elements, `--chunk` per task.

    python benchmarks/dask_scaling.py --n 1e8 --chunk 1e7 --repeat 3

Per workload and worker count: median seconds of the whole computation (graph, scheduling,
reading the file, the kernels, the combine) and GB/s of input read; every qc result is
checked against the dask.array result before it is reported. The lambdas live in this file
because querycompute reads them from source.
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import numpy as np

os.environ.setdefault("QUERYCOMPUTE_TIERED", "0")

import dask.array as da  # noqa: E402
from distributed import Client, LocalCluster  # noqa: E402

import querycompute as qc  # noqa: E402
from querycompute.dask.source import from_memmap  # noqa: E402  (the same file reads for dask.array)


def make_files(n: int, folder: str) -> dict:
    rng = np.random.default_rng(0)
    out = {}
    for name, dtype, fill in (("v", np.float32, lambda m: rng.random(m, dtype=np.float32) * np.float32(2000)),
                              ("qty", np.int32, lambda m: rng.integers(0, 10, m, dtype=np.int32)),
                              ("cat", np.int32, lambda m: rng.integers(0, 8, m, dtype=np.int32))):
        mm = np.memmap(os.path.join(folder, name), dtype=dtype, mode="w+", shape=(n,))
        for lo in range(0, n, 1 << 24):                  # written in pieces: bounded memory
            hi = min(n, lo + (1 << 24))
            mm[lo:hi] = fill(hi - lo)
        mm.flush()
        out[name] = np.memmap(os.path.join(folder, name), dtype=dtype, mode="r")
    return out


def workloads(files: dict, chunk: int) -> dict:
    v, qty, cat = files["v"], files["qty"], files["cat"]
    dv = lambda: from_memmap(v, chunk)                                    # noqa: E731

    def qc_w1():
        return qc.query(v, chunks=chunk).select(lambda e: e * 2).where(lambda e: e > 1000) \
            .select(lambda e: e + 100).sum()

    def dask_w1():
        y = dv() * 2
        return da.where(y > 1000, y + 100, np.float32(0)).sum().compute()

    def qc_w5():
        r = qc.query(v, chunks=chunk).where(lambda e: e > 10).select(lambda e: np.sqrt(e) + 1) \
            .agg(m=qc.mean, mx=qc.max)
        return (r["m"], r["mx"])

    def dask_w5():
        x = dv()
        keep, s = x > 10, da.sqrt(x) + 1
        return da.compute(da.where(keep, s, 0).sum() / keep.sum(), da.where(keep, s, -np.inf).max())

    def qc_w6():
        return qc.query(price=v, qty=qty, cat=cat, chunks=chunk) \
            .where(lambda r: r.cat == 3 and r.qty > 2).sum(lambda r: r.price * r.qty)

    def dask_w6():
        p, q, c = dv(), from_memmap(qty, chunk), from_memmap(cat, chunk)
        return da.where((c == 3) & (q > 2), p * q, 0).sum().compute()

    return {"W1": (qc_w1, dask_w1, 4), "W5": (qc_w5, dask_w5, 4), "W6": (qc_w6, dask_w6, 12)}


def timed(run, repeat: int):
    result = run()                                       # warm-up: compiles, fills caches
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return result, statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=float, default=1e8)
    ap.add_argument("--chunk", type=float, default=1e7)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workers", default="1,2")
    args = ap.parse_args()
    n, chunk = int(args.n), int(args.chunk)
    with tempfile.TemporaryDirectory(prefix="qc-dask-bench-") as folder:
        files = make_files(n, folder)
        runs = workloads(files, chunk)
        print(f"n = {n:.0e}, chunk = {chunk:.0e}, load average {os.getloadavg()[0]:.1f}")
        print(f"{'workload':8} {'workers':>7} {'qc s':>8} {'dask s':>8} {'qc GB/s':>8} {'qc/dask':>8}")
        for w in (int(x) for x in args.workers.split(",")):
            with LocalCluster(n_workers=w, processes=True, threads_per_worker=1,
                              dashboard_address=None) as cluster, Client(cluster):
                for key, (ours, theirs, bytes_per) in runs.items():
                    got, t_qc = timed(ours, args.repeat)
                    want, t_dask = timed(theirs, args.repeat)
                    np.testing.assert_allclose(np.asarray(got, dtype=np.float64),
                                               np.asarray(want, dtype=np.float64), rtol=1e-3)
                    gbs = n * bytes_per / t_qc / 1e9
                    print(f"{key:8} {w:>7} {t_qc:8.3f} {t_dask:8.3f} {gbs:8.2f} {t_qc / t_dask:8.2f}",
                          flush=True)


if __name__ == "__main__":
    main()
