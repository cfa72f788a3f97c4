"""Quick start: a fused query chain, several aggregates in one pass, and what ran."""
import numpy as np

import querycompute as qc

x = np.random.default_rng(0).random(1_000_000, dtype=np.float32) * 2000

q = qc.query(x).select(lambda v: v * 2).where(lambda v: v > 1000).select(lambda v: v + 100)
total = q.sum()
print("W1 sum:", total, "numpy:", ((x * 2)[(x * 2) > 1000] + 100).sum())
print(qc.last_trace())

stats = qc.query(x).agg(n=qc.count, peak=qc.max, avg=qc.mean, sq=qc.sum(lambda v: v * v))
print("one pass:", stats)

limit = 500.0                       # captured scalars become kernel parameters
small = qc.query(x).where(lambda v: v < limit)
print("below 500:", small.count())
limit = 100.0                       # a new value is used at once, without recompiling
print("below 100:", small.count(), "cache:", qc.last_trace().kernels[0].cache)

print(small.first(), small.to_array()[:5])
print(q.explain(terminal="sum"))
