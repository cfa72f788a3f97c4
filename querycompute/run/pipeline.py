"""Running a staged plan (stages.py) on one backend: its fused passes and column operations.

`StagedPrepared` is to a staged plan what a backend's Prepared is to one pass: the engine
keeps it in its memo, launches it with `run_quick(cols, params, n)` and gets the raw results
of the plan's terminal (a reduction's list, the columns of to_array, or for last /
element_at / single a `first`-style (index, values) pair). It holds every pass compiled for
the backend and the backend's StageRuntime (backends/stage_runtime.py) for the column
operations between them. The numpy tier of tiered execution is the same plan with the numpy
backend's passes and NumpyStages.

Between stages the state is the list of columns (the element's leaves, then any key
columns), all of one length, and a distinct's keep flags for the next pass to filter on.
On a runtime with `caps.device_columns` (StageCaps: opencl, cuda) those are device columns:
a pass that feeds a next stage leaves its outputs on the device and the runtime's column
operations read and return device columns (backends/device_columns.py); only the terminal's
result comes back to the host (reverse and a join's probe go through the host).
"""
from __future__ import annotations

from dataclasses import replace
from functools import partial

import numpy as np

from ..plan import stage_kinds as S
from . import engine, windows
from .runtime import RUNTIME
from ..backends.gpu import device_columns as DC
from ..backends.base import KernelRun, Prepared
from ..errors import MultipleElementsError
from ..plan.group_plan import GroupStage
from ..plan.join_plan import fusable, join_pairs

stage_runtime = RUNTIME.stage_runtime     # the backend's StageRuntime (runtime.py owns them)
SELECT_DENSITY = 8                        # (StagedPrepared.selects: one survivor in 8 rows)


def _lowered_of(stage):
    return getattr(stage, "lowered", None)


