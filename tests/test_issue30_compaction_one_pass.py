"""Issue 30 item 2: compaction in one pass. CUDA (forward progress, 64-bit words) compacts with
a decoupled look-back whose tile status is one 64-bit word (count << 2 | flag), published by
one store and read by one load, no fence between flag and count, over tiles of up to 4 runs
of 16 bytes a thread (ops/compact/gpu.py); the other dialects keep reduce-then-scan.

The CPU harness runs the CUDA C: the one-pass outputs equal the numpy backend's and the
reduce-then-scan lowering's, for sizes around tile edges, all / none / random survivors,
several dtypes, several outputs a survivor, strided inputs and ToArray windows. The harness
runs blocks one after another, so there every look-back finds its predecessor's inclusive
prefix; the walk back over windows of aggregates is run by launching one tile against status
words the test lays out (aggregates only, an inclusive prefix inside a window, garbage that
must be discarded), and blocks in reverse and shuffled order are run as one launch a tile
with the ticket set, after every tile's aggregate is out."""
from __future__ import annotations

import re

import numpy as np
import pytest
from compile_checks import ARCHS, ptx_of

from querycompute._codegen import gpu
from querycompute._codegen.dialects.by_name import DIALECTS
from querycompute._codegen.ir import expr as E
from querycompute._codegen.ir.program import ElementProgram, Filter, InputSpec, Pass, ToArray
from querycompute._codegen.launch import BLOCK
from querycompute._codegen.ops.compact import gpu as compact_gpu
from harness import plans, runner
from harness.passes import THRESHOLD, assert_same, data, expected, passes
from test_issue13_window import WINDOWED, check, full, params, windows
from test_issue13_window import data as window_data

DTYPES = ("float32", "int8", "uint16", "int64", "float64", "bool")


def _need_harness():
    ok, why = runner.available()
    if not ok:
        pytest.skip(why)


def _kernel(source: str, name: str) -> str:
    at = source.index(f" {name}(")
    return source[at:source.index("\n}\n", at)]


def _both(p: Pass, monkeypatch):
    """(one-pass kernel set, reduce-then-scan kernel set) of pass p in CUDA."""
    one = gpu.render(p, "cuda")
    with monkeypatch.context() as m:
        m.setitem(compact_gpu.ALGORITHM, "cuda", "reduce_then_scan")
        rts = gpu.render(p, "cuda")
    return one, rts


# ---- the choice, by capability ----------------------------------------------------------------
def test_algorithm_follows_forward_progress_and_64_bit_words():
    want = {name: "lookback" if cls.CAPS.forward_progress and cls.CAPS.int64 else "reduce_then_scan"
            for name, cls in DIALECTS.items()}
    assert {d: compact_gpu.algorithm(d) for d in DIALECTS} == want == {
        "cuda": "lookback", "opencl": "reduce_then_scan", "metal": "reduce_then_scan", "webgpu": "reduce_then_scan"}
    p = passes("float32")["where"]
    for d in ("opencl", "metal"):
        with pytest.raises(ValueError, match="no look-back"):
            compact_gpu.lower(p, d, 2, (), None, algo="lookback")
        assert [k.role for k in gpu.render(p, d).kernels if k.variant != "strided"] == [
            "count", "partials", "scan", "downsweep", "scatter"]


def test_tile_runs_fill_the_staging_budget():
    """4 runs of 16 bytes a thread (64 bytes of the widest element), halved while the tile's
    staged survivors would exceed 24 KB of shared memory; 1 for reduce-then-scan and for
    whole shaped elements."""
    runs = compact_gpu.tile_runs
    assert runs("cuda", 4, ["float32"]) == 4                      # 256 x 16 float32: 16 KB staged
    assert runs("cuda", 2, ["float32", "int64"]) == 2 * 2         # 256 x 8: 24 KB
    assert runs("cuda", 2, ["float64", "int64"]) == 2             # 256 x 4 x 16 B: 16 KB
    assert runs("cuda", 16, ["int8"]) == 4                        # 256 x 64 int8: 16 KB
    assert runs("cuda", 4, ["float32"], shaped=True) == 1
    assert runs("opencl", 4, ["float32"]) == runs("metal", 4, ["float32"]) == 1
    ks = gpu.render(passes("float32")["where"], "cuda")
    assert ks.elems_per_thread == 8 and ks.block == BLOCK       # tiles of 2048 (x - 1 and the index)
    assert gpu.render(passes("float32")["where"], "opencl").elems_per_thread == 2


