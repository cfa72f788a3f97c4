"""The cpu backend's calls into a compiled pass: `Launch` calls one flavour (serial or
parallel) of the numba entry points with freshly allocated outputs; `agg_converters` turns
a reduce's raw numba result into NumPy scalars of each aggregate's dtype.
"""
from __future__ import annotations

import numpy as np

from querycompute._codegen.dialects import numba_py
from querycompute._codegen.ops import compact as compact_op
from querycompute._codegen.ops import reduce as reduce_op
from querycompute._codegen.program import Pass, Reduce

# Below this many elements the serial entry runs: one chunk's worth of work is cheaper than
# waking the thread pool.
SERIAL_MAX = 32768


class Launch:
    """Calls one flavour (serial or parallel) of a pass's entry points: `call(n, inputs,
    params)` returns the raw result (outputs in storage dtypes). The method is chosen once
    here, so a warm call goes straight to numba."""

    def __init__(self, p: Pass, ns: dict, parallel: bool):
        kind = "parallel" if parallel else "serial"
        name = p.name
        self.parallel = parallel
        # the serial flavour only sees n < SERIAL_MAX <= CHUNK: always one chunk
        self.grid = (1,) if not parallel and SERIAL_MAX <= numba_py.CHUNK else None
        self.name = f"{name}_{kind}"
        self.storage = tuple(np.dtype(numba_py.storage_dtype(d)) for d in p.program.output_dtypes)
        # a shaped result (ToArray.element = k): the outputs are the columns of one (n, k)
        # array, so the result needs no stacking copy (shaped.stack). numba compiles the
        # strided column views as its 'A' layout: one more specialisation, cached as any.
        self.element = getattr(p.terminal, "element", 0)
        if isinstance(p.terminal, Reduce):
            self.entry = ns[f"{name}_{kind}"]
            self.call, self.dispatchers = self._reduce, (self.entry,)
        elif p.program.has_filter:
            self.count, self.write = ns[f"{name}_count_{kind}"], ns[f"{name}_write_{kind}"]
            # few survivors: the writer that visits the count's keep bits (compact.SPARSE);
            # None where the module leaves it out (numba_scan_fused)
            self.sparse = ns.get(f"{name}_write_sparse_{kind}")
            self.call = self._compact
            self.dispatchers = tuple(d for d in (self.count, self.write, self.sparse) if d is not None)
            self.window = p.window_params       # (lo, hi) positions in params, or None
        else:
            self.entry = ns[f"{name}_{kind}"]
            self.call, self.dispatchers = self._dense, (self.entry,)
        # numba's per-dispatcher signature tables: they only grow, and only when a call
        # compiled or loaded a new specialisation, so their total size tells a warm call
        # (nothing new) from one that must report a compile or a load, at ~50 ns.
        # specialisations() -> how many signatures numba holds for these entry points.
        self._tables = tuple(d.overloads for d in self.dispatchers)
        self.specialisations = (self._tables[0].__len__ if len(self._tables) == 1
                                else self._two_tables)
        self.known = self.specialisations()
        self.misses = self.cache_misses()

    def _two_tables(self) -> int:
        """specialisations() of a compaction: count and the writers each have a table."""
        return sum(len(t) for t in self._tables)

    def cache_misses(self) -> int:
        """How many times numba compiled these entry points rather than loading its cache."""
        return sum(sum(d.stats.cache_misses.values()) for d in self.dispatchers)

    def _reduce(self, n, inputs, params):
        return self.entry(n, *inputs, *params)

    def _outputs(self, n) -> tuple:
        """n fresh elements per output: separate arrays, or the columns of one (n, k) array."""
        k = self.element
        if not k:
            return tuple([np.empty(n, dt) for dt in self.storage])
        block = np.empty((n, k), self.storage[0])
        return tuple([block[:, j] for j in range(k)])

    def _dense(self, n, inputs, params):
        outs = self._outputs(n)
        self.entry(n, *outs, *inputs, *params)
        return outs

    def _compact(self, n, inputs, params):
        bits = np.empty((n + 63) >> 6, np.uint64)
        offsets = self.count(n, bits, *inputs, *params)
        total = int(offsets[-1])
        if self.window is not None:       # only the survivors of the window [lo, hi)
            lo, hi = (int(params[k]) for k in self.window)
            if lo < 0 or hi < lo:
                raise ValueError(f"{self.name}: compaction window [{lo}, {hi}) needs 0 <= lo <= hi")
            total = compact_op.window_total(total, lo, hi)
        outs = self._outputs(total)
        if self.sparse is not None and self.window is None and total * compact_op.SPARSE < n:
            self.sparse(n, offsets, bits, *outs, *inputs, *params)
        else:
            self.write(n, offsets, *outs, *inputs, *params)
        return outs

    def __call__(self, n, inputs, params):
        return self.call(n, inputs, params)


def agg_converters(aggs) -> tuple:
    """One function per Agg: (raw result tuple) -> that agg's value, as the engine expects
    it (numba boxes float32 as a Python float, so each sum/min/max/fold gets its numpy type
    back). Built once per pass so a warm run does no dtype lookups."""
    convs, j = [], 0
    for agg in aggs:
        if agg.op == "first":
            types = tuple(np.dtype(v.dtype).type for v in agg.values)

            def conv(raw, j=j, types=types):
                idx = int(raw[j])
                if idx < 0:
                    return (idx, ())
                return (idx, tuple(t(x) for t, x in zip(types, raw[j + 1:j + 1 + len(types)])))
        elif agg.op == "count":
            def conv(raw, j=j):
                return int(raw[j])
        elif agg.op in ("any", "all"):
            def conv(raw, j=j):
                return bool(raw[j])
        else:
            def conv(raw, j=j, t=np.dtype(agg.dtype).type):
                return t(raw[j])
        convs.append(conv)
        j += reduce_op.cpu_result_width(agg)
    return tuple(convs)
