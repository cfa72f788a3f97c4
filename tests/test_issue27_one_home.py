"""Issue 27 item 4 (DESIGN.md section 2, "One home per algorithm"): the order-preserving key
transform, the host-side combine of partial results and the numba loader each have one home.

1. Key transform (_codegen/order_keys.py): every spelling orders like a stable argsort
   (NaN last in both directions, -0.0 == 0.0, inf, integer extremes); no other source file
   spells the sign flip.
2. Host combine of partials (_codegen/combine.py): streamed device chunks, webgpu binding
   windows, the numpy reference's windows, early-exit windows and Dask partitions give,
   bit for bit, the one-pass results of their pieces joined in the documented order (float32
   sums over many pieces: the order shows in the bits).
3. One numba loader (backends/cpu/numba_loader.py) with the disk cache: the long-row kernels
   (rows_numba.py) and the column reduction (rows_columns.py) load from the cache in a new
   process instead of compiling again.
4. Every algorithm's folder (_codegen/ops/<op>/) holds its comment block, GPU lowering, CPU
   lowering and reference; no kernel text is left in backends/, and the numpy reference
   runtime calls the ops' references.
"""
from __future__ import annotations

import inspect
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import querycompute as qc
from querycompute._codegen import order_keys
from querycompute._codegen.ops.group import reference as group_ref
from querycompute._codegen.ops.join import reference as join_ref
from querycompute._codegen.ops.scan import reference as scan_ref
from querycompute.backends.stage_runtime import NumpyStages
from querycompute.backends.cpu.cpu_stages import CpuStages

ROOT = os.path.dirname(os.path.abspath(qc.__file__))
FLOATS = ["float16", "float32", "float64"]
INTS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool"]


def _values(dtype: str, n: int = 400, seed: int = 0) -> np.ndarray:
    """n keys of `dtype` drawn (with many ties) from its edge values and some ordinary ones."""
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.integers(0, 2, n).astype(bool)
    if dt.kind == "f":
        fi = np.finfo(dt)
        edges = [np.nan, -np.nan, 0.0, -0.0, np.inf, -np.inf, fi.max, fi.min, fi.tiny, -fi.tiny,
                 fi.smallest_subnormal, -fi.smallest_subnormal, 1.0, -1.0]
        pool = np.concatenate([np.array(edges, dtype=dt), (rng.standard_normal(20) * 100).astype(dt)])
        pool[1] = -pool[1]                     # a NaN with the sign bit set
    else:
        info = np.iinfo(dt)
        edges = [info.min, info.max, 0, 1, info.min + 1, info.max - 1] + ([-1] if dt.kind == "i" else [])
        pool = np.concatenate([np.array(edges, dtype=dt),
                               rng.integers(info.min, info.max, 20, dtype=dt, endpoint=True)])
    return pool[rng.integers(0, len(pool), n)]


def _expected(x: np.ndarray, descending: bool) -> np.ndarray:
    """The stable order DESIGN.md wants: np.argsort(kind="stable") ascending (NaN last,
    -0.0 == 0.0); descending: a stable sort by the negated value, NaN still last."""
    if not descending:
        return np.argsort(x, kind="stable")
    vals = x.tolist()                          # Python ints / floats: no overflow in -v
    key = [(True, 0) if v != v else (False, -v) for v in vals]
    return np.array(sorted(range(len(x)), key=key.__getitem__), dtype=np.int64)


def _stable_by_bits(bits: np.ndarray) -> np.ndarray:
    return np.argsort(bits, kind="stable")


@pytest.mark.parametrize("dtype", FLOATS + INTS)
def test_numpy_reference_orders_like_a_stable_argsort(dtype):
    x = _values(dtype)
    for desc in (False, True):
        assert np.array_equal(_stable_by_bits(order_keys.transform(x, desc)), _expected(x, desc)), desc
        assert np.array_equal(order_keys.stable_order([x], (desc,)), _expected(x, desc))


