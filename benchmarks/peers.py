"""W1-W6 against peers: querycompute on every backend that runs here, numpy as a user writes
it, numexpr, polars, and hand-written numba prange loops (with and without fastmath).

    python benchmarks/peers.py                     # n = 1e3 1e5 1e6 1e7, 7 warm samples
    python benchmarks/peers.py --large             # adds n = 1e8 (needs ~2 GB of RAM)
    python benchmarks/peers.py --quick             # n = 1e3 1e5, 3 samples: a minute or so
    python benchmarks/peers.py --workloads W1,W4 --backends cpu --n 1e6 --repeat 11

Every result is checked against numpy's before anything is timed; a peer that disagrees is
reported as wrong with the reason, never timed. Everything runs in one process and the warm
samples of all implementations are taken round-robin, in a rotating order
(timing.interleaved), so ratios compare like with like. Writes results/peers.json, the same as
tables in results/peers.md and results/peers.csv (report.py) and results/peers.png (plot.py).
The ratio reported everywhere is the speed-up over NumPy: numpy ms / implementation ms.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DEFAULT_N = [10**3, 10**5, 10**6, 10**7]
PEER_MODULES = {"numexpr": "peer_numexpr", "polars": "peer_polars",
                "numba-lanes": "peer_numba_lanes", "numba-fastmath": "peer_numba_fastmath"}


def parse_args(argv=None):
    import timing
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", default=None, help="comma-separated sizes, e.g. 1e3,1e6 (default 1e3,1e5,1e6,1e7)")
    ap.add_argument("--large", action="store_true", help="also run n = 1e8")
    ap.add_argument("--workloads", default="W1,W2,W3,W4,W5,W6", help="comma-separated, e.g. W1,W4")
    ap.add_argument("--backends", default=None,
                    help="querycompute backends, comma-separated (default: cpu and opencl when they run here)")
    ap.add_argument("--peers", default=",".join(PEER_MODULES),
                    help=f"comma-separated subset of: {', '.join(PEER_MODULES)}")
    ap.add_argument("--repeat", type=int, default=7, help="warm samples per case; the median is reported")
    ap.add_argument("--quick", action="store_true", help="n = 1e3,1e5 and 3 samples (a smoke run)")
    ap.add_argument("--out", default=str(HERE / "results"), help="directory for peers.json, .md, .csv and .png")
    ap.add_argument("--no-plot", action="store_true", help="skip the PNG")
    timing.busy_arg(ap)
    args = ap.parse_args(argv)
    try:
        sizes = [int(float(s)) for s in args.n.split(",")] if args.n else (
            [10**3, 10**5] if args.quick else list(DEFAULT_N))
    except ValueError:
        ap.error(f"--n takes comma-separated sizes such as 1e3,1e6; got {args.n!r}")
    if args.large:
        sizes.append(10**8)
    if any(s < 1 for s in sizes):
        ap.error("--n sizes must be at least 1")
    args.sizes = sizes
    if args.quick and args.repeat == 7:
        args.repeat = 3
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")
    return args


def implementations(wl_keys, backends, peers):
    """(label, {workload key: setup}) for everything that will be compared."""
    import workloads as W
    impls = [("numpy", {k: W.WORKLOADS[k].numpy for k in wl_keys})]
    for b in backends:
        impls.append((f"qc-{b}", {k: (lambda d, _w=W.WORKLOADS[k], _b=b: _w.querycompute(d, _b))
                                  for k in wl_keys}))
    for p in peers:
        try:
            module = importlib.import_module(PEER_MODULES[p])
        except ImportError as exc:
            print(f"skipping {p}: {exc} (pip install 'querycompute[bench]')", file=sys.stderr)
            continue
        impls.append((p, module.SETUPS))
    return impls


def check_case(label, setup, wl, data, ref):
    """First call and check of one implementation on one input.
    Returns (JSON record, the warm callable or None when it must not be timed)."""
    import querycompute as qc
    import timing
    rec = {"impl": label}
    if setup is None:
        return {**rec, "status": "n/a"}, None
    try:
        run = setup(data)
        result, rec["first_ms"] = timing.first_call(run)
    except Exception as exc:       # a peer that cannot run this query is reported, not fatal
        return {**rec, "status": "error", "reason": f"{type(exc).__name__}: {exc}"[:300]}, None
    if label.startswith("qc-"):
        trace = qc.last_trace()
        rec["compile_ms"] = sum(k.compile_ms for k in trace.kernels)
        rec["cache"] = sorted({k.cache for k in trace.kernels})
        if trace.fallback or trace.backend != label[3:]:
            return {**rec, "status": "fallback", "reason": trace.fallback or trace.backend}, None
    ok, why = wl.check(result, ref)
    if not ok:
        return {**rec, "status": "wrong", "reason": why}, None
    if label.startswith("qc-") and emulated(label[3:]):
        return {**rec, "status": "checked", "reason": emulated(label[3:])}, None
    return {**rec, "status": "ok"}, run


class _Checked:
    """A workload's check bound to its result kind."""
    def __init__(self, wl):
        import workloads as W
        self.wl, self._check = wl, W.check

    def check(self, got, ref):
        return self._check(self.wl.kind, got, ref)


