"""Early exit: `any`, `all` and `first` (with or without a predicate) stop reading their
input once the answer is known, on every backend.

A pass whose every aggregate can be decided by one element (any: a True, all: a False,
first: a survivor) runs over WINDOWS of its input instead of over all of it: FIRST_WINDOW
elements, then GROWTH times more each time, until a window decides every aggregate or the
input ends. Reading stops within a small factor of where the answer lies, and an input that
never decides costs a few more launches than one pass (log_GROWTH(n / FIRST_WINDOW)).

A window is what the backends already run, so none of them needs to know about windows and
one compiled kernel serves every window:
* of an array input (one array, a zip, a table): a view of each column, `col[lo:hi]`;
* of a range: the same range with its start moved to element `lo` and length hi - lo. The
  range's start and step are kernel parameters (plan.initial_element), so only their values
  change. The numpy backend builds its index array (E.Index) one window long.

Results combine as the whole pass would have produced them (_codegen/combine.py's
combine_raw, windows in order): the first window that decides an aggregate gives its value
(a `first` index is offset by the window's start); an aggregate no window decided keeps the
last window's raw value (False for any, True for all, index -1 for first). Nothing else changes: any/all are exact and `first` is the survivor with the
lowest index, whichever windows ran.

qc.last_trace() after a windowed run lists every launched kernel of every window that ran,
in order (the first window's rows carry the compile/cache origin); `Trace.n` stays the
whole input's length, so the rows show how far the terminal read.

The same windows carry a long first call from the numpy tier to the kernel (TierSwitch,
tiers.py): morsels of tiers.MORSEL elements on the numpy tier until the background compile
is ready, then the rest of the input in one kernel run, joined with combine_raw (only for
plans whose partials join exactly: tiers.splittable).
"""
from __future__ import annotations

import numpy as np

from . import tiers
from .._codegen.combine import all_decided, combine_raw
from ..plan.fusion import early_ops

FIRST_WINDOW = 1 << 16      # elements in the first window: one cpu chunk, a few GPU tiles
GROWTH = 4                  # each window this many times the previous one


class WindowRows(list):
    """The trace rows of a windowed run: one backend row per window, in window order."""
    __slots__ = ()


class EarlyExit:
    """How one lowered pass runs in windows. Made by `early_exit`, held by the engine's
    warm entries (warm.FastEntry, warm.Hot) beside the compiled pass."""
    __slots__ = ("ops", "start", "step")

    def __init__(self, ops: tuple, start: int, step: int):
        self.ops = ops          # each aggregate's op: "any" | "all" | "first"
        self.start = start      # index in the params of the range's start (-1: not a range)
        self.step = step        # index in the params of the range's step

    def window(self, cols, params, lo: int, hi: int, n: int) -> tuple:
        """(columns, params) of elements [lo, hi) of an n-element input (module doc)."""
        if self.start >= 0 and lo:
            params = list(params)
            start, step = int(params[self.start]), int(params[self.step])
            params[self.start] = np.int64(start + lo * step)
        return ([c[lo:hi] for c in cols] if lo or hi < n else cols), params

    def launch(self, prepared, cols, params, n: int) -> tuple:
        """`prepared.run_quick(cols, params, n)`, run window by window until decided:
        (raw results as the whole run would return them, row for `trace_rows`)."""
        first = FIRST_WINDOW
        if n <= first:
            return prepared.run_quick(cols, params, n)
        ops = self.ops
        out = None
        rows = WindowRows()
        lo, size = 0, first
        while True:
            hi = lo + size
            if n - hi < first:      # no window shorter than the first one: the tail joins
                hi = n              # this window (and a strided column's tail never looks
                                    # contiguous to numba, which would compile anew)
            window, wparams = self.window(cols, params, lo, hi, n)
            raw, row = prepared.run_quick(window, wparams, hi - lo)
            rows.append(row)
            out = combine_raw(ops, out, raw, lo)
            if hi == n or all_decided(ops, out):
                return out, rows
            lo, size = hi, size * GROWTH


class TierSwitch(EarlyExit):
    """How a long numpy-tier call of one lowered pass moves to the kernel (module doc)."""
    __slots__ = ()
    morsel = tiers.MORSEL

    def launch(self, compiled, cols, params, n: int) -> tuple:
        """compiled.launch's (raw, row, prepared) for a call on the numpy tier: morsels
        there until compiled.pending is ready, then the rest on the kernel."""
        pending = compiled.pending
        pending.start()                 # a long call: the compile must not wait for it
        out, rows, lo, k = None, MixedRows(), 0, 0
        prepared = compiled.prepared
        while lo < n:
            if compiled.pending is not None and compiled.pending.ready:
                compiled.promote()
            prepared = compiled.prepared
            hi = n if compiled.pending is None else min(n, lo + self.morsel)
            window, wparams = self.window(cols, params, lo, hi, n)
            raw, row = launch(prepared, compiled.early, window, wparams, hi - lo)
            rows.append((prepared, row))
            out = combine_raw(self.ops, out, raw, lo)
            if all_decided(self.ops, out):
                break
            lo, k = hi, k + 1
            if tiers.between_morsels is not None and compiled.pending is not None:
                tiers.between_morsels(k, compiled.pending)
        return out, rows, prepared


class MixedRows(list):
    """The trace rows of a tier switch: (the Prepared that ran, its row) per run, in order."""
    __slots__ = ()


def _range_params(lowered) -> tuple[int, int]:
    """(index in the params of a range's start, of its step), -1 each when not a range."""
    start = step = -1
    for i, key in enumerate(lowered.bindings):
        if key[0] == "range":
            if key[1] == 0:
                start = i
            elif key[1] == 2:
                step = i
    return start, step


def tier_switch(lowered, ops: tuple | None) -> TierSwitch | None:
    """The TierSwitch of a pass whose aggregates' partials join exactly (`ops`:
    tiers.splittable), else None."""
    return None if ops is None else TierSwitch(ops, *_range_params(lowered))


def early_exit(lowered) -> EarlyExit | None:
    """The EarlyExit of a lowered pass whose every aggregate is any / all / first (the
    plan's rule: fusion.early_ops); else None."""
    ops = early_ops(lowered)
    if ops is None:
        return None
    return EarlyExit(ops, *_range_params(lowered))


def launch(prepared, early: EarlyExit | None, cols, params, n: int) -> tuple:
    """Run a compiled pass: in windows when `early` says it may stop early."""
    if early is None:
        return prepared.run_quick(cols, params, n)
    return early.launch(prepared, cols, params, n)


def trace_rows(prepared, row) -> list:
    """The KernelRun rows of a run's `row`: every window's rows, in order, for a windowed run."""
    if type(row) is WindowRows:
        return [k for r in row for k in prepared.trace_rows(r)]
    if type(row) is MixedRows:
        return [k for p, r in row for k in trace_rows(p, r)]
    return prepared.trace_rows(row)
