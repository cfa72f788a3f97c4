"""Issue 14 item 3: the device hash join (GpuStages.join, ops/join/gpu.py) on the OpenCL
device (pocl here) against the numpy reference (ops/join/reference.join_reference), medians of wall
and CPU ms. The keys are on the device before timing (as after a pass); the pairs are checked
against the reference first. Nothing is installed.

    python benchmarks/gpu_join.py --n 1e6 --build 1e5 --repeat 5
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

from querycompute.backends.gpu.gpu_stages import opencl_stages
from querycompute._codegen.ops.join.reference import join_reference


def medians(f, repeat: int) -> tuple[float, float]:
    wall, cpu = [], []
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        f()
        wall.append(time.perf_counter() - w)
        cpu.append(time.process_time() - c)
    return float(np.median(wall)) * 1e3, float(np.median(cpu)) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=float, default=1e6, help="probe (left) rows")
    ap.add_argument("--build", type=float, default=1e5, help="build (right) rows: distinct even keys")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    n, m, rng, stages = int(args.n), int(args.build), np.random.default_rng(1), opencl_stages()
    print(f"left {n} rows (keys in [0, {2 * m})), right {m} rows; load {os.getloadavg()[0]:.1f}")
    print("key | pairs | device wall / cpu ms | numpy reference wall / cpu ms")
    for dtype in ("int32", "int64"):
        left = [rng.integers(0, 2 * m, n).astype(dtype)]
        right = [(rng.permutation(m) * 2).astype(dtype)]
        dl, dr = stages.to_device(left), stages.to_device(right)
        li, ri = (np.asarray(x.get(), np.int64) for x in stages.join(dl, dr, False, []))
        want = join_reference(left, right, False)
        assert np.array_equal(li, want[0]) and np.array_equal(ri, want[1]), "pairs differ from the reference"
        dev = medians(lambda: stages.join(dl, dr, False, []), args.repeat)
        ref = medians(lambda: join_reference(left, right, False), args.repeat)
        print(f"{dtype} | {len(li)} | {dev[0]:.1f} / {dev[1]:.1f} | {ref[0]:.1f} / {ref[1]:.1f}")


if __name__ == "__main__":
    main()
