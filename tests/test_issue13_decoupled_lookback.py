"""Issue 13 item 2: CUDA's scan look-back is CUB's decoupled one where the combine is exact
(any grouping gives the same bits: integer add / mul / min / max / bit operations), the
fixed-group one otherwise (float sums, non-associative or parameterised combines), so float
scans stay deterministic. Run through the CPU harness here (blocks one after another, so
every look-back finds its predecessor's inclusive prefix); on an H100 (docs/performance.md)
the decoupled look-back also walked back over published aggregates, correct from n = 1 to
1e8."""
from __future__ import annotations

import numpy as np
import pytest

from querycompute._codegen.ir import expr as E
from querycompute._codegen.ops.scan import gpu as scan
from querycompute._codegen.ir.stage_specs import ScanSpec
from harness import plans, runner
from test_issue13_gpu_scan import spec_of


@pytest.mark.parametrize("kind,dt,exact", [
    ("sum", "int32", True), ("sum", "int64", True), ("min", "int16", True), ("max", "uint8", True),
    ("or", "bool", True), ("sum", "float32", False), ("max", "float64", False),
    ("last_above", "int32", False), ("first_nonzero", "int64", False)])
def test_item2_exact_combines_get_the_decoupled_look_back(kind, dt, exact):
    spec = spec_of(kind, dt)
    assert scan.exact_combine(spec) is exact
    src = scan.render(spec, "cuda").source
    assert ("Tile 0 publishes its inclusive prefix at once" in src) is exact
    assert ("decoupled" in scan.describe(spec, "cuda")) is exact


def test_item2_a_combine_of_other_operands_is_not_exact():
    a, x = E.Var("acc", "int32"), E.Var("item", "int32")
    twice = ScanSpec("int32", E.Binary("add", E.Binary("mul", a, E.Const(2, "int32"), "int32"), x, "int32"),
                     E.Const(0, "int32"))
    assert not scan.exact_combine(twice)              # a * 2 + v: order matters


@pytest.mark.parametrize("kind,dt", [("sum", "int32"), ("max", "int64"), ("or", "bool")])
def test_item2_decoupled_scan_matches_numpy_across_tiles(kind, dt):
    ok, why = runner.available()
    if not ok:
        pytest.skip(why)
    spec = spec_of(kind, dt, seed=3 if dt != "bool" else False)
    ks = scan.render(spec, "cuda")
    module = plans.module_for([ks])
    rng = np.random.default_rng(0)
    tile = ks.block * ks.elems_per_thread
    for n in (1, tile - 1, 3 * tile + 17):
        x = rng.integers(-50, 50, n).astype(dt) if dt != "bool" else rng.random(n) < 0.1
        (got,) = plans.run_kernel_set(ks, module, [x])
        seed = np.array(spec.seed.value, dtype=dt)
        if kind == "sum":
            want = np.cumsum(np.concatenate([[seed], x]).astype(dt), dtype=dt)[1:]
        elif kind == "max":
            want = np.maximum.accumulate(np.maximum(x, seed))
        else:
            want = np.logical_or.accumulate(x | seed)
        np.testing.assert_array_equal(got, want)
