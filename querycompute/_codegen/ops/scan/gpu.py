"""Column operation "scan" on GPUs: the inclusive running fold of a ScanSpec (ir/stage_specs.py),
out[i] = combine(..combine(combine(seed, x0), x1).., xi), as a launch.KernelSet of shape
"scan" (input 0 and output 0: n elements of spec.dtype; params follow spec.params).

How to run it (backends/gpu_scan.py wraps this): `ks = render(spec, dialect)`, build
ks.source with ks.options, then `gpu_launch.LaunchLoop(ks, runtime).run([values], params, n)`
returns (out,): launch.plan shapes every launch, as for a pass.

Tiles. Block b owns the tile of BLOCK * ept consecutive elements from b * BLOCK * ept
(ept = RUNS runs of 16 bytes / element size); thread t owns ept consecutive elements of it,
so "tile, then thread, then element" is element order. (A warp's loads are then not
coalesced per instruction, but every line a warp touches is used whole from L1 within the
unrolled run: CUB's "direct blocked" load.) Every kernel that reads a tile does:
  1. thread fold: tacc = x_base combined with its next elements, left to right;
  2. block scan: Hillis-Steele on the thread folds in shared memory; at step d thread t
     sets s[t] = combine(s[t - d], s[t]) (left operand = earlier elements), so s[t] ends as
     the fold of threads 0..t. Threads past n hold nothing and are never read (valid
     threads form a prefix of the block);
  3. downsweep (kernels that write): run = carry (everything before the tile, seed
     included), then combine(run, s[t - 1]) for t > 0, then each element in turn:
     run = combine(run, x_i); out[i] = run.
The seed starts the carry chain, so it goes in once, in front of element 0.

Which multi-block algorithm a dialect runs follows its capabilities (`algorithm`): the look-back
where blocks have forward progress (DialectCaps.forward_progress: CUDA), else reduce-then-scan.

OpenCL, Metal and WGSL: reduce-then-scan, three kernels, no block ever waits on another:
  <name>_scan_partials   (tiles) steps 1-2; block_aggs[b] = fold of tile b
  <name>_scan_blocks     (one block) scans block_aggs a BLOCK-sized chunk at a time with
                         steps 2 and a running carry from the seed: block_carry[b] = seed
                         folded with tiles 0..b-1
  <name>_scan_downsweep  (tiles) steps 1-3 with carry = block_carry[b]
CUDA: single pass with a look-back after a tiny init kernel (ops/scan/lookback_gpu.py: the
algorithm, its memory order and why it is fixed for floats and decoupled otherwise).

Determinism: every grouping depends only on n (and the group size), never on timing, so a
float scan gives the same bits run to run (not np.cumsum's: a different grouping).
Bytes per element (`bytes_per_element`): reduce-then-scan reads the input twice and writes
once; the look-back kernel reads it once from DRAM (the downsweep re-reads its own tile,
just loaded, from cache) and writes once.
"""
from __future__ import annotations

from ... import dtypes as D
from ...ir import expr as E
from ...ir import kernel_ir as K
from ...dialects.by_name import DIALECTS, printer
from ...launch import BLOCK, BufferSpec, KernelArg, KernelSet, KernelSpec
from ...lower.block import LID
from ...lower.element import check_name, elems_per_thread, rename
from ...ir.program import ElementProgram
from ...ir.stage_specs import ScanSpec, check_combine
from .lookback_gpu import LookBack, exact_combine
from .names import BASE, N, NUM_BLOCKS, SH, TILE, VALID, as_i64 as _i64

SHAPE = "scan"
LOOKBACK = 32            # CUDA look-back group: tiles, one per lane of warp 0
# 16-byte runs per thread and tile: more work per block scan (its 16 barriers). GPUs: 4
# (64 bytes a thread: 16 float32, as CUB's scans take); CPU devices (pocl, the dialects whose
# printer folds runs apart), where each barrier costs most: 8 (int64 at 1e7: 2.5-3x faster
# than 1 run on pocl).
RUNS = {"gpu": 4, "cpu": 8}
__all__ = ["SHAPE", "algorithm", "render", "bytes_per_element", "describe", "lower"]

IN, OUT = "in_values", "out0"


def _ex(v) -> E.Expr:
    return E.Var(v.name, v.dtype) if isinstance(v, K.KVar) else v


def _min(a, b) -> K.KExpr:
    return K.KSelect(K.op("<", a, b), a, b, "int64")


