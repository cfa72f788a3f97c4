"""The cpu backend's fused low-cardinality group_by (CpuStages.fused_group): the fused pass
before a group_by and the group_by's aggregates in ONE pass over the pass's inputs, with
per-chunk private tables (ops/group/fused_cpu.py has the algorithm and the order).

    pipeline.StagedPrepared: a PassStage followed by a GroupStage asks the runtime first;
    None means "not here" (keys wider than 64 bits, a windowed pass, more than
    GROUP_TABLE_MAX groups in a chunk or in all) and the plan runs as planned: the pass
    stores the key and value columns, cpu_group.CpuGroupBy groups them. A module whose
    tables overflowed is not tried again on as many rows or more (a warm query over
    high-cardinality keys, TPC-H Q10's and Q15's, skips the wasted fused pass).

Both ways give the same bits (the fused module folds in the two-step path's order), so the
choice never shows in a result. The module is the generated functions alone, run with the
generic group kernels' module's names as globals (cpu_group.USES_KERNELS: order_bits,
_table_bits... are compiled once per machine, not once per query), and the merge is no part of
it: the group kernels' group_merge_ids and the aggregates' module's merge (cpu_group.py's, one
per aggregates' layout) run it, loaded through the cpu
backend's one numba loader (numba_loader.py) like every other cpu kernel. Before its module
is compiled, a first chunk with more than `limit` distinct keys (fused_cpu.head_groups, NumPy)
says None at once: the module would only give up.
"""
from __future__ import annotations

import numpy as np

from querycompute._codegen.ops.group import cpu as numba_group
from querycompute._codegen.ops.group import fused_cpu as numba_group_fused
from querycompute._codegen.dialects.numba_py import CHUNK, storage_dtype
from querycompute._codegen.dialects.numba_py_runtime import PRELUDE

from .cpu import param_args
from .cpu_group import GROUP_TABLE_MAX, gave_up, kernels, not_run, uses_kernels
from .numba_loader import load
from ...artifacts import ArtifactCache


class CpuFusedGroup:
    """The fused group_bys of one CpuStages (a module per (pass, spec), loaded once)."""

    def __init__(self, stages):
        self.stages = stages
        self.limit = GROUP_TABLE_MAX
        self._mods = ArtifactCache("cpu: fused group_by kernels")
        # per module: the fewest input rows at which its tables overflowed (a call with at
        # least as many goes to the two-step path at once: same bits, no wasted pass)
        self._overflowed = ArtifactCache("cpu: fused group_by overflows")

    def _module(self, p, spec, keys, values):
        key = (p, spec, keys, values)      # (values: a tuple)
        mod = self._mods.get(key)
        if mod is None:
            text = PRELUDE + uses_kernels() + numba_group_fused.render(p, spec, keys, values, cache=True)
            mod = self._mods.put(key, load(f"{spec.name}_fused", text, native=True))
        return mod

    def _overflow(self, key, n: int, over) -> None:
        """Remember that `key`'s tables overflowed at n rows (None: the two-step path)."""
        self._overflowed.put(key, n if over is None else min(n, over))

    def __call__(self, p, spec, keys: int, values: tuple, inputs, params, gparams, n: int, rows):
        """The group_by's raw result ((group keys, agg columns, counts), as
        CpuStages.group_by) computed from the pass's inputs, or None (module doc)."""
        if (self.limit <= 0 or not numba_group_fused.fits(spec.key_dtypes) or getattr(p.terminal, "window", None) is not None
                or numba_group.in_order(spec)):      # per-chunk partials can't serve an in-order fold
            return None
        key = (p, spec, keys, tuple(values))
        over = self._overflowed.get(key)
        if over is not None and n >= over:
            return None                    # it overflowed at no more rows than these
        if self._mods.get(key) is None and numba_group_fused.head_groups(p, keys, inputs, params, n) > self.limit:
            return self._overflow(key, n, over)     # chunk 0 would give up: no module compiled
        prog = p.program
        ins = [np.asarray(x) for x in inputs]
        ins = [x.view(np.uint16) if s.dtype == "float16" else x for x, s in zip(ins, prog.inputs)]
        ps, gps = param_args(prog.params, params), param_args(spec.params, gparams)
        st = self.stages
        mod = self._module(*key)
        name, limit = spec.name, self.limit
        if prog.has_filter:
            boff = np.zeros(-(-n // numba_group_fused.FBLOCK) + 1, np.int64)
            st._morsels(mod, f"{name}_fblocks", -(-n // CHUNK), rows, "", n, boff, *ins, *ps)
            np.cumsum(boff, out=boff)
            total = int(boff[-1])
        else:
            boff, total = np.zeros(1, np.int64), n
        if total == 0:
            return None                    # the two-step path's empty result
        nq = -(-total // CHUNK)
        words, first = np.empty((nq, limit), np.uint64), np.empty((nq, limit), np.int64)
        cnt, nloc = np.empty((nq, kernels().ns["CNT_WAYS"] * limit), np.int64), not_run(nq)
        parts = [np.empty((nq, limit * ways), d) for d, ways in numba_group_fused.partials(spec)]
        st._morsels(mod, f"{name}_fchunks", nq, rows, "", total, boff, limit, words, first, cnt, nloc,
                    *parts, *ins, *ps, *gps, stop=gave_up(nloc))
        # the merge: the generic group kernels' group ids, the aggregates' module's folds
        ok, remap, first, counts = st._call(kernels(), "group_merge_ids", rows, f"{name}_",
                                            words, first, cnt, nloc, limit)
        if not ok:
            return self._overflow(key, n, over)
        accs = st._call(st.grouper().agg_module(spec), f"{numba_group.NAME}_merge", rows, f"{name}_",
                        nloc, remap, len(first), *parts, *gps) if parts else ()
        outs = [np.empty(len(first), storage_dtype(d)) for d in prog.output_dtypes]
        mod.call(f"{spec.name}_at_serial", first, *outs, *ins, *ps)
        kernels().sync()                   # the generic kernels it made numba specialise
        outs = [o.view(d) if d == "float16" else o for o, d in zip(outs, prog.output_dtypes)]
        acc = dict(zip(numba_group.accumulating(spec), accs))
        cols = []
        for k, a in enumerate(spec.aggs):
            if a.op == "count":
                cols.append(counts.copy())
            elif a.op == "first":
                cols.append(outs[values[k]].astype(a.dtype, copy=False))
            else:
                cols.append(acc[k].astype(a.dtype, copy=False))
        return [o.copy() for o in outs[:keys]], cols, counts

