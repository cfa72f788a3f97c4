"""Long rows (DESIGN.md section 4b, seed 002): `qc.query(X)` with X of shape (m, k), k above
shaped.MAX_SCALARS, where scalarization would unroll thousands of columns.

Two plans, both on the one input X read in place (any strides):
- "row-per-iteration": `select(f)` where f reduces the row to a value (r.sum(), logsumexp,
  np.linalg.norm(r), r @ r ...). The frontend (frontend/shaped_rows.py) turns f into row
  steps -- "row_s = reduce_j entry_s(x[i, j], row_0..row_s-1)" -- and a final expression of
  the row scalars. numpy runs each step as one NumPy axis=1 reduction over the whole array;
  cpu runs a generated numba kernel: one nogil entry point over a range of rows, run by the
  cpu backend's morsel scheduler (backends/cpu/morsels.py), each row's steps as inner loops
  over j (float16 and float32 sums accumulate in float64: at least NumPy's accuracy).
- "column-tiled": `sum / min / max / mean` with no select: X.sum(axis=0), elementwise across
  elements. numpy calls the axis=0 function; cpu runs rows_columns.py: tiles of (row
  chunk, column block), run by morsels, each adding its rows into a vector of partials read
  row by row (contiguous), the partials combined in chunk order -- no transpose copy.
GPU backends with a stage runtime (opencl, cuda, webgpu) run the GPU kernels of
backends/gpu_rows.py (ops/rows/gpu.py: one work-group per row with a tree, column
sums tiled so loads stay coalesced); a backend without long-row kernels refuses with
BackendUnavailableError. Other terminals after a row select (sum, min, ...) reduce its m
results with NumPy. Which plan runs follows the backend's declared capabilities
(BackendCaps.device, .stage_runtime), never its name.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..backends import registry
from ..errors import BackendUnavailableError, QueryError
from ..sources.shaped import MAX_SCALARS

TERMINALS = ("to_array", "to_list", "sum", "min", "max", "mean", "count")
COLUMN_KINDS = ("sum", "min", "max", "mean")


def is_long(shape: tuple) -> bool:
    return len(shape) == 1 and shape[0] > MAX_SCALARS


def has_long(source) -> bool:
    return any(is_long(s) for s in source.shapes or ())


def _backend(name: str):
    """The backend object, or None for a name no backend has (refused below as a backend
    without long-row kernels)."""
    try:
        return registry.get(name)
    except QueryError:
        return None


def _device(backend) -> str | None:
    """Where the backend's kernels run (BackendCaps.device), None for no backend."""
    return backend.caps.device if backend is not None else None


@dataclass
class _Stub:
    terminal: object = None


@dataclass
class RowLowered:
    """What plan.lower returns for long rows (the fields the engine reads of a Lowered)."""
    plan: "RowPlan"
    bindings: tuple = ()
    limits: tuple = ()
    finishes: tuple = ()
    shape: str = "scalar"
    fields: tuple = ()
    steps: tuple = ()
    pass_: _Stub = field(default_factory=_Stub)
    staged = False

    @property
    def row_plan(self):
        return self.plan

    def assemble(self, raw):
        return self.plan.finish(raw)