class _Lower(LookBack):
    """The kernel IR of one ScanSpec (see the module docstring for the algorithm; the CUDA
    look-back's kernels come from scan_lookback.LookBack)."""

    def __init__(self, spec: ScanSpec, runs: int, bind: dict | None = None):
        check_name(spec.name, "scan")
        _check(spec)
        self.spec, self.dtype = spec, spec.dtype
        self.bind = bind or {}      # argument -> KernelArg replacing the default (ops/compact/gpu.py)
        # the C names of the input and output buffers (a bound one's own, so that a kernel set
        # holding these kernels beside others never gives one name two buffers)
        self.IN = self.bind["in"].name if "in" in self.bind else IN
        self.OUT = self.bind["out"].name if "out" in self.bind else OUT
        self.ept = elems_per_thread([spec.dtype]) * runs
        self.tile_size = BLOCK * self.ept
        self._prog = ElementProgram((), spec.params, (), ())
        self.params = tuple(KernelArg(f"p_{check_name(s.name, 'parameter')}", "param", s.dtype, k)
                            for k, s in enumerate(spec.params))

    def var(self, name: str) -> K.KVar:
        return K.KVar(name, self.dtype)

    def combine(self, a, b) -> K.Elem:
        """combine(acc=a, item=b): a holds the earlier elements."""
        e = rename(self.spec.combine, self._prog, {"acc": _ex(a), "item": _ex(b)})
        return K.Elem(e if e.dtype == self.dtype else E.Cast(e, self.dtype))

    def zero(self) -> K.KConst:
        return K.KConst(0, self.dtype)

    # ---- the per-tile steps ------------------------------------------------------------
    def tile_start(self, tile: K.KExpr) -> list:
        return [K.Declare(TILE, tile),
                K.Declare(BASE, K.op("*", K.op("+", K.op("*", TILE, K.i64(BLOCK)), _i64(LID)), K.i64(self.ept)))]

    def thread_fold(self) -> list:
        """Step 1: tacc = this thread's elements folded left to right; valid = it has any."""
        tacc, x, i, k = self.var("tacc"), self.var("x"), K.KVar("i", "int64"), K.KVar("k", "int32")
        rest = K.For(k, K.i32(1), K.op("<", k, K.i32(self.ept)), K.op("+", k, K.i32(1)), (
            K.Declare(i, K.op("+", BASE, _i64(k))),
            K.If(K.op(">=", i, N), (K.Break(),)),
            K.Declare(x, K.KLoad(self.IN, i, self.dtype)),
            K.Assign(tacc, self.combine(tacc, x))), unroll=True)
        return [K.Comment(f"Step 1: fold this thread's {self.ept} consecutive elements, left to right."),
                K.Declare(VALID, K.op("<", BASE, N)),
                K.Declare(tacc, self.zero()),
                K.If(VALID, (K.Assign(tacc, K.KLoad(self.IN, BASE, self.dtype)),)),
                rest]

    def block_scan(self, value: K.KVar) -> list:
        """Step 2: SH[t] = fold of the values of threads 0..t (valid threads only)."""
        off, act = K.KVar("offset", "int32"), K.KVar("active", "bool")
        left, right = self.var("left"), self.var("right")
        step = (K.Declare(act, K.op("&&", VALID, K.op(">=", LID, off))),
                K.Declare(left, K.KSelect(act, K.KLoad(SH, K.op("-", LID, off), self.dtype), self.zero(), self.dtype)),
                K.Barrier(),
                K.If(act, (K.Declare(right, K.KLoad(SH, LID, self.dtype)), K.Store(SH, LID, self.combine(left, right)))),
                K.Barrier())
        return [K.Comment("Step 2: ordered block scan (Hillis-Steele): s[t] = combine(s[t - d], s[t])."),
                K.Store(SH, LID, value), K.Barrier(),
                K.For(off, K.i32(1), K.op("<", off, K.i32(BLOCK)), K.op("<<", off, K.i32(1)), step)]

    def last_thread(self) -> K.KExpr:
        """The tile's last thread with elements: its SH slot holds the tile's fold."""
        left = _min(K.op("-", N, K.op("*", TILE, K.i64(self.tile_size))), K.i64(self.tile_size))
        return K.op("-", K.op("/", K.op("+", left, K.i64(self.ept - 1)), K.i64(self.ept)), K.i64(1))

    def downsweep(self, carry: K.KExpr) -> list:
        """Step 3: write every element's inclusive result."""
        run, prev, x, i, k = self.var("run"), self.var("prev"), self.var("x"), K.KVar("i", "int64"), K.KVar("k", "int32")
        return [K.Comment("Step 3: carry, then the earlier threads' fold, then each element in turn."),
                K.Declare(run, carry),
                K.If(K.op("&&", VALID, K.op(">", LID, K.i32(0))),
                     (K.Declare(prev, K.KLoad(SH, K.op("-", LID, K.i32(1)), self.dtype)),
                      K.Assign(run, self.combine(run, prev)))),
                K.For(k, K.i32(0), K.op("<", k, K.i32(self.ept)), K.op("+", k, K.i32(1)), (
                    K.Declare(i, K.op("+", BASE, _i64(k))),
                    K.If(K.op(">=", i, N), (K.Break(),)),
                    K.Declare(x, K.KLoad(self.IN, i, self.dtype)),
                    K.Assign(run, self.combine(run, x)),
                    K.Store(self.OUT, i, run)), unroll=True)]

    def seed(self) -> K.Elem:
        return K.Elem(E.Const(self.spec.seed.value, self.dtype))

    # ---- the kernels -------------------------------------------------------------------
    def args(self, *names) -> tuple[KernelArg, ...]:
        table = {"in": KernelArg(IN, "input", self.dtype, 0), "n": KernelArg("n", "n", "int64"),
                 "out": KernelArg(OUT, "output", self.dtype, 0),
                 "num_blocks": KernelArg("num_blocks", "value", "int64")}
        out = []
        for nm in names:
            if nm == "params":
                out += self.params
            elif nm in self.bind:
                out.append(self.bind[nm])
            else:
                out.append(table.get(nm) or KernelArg(nm, "scratch", _SCRATCH[nm] or self.dtype, scratch=nm))
        return tuple(out)

    def kernel(self, suffix: str, args, body, doc: str, shared: tuple = (SH,)) -> K.Kernel:
        arrays = {SH: K.SharedArray(SH, self.dtype, BLOCK), "sh_tile": K.SharedArray("sh_tile", "uint32", 1),
                  "sh_carry": K.SharedArray("sh_carry", self.dtype, 1),
                  "sh_state": K.SharedArray("sh_state", "int32", 1)}
        return K.Kernel(f"{self.spec.name}_scan_{suffix}", args, tuple(arrays[a] for a in shared), tuple(body), doc=doc)

    def partials(self) -> K.Kernel:
        body = (self.tile_start(_i64(K.KThread("group_id"))) + self.thread_fold() + self.block_scan(self.var("tacc"))
                + [K.If(K.op("==", LID, K.i32(0)),
                        (K.Store("block_aggs", TILE, K.KLoad(SH, self.last_thread(), self.dtype)),))])
        return self.kernel("partials", self.args("in", "params", "n", "block_aggs"), body,
                           f"{self.spec.name} scan step 1: the fold of every tile.")

    def blocks(self) -> K.Kernel:
        carry, tacc, chunk, j = self.var("carry"), self.var("tacc"), K.KVar("chunk", "int64"), K.KVar("j", "int64")
        before, prev, total = self.var("before"), self.var("prev"), self.var("total")
        body = (K.Declare(j, K.op("+", chunk, _i64(LID))),
                K.Declare(VALID, K.op("<", j, NUM_BLOCKS)),
                K.Declare(tacc, K.KSelect(VALID, K.KLoad("block_aggs", j, self.dtype), self.zero(), self.dtype)),
                *self.block_scan(tacc),
                K.If(VALID, (K.Declare(before, carry),
                             K.If(K.op(">", LID, K.i32(0)),
                                  (K.Declare(prev, K.KLoad(SH, K.op("-", LID, K.i32(1)), self.dtype)),
                                   K.Assign(before, self.combine(carry, prev)))),
                             K.Store("block_carry", j, before))),
                K.Declare(total, K.KLoad(SH, K.op("-", _min(K.op("-", NUM_BLOCKS, chunk), K.i64(BLOCK)), K.i64(1)),
                                         self.dtype)),
                K.Assign(carry, self.combine(carry, total)),
                K.Barrier())      # the next chunk's scan overwrites the slots just read
        loop = K.For(chunk, K.i64(0), K.op("<", chunk, NUM_BLOCKS), K.op("+", chunk, K.i64(BLOCK)), body)
        return self.kernel("blocks", self.args("block_aggs", "num_blocks", "params", "block_carry"),
                           [K.Comment("The seed starts the carry: it goes in once, in front of element 0."),
                            K.Declare(carry, self.seed()), loop],
                           f"{self.spec.name} scan step 2 (one block): block_carry[b] = seed folded with tiles 0..b-1.")

    def downsweep_kernel(self) -> K.Kernel:
        body = (self.tile_start(_i64(K.KThread("group_id"))) + self.thread_fold() + self.block_scan(self.var("tacc"))
                + self.downsweep(K.KLoad("block_carry", TILE, self.dtype)))
        return self.kernel("downsweep", self.args("in", "params", "n", "block_carry", "out"), body,
                           f"{self.spec.name} scan step 3: every tile's scan from its carry.")

