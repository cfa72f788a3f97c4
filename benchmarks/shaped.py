"""Issue 16's shaped-element workloads on the cpu backend against NumPy and hand-written numba.

Workloads (float32, --total values in all; default 1e7): X.sum(axis=0) = qc.query(X).sum(),
X.sum(axis=1) = select(lambda r: r.sum()), row logsumexp, in the shapes (total/10, 10),
(total/1000, 1000), (10, total/10); and seed 001's rigid transform R @ x + T over total/10
elements. Every result is checked against NumPy before it is timed. Prints ms, the ratio to
NumPy (ours / numpy: < 1 is faster) and GB/s of input read; `--json PATH` writes them.

    python benchmarks/shaped.py [--total 1e7] [--samples 5] [--busy] [--json results/shaped.json]

`--busy` runs one CPU-burning process beside it (timing.busy: "with one core busy").
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import timing  # noqa: E402

import querycompute as qc  # noqa: E402


def lse(r):
    return r.max() + np.log(np.exp(r - r.max()).sum())


def np_lse(X):
    m = X.max(axis=1)
    return m + np.log(np.exp(X - m[:, None]).sum(axis=1))


def numba_peers():
    from numba import njit, prange

    @njit(parallel=True, fastmath=False)
    def rowsum(X):
        out = np.empty(X.shape[0], np.float32)
        for i in prange(X.shape[0]):
            a = 0.0
            for j in range(X.shape[1]):
                a += X[i, j]
            out[i] = a
        return out

    @njit(parallel=True, fastmath=False)
    def colsum(X):
        chunks = 64
        part = np.zeros((chunks, X.shape[1]), np.float64)
        step = (X.shape[0] + chunks - 1) // chunks
        for c in prange(chunks):
            for i in range(c * step, min(X.shape[0], (c + 1) * step)):
                for j in range(X.shape[1]):
                    part[c, j] += X[i, j]
        return part.sum(axis=0).astype(np.float32)

    @njit(parallel=True, fastmath=False)
    def rowlse(X):
        out = np.empty(X.shape[0], np.float32)
        for i in prange(X.shape[0]):
            m = X[i, 0]
            for j in range(X.shape[1]):
                m = max(m, X[i, j])
            s = 0.0
            for j in range(X.shape[1]):
                s += np.exp(X[i, j] - m)
            out[i] = m + np.log(np.float32(s))
        return out

    @njit(parallel=True, fastmath=False)
    def rigid(R, T, x):
        y = np.empty_like(T)
        for i in prange(R.shape[0]):
            for a in range(3):
                y[i, a] = R[i, a, 0] * x[i, 0] + R[i, a, 1] * x[i, 1] + R[i, a, 2] * x[i, 2] + T[i, a]
        return y
    return {"rowsum": rowsum, "colsum": colsum, "rowlse": rowlse, "rigid": rigid}


def workloads(total: int):
    rng = np.random.default_rng(0)
    out = []
    for m, k in ((total // 10, 10), (total // 1000, 1000), (10, total // 10)):
        X = rng.random((m, k), dtype=np.float32)
        q = qc.query(X).on("cpu")
        out.append((f"X.sum(axis=0) {X.shape}", X.nbytes, lambda X=X: X.sum(axis=0), q.sum, "colsum", (X,)))
        sel = q.select(lambda r: r.sum())
        out.append((f"X.sum(axis=1) {X.shape}", X.nbytes, lambda X=X: X.sum(axis=1), sel.to_array, "rowsum", (X,)))
        lq = q.select(lse)
        out.append((f"logsumexp rows {X.shape}", X.nbytes, lambda X=X: np_lse(X), lq.to_array, "rowlse", (X,)))
    n = total // 10
    R = rng.standard_normal((n, 3, 3)).astype(np.float32)
    T = rng.standard_normal((n, 3)).astype(np.float32)
    x = rng.standard_normal((n, 3)).astype(np.float32)
    rq = qc.query(R, T, x).select(lambda R, T, x: R @ x + T).on("cpu")
    out.append((f"rigid R @ x + T (n={n})", R.nbytes + T.nbytes + x.nbytes,
                lambda: np.einsum("nij,nj->ni", R, x) + T, rq.to_array, "rigid", (R, T, x)))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--total", type=float, default=1e7)
    ap.add_argument("--samples", type=int, default=5)
    ap.add_argument("--json", default="")
    timing.busy_arg(ap)
    args = ap.parse_args()
    if args.busy:
        timing.busy()
    peers = numba_peers()
    rows = []
    print(f"load average {timing.load_average():.2f}, {os.cpu_count()} cpus")
    print(f"{'workload':<34} {'numpy ms':>9} {'qc cpu ms':>10} {'qc/np':>6} {'numba ms':>9} {'qc GB/s':>8}")
    for name, nbytes, np_run, qc_run, peer, peer_args in workloads(int(args.total)):
        want = np_run()
        got, first_ms = timing.first_call(qc_run)
        nb = peers[peer]
        peer_got = nb(*peer_args)
        for who, value in (("qc", got), ("numba", peer_got)):
            np.testing.assert_allclose(value, want, rtol=2e-4, atol=1e-3, err_msg=f"{who}: {name}")
        t = timing.interleaved({"numpy": np_run, "qc": qc_run, "numba": lambda: nb(*peer_args)}, args.samples)
        ratio = t["qc"].median_ms / t["numpy"].median_ms
        gbs = nbytes / t["qc"].median_ms / 1e6
        print(f"{name:<34} {t['numpy'].median_ms:9.2f} {t['qc'].median_ms:10.2f} {ratio:6.2f} "
              f"{t['numba'].median_ms:9.2f} {gbs:8.1f}")
        rows.append({"workload": name, "numpy_ms": t["numpy"].median_ms, "qc_cpu_ms": t["qc"].median_ms,
                     "numba_ms": t["numba"].median_ms, "qc_over_numpy": ratio, "qc_gb_s": gbs,
                     "first_call_ms": first_ms})
    if args.json:
        os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
        with open(args.json, "w") as fh:
            json.dump({"load_average": timing.load_average(), "results": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