class StagedPrepared(Prepared):
    """A staged plan compiled for one backend (see the module docstring)."""

    def __init__(self, staged: S.StagedLowered, prepare, runtime, backend: str = "numpy"):
        self.staged = staged
        self.backend = backend          # the backend a join runs its other side on
        self.runtime = runtime
        # a column operation as the first stage (its kernels read the source; runtimes with
        # device columns copy it over once first: GpuStages.to_device)
        self.column_op_first = staged.stages[0].column_op
        self.device = runtime.caps.device_columns
        self.passes = {}
        self._prepare = prepare
        origins, self.compile_ms = [], 0.0
        # a join side's pass run as its `selects` variant (the survivors' row numbers and
        # keys; the join after it, fused with its pass, reads the source columns through
        # them), where the runtime compiles indexed passes: stage index -> compiled variant.
        # `selecting`: those whose last call kept at least one row in SELECT_DENSITY (reading
        # the survivors in place then touches about every cache line once, as a copy would;
        # sparser, each survivor costs a cache miss per column and the plain pass, compiled
        # when first needed, copies them instead). Either gives the same columns.
        self.selects, self.selecting = {}, set()
        for i, stage in enumerate(staged.stages):
            lowered = _lowered_of(stage)
            if getattr(stage, "selects", None) is not None and runtime.caps.indexed_passes \
                    and fusable(staged.stages, i + 1):
                lowered = stage.selects
                self.selecting.add(i)
            if lowered is not None:
                prepared = prepare(lowered)
                (self.selects if i in self.selecting else self.passes)[i] = (prepared, windows.early_exit(lowered))
                origins.append(getattr(prepared, "origin", "compiled"))
                self.compile_ms += getattr(prepared, "compile_ms", 0.0)
        # a scan and the pass after it as one pass, where the runtime computes the scan's
        # carries (cpu, `caps.scan_carries`: ops/scan/fused_cpu.py) or runs the pass in the
        # scan's last pass (GPU dialects, `caps.scan_fused_passes`: ops/scan/fused_gpu.py):
        # scan stage index -> compiled pass
        self.scan_fused = {}
        self.scan_fused_gpu = not runtime.caps.scan_carries
        for i, fp in S.fused_scans(staged.stages, runtime).items():
            nxt = staged.stages[i + 1].lowered
            if fp is None:
                from querycompute._codegen.ops.scan.fused_cpu import fuse
                fp = fuse(nxt.pass_, staged.stages[i].spec)
            prepared = prepare(replace(nxt, pass_=fp))
            self.scan_fused[i] = prepared
            origins.append(getattr(prepared, "origin", "compiled"))
            self.compile_ms += getattr(prepared, "compile_ms", 0.0)
        # a join and the pass after it as one pass reading both sides through the pairs,
        # where the runtime compiles indexed passes (cpu, `caps.indexed_passes`:
        # dialects/numba_indexed.py): join stage index -> compiled pass
        self.join_fused = {}
        if runtime.caps.indexed_passes:
            from ..plan.join_plan import indexed
            for i, stage in enumerate(staged.stages):
                if fusable(staged.stages, i):
                    nxt = staged.stages[i + 1].lowered
                    p = indexed(stage, nxt.pass_)
                    prepared = prepare(replace(nxt, pass_=p))
                    self.join_fused[i] = (prepared, p)
                    origins.append(getattr(prepared, "origin", "compiled"))
                    self.compile_ms += getattr(prepared, "compile_ms", 0.0)
        self.origin = "compiled" if "compiled" in origins else ("disk" if "disk" in origins else "memory")

    def trace_rows(self, row) -> list[KernelRun]:
        return list(row)

    @staticmethod
    def sides_of(call):
        """What runs a join's other side (a sub-plan's Chain) in `call`: the engine's
        run_side, its kernels added to the call's trace rows."""
        return partial(engine.run_side, rows=call.rows)

    def kept(self, i: int, survivors: int, n: int) -> None:
        """A `selects` stage's survivors this call: which variant the next call runs."""
        if n:
            (self.selecting.add if survivors * SELECT_DENSITY >= n else self.selecting.discard)(i)

    def run_pass(self, i: int, stage, cols: list, keep, params, n: int, rows: list, device: bool = False,
                 selects: bool = False):
        """Run pass stage i over `cols` (+ keep flags): its columns, or a reduction's raw
        results (`selects`: its PassStage.selects variant). A take / skip window on a pass
        without a filter narrows its input (the elements outside are never computed); with a
        filter, its survivors are cut."""
        got = (self.selects if selects else self.passes).get(i)
        if got is None:                   # a `selects` stage's plain pass, first needed now
            got = self.passes[i] = (self._prepare(stage.lowered), windows.early_exit(stage.lowered))
        prepared, early = got
        lowered = stage.lowered
        p = list(params[stage.first:stage.first + len(lowered.bindings)])
        inputs = list(cols) + ([keep] if getattr(stage, "keep_input", False) else [])
        window = getattr(stage, "window", None)
        narrowed = window is not None and not lowered.pass_.program.has_filter
        if narrowed:
            lo, hi = window.bounds(params, n)
            if stage.range_at[0] >= 0:
                start, step = stage.range_at
                p[start] = p[start] + p[step] * lo
            inputs = [c[lo:hi] for c in inputs]
            n = hi - lo
        elif window is not None:
            # a compaction window: survivors of ranks [lo, hi) only (at most the input's
            # length survive, so the bounds are clipped to that)
            at_lo, at_hi = lowered.pass_.window_params
            p[at_lo], p[at_hi] = (np.int64(b) for b in window.bounds(params, n))
        if device and early is None:      # a GPU pass feeding a next stage: outputs stay there
            raw, row = prepared.run_quick(inputs, p, n, keep=True)
        else:
            raw, row = windows.launch(prepared, early, inputs, p, n)
        rows += windows.trace_rows(prepared, row)
        return raw

    def fused_group(self, i: int, stage, state, keep, params, n: int, rows: list, pass_=None):
        """A pass followed by a group_by, as one pass where the runtime has one
        (`caps.fused_group`: the cpu backend's low-cardinality tables): its raw result, or None.
        `pass_`: the pass to run instead of the stage's own (a join's indexed pass)."""
        stages = self.staged.stages
        if not self.runtime.caps.fused_group or i + 1 >= len(stages) \
                or type(stages[i + 1]) is not GroupStage or getattr(stage, "window", None) is not None:
            return None
        g = stages[i + 1]
        inputs = list(state) + ([keep] if getattr(stage, "keep_input", False) else [])
        p = params[stage.first:stage.first + len(stage.lowered.bindings)]
        gp = params[g.first:g.first + len(g.spec.params)]
        return self.runtime.fused_group(pass_ or stage.lowered.pass_, g.spec, g.keys, g.values, inputs, p, gp,
                                        n, rows)

    def run_quick(self, cols, params, n: int) -> tuple:
        raw, rows = self._run_stages(cols, params, n)
        if not any(DC.on_device(c) for c in cols):
            raw = DC.tree_to_host(raw)        # host inputs: host results (the one copy back)
        return raw, rows

    def _run_stages(self, cols, params, n: int) -> tuple:
        params = list(params)          # this call's own: a join resolves some in place
        call = _Call(params, n, cols)
        rows = call.rows
        state, keep = list(cols), None
        if self.device and self.column_op_first:
            state = self.runtime.to_device(state)   # a column operation first: the source goes over once
        skip = -1
        for i, stage in enumerate(self.staged.stages):
            if i == skip:
                continue
            if i in self.join_fused:
                done, got = self._join_fused(i, stage, state, call)
                if done:
                    return got, rows
                state, skip = list(got), i + 1
            elif i in self.scan_fused and self._fuse_scan_now(call.n):
                raw = self._scan_fused(i, stage, state, params, call.n, rows, self.device)
                if self.staged.stages[i + 1].ends_plan:
                    return raw, rows
                state, skip = list(raw), i + 1
            else:                              # each stage kind runs itself (stage_kinds.py)
                state, keep, result = stage.run(self, call, i, state, keep)
                if result is not None:
                    return result, rows
            call.n = len(state[0])
        raise AssertionError("a staged plan ends with its terminal")

    def _join_fused(self, i: int, stage, state, call):
        """Join i and the pass after it as one pass: the join's index pairs, then the pass
        reading both sides' columns through them (nothing gathered). A group_by after that
        pass fuses into it as well where the runtime can. (done, value): the plan's raw
        result (a terminal's or the group_by's), or the pass's columns (the next state)."""
        params, rows = call.params, call.rows
        state = [DC.to_host(c) for c in state]
        selected, call.selected = call.selected, None       # (PassStage.selects ran)
        left, right, li, ri = join_pairs(stage, state, call, self, selected)
        nxt = self.staged.stages[i + 1]
        prepared, pass_ = self.join_fused[i]
        inputs = left + right + [li, ri]
        m = len(li)
        got = self.fused_group(i + 1, nxt, inputs, None, params, m, rows, pass_)
        if got is not None:
            return True, got
        p = params[nxt.first:nxt.first + len(nxt.lowered.bindings)]
        raw, row = prepared.run_quick(inputs, p, m)
        rows += prepared.trace_rows(row)
        return nxt.ends_plan, raw

    def _fuse_scan_now(self, n: int) -> bool:
        """On a GPU: not for n = 0 (an empty scan launches nothing), nor where the runtime
        would split the fused pass into windows (webgpu's storage bindings:
        `scan_fusion_fits`); the two stages run then."""
        if not self.scan_fused_gpu:
            return True
        return n > 0 and self.runtime.scan_fusion_fits(n)

    def _scan_fused(self, i: int, stage, state, params, n: int, rows: list, device: bool = False):
        """Scan i and the pass after it as one pass: the runtime's carries (the scan's
        first phase), then the fused pass computing each running value in its loop; on a
        GPU the fused pass's kernels do the whole scan (their input: the scan's, dense)."""
        nxt = self.staged.stages[i + 1]
        sp = list(params[stage.first:stage.first + len(stage.spec.params)])
        if self.scan_fused_gpu:
            x = DC.contiguous(state[0], dtype=np.dtype(stage.spec.dtype))
            p = list(params[nxt.first:nxt.first + len(nxt.lowered.bindings)]) + sp
            prepared = self.scan_fused[i]
            feeds = device and not nxt.ends_plan              # its outputs stay on the device
            raw, row = prepared.run_quick([x], p, n, keep=True) if feeds else prepared.run_quick([x], p, n)
            rows += prepared.trace_rows(row)
            return raw
        x = np.ascontiguousarray(state[0])
        carries = self.runtime.scan_carries(stage.spec, x, sp, rows)
        cs = np.empty(2 * len(carries), carries.dtype)      # [running, carry] per chunk
        cs[1::2] = carries
        p = list(params[nxt.first:nxt.first + len(nxt.lowered.bindings)]) + sp
        prepared = self.scan_fused[i]
        raw, row = prepared.run_quick([x, cs], p, n)
        rows += prepared.trace_rows(row)
        return raw

    def terminal(self, i: int, stage, state, keep, params, n: int, rows: list, inputs):
        if stage.lowered is None:
            # the columns as they are, but never the caller's own memory (take / skip of
            # the source are views of it)
            if not any(DC.on_device(x) for x in inputs):  # the one copy back (device inputs:
                state = [DC.to_host(c) for c in state]    # device results, as a pass gives)
            return tuple(c.copy() if any(np.may_share_memory(c, x) for x in inputs) else c for c in state)
        raw = self.run_pass(i, stage, state, keep, params, n, rows)
        if not stage.positional:
            return raw
        m = len(raw[0])
        if m == 0:
            return [(-1, ())]
        if stage.positional == "single" and m > 1:
            raise MultipleElementsError("single() found more than one element; use first() or "
                                        "take(1), or a predicate that only one element meets")
        at = m - 1 if stage.positional == "last" else 0
        return [(at, tuple(a[at] for a in raw))]


class _Call:
    """One call's own values, handed to each stage's `run` (stage_kinds.py): the plan's
    parameters, the current column length, the trace rows, and the caller's input columns
    (a terminal never returns the caller's own memory)."""
    __slots__ = ("params", "n", "rows", "inputs", "sides", "selected")

    def __init__(self, params, n: int, inputs):
        self.params, self.n, self.rows, self.inputs = params, n, [], inputs
        self.selected = None   # a join side's survivor rows and keys (PassStage.selects)
        self.sides = {}        # a join's other side, run once per call (join_plan.join_pairs)


def prepare(staged: S.StagedLowered, backend: str, prepare_pass) -> StagedPrepared:
    """The staged plan compiled for `backend`: `prepare_pass(lowered)` compiles one pass."""
    return StagedPrepared(staged, prepare_pass, stage_runtime(backend), backend)
