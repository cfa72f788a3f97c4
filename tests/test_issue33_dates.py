"""Issue 33 item 1: datetime64 / timedelta64 columns (frontend/datetimes.py).

Every backend that runs here against NumPy and pandas: the civil-date fields over years
-10000..10000 and at the int64 edges, comparisons and arithmetic across units with NaT,
captured dates as kernel parameters (exact conversion or a QueryError, no recompile for a
new date), inputs from NumPy, pandas, Arrow and polars, results keeping their type and unit
(to_array, min/max, first, order_by, distinct, group_by, join, to_pandas/polars/arrow), the
webgpu refusal and time-zone-aware columns refused.
"""
from __future__ import annotations

import datetime as dt

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import querycompute as qc
from querycompute.errors import QueryError, UnsupportedLambdaError

pd = pytest.importorskip("pandas")

BACKENDS = ["numpy"] + [b for b in ("cpu", "opencl") if qc.backends()[b]["available"]]
FIELDS = ("year", "month", "day", "hour", "minute", "second", "day_of_week", "day_of_year",
          "quarter")
I64 = np.iinfo(np.int64)
NAT = I64.min


def fields_of(q):
    return q.select(lambda d: (d.year, d.month, d.day, d.hour, d.minute, d.second,
                               d.day_of_week, d.day_of_year, d.quarter)).to_array()


