"""Issue 29 item 1: membership in lambdas (`v in (1, 5)`, `v not in codes`, `np.isin(v, codes)`).

A captured value set is a table of kernel parameters (frontend/members.py): a new set of the
same size bucket and types reuses the kernel. The answers are NumPy's: `in` is Python's
any(v == c) on NumPy scalars (weak Python numbers), np.isin converts the set with np.asarray.
Every backend here against plain Python / np.isin; cuda and metal through the CPU harness.
"""
import os
import re
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import querycompute as qc
from querycompute.errors import QueryError, UnsupportedLambdaError
from querycompute.frontend.members import MAX_MEMBERS

from expr_backends import ALL, assert_same_bits, oracle, run, select_everywhere

os.environ.setdefault("WGPU_BACKEND_TYPE", "Vulkan")
_AVAILABLE = qc.backends()
BACKENDS = ["numpy", "cpu"] + (["opencl"] if _AVAILABLE["opencl"]["available"] else [])
BACKENDS32 = BACKENDS + (["webgpu"] if _AVAILABLE.get("webgpu", {}).get("available") else [])
HERE = re.escape(os.path.basename(__file__)) + r":\d+:\d+"


def python_in(x, values) -> np.ndarray:
    """Python's own `in` on the NumPy scalars of x."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.array([v in values for v in x], dtype=bool)


U8 = np.array([0, 1, 3, 9, 255, 128, 3], np.uint8)
I32 = np.array([-2 ** 31, -1, 0, 3, 7, 2 ** 31 - 1, 3], np.int32)
F32 = np.array([np.nan, -0.0, 0.1, 2.5, np.inf, -np.inf, 3.0, 1e30], np.float32)


@pytest.mark.parametrize("backend", BACKENDS32)
def test_captured_sets_of_every_kind(backend):
    codes = (300, 3, -1, 9)                 # 300 and -1 fit no uint8: never matched
    as_list, as_set, as_frozen = [3.0, 2.5], {0, 255}, frozenset([128])
    as_array = np.array([3, 7], np.int32)
    q = qc.query(U8).on(backend)
    assert np.array_equal(q.select(lambda v: v in codes).to_array(), python_in(U8, codes))
    assert np.array_equal(q.select(lambda v: v not in codes).to_array(), ~python_in(U8, codes))
    if backend != "webgpu":     # uint8 == 2.5 compares in float64, which WGSL lacks
        assert np.array_equal(q.select(lambda v: v in as_list).to_array(), python_in(U8, as_list))
    assert np.array_equal(q.select(lambda v: v in as_set).to_array(), python_in(U8, as_set))
    assert np.array_equal(q.where(lambda v: v in as_frozen).to_array(), [128])
    assert np.array_equal(qc.query(I32).on(backend).select(lambda v: v in as_array).to_array(),
                          np.isin(I32, as_array))
    if backend != "webgpu":     # np.isin makes codes an int64 array: a 64-bit comparison
        assert np.array_equal(qc.query(I32).on(backend).select(lambda v: np.isin(v, codes)).to_array(),
                              np.isin(I32, codes))


@pytest.mark.parametrize("backend", BACKENDS32)
def test_literal_sets_and_isin(backend):
    q = qc.query(I32).on(backend)
    assert np.array_equal(q.select(lambda v: v in (3, 2 ** 40, -2 ** 31)).to_array(),
                          python_in(I32, (3, 2 ** 40, -2 ** 31)))
    f = qc.query(F32).on(backend)
    if backend != "webgpu":     # int32 == 7.0 and np.isin's float64 array compare in float64
        assert np.array_equal(q.select(lambda v: v not in [3, 7.0]).to_array(), ~python_in(I32, (3, 7.0)))
        assert np.array_equal(q.select(lambda v: v in {2.5, 0}).to_array(), python_in(I32, {2.5, 0}))
        assert np.array_equal(f.select(lambda v: np.isin(v, (2.5, 1e30))).to_array(),
                              np.isin(F32, (2.5, 1e30)))
    assert np.array_equal(f.select(lambda v: v in (2.5, 0.1, 3)).to_array(),
                          python_in(F32, (2.5, 0.1, 3)))


@pytest.mark.parametrize("backend", BACKENDS32)
def test_nan_signed_zero_and_weak_floats(backend):
    vals = [float("nan"), 0.0, 0.1, np.float32(2.5)]
    got = qc.query(F32).on(backend).select(lambda v: v in vals).to_array()
    want = python_in(F32, vals)
    assert np.array_equal(got, want)
    assert not want[0] and want[1] and want[2]        # NaN in no set; -0.0 in (0.0,); weak 0.1
    q = qc.query(F32).on(backend)
    codes32 = np.array([0.1, np.nan], np.float32)
    assert np.array_equal(q.select(lambda v: np.isin(v, codes32)).to_array(), np.isin(F32, codes32))
    if backend != "webgpu":                           # np.isin converts (0.1,) to float64
        assert not q.select(lambda v: np.isin(v, (0.1,))).to_array()[2]


@pytest.mark.parametrize("backend", BACKENDS32)
def test_empty_sets_and_bools(backend):
    empty, none = (), []
    b = np.array([True, False, True])
    q = qc.query(U8).on(backend)
    assert q.where(lambda v: v in ()).count() == 0
    assert q.where(lambda v: v not in empty).count() == len(U8)
    assert q.where(lambda v: v in none).count() == 0
    assert qc.query(U8[:0]).on(backend).where(lambda v: v in (1, 2)).count() == 0
    ones, flags = (True,), [False]
    assert np.array_equal(qc.query(b).on(backend).select(lambda v: v in ones).to_array(), b)
    if backend != "webgpu":     # bool == 1 compares in int64
        assert np.array_equal(qc.query(b).on(backend).select(lambda v: v in (1, 7)).to_array(), b)
    assert np.array_equal(qc.query(b).on(backend).select(lambda v: v not in flags).to_array(), b)
    assert np.array_equal(qc.query(b).on(backend).select(lambda v: np.isin(v, ones, invert=True)).to_array(), ~b)


@pytest.mark.parametrize("backend", BACKENDS)
def test_ints_beyond_64_bits_never_match(backend):
    x = np.array([-2 ** 63, 0, 5, 2 ** 63 - 1], np.int64)
    q = qc.query(x).on(backend)
    for codes in ([5, -2 ** 70], [-2 ** 70, 2 ** 64 - 1], [2 ** 63 - 1, 0]):
        assert np.array_equal(q.select(lambda v: v in codes).to_array(), python_in(x, codes)), codes


def test_literal_sets_on_every_dialect():
    """cuda and metal kernels (CPU harness) and every runnable backend agree with Python."""
    x = np.array([0, 3, 7, 100, 250, 9], np.uint8)
    for text in ("lambda v: v in (3, 300, 9)", "lambda v: v not in (7, 2.5)",
                 "lambda v: np.isin(v, (250, 1000))"):
        want = oracle(x, text) if "isin" not in text else np.isin(x, (250, 1000))
        for backend, got in select_everywhere(x, text).items():
            if got is not None:
                assert_same_bits(got, want, f"{backend}: {text}")
    codes = [3, 300, -1, 2.5, 250]                    # a captured set: parameters on every dialect
    q = qc.query(x).select(lambda v: v in codes)
    for backend in ALL:
        got = run(q, backend)           # None: Metal has no float64 (uint8 == 2.5 needs it)
        assert (got is None and backend == "metal") or np.array_equal(got, python_in(x, codes)), backend
    ints = (3, 300, -1, 250)
    q = qc.query(x).select(lambda v: v not in ints)
    for backend in ALL:
        assert np.array_equal(run(q, backend), ~python_in(x, ints)), backend
    chained = qc.query(x, x.astype(np.int32)).select(lambda a, b: 0 < a in (b, 7))
    assert chained.to_array().tolist() == [0 < a in (b, 7) for a, b in zip(x, x.astype(np.int32))]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_new_set_never_recompiles(backend):
    x = np.arange(20, dtype=np.int64)
    codes = [1, 5, 9]
    q = qc.query(x).on(backend).where(lambda v: v in codes)
    assert q.to_array().tolist() == [1, 5, 9]
    warm = {"memory", "interpreted"}       # the numpy backend compiles nothing
    for codes in ([2, 4, 6], (17, 3, 0), {11, 12, 13, 14}):    # one size bucket (4): one kernel
        assert q.to_array().tolist() == sorted(codes)
        assert {k.cache for k in qc.last_trace().kernels} <= warm, codes
    arr = np.array([3, 4, 5], np.int64)
    qa = qc.query(x).on(backend).where(lambda v: v in arr)
    qa.count()
    arr = np.array([0, 19, 7], np.int64)
    assert qa.to_array().tolist() == [0, 7, 19]
    arr[0] = 8                                        # changed in place: read on every call
    assert qa.to_array().tolist() == [7, 8, 19]
    assert {k.cache for k in qc.last_trace().kernels} <= warm
    codes = list(range(0, 20, 2))                     # grown past the bucket: compiled anew
    assert q.to_array().tolist() == codes


def test_a_list_grown_in_place_is_read_again():
    x = np.arange(10, dtype=np.int32)
    codes = [1]
    q = qc.query(x).on("cpu").where(lambda v: v in codes)
    assert q.to_array().tolist() == [1]
    codes.extend([2, 3, 8])
    assert q.to_array().tolist() == [1, 2, 3, 8]


@pytest.mark.parametrize("backend", BACKENDS)
def test_membership_in_keys_aggregates_and_joins(backend):
    codes = (1, 3)
    t = qc.query(k=np.array([1, 2, 3, 1, 5]), v=np.array([1.0, 2.0, 4.0, 8.0, 16.0])).on(backend)
    assert t.agg(n=qc.count(lambda r: r.k not in codes))["n"] == 2
    assert t.sum(lambda r: r.v if np.isin(r.k, codes) else 0.0) == 13.0
    if backend == "cpu":        # the cpu's group and join stages take ~50 s of numba compiles;
        return                  # their keys are the same fused pass as the lines above
    got = t.group_by(lambda r: r.k in codes).agg(s=qc.sum(lambda r: r.v))
    assert list(np.asarray(got["key"])) == [False, True] and list(np.asarray(got["s"])) == [18.0, 13.0]
    other = qc.query(k=np.array([1, 3, 5]), w=np.array([10, 30, 50]))
    pairs = t.join(other, lambda r: r.k in codes, lambda o: o.k in codes,
                   lambda r, o: (r.v, o.w)).where(lambda p: p[1] in (50,))
    assert sorted(pairs.to_list()) == [(2.0, 50), (16.0, 50)]


MAKE_HELPER = """
import numpy as np
SMALL = (1, 2)