def run_all(args, backends, peers):
    import timing
    import workloads as W
    keys = [k.strip().upper() for k in args.workloads.split(",") if k.strip()]
    unknown = [k for k in keys if k not in W.WORKLOADS]
    if unknown:
        raise SystemExit(f"unknown workload(s) {unknown}; choose from {', '.join(W.WORKLOADS)}")
    impls = implementations(keys, backends, peers)
    records = []
    for key in keys:
        wl = W.WORKLOADS[key]
        for n in args.sizes:
            data = wl.make(n, np.random.default_rng(n))
            nbytes = W.input_bytes(data)
            ref = wl.numpy(data)()
            print(f"\n{key} {wl.title}  n={n:.0e}  input {nbytes / 1e6:.1f} MB  "
                  f"load {timing.load_average():.1f}", flush=True)
            checked = [check_case(label, setups.get(key), _Checked(wl), data, ref)
                       for label, setups in impls]
            timed = timing.interleaved({rec["impl"]: run for rec, run in checked if run is not None},
                                       args.repeat)
            base = timed["numpy"].median_ms
            for rec, _ in checked:
                rec.update(workload=key, n=n, input_bytes=nbytes)
                t = timed.get(rec["impl"])
                if t is not None:
                    rec.update(median_ms=t.median_ms, min_ms=t.min_ms, samples=t.samples,
                               calls_per_sample=t.calls_per_sample, speedup_vs_numpy=base / t.median_ms,
                               gbps=nbytes / (t.median_ms * 1e-3) / 1e9)
                print_row(rec, flush=True)
                records.append(rec)
            del data, checked, timed
    return records


def speedup_text(r) -> str:
    import report
    return "the baseline" if r["impl"] == "numpy" else report.speedup_text(r["speedup_vs_numpy"])


def print_row(r, flush=False):
    if r["status"] != "ok":
        print(f"  {r['impl']:<15} {r['status'].upper():>10}  {r.get('reason', '')}", flush=flush)
        return
    extra = f"  compile {r['compile_ms']:.0f} ms ({','.join(r['cache'])})" if "compile_ms" in r else ""
    print(f"  {r['impl']:<15} {r['median_ms']:10.4f} ms {speedup_text(r):>27} {r['gbps']:7.2f} GB/s"
          f"  first {r['first_ms']:9.1f} ms{extra}", flush=flush)