def numpy_fields(d: np.ndarray) -> list:
    """The fields by NumPy's own calendar conversions (valid over the whole int64 range), -1
    for NaT."""
    nat = np.isnat(d)
    days = d.astype("M8[D]")
    year = d.astype("M8[Y]").astype(np.int64) + 1970
    month = d.astype("M8[M]").astype(np.int64) % 12 + 1
    day = (days - days.astype("M8[M]")).astype(np.int64) + 1
    secs = (d - days).astype("m8[s]").astype(np.int64) if np.datetime_data(d.dtype)[0] not in ("D", "W") \
        else np.zeros(len(d), np.int64)
    dow = (days.astype(np.int64) % 7 + 3) % 7
    doy = (days - days.astype("M8[Y]")).astype(np.int64) + 1
    out = [year, month, day, secs // 3600, secs // 60 % 60, secs % 60, dow, doy, (month - 1) // 3 + 1]
    return [np.where(nat, -1, f).astype(np.int64) for f in out]


def days_from_civil(y: int, m: int, d: int) -> int:
    """Howard Hinnant's days_from_civil in Python's exact integers."""
    y -= m <= 2
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    return era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719468


def civil_from_days(z: int) -> tuple:
    z += 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (m <= 2), m, d


AS = {"W": 604800 * 10 ** 18, "D": 86400 * 10 ** 18, "h": 3600 * 10 ** 18, "m": 60 * 10 ** 18,
      "s": 10 ** 18, "ms": 10 ** 15, "us": 10 ** 12, "ns": 10 ** 9}


def python_fields(ticks, unit: str) -> list:
    """The fields in plain Python (exact integers), -1 for NaT: the oracle at the edges."""
    rows = []
    for t in map(int, ticks):
        if t == NAT:
            rows.append([-1] * len(FIELDS))
            continue
        if unit in ("Y", "M"):
            y, m, d = (t + 1970, 1, 1) if unit == "Y" else (t // 12 + 1970, t % 12 + 1, 1)
            days, sod = days_from_civil(y, m, 1), 0
        else:
            total = t * AS[unit]
            days, sod = total // AS["D"], total % AS["D"] // AS["s"]
            y, m, d = civil_from_days(days)
        rows.append([y, m, d, sod // 3600, sod // 60 % 60, sod % 60, (days % 7 + 3) % 7,
                     days - days_from_civil(y, 1, 1) + 1, (m - 1) // 3 + 1])
    return [np.array(col, np.int64) for col in zip(*rows)]


def check_fields(got, want):
    for name, g, w in zip(FIELDS, got, want):
        assert g.dtype == np.int64, name
        assert np.array_equal(g, w), (name, g, w)


# --- fields -------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_fields_against_pandas_years_minus_10000_to_10000(backend):
    """Random instants from year -10000 to 10000 in seconds: every field as pandas gives it
    (Monday = 0), NaT's fields -1; .dayofweek / .dayofyear are the same fields."""
    rng = np.random.default_rng(33)
    lo = np.datetime64("-10000-01-01", "s").astype(np.int64)
    hi = np.datetime64("10000-12-31T23:59:59", "s").astype(np.int64)
    ticks = np.concatenate([rng.integers(lo, hi, 300), [lo, hi, 0, -1, 1, 951782400, 951868800]])
    d = ticks.astype("M8[s]")
    s = pd.Series(d)
    got = fields_of(qc.query(d).on(backend))
    want = [getattr(s.dt, f).to_numpy().astype(np.int64) for f in FIELDS]
    check_fields(got, want)
    check_fields(got, numpy_fields(d))
    d[5] = np.datetime64("NaT")
    q = qc.query(d).on(backend)
    got = q.select(lambda v: (v.dayofweek, v.dayofyear, v.year)).to_array()
    assert got[0][5] == got[1][5] == got[2][5] == -1
    assert np.array_equal(got[0], np.where(np.isnat(d), -1, s.dt.day_of_week.to_numpy()))
    assert np.array_equal(got[1], np.where(np.isnat(d), -1, s.dt.day_of_year.to_numpy()))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("unit", ["Y", "M", "W", "D", "h", "m", "s", "ms", "us", "ns"])
def test_fields_every_unit_at_the_int64_edges(backend, unit):
    """Exact over the whole range: the int64 edges (int64 min is NaT) and values around the
    epoch, in every unit, against plain Python's exact integers (NumPy's own calendar
    conversion wraps at the edges of weeks, months and years), and NumPy's for the rest.
    (The compiled backends: five units, each a kernel of its own.)"""
    if backend != "numpy" and unit not in ("M", "W", "D", "s", "ns"):
        pytest.skip("the numpy backend covers this unit; the kernel is the same IR")
    ticks = np.array([I64.min + 1, I64.max, I64.max - 12345, I64.min + 98765, -1, 0, 1,
                      59, -59, 1440, -86401, 20871, -20872, NAT], np.int64)
    if unit == "Y":                   # (the year of the last 1970 values is past int64)
        ticks = np.minimum(ticks, I64.max - 1970)
    d = ticks.view(f"M8[{unit}]")
    got = fields_of(qc.query(d).on(backend))
    check_fields(got, python_fields(ticks, unit))
    inner = slice(4, None)
    check_fields([g[inner] for g in got], numpy_fields(d[inner]))


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(I64.min + 1, I64.max), min_size=1, max_size=20),
       st.sampled_from(["D", "s", "ms", "us", "ns"]))
def test_fields_hypothesis_against_numpy(values, unit):
    d = np.array(values, np.int64).view(f"M8[{unit}]")
    got = fields_of(qc.query(d).on("numpy"))
    check_fields(got, python_fields(values, unit))
    if max(map(abs, values)) < 2 ** 62 // 86400:     # where NumPy's own conversions don't wrap
        check_fields(got, numpy_fields(d))


# --- comparisons and arithmetic -------------------------------------------------------------
def _dates(unit, n=40, seed=0):
    rng = np.random.default_rng(seed)
    base = np.datetime64("2000-01-01", unit).astype(np.int64)
    span = (np.datetime64("2001-01-01", unit) - np.datetime64("2000-01-01", unit)).astype(np.int64)
    out = (base + rng.integers(-span, span, n)).view(f"M8[{unit}]")
    out[::7] = np.datetime64("NaT")
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_comparisons_across_units_and_nat(backend):
    """Across units both convert to the finer; NaT compares false and != true."""
    a, b = _dates("D", seed=1), _dates("s", seed=2)
    b[:10] = a[:10].astype("M8[s]")                  # some equal pairs
    q = qc.query(a=a, b=b).on(backend)
    got = q.select(lambda r: (r.a < r.b, r.a <= r.b, r.a == r.b, r.a != r.b, r.a > r.b,
                              r.a >= r.b)).to_array()
    for g, w in zip(got, (a < b, a <= b, a == b, a != b, a > b, a >= b)):
        assert np.array_equal(g, w)
    assert q.count(lambda r: r.a != r.a) == int(np.isnat(a).sum())


@pytest.mark.parametrize("backend", BACKENDS)
def test_arithmetic_follows_numpy(backend):
    """d - d (finer unit), d + td, td * int, td / td, td // td, td % td, -td, abs(td): values
    and dtypes as NumPy's, NaT propagating."""
    a, b = _dates("D", seed=3), _dates("ms", seed=4)
    td = (b - b[0]).astype("m8[s]")
    td[3] = np.timedelta64("NaT")
    unit = np.timedelta64(7, "h")
    q = qc.query(a=a, b=b, td=td).on(backend)
    got = q.select(lambda r: {"diff": r.b - r.a, "plus": r.a + r.td, "times": r.td * 3,
                              "ratio": r.td / np.timedelta64(7, "h"),
                              "whole": r.td // unit, "rest": r.td % unit, "neg": -r.td,
                              "abs": abs(r.td), "back": r.td + (r.b - r.a)}).to_array()
    with np.errstate(all="ignore"):
        want = {"diff": b - a, "plus": a + td, "times": td * 3, "ratio": td / unit,
                "whole": td // unit, "rest": td % unit, "neg": -td, "abs": abs(td),
                "back": td + (b - a)}
    for k, w in want.items():
        assert got[k].dtype == w.dtype, k
        assert np.array_equal(got[k], w, equal_nan=True), k


@settings(max_examples=10, deadline=None)
@given(st.lists(st.integers(-10 ** 12, 10 ** 12), min_size=1, max_size=12),
       st.sampled_from(["D", "h", "s", "ms"]), st.sampled_from(["s", "us", "ns"]))
def test_arithmetic_hypothesis_against_numpy(values, u1, u2):
    x = np.array(values, np.int64)
    a = (x // 1000).view(f"M8[{u1}]")
    b = x.view(f"M8[{u2}]")
    a[0] = np.datetime64("NaT")
    got = qc.query(a=a, b=b).on("numpy").select(lambda r: (r.a - r.b, r.a < r.b, r.a == r.b)).to_array()
    assert np.array_equal(got[0], a - b, equal_nan=True) and got[0].dtype == (a - b).dtype
    assert np.array_equal(got[1], a < b) and np.array_equal(got[2], a == b)


def test_what_numpy_refuses_is_refused_with_what_to_do():
    d = np.array(["2020-01-01"], "M8[D]")
    q = qc.query(d=d, m=np.array(["2020-01"], "M8[M]"), x=np.array([1.5]))
    for fn, says in ((lambda r: r.d + r.d, "not defined"), (lambda r: r.d > 3, "not with a number"),
                     (lambda r: r.d * 2, "multiplies by an integer"),
                     (lambda r: float(r.d), "converting to float64 is not supported"),
                     (lambda r: r.d.hours, "has no field .hours"),
                     (lambda r: (r.d - r.d).year, "no calendar fields"),
                     (lambda r: r.d < r.m, "calendar units")):
        with pytest.raises(UnsupportedLambdaError, match=says):
            q.select(fn).to_array()


# --- captured dates ------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_captured_dates_are_parameters_converted_exactly(backend):
    """np.datetime64, datetime.date, datetime.datetime and pd.Timestamp meet the column in
    its unit; a new value of the same type reuses the compiled kernel; a value that is not a
    whole number of the column's units is a QueryError."""
    d = np.array(["2020-01-01T06:00", "2020-03-05T00:00", "NaT", "2021-07-04T12:30"], "M8[m]")
    q = qc.query(d).on(backend)
    for t0 in (np.datetime64("2020-03-05"), dt.date(2020, 3, 5), dt.datetime(2020, 3, 5),
               pd.Timestamp("2020-03-05"), np.datetime64("2020-03-05T00:00:00.000")):
        assert q.count(lambda v: v >= t0) == 2
        assert np.array_equal(q.select(lambda v: v - t0).to_array(), d - np.datetime64(t0, "m"), equal_nan=True)
    for k, day in enumerate((dt.date(2020, 1, 1), dt.date(2021, 1, 1), dt.date(2019, 12, 31))):
        got = q.count(lambda v: v < day)
        assert got == int((d[~np.isnat(d)] < np.datetime64(day)).sum())
        assert k == 0 or all(row.cache != "compiled" for row in qc.last_trace().kernels)
    noon = dt.datetime(2020, 3, 5, 12, 0, 30)
    with pytest.raises(QueryError, match="whole number of minutes"):
        q.count(lambda v: v >= noon)
    week = np.timedelta64(1, "W")
    assert np.array_equal(q.select(lambda v: v + week).to_array(), d + week, equal_nan=True)
    tz = pd.Timestamp("2020-01-01", tz="UTC")
    with pytest.raises(QueryError, match="UTC"):
        q.count(lambda v: v >= tz)


# --- inputs and results ---------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_operators_keep_type_and_unit(backend):
    """to_array, min/max (NaT wins, as np.min/np.max), sum of durations, first, order_by (NaT
    last, as np.sort), distinct, group_by keys and min/max/first, join on dates."""
    d = _dates("s", n=30, seed=5)
    k = np.arange(30) % 3
    q = qc.query(d=d, k=k).on(backend)
    assert q.select(lambda r: r.d).to_array().dtype == np.dtype("M8[s]")
    assert np.isnat(q.min(lambda r: r.d)) and np.isnat(q.max(lambda r: r.d))
    ok = q.where(lambda r: r.d == r.d)
    assert ok.min(lambda r: r.d) == np.min(d[~np.isnat(d)])
    assert ok.max(lambda r: r.d) == np.max(d[~np.isnat(d)])
    assert ok.sum(lambda r: r.d - r.d) == np.timedelta64(0, "s")
    assert q.first(lambda r: r.k == 1)["d"] == d[1]
    assert np.array_equal(q.order_by(lambda r: r.d).select(lambda r: r.d).to_array(), np.sort(d), equal_nan=True)
    dd = q.select(lambda r: r.d).distinct().to_array()
    assert dd.dtype == d.dtype and np.array_equal(dd, pd.unique(d), equal_nan=True)
    assert q.select(lambda r: {"d": r.d}).to_pandas()["d"].dtype == d.dtype
    dist = q.select(lambda r: r.d.year).distinct().to_array()
    assert sorted(dist.tolist()) == sorted(set(np.where(np.isnat(d), -1, d.astype("M8[Y]").astype(int) + 1970)))
    g = q.where(lambda r: r.d == r.d).group_by(lambda r: r.k).agg(lo=qc.min(lambda r: r.d),
                                                                   hi=qc.max(lambda r: r.d))
    for i in range(3):
        sel = d[(k == i) & ~np.isnat(d)]
        assert g["lo"][i] == sel.min() and g["hi"][i] == sel.max() and g["lo"].dtype == d.dtype
    g = q.group_by(lambda r: r.d).agg(n=qc.count(), hi=qc.max(lambda r: r.d))
    assert g["key"].dtype == d.dtype and set(g["key"][~np.isnat(g["key"])]) == set(d[~np.isnat(d)])
    assert np.isnat(g["hi"]).sum() == 1
    days = np.array(["2020-01-02", "2020-01-01", "2020-01-03"], "M8[D]")
    other = qc.query(day=np.array(["2020-01-01", "2020-01-02"], "M8[D]"), y=np.array([10, 20]))
    got = qc.query(day=days, x=np.arange(3)).on(backend).join(
        other, lambda r: r.day, lambda o: o.day, lambda r, o: {"day": o.day, "x": r.x, "y": o.y}).to_array()
    assert got["day"].dtype == days.dtype
    assert got["day"].tolist() == [dt.date(2020, 1, 2), dt.date(2020, 1, 1)] and got["y"].tolist() == [20, 10]
    finer = qc.query(day=days.astype("M8[s]"), y=np.arange(3))
    with pytest.raises(QueryError, match="match in one unit"):
        qc.query(day=days).on(backend).join(finer, lambda r: r.day, lambda o: o.day,
                                            lambda r, o: o.y).to_array()


def test_inputs_from_pandas_arrow_polars_and_results_back():
    df = pd.DataFrame({"d": pd.to_datetime(["2020-01-01 10:00", "2021-06-30 23:59"]),
                       "td": pd.to_timedelta(["1h", "2h"]), "x": [1, 2]})
    out = qc.query(df).select(lambda r: {"e": r.d + r.td, "y": r.d.year}).to_pandas()
    assert out["e"].dtype == df["d"].dtype and out["e"].tolist() == (df["d"] + df["td"]).tolist()
    assert out["y"].tolist() == [2020, 2021]
    assert qc.query(df["d"]).select(lambda v: v.month).to_list() == [1, 6]
    tz = pd.DataFrame({"d": pd.to_datetime(["2020-01-01"]).tz_localize("UTC"), "x": [1]})
    assert qc.query(tz).sum(lambda r: r.x) == 1                # an unread tz column is no obstacle
    with pytest.raises(QueryError, match="convert it to UTC"):
        qc.query(tz).select(lambda r: r.d).to_array()
    with pytest.raises(QueryError, match="convert it to UTC"):
        qc.query(tz["d"]).to_array()
    with pytest.raises(QueryError, match="without a unit"):
        qc.query(np.zeros(2, "M8")).to_array()


def test_arrow_inputs_and_results():
    pa = pytest.importorskip("pyarrow")
    t = pa.table({"d32": pa.array([18262, -1], pa.date32()), "d64": pa.array([0, 86400000], pa.date64()),
                  "ts": pa.array([0, 1500], pa.timestamp("ms")), "du": pa.array([5, 6], pa.duration("s")),
                  "tz": pa.array([0, 1], pa.timestamp("s", tz="UTC"))})
    got = qc.query(t).select(lambda r: {"d32": r.d32, "d64": r.d64, "ts": r.ts + r.du,
                                        "y": r.d32.year}).to_arrow()
    assert got.column("d32").type == pa.date32() and got.column("ts").type == pa.timestamp("ms")
    assert got.column("y").to_pylist() == [2020, 1969]
    assert got.column("ts").to_pylist()[1] == dt.datetime(1970, 1, 1, 0, 0, 7, 500000)
    with pytest.raises(QueryError, match="time-zone aware"):
        qc.query(t).select(lambda r: r.tz).to_array()


def test_polars_inputs_and_results():
    pl = pytest.importorskip("polars")
    f = pl.DataFrame({"d": [dt.date(2020, 1, 1), dt.date(1900, 2, 28)],
                      "t": [dt.datetime(2020, 1, 1, 5), dt.datetime(1960, 1, 1, 6)],
                      "du": [dt.timedelta(hours=1), dt.timedelta(0)]})
    got = qc.query(f).select(lambda r: {"d": r.d, "t": r.t + r.du, "m": r.d.month}).to_polars()
    assert got.schema["d"] == pl.Date and got.schema["t"] == pl.Datetime("us")
    assert got["t"].to_list() == [dt.datetime(2020, 1, 1, 6), dt.datetime(1960, 1, 1, 6)]
    assert got["m"].to_list() == [1, 2]
    z = pl.DataFrame({"t": [dt.datetime(2020, 1, 1)]}).with_columns(pl.col("t").dt.replace_time_zone("UTC"))
    with pytest.raises(QueryError, match="time-zone aware"):
        qc.query(z).select(lambda r: r.t).to_array()


def test_webgpu_refuses_dates_and_auto_never_picks_it():
    d = np.array(["2020-01-01"], "M8[D]")
    if qc.backends()["webgpu"]["available"]:
        with pytest.raises(QueryError, match="has dtype datetime64\\[D\\].*no 64-bit integers"):
            qc.query(d).on("webgpu").select(lambda v: v.year).to_array()
    from querycompute.backends import registry
    chosen = registry.choose_auto(1 << 30, False, True, wide=True)
    assert registry.get(chosen).caps.wide_columns
    assert qc.query(d).select(lambda v: v.year).to_list() == [2020]


def test_years_meet_months_in_months_nat_kept():
    y = np.array(["2020", "NaT", "1969"], "M8[Y]")
    m = np.array(["2020-01", "2020-02", "1969-12"], "M8[M]")
    got = qc.query(y=y, m=m).on("numpy").select(lambda r: (r.y < r.m, r.y == r.m, r.m - r.y,
                                                             r.m.quarter)).to_array()
    assert np.array_equal(got[0], y < m) and np.array_equal(got[1], y == m)
    assert got[2].dtype == (m - y).dtype and np.array_equal(got[2], m - y, equal_nan=True)
    assert got[3].tolist() == [1, 1, 4]