def small(v):
    return v in SMALL or np.isin(v, BIG)

BIG = np.array([90, 91])
"""


def test_helper_functions_capture_their_own_sets(tmp_path, monkeypatch):
    (tmp_path / "qc_members_helper.py").write_text(MAKE_HELPER)
    monkeypatch.syspath_prepend(str(tmp_path))
    import qc_members_helper as h
    x = np.arange(100, dtype=np.int64)
    q = qc.query(x).on("cpu").where(lambda v: h.small(v))
    assert q.to_array().tolist() == [1, 2, 90, 91]
    h.SMALL = (5, 6)
    assert q.to_array().tolist() == [5, 6, 90, 91]
    assert {k.cache for k in qc.last_trace().kernels} == {"memory"}


def test_explain_shows_the_test_and_the_table():
    codes = [300, 3, 9]
    text = qc.query(U8).where(lambda v: v in codes).explain()
    assert "p0:uint8 = codes[0]" in text and "codes[3]" in text     # padded to 4
    assert "(in0[i] == p0:uint8) or (in0[i] == p1:uint8)" in text
    assert "fits uint8" in text                                       # 300 fits no uint8
    source = qc.query(U8).on("cpu").where(lambda v: v in codes).source()
    assert "== p_p0" in source and "== p_p1" in source, source


def test_errors_name_the_place_and_the_way_out():
    words = ("a", "b")
    big = list(range(MAX_MEMBERS + 1))
    grid = np.zeros((2, 2))
    t = 3
    x = qc.query(I32)
    with pytest.raises(UnsupportedLambdaError, match=HERE + r".*'a' is a string.*strings are not supported"):
        x.where(lambda v: v in (1, "a")).count()
    with pytest.raises(UnsupportedLambdaError, match=HERE + r".*captured 'words' \(tuple\) holds 'a'.*strings"):
        x.where(lambda v: v in words).count()
    with pytest.raises(UnsupportedLambdaError, match=HERE + rf".*holds {MAX_MEMBERS + 1} values.*at most "
                                                            rf"{MAX_MEMBERS}.*join.*intersect_by"):
        x.where(lambda v: v in big).count()
    with pytest.raises(UnsupportedLambdaError, match=HERE + r".*2-D array.*1-D"):
        x.where(lambda v: np.isin(v, grid)).count()
    with pytest.raises(UnsupportedLambdaError, match=HERE + r".*captured 't', a int.*tuple, list or set"):
        x.where(lambda v: v in t).count()
    with pytest.raises(UnsupportedLambdaError, match=HERE + r".*`v \+ 1`.*tuple, list or set"):
        x.where(lambda v: v in v + 1).count()
    with pytest.raises(UnsupportedLambdaError, match=HERE + r".*keyword 'axis' is not supported"):
        x.where(lambda v: np.isin(v, (1,), axis=0)).count()
    with pytest.raises(UnsupportedLambdaError, match=HERE + r".*'words' is a tuple: a value set can only be tested for membership"):
        x.select(lambda v: v + words).to_array()
    with pytest.raises(UnsupportedLambdaError, match=HERE + r".*number constants.*codes = \(a, b\)"):
        x.where(lambda v: np.isin(v, (t, 2))).count()
    assert issubclass(UnsupportedLambdaError, QueryError)


INT_DTYPES = ["int8", "uint8", "int16", "int32", "uint32", "int64", "uint64"]


@st.composite
def _case(draw):
    dtype = np.dtype(draw(st.sampled_from(INT_DTYPES + ["float32", "float64"])))
    if dtype.kind == "f":
        item = st.sampled_from([0.0, -0.0, 1.5, -2.0, float("nan"), float("inf"), 3.0, 1e300])
        elems = st.floats(allow_nan=True, width=dtype.itemsize * 8) | item
        x = np.array(draw(st.lists(elems | item, max_size=12)), dtype)
        values = draw(st.lists(item | st.integers(-5, 5), max_size=6))
    else:
        info = np.iinfo(dtype)
        edges = st.sampled_from([int(info.min), int(info.max), 0, 1, -1 if info.min else 2])
        x = np.array(draw(st.lists(st.integers(int(info.min), int(info.max)) | edges, max_size=12)), dtype)
        values = draw(st.lists(edges | st.integers(-300, 300) | st.sampled_from(
            [2 ** 40, -2 ** 63, 2 ** 64 - 1, 2.5, 3.0]), max_size=6))
    return x, values


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_case(), st.sampled_from(["tuple", "list", "array"]))
def test_property_in_matches_python_and_isin(case, kind):
    x, values = case
    if kind == "array":
        arr = np.asarray(values) if values else np.array([], np.int64)
        if arr.dtype == object:
            return
        values = arr
    elif kind == "tuple":
        values = tuple(values)
    want = python_in(x, values)
    want_isin = np.isin(x, values) if kind == "array" or len(values) else np.zeros(len(x), bool)
    for backend in ("numpy", "cpu"):
        q = qc.query(x).on(backend)
        assert np.array_equal(q.select(lambda v: v in values).to_array(), want), (backend, x, values)
        try:
            got = q.select(lambda v: np.isin(v, values)).to_array()
        except UnsupportedLambdaError as exc:       # no common NumPy type (object array)
            assert "share no NumPy type" in str(exc)
            continue
        assert np.array_equal(got, want_isin), (backend, x, values)
