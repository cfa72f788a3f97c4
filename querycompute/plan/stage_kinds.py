"""The stages a staged plan is made of (stages.py plans them, run/pipeline.py runs them,
api/explain_stages.py prints them): the columns between stages, take/skip windows, and one
frozen record per stage kind. group_plan.GroupStage and join_plan.JoinStage live beside
their planning.

Each stage kind runs itself: `run(ex, call, i, state, keep) -> (state, keep, result)`, where
`ex` is the executor (run/pipeline.StagedPrepared: the backend's StageRuntime as `ex.runtime`,
the compiled passes behind `ex.run_pass`), `call` the call's own values (params, n, the trace
rows, the caller's inputs), `state` the columns and `keep` a distinct's flags; `result` is
the plan's raw result when the stage ends the plan, else None. A column operation is one
StageRuntime method call; a pass asks the executor to launch its compiled kernel. The
executor's loop has no case per stage kind."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from querycompute._codegen.ir import expr as E
from querycompute._codegen import order_keys
from querycompute._codegen.ir.stage_specs import ScanSpec, SortSpec

from ..frontend.datetimes import loaded, storage
from ..frontend.values import OuterSide, RecordVal, Scalar, StrCodes, TupleVal
from .fusion import Lowered, early_ops


class Stage:
    """What every stage kind answers (the defaults: a stage without kernels of its own).
    `run` is the executor's protocol (module docstring); the rest is what explain() prints
    of it: its GPU kernels in a dialect, their bytes per element, the host runtime's line,
    and the element dtypes after it."""
    column_op = False              # a column operation reading its input on the runtime's device
    ends_plan = False              # its result is the plan's (a terminal, a group_by)
    # its float results depend on an order of adds that each runtime chooses (a group_by's
    # sums, a scan): the numpy tier can't promise the kernel's bits (run/tiers.differs)
    adds_floats_in_own_order = False

    def run(self, ex, call, i: int, state: list, keep):
        raise NotImplementedError(type(self).__name__)

    def gpu_kernels(self, dialect: str, element_dtypes) -> list:
        """(what, KernelSet) of its GPU kernels in `dialect` (the generators are imported
        here: they are needed only to show a GPU plan, and cost ~0.6 s to import)."""
        return []

    def gpu_traffic(self, dialect: str, element_dtypes) -> list:
        """Per kernel launch that touches every element: bytes read + written per element."""
        return []

    def host_lines(self, runtime, element_dtypes) -> list:
        """explain()'s lines on a host runtime (`runtime`: its StageRuntime): the runtime's own
        description of the operator where it has one (its describe_<op>), else the stage's.
        `element_dtypes`: the dtypes of the columns going into the stage."""
        return []

    def dtypes_after(self, current):
        """The element's column dtypes after this stage (those going into it: `current`)."""
        return current


def bits_dtypes(dtypes) -> tuple:
    """The unsigned words the order-preserving key transform gives each dtype (gathers move
    element columns as bits)."""
    return tuple(order_keys.bits_dtype(d) for d in dtypes)


def traffic_lines(head: str, rows, extra=(), after=()) -> list:
    """`head`, then each kernel's bytes per element, `extra`, the total, then `after`."""
    out = [head] + [f"  {name}: {b} B per element" for name, b in rows] + list(extra)
    return out + [f"  total: {sum(b for _, b in rows)} B per element"] + list(after)


@dataclass(frozen=True)
class Columns:
    """The element as columns: its shape ("scalar" | "tuple" | "record"), record field
    names, and the dtype of each leaf column."""
    shape: str
    fields: tuple
    dtypes: tuple
    strings: tuple = ()    # (leaf, string column) of the leaves holding string codes


@dataclass(frozen=True)
class Window:
    """Consecutive take / skip: ("take" | "skip" | "upto" | "at", parameter index or -1,
    constant) per operator; "upto" i keeps i + 1 elements (element_at after a sort), "at" i
    skips i elements, or all of them when i < 0 (element_at's position)."""
    ops: tuple

    def bounds(self, params, n: int) -> tuple[int, int]:
        lo, hi = 0, n
        for kind, at, const in self.ops:
            v = int(params[at]) if at >= 0 else const
            if kind == "skip":
                lo = min(hi, lo + max(v, 0))
            elif kind == "at":                     # element_at(i): nothing for i < 0
                lo = min(hi, lo + v) if v >= 0 else hi
            else:
                hi = min(hi, lo + max(v + (kind == "upto"), 0))
        return lo, hi


