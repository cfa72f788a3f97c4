"""Issue 28 item 2's "measure it against this and choose": W1's fused sum pass compiled two ways.

    python benchmarks/llvm_route.py                 # n = 2**20, fresh processes, empty caches
    python benchmarks/llvm_route.py --n 65536 --repeat 3

W1 is select(v * 2).where(v > 1000).select(v + 1).sum() over float32. The two routes:

* numba (what the cpu backend runs today): querycompute prints the pass as numba Python
  (dialects/numba_py.py) and numba compiles it: import numba, its typing setup, type
  inference and LLVM for every njit function of the module. Measured in a fresh process with
  an empty QUERYCOMPUTE_CACHE_DIR and QUERYCOMPUTE_TIERED=0 (the trace's compile time), and
  again in a second fresh process over the cache the first one filled (numba's cache hit).
* llvm (a candidate): the same pass printed directly as LLVM IR with llvmlite.ir (this file's
  `w1_module`: the element loop into a 4096-value block buffer, the 64 lane adds row by row,
  pairwise trees of lanes, blocks and chunks, dropped elements as -0.0: _codegen/sum_order.py's
  one order), optimised at O3 with llvmlite's new pass manager and loaded with MCJIT; and the
  disk-cache hit of that route: a fresh engine over the emitted object file alone.

Both results must have the same bits (asserted, with the numpy backend's) before anything is
printed. The kernel is called through ctypes, which releases the GIL, so it could run by morsels
(backends/cpu/morsels.py) like the numba entry points.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager

import numpy as np

LANES, BLOCK, CHUNK = 64, 4096, 65536           # _codegen/sum_order.py's order


def data(n: int) -> np.ndarray:
    return (np.random.default_rng(0).random(n) * 2000).astype(np.float32)


# ---- the llvm route --------------------------------------------------------------------------
def w1_module():
    """W1's pass as an llvmlite.ir Module: pairwise(buf, m, empty), chunk(x, lo, hi) and the
    entry qc_sum_chunks(c0, c1, nfin, n, P, x) (chunks [c0, c1) into P, then P[:nfin]'s tree)."""
    import llvmlite.ir as ir
    f32, i64 = ir.FloatType(), ir.IntType(64)
    c = lambda v: ir.Constant(i64, v)           # noqa: E731
    negz = ir.Constant(f32, -0.0)

    @contextmanager
    def loop(b, fn, start, stop, step=1, name="i"):
        var = b.alloca(i64, name=name)
        b.store(start, var)
        cond, body, end = (fn.append_basic_block(name + s) for s in (".cond", ".body", ".end"))
        b.branch(cond)
        b.position_at_end(cond)
        i = b.load(var)
        b.cbranch(b.icmp_signed("<", i, stop), body, end)
        b.position_at_end(body)
        yield i
        b.store(b.add(i, c(step)), var)
        b.branch(cond)
        b.position_at_end(end)

    m = ir.Module(name="w1")
    pw = ir.Function(m, ir.FunctionType(f32, [f32.as_pointer(), i64, f32]), "pairwise")
    pw.linkage = "internal"
    b = ir.IRBuilder(pw.append_basic_block("entry"))
    buf, size, empty = pw.args
    mvar = b.alloca(i64)
    b.store(size, mvar)
    cond, body, end = (pw.append_basic_block(s) for s in ("w.cond", "w.body", "w.end"))
    b.branch(cond)
    b.position_at_end(cond)
    b.cbranch(b.icmp_signed(">", b.load(mvar), c(1)), body, end)
    b.position_at_end(body)
    cur = b.load(mvar)
    half = b.sdiv(cur, c(2))
    with loop(b, pw, c(0), half, name="j") as j:
        j2 = b.mul(j, c(2))
        pair = b.fadd(b.load(b.gep(buf, [j2])), b.load(b.gep(buf, [b.add(j2, c(1))])))
        b.store(pair, b.gep(buf, [j]))
    odd = b.srem(cur, c(2))
    with b.if_then(b.icmp_signed("!=", odd, c(0))):
        b.store(b.load(b.gep(buf, [b.sub(cur, c(1))])), b.gep(buf, [half]))
    b.store(b.add(half, odd), mvar)
    b.branch(cond)
    b.position_at_end(end)
    one = b.icmp_signed("==", b.load(mvar), c(1))
    b.ret(b.select(one, b.load(b.gep(buf, [c(0)])), empty))

    ch = ir.Function(m, ir.FunctionType(f32, [f32.as_pointer(), i64, i64]), "chunk")
    ch.linkage = "internal"
    b = ir.IRBuilder(ch.append_basic_block("entry"))
    x, lo, hi = ch.args
    V, A = b.alloca(f32, BLOCK, name="V"), b.alloca(f32, LANES, name="A")
    B = b.alloca(f32, CHUNK // BLOCK, name="B")
    nb = b.alloca(i64)
    b.store(c(0), nb)
    with loop(b, ch, lo, hi, BLOCK, "blk") as blk:
        stop = b.add(blk, c(BLOCK))
        cnt = b.sub(b.select(b.icmp_signed("<", hi, stop), hi, stop), blk)
        with loop(b, ch, c(0), cnt, name="e") as e:        # the fused element
            v0 = b.fmul(b.load(b.gep(x, [b.add(blk, e)])), ir.Constant(f32, 2.0))
            keep = b.fcmp_ordered(">", v0, ir.Constant(f32, 1000.0))
            b.store(b.select(keep, b.fadd(v0, ir.Constant(f32, 1.0)), negz), b.gep(V, [e]))
        with loop(b, ch, cnt, c(BLOCK), name="z") as z:
            b.store(negz, b.gep(V, [z]))
        with loop(b, ch, c(0), c(LANES), name="l") as lane:
            b.store(b.load(b.gep(V, [lane])), b.gep(A, [lane]))
        with loop(b, ch, c(LANES), c(BLOCK), LANES, "r") as r:
            with loop(b, ch, c(0), c(LANES), name="k") as k:
                slot = b.gep(A, [k])
                b.store(b.fadd(b.load(slot), b.load(b.gep(V, [b.add(r, k)]))), slot)
        n_ = b.load(nb)
        b.store(b.call(pw, [A, c(LANES), negz]), b.gep(B, [n_]))
        b.store(b.add(n_, c(1)), nb)
    b.ret(b.call(pw, [B, b.load(nb), negz]))

    entry = ir.Function(m, ir.FunctionType(f32, [i64, i64, i64, i64, f32.as_pointer(),
                                                 f32.as_pointer()]), "qc_sum_chunks")
    b = ir.IRBuilder(entry.append_basic_block("entry"))
    c0, c1, nfin, n, P, x = entry.args
    with loop(b, entry, c0, c1, name="c") as k:
        lo = b.mul(k, c(CHUNK))
        hi = b.add(lo, c(CHUNK))
        b.store(b.call(ch, [x, lo, b.select(b.icmp_signed("<", n, hi), n, hi)]), b.gep(P, [k]))
    b.ret(b.fadd(b.call(pw, [P, nfin, negz]), ir.Constant(f32, 0.0)))
    return m


SIG = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64,
                       ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p)


def run_llvm(x: np.ndarray, fn) -> np.float32:
    nch = max(1, -(-len(x) // CHUNK))
    P = np.zeros(nch, np.float32)
    return np.float32(fn(0, nch, nch, len(x), P.ctypes.data, x.ctypes.data))


def llvm_child(n: int) -> dict:
    """The llvm route in this (fresh) process: phases in ms, the result, the warm call."""
    out = {}
    t = time.perf_counter()
    import llvmlite.binding as llvm
    out["import_ms"] = (time.perf_counter() - t) * 1e3
    t = time.perf_counter()
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    def machine():                              # an engine owns its target machine
        return llvm.Target.from_default_triple().create_target_machine(
            cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=3)
    tm = machine()
    text = str(w1_module())
    out["print_ms"] = (time.perf_counter() - t) * 1e3
    t = time.perf_counter()
    mod = llvm.parse_assembly(text)
    mod.verify()
    tuning = llvm.PipelineTuningOptions(speed_level=3)    # kept alive while pb lives
    pb = llvm.create_pass_builder(tm, tuning)
    mpm = pb.getModulePassManager()
    mpm.run(mod, pb)
    out["optimise_ms"] = (time.perf_counter() - t) * 1e3
    t = time.perf_counter()
    engine = llvm.create_mcjit_compiler(mod, tm)
    engine.finalize_object()
    fn = SIG(engine.get_function_address("qc_sum_chunks"))
    out["jit_ms"] = (time.perf_counter() - t) * 1e3
    obj = tm.emit_object(mod)
    t = time.perf_counter()                     # a disk-cache hit: the object file alone
    cached = llvm.create_mcjit_compiler(llvm.parse_assembly(""), machine())
    cached.add_object_file(llvm.ObjectFileRef.from_data(obj))
    cached.finalize_object()
    fn2 = SIG(cached.get_function_address("qc_sum_chunks"))
    out["object_load_ms"] = (time.perf_counter() - t) * 1e3
    x = data(n)
    r1, r2 = run_llvm(x, fn), run_llvm(x, fn2)
    assert r1.tobytes() == r2.tobytes()
    out["result"] = float(r1)
    out["bits"] = r1.tobytes().hex()
    out["warm_us"] = min(_timed(lambda: run_llvm(x, fn)) for _ in range(20)) * 1e6
    return out


def _timed(f) -> float:
    t = time.perf_counter()
    f()
    return time.perf_counter() - t


def numba_child(n: int, backend: str) -> dict:
    """The cpu (numba) route or the numpy backend in this fresh process: import, first call,
    the trace's compile time, the result and the warm call (one thread, as the llvm route)."""
    t = time.perf_counter()
    import querycompute as qc
    out = {"import_ms": (time.perf_counter() - t) * 1e3}
    x = data(n)
    q = qc.query(x).on(backend).select(lambda v: v * 2).where(lambda v: v > 1000).select(lambda v: v + 1)
    t = time.perf_counter()
    r = np.float32(q.sum())
    out["first_ms"] = (time.perf_counter() - t) * 1e3
    trace = qc.last_trace()
    out["compile_ms"] = sum(k.compile_ms for k in trace.kernels)
    out["cache"] = ",".join(k.cache for k in trace.kernels)
    out["result"] = float(r)
    out["bits"] = r.tobytes().hex()
    out["warm_us"] = min(_timed(q.sum) for _ in range(20)) * 1e6
    return out


def child(route: str, n: int, cache: str) -> dict:
    env = dict(os.environ, QUERYCOMPUTE_CACHE_DIR=cache, QUERYCOMPUTE_TIERED="0",
               NUMBA_NUM_THREADS="1")
    out = subprocess.run([sys.executable, __file__, "--child", route, str(n)], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=float, default=2 ** 20)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        route, n = args.child[0], int(args.child[1])
        print(json.dumps(llvm_child(n) if route == "llvm" else numba_child(n, route)))
        return
    n = int(args.n)
    rows = {"numpy": [], "numba cold": [], "numba disk": [], "llvm": []}
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as cache:
            rows["numpy"].append(child("numpy", n, cache))
            rows["numba cold"].append(child("cpu", n, cache))
            rows["numba disk"].append(child("cpu", n, cache))
            rows["llvm"].append(child("llvm", n, cache))
    bits = {r["bits"] for rs in rows.values() for r in rs}
    assert len(bits) == 1, f"the routes disagree: {[(k, r['result']) for k, rs in rows.items() for r in rs]}"
    med = lambda rs, k: statistics.median(r[k] for r in rs)     # noqa: E731
    print(f"W1 sum pass, n = {n}, float32, one thread, median of {args.repeat} (fresh processes); "
          f"result {rows['llvm'][0]['result']!r}, the same bits on every route")
    for name in ("numpy", "numba cold", "numba disk"):
        rs = rows[name]
        print(f"  {name:11s} import {med(rs, 'import_ms'):7.1f} ms  first call {med(rs, 'first_ms'):7.1f} ms"
              f"  (compile {med(rs, 'compile_ms'):7.1f} ms, {rs[0]['cache']})  warm {med(rs, 'warm_us'):8.1f} us")
    rs = rows["llvm"]
    print(f"  {'llvm':11s} import {med(rs, 'import_ms'):7.1f} ms  print {med(rs, 'print_ms'):.1f} ms"
          f"  O3 {med(rs, 'optimise_ms'):.1f} ms  MCJIT {med(rs, 'jit_ms'):.1f} ms"
          f"  object-file load {med(rs, 'object_load_ms'):.2f} ms  warm {med(rs, 'warm_us'):8.1f} us"
          f" (the pass alone)")


if __name__ == "__main__":
    main()
