"""The column operations a backend runs between fused passes, and their numpy reference.

A staged plan (querycompute/plan/stages.py) alternates fused passes (a backend's Prepared) with
column operations on the columns a pass produced: sort permutations (order_by, top-k,
min-by), gathers, scans, distinct's first-occurrence flags, a join's pairs and a semi-join's
membership flags. Each backend has one
`StageRuntime`; `NumpyStages` below is the reference the others are tested against.

Columns are 1-D host numpy arrays of one length n (the next stage's input). Every method
appends one `KernelRun` per kernel (or numpy step) it ran to `rows`, for qc.last_trace().
The operations are defined in querycompute/_codegen/stage_specs.py and order_keys.py.

What a runtime has beyond these operations (device columns, a device join, the fusions the
executor may use) it declares in one `StageCaps` (below), its class attribute `caps` (GpuStages:
per instance, from its dialect's DialectCaps and its device); the executor (run/pipeline.py),
the stage kinds (plan/) and explain() read those fields and call the methods the base class
defines for them, never a runtime's name or getattr with a default (DESIGN.md section 2).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from querycompute._codegen import order_keys
from querycompute._codegen.ops.group.reference import group_reference
from querycompute._codegen.ops.join.reference import join_reference, semi_reference
from querycompute._codegen.ops.scan.reference import scan_reference
from querycompute._codegen.ir.stage_specs import GroupSpec, ScanSpec, SortSpec

from .base import KernelRun, now_ms


@dataclass(frozen=True)
class StageCaps:
    """What one StageRuntime has (module doc), declared once: `StageRuntime.caps`. The base
    class's defaults are the numpy reference's: host arrays, no fusion across a breaker."""
    # a staged plan's columns stay on the device between stages: a pass that feeds a next
    # stage leaves its outputs there and the column operations read and return device
    # columns (backends/gpu/device_columns.py; run/pipeline.py, to_device first when a column
    # operation is the first stage); the backend's BackendCaps.device_columns says the same.
    # opencl, cuda
    device_columns: bool = False
    # a join's pairs and gathers run on the device (gpu/gpu_join.py: gather / gather_filled):
    # the join stage hands it the columns where they are (plan/join_plan.py); else the join
    # runs on host arrays and gathers the other side on the host. GPU dialects with 64-bit
    # integers (_codegen/ops/join/gpu.without_join)
    device_join: bool = False
    # a join's next pass reads both sides' columns through the index pairs, nothing gathered
    # (dialects/numba_indexed.py; plan/join_plan.fusable): the executor compiles that pass and
    # explain() prints the two stages as one. cpu
    indexed_passes: bool = False
    # a scan fuses into the pass after it through `scan_carries` (the scan's first phase;
    # then one pass, _codegen/ops/scan/fused_cpu.py; plan/stage_kinds.fused_scans). cpu
    scan_carries: bool = False
    # a pass after a scan runs in the scan's last pass (ops/scan/fused_gpu.py) where
    # `fuses_scan(spec)` says so, and at run time where `scan_fusion_fits(n)`. GPU runtimes
    scan_fused_passes: bool = False
    # a pass followed by a group_by runs as one pass (`fused_group`; cpu_group_fused.py). cpu
    fused_group: bool = False
    # group_by tries the low-cardinality tables first (gpu/gpu_group_table.py; they count in
    # int64): GPU dialects with 64-bit values
    group_tables: bool = False


class StageRuntime:
    """One backend's column operations (see the module docstring)."""
    name = "?"
    caps = StageCaps()          # what it has (StageCaps); every runtime class declares its own

    def sort(self, spec: SortSpec, keys: Sequence[np.ndarray], k: int | None, rows: list) -> np.ndarray:
        """int64 stable sort permutation of the rows of `keys`; with k, its first min(k, n)
        entries only (top-k: the k smallest rows, ties by index)."""
        raise NotImplementedError

    def sort_values(self, spec: SortSpec, key: np.ndarray, rows: list) -> np.ndarray:
        """The one key column itself, sorted (order_by() of plain values: no permutation is
        needed when the key is the element). Backends may override with a keys-only sort."""
        return self.gather([key], self.sort(spec, [key], None, rows), rows)[0]

    def gather(self, cols: Sequence[np.ndarray], perm: np.ndarray, rows: list) -> list:
        """[col[perm] for col in cols]."""
        raise NotImplementedError

    def scan(self, spec: ScanSpec, values: np.ndarray, params: Sequence, rows: list) -> np.ndarray:
        """The inclusive running fold of `values` (spec.dtype); `params` follow spec.params."""
        raise NotImplementedError

    def reverse(self, cols: Sequence, rows: list) -> list:
        """The columns in reverse order (a copy; GpuStages reverses on the device)."""
        from .gpu import device_columns as DC
        return [DC.reversed_column(c) for c in cols]

    def first_occurrence(self, spec: SortSpec, keys: Sequence[np.ndarray], rows: list) -> np.ndarray:
        """bool keep flags: row i's keys differ from those of every earlier row."""
        raise NotImplementedError

    def group_by(self, spec: GroupSpec, keys: Sequence[np.ndarray], values: Sequence, params: Sequence,
                 rows: list) -> tuple:
        """(group key columns, one result column per spec.aggs, int64 row count per group):
        groups in ascending key order (NaN last); `values` has one column per agg (None for
        count); `params` follow spec.params. A runtime without its own runs the numpy
        reference, and its trace row says so (dialect "numpy")."""
        return NumpyStages.group_by(self, spec, keys, values, params, rows)

    def join(self, left_keys: Sequence[np.ndarray], right_keys: Sequence[np.ndarray], outer: bool,
             rows: list) -> tuple:
        """(left indexes, right indexes), int64, of the matching row pairs in LINQ's order
        (ops/join/reference.join_reference defines it; `outer`: unmatched left rows with -1). A runtime
        without its own runs the numpy reference (its trace row says so)."""
        return NumpyStages.join(self, left_keys, right_keys, outer, rows)

    def semi_join(self, left_keys: Sequence[np.ndarray], right_keys: Sequence[np.ndarray],
                  rows: list) -> np.ndarray:
        """bool flags, one per left row: its key occurs among the right keys (the join's key
        equality; ops/join/reference.semi_reference defines it). A runtime without its own runs the
        numpy reference (its trace row says so)."""
        return NumpyStages.semi_join(self, left_keys, right_keys, rows)

    # ---- what the executor asks where `caps` says the runtime has it ------------------------
    def holds(self, dtypes) -> bool:
        """Whether its kernels hold values of `dtypes` (GpuStages: a dialect without 64-bit
        values runs operations on 64-bit columns on the numpy reference)."""
        return True

    def fuses_scan(self, spec: ScanSpec) -> bool:
        """With `caps.scan_fused_passes`: whether the pass after this scan runs in the scan's
        last pass (not where the scan itself runs on the numpy reference: `holds`)."""
        return self.holds([spec.dtype] + [p.dtype for p in spec.params])

    def scan_fusion_fits(self, n: int) -> bool:
        """With `caps.scan_fused_passes`: whether a fused scan pass of n elements runs as one
        pass here (WebGPUStages: within one storage binding); else the two stages run."""
        return True

    def scan_carries(self, spec: ScanSpec, values: np.ndarray, params: Sequence, rows: list) -> np.ndarray:
        """With `caps.scan_carries`: the carry into each chunk of the scan (its first phase),
        for the pass fused after it (_codegen/ops/scan/fused_cpu.py)."""
        raise NotImplementedError(f"{type(self).__name__} declares no scan_carries (StageCaps)")

    def fused_group(self, p, spec: GroupSpec, keys, values, inputs, params, gparams, n: int, rows: list):
        """With `caps.fused_group`: pass `p` and the group_by after it as one pass, its raw
        result, or None where it does not apply (the two stages run then)."""
        return None

    # explain()'s lines for an operator on this runtime, naming what really runs it; None:
    # the stage kind's own description (Stage.host_lines asks these)
    def describe_group_by(self, spec: GroupSpec) -> list | None:
        return None

    def describe_join(self, this_dtypes: Sequence[str], other_dtypes: Sequence[str],
                      semi: bool) -> list | None:
        """`this_dtypes`, `other_dtypes`: both sides' key column dtypes; `semi`: intersect_by /
        except_by (a flag per row) rather than join (pairs)."""
        return None

    def describe_distinct(self, spec: SortSpec) -> list | None:
        return None