_SCRATCH = {"block_aggs": None, "block_carry": None, "block_incl": None, "block_flags": "uint32", "ticket": "uint32"}


def algorithm(dialect: str) -> str:
    """The multi-block scan `dialect` runs: "lookback" where its blocks have forward progress
    (DialectCaps.forward_progress: a block may wait for an earlier one, ops/scan/lookback_gpu.py),
    else "reduce_then_scan" (no block ever waits on another). KeyError for a name no GPU
    dialect has."""
    return "lookback" if DIALECTS[dialect].CAPS.forward_progress else "reduce_then_scan"


def _check(spec: ScanSpec) -> None:
    check_combine(spec.combine, spec.dtype, spec.params, f"scan {spec.name}")


def lower(spec: ScanSpec, dialect: str, group: int = LOOKBACK):
    """-> (kernels in launch order, KernelSpecs, outputs, scratch, ept)."""
    lo = _Lower(spec, RUNS["cpu" if printer(dialect).FOLD_RUNS_APART else "gpu"])
    if algorithm(dialect) == "lookback":
        if not 1 < group <= 32:
            raise ValueError(f"look-back group of {group} tiles: 2..32 (one per lane of a warp)")
        kernels = [lo.init(), lo.lookback(group)]
        grids, roles = ("one", "tiles"), ("init", "scan")
        scratch = ("block_aggs", "block_incl", "block_flags", "ticket")
    else:
        kernels = [lo.partials(), lo.blocks(), lo.downsweep_kernel()]
        grids, roles = ("tiles", "one", "tiles"), ("partials", "scan", "downsweep")
        scratch = ("block_aggs", "block_carry")
    specs = [KernelSpec(k.name, k.args, g, "any", r) for k, g, r in zip(kernels, grids, roles)]
    buffers = tuple(BufferSpec(nm, _SCRATCH[nm] or spec.dtype, "one" if nm == "ticket" else "blocks")
                    for nm in scratch)
    return kernels, specs, (BufferSpec(OUT, spec.dtype, "n"),), buffers, lo.ept


