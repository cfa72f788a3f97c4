"""The cpu backend's join (CpuStages.join): a numba hash join giving join_plan.join_reference's
pairs exactly (LINQ's order: left order, then right order among a left row's matches; an
outer join's unmatched left rows once, with -1).

    1. both sides' keys converted to their common NumPy type (np.promote_types, as the
       reference); one key: its raw bits; several: their order bits packed into one uint64
       word (the stage kernels' `pack`) when they fit 64 bits together;
    2. the SMALLER side is built into a hash table (cpu_join_kernels.join_build_serial), the other
       probes it in parallel chunks (join_probe_parallel);
    3. built on the right: the probe's pairs are already in LINQ's order; built on the
       left: the pairs come in right order and a counting scatter by left row
       (join_by_left_serial) restores it.
Equality is that of order bits (NaN == NaN, -0.0 == 0.0). Key tuples wider than 64 bits
together run the numpy reference (`reference_reason`, which explain() prints too), and their
trace row says so (dialect "numpy").
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

_HERE = Path(__file__).parent


def kernels_source() -> str:
    """cpu_stage_kernels.py's text with cpu_join_kernels.py's appended (it uses order_bits)."""
    return ((_HERE / "cpu_stage_kernels.py").read_text() + "\n\n# ---- join " + "-" * 64 + "\n"
            + (_HERE / "cpu_join_kernels.py").read_text())


def key_types(left_dtypes, right_dtypes) -> list:
    """Both sides' key dtypes converted to their common NumPy type (np.promote_types, as the
    reference), field by field."""
    return [np.promote_types(a, b) for a, b in zip(left_dtypes, right_dtypes)]


def reference_reason(common) -> str:
    """Why a join on keys of the common dtypes `common` runs the numpy reference on the cpu,
    or "" when the numba hash join runs it: its table holds one 64-bit word of order bits per
    key, so a key tuple wider than 64 bits together has no native path. The one rule that
    CpuJoin.__call__ follows and explain() prints."""
    bits = 8 * sum(np.dtype(c).itemsize for c in common)
    if bits <= 64:
        return ""
    return (f"a key of {len(common)} fields, {bits} bits together ({', '.join(str(c) for c in common)}), "
            f"has no native path: the hash join packs a key into one 64-bit word")


class CpuJoin:
    """The join of one CpuStages (its kernel module loaded once per instance)."""

    def __init__(self, stages):
        self.stages = stages
        self._mod = None

    def _kernels(self):
        if self._mod is None:
            from .cpu_stage_modules import load
            self._mod = load("qc_join_kernels", kernels_source())
        return self._mod

    def __call__(self, left_keys, right_keys, outer: bool, rows: list) -> tuple:
        from .cpu_stages import _consts, _raw
        from ..stage_runtime import NumpyStages
        st = self.stages
        common = key_types([np.asarray(a).dtype for a in left_keys], [np.asarray(b).dtype for b in right_keys])
        if reference_reason(common):
            return NumpyStages.join(st, left_keys, right_keys, outer, rows)
        left = [np.ascontiguousarray(a, dtype=c) for a, c in zip(left_keys, common)]
        right = [np.ascontiguousarray(b, dtype=c) for b, c in zip(right_keys, common)]
        nl, nr = len(left[0]), len(right[0])
        if nl == 0 or nr == 0:
            li = np.arange(nl, dtype=np.int64) if outer else np.zeros(0, np.int64)
            return li, np.full(len(li), -1, np.int64)
        if len(common) == 1:
            lu, ru, consts = _raw(left[0]), _raw(right[0]), _consts(common[0])
        else:
            falses = (False,) * len(common)
            lu, ru = st._pack(falses, left, rows, "join_left_"), st._pack(falses, right, rows, "join_right_")
            consts = _consts(np.dtype(np.uint64))
        mod = self._kernels()
        build_right = nr <= nl
        build, probe = (ru, lu) if build_right else (lu, ru)
        # build and by_left are serial (n = 1 picks the `_serial` entry point)
        table = st._run(mod, "join_build", 1, rows, "", build, *consts)
        pi, bj = st._run(mod, "join_probe", len(probe), rows, "", probe, *table,
                         outer and build_right, *consts)
        if build_right:
            return pi, bj
        return st._run(mod, "join_by_left", 1, rows, "", bj, pi, nl, outer)
