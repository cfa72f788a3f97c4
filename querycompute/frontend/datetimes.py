"""Dates and times: datetime64 / timedelta64 values in kernels (DESIGN.md sections 3 and 4).

One concept in one place. In a kernel a date or a duration is an int64 tick count; while a
lambda is translated its Scalar also carries its *time type*, a NumPy dtype name such as
"datetime64[us]" or "timedelta64[D]" (`Scalar.time`), and the rules here follow NumPy 2:

- comparisons, subtraction and `+ timedelta64` across units convert to the finer unit (a
  multiply by the units' ratio); datetime - datetime is a timedelta, datetime +- timedelta a
  datetime, timedelta * int a timedelta, timedelta / timedelta a float64, timedelta //
  timedelta an int64 and timedelta % timedelta a timedelta;
- NaT (the tick int64 min) compares false (`!=` true) and propagates through arithmetic;
- captured `np.datetime64` / `np.timedelta64`, `datetime.date`, `datetime.datetime`,
  `datetime.timedelta` and `pd.Timestamp` / `pd.Timedelta` are kernel parameters: their ticks
  are computed at launch in the unit of the column they meet (exactly, or a QueryError), so a
  new date never recompiles; `np.datetime64("2020-01-01")` / `np.timedelta64(1, "D")` with
  constant arguments are constants;
- the fields `.year .month .day .hour .minute .second .day_of_week .day_of_year .quarter`
  (pandas' names, Monday = 0; `.dayofweek` / `.dayofyear` too) are int64 values (pandas
  gives int32, too narrow for the years of the whole range) computed from the ticks by
  integer civil-date arithmetic (Howard Hinnant's civil_from_days, floor divisions
  throughout), exact over the whole int64 range of every unit; a NaT's fields are -1 (pandas
  gives NaN, which an integer can't hold: `d == d` keeps the dates that are not NaT).

Units: NumPy's Y M W D h m s ms us ns ps fs as. Years and months are calendar units: a Y/M
value meets only Y/M values (NumPy converts them to days through the calendar; here that is
refused with what to do instead). Host columns of these dtypes are read as their int64 ticks
(sources/sources.py); results carry the time type and are viewed back on the host.
"""
from __future__ import annotations

import ast
import datetime as _dt
import sys
from dataclasses import replace

import numpy as np

from querycompute._codegen.ir.expr import Binary, Cast, Compare, Const, Expr, Unary, Where
from ..errors import QueryError, UnsupportedLambdaError
from . import translate_ops as ops      # (translate_ops calls in here: read at call time)
from .values import Exact, Scalar

NAT = -2 ** 63
UNITS = ("Y", "M", "W", "D", "h", "m", "s", "ms", "us", "ns", "ps", "fs", "as")
CALENDAR = ("Y", "M")
# Length of each fixed unit in attoseconds (Python ints: every ratio is exact).
_AS = {"W": 604800 * 10 ** 18, "D": 86400 * 10 ** 18, "h": 3600 * 10 ** 18,
       "m": 60 * 10 ** 18, "s": 10 ** 18, "ms": 10 ** 15, "us": 10 ** 12, "ns": 10 ** 9,
       "ps": 10 ** 6, "fs": 10 ** 3, "as": 1}
FIELDS = {"year": "year", "month": "month", "day": "day", "hour": "hour", "minute": "minute",
          "second": "second", "day_of_week": "day_of_week", "dayofweek": "day_of_week",
          "weekday": "day_of_week", "day_of_year": "day_of_year", "dayofyear": "day_of_year",
          "quarter": "quarter"}
FIELD_DTYPE = "int64"            # (pandas gives int32, too narrow for the years of the range)
TZ_WAYS = ("convert it to UTC and drop the zone first (pandas: .dt.tz_convert(None); "
           "polars: .dt.replace_time_zone(None) after .dt.convert_time_zone('UTC'); Arrow: "
           ".cast(pa.timestamp(unit)))")