def test_status_word_source():
    """One uint64 status word a tile, volatile 64-bit store and load, no fence, the tile from
    the ticket (never blockIdx: whatever order blocks start in, tiles go out in ticket
    order), the block scan by shuffles, static shared memory within 48 KB."""
    for d in DTYPES:
        ks = gpu.render(passes(d)["where"], "cuda")
        assert [(k.role, k.variant) for k in ks.kernels] == [
            ("init", "any"), ("scatter", "contiguous"), ("scatter", "strided")]
        assert [(b.name, b.dtype) for b in ks.scratch] == [("tile_status", "uint64"), ("ticket", "uint32"),
                                                          ("total", "int64")]
        for spec in ks.kernels[1:]:
            k = _kernel(ks.source, spec.name)
            assert "__threadfence" not in k and "blockIdx" not in k
            assert k.count("atomicAdd(") == 1 and "atomicAdd(&ticket[0], 1u)" in k
            assert k.count("((volatile unsigned long long*)tile_status)[tile] = ") == 2    # aggregate, prefix
            assert "((volatile unsigned long long*)tile_status)[j]" in k
            assert "__shfl_sync(0xffffffffu, thread_incl," in k
            if spec.variant == "contiguous":       # whole runs without checks; the thread holding n
                assert k.count("if (i >= n) break;") == 2 and k.count("The thread holding n") == 1
            shared = sum(int(n) * {"float": 4, "double": 8, "long long": 8, "int": 4, "unsigned int": 4,
                                   "short": 2, "unsigned short": 2, "signed char": 1, "unsigned char": 1,
                                   "bool": 1}[t]
                         for t, n in re.findall(r"__shared__ (.+?) \w+\[(\d+)\];", k))
            assert shared <= 26 * 1024, (d, shared)


@pytest.mark.parametrize("arch", ARCHS)
def test_nvrtc_compiles_the_one_pass_compaction(arch):
    """NVRTC (no driver needed) compiles it; the status word is one 64-bit volatile access
    each way and the look-back kernel has no memory barrier."""
    for d in ("float32", "int8", "float64"):
        ks = gpu.render(passes(d)["where"], "cuda")
        ptx = ptx_of(ks, arch, f"one_pass_{d}.cu")
        assert "st.volatile.global.u64" in ptx and "ld.volatile.global.u64" in ptx
        assert "membar" not in ptx and "fence" not in ptx
    ptx_of(gpu.render(WINDOWED, "cuda"), arch, "one_pass_window.cu")


# ---- against numpy and reduce-then-scan -----------------------------------------------------
def _inputs(d: str, n: int, mask: str, seed: int) -> np.ndarray:
    x = data(d, n, seed)
    if mask == "all":
        x[:] = True if d == "bool" else THRESHOLD + 1
    elif mask == "none":
        x[:] = False if d == "bool" else 0
    return x


@pytest.mark.parametrize("d", DTYPES)
def test_one_pass_matches_numpy_and_reduce_then_scan(d, monkeypatch):
    _need_harness()
    p = passes(d)["where"]
    one, rts = _both(p, monkeypatch)
    m_one, m_rts = plans.module_for([one]), plans.module_for([rts])
    tile = one.block * one.elems_per_thread
    cases = [(n, "random") for n in (0, 1, tile - 1, tile, tile + 1, 3 * tile + 5)]
    cases += [(2 * tile + 3, "all"), (2 * tile + 3, "none"), (tile, "all"), (1, "none")]
    for k, (n, mask) in enumerate(cases):
        x = _inputs(d, 2 * n, mask, seed=k)
        for view in (x[:n], x[::2]):                  # contiguous and strided variants
            want = expected("where", d, view)
            got = plans.run_kernel_set(one, m_one, [view], schedule="free")
            assert_same("where", d, got, want)
            assert_same("where", d, plans.run_kernel_set(rts, m_rts, [view], schedule="free"), want)


