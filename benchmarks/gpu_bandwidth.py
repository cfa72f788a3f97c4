"""W1-W6 on a CUDA device against the device's own copy bandwidth (issue 18 item 9).

    python benchmarks/gpu_bandwidth.py                      # n = 1e6, 1e7, 1e8, 1e9
    python benchmarks/gpu_bandwidth.py --n 1e6,1e8 --workloads W1,W2 --repeat 21

Inputs live on the device (CuPy arrays), so no PCIe transfer is timed: each figure is what
the fused kernels of one query move through device memory. For each n:

- copy: a device-to-device copy of W1's input (`cupy.copyto`), which reads and writes every
  byte once: its bandwidth is 2 x bytes / time, the practical limit of a streaming kernel;
- Wk: querycompute's `.on("cuda")` query, first checked against the numpy backend on the same
  data (host copy), then timed; GB/s is the query's input bytes / time, and "% of copy" is that
  against the copy's bandwidth (a pass that only reads its input, at the memory limit, reaches
  100%: its reads use the bandwidth a copy splits between reads and writes).

Times are medians of `--repeat` calls, each followed by a device synchronize (results that stay
on the device, such as W2's array, are complete when timed). Sizes that do not fit in 80% of
the device's free memory are skipped and reported. Without CuPy or a CUDA device the script
says so and exits with status 2: it measures a GPU and has nothing to say without one.
"""
from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import workloads as W  # noqa: E402


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", default="1e6,1e7,1e8,1e9", help="sizes, comma-separated (default: %(default)s)")
    ap.add_argument("--workloads", default="W1,W2,W3,W4,W5,W6", help="default: %(default)s")
    ap.add_argument("--narrow", default="W1:float16,W4:float16,W4:int8",
                    help="workloads again over narrower element types, as KEY:DTYPE (issue 18's "
                         "narrow-type target; W1 over int8 is constant: v * 2 wraps into int8 and "
                         "never passes v > 1000, so the compiler drops the loads; default: %(default)s)")
    ap.add_argument("--repeat", type=int, default=11, help="timed calls per case (median; default %(default)s)")
    ap.add_argument("--json", default=None, help="also write the rows to this JSON file")
    args = ap.parse_args(argv)
    try:
        args.sizes = [int(float(s)) for s in args.n.split(",") if s.strip()]
    except ValueError:
        ap.error(f"--n takes numbers such as 1e6,1e8; got {args.n!r}")
    try:
        args.narrow_cases = [(k.strip().upper(), str(np.dtype(d.strip())))
                             for k, d in (c.split(":") for c in args.narrow.split(",") if c.strip())]
    except (ValueError, TypeError):
        ap.error(f"--narrow takes KEY:DTYPE pairs such as W1:float16,W4:int8; got {args.narrow!r}")
    if not args.sizes or min(args.sizes) < 1 or args.repeat < 1:
        ap.error("--n needs sizes >= 1 and --repeat at least 1")
    return args


def no_device(why: str):
    print(f"gpu_bandwidth.py needs an NVIDIA GPU with CuPy: {why}", file=sys.stderr)
    raise SystemExit(2)


def cuda_device():
    """(cupy, device name), or exit 2 with the reason."""
    try:
        import cupy as cp
        count = cp.cuda.runtime.getDeviceCount()
    except Exception as exc:          # no cupy, no driver, no device: all the same answer here
        no_device(f"{type(exc).__name__}: {exc}")
    if count < 1:
        no_device("no CUDA device")
    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
    return cp, props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])


def median_ms(cp, run, repeat: int) -> float:
    run()
    cp.cuda.Device().synchronize()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        run()
        cp.cuda.Device().synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
    return sorted(times)[len(times) // 2]


def narrow(x: np.ndarray, dtype: str) -> np.ndarray:
    """A workload's float32 input in [0, 2000) as a narrower element type: floats keep the
    values; integers map them onto the type's range (arithmetic then wraps, as NumPy's does:
    the check against the numpy backend still holds)."""
    if np.dtype(dtype).kind == "f":
        return x.astype(dtype)
    info = np.iinfo(dtype)
    return (x * np.float32((info.max - info.min) / 2000) + np.float32(info.min)).astype(dtype)


def measure(cp, label: str, wl, data: dict, n: int, copy_gbps: float, repeat: int) -> dict:
    """One workload's row: checked against the numpy backend, then timed on the device."""
    device_data = {name: cp.asarray(a) for name, a in data.items()}
    ref = wl.querycompute(data, "numpy")()
    run = wl.querycompute(device_data, "cuda")
    got = run()
    got = got.get() if hasattr(got, "get") else got
    ok, why = W.check(wl.kind, got, ref)
    row = {"n": n, "workload": label, "status": "ok" if ok else "wrong"}
    if not ok:
        print(f"  {label}: WRONG ({why}); not timed")
        return {**row, "reason": why}
    ms = median_ms(cp, run, repeat)
    gbps = W.input_bytes(data) / (ms * 1e-3) / 1e9
    row.update(median_ms=ms, gbps=gbps, pct_of_copy=100 * gbps / copy_gbps)
    print(f"  {label:<9} {wl.title:<48} {ms:9.4f} ms {gbps:8.1f} GB/s {row['pct_of_copy']:6.1f}% of copy")
    return row


def main(argv=None) -> int:
    args = parse_args(argv)
    cp, device = cuda_device()
    keys = [k.strip().upper() for k in args.workloads.split(",") if k.strip()]
    unknown = [k for k in keys if k not in W.WORKLOADS]
    if unknown:
        raise SystemExit(f"unknown workload(s) {unknown}; choose from {', '.join(W.WORKLOADS)}")
    print(f"device: {device}; CuPy {cp.__version__}; median of {args.repeat} calls")
    rows = []
    for n in args.sizes:
        host = {k: W.WORKLOADS[k].make(n, np.random.default_rng(n)) for k in keys}
        need = max(W.input_bytes(d) for d in host.values()) * 2
        free = cp.cuda.runtime.memGetInfo()[0]
        if need > 0.8 * free:
            print(f"n={n:.0e}: skipped ({need / 2**30:.1f} GiB needed, {free / 2**30:.1f} GiB free)")
            rows.append({"n": n, "status": "skipped", "reason": "device memory"})
            continue
        src = cp.asarray(host[keys[0]][next(iter(host[keys[0]]))])
        dst = cp.empty_like(src)
        copy_ms = median_ms(cp, functools.partial(cp.copyto, dst, src), args.repeat)
        copy_gbps = 2 * src.nbytes / (copy_ms * 1e-3) / 1e9
        del src, dst
        print(f"\nn={n:.0e}  copy {copy_ms:9.4f} ms  {copy_gbps:8.1f} GB/s (read + write)")
        rows.append({"n": n, "workload": "copy", "median_ms": copy_ms, "gbps": copy_gbps})
        cases = [(k, W.WORKLOADS[k], host[k]) for k in keys]
        for key, dt in args.narrow_cases:
            if key in keys:
                cases.append((f"{key}[{dt}]", W.WORKLOADS[key],
                              {name: narrow(a, dt) for name, a in host[key].items()}))
        for label, wl, data in cases:
            rows.append(measure(cp, label, wl, data, n, copy_gbps, args.repeat))
    if args.json:
        Path(args.json).write_text(json.dumps({"device": device, "repeat": args.repeat, "rows": rows}, indent=1))
        print(f"wrote {args.json}")
    return 1 if any(r.get("status") == "wrong" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
