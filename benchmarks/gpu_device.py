"""One prepared run on one GPU (issue 30 item 3): every benchmark case, checked, against its peers.

    python benchmarks/gpu_device.py --out /tmp/gpu                 # cuda, under 8 minutes on an H100/H200
    python benchmarks/gpu_device.py --out /tmp/gpu --tests         # ... and the cuda tests after the cases
    python benchmarks/gpu_device.py --backend cpu --small --out /tmp/s --cases W1,sort,group8
    python benchmarks/gpu_device.py --list                         # the cases

Cases (CASES below; `--cases` selects by name): a device-to-device copy first (its bandwidth,
2 x bytes / time as gpu_bandwidth.py measures it, is what "% of copy" compares with); W1 hot at
n = 1e3 against CuPy's `x.sum()`; W1-W6 at n = 1e8 (W2 also at 1e9), W4 over float16 and int8;
`order_by()`, `order_by(key)` with a payload, top-100, `scan` (float32 and int32), `distinct`;
`group_by` with 8 and with 1e6 groups; a join of 1e7 x 1e6 rows; TPC-H Q1, Q6 and Q12 at SF 1.
Every case goes through the public API (`qc.query(...)....on(backend)`), as a user writes it.
On cuda each case runs twice, from host NumPy arrays ("host") and from CuPy device arrays
("device"; only where CuPy runs).

Each result is first compared with the numpy backend's over the same (host) data: arrays and
counts exactly, float sums within workloads.RTOL, float group sums and TPC-H floats within a
relative 1e-9, float32 running sums within 1e-3 of the float64 ones. A case that disagrees is
reported loudly, marked failed and not timed. Then: the median of `--repeat` warm calls (each
call followed by a device synchronize; small calls repeated until a sample lasts 2 ms), GB/s
over the bytes of the inputs the query reads, % of the copy's bandwidth, and each peer's median
on the same data, device-resident, with the ratio qc / peer:
- cuda: torch (sort, topk, cumsum, unique, index_add_/bincount, searchsorted) and CuPy (the same
  with cupy's functions, the W workloads as NumPy code over CuPy arrays, TPC-H as array code);
- other backends: torch on the CPU and NumPy ("numpy.*"), so the script runs end to end here.
A peer that is not installed, or cannot reach the device, is reported as absent with the reason;
a peer that raises is reported as an error: no figure is ever made up.

A time budget (`--budget-s`, default 420 s) bounds the run: once it is spent each remaining case
is skipped with a note, so the script always finishes and writes its outputs. results.json is
rewritten after every case (a killed run still leaves what it measured); results.md holds the
table. `--tests` then runs `pytest -m gpu` and the shared backend suites (the test files whose
backend lists include cuda when a device is present) with the backend's tests selected, under
a timeout (`--tests-timeout-s`, taken out of the budget), recording pass/fail counts.
TPC-H data comes from tpch_data (tpchgen-cli, or `--tpch-data DIR` holding the parquet files);
without it the TPC-H cases say so and are skipped.

Exit status: 0 when every case that ran matched and the tests (if run) passed, 1 otherwise.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
import traceback
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
os.environ.setdefault("QUERYCOMPUTE_TIERED", "0")        # time kernels, never the numpy tier

import querycompute as qc  # noqa: E402
import workloads as W  # noqa: E402


# ---- the devices: sync, transfers, peers ---------------------------------------------------
class Env:
    """What this run can use: the backend, CuPy (cuda only), torch, and how to synchronize."""

    def __init__(self, backend: str):
        self.backend = backend
        self.cuda = backend == "cuda"
        self.cp, self.cupy_why = None, "not used off cuda (numpy is the array peer)"
        self.torch, self.torch_why, self.tdev = None, "", "cpu"
        self.device = platform.processor() or platform.machine()
        if self.cuda:
            try:
                import cupy as cp
                if cp.cuda.runtime.getDeviceCount() < 1:
                    raise RuntimeError("no CUDA device")
                cp.zeros(1).sum()                       # a kernel runs: the device is usable
                self.cp, self.cupy_why = cp, ""
                props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
                name = props["name"]
                self.device = name.decode() if isinstance(name, bytes) else str(name)
            except Exception as exc:
                self.cupy_why = f"{type(exc).__name__}: {exc}"[:200]
        try:
            import torch
            if self.cuda and not torch.cuda.is_available():
                self.torch_why = "torch is installed but sees no CUDA device"
            else:
                self.torch, self.tdev = torch, ("cuda" if self.cuda else "cpu")
        except Exception as exc:
            self.torch_why = f"torch is not installed ({type(exc).__name__}: {exc})"[:200]

    def sync(self) -> None:
        if self.cp is not None:
            self.cp.cuda.runtime.deviceSynchronize()
        elif self.torch is not None and self.tdev == "cuda":
            self.torch.cuda.synchronize()

    def sources(self) -> list[str]:
        return ["host", "device"] if self.cp is not None else ["host"]

    def xp(self):
        """The array library a peer's code runs in: CuPy on cuda, NumPy elsewhere."""
        return self.cp if self.cuda else np

    def xp_name(self) -> str:
        return "cupy" if self.cuda else "numpy"

    def xp_why(self) -> str:
        return self.cupy_why if self.cuda and self.cp is None else ""

    def to_device(self, data: dict) -> dict:
        return {k: self.cp.asarray(v) for k, v in data.items()}

    def to_xp(self, data: dict) -> dict:
        return self.to_device(data) if self.cuda else data

    def to_torch(self, data: dict) -> dict:
        t = self.torch
        return {k: t.as_tensor(v, device=self.tdev) for k, v in data.items()}

    def free(self) -> None:
        if self.cp is not None:
            self.cp.get_default_memory_pool().free_all_blocks()
        if self.torch is not None and self.tdev == "cuda":
            self.torch.cuda.empty_cache()

    def free_bytes(self) -> int | None:
        return int(self.cp.cuda.runtime.memGetInfo()[0]) if self.cp is not None else None


def host(x):
    """A result on the host: CuPy arrays (and tuples / dicts of them) copied back."""
    if isinstance(x, dict):
        return {k: host(v) for k, v in x.items()}
    if isinstance(x, tuple):
        return tuple(host(v) for v in x)
    if hasattr(x, "__cuda_array_interface__") and hasattr(x, "get"):
        return x.get()
    if type(x).__module__.startswith("torch"):
        return x.cpu().numpy()
    return x