class TimeError(QueryError):
    """A date/time value that can't be used as written (an inexact unit conversion, a
    time-zone-aware value)."""


# --- types -------------------------------------------------------------------------------
def is_time_dtype(d) -> bool:
    """Whether a dtype (name or np.dtype) is a datetime64 / timedelta64 of a concrete unit."""
    if isinstance(d, np.dtype):
        return d.kind in "mM" and np.datetime_data(d)[0] in UNITS and np.datetime_data(d)[1] == 1
    return isinstance(d, str) and d.startswith(("datetime64[", "timedelta64["))


def parse(t: str) -> tuple[str, str]:
    """("M" or "m", unit) of a time type name."""
    return ("M" if t.startswith("datetime") else "m"), t[t.index("[") + 1:-1]


def name(kind: str, unit: str) -> str:
    return f"{'datetime64' if kind == 'M' else 'timedelta64'}[{unit}]"


def storage(d: str) -> str:
    """The kernel dtype of a host column dtype: int64 ticks for a time type."""
    return "int64" if is_time_dtype(d) else d


def host_dtype(s: Scalar) -> str:
    """The host dtype a Scalar's column has (its time type, else its kernel dtype)."""
    return s.time or s.expr.dtype


def loaded(expr: Expr, d: str) -> Scalar:
    """The element value of a column of host dtype `d` whose kernel load is `expr`."""
    return Scalar(expr, None, time=d) if is_time_dtype(d) else Scalar(expr, None)


def column_problem(dt: np.dtype) -> str | None:
    """Why a datetime64 / timedelta64 host dtype can't be a column, or None."""
    unit, count = np.datetime_data(dt)
    if unit == "generic":
        return f"has dtype {dt} without a unit; give it one, e.g. .astype('{dt.kind}8[s]')"
    if count != 1:
        return f"has dtype {dt} (a unit multiple); use a plain unit, e.g. .astype('{dt.kind}8[{unit}]')"
    return None


def finer(u1: str, u2: str, at: str) -> str:
    if u1 == u2:
        return u1
    if (u1 in CALENDAR) != (u2 in CALENDAR):
        raise _fail(at, f"a value in {_unit_name(u1)} meets one in {_unit_name(u2)}: years and "
                        f"months are calendar units that convert to the others only through "
                        f"the calendar; convert the column on the host first "
                        f"(.astype('datetime64[D]'))")
    if u1 in CALENDAR:
        return "M"
    return u1 if _AS[u1] < _AS[u2] else u2


def ratio(coarse: str, fine: str) -> int:
    if coarse in CALENDAR:
        return 12 if (coarse, fine) == ("Y", "M") else 1
    return _AS[coarse] // _AS[fine]


def _unit_name(u: str) -> str:
    return {"Y": "years", "M": "months", "W": "weeks", "D": "days", "h": "hours",
            "m": "minutes", "s": "seconds"}.get(u, u)


def _fail(at: str, message: str):
    return UnsupportedLambdaError(message, at, "datetime")


# --- captured values and constants --------------------------------------------------------
def _pandas_scalar(obj):
    pd = sys.modules.get("pandas")
    if pd is not None and isinstance(obj, (pd.Timestamp, pd.Timedelta)):
        return obj
    return None


def time_of_value(obj) -> str | None:
    """The time type of a captured Python/NumPy/pandas date or duration, or None when obj
    is none. A time-zone-aware value is refused (TimeError)."""
    if isinstance(obj, (np.datetime64, np.timedelta64)):
        unit, count = np.datetime_data(obj.dtype)
        return name(obj.dtype.kind, unit if unit != "generic" else "s") if count == 1 else None
    p = _pandas_scalar(obj)
    if p is not None:
        if getattr(p, "tzinfo", None) is not None:
            raise TimeError(f"the captured {p!r} is time-zone aware; {TZ_WAYS}")
        return name("M" if type(p).__name__ == "Timestamp" else "m", getattr(p, "unit", "ns"))
    if isinstance(obj, _dt.datetime):
        if obj.tzinfo is not None:
            raise TimeError(f"the captured {obj!r} is time-zone aware; {TZ_WAYS}")
        return "datetime64[us]"
    if isinstance(obj, _dt.date):
        return "datetime64[D]"
    if isinstance(obj, _dt.timedelta):
        return "timedelta64[us]"
    return None


