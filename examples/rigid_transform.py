"""Seed 001's rigid transform y = R @ x + T over shaped elements: R is (n, 3, 3) (mat3x3
elements), T and x are (n, 3) (vec3 elements). One fused kernel computes every y[i] in
registers; the result is checked against NumPy's einsum.

    python examples/rigid_transform.py [--n 1000000] [--backend cpu]
"""
import argparse
import time

import numpy as np

import querycompute as qc

parser = argparse.ArgumentParser()
parser.add_argument("--n", type=int, default=1_000_000)
parser.add_argument("--backend", default="cpu")
args = parser.parse_args()

rng = np.random.default_rng(0)
R = rng.standard_normal((args.n, 3, 3)).astype(np.float32)
T = rng.standard_normal((args.n, 3)).astype(np.float32)
x = rng.standard_normal((args.n, 3)).astype(np.float32)

q = qc.query(R, T, x).select(lambda R, T, x: R @ x + T).on(args.backend)
y = q.to_array()                       # first call compiles
t0 = time.perf_counter()
y = q.to_array()
t1 = time.perf_counter()
want = np.einsum("nij,nj->ni", R, x) + T
t2 = time.perf_counter()

print(f"shape: {y.shape} dtype: {y.dtype}")
print(f"max abs difference vs einsum: {np.abs(y - want).max():.3g}")
print(f"{args.backend}: {(t1 - t0) * 1e3:.1f} ms, numpy einsum: {(t2 - t1) * 1e3:.1f} ms")
print("mean of y over elements (qc.query(y).mean()):", qc.query(y).on(args.backend).mean())