def test_one_pass_several_outputs_and_many_tiles(monkeypatch):
    """A survivor of three values (int16, float64, the int64 index: 2 runs a thread), over
    more than 32 tiles (a full look-back window behind the last ones)."""
    _need_harness()
    x, y = E.Load(0, "int16"), E.Load(1, "float64")
    prog = ElementProgram((InputSpec("x", "int16"), InputSpec("y", "float64")), (),
                          (Filter(E.Compare("lt", E.Binary("mod", x, E.Const(7, "int16"), "int16"),
                                            E.Const(3, "int16"))),),
                          (x, E.Binary("mul", y, E.Const(0.5, "float64"), "float64"), E.Index()))
    p = Pass(prog, ToArray(), "h_three")
    one, rts = _both(p, monkeypatch)
    assert compact_gpu.tile_runs("cuda", 2, ["int16", "float64", "int64"]) == 2
    tile = one.block * one.elems_per_thread
    n = 34 * tile + 77
    rng = np.random.default_rng(7)
    xs = rng.integers(-30000, 30000, n).astype(np.int16)
    ys = rng.standard_normal(n)
    keep = (xs % 7) < 3
    want = (xs[keep], ys[keep] * 0.5, np.arange(n, dtype=np.int64)[keep])
    for ks in (one, rts):
        got = plans.run_kernel_set(ks, plans.module_for([ks]), [xs, ys], schedule="free")
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)