@dataclass(frozen=True)
class PassStage(Stage):
    lowered: Lowered
    first: int                     # its first parameter in the plan's parameter list
    keep_input: bool = False       # its last input is a distinct's keep flags
    window: Optional[Window] = None
    range_at: tuple = (-1, -1)     # local param indexes of a range source's start, step
    # a first pass that only copies source columns for a stage that only reads them (a join's
    # side, a distinct: stages.materialize(forward=True)): the source column index of each output
    picks: Optional[tuple] = None
    # a join side's first pass that filters source columns and computes nothing of the element
    # (stages.materialize(select=True)): the pass storing only [survivor row numbers, keys]
    # instead, and the source column index of each element column (read in place)
    selects: Optional[Lowered] = None
    hands_on: Optional[tuple] = None

    def dtypes_after(self, current):
        return self.lowered.pass_.program.output_dtypes

    def run(self, ex, call, i: int, state: list, keep):
        if i in ex.selecting:          # (the executor runs `selects` for this stage)
            rows, *keys = ex.run_pass(i, self, state, keep, call.params, call.n, call.rows, selects=True)
            ex.kept(i, len(rows), call.n)
            call.selected = (rows, keys)
            dtypes = self.lowered.pass_.program.output_dtypes
            return [np.ascontiguousarray(state[j]).view(np.dtype(d))
                    for j, d in zip(self.hands_on, dtypes)], None, None
        if self.picks is not None and not ex.device and keep is None:
            got = [state[j] for j in self.picks]
            if all(type(c) is np.ndarray and c.flags.c_contiguous and c.dtype == np.dtype(d)
                   for c, d in zip(got, self.lowered.pass_.program.output_dtypes)):
                return got, None, None     # the source's columns as they are: no copy
        got = ex.fused_group(i, self, state, keep, call.params, call.n, call.rows)
        if got is not None:            # this pass and the group_by after it, as one pass
            return state, keep, got
        out = list(ex.run_pass(i, self, state, keep, call.params, call.n, call.rows, ex.device))
        if i in ex.selects:            # (its `selects` variant was left for this call)
            ex.kept(i, len(out[0]), call.n)
        return out, None, None


@dataclass(frozen=True)
class SortStage(Stage):
    spec: SortSpec
    keys: tuple                    # column indexes of the keys (the first primary)
    element: int                   # the first `element` columns are the element's leaves
    values_only: bool              # the one key is the one element column: sort it directly
    window: Optional[Window] = None
    column_op = True               # reads its input columns on the runtime's device

    def run(self, ex, call, i: int, state: list, keep):
        rt, keys = ex.runtime, [state[k] for k in self.keys]
        if self.values_only:
            return [rt.sort_values(self.spec, keys[0], call.rows)], keep, None
        lo, hi = self.window.bounds(call.params, call.n) if self.window is not None else (0, call.n)
        perm = rt.sort(self.spec, keys, hi if self.window is not None else None, call.rows)
        return rt.gather(state[:self.element], perm[lo:hi], call.rows), keep, None

    def dtypes_after(self, current):
        return current if current is None else current[:self.element]

    def gpu_kernels(self, dialect: str, element_dtypes) -> list:
        from querycompute._codegen.ops.sort import gather_gpu as gather
        from querycompute._codegen.ops.sort import gpu as sort
        from querycompute._codegen.ops.sort import topk_gpu as topk
        sets = [("top-k", topk.render_topk(self.spec, dialect))] if self.window is not None \
            else [("sort", sort.render_sort(self.spec, dialect))]
        return sets + [("gather", gather.render_gather(bits_dtypes(element_dtypes), dialect))]

    def gpu_traffic(self, dialect: str, element_dtypes) -> list:
        from querycompute._codegen.ops.sort import gather_gpu as gather
        from querycompute._codegen.ops.sort import gpu as sort
        from querycompute._codegen.ops.sort import topk_gpu as topk
        if self.window is not None:
            rows = topk.bytes_per_element(self.spec)
            head = "top-k: radix select of the k-th key, order-preserving compaction, one-block sort of k"
        else:
            rows = sort.bytes_per_element(self.spec, dialect=dialect)
            head = (f"stable LSD radix sort, {len(sort.passes(self.spec))} passes of 8-bit digits (a "
                    f"stable scatter each; a key's first byte counted by a read, the next passes' "
                    f"counts added by the scatter before them), int32 index payload")
        g = gather.gather_bytes_per_element(bits_dtypes(element_dtypes))
        return traffic_lines(head, rows, [f"  gather of the element columns: {g} B per "
                                          f"{'output row' if self.window else 'element'}"])

    def host_lines(self, runtime, element_dtypes) -> list:
        if self.window is not None:
            return [f"top-k (per-chunk candidates, then a sort of those); {runtime.name} column operation"]
        return [_radix_line(self.spec, runtime.name)]