def ticks(obj, target: str, where: str) -> np.int64:
    """obj's ticks in time type `target` (the unit it meets), exactly, else TimeError."""
    own = time_of_value(obj)
    kind, unit = parse(target)
    if own is None or parse(own)[0] != kind:
        raise TimeError(f"{where}: the captured {obj!r} is not a "
                        f"{'date' if kind == 'M' else 'duration'}, which it was when the query "
                        f"was compiled")
    v = np.datetime64(obj) if kind == "M" else np.timedelta64(obj)
    if isinstance(obj, (np.datetime64, np.timedelta64)) and np.datetime_data(obj.dtype)[0] == "generic":
        v = v.astype(own)
    v = v.astype(own) if v.dtype != np.dtype(own) else v
    if np.isnat(v):
        return np.int64(NAT)
    with np.errstate(all="ignore"):
        out = v.astype(target)
        back = out.astype(own)
    if np.isnat(out) or back != v:
        raise TimeError(f"{where}: the captured {obj!r} is not a whole number of "
                        f"{_unit_name(unit)}: it can't be converted exactly to {target}, the "
                        f"type of the column it meets; round it first (or read the column in "
                        f"a finer unit)")
    return np.int64(out.view("int64"))


def captured(obj, key: str, new_param) -> Scalar:
    """The Scalar of a captured date/duration: a parameter of its own type; `exact` holds
    its capture so that a meeting with a column makes the parameter in the column's unit
    (derived at launch: frontend/exact.py)."""
    t = time_of_value(obj)
    return Scalar(new_param(("exact", "time", ("cap", key), t), "int64"), None,
                  Exact(("cap", key), new_param), time=t)


def is_captured(s: Scalar) -> bool:
    return s.time is not None and s.exact is not None


def construct(kind: str, node: ast.Call, at: str) -> Scalar:
    """np.datetime64(...) / np.timedelta64(...) written in the lambda with constant arguments:
    a constant of that type."""
    args = []
    for a in node.args:
        if not isinstance(a, ast.Constant) and not (isinstance(a, ast.UnaryOp)
                                                    and isinstance(a.operand, ast.Constant)):
            raise _fail(at, f"np.{'datetime64' if kind == 'M' else 'timedelta64'}(...) inside a "
                            f"lambda takes constant arguments, e.g. np.timedelta64(1, 'D'); "
                            f"capture a variable date instead (t0 = np.datetime64(...))")
        args.append(ast.literal_eval(a))
    if node.keywords:
        raise _fail(at, "np.datetime64 / np.timedelta64 take no keywords here")
    try:
        v = (np.datetime64 if kind == "M" else np.timedelta64)(*args)
    except (TypeError, ValueError) as e:
        raise _fail(at, f"{ast.unparse(node)} fails in NumPy: {e}") from None
    t = time_of_value(v)
    return Scalar(Const(int(v.astype(t).view("int64")), "int64"), None, time=t)


# --- lowering ----------------------------------------------------------------------------
def _const(v: int) -> Const:
    return Const(v, "int64")


def isnat(e: Expr) -> Expr:
    return Compare("eq", e, _const(NAT))


def _any(parts: list) -> Expr:
    acc = parts[0]
    for p in parts[1:]:
        acc = Binary("or", acc, p, "bool")
    return acc


def _nat_checks(*es: Expr) -> list:
    return [isnat(e) for e in es if not (isinstance(e, Const) and e.value != NAT)]