@dataclass
class RowPlan:
    strategy: str                  # "row-per-iteration" | "column-tiled"
    dtype: str                     # X's dtype
    k: int
    term: object
    steps: tuple = ()              # frontend.shaped_rows.RowStep
    final: object = None           # Expr of the row scalars (row-per-iteration)
    params: tuple = ()             # kernel parameter names, in order
    column_kind: str = ""

    def prepare(self, backend: str, stage_runtime=None):
        """The plan's Prepared on `backend`; `stage_runtime(backend)` gives the GPU runs their
        StageRuntime (the Runtime's one per backend: its kernel caches)."""
        b = _backend(backend)
        device = _device(b)
        if device == "reference":
            from ..backends.reference.rows import NumpyRows
            return NumpyRows(self)
        if device == "host":
            from ..backends.cpu.rows_numba import NumbaRows
            return NumbaRows(self)
        if device == "gpu" and b.caps.stage_runtime:    # backends/gpu_rows.py, ops/rows/gpu.py
            from ..backends.gpu.gpu_rows import prepare
            return prepare(self, stage_runtime(backend))
        raise BackendUnavailableError(
            f"long rows (elements of {self.k} values) run on the numpy, cpu, opencl, cuda and "
            f"webgpu backends; the {backend} long-row kernels are not built yet")

    def source(self, backend: str) -> str:
        """The generated kernel's source (the cpu backend's numba module)."""
        b = _backend(backend)
        device = _device(b)
        if device == "gpu":
            from ..backends.gpu.gpu_rows import render
            return render(self, b.dialect).source
        if device != "host":
            self.prepare(backend)              # numpy has no source; others: not built (raises)
            raise QueryError("the numpy backend runs NumPy calls, not generated source")
        if self.strategy == "column-tiled":
            from ..backends.cpu.rows_columns import kernel_source
            return kernel_source()
        from .._codegen.ops.rows.cpu import row_source
        return row_source(self)

    def finish(self, raw):
        out = raw[0]
        name = self.term.name
        if self.strategy == "column-tiled" or name == "to_array":
            return out
        if name == "to_list":
            return out.tolist()
        if name == "count":
            return len(out)
        if len(out) == 0 and name != "sum":
            from ..errors import EmptySequenceError
            raise EmptySequenceError(f"{name} of an empty sequence (no element survived)")
        return getattr(np, name)(out)

    def describe(self, backend: str = "") -> str:
        item = np.dtype(self.dtype).itemsize
        if self.strategy == "column-tiled":
            how = ("X.%s(axis=0): tiles of (row chunk, column block), each adds its rows "
                   "into a vector of partials (row by row, contiguous loads), then the "
                   "partials are combined in chunk order" % self.column_kind)
        else:
            how = (f"one row per iteration (rows in parallel), {len(self.steps)} pass(es) "
                   f"over each row: " + "; ".join(f"{s.name} = {s.op}_j(...)" for s in self.steps))
        if _device(_backend(backend)) == "gpu":
            from ..backends.gpu.gpu_rows import describe
            how = describe(self)
        return (f"long rows: elements of {self.k} x {self.dtype} ({self.k * item} B/element, "
                f"{item} B per value) -- strategy: {self.strategy}; {how}")


def lower(source, dts: tuple, ops: tuple, term, infos: list) -> RowLowered:
    """The long-row plan of `qc.query(X)[.select(f)].<terminal>()`."""
    if source.kind != "array":
        raise QueryError("long rows (elements above %d values) are supported alone, "
                         "qc.query(X), not zipped or as table columns" % MAX_SCALARS)
    (k,) = source.shapes[0]
    dtype = dts[0]
    kinds = [op.kind for op in ops]
    if term.name not in TERMINALS or any(spec.fn is not None for _, spec in term.specs):
        raise QueryError(f"{term.name}() on long rows is not supported; long rows support "
                         f"{', '.join(TERMINALS)} (without functions)")
    if not kinds:
        if term.name not in COLUMN_KINDS:
            raise QueryError(f"{term.name}() of long rows needs a select that reduces each "
                             f"row first, e.g. .select(lambda r: r.sum())")
        return RowLowered(RowPlan("column-tiled", dtype, k, term, column_kind=term.name))
    if kinds != ["select"]:
        raise QueryError("long rows support one select that reduces each row "
                         "(.select(lambda r: r.sum())), then a terminal; got " + ".".join(kinds))
    from querycompute._codegen.ir import expr as E

    from ..frontend import translate
    from ..frontend.shaped import ShapedVal
    from ..frontend.shaped_rows import RowContext, row_value
    from ..frontend.values import Scalar
    from .fusion import _Builder
    src, env = infos[0]
    ctx = RowContext(k)
    b = _Builder()
    out = translate(src, (row_value(ctx, Scalar(E.Load(0, dtype), None)),), env,
                    lambda nm, dt: b.param((0, nm), dt))
    if isinstance(out, ShapedVal) or not isinstance(out, Scalar):
        raise QueryError(f"{src.where(src.body)}: a select over long rows must reduce each row "
                         f"to one value (r.sum(), r.max() + ..., np.linalg.norm(r)); rows as "
                         f"results are not supported")
    if any(isinstance(n, E.Load) for n in E.walk(out.expr)):
        raise QueryError(f"{src.where(src.body)}: the result still depends on single entries "
                         f"of the row; reduce them (r.sum(), r.max())")
    final = out.expr
    plan = RowPlan("row-per-iteration", dtype, k, term, tuple(ctx.steps), final,
                   tuple(p.name for p in b.params))
    return RowLowered(plan, tuple(b.bindings), (None,) * len(b.params),
                      steps=(("select", 8, final.dtype),))