def median_ms(env: Env, run: Callable[[], Any], repeat: int) -> float:
    """Median per-call ms of `run` (warm), each call followed by a device synchronize; calls
    shorter than 2 ms are repeated within a sample (the per-call mean is the sample)."""
    run()
    env.sync()
    t0 = time.perf_counter()
    run()
    env.sync()
    once = time.perf_counter() - t0
    calls = max(1, min(2000, int(2e-3 / max(once, 1e-7))))
    if once > 1.0:                                   # a slow call (a host backend at large n)
        repeat = min(repeat, 3)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(calls):
            run()
            env.sync()
        times.append((time.perf_counter() - t0) / calls * 1e3)
    return sorted(times)[len(times) // 2]


# ---- checks against the numpy backend --------------------------------------------------------
def trace_facts(backend: str) -> dict:
    """What qc.last_trace() says the last call did: the backend that ran, the tier, the
    kernels launched, a fallback (never silent: reported with the row), streamed chunks."""
    try:
        t = qc.last_trace()
    except Exception:                    # (nothing traced)
        return {}
    facts = {"backend": t.backend, "tier": t.tier, "kernels": len(t.kernels), "chunks": t.chunks}
    if t.fallback:
        facts["fallback"] = str(t.fallback)[:200]
    return facts


def check_exact(got, ref) -> tuple[bool, str]:
    got, ref = host(got), host(ref)
    if isinstance(ref, tuple):
        if not isinstance(got, tuple) or len(got) != len(ref):
            return False, f"{type(got).__name__} of {len(got) if hasattr(got, '__len__') else '?'} != tuple of {len(ref)}"
        for i, (g, r) in enumerate(zip(got, ref)):
            ok, why = check_exact(g, r)
            if not ok:
                return False, f"column {i}: {why}"
        return True, ""
    got, ref = np.asarray(got), np.asarray(ref)
    if got.shape != ref.shape:
        return False, f"shape {got.shape} != {ref.shape}"
    if got.dtype != ref.dtype:
        return False, f"dtype {got.dtype} != {ref.dtype}"
    if not np.array_equal(got, ref, equal_nan=ref.dtype.kind == "f"):
        bad = np.flatnonzero(got != ref)
        return False, f"{len(bad)} elements differ (first at {bad[0] if len(bad) else '?'})"
    return True, ""


def check_scan(got, ref) -> tuple[bool, str]:
    """float32 running sums: both within 1e-3 of the float64 running sum's scale (the
    groupings differ; a lost or doubled element is off by far more)."""
    got, ref = np.asarray(host(got)), np.asarray(host(ref))
    if got.shape != ref.shape or got.dtype != ref.dtype:
        return False, f"{got.dtype}{got.shape} != {ref.dtype}{ref.shape}"
    scale = np.maximum(np.abs(ref.astype(np.float64)), 1.0)
    err = float(np.max(np.abs(got.astype(np.float64) - ref) / scale, initial=0.0))
    return err <= 1e-3, f"relative error {err:.1e}"


def note_trace(row: dict, backend: str) -> None:
    """A timed call that did not run on the backend's kernels says so in the row's note."""
    t = row.get("trace") or {}
    notes = []
    if t.get("backend") and t["backend"] != backend:
        notes.append(f"ran on {t['backend']}")
    if t.get("fallback"):
        notes.append(f"FALLBACK: {t['fallback']}")
    if t.get("tier") not in (None, "kernel") and backend != "numpy":
        notes.append(f"tier {t['tier']}")
    if t.get("chunks"):
        notes.append(f"streamed in {t['chunks']} chunks")
    if notes:
        row["why"] = "; ".join(notes)


def check_columns(got, ref, rtol: float = 1e-9) -> tuple[bool, str]:
    """Dicts of columns (group_by results, TPC-H): integer columns exactly, floats within rtol."""
    got, ref = host(got), host(ref)
    if isinstance(ref, float):
        err = abs(float(got) - ref) / max(abs(ref), 1e-300)
        return err <= rtol, f"relative error {err:.1e}"
    if list(got) != list(ref):
        return False, f"columns {list(got)} != {list(ref)}"
    for name, r in ref.items():
        g, r = np.asarray(got[name]), np.asarray(r)
        if g.shape != r.shape:
            return False, f"{name}: {g.shape[0] if g.ndim else '?'} rows, numpy has {r.shape[0] if r.ndim else '?'}"
        if r.dtype.kind == "f":
            err = float(np.max(np.abs(g - r) / np.maximum(np.abs(r), 1e-300), initial=0.0))
            if not err <= rtol:
                return False, f"{name}: relative error {err:.1e}"
        elif not np.array_equal(g.astype(np.int64), r.astype(np.int64)):
            return False, f"{name}: values differ"
    return True, ""


def check_workload(kind: str):
    return lambda got, ref: W.check(kind, host(got), host(ref))


# ---- the cases --------------------------------------------------------------------------------
@dataclass
class Case:
    name: str
    title: str                                   # what it runs, in words
    make: Callable[[int, np.random.Generator], dict]
    query: Callable[[dict, str], Callable[[], Any]]   # (data, backend) -> run
    check: Callable[[Any, Any], tuple[bool, str]]
    n: int                                       # full size
    n_small: int                                 # --small size
    peers: Callable[[Env], dict] = lambda env: {}      # name -> (missing reason or "", setup(data) -> run)
    group: str = ""                              # the size option that sets n ("w", "ops")
    tpch: str = ""                               # a TPC-H query name
    nbytes: Callable[[dict], int] = W.input_bytes


def _f32(n, rng):
    return rng.random(n, dtype=np.float32) * np.float32(2000)


def _narrow(dtype):
    def make(n, rng):
        d = W.WORKLOADS["W4"].make(n, rng)
        if np.dtype(dtype).kind == "f":
            return {k: v.astype(dtype) for k, v in d.items()}
        info = np.iinfo(dtype)                    # as gpu_bandwidth.narrow: the values mapped
        scale = np.float32((info.max - info.min) / 2000)       # onto the type's range
        return {k: (v * scale + np.float32(info.min)).astype(dtype) for k, v in d.items()}
    return make


def _xp_peer(env: Env, fn_name: str, setup):
    """(missing reason, setup) of the array-library peer (CuPy on cuda, NumPy elsewhere)."""
    return f"{env.xp_name()}.{fn_name}", (env.xp_why(), lambda d: setup(env.xp(), env.to_xp(d)))


def _torch_peer(env: Env, fn_name: str, setup):
    return f"torch.{fn_name}", (env.torch_why, lambda d: setup(env.torch, env.to_torch(d)))


def _workload_peer(key):
    """The W workload's NumPy code (workloads.np_wN) over the array library's arrays (NumPy
    functions dispatch to CuPy through __array_function__ / __array_ufunc__)."""
    numpy_setup = W.WORKLOADS[key].numpy
    return lambda env: dict([_xp_peer(env, f"{key} as array code", lambda xp, d: numpy_setup(d))])


def _hot_peer(env):
    return dict([_xp_peer(env, "sum (x.sum())", lambda xp, d: d["x"].sum)])


# order_by(), order_by(key) + payload, top-100, scan, distinct
def q_sort(d, b):
    return qc.query(d["x"]).on(b).order_by().to_array


def q_argsort(d, b):
    return qc.query({"key": d["key"], "pay": d["pay"]}).on(b).order_by(lambda r: r.key).select(lambda r: r.pay).to_array


def q_top100(d, b):
    return qc.query(d["x"]).on(b).order_by().take(100).to_array


def q_scan(d, b):
    return qc.query(d["x"]).on(b).scan(lambda a, v: a + v, 0).to_array


def q_distinct(d, b):
    return qc.query(d["x"]).on(b).distinct().to_array


def q_group(d, b):
    g = qc.query({"k": d["k"], "v": d["v"]}).on(b).group_by(lambda r: r.k)
    return lambda: g.agg(total=qc.sum(lambda r: r.v), n=qc.count)


def q_join(d, b):
    left = qc.query({"k": d["lk"], "a": d["la"]})
    right = qc.query({"k": d["rk"], "b": d["rb"]})
    return left.join(right, lambda r: r.k, lambda s: s.k, lambda r, s: (r.a, s.b)).on(b).to_array


def _make_argsort(n, rng):
    return {"key": _f32(n, rng), "pay": rng.random(n, dtype=np.float32)}


def _make_scan_i32(n, rng):
    return {"x": rng.integers(-100, 100, n, dtype=np.int32)}


def _make_distinct(n, rng):
    return {"x": rng.integers(0, 1_000_000, n, dtype=np.int32)}


def _make_group(groups):
    def make(n, rng):
        return {"k": rng.integers(0, groups, n, dtype=np.int32), "v": rng.random(n)}
    return make


JOIN_BUILD = 10**6


def _make_join(n, rng):
    m = max(1, min(JOIN_BUILD, n // 10))
    return {"lk": rng.integers(0, 2 * m, n, dtype=np.int64), "la": rng.random(n, dtype=np.float32),
            "rk": rng.permutation(m).astype(np.int64) * 2, "rb": rng.random(m, dtype=np.float32)}


def _sort_peers(env):
    return dict([_torch_peer(env, "sort", lambda t, d: lambda: t.sort(d["x"]).values),
                 _xp_peer(env, "sort", lambda xp, d: lambda: xp.sort(d["x"]))])


def _argsort_peers(env):
    return dict([
        _torch_peer(env, "sort(stable) + take", lambda t, d: lambda: d["pay"][t.sort(d["key"], stable=True).indices]),
        _xp_peer(env, "argsort + take", lambda xp, d: lambda: d["pay"][xp.argsort(d["key"], kind="stable")]
                 if xp is np else d["pay"][xp.argsort(d["key"])])])      # CuPy's argsort is a stable radix sort


def _top_peers(env):
    def xp_top(xp, d):
        x = d["x"]
        k = min(100, len(x))
        return lambda: xp.sort(xp.partition(x, k - 1)[:k])
    return dict([_torch_peer(env, "topk", lambda t, d: lambda: t.topk(d["x"], min(100, len(d["x"])), largest=False, sorted=True).values),
                 _xp_peer(env, "partition + sort", xp_top)])


def _scan_peers(env):
    return dict([_torch_peer(env, "cumsum", lambda t, d: lambda: t.cumsum(d["x"], 0, dtype=d["x"].dtype)),
                 _xp_peer(env, "cumsum", lambda xp, d: lambda: xp.cumsum(d["x"], dtype=d["x"].dtype))])


def _distinct_peers(env):
    return dict([_torch_peer(env, "unique (sorted)", lambda t, d: lambda: t.unique(d["x"])),
                 _xp_peer(env, "unique (sorted)", lambda xp, d: lambda: xp.unique(d["x"]))])


def _group_peers(groups):
    def peers(env):
        def torch_group(t, d):
            k, v = d["k"].long(), d["v"]

            def run():
                total = t.zeros(groups, dtype=v.dtype, device=v.device).index_add_(0, k, v)
                n = t.bincount(k, minlength=groups)
                keep = n.nonzero().squeeze(1)
                return keep, total[keep], n[keep]
            return run

        def xp_group(xp, d):
            k, v = d["k"], d["v"]

            def run():
                total = xp.bincount(k, weights=v, minlength=groups)
                n = xp.bincount(k, minlength=groups)
                keep = xp.flatnonzero(n)
                return keep, total[keep], n[keep]
            return run
        return dict([_torch_peer(env, "index_add_ + bincount", torch_group),
                     _xp_peer(env, "bincount", xp_group)])
    return peers


def _join_peers(env):
    """A join against unique build keys as array code: sort the build side, binary-search
    every probe key, keep the hits, gather both payloads (the build side sorted every call)."""
    def torch_join(t, d):
        lk, la, rk, rb = d["lk"], d["la"], d["rk"], d["rb"]

        def run():
            sk, order = t.sort(rk)
            pos = t.searchsorted(sk, lk).clamp_(max=len(sk) - 1)
            hit = (sk[pos] == lk).nonzero().squeeze(1)
            return la[hit], rb[order[pos[hit]]]
        return run

    def xp_join(xp, d):
        lk, la, rk, rb = d["lk"], d["la"], d["rk"], d["rb"]

        def run():
            order = xp.argsort(rk)
            sk = rk[order]
            pos = xp.minimum(xp.searchsorted(sk, lk), len(sk) - 1)
            hit = xp.flatnonzero(sk[pos] == lk)
            return la[hit], rb[order[pos[hit]]]
        return run
    return dict([_torch_peer(env, "sort + searchsorted", torch_join),
                 _xp_peer(env, "argsort + searchsorted", xp_join)])


def _w(key, name=None, n=10**8, n_small=10**4, make=None, peers=None):
    wl = W.WORKLOADS[key]
    return Case(name or key, wl.title, make or wl.make, wl.querycompute, check_workload(wl.kind),
                n, n_small, peers or _workload_peer(key), group="w")


CASES = [
    Case("W1_hot", "W1 at n = 1e3, warm: the per-call cost against x.sum()", W.WORKLOADS["W1"].make,
         W.WORKLOADS["W1"].querycompute, check_workload("sum"), 10**3, 10**3, _hot_peer),
    _w("W1"), _w("W2"), _w("W3"), _w("W4"), _w("W5"), _w("W6"),
    _w("W2", "W2_1e9", n=10**9, n_small=10**5),
    _w("W4", "W4_float16", make=_narrow("float16")),
    _w("W4", "W4_int8", make=_narrow("int8")),
    Case("sort", "order_by().to_array(), float32", lambda n, rng: {"x": _f32(n, rng)}, q_sort,
         check_exact, 3 * 10**7, 2 * 10**4, _sort_peers, group="ops"),
    Case("argsort", "order_by(key).select(payload).to_array(), float32 key and payload", _make_argsort,
         q_argsort, check_exact, 3 * 10**7, 2 * 10**4, _argsort_peers, group="ops"),
    Case("top100", "order_by().take(100).to_array(), float32", lambda n, rng: {"x": _f32(n, rng)}, q_top100,
         check_exact, 3 * 10**7, 2 * 10**4, _top_peers, group="ops"),
    Case("scan", "scan(a + v, 0).to_array(), float32", lambda n, rng: {"x": _f32(n, rng)}, q_scan,
         check_scan, 3 * 10**7, 2 * 10**4, _scan_peers, group="ops"),
    Case("scan_i32", "scan(a + v, 0).to_array(), int32 in [-100, 100)", _make_scan_i32, q_scan,
         check_exact, 3 * 10**7, 2 * 10**4, _scan_peers, group="ops"),
    Case("distinct", "distinct().to_array(), int32 in [0, 1e6)", _make_distinct, q_distinct,
         check_exact, 3 * 10**7, 2 * 10**4, _distinct_peers, group="ops"),
    Case("group8", "group_by(int32 key, 8 groups).agg(sum float64, count)", _make_group(8), q_group,
         check_columns, 3 * 10**7, 2 * 10**4, _group_peers(8), group="ops"),
    Case("group1e6", "group_by(int32 key, 1e6 groups).agg(sum float64, count)", _make_group(10**6), q_group,
         check_columns, 3 * 10**7, 2 * 10**4, _group_peers(10**6), group="ops"),
    Case("join", "join(1e7 int64 keys + float32, 1e6 unique keys + float32) -> (a, b)", _make_join, q_join,
         check_exact, 10**7, 10**4, _join_peers),
] + [Case(q, f"TPC-H {q} (tpch_queries.qc_{q.lower()})", None, None, check_columns, 0, 0,
          tpch=q) for q in ("Q1", "Q6", "Q12")]
CASE_NAMES = [c.name for c in CASES]

# Issue 30's targets, judged on cuda at the full sizes (rows say "target" and "meets_target"):
# ("pct", x): GB/s on the input bytes >= x% of the copy's; ("peer", prefix, x): qc's median
# <= x times that of the first peer whose name starts with prefix.
TARGETS = {"W1_hot": ("peer", "cupy.", 1.2), "W1": ("pct", 85), "W3": ("pct", 85), "W4": ("pct", 85),
           "W5": ("pct", 85), "W2": ("pct", 60), "W2_1e9": ("pct", 60), "sort": ("peer", "torch.", 0.8),
           "scan": ("peer", "torch.", 0.8), "scan_i32": ("peer", "torch.", 0.8), "group8": ("pct", 50),
           "group1e6": ("pct", 50), "join": ("pct", 50)}


def judge(row: dict) -> None:
    """Add the case's target and whether this row meets it (None: nothing to judge by, such
    as a peer that is absent or a case that was not timed)."""
    target = TARGETS.get(row["case"])
    if target is None:
        return
    if target[0] == "pct":
        row["target"] = f">= {target[1]}% of copy"
        row["meets_target"] = row["pct_of_copy"] >= target[1] if "pct_of_copy" in row else None
        return
    row["target"] = f"<= {target[2]}x {target[1].rstrip('.')}"
    peer = next((p for p in row.get("peers", []) if p["name"].startswith(target[1])), None)
    row["meets_target"] = peer["ratio"] <= target[2] if peer and "ratio" in peer else None


# ---- TPC-H -----------------------------------------------------------------------------------
def tpch_peer(query: str, t, xp):
    """Q1, Q6, Q12 as array code (NumPy's or CuPy's functions; tpch_queries.numpy_qN's plan,
    written with functions both libraries have) over the columns of `t`."""
    import tpch_queries as Q
    li = t.lineitem
    if query == "Q6":
        sd, disc, qty, price = (li[n] for n in Q.READS["Q6"])

        def run():
            m = (sd >= Q.Q6_FROM) & (sd < Q.Q6_TO) & (disc >= 0.05) & (disc <= 0.07) & (qty < 24)
            return float(xp.dot(price[m], disc[m]))
        return run
    if query == "Q1":
        sd, rf, ls, qty, price, disc, tax = (li[n] for n in Q.READS["Q1"])
        n_ls = len(t.codes["l_linestatus"])
        n_groups = len(t.codes["l_returnflag"]) * n_ls

        def run():
            m = sd <= Q.Q1_SHIPDATE
            g = rf[m].astype(xp.int64) * n_ls + ls[m]
            q, p, d = qty[m], price[m], disc[m]
            dp = p * (1 - d)
            sums = [xp.bincount(g, weights=w, minlength=n_groups) for w in (q, p, dp, dp * (1 + tax[m]), d)]
            n = xp.bincount(g, minlength=n_groups)
            keep = xp.flatnonzero(n)
            s = [x[keep] for x in sums]
            nk = n[keep]
            return Q._columns(Q.Q1_COLUMNS, (keep // n_ls, keep % n_ls, s[0], s[1], s[2], s[3],
                                             s[0] / nk, s[1] / nk, s[4] / nk, nk))
        return run
    key, mode, sd, cd, rd = (li[n] for n in Q.READS["Q12"])
    okey, prio = t.orders["o_orderkey"], t.orders["o_orderpriority"]
    mail, ship = (t.code("l_shipmode", m) for m in Q.Q12_MODES)
    urgent, high = (t.code("o_orderpriority", p) for p in Q.Q12_HIGH)
    n_modes = len(t.codes["l_shipmode"])
    size = int(okey.max()) + 2

    def run():
        m = (((mode == mail) | (mode == ship)) & (cd < rd) & (sd < cd) & (rd >= Q.Q12_FROM) & (rd < Q.Q12_TO))
        lut = xp.full(size, 255, dtype=xp.uint8)        # the join: orders' keys are dense
        lut[okey] = prio
        p = lut[xp.minimum(key[m], size - 1)]
        found = p != 255
        g, pf = mode[m][found], p[found]
        h = ((pf == urgent) | (pf == high)).astype(xp.float64)
        n = xp.bincount(g, minlength=n_modes)
        hi = xp.bincount(g, weights=h, minlength=n_modes).astype(xp.int64)
        keep = xp.flatnonzero(n)
        return Q._columns(Q.Q12_COLUMNS, (keep, hi[keep], n[keep] - hi[keep]))
    return run


def tpch_bytes(query: str, t) -> int:
    import tpch_data
    import tpch_queries as Q
    nbytes = tpch_data.column_bytes(t.lineitem, Q.READS[query])
    if query == "Q12":
        nbytes += tpch_data.column_bytes(t.orders, ("o_orderkey", "o_orderpriority"))
    return nbytes


# ---- the run ---------------------------------------------------------------------------------
class Run:
    def __init__(self, args, env: Env):
        self.args, self.env = args, env
        self.t0 = time.perf_counter()
        self.rows: list[dict] = []
        self.copy: dict = {}
        self.tests: dict = {}
        self.out = Path(args.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.tables = None                       # TPC-H: loaded once, or the reason it is not
        self.tables_why = ""

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def case_budget(self) -> float:
        return self.args.budget_s - (self.args.tests_timeout_s if self.args.tests else 0)

    # ---- outputs -------------------------------------------------------------------------------
    def meta(self) -> dict:
        env = self.env
        return {"script": "benchmarks/gpu_device.py", "backend": env.backend, "device": env.device,
                "small": self.args.small, "repeat": self.args.repeat, "budget_s": self.args.budget_s,
                "elapsed_s": round(self.elapsed(), 1),
                "time": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
                "cpus": os.cpu_count(), "python": platform.python_version(), "numpy": np.__version__,
                "querycompute": qc.__version__,
                "peers": {"torch": ({"present": True, "version": env.torch.__version__, "device": env.tdev}
                                    if env.torch is not None else {"present": False, "why": env.torch_why}),
                          env.xp_name(): ({"present": True, "version": env.xp().__version__}
                                          if not env.xp_why() else {"present": False, "why": env.xp_why()})},
                "copy": self.copy}

    def write(self) -> None:
        report = {**self.meta(), "cases": self.rows, "tests": self.tests,
                  "failed": [f"{r['case']}[{r['src']}]" for r in self.rows if r["status"] in ("wrong", "error")],
                  "missed_targets": [f"{r['case']}[{r['src']}]" for r in self.rows if r.get("meets_target") is False]}
        tmp = self.out / "results.json.tmp"
        tmp.write_text(json.dumps(report, indent=1, default=str))
        os.replace(tmp, self.out / "results.json")
        (self.out / "results.md").write_text(markdown(report))

    # ---- measuring ----------------------------------------------------------------------------
    def size(self, case: Case) -> int:
        if case.name == "W1_hot":
            return case.n
        if self.args.small:
            return case.n_small
        if case.group == "w" and self.args.n_w and case.name != "W2_1e9":
            return int(self.args.n_w)
        if case.group == "ops" and self.args.n_ops:
            return int(self.args.n_ops)
        return case.n

    def measure_copy(self) -> None:
        """A device-to-device copy (cuda; host memory elsewhere) of 1e8 float32 (--small: 1e5):
        2 x bytes / time is the bandwidth a streaming kernel can reach."""
        env, n = self.env, (10**5 if self.args.small else int(self.args.n_w or 10**8))
        if env.cuda and env.cp is None:
            self.copy = {"status": "skipped", "why": f"no CuPy on the device: {env.cupy_why}"}
            return
        xp = env.xp()
        src = xp.ones(n, dtype=xp.float32)
        dst = xp.empty_like(src)
        ms = median_ms(env, lambda: xp.copyto(dst, src), self.args.repeat)
        gbps = 2 * src.nbytes / (ms * 1e-3) / 1e9
        self.copy = {"n": n, "bytes": int(src.nbytes), "median_ms": ms, "gbps": gbps,
                     "how": f"{env.xp_name()}.copyto, {'device to device' if env.cuda else 'host memory'}; GB/s = 2 x bytes / time"}
        print(f"copy: n = {n:.0e} float32, {ms:.4f} ms, {gbps:.1f} GB/s (read + write)", flush=True)
        del src, dst
        env.free()

    def row(self, case: Case, src: str, n: int, **kw) -> dict:
        r = {"case": case.name, "title": case.title, "src": src, "n": n, "status": "skipped",
             "matched": None, **kw}
        self.rows.append(r)
        return r

    def time_peers(self, case: Case, host_data: dict | None, peers: dict, qc_ms: float | None) -> list[dict]:
        out = []
        for name, (missing, setup) in peers.items():
            p = {"name": name}
            if missing:
                p.update(status="absent", why=missing)
            elif self.elapsed() > self.case_budget():
                p.update(status="skipped", why="time budget spent")
            else:
                try:
                    run = setup(host_data)
                    p.update(status="ok", median_ms=median_ms(self.env, run, self.args.repeat))
                except Exception as exc:        # reported, never a made-up figure
                    p.update(status="error", why=f"{type(exc).__name__}: {exc}"[:300])
            if qc_ms is not None and "median_ms" in p:
                p["ratio"] = qc_ms / p["median_ms"]
            out.append(p)
            self.env.free()
        return out

    def measure(self, case: Case, n: int, nbytes: int, reference, check, label: str, make_run, **row):
        """The numpy backend's result (`reference()`), then per source (host, device): its row;
        the first call (`make_run(src)()`) checked with `check(got, ref)` against it, then
        timed (a mismatch is reported and not timed). Returns {source: median ms} of the
        timed ones, or None when the numpy backend failed (every row says so)."""
        env, qc_ms = self.env, {}
        try:
            ref = host(reference())
        except Exception as exc:
            for src in env.sources():
                self.row(case, src, n, status="error", matched=False,
                         why=f"numpy backend failed: {type(exc).__name__}: {exc}"[:300])
            self.write()
            return None
        for src in env.sources():
            r = self.row(case, src, n, input_bytes=nbytes, **row)
            if self.elapsed() > self.case_budget():
                r["why"] = "time budget spent"
                continue
            try:
                run = make_run(src)
                t0 = time.perf_counter()
                got = run()
                env.sync()
                r["first_ms"] = (time.perf_counter() - t0) * 1e3
                ok, why = check(got, ref)
                r["matched"] = bool(ok)
                if not ok:
                    r.update(status="wrong", why=f"differs from the numpy backend: {why}")
                    print(f"!!! {label} [{src}] n={n}: RESULT DIFFERS FROM THE NUMPY BACKEND ({why}); not timed",
                          flush=True)
                    continue
                ms = median_ms(env, run, self.args.repeat)
                gbps = nbytes / (ms * 1e-3) / 1e9
                r.update(status="ok", qc_ms=ms, gbps=gbps, trace=trace_facts(env.backend))
                note_trace(r, env.backend)
                if self.copy.get("gbps"):
                    r["pct_of_copy"] = 100 * gbps / self.copy["gbps"]
                qc_ms[src] = ms
            except Exception as exc:
                r.update(status="error", matched=False, why=f"{type(exc).__name__}: {exc}"[:300])
                print(f"!!! {label} [{src}]: {r['why']}", flush=True)
                if self.args.verbose:
                    traceback.print_exc()
            finally:
                run = got = None
                env.free()
        return qc_ms

    def run_case(self, case: Case) -> None:
        env, args = self.env, self.args
        if case.tpch:
            return self.run_tpch(case)
        n = self.size(case)
        if self.elapsed() > self.case_budget():
            for src in env.sources():
                self.row(case, src, n, why="time budget spent")
            self.write()
            return
        rng = np.random.default_rng(CASE_NAMES.index(case.name) + 1)
        data = case.make(n, rng)
        nbytes = case.nbytes(data)
        free = env.free_bytes()
        if free is not None and 3 * nbytes > 0.8 * free:
            for src in env.sources():
                self.row(case, src, n, why=f"device memory: {3 * nbytes / 2**30:.1f} GiB needed, {free / 2**30:.1f} GiB free")
            self.write()
            return
        qc_ms = self.measure(case, n, nbytes, lambda: case.query(data, "numpy")(), case.check, case.name,
                             lambda src: case.query(env.to_device(data) if src == "device" else data, env.backend))
        if qc_ms is None:
            return
        if qc_ms:                                 # the peers: once, on device-resident data
            peers = self.time_peers(case, data, case.peers(env), None)
            for r in self.rows[-len(env.sources()):]:
                r["peers"] = [dict(p, ratio=r["qc_ms"] / p["median_ms"]) if "qc_ms" in r and "median_ms" in p
                              else dict(p) for p in peers]
        for r in self.rows[-len(env.sources()):]:
            if env.cuda and not args.small:
                judge(r)
            print_row(r)
        self.write()

    def load_tables(self):
        if self.tables is not None or self.tables_why:
            return self.tables
        try:
            import tpch_data
            sf = self.args.sf if self.args.sf is not None else (0.01 if self.args.small else 1.0)
            data_dir = Path(self.args.tpch_data) if self.args.tpch_data else None
            if data_dir is None and tpch_data.generator() is None and not all(
                    (tpch_data.default_dir(sf) / f"{t}.parquet").exists() for t in tpch_data.TABLES):
                raise RuntimeError("no TPC-H data: tpchgen-cli is not installed and "
                                   f"{tpch_data.default_dir(sf)} holds no parquet files (--tpch-data DIR)")
            t0 = time.perf_counter()
            self.tables = tpch_data.load(sf, data_dir)
            print(f"TPC-H SF {sf:g} loaded in {time.perf_counter() - t0:.1f} s", flush=True)
        except Exception as exc:
            self.tables_why = f"TPC-H data unavailable: {type(exc).__name__}: {exc}"[:300]
        return self.tables

    def run_tpch(self, case: Case) -> None:
        env, q = self.env, case.tpch
        if self.elapsed() > self.case_budget():
            for src in env.sources():
                self.row(case, src, 0, why="time budget spent")
            self.write()
            return
        t = self.load_tables()
        if t is None:
            for src in env.sources():
                self.row(case, src, 0, why=self.tables_why)
            print(f"{case.name}: skipped ({self.tables_why})", flush=True)
            self.write()
            return
        import tpch_queries as Q
        n, nbytes = len(t.lineitem["l_orderkey"]), tpch_bytes(q, t)
        qc_ms = self.measure(case, n, nbytes, lambda: Q.QC[q](t, "numpy")(), check_columns, q, lambda src: Q.QC[q](
            t if src == "host" else dataclasses.replace(t, lineitem=env.to_device(t.lineitem),
                                                        orders=env.to_device(t.orders)), env.backend),
            sf=t.sf)
        if qc_ms is None:
            return
        if qc_ms:
            name = f"{env.xp_name()}.{q} as array code"
            if env.xp_why():
                peers = {name: (env.xp_why(), None)}
            else:
                peers = {name: ("", lambda _d: tpch_peer(q, t if not env.cuda else dataclasses.replace(
                    t, lineitem=env.to_device(t.lineitem), orders=env.to_device(t.orders)), env.xp()))}
            done = self.time_peers(case, None, peers, None)
            for r in self.rows[-len(env.sources()):]:
                r["peers"] = [dict(p, ratio=r["qc_ms"] / p["median_ms"]) if "qc_ms" in r and "median_ms" in p
                              else dict(p) for p in done]
        for r in self.rows[-len(env.sources()):]:
            print_row(r)
        self.write()

    # ---- the tests ----------------------------------------------------------------------------
    def run_tests(self) -> None:
        backend = self.env.backend
        others = [b for b in ("numpy", "cpu", "opencl", "cuda", "webgpu", "metal") if b != backend]
        keyword = f"{backend} or not ({' or '.join(others)})"
        suites = shared_suites()
        left = max(30.0, self.args.budget_s - self.elapsed())
        timeout = min(float(self.args.tests_timeout_s), left)
        self.tests = {"timeout_s": timeout, "runs": []}
        runs = [("gpu-marked", ["-m", "gpu"] + [str(Path("tests") / s) for s in gpu_marked()]),
                ("shared backend suites", ["-k", keyword] + [str(Path("tests") / s) for s in suites])]
        xdist = _has_module("xdist")
        t_end = time.perf_counter() + timeout
        for label, sel in runs:
            left = t_end - time.perf_counter()
            entry = {"label": label, "selection": [a.removeprefix("tests/") for a in sel]}
            self.tests["runs"].append(entry)
            if left < 10:
                entry.update(status="skipped", why="test time spent")
                continue
            junit = Path(tempfile.mkdtemp(prefix="gpu-device-")) / "junit.xml"
            cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}",
                   *sel]
            if xdist and label != "gpu-marked":
                cmd[4:4] = ["-n", str(min(8, os.cpu_count() or 1))]
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
            t0 = time.perf_counter()
            entry.update(run_pytest(cmd, env, left))
            entry["seconds"] = round(time.perf_counter() - t0, 1)
            entry.update(junit_counts(junit))
            if "tests" in entry:
                entry["passed"] = entry["tests"] - entry["failures"] - entry["errors"] - entry["skipped"]
            entry["status"] = ("failed" if entry.get("failures") or entry.get("errors")
                               else "timed out" if entry["timed_out"]
                               else "passed" if entry.get("rc") in (0, 5) else "failed")
            print(f"tests, {label}: {entry['status']}: {entry.get('tests', '?')} tests, {entry.get('passed', '?')} passed, "
                  f"{entry.get('failures', '?')} failed, "
                  f"{entry.get('errors', '?')} errors, {entry.get('skipped', '?')} skipped, {entry['seconds']} s", flush=True)
            self.write()


def run_pytest(cmd: list[str], env: dict, timeout: float) -> dict:
    """Run pytest in a process group of its own; at the timeout interrupt it (SIGINT: pytest
    stops, prints its summary and writes the JUnit file, so the counts so far are kept), and
    kill the group if it has not ended 30 s later."""
    import signal
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
        return {"rc": proc.returncode, "timed_out": False, "tail": out[-1500:]}
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            out, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
        return {"rc": proc.returncode, "timed_out": True, "tail": (out or "")[-1500:]}


def gpu_marked() -> list[str]:
    """Test files that mark tests with pytest.mark.gpu (collecting only them is quicker)."""
    return [p.name for p in sorted((REPO / "tests").glob("test_*.py")) if "mark.gpu" in p.read_text()]


def _has_module(name: str) -> bool:
    import importlib.util
    return importlib.util.find_spec(name) is not None


def shared_suites() -> list[str]:
    """Test files whose backend lists take cuda in when a device is present: a list built from
    qc.backends() naming "cuda", or the expression suites of tests/expr_backends.py."""
    out = []
    for path in sorted((REPO / "tests").glob("test_*.py")):
        text = path.read_text()
        if re.search(r'"cuda"[^\n]*qc\.backends\(\)', text) or re.search(r"from expr_backends import|import expr_backends", text):
            out.append(path.name)
    return out


def junit_counts(path: Path) -> dict:
    """tests / failures / errors / skipped from pytest's JUnit XML, and the failed tests' ids."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return {}
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    counts = {k: sum(int(s.get(k, 0)) for s in suites) for k in ("tests", "failures", "errors", "skipped")}
    failed = [f"{c.get('classname')}::{c.get('name')}" for c in root.iter("testcase")
              if c.find("failure") is not None or c.find("error") is not None]
    counts["failed_ids"] = failed[:30]
    return counts


# ---- reporting -------------------------------------------------------------------------------
def _fmt(x, spec: str, none: str = "-") -> str:
    return none if x is None else format(x, spec)


def print_row(r: dict) -> None:
    peers = "; ".join(f"{p['name']} " + (f"{p['median_ms']:.4f} ms" + (f" (x{p['ratio']:.2f})" if "ratio" in p else "")
                                         if "median_ms" in p else p["status"]) for p in r.get("peers", []))
    print(f"{r['case']:<11} {r['src']:<6} n={r['n']:<11} {r['status']:<7} "
          f"qc {_fmt(r.get('qc_ms'), '.4f')} ms  {_fmt(r.get('gbps'), '.1f')} GB/s  "
          f"{_fmt(r.get('pct_of_copy'), '.0f')}% of copy  | {peers} {r.get('why', '')}".rstrip()
          + (f"  [target {r['target']}: {({True: 'met', False: 'MISSED', None: 'not judged'})[r['meets_target']]}]"
             if "target" in r else ""), flush=True)


def markdown(report: dict) -> str:
    copy = report.get("copy") or {}
    lines = [f"# gpu_device.py: backend {report['backend']} on {report['device']}", "",
             f"{report['time']}; querycompute {report['querycompute']}, numpy {report['numpy']}, Python {report['python']}; "
             f"median of {report['repeat']} warm calls; run took {report['elapsed_s']} s of a {report['budget_s']} s budget.", ""]
    for lib, info in report["peers"].items():
        lines.append(f"- peer {lib}: " + (f"present ({info.get('version')}{', ' + info['device'] if info.get('device') else ''})"
                                           if info["present"] else f"absent: {info['why']}"))
    lines.append(f"- copy: {copy['gbps']:.1f} GB/s ({copy['how']}; n = {copy['n']:.0e})" if copy.get("gbps")
                 else f"- copy: not measured ({copy.get('why', '?')})")
    if report["failed"]:
        lines += ["", f"**FAILED: {', '.join(report['failed'])}** (results differ from the numpy backend, or raised)"]
    if report.get("missed_targets"):
        lines += ["", f"Targets missed: {', '.join(report['missed_targets'])}"]
    lines += ["", "| case | src | n | matched numpy | qc ms | GB/s | % of copy | target | peer | peer ms | qc / peer | note |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in report["cases"]:
        peers = r.get("peers") or [{}]
        matched = {True: "yes", False: "**NO**", None: "-"}[r.get("matched")]
        for i, p in enumerate(peers):
            first = i == 0
            peer_ms = _fmt(p.get("median_ms"), ".4f", p.get("status", "-") if p else "-")
            note = (r.get("why", "") if first else "") + (f" {p['name']}: {p['why']}" if p.get("why")
                                                           and p.get("status") != "absent" else "")
            lines.append("| " + " | ".join([
                r["case"] if first else "", r["src"] if first else "", f"{r['n']:.0e}" if first and r["n"] else "",
                matched if first else "", _fmt(r.get("qc_ms"), ".4f") if first else "",
                _fmt(r.get("gbps"), ".1f") if first else "", _fmt(r.get("pct_of_copy"), ".0f") if first else "",
                (f"{r['target']}: " + {True: "met", False: "**missed**", None: "not judged"}[r["meets_target"]])
                if first and "target" in r else "",
                p.get("name", "-"), peer_ms, _fmt(p.get("ratio"), ".2f"), note.strip().replace("|", "/")]) + " |")
    tests = report.get("tests") or {}
    if tests.get("runs"):
        lines += ["", "| tests | status | tests | failures | errors | skipped | s |", "|---|---|---|---|---|---|---|"]
        for t in tests["runs"]:
            lines.append(f"| {t['label']} | {t.get('status')} | {t.get('tests', '-')} | {t.get('failures', '-')} | "
                         f"{t.get('errors', '-')} | {t.get('skipped', '-')} | {t.get('seconds', '-')} |")
        for t in tests["runs"]:
            if t.get("failed_ids"):
                lines += ["", f"{t['label']} failed: " + ", ".join(f"`{x}`" for x in t["failed_ids"])]
    return "\n".join(lines) + "\n"


# ---- main ------------------------------------------------------------------------------------
def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", default="cuda", help="querycompute backend (default %(default)s)")
    ap.add_argument("--out", default=str(HERE / "results" / "gpu_device"), help="folder for results.json and results.md")
    ap.add_argument("--cases", default=",".join(CASE_NAMES), help="comma-separated case names (--list)")
    ap.add_argument("--list", action="store_true", help="print the cases and exit")
    ap.add_argument("--small", action="store_true", help="tiny sizes (n = 1e4-1e5, TPC-H SF 0.01): a run off the GPU")
    ap.add_argument("--budget-s", type=float, default=420.0, help="seconds for the whole run (default %(default)s)")
    ap.add_argument("--repeat", type=int, default=11, help="timed calls per figure (median; default %(default)s)")
    ap.add_argument("--n-w", type=float, default=None, help="n of W1-W6 (default 1e8; W2_1e9 keeps 1e9)")
    ap.add_argument("--n-ops", type=float, default=None, help="n of sort, scan, distinct, group_by (default 3e7)")
    ap.add_argument("--sf", type=float, default=None, help="TPC-H scale factor (default 1; --small 0.01)")
    ap.add_argument("--tpch-data", default=None, help="folder of the TPC-H parquet files (default: tpch_data's cache)")
    ap.add_argument("--tests", action="store_true", help="also run pytest -m gpu and the shared backend suites")
    ap.add_argument("--tests-timeout-s", type=float, default=120.0,
                    help="seconds for the tests, taken out of the budget (default %(default)s)")
    ap.add_argument("--verbose", action="store_true", help="print tracebacks of errors")
    args = ap.parse_args(argv)
    args.case_list = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = [c for c in args.case_list if c not in CASE_NAMES]
    if unknown:
        ap.error(f"unknown case(s) {unknown}; choose from {', '.join(CASE_NAMES)}")
    if args.repeat < 1:
        ap.error("--repeat needs at least 1")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.list:
        for c in CASES:
            print(f"{c.name:<11} {c.title}")
        return 0
    available = qc.backends().get(args.backend, {})
    if not available.get("available"):
        print(f"gpu_device.py: backend {args.backend!r} cannot run here: {available.get('reason', 'unknown backend')}",
              file=sys.stderr)
        return 2
    np.seterr(all="ignore")              # NumPy's own overflow warnings (float16 W4) are noise here
    env = Env(args.backend)
    run = Run(args, env)
    print(f"gpu_device.py: backend {args.backend} on {env.device}; torch: "
          f"{env.torch.__version__ + ' (' + env.tdev + ')' if env.torch else 'absent (' + env.torch_why + ')'}; "
          f"{env.xp_name()}: {env.xp().__version__ if not env.xp_why() else 'absent (' + env.xp_why() + ')'}; "
          f"budget {args.budget_s:.0f} s", flush=True)
    run.write()
    run.measure_copy()
    run.write()
    for case in (c for c in CASES if c.name in args.case_list):
        try:
            run.run_case(case)
        except Exception as exc:              # one case's crash never loses the others
            run.row(case, "host", 0, status="error", matched=False, why=f"{type(exc).__name__}: {exc}"[:300])
            traceback.print_exc()
            run.write()
    if args.tests:
        run.run_tests()
    run.write()
    bad = [r for r in run.rows if r["status"] in ("wrong", "error")]
    bad_tests = [t for t in run.tests.get("runs", []) if t.get("status") not in ("passed", "skipped")]
    print(f"wrote {run.out / 'results.json'} and {run.out / 'results.md'} after {run.elapsed():.1f} s; "
          f"{len(bad)} failed case(s){', ' + str(len(bad_tests)) + ' failed test run(s)' if args.tests else ''}", flush=True)
    return 1 if bad or bad_tests else 0


if __name__ == "__main__":
    sys.exit(main())
