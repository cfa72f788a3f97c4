"""Issue 27 item 5: capabilities are declared, not probed (DESIGN.md section 2).

Every backend declares a `BackendCaps` (backends/base.py), every dialect a `DialectCaps`
(_codegen/capabilities.py) and every StageRuntime a `StageCaps` (backends/stage_runtime.py);
the ops, the plan, the executor, explain() and the GPU runtime read those fields (and call the
methods the StageRuntime base class defines for them), never a dialect's or backend's name and
never getattr with a default. Checked here: the declarations (and that they agree with the
dialects' spelling tables and with each other), a scan of the source for name comparisons in
_codegen/ops/, plan/, run/, api/ and backends/gpu/ and for getattr probes of a stage runtime,
and the behaviour the capabilities decide, unchanged: WGSL's refusals word for word, the
algorithms each dialect runs, and explain() of three chains as it read before the
capabilities existed.
"""
from __future__ import annotations

import ast
import os

import numpy as np
import pytest

import querycompute as qc
from querycompute._codegen.capabilities import DialectCaps
from querycompute._codegen.dialects import numba_py
from querycompute._codegen.dialects.by_name import DIALECTS, caps
from querycompute._codegen.ops.join import gpu as J
from querycompute._codegen.ops.scan import gpu as scan_op
from querycompute._codegen.ops.sort import gpu as sort_op
from querycompute._codegen.ir.stage_specs import SortSpec
from querycompute.backends import registry
from querycompute.backends.base import BackendCaps
from querycompute.backends.cpu.cpu_stages import CpuStages
from querycompute.backends.gpu.gpu_stages import GpuStages, cuda_stages
from querycompute.backends.stage_runtime import NumpyStages, StageCaps, StageRuntime
from querycompute.backends.webgpu.webgpu_stages import WebGPUStages
from querycompute.errors import UnsupportedTypeError
from querycompute.plan import stage_kinds as S
from querycompute.run.runtime import RUNTIME

ROOT = os.path.dirname(os.path.abspath(qc.__file__))
NAMES = frozenset(registry.NAMES) | frozenset(DIALECTS) | {"wgsl", numba_py.NAME, "llvm"}


# ---- every backend and every dialect declares its capabilities -----------------------------
DECLARED = {
    "numpy": BackendCaps("reference", in_order_fold=True, lookup_tables=True, tier_sums=True),
    "cpu": BackendCaps("host", in_order_fold=True, lookup_tables=True, fast_loads=True, tier_sums=True),
    "cuda": BackendCaps("gpu", device_columns=True, streams=True),
    "opencl": BackendCaps("gpu", device_columns=True, streams=True),
    "webgpu": BackendCaps("gpu", wide_columns=False),
    "metal": BackendCaps("gpu", stage_runtime=False),
}


@pytest.mark.parametrize("name", registry.NAMES)
def test_every_backend_declares_its_capabilities(name):
    backend = registry.get(name)
    assert "caps" in vars(type(backend)), f"{type(backend).__name__} declares no caps of its own"
    assert type(backend.caps) is BackendCaps
    assert backend.caps == DECLARED[name]
    assert (backend.caps.device == "gpu") == (backend.dialect in DIALECTS)


DIALECT_CAPS = {
    "cuda": DialectCaps("CUDA C", forward_progress=True, shuffles=True, buffer_atomics=True, device_fence=True),
    "opencl": DialectCaps("OpenCL C", buffer_atomics=True, device_fence=True),
    "metal": DialectCaps("Metal", float64=False, shuffles=True, buffer_atomics=True),
    "webgpu": DialectCaps("WGSL", int64=False, float64=False),
}


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_every_dialect_declares_its_capabilities(dialect):
    cls = DIALECTS[dialect]
    assert "CAPS" in vars(cls), f"{cls.__name__} declares no CAPS of its own"
    assert type(cls.CAPS) is DialectCaps and caps(dialect) is cls.CAPS
    assert cls.CAPS == DIALECT_CAPS[dialect] and cls.name == dialect