def to_unit(s: Scalar, unit: str, at: str) -> Expr:
    """s's ticks in `unit` (a unit at least as fine as s's own), NaT kept."""
    kind, own = parse(s.time)
    if is_captured(s):
        return s.exact.param(("exact", "time", s.exact.tree, name(kind, unit)), "int64")
    if own == unit:
        return s.expr
    if finer(own, unit, at) != unit:
        raise _fail(at, f"{s.time} can't be converted to the coarser unit {unit} exactly")
    r = ratio(own, unit)
    if isinstance(s.expr, Const):
        return s.expr if s.expr.value == NAT else _const(_wrap(s.expr.value * r))
    if r == 1:
        return s.expr
    return Where(isnat(s.expr), _const(NAT), Binary("mul", s.expr, _const(r), "int64"), "int64")


def _wrap(v: int) -> int:
    return (v + 2 ** 63) % 2 ** 64 - 2 ** 63


def _meeting_unit(a: Scalar, b: Scalar, at: str) -> str:
    """The unit two time values are compared / combined in: the finer of the two; a captured
    value takes the unit of the column it meets."""
    ua, ub = parse(a.time)[1], parse(b.time)[1]
    if is_captured(a) and not is_captured(b):
        return ub
    if is_captured(b) and not is_captured(a):
        return ua
    return finer(ua, ub, at)


def _nat_or(value: Expr, *operands: Expr) -> Expr:
    checks = _nat_checks(*operands)
    return Where(_any(checks), _const(NAT), value, "int64") if checks else value


def binary(op: str, a: Scalar, b: Scalar, at: str) -> Scalar:
    """a op b where a or b is a date or a duration (NumPy's rules, module docstring)."""
    ka = parse(a.time)[0] if a.time else None
    kb = parse(b.time)[0] if b.time else None
    what = f"{ops.SYMBOL.get(op, op)} on {a.time or ops.describe(a)} and {b.time or ops.describe(b)}"
    if ka and kb:
        if op in ("lt", "le", "gt", "ge", "eq", "ne"):
            if ka != kb:
                raise _fail(at, f"{what}: a date is compared with dates, a duration with durations")
            unit = _meeting_unit(a, b, at)
            ea, eb = to_unit(a, unit, at), to_unit(b, unit, at)
            cmp = Compare(op, ea, eb)
            checks = _nat_checks(ea, eb)
            if not checks:
                return Scalar(cmp)
            if op == "ne":
                return Scalar(_any(checks + [cmp]))
            return Scalar(Binary("and", Unary("not", _any(checks), "bool"), cmp, "bool"))
        kind = {("M", "sub", "M"): "m", ("M", "sub", "m"): "M", ("M", "add", "m"): "M",
                ("m", "add", "M"): "M", ("m", "add", "m"): "m", ("m", "sub", "m"): "m",
                ("m", "mod", "m"): "m", ("m", "truediv", "m"): "float64",
                ("m", "floordiv", "m"): "int64"}.get((ka, op, kb))
        if kind is None:
            raise _fail(at, f"{what} is not defined (NumPy has no such loop): dates subtract "
                            f"to durations, a duration adds to a date, durations add, subtract, "
                            f"divide and take % of each other")
        unit = _meeting_unit(a, b, at)
        ea, eb = to_unit(a, unit, at), to_unit(b, unit, at)
        if kind == "float64":       # NaT / x and x / NaT are NaN; x / 0 is +-inf or NaN
            fa, fb = Cast(ea, "float64"), Cast(eb, "float64")
            nan = Const(float("nan"), "float64")
            checks = _nat_checks(ea, eb)
            value = Binary("truediv", fa, fb, "float64")
            return Scalar(Where(_any(checks), nan, value, "float64") if checks else value)
        if kind == "int64":         # NaT // x is 0 (NumPy warns); x // 0 is 0
            checks = _nat_checks(ea, eb)
            value = Binary("floordiv", ea, eb, "int64")
            return Scalar(Where(_any(checks), _const(0), value, "int64") if checks else value)
        if op == "mod":             # NumPy: x % 0 is NaT
            checks = _nat_checks(ea, eb) + [Compare("eq", eb, _const(0))]
            return Scalar(Where(_any(checks), _const(NAT), Binary("mod", ea, eb, "int64"), "int64"),
                          time=name("m", unit))
        return Scalar(_nat_or(Binary(op, ea, eb, "int64"), ea, eb), time=name(kind, unit))
    t, n = (a, b) if ka else (b, a)
    kt = ka or kb
    if op == "mul" and kt == "m" and (n.weak in ("int", "bool") or n.dtype.startswith(("int", "uint", "bool"))):
        if n.dtype == "uint64" and n.weak is None:
            raise _fail(at, f"{what}: NumPy has no timedelta64 * uint64 loop; cast to np.int64 first")
        unit = parse(t.time)[1]
        et = to_unit(t, unit, at)
        en = ops.to_dtype(n, "int64", at)
        return Scalar(_nat_or(Binary("mul", et, en, "int64"), et), time=t.time)
    if op in ("lt", "le", "gt", "ge", "eq", "ne"):
        raise _fail(at, f"{what}: a date or a duration is compared with one of its own kind, "
                        f"not with a number (make one: np.datetime64('2020-01-01'), "
                        f"np.timedelta64(3, 'D'), or a captured date)")
    raise _fail(at, f"{what} is not supported: a duration multiplies by an integer; for a "
                    f"number of units divide by one unit, (d - epoch) // np.timedelta64(1, 'D')")