def render(spec: ScanSpec, dialect: str, group: int = LOOKBACK) -> KernelSet:
    """Every kernel of the scan in `dialect` ("cuda", "opencl" or "metal") with its launch
    rules; `group` (CUDA) is the look-back group in tiles (tests shrink it). Raises
    codegen.errors.UnsupportedType when the dialect can't hold a dtype."""
    pr = printer(dialect)
    for d in [spec.dtype] + [p.dtype for p in spec.params]:
        pr.check(d)
    kernels, specs, outputs, scratch, ept = lower(spec, dialect, group)
    header = (f"// querycompute scan {spec.name}: {describe(spec, dialect)}\n"
              f"// compile options: {' '.join(pr.OPTIONS) or '(none)'}"
              + (f" ({pr.OPTIONS_WHY})" if pr.OPTIONS_WHY else ""))
    return KernelSet(dialect=dialect, pass_name=spec.name, shape=SHAPE, source=pr.render(kernels, header),
                     options=pr.OPTIONS, kernels=tuple(specs), outputs=outputs, scratch=scratch,
                     elems_per_thread=ept)


def bytes_per_element(spec: ScanSpec, dialect: str) -> list[tuple[str, int]]:
    """(kernel, DRAM bytes read + written per element) of the launches that touch every
    element, in launch order (the rest move O(tiles) block values): reduce-then-scan reads
    the input in two kernels and writes once; the look-back reads once and writes once (its
    downsweep re-reads the tile it just loaded, from cache)."""
    size, name = D.itemsize(spec.dtype), spec.name
    if algorithm(dialect) == "lookback":
        return [(f"{name}_scan_lookback", 2 * size)]
    return [(f"{name}_scan_partials", size), (f"{name}_scan_downsweep", 2 * size)]


def describe(spec: ScanSpec, dialect: str) -> str:
    """One line for explain(): algorithm, kernels, bytes per element."""
    total = sum(b for _, b in bytes_per_element(spec, dialect))
    if algorithm(dialect) == "lookback":
        how = (f"single-pass {'decoupled' if exact_combine(spec) else 'fixed-group'} look-back "
               f"(init + 1 kernel)")
    else:
        how = "reduce-then-scan (3 kernels)"
    return f"inclusive scan of {spec.dtype}: {how}, {total} B per element"
