"""GPU column operations that move whole rows: "gather" (out[i] = col[perm[i]], after a sort
or a top-k) and "reverse" (out[i] = col[n - 1 - i], the reverse() breaker, so a reversed
device column never visits the host). Kernel IR for CUDA, OpenCL, Metal and WGSL, run by the
launch loop like the sort kernels (sort.kernel_set).

Each block takes a tile of sort_ir.TILE rows, each thread the rows `slot, slot + BLOCK, ...`
of it (sort_ir.slots_strided): consecutive threads write consecutive rows, so every store is
coalesced; the gather's reads follow the permutation (random after a sort), the reverse's
reads are coalesced too (consecutive threads read consecutive rows, descending). Columns are
bound as their raw-bits dtype (order_keys.bits_dtype): a row is copied, never converted.
"""
from __future__ import annotations

from ...ir import kernel_ir as K
from ...launch import BufferSpec, KernelArg, KernelSet, Step
from . import ir as S
from .gpu import kernel_set
from .ir import I64, SLOT, TILE

__all__ = ["render_gather", "render_reverse", "gather_bytes_per_element", "reverse_bytes_per_element"]

N = K.KVar("n", I64)


def _rows(name: str, bits_dtypes: tuple[str, ...], extra: tuple, source_row, doc: str) -> K.Kernel:
    """out_c[i] = col_c[source_row(i)] for every row i < n of this block's tile."""
    i, p = K.KVar("i", I64), K.KVar("p", I64)
    cols = [KernelArg(f"col{c}", "input", d, c) for c, d in enumerate(bits_dtypes)]
    outs = [KernelArg(f"out{c}", "output", d, c) for c, d in enumerate(bits_dtypes)]
    body = [K.Declare(i, K.op("+", K.op("*", K.KCast(S.GROUP, I64), K.i64(TILE)), K.KCast(SLOT, I64))),
            K.If(K.op("<", i, N), (K.Declare(p, source_row(i)),
                                   *[K.Store(o.name, i, K.KLoad(c.name, p, c.dtype)) for c, o in zip(cols, outs)]))]
    return K.Kernel(name, (*cols, *extra, KernelArg("n", "n", I64), *outs), (), (S.slots_strided(body),), doc=doc)


def _set(kernel: K.Kernel, bits_dtypes, dialect: str, shape: str) -> KernelSet:
    outs = [BufferSpec(f"out{c}", d, "n") for c, d in enumerate(bits_dtypes)]
    return kernel_set([kernel], [Step(kernel.name)], dialect, kernel.name, shape, outs, [])


def render_gather(bits_dtypes: tuple[str, ...], dialect: str, index_dtype: str = "int32",
                  name: str = "qc_gather") -> KernelSet:
    """out_c[i] = col_c[perm[i]] for columns bound as their bits dtypes (inputs 0..m-1; input
    m: perm); n = len(perm). Bytes per row: `gather_bytes_per_element`."""
    perm = KernelArg("perm", "input", index_dtype, len(bits_dtypes))
    k = _rows(name, bits_dtypes, (perm,), lambda i: K.KCast(K.KLoad(perm.name, i, index_dtype), I64),
              f"{name}: out[i] = col[perm[i]] for every column.")
    return _set(k, bits_dtypes, dialect, "gather")


def render_reverse(bits_dtypes: tuple[str, ...], dialect: str, name: str = "qc_reverse") -> KernelSet:
    """out_c[i] = col_c[n - 1 - i] for columns bound as their bits dtypes (inputs 0..m-1);
    n = their length. Bytes per row: `reverse_bytes_per_element`."""
    k = _rows(name, bits_dtypes, (), lambda i: K.op("-", K.op("-", N, K.i64(1)), i),
              f"{name}: out[i] = col[n - 1 - i] for every column.")
    return _set(k, bits_dtypes, dialect, "reverse")


def _row_bytes(bits_dtypes) -> int:
    return sum(8 if d == "uint64" else int(d[4:]) // 8 for d in bits_dtypes)


def gather_bytes_per_element(bits_dtypes: tuple[str, ...], index_dtype: str = "int32") -> int:
    """The gather reads the index and each column's element and writes the element."""
    return (4 if index_dtype == "int32" else 8) + 2 * _row_bytes(bits_dtypes)


def reverse_bytes_per_element(bits_dtypes: tuple[str, ...]) -> int:
    """The reverse reads each column's element and writes it."""
    return 2 * _row_bytes(bits_dtypes)
