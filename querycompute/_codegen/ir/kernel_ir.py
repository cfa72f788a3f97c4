"""Kernel IR: what a GPU kernel is made of, before any dialect spells it.

Lowerings (the stage ops in ops/) build these nodes from a Pass; printers (dialects/) only spell them.
Two kinds of expressions live here:
  * kernel expressions (`K*`): index arithmetic, thread ids, buffer reads, shuffles. Their
    operators are plain C operators on index/count types that cannot overflow for any
    sequence the host accepts, so they print as-is.
  * `Elem`: an element computation (a codegen.expr tree) whose semantics (wrap-around,
    Python-signed division, NaN-propagating min/max...) the printer reproduces with the
    semantic helpers of dialects/c_family.py. Its Var names are kernel locals.
Every node is a frozen dataclass.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from . import expr as E
from ..launch import KernelArg


# --- kernel expressions -------------------------------------------------------------------
@dataclass(frozen=True)
class KVar:
    """A kernel local or scalar argument."""
    name: str
    dtype: str


@dataclass(frozen=True)
class KConst:
    value: Union[int, float, bool]
    dtype: str


@dataclass(frozen=True)
class KOp:
    """`a op b` with a C operator (+ - * / % < <= > >= == != && || >> <<) on index types."""
    op: str
    a: "KExpr"
    b: "KExpr"
    dtype: str


@dataclass(frozen=True)
class KCast:
    """C conversion of an index/count value (never used on element values)."""
    x: "KExpr"
    dtype: str


@dataclass(frozen=True)
class KSelect:
    """cond ? a : b (only the chosen operand is evaluated)."""
    cond: "KExpr"
    a: "KExpr"
    b: "KExpr"
    dtype: str


@dataclass(frozen=True)
class KThread:
    """A thread coordinate (1-D). kind: local_id, group_id, local_size, num_groups,
    lane (index in warp/SIMD group), warp (warp/SIMD group index in the block), simd_width
    (lanes per warp/SIMD group: CUDA 32, Metal [[threads_per_simdgroup]], 8 to 64)."""
    kind: str
    dtype: str = "int32"


@dataclass(frozen=True)
class KLoad:
    """buffer[index]: a kernel argument buffer or a shared array; storage conversions
    (float16, bool) are the printer's job. `volatile`: read through a volatile pointer
    (never cached in registers or a non-coherent cache: a value another block publishes,
    see `Fence`)."""
    buffer: str
    index: "KExpr"
    dtype: str
    volatile: bool = False


@dataclass(frozen=True)
class KShuffleDown:
    """The value `value` held by the lane `offset` lanes above (warp / SIMD group)."""
    value: "KExpr"
    offset: "KExpr"
    dtype: str


@dataclass(frozen=True)
class KShuffle:
    """The value `value` held by lane `lane` of the warp (every lane of the warp takes part:
    a broadcast when `lane` is the same for all)."""
    value: "KExpr"
    lane: "KExpr"
    dtype: str


@dataclass(frozen=True)
class Elem:
    """An element expression (codegen.expr) whose Var nodes name kernel locals."""
    expr: E.Expr

    @property
    def dtype(self) -> str:
        return self.expr.dtype


@dataclass(frozen=True)
class KLocal:
    """array[index] of a thread-local array (one a `VecLoad` or `LocalArray` declared), in register type."""
    array: str
    index: "KExpr"
    dtype: str


KExpr = Union[KVar, KConst, KOp, KCast, KSelect, KThread, KLoad, KShuffleDown, KShuffle, Elem, KLocal]


# --- statements ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Declare:
    var: KVar
    init: KExpr


@dataclass(frozen=True)
class Assign:
    var: KVar
    value: KExpr


@dataclass(frozen=True)
class Store:
    """buffer[index] = value (argument buffer or shared array); `volatile` as for KLoad."""
    buffer: str
    index: KExpr
    value: KExpr
    volatile: bool = False


@dataclass(frozen=True)
class If:
    cond: KExpr
    then: tuple
    orelse: tuple = ()


@dataclass(frozen=True)
class For:
    """for (var = init; cond; var = step) body"""
    var: KVar
    init: KExpr
    cond: KExpr
    step: KExpr
    body: tuple
    unroll: bool = False
    run: int = 0     # > 0: a thread's run of `run` consecutive elements (lower/element.per_thread_loop)
    whole: bool = False   # with run: the caller made sure the run lies below n (no tail to split off)


@dataclass(frozen=True)
class Barrier:
    """Block-wide barrier that also orders shared-memory accesses."""


@dataclass(frozen=True)
class Continue:
    """Skip to the next iteration of the innermost loop (a dropped element)."""


@dataclass(frozen=True)
class Break:
    """Leave the innermost loop."""


@dataclass(frozen=True)
class VecLoad:
    """Declare the thread-local array `name` of `count` register values of `dtype`: elements
    base .. base + count - 1 of argument buffer `buffer` read as one wide (count * itemsize
    bytes, at most 16) load. The launch plan guarantees what it needs: the buffer is
    unit-strided and 16-byte aligned (launch.plan's "contiguous" variant) and `base` is a
    multiple of `count`. Storage conversions (float16, bool) are the printer's job.
    `width` (a whole shaped-element run, _codegen/elements.py): the count * itemsize bytes
    are read as several loads of `width` bytes (a power of two, <= 16, > itemsize), `base`
    a multiple of width / itemsize; 0: one load of count * itemsize bytes."""
    name: str
    buffer: str
    base: "KExpr"
    dtype: str
    count: int
    width: int = 0


@dataclass(frozen=True)
class LocalArray:
    """Declare the thread-local array `name` of `count` register values of `dtype` (a
    `VecStore`'s source, filled by `SetLocal`)."""
    name: str
    dtype: str
    count: int


@dataclass(frozen=True)
class SetLocal:
    """array[index] = value, for a thread-local array (`LocalArray`)."""
    array: str
    index: "KExpr"
    value: "KExpr"


@dataclass(frozen=True)
class VecStore:
    """Store the thread-local array `name` (`count` register values of `dtype`) to elements
    base .. base + count - 1 of argument buffer `buffer` as one wide store (count * itemsize
    bytes, at most 16); VecLoad's rules, for an output buffer the launch loop allocated
    (16-byte aligned). Storage conversions (float16, bool) are the printer's job."""
    name: str
    buffer: str
    base: "KExpr"
    dtype: str
    count: int


@dataclass(frozen=True)
class Comment:
    text: str


@dataclass(frozen=True)
class Fence:
    """Device-wide memory fence: this thread's global-memory writes before it are seen by
    other blocks before its writes after it, and its reads after it are not done before
    those before it (CUDA __threadfence). With volatile accesses, the publish / consume
    protocol between blocks (ops/scan/gpu.py's look-back)."""


@dataclass(frozen=True)
class AtomicAdd:
    """var = buffer[index]; buffer[index] += value, atomically at device scope (relaxed).
    `var` must be declared already."""
    var: KVar
    buffer: str
    index: KExpr
    value: KExpr


@dataclass(frozen=True)
class Epilogue:
    """Statements every thread of a (physical) block runs once, after all of the block's
    work: only as a kernel's last statement. Printed as its body; lower/logical_blocks.py
    leaves it out of the loop over logical blocks, so in it group_id / num_groups are the
    physical block and grid (a reduction's last-block ticket: ops/reduce/gpu.py)."""
    body: tuple


Stmt = Union[Declare, Assign, Store, If, For, Barrier, Continue, Break, Comment, Fence, AtomicAdd, VecLoad,
             LocalArray, SetLocal, VecStore, Epilogue]


@dataclass(frozen=True)
class SharedArray:
    """A fixed-size array in block-shared memory (__shared__, __local, threadgroup)."""
    name: str
    dtype: str
    size: int


@dataclass(frozen=True)
class Kernel:
    name: str
    args: tuple[KernelArg, ...]
    shared: tuple[SharedArray, ...]
    body: tuple
    doc: str = ""
    min_blocks: int = 0     # > 0: blocks per SM the compiler must fit (CUDA __launch_bounds__)


# --- small constructors the lowerings share ------------------------------------------------
def i64(value: int) -> KConst:
    return KConst(value, "int64")


def i32(value: int) -> KConst:
    return KConst(value, "int32")


def op(o: str, a, b, dtype: str | None = None) -> KOp:
    return KOp(o, a, b, dtype or ("bool" if o in ("<", "<=", ">", ">=", "==", "!=", "&&", "||") else a.dtype))

