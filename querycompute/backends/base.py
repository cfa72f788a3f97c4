"""The contract between the query layer and a backend, and the trace of what ran.

A backend receives one fused `codegen.program.Pass` plus its run-time arguments and returns
raw results; the query layer turns raw results into the user's values (empty rules, mean,
result dtypes) in one place, so every backend shares them.

Raw results a backend returns from `Prepared.run_quick`:
  ToArray -> tuple of 1-D numpy arrays (cupy for device-resident inputs), one per program
             output, each of the output's dtype, holding the surviving elements in order.
  Reduce  -> list with one entry per Agg, in order:
               sum/min/max/fold: a numpy scalar of agg.dtype (the identity when nothing survived)
               count: int;  any/all: bool
               first: (index: int, values: tuple of numpy scalars) with index -1 if none survived
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Sequence

from typing import TYPE_CHECKING

if TYPE_CHECKING:              # (the kernel compiler loads when a backend first compiles)
    from querycompute._codegen.ir.program import Pass


@dataclass
class KernelRun:
    """What one launched kernel did (one row of qc.last_trace())."""
    name: str
    dialect: str
    grid: tuple = ()
    block: tuple = ()
    cache: str = ""                # "memory", "disk" or "compiled" ("" lets the engine fill it)
    compile_ms: float = 0.0
    run_ms: float = 0.0


class Trace:
    """What the last terminal operator did. (A plain class: one is made per terminal call.)"""
    __slots__ = ("backend", "terminal", "n", "kernels", "fallback", "total_ms", "tier", "chunks")

    def __init__(self, backend: str = "", terminal: str = "", n: int = 0, fallback: str | None = None):
        self.backend = backend
        self.terminal = terminal
        self.n = n
        self.kernels: list[KernelRun] = []
        self.fallback = fallback        # why the requested backend was not the one that ran
        self.total_ms = 0.0
        # "kernel": the backend's compiled kernel answered; "numpy": the numpy tier answered
        # (the reference interpreter, same semantics) while that kernel compiles in the
        # background, or for good when its background compile failed (docs/guide.md)
        self.tier = "kernel"
        self.chunks = 0                 # > 0: the input streamed through the device in chunks

    def __repr__(self) -> str:
        return f"Trace(backend={self.backend!r}, tier={self.tier!r}, terminal={self.terminal!r}, " \
               f"n={self.n}, kernels={self.kernels!r}, fallback={self.fallback!r}, " \
               f"total_ms={self.total_ms:.3f})"

    def __str__(self) -> str:
        lines = [f"backend={self.backend} terminal={self.terminal} n={self.n} total={self.total_ms:.3f} ms"]
        if self.tier != "kernel" and self.backend != "numpy":
            lines.append(f"TIER: the numpy tier answered (the {self.backend} kernel was not ready)")
        if self.fallback:
            lines.append(f"FALLBACK: {self.fallback}")
        if self.chunks:
            lines.append(f"STREAMED: {self.chunks} chunks (QUERYCOMPUTE_DEVICE_MEMORY; streaming.py)")
        for k in self.kernels:
            shape = f" grid={k.grid} block={k.block}" if k.grid else ""
            lines.append(f"  {k.dialect}:{k.name}{shape} cache={k.cache} "
                         f"compile={k.compile_ms:.3f} ms run={k.run_ms:.3f} ms")
        return "\n".join(lines)


class Prepared:
    """A compiled pass, ready to launch. The query layer keeps these in its memory cache keyed
    by a cheap signature, so a warm call is a dict lookup and then `run_quick`."""
    origin: str = "compiled"        # where the binary came from: "compiled", "disk" or "memory"
    compile_ms: float = 0.0

    # The one run protocol: `run_quick` runs and returns what it needs to describe the run
    # later; `trace_rows` makes the trace rows from that, only when qc.last_trace() asks
    # (per-call bookkeeping such as reading kernel profiling times is worth deferring).
    def run_quick(self, inputs: Sequence[Any], params: Sequence[Any], n: int) -> tuple:
        """Execute -> (raw results described above, row). `inputs` follow p.program.inputs
        (1-D arrays, maybe strided); `params` follow p.program.params (numpy scalars of the
        param dtypes); n is the sequence length."""
        raise NotImplementedError

    def trace_rows(self, row) -> list[KernelRun]:
        """One KernelRun per kernel the run that returned `row` launched (cache="memory" when
        this Prepared had run before, else its origin)."""
        raise NotImplementedError


@dataclass(frozen=True)
class BackendCaps:
    """What a backend has, declared once by its class (`Backend.caps`; DESIGN.md section 2:
    capabilities are declared, not probed). The planner and the runtimes read these fields,
    never the backend's name; what its dialect has is the dialect's (DialectCaps,
    querycompute/_codegen/capabilities.py, for `Backend.dialect`)."""
    # where its kernels run: "reference" (the numpy interpreter: NumPy calls, no kernels),
    # "host" (numba-compiled CPU code), "gpu" (kernels of a GPU dialect)
    device: str
    # its own StageRuntime runs column operations (sort, scan, group_by...) and long rows
    # (pipeline.stage_runtime); False: metal (source only in this version)
    stage_runtime: bool = True
    # its passes store 64-bit columns; False (webgpu): a group_by's 64-bit sums receive their
    # narrow values (plan/group_narrow.py)
    wide_columns: bool = True
    # a staged plan's columns stay on its device between stages (device_columns.py)
    device_columns: bool = False
    # a host input larger than the device memory budget streams through it in chunks
    # (run/streaming.py)
    streams: bool = False
    # it folds in element order, so a fold not provably associative runs (plan/plan.py, refuse_parallel)
    in_order_fold: bool = False
    # it reads table parameters (expr.Lookup: a string function's value per distinct string,
    # frontend/strings.py); False: the GPU dialects, which refuse such a plan (HostOnlyError)
    lookup_tables: bool = False
    # `loads_fast` may say yes: a pass in its disk cache loads in a few ms (the cpu backend's
    # llvm route), so tiered execution loads it before answering (run/engine.py)
    fast_loads: bool = False
    # its kernels' float sums have the numpy tier's bits (the cpu's fixed sum order has a
    # NumPy twin: _codegen/sum_order.py; numpy is that tier), so the numpy tier answers a
    # float sum at once; else the first call waits for the kernel (run/tiers.differs)
    tier_sums: bool = False


class Backend:
    """Base class of a backend (one instance per process, registered by name)."""
    name: str = "?"
    dialect: str = "?"          # the codegen dialect whose source `source()` returns
    caps: BackendCaps           # what it has: every backend class declares its own
    is_gpu = False              # runs on a real GPU device here (`auto` may pick it)

    @property
    def narrow_group_sums(self) -> bool:
        """A group_by's int64 / float64 sums and means of narrow values: the pass stores the
        values in their own type, the group stage widens them (plan/group_narrow.py)."""
        return not self.caps.wide_columns

    def availability(self) -> tuple[bool, str]:
        """(can run here, reason and what to install when not). Cheap after the first call."""
        raise NotImplementedError

    def gpu_possible(self) -> bool:
        """False when this backend surely has no GPU device here, found without opening a
        device (`auto` asks it before `availability`); True: availability and is_gpu tell."""
        return True

    def source(self, p: Pass) -> str:
        """Every kernel of the pass, in this backend's dialect. Needs no device."""
        raise NotImplementedError

    def launch_shape(self, p: Pass, n: int) -> list[dict]:
        """Per kernel: {"name", "grid", "block"} for explain(); needs no device."""
        return []

    def prepare(self, p: Pass) -> Prepared:
        """Compile (or fetch from the kernel cache) everything the pass needs."""
        raise NotImplementedError

    def loads_fast(self, p: Pass) -> bool:
        """Whether `prepare(p)` would only load the pass from the disk cache, in a few ms:
        then tiered execution loads it before answering instead of starting on the numpy
        tier (DESIGN.md 5f). Must itself be cheap and import no compiler."""
        return False


def now_ms() -> float:
    return time.perf_counter() * 1e3