def test_one_pass_window_matches_slicing():
    """take / skip: only survivors of rank [lo, hi) are stored, at r - lo, across tiles."""
    _need_harness()
    ks = gpu.render(WINDOWED, "cuda")
    assert [k.role for k in ks.kernels] == ["init", "scatter", "scatter"]
    module = plans.module_for([ks])
    tile = ks.block * ks.elems_per_thread
    n = 5 * tile + 7
    inputs = window_data(n)
    ref = full(inputs)
    for lo, hi in windows(len(ref[0]), tile * 3 // 10) + [(tile // 4, tile // 4 + tile)]:
        got = plans.run_kernel_set(ks, module, inputs, params(lo, hi), schedule="free")
        check(got, ref, lo, hi, "cuda one pass")


# ---- the walk back over windows of aggregates ------------------------------------------------
def _word(count: int, flag: int) -> int:
    return (int(count) << 2) | flag


@pytest.mark.parametrize("layout", ["aggregates", "prefix_in_window", "prefix_behind"])
@pytest.mark.parametrize("schedule", ["free", "alternate"])
def test_look_back_walks_windows_of_aggregates(layout, schedule):
    """Tile T - 1 (the ticket says so) looks back over T - 1 = 69 earlier tiles whose status
    words the test wrote: tile 0's inclusive prefix and aggregates (3 windows of 32 back);
    or an inclusive prefix at tile 40, inside the first window, with garbage aggregates in
    front of it that the segmented tree must discard; or one at tile 20 (second window)."""
    _need_harness()
    p = passes("float32")["where"]
    ks = gpu.render(p, "cuda")
    kernel = plans.module_for([ks]).kernel(ks.kernels[1].name)
    tile = ks.block * ks.elems_per_thread
    T = 70
    n = T * tile - 5                                   # the last tile is ragged
    x = data("float32", n, seed=11)
    keep = x > np.float32(THRESHOLD)
    counts = np.add.reduceat(keep.astype(np.int64), np.arange(0, n, tile))
    before = np.concatenate([[0], np.cumsum(counts)])  # survivors of tiles 0..t-1
    status = np.zeros(T, np.uint64)
    status[0] = _word(counts[0], 2)
    for t in range(1, T - 1):
        status[t] = _word(counts[t], 1)
    if layout == "prefix_in_window":
        status[40] = _word(before[41], 2)
        status[37:40] = _word(5_000, 1)              # before the prefix: discarded
        status[:37] = 0                                # and never read (0 would spin forever)
    elif layout == "prefix_behind":
        status[20] = _word(before[21], 2)
        status[5:20] = _word(3_000, 1)
        status[:5] = 0
    ticket = np.array([T - 1], np.uint32)
    total = np.full(1, -1, np.int64)
    last = int(counts[T - 1])
    room = int(before[T]) + 50_000                     # a wrong start fails the asserts, not the process
    out0, out1 = plans.poisoned(room, "float32"), plans.poisoned(room, "int64")
    kernel.launch(1, ks.block, [x, np.int64(n), np.int64(T), status, ticket, total, out0, out1], schedule=schedule)
    assert int(status[T - 1]) == _word(before[T], 2)
    assert total[0] == before[T] and ticket[0] == T
    start = int(before[T - 1])
    idx = np.arange(n, dtype=np.int64)[(T - 1) * tile:][keep[(T - 1) * tile:]]
    np.testing.assert_array_equal(out1[start:start + last], idx)
    np.testing.assert_array_equal(out0[start:start + last], x[idx] - np.float32(1))


def test_tile_zero_and_first_window_need_no_predecessor():
    """Tiles 0 and 1 launched alone with a fresh status array: tile 0 publishes its inclusive
    prefix at once; tile 1 reads it in its first window (lanes before tile 0 read nothing)."""
    _need_harness()
    ks = gpu.render(passes("int32")["where"], "cuda")
    kernel = plans.module_for([ks]).kernel(ks.kernels[1].name)
    tile = ks.block * ks.elems_per_thread
    n = 2 * tile
    x = data("int32", n, seed=3)
    keep = x > THRESHOLD
    status, ticket, total = np.zeros(2, np.uint64), np.zeros(1, np.uint32), np.zeros(1, np.int64)
    out0, out1 = plans.poisoned(int(keep.sum()), "int32"), plans.poisoned(int(keep.sum()), "int64")
    for _ in range(2):
        kernel.launch(1, ks.block, [x, np.int64(n), np.int64(2), status, ticket, total, out0, out1])
    c0 = int(keep[:tile].sum())
    assert list(status) == [_word(c0, 2), _word(keep.sum(), 2)] and total[0] == keep.sum()
    np.testing.assert_array_equal(out1, np.flatnonzero(keep))
    np.testing.assert_array_equal(out0, x[keep] - 1)


@pytest.mark.parametrize("order", ["reverse", "shuffled"])
def test_look_backs_in_any_order_once_every_aggregate_is_out(order):
    """Every tile has published its aggregate (what running blocks do before they look back);
    then the tiles look back one at a time in reverse or shuffled order (the ticket set for
    each launch), so each one meets a different mix of aggregates and inclusive prefixes
    before it: the outputs, the total and every final inclusive prefix are the same. (The
    windowed pass with the window [0, survivors): a wrong prefix can store nothing out of
    bounds, so a broken look-back fails the asserts, not the process.)"""
    _need_harness()
    ks = gpu.render(WINDOWED, "cuda")
    spec = ks.kernels[1]
    kernel = plans.module_for([ks]).kernel(spec.name)
    tile = ks.block * ks.elems_per_thread
    T = 70
    n = T * tile - 100
    flag, value = window_data(n, density=0.4, seed=5)
    keep = flag > 0
    kept = int(keep.sum())
    counts = np.add.reduceat(keep.astype(np.int64), np.arange(0, n, tile))
    status = np.array([_word(c, 1) for c in counts], np.uint64)
    tiles = list(range(T))[::-1] if order == "reverse" else [int(t) for t in np.random.default_rng(2).permutation(T)]
    bufs = {"in_flag": flag, "in_value": value, "n": np.int64(n), "num_blocks": np.int64(T), "tile_status": status,
            "total": np.full(1, -1, np.int64), "out0": plans.poisoned(kept, "float32"),
            "out1": plans.poisoned(kept, "int64"), "p_lo": np.int64(0), "p_hi": np.int64(kept), "p_t": np.int32(0)}
    for t in tiles:
        bufs["ticket"] = np.array([t], np.uint32)
        kernel.launch(1, ks.block, [bufs[a.name] for a in spec.args], schedule="free")
    assert [int(w) for w in status] == [_word(c, 2) for c in np.cumsum(counts)]
    assert bufs["total"][0] == kept
    np.testing.assert_array_equal(bufs["out1"], np.flatnonzero(keep))
    np.testing.assert_array_equal(bufs["out0"], value[keep])
