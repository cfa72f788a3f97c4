"""A compiled query: the plan and kernels of one terminal, made explicit, used from threads.

    python examples/compiled_query.py

The first call is answered by the numpy tier while the cpu kernel compiles in the background
(tiered execution); `cq.wait()` blocks until the kernel is there, after which it answers.
Array contents and captured values are read on every call; nothing recompiles for them.
"""
import os
import threading

import numpy as np

import querycompute as qc

os.environ.setdefault("QUERYCOMPUTE_TIERED", "1")      # the default; shown for clarity

prices = np.random.default_rng(1).random(100_000, dtype=np.float32) * 100
limit = 50.0
cq = qc.query(prices).on("cpu").where(lambda p: p > limit).compile("sum")

first = cq()
print(f"first call: {first:.2f} answered by the {cq.trace.tier} tier on {cq.backend}")
cq.wait()
print(f"after wait: {cq():.2f} answered by the {cq.trace.tier} tier "
      f"({cq.trace.kernels[0].dialect} kernel {cq.trace.kernels[0].name})")

limit = 90.0                          # a new captured value: read on the next call
prices[:10] = 0.0                     # new contents: read on the next call
got, ref = cq(), prices[prices > 90].sum()
print(f"limit 90, first ten zeroed: {got:.1f} (NumPy: {ref:.1f}; float32 sums agree to "
      f"{abs(got - ref) / ref:.0e})")

results = {}


def worker(k):
    results[k] = (cq(), cq.trace.n)  # each thread sees its own trace


threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(f"4 threads agree: {len({r for r, _ in results.values()}) == 1}")
print("generated source (first lines):")
print("\n".join(cq.source().splitlines()[:6]))