def _row(rows: list, name: str, t0: float) -> None:
    rows.append(KernelRun(name, "numpy", cache="memory", run_ms=now_ms() - t0))


class NumpyStages(StageRuntime):
    """The reference: order_keys' bits and np.lexsort; a scan as a fixed tree of whole-array
    steps evaluating the combine expression with the numpy backend's interpreter."""
    name = "numpy"
    caps = StageCaps()          # host arrays; no fusion across a breaker

    def sort(self, spec, keys, k, rows):
        t0 = now_ms()
        perm = order_keys.stable_order(list(keys), spec.descending)
        _row(rows, f"{spec.name}_lexsort", t0)
        return perm if k is None else perm[:k]

    def gather(self, cols, perm, rows):
        t0 = now_ms()
        out = [np.take(c, perm) for c in cols]
        _row(rows, "gather", t0)
        return out

    def scan(self, spec, values, params, rows):
        t0 = now_ms()
        out = scan_reference(spec, values, params)
        _row(rows, f"{spec.name}_doubling", t0)
        return out

    def first_occurrence(self, spec, keys, rows):
        t0 = now_ms()
        keep = order_keys.first_occurrence(list(keys))
        _row(rows, f"{spec.name}_first_occurrence", t0)
        return keep

    def join(self, left_keys, right_keys, outer, rows):
        t0 = now_ms()
        out = join_reference(left_keys, right_keys, outer)
        _row(rows, "join_sorted_probe", t0)
        return out

    def semi_join(self, left_keys, right_keys, rows):
        t0 = now_ms()
        out = semi_reference(left_keys, right_keys)
        _row(rows, "semi_join_sorted_probe", t0)
        return out

    def group_by(self, spec, keys, values, params, rows):
        t0 = now_ms()
        out = group_reference(spec, keys, values, params)
        _row(rows, f"{spec.name}_sorted_segments", t0)
        return out
