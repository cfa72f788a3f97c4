"""The GPU low-cardinality group_by (ops/group/table_gpu.py) run for GpuStages.group_by:
per-chunk private hash tables merged in chunk order on the device, then on the host (at most
SLOTS = 8192 slots come back): the used slots, sorted by key (order_keys.stable_order, NaN
last), so groups come out in the order of the sort path.

`run` returns None when the tables overflowed (more than MAX_GROUPS = 4096 distinct keys,
or a thread's region of a table full), or were not tried (keys of at most 2 bytes, whose
radix sort is cheap: group_table.worth_trying): the caller then runs the sort-based kernels, whose
results are the same groups. Every aggregate the sort path has runs here too (sum, count,
min, max, first, any, all, fold).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from querycompute._codegen import order_keys
from querycompute._codegen.ops.group import table_gpu as table_op
from querycompute._codegen.ir.stage_specs import GroupSpec

__all__ = ["run"]


def run(stages, spec: GroupSpec, bits: Sequence, vals: Sequence, params: Sequence, n: int,
        rows: list):
    """(keys, per-aggregate results, counts) like GpuStages.group_by, or None (an overflow, or
    not tried: see the module docstring).
    `bits`: the key columns as their bits dtype; `vals`: the non-count value columns."""
    if not table_op.worth_trying(spec):
        return None
    raw = stages._run(("group_table", spec), lambda: table_op.render_group_table(spec, stages.dialect),
                      list(bits) + list(vals), params, n, rows)
    raw = [_host(r) for r in raw]
    counts = raw[-1]
    if counts[table_op.SLOTS] != 0:
        return None                                   # a region overflowed: the sort path
    used = np.flatnonzero(counts[:table_op.SLOTS] > 0)
    if len(used) > table_op.MAX_GROUPS:
        return None
    m = len(spec.key_dtypes)
    keys = [raw[j][used].view(d) for j, d in enumerate(spec.key_dtypes)]
    order = used[order_keys.stable_order(keys, (False,) * m)] if len(used) else used
    counts = counts[order]
    outs, at = [], m
    for a in spec.aggs:
        if a.op == "count":
            outs.append(counts.copy())
        else:
            outs.append(raw[at][order])
            at += 1
    return [raw[j][order].view(d) for j, d in enumerate(spec.key_dtypes)], outs, counts


def _host(r) -> np.ndarray:
    """A result as a host array (the launch loop leaves it on the device for device columns)."""
    if isinstance(r, np.ndarray):
        return r
    from . import device_columns as DC
    return DC.to_host(r)