def unary(op: str, s: Scalar, at: str) -> Scalar:
    """-d, +d, abs(d) of a duration (NaT stays NaT: -int64 min wraps to itself)."""
    kind = parse(s.time)[0]
    if kind == "m" and op in ("neg", "pos", "abs"):
        e = to_unit(s, parse(s.time)[1], at)
        return Scalar(e if op == "pos" else Unary(op, e, "int64"), time=s.time)
    raise _fail(at, f"{op} is not defined for {s.time}")


def select(c: Expr, a: Scalar, b: Scalar, at: str) -> Scalar:
    """`a if c else b` of two values of one kind (the finer unit)."""
    if not (a.time and b.time) or parse(a.time)[0] != parse(b.time)[0]:
        raise _fail(at, f"the branches of `a if c else b` are {a.time or a.dtype} and "
                        f"{b.time or b.dtype}: both must be dates or both durations")
    unit = _meeting_unit(a, b, at)
    return Scalar(Where(c, to_unit(a, unit, at), to_unit(b, unit, at), "int64"),
                  time=name(parse(a.time)[0], unit))


def refuse(s: Scalar, what: str, at: str):
    raise _fail(at, f"{what} is not supported on a {s.time} value; a date or a duration "
                    f"compares, subtracts, adds a duration, and has the fields "
                    f"{', '.join(sorted(set(FIELDS)))}; for its number of units write "
                    f"(d - epoch) // np.timedelta64(1, 'D')")


# --- fields ------------------------------------------------------------------------------
def _b(op: str, a: Expr, b) -> Expr:
    return Binary(op, a, b if isinstance(b, Expr) else _const(b), "int64")


def _eras(days: Expr) -> tuple[Expr, Expr]:
    """(era, day of the era) of days since 1970-01-01 in 400-year eras of 146097 days."""
    return _b("floordiv", days, 146097), _b("mod", days, 146097)


