"""Look into the compiled-kernel cache: where it is, what is in it, how it is used.

    python examples/cache_inspection.py          # a fresh temporary cache, filled here
    python examples/cache_inspection.py --mine   # your real cache, only looked at

The temporary run compiles one query on every backend that runs here (cpu, and opencl when
PyOpenCL finds a device), runs it again (a memory hit), then starts a second Python process
that finds the kernels on disk instead of compiling them. Then it lists the entries, shows
one with its source, and prunes. The same views exist on the command line:
`querycompute cache list|show KEY|stats|clear|prune --max-size 500MB`.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile


def run_query(qc, backend: str):
    """The query every step runs (its lambdas live in this file: querycompute reads them)."""
    import numpy as np
    x = np.arange(100_000, dtype=np.float32)
    total = qc.query(x).select(lambda v: v * 2).where(lambda v: v > 1000).on(backend).sum()
    origins = ", ".join(f"{k.name}: {k.cache}" for k in qc.last_trace().kernels)
    print(f"  {backend:7} sum = {total}   kernels from -> {origins}")


def runnable_backends(qc) -> list[str]:
    found = qc.backends()
    return [b for b in ("cpu", "opencl") if found[b]["available"]]


def show(qc) -> None:
    cache = qc.cache
    s = cache.stats()
    print(f"\ncache at {cache.path}: {s.entries} entries, {s.bytes} bytes "
          f"(this process: {s.disk_hits} disk hits, {s.misses} misses, {s.compiles} compiles, "
          f"{s.memory_hits} memory hits)")
    for e in cache.entries():
        print(f"  {e.key[:16]}  {e.backend:7} {', '.join(e.kernel_names)[:40]:40} "
              f"{e.size_bytes:>8} B  hits={e.hit_count}  compile {e.compile_ms:.0f} ms")
    newest = cache.entries()[:1]
    if newest:
        e = newest[0]
        print(f"\nnewest entry {e.key}\n  compiler {e.compiler}\n  device   {e.device}\n"
              f"  source   {e.source_path}\n")
        print("\n".join(e.source().splitlines()[:25]) + "\n  ...")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mine", action="store_true",
                        help="inspect your real cache instead of filling a temporary one")
    parser.add_argument("--second-process", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.mine:
        import querycompute as qc
        show(qc)
        return 0
    if args.second_process:          # started below, on the same cache directory
        import querycompute as qc
        for backend in runnable_backends(qc):
            run_query(qc, backend)
        return 0
    with tempfile.TemporaryDirectory(prefix="qc-cache-example-") as directory:
        # Set before the first use of the cache, which reads it.
        os.environ["QUERYCOMPUTE_CACHE_DIR"] = directory
        # Compile before answering (here and in the second process, which inherits it): with
        # tiered execution, the default, the numpy tier would answer these few calls while the
        # kernels compile in the background, and the origins shown would be "interpreted".
        os.environ["QUERYCOMPUTE_TIERED"] = "0"
        import querycompute as qc
        backends = runnable_backends(qc)
        print("first call in this process (compiles, stores on disk):")
        for backend in backends:
            run_query(qc, backend)
        print("same query again (the query layer's memory):")
        for backend in backends:
            run_query(qc, backend)
        print("a new process, same cache directory (loads from disk, no compile):")
        sys.stdout.flush()
        subprocess.run([sys.executable, __file__, "--second-process"], check=True)
        show(qc)
        removed = qc.cache.prune(max_bytes=0)
        print(f"\nprune(max_bytes=0) removed {removed.entries} entries, {removed.bytes} bytes; "
              f"{qc.cache.stats().entries} left")
    return 0


if __name__ == "__main__":
    sys.exit(main())