@pytest.mark.parametrize("dtype", FLOATS + INTS)
def test_numba_spelling_gives_the_reference_bits(dtype):
    """The numba order_bits the cpu kernels are built on (order_keys.NUMBA_SOURCE, loaded as
    the cpu stage kernels' module) gives transform()'s bits for every value."""
    order_bits = CpuStages()._kernels().ns["order_bits"]
    x = _values(dtype, 120)
    raw = x.view(order_keys.bits_dtype(dtype))
    consts = order_keys.numba_consts(x.dtype)
    for desc in (False, True):
        got = np.array([order_bits(u, consts[0], desc, *consts[1:]) for u in raw], dtype=np.uint64)
        assert np.array_equal(got, order_keys.transform(x, desc).astype(np.uint64)), desc


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int64", "int8", "uint64"])
def test_cpu_order_by_distinct_and_top_k_follow_the_transform(dtype):
    x = _values(dtype, 3000, seed=1)
    q = qc.query(x).on("cpu")
    for desc in (False, True):
        want = x[_expected(x, desc)]
        got = (q.order_by_descending(lambda v: v) if desc else q.order_by(lambda v: v)).to_array()
        assert np.array_equal(got.view(f"u{x.itemsize}"), want.view(f"u{x.itemsize}")), desc
        top = (q.order_by_descending(lambda v: v) if desc else q.order_by(lambda v: v)).take(7).to_array()
        assert np.array_equal(top.view(f"u{x.itemsize}"), want[:7].view(f"u{x.itemsize}")), desc
        assert qc.last_trace().backend == "cpu"
    keep = order_keys.first_occurrence([x])
    assert np.array_equal(q.distinct().to_array().view(f"u{x.itemsize}"), x[keep].view(f"u{x.itemsize}"))
    # first occurrence = the first row of each run of equal keys of a stable argsort
    order = _expected(x, False)
    s = x[order]
    new = np.ones(len(s), bool)
    new[1:] = ~((s[1:] == s[:-1]) | ((s[1:] != s[1:]) & (s[:-1] != s[:-1])))
    assert np.array_equal(np.flatnonzero(keep), np.sort(order[new]))


def test_min_max_key_orders_like_the_floats():
    """The signed min/max key (order_keys.minmax_key): step 3 read as a signed integer, with
    -0.0 just below +0.0; applying it twice gives the bits back."""
    for dtype in ("float32", "float64"):
        x = np.array([-np.inf, -3.5, -1e-30, -0.0, 0.0, 1e-30, 2.0, np.inf], dtype=dtype)
        keys = [order_keys.minmax_key(float(v), dtype) for v in x]
        assert keys == sorted(keys) and len(set(keys)) == len(keys)
        itype = np.int64 if dtype == "float64" else np.int32
        width = 64 if dtype == "float64" else 32
        for v, k in zip(x, keys):
            back = eval(order_keys.minmax_key_text("b", width), {"b": k})
            assert back == int(np.array(v, dtype).view(itype))


# The sign flip of the transform, however it is spelled: a width's sign bit or its
# arithmetic-shift smear, the float exponent table, an order_bits definition, ~bits / bits | sign.
_TRANSFORM = re.compile(r"1\s*<<\s*\(\s*(w|width)\s*-\s*1\s*\)|>>\s*\{?\s*\(?\s*(w|width)\s*-\s*1\b"
                        r"|_EXP_BITS|def order_bits\b|~bits|bits\s*\|\s*sign|\^\s*sign\b")
# Files that still spell it and may not be edited in this step, with what removes them.
_ALLOWED: set = set()


def test_the_sign_flip_is_spelled_only_in_order_keys():
    found = []
    for d, _, files in os.walk(ROOT):
        for f in files:
            if not f.endswith(".py"):
                continue
            path = os.path.join(d, f)
            rel = os.path.relpath(path, ROOT)
            if rel == os.path.join("_codegen", "order_keys.py"):
                continue
            for i, line in enumerate(open(path, encoding="utf-8"), 1):
                if _TRANSFORM.search(line):
                    found.append((rel, i, line.strip()))
    stray = [f"{r}:{i}: {t}" for r, i, t in found if r not in _ALLOWED]
    assert not stray, "the key transform spelled outside _codegen/order_keys.py:\n" + "\n".join(stray)
    gone = _ALLOWED - {r for r, _, _ in found}
    assert not gone, f"no longer spell the transform: remove them from _ALLOWED: {sorted(gone)}"


