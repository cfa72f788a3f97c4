"""Issue 14 item 2: the GPU group_by's two paths on the OpenCL device (pocl here):
GpuStages.group_by with the low-cardinality tables tried first (ops/group/table_gpu.py) and with
the sort path alone (ops/group/gpu.py), medians in ms. Nothing is installed.

    python benchmarks/gpu_group_tables.py --n 1e6 --repeat 3
"""
from __future__ import annotations

import argparse
import os
import time
from dataclasses import replace

import numpy as np

from querycompute._codegen.ir.stage_specs import GroupAgg, GroupSpec
from querycompute.backends.gpu.gpu_stages import opencl_stages


def median_ms(stages, spec, keys, vals, repeat: int) -> float:
    stages.group_by(spec, keys, vals, (), [])            # compile / warm
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        stages.group_by(spec, keys, vals, (), [])
        ts.append((time.perf_counter() - t) * 1e3)
    return float(np.median(ts))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=float, default=1e6)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    n, rng, stages = int(args.n), np.random.default_rng(0), opencl_stages()
    spec = GroupSpec(("int32",), (GroupAgg("sum", "float64"), GroupAgg("count", "int64")), (), "qc_gbench")
    print(f"n = {n}, int32 key, float64 sum + count; load {os.getloadavg()[0]:.1f}")
    print("groups | tables first (ms) | sort path (ms)")
    for groups in (4, 256, 4000):
        keys, vals = [rng.integers(0, groups, n).astype(np.int32)], [rng.random(n), None]
        got = []
        for tables in (True, False):
            stages.caps = replace(stages.caps, group_tables=tables)
            got.append(median_ms(stages, spec, keys, vals, args.repeat))
        print(f"{groups} | {got[0]:.1f} | {got[1]:.1f}")


if __name__ == "__main__":
    main()