def _radix_line(spec, runtime_name: str) -> str:
    key = sum(np.dtype(d).itemsize for d in spec.key_dtypes)
    return (f"LSD radix sort, up to {key} passes of 8-bit digits (a pass whose digit is the same "
            f"for every key is skipped); {runtime_name} column operation")


@dataclass(frozen=True)
class DistinctStage(Stage):
    spec: SortSpec
    keys: tuple
    element: int
    column_op = True

    def run(self, ex, call, i: int, state: list, keep):
        flags = ex.runtime.first_occurrence(self.spec, [state[k] for k in self.keys], call.rows)
        return state[:self.element], flags, None      # the next pass keeps the flagged

    def dtypes_after(self, current):
        return current if current is None else current[:self.element]

    def gpu_kernels(self, dialect: str, element_dtypes) -> list:
        from querycompute._codegen.ops.sort import gpu as sort
        return [("first-occurrence flags", sort.render_sort(self.spec, dialect, distinct=True))]

    def gpu_traffic(self, dialect: str, element_dtypes) -> list:
        from querycompute._codegen.ops.sort import gpu as sort
        return traffic_lines("stable LSD radix sort of the keys (8-bit digits), then flags where a key changes",
                             sort.bytes_per_element(self.spec, distinct=True, dialect=dialect))

    def host_lines(self, runtime, element_dtypes) -> list:
        return runtime.describe_distinct(self.spec) or [_radix_line(self.spec, runtime.name)]


@dataclass(frozen=True)
class ScanStage(Stage):
    spec: ScanSpec
    first: int
    column_op = True
    adds_floats_in_own_order = True

    def run(self, ex, call, i: int, state: list, keep):
        p = call.params[self.first:self.first + len(self.spec.params)]
        return [ex.runtime.scan(self.spec, state[0], p, call.rows)], keep, None

    def dtypes_after(self, current):
        return (self.spec.dtype,)

    def gpu_kernels(self, dialect: str, element_dtypes) -> list:
        from querycompute._codegen.ops.scan import gpu as scan
        return [("scan", scan.render(self.spec, dialect))]

    def gpu_rows(self, dialect: str) -> list:
        """(kernel, bytes per element) of the scan's GPU passes."""
        from querycompute._codegen.ops.scan import gpu as scan
        return scan.bytes_per_element(self.spec, dialect)

    def gpu_traffic(self, dialect: str, element_dtypes) -> list:
        from querycompute._codegen.ops.scan import gpu as scan
        return traffic_lines(scan.describe(self.spec, dialect), self.gpu_rows(dialect))

    def host_lines(self, runtime, element_dtypes) -> list:
        b = np.dtype(self.spec.dtype).itemsize
        return [f"two passes over fixed chunks (chunk totals, then running fold with carry-in): "
                f"reads {2 * b} B, writes {b} B per element"]


@dataclass(frozen=True)
class ReverseStage(Stage):
    column_op = True

    def run(self, ex, call, i: int, state: list, keep):
        return ex.runtime.reverse(state, call.rows), keep, None

    def gpu_kernels(self, dialect: str, element_dtypes) -> list:
        from querycompute._codegen.ops.sort import gather_gpu as gather
        return [("reverse", gather.render_reverse(bits_dtypes(element_dtypes), dialect))]

    def gpu_traffic(self, dialect: str, element_dtypes) -> list:
        from querycompute._codegen.ops.sort import gather_gpu as gather
        return traffic_lines("reverse on the device: out[i] = col[n - 1 - i], coalesced reads and writes",
                             [("qc_reverse", gather.reverse_bytes_per_element(bits_dtypes(element_dtypes)))])


@dataclass(frozen=True)
class WhileStage(Stage):
    lowered: Lowered               # first(index) of the elements whose predicate is false
    first: int
    take: bool                     # take_while keeps what is before that element

    def run(self, ex, call, i: int, state: list, keep):
        found = ex.run_pass(i, self, state, None, call.params, call.n, call.rows)[0][0]
        cut = found if found >= 0 else call.n
        return [c[:cut] if self.take else c[cut:] for c in state], keep, None


@dataclass(frozen=True)
class WindowStage(Stage):
    window: Window

    def run(self, ex, call, i: int, state: list, keep):
        lo, hi = self.window.bounds(call.params, call.n)
        return [c[lo:hi] for c in state], keep, None


@dataclass(frozen=True)
class TerminalStage(Stage):
    lowered: Optional[Lowered]     # None: to_array of the columns as they are
    first: int
    keep_input: bool = False
    positional: str = ""           # last | element_at | single
    window: Optional[Window] = None
    range_at: tuple = (-1, -1)
    ends_plan = True

    def run(self, ex, call, i: int, state: list, keep):
        return state, keep, ex.terminal(i, self, state, keep, call.params, call.n, call.rows, call.inputs)