# ---- 2. the host combine of partials ---------------------------------------------------------
def _floats(n: int, seed: int = 27) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0, 2000, n).astype(np.float32)


def _in_order(parts):
    total = parts[0]
    for p in parts[1:]:
        total = total + p
    return total


def _pairs(parts):
    """partials.tree's order: adjacent pairs, level by level, an odd last one moving up."""
    while len(parts) > 1:
        nxt = [parts[i] + parts[i + 1] for i in range(0, len(parts) - 1, 2)]
        parts = nxt + ([parts[-1]] if len(parts) % 2 else [])
    return parts[0]


def _same_bits(a, b) -> bool:
    return type(a) is type(b) and np.asarray(a).tobytes() == np.asarray(b).tobytes()


def test_combine_rules():
    from querycompute._codegen import combine as C
    assert C.combine("min", None, np.float32(2)) == 2 and C.combine("max", np.float32(1), None) == 1
    assert np.isnan(C.combine("min", np.float32(np.nan), np.float32(1)))
    assert C.combine("first", None, 5) == 5 and C.combine("first", 4, 5) == 4
    assert C.combine("last", 4, None) == 4 and C.combine("last", 4, 5) == 5
    assert C.combine("any", False, True) and not C.combine("all", True, False)
    assert list(C.combine("any", np.array([True, False]), np.array([False, False]))) == [True, False]
    assert C.combine("sum", np.int8(127), np.int8(1)) == np.int8(-128)        # wraps as NumPy
    raw = C.combine_raw(("first", "any", "sum"), None, [(-1, ()), False, np.float32(1)], 0)
    raw = C.combine_raw(("first", "any", "sum"), raw, [(3, (7,)), True, np.float32(2)], 100)
    assert raw == [(103, (7,)), True, np.float32(3)]
    assert C.decided("first", raw[0]) and C.decided("any", raw[1]) and not C.decided("sum", raw[2])
    merged = C.merge_groups({"s": "sum", "f": "first"},
                            {"k": np.array([2.0, np.nan, -0.0]), "s": np.array([1, 2, 3]), "f": np.array([10, 20, 30])},
                            {"k": np.array([0.0, np.nan, 2.0]), "s": np.array([4, 5, 6]), "f": np.array([40, 50, 60])})
    assert merged["k"][:2].tolist() == [-0.0, 2.0] and np.isnan(merged["k"][2])
    assert merged["s"].tolist() == [7, 7, 7] and merged["f"].tolist() == [30, 10, 20]


def test_streamed_chunks_add_in_chunk_order(ocl, monkeypatch):
    """A device-memory budget streams 16 chunks through opencl (pocl): the sum is the chunks'
    one-pass sums added left to right."""
    monkeypatch.setenv("QUERYCOMPUTE_DEVICE_MEMORY", "1e6")      # 65,536-element chunks
    x = _floats(1_000_000)
    got = qc.query(x).on("opencl").sum()
    assert qc.last_trace().chunks == 16
    step = 1 << 16
    parts = [qc.query(x[lo:lo + step]).on("opencl").sum() for lo in range(0, len(x), step)]
    assert qc.last_trace().chunks == 0
    assert _same_bits(got, _in_order(parts))


def test_webgpu_binding_windows_add_in_window_order(monkeypatch):
    if not qc.backends()["webgpu"]["available"]:
        pytest.skip("no WebGPU adapter")
    from querycompute.backends.webgpu import webgpu_windows
    monkeypatch.setattr(webgpu_windows, "TEST_BINDING_LIMIT", 1 << 16)   # 16,383-element windows
    x = _floats(200_003)
    q = qc.query(x).on("webgpu")
    got, top, first = q.sum(), q.max(), q.where(lambda v: v > 1999.9).first()
    step = ((1 << 16) - 4) // 4
    parts = [qc.query(x[lo:lo + step]).on("webgpu").sum() for lo in range(0, len(x), step)]
    assert len(parts) == 13 and _same_bits(got, _in_order(parts))
    assert top == x.max() and first == x[x > np.float32(1999.9)][0]