def test_the_numba_dialect_declares_its_capabilities():
    assert type(numba_py.CAPS) is DialectCaps and numba_py.CAPS == DialectCaps("Python (numba)")
    assert registry.get("cpu").dialect == numba_py.NAME


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_dialect_capabilities_agree_with_the_spelling_tables(dialect):
    """A capability the ops rely on is spelled by the printer, and a spelling the printer has
    is declared: shuffles, the atomic add, float64, and the 64-bit pass check."""
    cls = DIALECTS[dialect]
    c = cls.CAPS
    assert c.shuffles == bool(cls.SHUFFLE_DOWN)
    assert c.buffer_atomics == bool(cls.ATOMIC_ADD)
    assert c.float64 == ("float64" not in cls.UNSUPPORTED)
    # no 64-bit values: CFamily.check_pass, which reads CAPS.int64, refuses an int64 value
    try:
        qc.query(np.arange(4, dtype=np.int64)).select(lambda v: v + 1).source(dialect)
        refused = False
    except UnsupportedTypeError:
        refused = True
    assert c.int64 == (not refused)
    assert not (c.float64 and not c.int64)
    if c.forward_progress:                 # a look-back publishes values between blocks
        assert cls.FENCE and cls.VOLATILE and cls.ATOMIC_ADD


@pytest.mark.parametrize("name", registry.NAMES)
def test_backend_capabilities_agree_with_each_other(name):
    """A backend streams only where its columns live on the device; a GPU backend stores
    64-bit columns exactly when its dialect has 64-bit values; the in-order fold and the
    numpy tier's float sums are the numpy reference's and the cpu's."""
    backend = registry.get(name)
    c = backend.caps
    assert c.in_order_fold == (c.device != "gpu") == c.tier_sums
    assert not c.streams or (c.device == "gpu" and c.device_columns)
    if c.device == "gpu":
        assert c.wide_columns == caps(backend.dialect).int64
    assert backend.narrow_group_sums == (not c.wide_columns)


# ---- every stage runtime declares its capabilities ------------------------------------------
STAGE_CAPS = {
    StageRuntime: StageCaps(),
    NumpyStages: StageCaps(),
    CpuStages: StageCaps(indexed_passes=True, scan_carries=True, fused_group=True),
}
# GpuStages: per instance, from the dialect's DialectCaps and whether its device keeps columns
GPU_STAGE_CAPS = {
    "cuda": StageCaps(device_join=True, scan_fused_passes=True, group_tables=True),
    "opencl": StageCaps(device_join=True, scan_fused_passes=True, group_tables=True),
    "metal": StageCaps(device_join=True, scan_fused_passes=True, group_tables=True),
    "webgpu": StageCaps(scan_fused_passes=True),
}


@pytest.mark.parametrize("cls", list(STAGE_CAPS), ids=lambda c: c.__name__)
def test_every_stage_runtime_class_declares_its_capabilities(cls):
    assert "caps" in vars(cls), f"{cls.__name__} declares no caps of its own"
    assert type(cls.caps) is StageCaps and cls.caps == STAGE_CAPS[cls]


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_gpu_stages_declare_their_capabilities_from_the_dialect(dialect):
    cls = WebGPUStages if dialect == "webgpu" else GpuStages
    stages = cls(dialect, build=None)
    assert "caps" in vars(stages) and type(stages.caps) is StageCaps
    assert stages.caps == GPU_STAGE_CAPS[dialect]
    assert stages.caps.group_tables == caps(dialect).int64 == stages.holds(("int64",))
    assert stages.caps.device_join == (J.without_join(dialect) is None)
    kept = GpuStages(dialect, build=None, device_columns=True).caps
    assert kept == StageCaps(**{**vars(GPU_STAGE_CAPS[dialect]), "device_columns": True})