def _civil(era0: Expr, doe0: Expr) -> tuple[Expr, Expr, Expr, Expr]:
    """(year, month, day, day of the March-based year) of the day `era0 * 146097 + doe0`
    since 1970-01-01: Hinnant's civil_from_days with the era taken before the epoch shift,
    so no intermediate value overflows for any int64 tick count."""
    shifted = _b("add", doe0, 135080)                    # 719468 = 4 * 146097 + 135080
    wrap = Compare("ge", shifted, _const(146097))
    doe = Where(wrap, _b("sub", shifted, 146097), shifted, "int64")
    era = _b("add", _b("add", era0, 4), Where(wrap, _const(1), _const(0), "int64"))
    yoe = _b("floordiv", _b("sub", _b("add", _b("sub", doe, _b("floordiv", doe, 1460)),
                                       _b("floordiv", doe, 36524)),
                             _b("floordiv", doe, 146096)), 365)
    doy = _b("sub", doe, _b("sub", _b("add", _b("mul", yoe, 365), _b("floordiv", yoe, 4)),
                           _b("floordiv", yoe, 100)))
    mp = _b("floordiv", _b("add", _b("mul", doy, 5), 2), 153)
    day = _b("add", _b("sub", doy, _b("floordiv", _b("add", _b("mul", mp, 153), 2), 5)), 1)
    month = Where(Compare("lt", mp, _const(10)), _b("add", mp, 3), _b("sub", mp, 9), "int64")
    year = _b("add", _b("add", yoe, _b("mul", era, 400)),
              Where(Compare("le", month, _const(2)), _const(1), _const(0), "int64"))
    return year, month, day, doy


def _leap(year: Expr) -> Expr:
    def divisible(k):
        return Compare("eq", _b("mod", year, k), _const(0))
    return Binary("or", Binary("and", divisible(4), Unary("not", divisible(100), "bool"), "bool"),
                  divisible(400), "bool")