def test_numpy_reference_windows(monkeypatch):
    """The numpy backend's windows: a float sum in the cpu kernel's fixed order whatever the
    window (_codegen/sum_order.py, issue 28 item 3), the other reductions exact."""
    from querycompute._codegen import sum_order
    from querycompute._codegen.ops.reduce import reference as numpy_reduce
    monkeypatch.setattr(numpy_reduce, "WINDOW", 1000)
    x = _floats(150_500)
    got = qc.query(x).on("numpy").sum()
    assert _same_bits(got, sum_order.total(sum_order.chunk_totals(x), "float32"))
    assert qc.query(x).on("numpy").min() == x.min()
    x[31_234] = np.nan
    q = qc.query(x).on("numpy")
    assert np.isnan(q.max()) and np.isnan(q.min())          # a NaN in any window wins
    assert q.any(lambda v: v != v) and not q.all(lambda v: v < 1999)
    assert q.first(lambda v: v > 1999.9) == x[x > np.float32(1999.9)][0]


def test_early_exit_windows_are_exact():
    """any / all / first over early-exit windows (run/windows.py) on the cpu backend."""
    x = _floats(3_000_000)
    x[2_500_000] = 5000.0
    q = qc.query(x).on("cpu")
    assert q.any(lambda v: v > 4000) and not q.all(lambda v: v < 4000)
    assert len(qc.last_trace().kernels) > 1                   # it did run in windows
    assert q.first(lambda v: v > 4000) == 5000.0
    assert not q.any(lambda v: v > 6000) and q.all(lambda v: v >= 0)


