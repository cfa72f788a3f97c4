"""The data format every GPU runtime drives kernels from, and the device-free launch planner.

`codegen.gpu.render(p, dialect)` returns a `KernelSet`: the whole source text, its compile
options and an ordered list of `KernelSpec`s. `plan(kernel_set, n, contiguous)` turns that
into the exact `Launch`es for a sequence of length n. Runtimes (OpenCL, CUDA, the CPU
harness) must not invent shapes of their own: they allocate what `output_sizes` /
`scratch_sizes` say, then run the launches in order, binding each kernel's arguments in the
order of `KernelSpec.args`:

    kind        what to bind (C type in the signature)
    "input"     input buffer `index` (p.program.inputs[index]); elements of `dtype`; in the
                contiguous variant an argument named in `KernelSet.elements` takes the whole
                array of shaped elements whose component 0 input `index` is
    "stride"    int64 scalar: element stride of input `index` (strided variant only; may be
                negative; the pointer bound to the "input" arg points at element 0)
    "param"     scalar p.program.params[index] of `dtype`
    "n"         int64 scalar: the sequence length
    "output"    output buffer `index`: `KernelSet.outputs[index]` elements of `dtype`
    "scratch"   device scratch buffer `scratch` (never read by the host except "total")
    "value"     int64 scalar `Launch.values[name]` computed by the planner (e.g. the number of
                partials the previous kernel wrote): the main grid's block count, or the grid
                rule `KernelArg.rule` names

Storage types: bool buffers hold one byte per element (0/1, like numpy bool); float16
buffers hold IEEE half bits (numpy float16). All buffers are tightly packed 1-D arrays except
strided inputs in the strided variant.

Kernel shapes (`KernelSet.shape`):
  "elementwise"  ToArray without Filter. Output `k` has n elements; no scratch.
  "compact"      ToArray with Filter (order-preserving stream compaction). Outputs are sized n;
                 after the last launch scratch "total" (int64[1]) holds how many elements
                 survived: the results are the first `total` elements of every output.
                 With a ToArray window (`KernelSet.window`: the params lo, hi) outputs are
                 sized min(n, hi - lo) (rule "window", `output_sizes` with the params) and
                 "total" counts the survivors in the window.
  "reduce"       Reduce. Every output is one element (a result slot, see `ResultSlot`);
                 `ops.reduce.decode` turns the slot values into the raw results of
                 querycompute/backends/base.py. One launch where the dialect has a
                 device-scope fence (its last block folds the partials, with a `zeroed`
                 ticket counter), else a partials kernel and a finalize kernel.
  "scan"         An inclusive scan of one column (ops/scan/gpu.py; not a Pass: a column operation
                 between passes). Input 0 and output 0 have n elements; its kernels' main
                 grid is the "tiles" rule whatever kernel comes first (a "one" init kernel
                 may), and "blocks" buffers / "value" args count those tiles.
  "sort", "distinct", "topk", "gather"  Column operations of ops/sort/gpu.py and ops/sort/topk_gpu.py:
                 inputs are key (or gathered) columns bound as their unsigned bits type;
                 output 0 is the permutation (n entries; "topk": one tile, the first k
                 valid, k = param 0), distinct's n flags, or the gathered columns. Their
                 launches follow `KernelSet.schedule` (`Step`), one kernel launched
                 several times with other "value" args; buffer sizes may be "tile",
                 "tiles*R" (R per tile) or a fixed count.
  "group"        group_by (ops/group/gpu.py): key columns (as their bits type) and value columns in;
                 outputs sized n, and after the last launch scratch "total" holds the number
                 of groups G: the results are the first G elements of every output. Launches
                 follow `KernelSet.schedule` (the sort's steps, then the group kernels).
For n == 0, "elementwise", "compact" and "scan" plans are empty (the results are empty arrays and
nothing is launched); "reduce" plans always launch (grid 1), so identities come from the device.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

BLOCK = 256                 # threads per block (work-group, threadgroup) for every kernel
MAX_REDUCE_BLOCKS = 1024    # stage-1 grid cap: the grid depends only on n -> deterministic
MAIN_GRID = {"scan": "tiles", "compact": "tiles"}   # shapes whose main grid is not their first kernel's grid
COUNTED_SHAPES = ("compact", "group")   # results: the first scratch "total" elements of each output


@dataclass(frozen=True)
class KernelArg:
    """One kernel argument, in signature order. See the module docstring for `kind`."""
    name: str            # the C identifier in the kernel signature
    kind: str            # input | stride | param | n | output | scratch | value
    dtype: str           # element type (buffers) or scalar type, a codegen.dtypes name
    index: int = 0       # input / output / param number for those kinds
    scratch: str = ""    # scratch buffer name for kind "scratch"
    rule: str = ""       # kind "value": the grid rule it counts (default: the main grid)

    @property
    def is_buffer(self) -> bool:
        return self.kind in ("input", "output", "scratch")


@dataclass(frozen=True)
class BufferSpec:
    """A device buffer the runtime allocates: `size` is "n" (sequence length), "one" (a
    single element) or "blocks" (one element per block of the main grid, see `grid_size`).
    `zeroed`: the runtime fills it with zeros when it allocates it, and the kernels leave it
    zero at the end of every launch (a reduction's ticket counter: ops/reduce/gpu.py), so it
    is never cleared again while it lives."""
    name: str
    dtype: str
    size: str
    zeroed: bool = False


@dataclass(frozen=True)
class ResultSlot:
    """Reduce output buffer `KernelSet.outputs[i]` holds one value of aggregate `agg`:
    role "value" (sum/min/max/fold, or the `k`-th value of `first`), "count", "flag"
    (any/all as uint32 0/1) or "index" (first: int64 index, INT64_MAX when nothing survived),
    or "words" (word k, low first, of a 64-bit sum of type `wide` kept in two uint32 words by
    a dialect without 64-bit types: ops/reduce/two_words.py)."""
    agg: int
    role: str
    dtype: str
    k: int = 0
    wide: str = ""


@dataclass(frozen=True)
class KernelSpec:
    """One kernel of the set.

    grid:    "tiles"  ceil(n / tile) blocks, tile = block * elems_per_thread
             "reduce" min(max(1, ceil(n / tile)), MAX_REDUCE_BLOCKS) logical blocks (grid-stride
                      loop); the runtime may launch fewer physical ones (plan's `resident`)
             "one"    a single block
             "tiles/T" ceil(tiles / T) blocks (a scan of the per-tile counts, T counts a block)
    variant: "contiguous" / "strided": launched only when the inputs' contiguity matches
             (all inputs decide together; contiguous = unit stride and 16-byte aligned, for
             the wide loads of lower/vector.py); "any": always launched.
    role:    what it does: map | count | scan | scatter | partials | finalize | init | downsweep
    reads / writes: the buffer arguments (by name) the kernel loads / stores, from its
             kernel IR (gpu.render fills them; traffic.py turns them into bytes)
    """
    name: str
    args: tuple[KernelArg, ...]
    grid: str
    variant: str
    role: str
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()


@dataclass(frozen=True)
class KernelSet:
    """Everything a runtime needs for one Pass in one dialect (no device required).

    `source` holds every kernel; `options` are the compiler options the source was written
    for (IEEE-exact math: no FMA contraction, no fast math). `kernels` are in launch order;
    `plan()` selects and shapes them. `outputs` / `scratch` list the buffers to allocate."""
    dialect: str
    pass_name: str
    shape: str                                  # elementwise | compact | reduce | scan
    source: str
    options: tuple[str, ...]
    kernels: tuple[KernelSpec, ...]
    outputs: tuple[BufferSpec, ...]
    scratch: tuple[BufferSpec, ...] = ()
    result_slots: tuple[ResultSlot, ...] = ()   # reduce only, parallel to `outputs`
    block: int = BLOCK
    elems_per_thread: int = 1
    schedule: tuple["Step", ...] = ()           # multi-pass shapes (sort, topk): see `Step`
    window: tuple[int, int] | None = None       # compact with a ToArray window: params of lo, hi
    # whole shaped elements (_codegen/elements.py): (buffer, first input, m) per array the
    # contiguous variant binds once, at its first component's input, whole (n * m scalars)
    elements: tuple[tuple[str, int, int], ...] = ()

    def kernel(self, name: str) -> KernelSpec:
        for k in self.kernels:
            if k.name == name:
                return k
        raise KeyError(f"no kernel {name!r} in {self.pass_name}; have {[k.name for k in self.kernels]}")


@dataclass(frozen=True)
class Step:
    """One launch of a multi-pass shape (ops/sort/gpu.py, ops/sort/topk_gpu.py), which launches some
    kernels several times with other "value" args (a radix digit's shift, a ping-pong
    parity): `plan` follows `KernelSet.schedule` in order instead of `kernels`. `when`:
    "any", "small" (only when n fits one tile, block * elems_per_thread) or "large"."""
    kernel: str
    values: tuple[tuple[str, int], ...] = ()
    when: str = "any"


@dataclass(frozen=True)
class Launch:
    """One kernel launch: `grid` blocks of `block` threads (1-D). Bind `kernel.args` in order;
    kind "value" args take `values[arg.name]`."""
    kernel: KernelSpec
    grid: int
    block: int
    values: dict = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.kernel.name


def grid_size(ks: KernelSet, n: int, rule: str = "") -> int:
    """Blocks of the main grid for n elements (rule defaults to the set's first kernel's,
    or the shape's MAIN_GRID)."""
    rule = rule or MAIN_GRID.get(ks.shape) or ks.kernels[0].grid
    tiles = math.ceil(n / (ks.block * ks.elems_per_thread))
    if rule == "tiles":
        return tiles
    if rule == "reduce":
        return min(max(1, tiles), MAX_REDUCE_BLOCKS)
    if rule == "one":
        return 1
    if rule.startswith("tiles/"):               # tiles of tiles: e.g. a scan of the tile counts
        return math.ceil(tiles / int(rule[len("tiles/"):]))
    if rule == "n":                             # one block per element (ops/rows/gpu.py: a row)
        return n
    if rule.startswith("tiles*"):               # R blocks per tile (ops/rows/gpu.py: row chunks)
        return int(rule[len("tiles*"):]) * tiles
    raise ValueError(f"unknown grid rule {rule!r}")


def _size(spec: BufferSpec, ks: KernelSet, n: int) -> int:
    if spec.size == "n":
        return n
    if spec.size == "one":
        return 1
    if spec.size == "blocks":
        return grid_size(ks, n)
    if spec.size.startswith("tiles/"):          # one per block of a "tiles/T" grid
        return grid_size(ks, n, spec.size)
    if spec.size == "tile":                     # one tile: block * elems_per_thread
        return ks.block * ks.elems_per_thread
    if spec.size.startswith("tiles*"):          # a count per (row, tile), e.g. radix digits
        return int(spec.size[len("tiles*"):]) * grid_size(ks, n, "tiles")
    if spec.size.startswith("n*"):              # R per element (ops/rows/gpu.py: chunk partials)
        return int(spec.size[len("n*"):]) * n
    if spec.size.isdigit():                     # a fixed count
        return int(spec.size)
    raise ValueError(f"unknown buffer size rule {spec.size!r}")


def output_sizes(ks: KernelSet, n: int, params=()) -> list[int]:
    """Element count of each output buffer, parallel to `ks.outputs` (`params`, the call's
    parameter values, size the outputs of a windowed compaction: rule "window")."""
    return [window_length(ks, n, params) if b.size == "window" else _size(b, ks, n) for b in ks.outputs]


def window_length(ks: KernelSet, n: int, params) -> int:
    """min(n, hi - lo) for the window (lo, hi) of a compaction with a ToArray window: its
    outputs' size; the results are the first `total` of those elements."""
    lo, hi = (int(params[k]) for k in ks.window)
    if lo < 0 or hi < lo:
        raise ValueError(f"{ks.pass_name}: compaction window [{lo}, {hi}) needs 0 <= lo <= hi")
    return min(n, hi - lo)


def scratch_sizes(ks: KernelSet, n: int) -> dict[str, int]:
    """Element count of each scratch buffer by name (at least 1, so it can be allocated)."""
    return {b.name: max(1, _size(b, ks, n)) for b in ks.scratch}


def plan(ks: KernelSet, n: int, contiguous: bool, resident: dict[str, int] | None = None) -> list[Launch]:
    """Every launch, in order, for a sequence of length n whose inputs are all contiguous
    (`contiguous=True`) or not. Needs no device. `resident`: kernel name -> how many blocks
    of it the device runs at once (occupancy x multiprocessors); a "reduce"-grid kernel then
    launches at most that many physical blocks, which loop over the plan's logical blocks
    (codegen/logical_blocks.py: the results do not change)."""
    if n < 0:
        raise ValueError(f"sequence length must be >= 0, got {n}")
    if n == 0 and ks.shape != "reduce":
        return []
    if ks.schedule:
        return _scheduled(ks, n)
    variant = "contiguous" if contiguous else "strided"
    main_grid = grid_size(ks, n)
    launches = []
    for k in ks.kernels:
        if k.variant not in ("any", variant):
            continue
        values = {a.name: grid_size(ks, n, a.rule) if a.rule else main_grid for a in k.args if a.kind == "value"}
        grid = grid_size(ks, n, k.grid)
        if k.grid == "reduce" and resident and resident.get(k.name):
            grid = min(grid, resident[k.name])
        launches.append(Launch(k, grid, ks.block, values))
    return launches


def _scheduled(ks: KernelSet, n: int) -> list[Launch]:
    """The launches of `ks.schedule` that apply to n (see `Step`)."""
    size = "small" if n <= ks.block * ks.elems_per_thread else "large"
    launches = []
    for step in ks.schedule:
        if step.when in ("any", size):
            k = ks.kernel(step.kernel)
            launches.append(Launch(k, grid_size(ks, n, k.grid), ks.block, dict(step.values)))
    return launches


def launch_shapes(ks: KernelSet, n: int, contiguous: bool = True) -> list[dict]:
    """{"name", "grid", "block"} per launch, the format Backend.launch_shape returns."""
    return [{"name": l.name, "grid": (l.grid,), "block": (l.block,)} for l in plan(ks, n, contiguous)]


# Scalar kernel arguments travel in the type the printers declare them with: bool as a byte
# (C has no portable 1-byte bool argument across the dialects), float16 as float32 (not every
# dialect takes a half by value). Every runtime converts with this one function.
SCALAR_HOST_TYPE = {"bool": "uint8", "float16": "float32"}


def scalar_arg(dtype: str, value):
    """The numpy scalar to pass for a "param" argument of `dtype`."""
    return np.dtype(SCALAR_HOST_TYPE.get(dtype, dtype)).type(value)


def bind(launch: "Launch", inputs, strides, params, n: int, outputs, scratch) -> list:
    """The argument values of one launch, in `KernelSpec.args` order. `inputs`, `outputs` and
    `scratch` (by name) are the runtime's own buffers, of whatever type it passes; `strides`
    holds each input's element stride; scalars come back as numpy scalars of the declared
    argument types (see `scalar_arg`)."""
    out = []
    for a in launch.kernel.args:
        kind = a.kind
        if kind == "input":
            out.append(inputs[a.index])
        elif kind == "stride":
            out.append(np.int64(strides[a.index]))
        elif kind == "param":
            out.append(scalar_arg(a.dtype, params[a.index]))
        elif kind == "n":
            out.append(np.int64(n))
        elif kind == "output":
            out.append(outputs[a.index])
        elif kind == "scratch":
            out.append(scratch[a.scratch])
        elif kind == "value":
            out.append(np.int64(launch.values[a.name]))
        else:
            raise ValueError(f"unknown kernel argument kind {kind!r} in {launch.kernel.name}")
    return out
