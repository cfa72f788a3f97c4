"""Shaped elements read whole on the GPU (seed 001's accessor: the widest loads an element's
size allows, register storage).

An input of shape (n, *s) reaches a pass as m = prod(s) component columns X[:, j] (shaped.py),
each an `InputSpec` with `element=(array, j, m)`. The GPU kernels read them one of two ways,
chosen by the launch loop per call together with the other inputs (one contiguity decision:
launch.plan's "contiguous" / "strided" variants, backends/gpu_elements.py):

* whole elements (contiguous variant): the columns are the components of one array whose
  elements are C-contiguous (element i's m scalars at i*m .. i*m + m-1 of one 16-byte aligned
  buffer). The kernel binds that buffer once (`in_<array>`) and reads component j of element
  i at i*m + j. lower/vector.py then reads a thread's whole run of `ept` elements -- ept*m
  scalars, R = ept*m*itemsize bytes starting at byte base*m*itemsize, base a multiple of ept
  -- with wide loads of W = min(16, largest power of two dividing R) bytes each (`load_width`):
  every run starts W-aligned, so every load is aligned for every element. With the kernel's
  usual run (ept = 16 / itemsize) R = 16*m: m 16-byte loads (PTX `ld.global.nc.v4`) whatever
  the shape -- a (n, 4) float32 element is one float4, four (n, 3, 3) float32 elements are
  nine, four vec3 float32 elements three. The run stays in registers; a run of more than
  MAX_RUN_BYTES takes fewer elements per thread (`run_elements`), down to one element per
  thread, read with R / W loads (seed 001's table: "16+ bytes: 1 per thread, multiple loads").
* gathered (strided variant): an F-ordered, transposed, sliced or unaligned array, or one
  whose columns are not a single array's: every component is a strided column read with
  its own stride, one scalar load per component.

A dialect without wide loads (WGSL: no pointer casts) still reads whole elements from one
buffer in the contiguous variant, one scalar load per component.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import dtypes as D

MAX_RUN_BYTES = 256        # a thread's run of elements held in registers (64 32-bit registers)
REGISTERS = 256            # 32-bit registers a thread of a 256-thread block has with one block per SM


@dataclass(frozen=True)
class ElementArray:
    """The m components of one shaped input: inputs first .. first + m - 1, all of `dtype`."""
    name: str
    first: int
    m: int
    dtype: str

    @property
    def buffer(self) -> str:
        """The kernel argument through which the contiguous variant reads the whole array."""
        return f"in_{self.name}"

    @property
    def nbytes(self) -> int:
        """Bytes per element."""
        return self.m * D.itemsize(self.dtype)


def arrays(prog) -> tuple[ElementArray, ...]:
    """The element arrays of `prog` whose components are all its inputs, consecutive and in
    order, of one dtype (a program rewritten so that this no longer holds reads those columns
    as plain strided columns: always correct)."""
    parts: dict[str, list] = {}
    for k, s in enumerate(prog.inputs):
        if getattr(s, "element", ()):
            parts.setdefault(s.element[0], []).append((k, s))
    out = []
    for name, got in parts.items():
        k0, s0 = got[0]
        m = s0.element[2]
        whole = len(got) == m and all(k == k0 + j and s.element == (name, j, m) and s.dtype == s0.dtype
                                      for j, (k, s) in enumerate(got))
        if whole and m > 1:
            out.append(ElementArray(name, k0, m, s0.dtype))
    return tuple(out)


def components(prog) -> dict[int, tuple[ElementArray, int]]:
    """input number -> (its element array, component j), for the inputs `arrays` covers."""
    return {a.first + j: (a, j) for a in arrays(prog) for j in range(a.m)}


def run_elements(ept: int, prog) -> int:
    """A kernel's elements per thread (`ept`, 16 / largest itemsize) halved while a run of its
    largest whole element exceeds MAX_RUN_BYTES (at least 1: one element per thread)."""
    largest = max((a.nbytes for a in arrays(prog)), default=0)
    while ept > 1 and ept * largest > MAX_RUN_BYTES:
        ept //= 2
    return ept


def load_width(a: ElementArray, ept: int) -> int:
    """Bytes per wide load of a thread's run of `ept` elements of `a`; 0: no wide load (the
    run's alignment allows no load wider than one scalar, or the run is too long to hold)."""
    size = D.itemsize(a.dtype)
    run = ept * a.nbytes
    if ept > 1 and run > MAX_RUN_BYTES:
        return 0
    width = min(16, run & -run)
    return width if width > size else 0


def strategy(a: ElementArray, ept: int, wide: bool) -> str:
    """explain()'s words for how the contiguous variant reads `a` (`wide`: the dialect has
    wide loads)."""
    width = load_width(a, ept) if wide else 0
    run = ept * a.nbytes
    per = f"{ept} elements per thread" if ept > 1 else "one element per thread"
    if not width:
        why = "no wide loads in this dialect" if not wide else "alignment allows none wider"
        return f"{per}, one scalar load per component from one buffer ({why})"
    return f"{per}, each run of {run} B read as {run // width} aligned {width}-byte load(s)"


def min_blocks(arrays_: tuple[ElementArray, ...], ept: int, wanted: int) -> int:
    """Blocks per multiprocessor a kernel reading whole element runs can promise the compiler
    (CUDA __launch_bounds__): `wanted` leaves 256 / wanted registers a thread, which the 32
    of a 1-D stream fit; a run of whole elements held in registers needs its 32-bit words on
    top of those (the rigid transform's 4 x 15 floats: 2 blocks, else ptxas spills)."""
    words = sum(ept * a.nbytes for a in arrays_) // 4
    return max(1, min(wanted, REGISTERS // (32 + words))) if words else wanted


# ---- the host side: whether a pass's component columns are one array's ----------------------
def address(a: np.ndarray) -> int:
    """The address of a's first element."""
    return a.__array_interface__["data"][0]


def component_view(cols) -> np.ndarray | None:
    """The (n, m) view whose [i, j] is cols[j][i], no copy, when the 1-D columns are evenly
    spaced components of one array (how a shaped input's columns X[:, j] arrive): one dtype
    and length, column j starting j * step bytes after column 0, one stride for all (any for
    n = 1); else None. The one test behind every whole-array read of the backends:
    cpu_elements (a map's (n, m) argument), cpu_columns (row-major column sums) and
    gpu_elements (the C-contiguous span a kernel reads with wide loads)."""
    c0 = cols[0]
    n, m = len(c0), len(cols)
    if not all(isinstance(c, np.ndarray) and c.ndim == 1 and c.dtype == c0.dtype and len(c) == n for c in cols):
        return None
    item = c0.itemsize
    stride, step = (m * item, item)
    if n:
        base = address(c0)
        stride, step = c0.strides[0], (address(cols[1]) - base if m > 1 else item)
        if any(address(c) != base + j * step or (n > 1 and c.strides[0] != stride) for j, c in enumerate(cols)):
            return None
    return np.lib.stride_tricks.as_strided(c0, (n, m), (stride, step), writeable=c0.flags.writeable)