def summary(records):
    """Per workload at the largest n: querycompute's best backend against the fastest peer."""
    lines = ["\nsummary (largest n; querycompute against the fastest peer that computed the right result):"]
    for key in sorted({r["workload"] for r in records}):
        rows = [r for r in records if r["workload"] == key and r["status"] == "ok"]
        if not rows:
            continue
        n = max(r["n"] for r in rows)
        rows = [r for r in rows if r["n"] == n]
        ours = [r for r in rows if r["impl"].startswith("qc-")]
        theirs = [r for r in rows if not r["impl"].startswith("qc-")]
        if ours and theirs:
            for o in sorted(ours, key=lambda r: r["impl"]):
                p = min(theirs, key=lambda r: r["median_ms"])
                ratio = p["median_ms"] / o["median_ms"]
                lines.append(f"  {key} n={n:.0e}: {o['impl']} {o['median_ms']:.3f} ms vs fastest peer "
                             f"{p['impl']} {p['median_ms']:.3f} ms -> {o['impl']} is "
                             + (f"{ratio:.2f}x faster" if ratio >= 1 else f"{1 / ratio:.2f}x slower"))
    return "\n".join(lines)


def peer_versions(peers) -> dict:
    """The versions of the peer packages this run used (for the figure's and tables' footer)."""
    from importlib.metadata import PackageNotFoundError, version
    found = {}
    for p in dict.fromkeys(p.split("-")[0] for p in peers):
        try:
            found[p] = version(p)
        except PackageNotFoundError:
            pass
    return found


def cpu_model() -> str:
    """The CPU's model name (Linux: /proc/cpuinfo), else what platform knows."""
    try:
        for ln in Path("/proc/cpuinfo").read_text().splitlines():
            if ln.startswith("model name"):
                return ln.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def available_backends():
    import querycompute as qc
    found = qc.backends()
    return [b for b in ("cpu", "opencl", "cuda", "metal", "webgpu") if found.get(b, {}).get("available")]


def emulated(backend: str) -> str:
    """Why a backend's timings mean nothing here ("" when they do): webgpu on a CPU adapter
    (Mesa's lavapipe / llvmpipe) emulates a GPU in software, so it is a correctness row only."""
    if backend != "webgpu":
        return ""
    from querycompute.backends import registry
    if registry.get("webgpu").is_gpu:
        return ""
    return "a CPU adapter (lavapipe/llvmpipe: software emulation): checked, never timed"


def main(argv=None):
    args = parse_args(argv)
    sys.path.insert(0, str(HERE))
    if args.busy:
        import timing
        timing.busy()
    # A fresh kernel cache, so the compile times reported are real compiles, not disk hits.
    cache_dir = tempfile.TemporaryDirectory(prefix="qc-bench-cache-")
    os.environ["QUERYCOMPUTE_CACHE_DIR"] = cache_dir.name
    import numba
    import querycompute as qc
    import workloads as W
    backends = args.backends.split(",") if args.backends else available_backends()
    peers = [p.strip() for p in args.peers.split(",") if p.strip()]
    bad = [p for p in peers if p not in PEER_MODULES]
    if bad:
        raise SystemExit(f"unknown peer(s) {bad}; choose from {', '.join(PEER_MODULES)}")
    started = time.time()
    print(f"querycompute {qc.__version__}, numpy {np.__version__}, numba {numba.__version__} "
          f"({numba.config.NUMBA_NUM_THREADS} threads), {os.cpu_count()} cpus; backends {backends}")
    records = run_all(args, backends, peers)
    print(summary(records))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "seconds": round(time.time() - started, 1),
            "machine": cpu_model(), "cpus": os.cpu_count(), "threads": numba.config.NUMBA_NUM_THREADS,
            "python": platform.python_version(), "numpy": np.__version__, "numba": numba.__version__,
            "querycompute": qc.__version__, "backends": backends, "repeat": args.repeat,
            "load_average_end": os.getloadavg()[0],
            "workloads": {k: W.WORKLOADS[k].title for k in dict.fromkeys(r["workload"] for r in records)},
            "peer_versions": peer_versions(peers)}
    (out / "peers.json").write_text(json.dumps({"meta": meta, "results": records}, indent=1))
    print(f"\nwrote {out / 'peers.json'}")
    import report
    for path in report.write_tables(out / "peers.json"):
        print(f"wrote {path}")
    if not args.no_plot:
        import plot
        png = plot.plot_file(out / "peers.json", out / "peers.png")
        print(f"wrote {png}")
    cache_dir.cleanup()


if __name__ == "__main__":
    main()