def test_the_cuda_runtime_keeps_columns_on_the_device():
    """cuda_stages needs no device to be built (its kernels compile on first use)."""
    rt = cuda_stages()
    assert rt.caps == StageCaps(device_columns=True, device_join=True, scan_fused_passes=True,
                                group_tables=True)


@pytest.mark.parametrize("name", registry.NAMES)
def test_stage_runtime_capabilities_agree_with_the_backend(name):
    """The Runtime's StageRuntime of each backend: its own (BackendCaps.stage_runtime) or the
    numpy reference; its columns stay on the device exactly where the backend's do."""
    backend = registry.get(name)
    try:
        rt = RUNTIME.stage_runtime(name)
    except Exception as exc:                     # a device runtime that cannot open here
        pytest.skip(f"{name}: {exc}")
    assert type(rt.caps) is StageCaps
    if not backend.caps.stage_runtime:
        assert type(rt) is NumpyStages
        return
    if name == "webgpu" and type(rt) is NumpyStages:
        pytest.skip("no WebGPU device")
    assert rt.caps.device_columns == backend.caps.device_columns
    assert (rt.caps.scan_fused_passes or rt.caps.device_join or rt.caps.group_tables) <= (backend.caps.device == "gpu")
    assert (rt.caps.scan_carries or rt.caps.indexed_passes or rt.caps.fused_group) <= (backend.caps.device == "host")


def test_a_runtime_that_declares_nothing_fuses_nothing():
    """The base class's defaults: no scan fused into the pass after it, no group_by into the
    pass before it, every value held, every fused scan pass fits."""
    class Bare(NumpyStages):
        caps = StageCaps()
    q = qc.query(_I).scan(lambda a, v: a + v, 0).where(lambda v: v > 5)
    staged = q.lowered("count")[0]
    assert S.fused_scans(staged.stages, Bare()) == {}
    assert list(S.fused_scans(staged.stages, CpuStages())) == [0]
    assert list(S.fused_scans(staged.stages, GpuStages("opencl", build=None))) == [0]
    bare = Bare()
    assert bare.holds(("int64",)) and bare.scan_fusion_fits(10 ** 9)
    assert bare.fuses_scan(staged.stages[0].spec)
    assert bare.fused_group(None, None, None, None, None, None, None, 0, []) is None
    with pytest.raises(NotImplementedError):
        bare.scan_carries(staged.stages[0].spec, _I, (), [])
    wide = qc.query(_I.astype(np.int64)).scan(lambda a, v: a + v, 0).where(lambda v: v > 5)
    stages = wide.lowered("count")[0].stages
    assert S.fused_scans(stages, WebGPUStages("webgpu", build=None)) == {}      # a 64-bit scan:
    assert list(S.fused_scans(stages, GpuStages("cuda", build=None))) == [0]   # the reference


K = 1.5


def test_explain_says_why_a_scan_with_64_bit_values_is_not_fused_on_webgpu():
    """A scan whose values (here a captured float64) the runtime's kernels don't hold runs on
    the numpy reference, apart from the pass after it; explain() asks the runtime
    (`fuses_scan`), not the backend's name. The note reads as it did before StageCaps."""
    from querycompute.api import explain_stages
    q = qc.query(_X).scan(lambda a, v: a + v * K, 0).where(lambda v: v > 5)
    staged, term, _, infos = q.lowered("count")
    note = ("    (on webgpu the scan and the pass after it are two stages: the scanned column is "
            "written, then read by the next pass; not fused: a 64-bit scan runs on the numpy "
            "reference on webgpu)")
    text = explain_stages.explain(q, staged, term, infos, "webgpu", len(_X), WebGPUStages("webgpu", build=None))
    assert note in text.splitlines() and "staged plan: 2 stages on webgpu" in text
    text = explain_stages.explain(q, staged, term, infos, "opencl", len(_X), GpuStages("opencl", build=None))
    assert "staged plan: 1 stage on opencl" in text and "not fused" not in text