def test_dask_partitions_add_in_tree_order():
    da = pytest.importorskip("dask.array")
    import dask
    x = _floats(40_000)
    with dask.config.set(scheduler="synchronous"):
        got = qc.query(da.from_array(x, chunks=1000)).sum()
        grouped = qc.query(da.from_array(x, chunks=1000)).group_by(lambda v: v // 500).agg(s=qc.sum)
    parts = [qc.query(x[lo:lo + 1000]).sum() for lo in range(0, len(x), 1000)]
    assert len(parts) == 40 and _same_bits(got, _pairs(parts))
    want = qc.query(x).on("numpy").group_by(lambda v: v // 500).agg(s=qc.sum)
    assert np.array_equal(grouped["key"], want["key"])
    np.testing.assert_allclose(grouped["s"], want["s"], rtol=1e-5)


# ---- 3. one numba loader, through the disk cache ----------------------------------------------
_ROWS_SCRIPT = """
import json
import numpy as np
import querycompute as qc

X = np.random.default_rng(0).random((300, 2000)).astype(np.float32)
out = {}
r = qc.query(X).on("cpu").select(lambda r: r.sum() + r.max()).to_array()
out["rows"] = [(k.name.rsplit("_", 1)[0], k.cache) for k in qc.last_trace().kernels]
c = qc.query(X).on("cpu").sum()
out["columns"] = [(k.name.rsplit("_", 1)[0], k.cache) for k in qc.last_trace().kernels]
out["right"] = bool(np.allclose(r, X.sum(1, dtype=np.float64) + X.max(1), rtol=1e-5)
                    and np.allclose(c, X.sum(0), rtol=1e-5))
stats = qc.cache.stats()
out["compiles"], out["disk_hits"] = stats.compiles, stats.disk_hits
print(json.dumps(out))
"""


def test_long_row_kernels_load_from_the_disk_cache_in_a_new_process(tmp_path):
    """rows_numba's kernels used to have no disk cache (they compiled in every process): the
    second process's trace says "disk" and it compiles nothing."""
    from cache_worker import child_env
    script = tmp_path / "rows.py"
    script.write_text(_ROWS_SCRIPT)
    env = child_env(tmp_path / "cache")
    runs = []
    for _ in range(2):
        proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                              text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    first, second = runs
    assert first["right"] and second["right"]
    assert first["rows"] == [["qc_rows", "compiled"]] and first["compiles"] >= 2
    assert first["columns"] == [["qc_rows", "compiled"]]
    assert second["rows"] == [["qc_rows", "disk"]] and second["columns"] == [["qc_rows", "disk"]]
    assert second["compiles"] == 0 and second["disk_hits"] >= 2


def test_every_numba_module_goes_through_the_loader():
    """No cpu module makes numba code another way: no exec of a text, no numba decorator on
    an imported module's function (the fixed kernels are texts: *_kernels.py), no disk-cache
    module import outside numba_loader.py."""
    cpu = os.path.join(ROOT, "backends", "cpu")
    other = re.compile(r"\bexec\(|^\s*(from numba import|import numba)|^\s*@(numba\.)?njit"
                       r"|disk_cache\.(import_module|import_entry|store_module)", re.M)
    for f in sorted(os.listdir(cpu)):
        if f.endswith(".py") and not f.endswith("_kernels.py") and f != "numba_loader.py":
            found = other.search(open(os.path.join(cpu, f), encoding="utf-8").read())
            assert found is None, f"{f}: {found.group(0)}"


# ---- 4. each algorithm's home: _codegen/ops/<op>/ (DESIGN.md section 2) ----------------------
# op folder -> its parts, each a file of the folder (a reference living elsewhere is named with
# its reason in the folder's __init__ table: sort's is the key transform's home, order_keys.py)
_HOMES = {
    "compact": ("__init__.py", "gpu.py"),
    "reduce": ("__init__.py", "gpu.py", "cpu.py", "reference.py"),
    "sort": ("__init__.py", "gpu.py", "topk_gpu.py", "gather_gpu.py", "cpu_kernels.py"),
    "scan": ("__init__.py", "gpu.py", "fused_gpu.py", "cpu.py", "fused_cpu.py", "reference.py"),
    "group": ("__init__.py", "gpu.py", "table_gpu.py", "cpu.py", "fused_cpu.py", "cpu_kernels.py",
              "reference.py"),
    "join": ("__init__.py", "gpu.py", "cpu_kernels.py", "reference.py"),
    "rows": ("__init__.py", "gpu.py", "cpu_kernels.py"),
}


def test_each_algorithm_has_one_folder_with_its_lowerings_and_reference():
    ops = os.path.join(ROOT, "_codegen", "ops")
    for op, parts in _HOMES.items():
        for part in parts:
            assert os.path.isfile(os.path.join(ops, op, part)), f"_codegen/ops/{op}/{part}"
        doc = open(os.path.join(ops, op, "__init__.py")).read()
        assert doc.lstrip().startswith('"""') and len(doc) > 400, f"ops/{op}: its algorithm comment"
        for part in parts[1:]:        # the home's comment block names every part
            assert part in doc or part == "__init__.py", f"ops/{op}/__init__.py does not name {part}"


def test_no_algorithm_is_written_outside_its_home():
    """No fixed numba kernel text in backends/ and no numba printer of an op in dialects/: the
    cpu lowerings live with the GPU ones (the backends load and run them)."""
    stray = [os.path.relpath(os.path.join(d, f), ROOT)
             for d, _, files in os.walk(os.path.join(ROOT, "backends")) for f in files
             if f.endswith("_kernels.py")]
    stray += [f"_codegen/dialects/{f}" for f in os.listdir(os.path.join(ROOT, "_codegen", "dialects"))
              if re.match(r"numba_(scan|group|join|sort)", f)]
    assert not stray, stray
    src = inspect.getsource(NumpyStages)
    for ref in (group_ref.group_reference, join_ref.join_reference, join_ref.semi_reference,
                scan_ref.scan_reference, order_keys.stable_order, order_keys.first_occurrence):
        assert ref.__name__ + "(" in src, f"NumpyStages does not call {ref.__name__}"