def _split(t: Expr, unit: str) -> tuple[tuple[Expr, Expr], Expr]:
    """((era, day of the era), seconds into the day) of ticks in a fixed unit. Weeks divide
    an era exactly (146097 days = 20871 weeks), so 7 * t never needs to be formed."""
    if unit == "W":
        return (_b("floordiv", t, 20871), _b("mul", _b("mod", t, 20871), 7)), _const(0)
    if unit == "D":
        return _eras(t), _const(0)
    if unit in ("h", "m"):
        per_day = 24 if unit == "h" else 1440
        days, sod = _b("floordiv", t, per_day), _b("mul", _b("mod", t, per_day), 3600 if unit == "h" else 60)
        return _eras(days), sod
    secs = t if unit == "s" else _b("floordiv", t, _AS["s"] // _AS[unit])
    return _eras(_b("floordiv", secs, 86400)), _b("mod", secs, 86400)


def field(s: Scalar, attr: str, at: str) -> Scalar:
    """d.<attr> of a date (module docstring): an int64, -1 for NaT."""
    kind, unit = parse(s.time)
    f = FIELDS.get(attr)
    if kind != "M" or f is None:
        if kind == "m":
            raise _fail(at, f".{attr} on a {s.time} duration: durations have no calendar "
                            f"fields; divide by a unit instead, d // np.timedelta64(1, 'h')")
        raise _fail(at, f"a {s.time} date has no field .{attr}; fields: "
                        f"{', '.join(FIELDS)}")
    t = to_unit(s, unit, at)
    if unit in CALENDAR:
        value = _calendar_field(f, t, unit)
    elif f in ("hour", "minute", "second"):
        sod = _split(t, unit)[1]
        value = {"hour": _b("floordiv", sod, 3600), "minute": _b("mod", _b("floordiv", sod, 60), 60),
                 "second": _b("mod", sod, 60)}[f]
    else:
        value = _day_field(f, *_split(t, unit)[0])
    return Scalar(Where(isnat(t), Const(-1, FIELD_DTYPE), _cast(value), FIELD_DTYPE))


def _cast(e: Expr) -> Expr:
    return e if e.dtype == FIELD_DTYPE else Cast(e, FIELD_DTYPE)


def _calendar_field(f: str, t: Expr, unit: str) -> Expr:
    """A field of ticks in years or months (the period's first day and midnight)."""
    if unit == "Y":
        year, month = _b("add", t, 1970), _const(1)
    else:
        year, month = _b("add", _b("floordiv", t, 12), 1970), _b("add", _b("mod", t, 12), 1)
    if f in ("hour", "minute", "second"):
        return _const(0)
    if f == "day":
        return _const(1)
    if f in ("year", "month", "quarter"):
        return {"year": year, "month": month,
                "quarter": _b("add", _b("floordiv", _b("sub", month, 1), 3), 1)}[f]
    # the first of the month: day of the year from the month; weekday from the day of the
    # 400-year era alone (146097 days are 20871 weeks), so no day count is formed
    y = _b("sub", year, Where(Compare("le", month, _const(2)), _const(1), _const(0), "int64"))
    yoe = _b("mod", y, 400)
    mp = Where(Compare("gt", month, _const(2)), _b("sub", month, 3), _b("add", month, 9), "int64")
    doy = _b("floordiv", _b("add", _b("mul", mp, 153), 2), 5)
    doe = _b("add", _b("sub", _b("add", _b("mul", yoe, 365), _b("floordiv", yoe, 4)),
                           _b("floordiv", yoe, 100)), doy)
    if f == "day_of_week":
        return _b("mod", _b("add", _b("mod", _b("sub", doe, 719468), 7), 3), 7)
    leap = Where(_leap(year), _const(1), _const(0), "int64")
    return Where(Compare("gt", month, _const(2)), _b("add", _b("add", doy, 60), leap),
                 _b("add", _b("mul", _b("sub", month, 1), 31), 1), "int64")


def _day_field(f: str, era: Expr, doe: Expr) -> Expr:
    if f == "day_of_week":            # 1970-01-01 was a Thursday (3, Monday = 0); an era
        return _b("mod", _b("add", _b("mod", doe, 7), 3), 7)   # is a whole number of weeks
    year, month, day, doy = _civil(era, doe)
    if f == "year":
        return year
    if f == "month":
        return month
    if f == "day":
        return day
    if f == "quarter":
        return _b("add", _b("floordiv", _b("sub", month, 1), 3), 1)
    # day of the year: March-based doy 306.. are January / February of `year`
    jan_feb = Compare("ge", doy, _const(306))
    leap = Where(_leap(year), _const(1), _const(0), "int64")
    return Where(jan_feb, _b("sub", doy, 305), _b("add", _b("add", doy, 60), leap), "int64")


def weaken(s: Scalar) -> Scalar:
    """s without its capture (the IR of a captured value used in its own type)."""
    return replace(s, exact=None)


# --- results on the host -------------------------------------------------------------------
def times_of(items) -> tuple:
    """Per scalar leaf: its time type or None; () when none is a date (the common case)."""
    times = tuple(s.time for s in items)
    return times if any(times) else ()


def viewed(values, times: tuple):
    """Raw results (int64 tick arrays or scalars, one per leaf) as their time types."""
    if not times:
        return values
    return type(values)(as_time(v, t) for v, t in zip(values, times))


def as_time(v, t):
    """One raw result (an int64 array or scalar) as time type t (None: as it is)."""
    if t is None:
        return v
    if hasattr(v, "view") and getattr(v, "ndim", 0) > 0:
        return v.view(t)
    return np.int64(v).view(t)


def ticks_view(a):
    """A host column as the kernels read it: a datetime64 / timedelta64 array as its int64
    ticks (a view), any other as it is."""
    return a.view(np.int64) if a.dtype.kind in "mM" else a


def refuse_times(backend: str, caps, source) -> None:
    """A backend without 64-bit columns (BackendCaps.wide_columns False: webgpu, whose WGSL
    has no 64-bit integers) can't read dates: refused naming the column and its dtype."""
    times = getattr(source, "times", None)
    if caps.wide_columns or not times:
        return
    names = source.fields or tuple(f"input {i}" for i in range(len(times)))
    col, t = next((n, t) for n, t in zip(names, times) if t)
    what = f"column {col!r}" if source.fields else ("the input" if len(times) == 1 else col)
    raise QueryError(f"{what} has dtype {t}, read as int64 ticks; the {backend} backend has no "
                     f"64-bit integers: run this query on cpu, opencl or cuda (auto picks one)")
