"""One query through the public API in a fresh process, for the backend cache tests.

    python tests/cache_query_script.py BACKEND N [strided]

runs W1 (select v*2, where v > 1000, sum) on N float32 values (every other one of 2N with
`strided`) with `.on(BACKEND)` and prints
one JSON line: the result and NumPy's, each kernel's trace row (name, cache origin), every
CacheWarning's message and the cache counters. The lambdas live in this file because
querycompute reads them from source.
"""
from __future__ import annotations

import json
import sys
import warnings


def main() -> None:
    backend, n = sys.argv[1], int(sys.argv[2])
    import numpy as np
    import querycompute as qc
    x = np.random.default_rng(7).random(n, dtype=np.float32) * 2000
    if sys.argv[3:] == ["strided"]:
        x = np.repeat(x, 2)[::2]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = qc.query(x).select(lambda v: v * 2).where(lambda v: v > 1000).on(backend).sum()
    trace = qc.last_trace()
    doubled = x * np.float32(2)
    print(json.dumps({
        "result": float(got), "numpy": float(doubled[doubled > 1000].sum(dtype=np.float32)),
        "backend": trace.backend,
        "kernels": [{"name": k.name, "cache": k.cache, "compile_ms": k.compile_ms}
                    for k in trace.kernels],
        "warnings": [str(w.message) for w in caught if w.category.__name__ == "CacheWarning"],
        "stats": qc.cache.stats().as_dict()}))


if __name__ == "__main__":
    main()
