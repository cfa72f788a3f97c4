"""Running one query many times: build it once, change what it captures, read the trace.

    python examples/query_in_a_loop.py

The first run compiles; from the second run the Query repeats its terminal without looking
anything up (docs/guide.md, "Calling in a loop"). Captured values and array contents are
read on every call, so the loop below sees each new threshold and the in-place update.
"""
import time

import numpy as np

import querycompute as qc

prices = np.random.default_rng(1).random(1000, dtype=np.float32) * np.float32(2000)
floor = np.float32(0)
above = qc.query(prices).where(lambda p: p > floor)          # built once

for floor in (np.float32(500), np.float32(1000), np.float32(1500)):
    n = above.count()
    assert n == int(np.count_nonzero(prices > floor))         # the same answer as NumPy
    print(f"prices above {floor:6.1f}: {n}")

prices[:] = 1999                                              # read at the next call
assert above.count() == len(prices)

above.sum()                                                   # the first sum compiles
t0 = time.perf_counter()
for _ in range(10_000):
    above.sum()
per_call_us = (time.perf_counter() - t0) / 10_000 * 1e6
trace = qc.last_trace()                       # built now, from the last call's record
print(f"sum over {trace.n} prices: {per_call_us:.1f} us per call on {trace.backend}, "
      f"kernel {trace.kernels[0].name} from the {trace.kernels[0].cache} cache")
