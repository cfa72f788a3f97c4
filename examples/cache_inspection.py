"""Look into the compiled-kernel cache: where it is, what is in it, how it is used.

    python examples/cache_inspection.py          # a fresh temporary cache, filled here
    python examples/cache_inspection.py --mine   # your real cache, only looked at

The temporary run fills the cache the way the cpu backend does (a generated module that numba
compiles and caches beside itself), runs a query through qc.query, then lists the entries,
shows one with its source, and prunes. The same views exist on the command line:
`querycompute cache list|show KEY|stats|clear|prune --max-size 500MB`.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time


def fill_like_a_backend(disk_cache) -> None:
    """The backend protocol for a module entry, with a real numba compile."""
    from querycompute.cache import numba_identity
    source = ("import numba\n\n\n@numba.njit(cache=True)\n"
              "def scaled_sum(x, k):\n    total = 0.0\n"
              "    for v in x:\n        total += v * k\n    return total\n")
    compiler, device = numba_identity()
    key = disk_cache.make_key(backend="cpu", compiler=compiler, device=device, source=source)
    path = disk_cache.load_module(key)
    fresh = path is None
    if fresh:
        path = disk_cache.store_module(key, kernel_names=["scaled_sum"], dtypes=["float64"],
                                       query="scaled_sum(x, k)")
    module = disk_cache.import_module(path, key)
    t0 = time.perf_counter()
    module.scaled_sum(__import__("numpy").arange(10.0), 2.0)
    if fresh:
        disk_cache.seal_module(key, compile_ms=(time.perf_counter() - t0) * 1e3)
    print(f"kernel module {path.name}: {'compiled' if fresh else 'loaded from disk'}")


def run_a_query(qc) -> None:
    import numpy as np
    x = np.arange(1_000, dtype=np.float32)
    total = qc.query(x).select(lambda v: v * 2).where(lambda v: v > 1000).sum()
    print(f"query result {total}; trace:\n{qc.last_trace()}")


def show(qc) -> None:
    cache = qc.cache
    s = cache.stats()
    print(f"\ncache at {cache.path}: {s.entries} entries, {s.bytes} bytes "
          f"(this process: {s.disk_hits} disk hits, {s.misses} misses, {s.compiles} compiles, "
          f"{s.memory_hits} memory hits)")
    for e in cache.entries():
        print(f"  {e.key[:16]}  {e.backend:7} {', '.join(e.kernel_names):20} "
              f"{e.size_bytes:>8} B  hits={e.hit_count}  last used {e.last_used}")
    newest = cache.entries()[:1]
    if newest:
        e = newest[0]
        print(f"\nnewest entry {e.key}\n  compiler {e.compiler}\n  device   {e.device}\n"
              f"  query    {e.query or '-'}\n  source   {e.source_path}\n")
        print(e.source())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mine", action="store_true",
                        help="inspect your real cache instead of filling a temporary one")
    args = parser.parse_args()
    if args.mine:
        import querycompute as qc
        show(qc)
        return 0
    with tempfile.TemporaryDirectory(prefix="qc-cache-example-") as directory:
        # Set before the first use of the cache, which reads it.
        os.environ["QUERYCOMPUTE_CACHE_DIR"] = directory
        import querycompute as qc
        from querycompute.cache import disk_cache
        fill_like_a_backend(disk_cache)
        run_a_query(qc)
        show(qc)
        removed = qc.cache.prune(max_bytes=0)
        print(f"prune(max_bytes=0) removed {removed.entries} entries, {removed.bytes} bytes; "
              f"{qc.cache.stats().entries} left")
    return 0


if __name__ == "__main__":
    sys.exit(main())