# ---- no decision by name -------------------------------------------------------------------
SCANNED = ("_codegen/ops", "plan", "run", "api", "backends/gpu")
# name comparisons that stay, each with its reason (the list only shrinks)
ALLOWED: set = {
    # .source("wgsl"): an argument alias, the WGSL dialect by its language's name (as the CLI's)
    ("api/introspect.py", "'wgsl'"),
    # the registry's own list (backends whose drivers run threads: after_fork.py), read when a
    # memo entry of a forked child is asked for (the registry decides which backends exist)
    ("run/engine.py", "registry.NOT_FORK_SAFE"),
    # an unknown dialect refused (ValueError): a check that the name exists, not a decision by it
    ("_codegen/ops/scan/fused_gpu.py", "DIALECTS"),
}
# tables of backend or dialect names, wherever they are imported from (registry.NAMES, the
# list of every backend, validates a user's argument: not a decision)
NAME_TABLES = {"DIALECTS", "GPU_DIALECTS", "DEVICE_BACKENDS", "NOT_FORK_SAFE"}


def _names_in(node, bound: dict) -> set:
    """The backend / dialect names a comparison operand spells: a string, a literal tuple /
    list / set of strings, or a module-level name bound to one."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value} & NAMES
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return set().union(*[_names_in(e, bound) for e in node.elts]) if node.elts else set()
    if isinstance(node, ast.Name) and node.id in bound:
        return bound[node.id]
    if isinstance(node, ast.Name) and node.id in NAME_TABLES:
        return {node.id}
    if isinstance(node, ast.Attribute) and node.attr in NAME_TABLES:
        return {node.attr}
    return set()


def _comparisons(path: str) -> list:
    tree = ast.parse(open(path, encoding="utf-8").read())
    bound = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            found = _names_in(stmt.value, {})
            if found and not isinstance(stmt.value, ast.Constant):
                bound[stmt.targets[0].id] = found
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for operand in [node.left, *node.comparators]:
                found = _names_in(operand, bound)
                if found:
                    label = operand.id if isinstance(operand, ast.Name) else ast.unparse(operand)
                    out.append((node.lineno, label, sorted(found)))
    return out


def test_no_module_of_the_ops_plan_or_gpu_runtime_compares_a_backend_or_dialect_name():
    found, allowed_seen = [], set()
    for folder in SCANNED:
        for d, _, files in os.walk(os.path.join(ROOT, folder)):
            for f in sorted(files):
                if not f.endswith(".py"):
                    continue
                path = os.path.join(d, f)
                rel = os.path.relpath(path, ROOT).replace(os.sep, "/")
                for line, label, names in _comparisons(path):
                    if (rel, label) not in ALLOWED:
                        found.append(f"{rel}:{line}: compares with {label} ({', '.join(names)})")
                    else:
                        allowed_seen.add((rel, label))
    assert not found, ("decisions by a backend's or dialect's name; read its capabilities instead "
                       "(BackendCaps, DialectCaps, StageCaps):\n  " + "\n  ".join(found))
    assert allowed_seen == ALLOWED, f"allowed comparisons no longer there (drop them): {ALLOWED - allowed_seen}"


def test_the_scan_finds_a_name_comparison():
    src = ('X = ("cuda", "opencl")\n'
           'def f(d, b):\n    return d != "webgpu" or b in X or d in ("metal", "other")\n'
           'def g(d):\n    return d in gpu.DIALECTS or d not in DEVICE_BACKENDS\n')
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as fh:
        fh.write(src)
    try:
        assert [(label, names) for _, label, names in _comparisons(fh.name)] == [
            ("'webgpu'", ["webgpu"]), ("X", ["cuda", "opencl"]), ("('metal', 'other')", ["metal"]),
            ("gpu.DIALECTS", ["DIALECTS"]), ("DEVICE_BACKENDS", ["DEVICE_BACKENDS"])]
    finally:
        os.unlink(fh.name)


def test_no_capability_is_probed_with_getattr():
    """Every dialect and backend has the fields (declared, or the base class's default): nothing
    asks getattr(x, "<capability>", default) of them."""
    probed = {"caps", "CAPS", "check_pass", "narrow_group_sums", "FINALIZE_BUFFERS", "TWO_WORD_SUMS",
              "SHUFFLE_DOWN", "ATOMIC_ADD", "is_gpu"} | STAGE_PROBES
    found = []
    for d, _, files in os.walk(ROOT):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(d, f)
                for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
                    if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("getattr", "hasattr") \
                            and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) \
                            and node.args[1].value in probed:
                        found.append(f"{os.path.relpath(path, ROOT)}:{node.lineno}: {ast.unparse(node)}")
    allowed = {"backends/registry.py"}        # registry's is_gpu: another item's module (Backend.is_gpu exists)
    found = [f for f in found if f.split(":")[0].replace(os.sep, "/") not in allowed]
    assert not found, "\n".join(found)


# ---- what the capabilities decide, unchanged ----------------------------------------------
def test_scan_and_compaction_algorithms_follow_forward_progress():
    assert {d: scan_op.algorithm(d) for d in DIALECTS} == {
        "cuda": "lookback", "opencl": "reduce_then_scan", "metal": "reduce_then_scan",
        "webgpu": "reduce_then_scan"}
    with pytest.raises(KeyError):
        scan_op.algorithm("numba")


def test_sort_folds_counts_where_the_dialect_has_a_plain_atomic_add():
    assert {d: sort_op.folds("int32", d) for d in DIALECTS} == {
        "cuda": True, "opencl": True, "metal": True, "webgpu": False}
    assert sort_op.folds("int32") and not sort_op.folds("int64", "cuda")


def test_webgpu_joins_on_the_host_and_says_why():
    why = "WGSL has no 64-bit integers (the join's counts, offsets and wide hashes)"
    assert J.without_join("webgpu") == why
    assert J.dialects_without_join == {"webgpu": why}
    assert all(J.without_join(d) is None for d in ("cuda", "opencl", "metal"))


def test_a_64_bit_key_on_webgpu_still_sorts_on_the_numpy_reference():
    """GpuStages on a dialect without 64-bit values: the int64 sort runs the reference (its trace
    row says numpy), as WebGPUStages did; the int32 one would build kernels."""
    stages = GpuStages("webgpu", build=None)
    rows: list = []
    perm = stages.sort(SortSpec(("int64",), (False,), "k64"), [np.array([3, 1, 2, 1], np.int64)], None, rows)
    assert perm.tolist() == [1, 3, 2, 0] and [r.dialect for r in rows] == ["numpy"]
    assert not stages.holds(("int64",)) and stages.holds(("int32", "float32"))
    assert not stages.caps.group_tables and not stages.caps.device_join
    cuda = GpuStages("cuda", build=None)
    assert cuda.holds(("int64", "float64")) and cuda.caps.group_tables and cuda.caps.device_join


_NO_64 = "WGSL has no 64-bit types: use float32 / int32 values (e.g. .select(np.float32))"
_AFTER = "; cast to a supported type or run this query on another backend"


@pytest.mark.parametrize("dtype, message", [
    (np.float64, f"backend 'webgpu': webgpu kernels cannot use float64: {_NO_64}{_AFTER}"),
    (np.int64, f"backend 'webgpu': webgpu kernels cannot use int64: input 'x' is int64; {_NO_64}{_AFTER}"),
])
def test_webgpu_refuses_64_bit_values_with_the_same_message(dtype, message):
    x = np.arange(10).astype(dtype)
    with pytest.raises(UnsupportedTypeError) as err:
        qc.query(x).select(lambda v: v * 2).source("webgpu")
    assert str(err.value) == message


def test_metal_refuses_float64_and_webgpu_qc_range_with_the_same_message():
    with pytest.raises(UnsupportedTypeError) as err:
        qc.query(np.arange(10.0)).select(lambda v: v * 2).source("metal")
    assert str(err.value) == f"backend 'metal': metal kernels cannot use float64: Metal has no double type{_AFTER}"
    with pytest.raises(UnsupportedTypeError) as err:
        qc.range(0, 1000).select(lambda v: v * 2).source("webgpu", "sum")
    assert str(err.value) == (
        "backend 'webgpu': webgpu kernels cannot use int64: qc.range produces int64 indexes (its start "
        "and step are int64) and WGSL has no 64-bit types: run it on another backend (.on('cpu')), or "
        f"query an int32 array instead, qc.query(np.arange(start, stop, step, dtype=np.int32)){_AFTER}")


def test_webgpu_long_rows_refuse_float64_with_the_same_message():
    X = np.zeros((4, 3000))
    with pytest.raises(Exception) as err:
        qc.query(X).select(lambda r: r.sum()).source("webgpu")
    assert str(err.value) == ("webgpu kernels cannot use float64: long rows: the input is float64 and WGSL "
                              "has no 64-bit types (only the cpu, opencl and cuda kernels hold it)" + _AFTER)


_RNG = np.random.default_rng(0)
_X = _RNG.random(5000, dtype=np.float32) * 100
_I = _RNG.integers(0, 1000, 5000).astype(np.int32)
_U = _RNG.integers(0, 200, 5000).astype(np.uint8)

# explain() as it read before the capabilities (captured at the parent commit)
EXPLAIN_SCAN_CUDA = """\
operation graph:
  source: array, n=5000
  1. scan   lambda a, v: a + v
  2. select lambda v: v * 2
  terminal: sum
logical plan (optimized):
  source: array
  scan lambda a, v: a + v
  select lambda v: v * 2
  terminal sum
  optimizer passes: none applied
staged plan: 2 stages on cuda (selects/wheres fused into the pass at each side of a breaker)
  stage 1: scan: inclusive running fold (float32, seed 0)
    inclusive scan of float32: single-pass fixed-group look-back (init + 1 kernel), 8 B per element
      qc_scan0_scan_lookback: 8 B per element
      total: 8 B per element
    (on cuda the scan and the pass after it are two stages: the scanned column is written, then read by \
the next pass; not fused: its sum of float32 depends on the order of combining: the unfused reduce's \
grouping gives the bits, which a fused pass would change)
  stage 2: terminal sum: fused pass qc_stage1 (reduce)
    v0: float32 = (in0[i] * 2.0:float32)
    aggregate sum(v0) -> float32
    kernel qc_stage1_reduce_partials: grid=(5,) block=(256,)
    bytes per element: reads 4 B, writes 0 B
between stages the columns stay on the device (device columns); only the terminal's result is read \
back (a join's pairs and gathers stay there too; webgpu's join runs on the host)"""

EXPLAIN_SORT_METAL = """\
operation graph:
  source: array, n=5000
  1. order_by 
  terminal: to_array
logical plan (optimized):
  source: array
  order_by
  terminal to_array
  optimizer passes: none applied
staged plan: 2 stages on metal (selects/wheres fused into the pass at each side of a breaker)
  stage 1: stable sort by 1 key column (int32)
    stable LSD radix sort, 4 passes of 8-bit digits (a stable scatter each; a key's first byte counted \
by a read, the next passes' counts added by the scatter before them), int32 index payload
      qc_sort0_pass_key0 (counts): 4 B per element
      qc_sort0_pass_key0 (scatter): 12 B per element
      qc_sort0_pass_uint32 (scatter): 16 B per element
      qc_sort0_pass_uint32 (scatter): 16 B per element
      qc_sort0_pass_uint32 (scatter): 12 B per element
      gather of the element columns: 12 B per element
      total: 60 B per element
  stage 2: terminal to_array: the columns as they are
between stages the columns are host arrays, handed from stage to stage"""

EXPLAIN_NARROW_SUM_WEBGPU = """\
operation graph:
  source: array(uint8[stride 1]), n=5000
  1. where  lambda v: v > 3  -> uint8
  terminal: sum
fused plan: 1 stage (every select/where and the terminal fused into one pass each)
  stage 1: reduce (two-stage reduction: one partial per block, then a finalize kernel)
  keep if (in0[i] > 3:uint8)
  aggregate sum(uint64(in0[i])) -> uint64
kernels (webgpu):
  qc_sum_reduce_partials: grid=(2,) block=(256,)
  qc_sum_reduce_finalize: grid=(1,) block=(256,)
memory traffic per element: fused reads 1 B, writes 0 B (plus one partial per block)
  one kernel per operator instead would move about 5 B per element (5.0x the fused pass)
kernel traffic at n=5000 (webgpu kernels; outputs at most):
  qc_sum_reduce_partials: reads 5000 B, writes 16 B
  qc_sum_reduce_finalize: reads 16 B, writes 8 B"""


def test_explain_unchanged_look_back_scan_on_cuda():
    q = qc.query(_X).scan(lambda a, v: a + v, 0).select(lambda v: v * 2)
    assert q.explain("cuda", "sum") == EXPLAIN_SCAN_CUDA


def test_explain_unchanged_folded_sort_counts_on_metal():
    assert qc.query(_I).order_by().explain("metal") == EXPLAIN_SORT_METAL


def test_explain_unchanged_two_word_sum_on_webgpu():
    q = qc.query(_U).where(lambda v: v > 3)
    assert q.explain("webgpu", "sum") == EXPLAIN_NARROW_SUM_WEBGPU
    src = q.source("webgpu", "sum")           # NumPy's uint64 sum kept in two u32 words
    assert "u64" not in src and "i64" not in src


# ---- no stage runtime is probed --------------------------------------------------------------
# StageCaps' fields and the methods the StageRuntime base class defines for them
STAGE_PROBES = set(StageCaps.__dataclass_fields__) | {
    "holds", "fuses_scan", "scan_fusion_fits", "scan_carries", "fused_group", "to_device", "gather_filled"}
RUNTIME_NAMES = {"runtime", "rt", "stages", "stage_runtime"}     # how the code names a StageRuntime
PROBE_SCANNED = ("plan", "run", "api", "backends/gpu", "backends/cpu", "backends/webgpu", "dask")


def _runtime_probes(path: str) -> list:
    """getattr / hasattr calls on a stage runtime (a name or attribute called as RUNTIME_NAMES)."""
    out = []
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("getattr", "hasattr") and node.args:
            obj = node.args[0]
            name = obj.id if isinstance(obj, ast.Name) else obj.attr if isinstance(obj, ast.Attribute) else ""
            if name in RUNTIME_NAMES:
                out.append((node.lineno, ast.unparse(node)))
    return out


def test_no_stage_runtime_is_probed_with_getattr():
    """The executor, the stage kinds and explain() read `runtime.caps` and call the base
    class's methods; none asks getattr(runtime, ...) / hasattr(runtime, ...)."""
    found = []
    for folder in PROBE_SCANNED:
        for d, _, files in os.walk(os.path.join(ROOT, folder)):
            for f in sorted(files):
                if f.endswith(".py"):
                    path = os.path.join(d, f)
                    rel = os.path.relpath(path, ROOT).replace(os.sep, "/")
                    found += [f"{rel}:{line}: {text}" for line, text in _runtime_probes(path)]
    assert not found, "read the runtime's StageCaps instead:\n  " + "\n  ".join(found)


def test_the_probe_scan_finds_a_probe():
    src = ('def f(self, rt):\n    return getattr(rt, "device_join", False) or hasattr(self.runtime, "x")'
           ' or getattr(q, "y", 0)\n')
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as fh:
        fh.write(src)
    try:
        assert [text for _, text in _runtime_probes(fh.name)] == [
            "getattr(rt, 'device_join', False)", "hasattr(self.runtime, 'x')"]
    finally:
        os.unlink(fh.name)