@dataclass(frozen=True)
class StagedLowered:
    """The engine's view of a staged plan: what plan.lower returns for one pass (bindings,
    limits, finishes, shape, fields) plus the stages."""
    stages: tuple
    bindings: tuple
    limits: tuple
    finishes: tuple
    shape: str
    fields: tuple
    texts: tuple                   # per stage: one line for explain()
    assemble: object = None        # raw results -> the user's value, where the engine's
                                   # assemble does not apply (group_by: group_plan.GroupResult)
    logical: tuple = ()            # the optimized logical plan, as explain()'s lines
    optimizer: tuple = ()          # what each optimizer pass did (logical.py)
    strings: tuple = ()            # (output column, string column): decoded results
    times: tuple = ()              # per result column: its datetime64/timedelta64 type or None
    staged = True


def element_of(cols: Columns, first: int = 0):
    """The element value whose leaves are columns first, first + 1, ... (a join's "pair":
    the (a, b) tuple of both sides' elements; a left join's b is an OuterSide whose matched
    flag is the pair's last column)."""
    if cols.shape == "pair":
        a, b = cols.fields
        other = element_of(b, first + len(a.dtypes))
        at = first + len(a.dtypes) + len(b.dtypes)
        if len(cols.dtypes) > at - first:    # a left join: its matched column after b's
            other = OuterSide(other, Scalar(E.Load(at, "bool"), None))
        return TupleVal((element_of(a, first), other))
    loads = [loaded(E.Load(first + i, storage(d)), d) for i, d in enumerate(cols.dtypes)]
    for i, column in cols.strings:
        loads[i] = StrCodes(loads[i].expr, column=column)
    if cols.shape == "scalar":
        return loads[0]
    if cols.shape == "tuple":
        return TupleVal(tuple(loads))
    return RecordVal(tuple(zip(cols.fields, loads)))


def scan_fusable(stages: tuple, i: int) -> bool:
    """Whether stage i, a scan, can run inside the pass after it (a runtime with
    `scan_carries` then runs one fused pass: ops/scan/fused_cpu.py): that pass is a
    reduce or a filtering compaction of the scanned column alone, without a take/skip
    window, distinct flags, a positional terminal or an early exit (those slice columns)."""
    from querycompute._codegen.ops.scan.fused_cpu import fusable
    lowered = plain_pass_after(stages, i, ScanStage)
    return lowered is not None and fusable(lowered.pass_)


def gpu_scan_fused(stages: tuple, i: int) -> tuple:
    """(the pass after scan stage i fused into the scan's last pass on a GPU dialect, "") or
    (None, why not): ops/scan/fused_gpu.py. (None, "") where stage i is no scan or
    the pass after it slices columns (plain_pass_after)."""
    from querycompute._codegen.ops.scan.fused_gpu import fuse, why_not
    lowered = plain_pass_after(stages, i, ScanStage, early_ok=True)   # the kernels read it all anyway
    if lowered is None:
        return None, ""
    why = why_not(lowered.pass_, stages[i].spec)
    return (None, why) if why else (fuse(lowered.pass_, stages[i].spec), "")


def fused_scans(stages: tuple, runtime) -> dict:
    """Scan stage index -> the pass after it as `runtime` fuses it (its StageCaps): the cpu's
    (`scan_carries`: None, ops/scan/fused_cpu builds it) or a GPU's (`scan_fused_passes`: the
    ScanFusedGpuPass, where `runtime.fuses_scan`: webgpu's 64-bit scans run on the reference)."""
    if runtime.caps.scan_carries:
        return {i: None for i in range(len(stages)) if scan_fusable(stages, i)}
    if runtime.caps.scan_fused_passes:
        return {i: fp for i in range(len(stages)) for fp in [gpu_scan_fused(stages, i)[0]]
                if fp is not None and runtime.fuses_scan(stages[i].spec)}
    return {}


def plain_pass_after(stages: tuple, i: int, kind: type, early_ok: bool = False):
    """The Lowered of the pass after stage i when stage i is a `kind` and that pass reads its
    columns whole, in order (no take/skip window, distinct flags, positional terminal or early
    exit: those slice columns; `early_ok`: an early exit may be given up), so stage i may run
    inside it; else None."""
    if not isinstance(stages[i], kind) or i + 1 >= len(stages):
        return None
    nxt = stages[i + 1]
    lowered = getattr(nxt, "lowered", None)
    if type(nxt) not in (PassStage, TerminalStage) or lowered is None:
        return None
    plain = (nxt.window is None and not nxt.keep_input and not getattr(nxt, "positional", "")
             and nxt.range_at == (-1, -1) and (early_ok or early_ops(lowered) is None))
    return lowered if plain else None
