"""String operations in lambdas, over a string column's codes (DESIGN.md section 3, Strings).

A string column reaches a lambda as a `StrCodes` (values.py): the int32 code of the row's
string in the column's sorted dictionary of this call (sources/string_columns.py). Because the
dictionary is sorted, every supported operation is a comparison of the code with a kernel
*parameter* that the host computes from the dictionary once per call (a binary search: once
per distinct value, never per row). The parameters are named ("str", kind, column, arg), arg
being ("const", text) or ("cap", captured name); `param_value` computes them at launch
(plan.param_values), so new data or a new captured string never recompiles:

    s == t / s != t      code == P, P = t's code or -1 when t is not in the dictionary
    s < t, s >= t        code < lo / code >= lo,  lo = bisect_left(dictionary, t)
    s <= t, s > t        code < hi / code >= hi,  hi = bisect_right(dictionary, t)
    s.startswith(p)      plo <= code < phi: the range of the strings whose first len(p)
                         characters are p (the same bisects on the truncated strings)
    s in ("a", "b"), s in names    code == P0 or code == P1 ... (a captured set of up to
                         members.MAX_MEMBERS strings: one parameter per member, bucketed)

A string constant or captured str may stand on either side. Two string columns compare only
when they are the same column (one dictionary). Everything else that would read the codes as
numbers (arithmetic, numeric functions, aggregates, truthiness) is refused, and so are strings
built inside a lambda (concatenation, f-strings, str methods that make strings).
"""
from __future__ import annotations

import ast
from bisect import bisect_left, bisect_right

import numpy as np

from ..errors import QueryError
from .members import Members
from .translate_ops import FLIP, binary, const, fail, logical, logical_not, select
from .values import Scalar, StrCodes

CODE = "int32"
SUPPORTED = ("on a string column: == and != against a string constant or a captured str, "
             "< <= > >=, `in` a tuple of strings (or a captured tuple/list/set of str), "
             ".startswith(prefix); passing the column on (a field, a key of group_by / "
             "order_by / distinct)")
BUILT = ("strings built inside a lambda (concatenation, formatting, str methods that make a "
         "string) are not supported: kernels see a string column as integer codes; build the "
         "strings before querying (a new column in the DataFrame) and compare the column")
NOT_YET = ("is not supported yet on string columns (only operations that are code ranges of "
           "the sorted dictionary are); compute it before querying, e.g. "
           "df['ends'] = df.name.str.endswith('x'), and read that column")
_CMP = {ast.Eq: "eq", ast.NotEq: "ne", ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge"}


def codes(s: StrCodes) -> Scalar:
    """The code as a plain int32 value (for the comparisons this module builds)."""
    return Scalar(s.expr)


def is_string_param(name) -> bool:
    return type(name) is tuple and len(name) == 4 and name[0] == "str"


def refuse_numeric(v, at: str, what: str) -> None:
    """A string column used where a number is read (translate's check_scalar)."""
    if type(v) is StrCodes:
        fail(at, f"{what} reads string column {v.column!r} as a number; supported "
                 f"{SUPPORTED}", "string")


# --- the values of the parameters, per call -----------------------------------------------
def param_value(name: tuple, dictionaries: dict, env: dict) -> np.int32:
    """The code parameter ("str", kind, column, arg) for this call's dictionary of column."""
    _, kind, column, arg = name
    d = dictionaries[column]
    s = env[arg[1]] if arg[0] == "cap" else arg[1]
    if type(s) is not str:
        raise QueryError(f"captured {arg[1]!r} was a str when the query was compiled and is now "
                         f"{type(s).__name__} {s!r}; compare a string column with a str")
    off = 0
    if len(d) and d[0] is None:         # a left join's joined strings: None (unmatched) first,
        d, off = d[1:], 1               # below every string
    if kind == "code":
        i = bisect_left(d, s)
        return np.int32(i + off if i < len(d) and d[i] == s else -1)
    if kind == "lo":
        return np.int32(bisect_left(d, s) + off)
    if kind == "hi":
        return np.int32(bisect_right(d, s) + off)
    k = len(s)                          # startswith: truncated strings are sorted too
    cut = bisect_left if kind == "plo" else bisect_right
    return np.int32(cut(d, s, key=lambda t: t[:k]) + off)


JOINED = "@join"       # in a dictionary's name: a joined string column's (join_plan.py)


class Deferred:
    """A string parameter over a joined string column: that column's dictionary is made when
    its join runs, after the call's parameters are computed, so the value is computed then
    (`resolve_joined`, called by the join right after it encodes the column)."""
    __slots__ = ("name", "dictionaries", "env")

    def __init__(self, name: tuple, dictionaries: dict, env):
        self.name, self.dictionaries, self.env = name, dictionaries, env


def resolve_joined(params: list) -> None:
    """Replace, in place, the Deferred parameters whose dictionary exists now."""
    for k, v in enumerate(params):
        if type(v) is Deferred and v.name[2] in v.dictionaries:
            params[k] = param_value(v.name, v.dictionaries, v.env)


_ORIGIN = {"code": "the code of {t} in {c}'s dictionary (-1: absent)",
           "lo": "the first code of {c} >= {t}", "hi": "the first code of {c} > {t}",
           "plo": "the first code of {c} starting with {t}",
           "phi": "the code after the last of {c} starting with {t}"}


def origin(name: tuple) -> str:
    """What a string parameter carries, for explain()."""
    _, kind, column, arg = name
    return _ORIGIN[kind].format(t=repr(arg[1]) if arg[0] == "const" else arg[1], c=column)


# --- translation ----------------------------------------------------------------------------
def _text(tr, node: ast.AST):
    """("const", text) / ("cap", key) for a string literal or a captured str; None else.
    A string built in the lambda is refused here."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
        if isinstance(node.value, bytes):
            fail(tr.at(node), f"{node.value!r} is bytes; string columns compare with str", "string")
        return ("const", node.value)
    if isinstance(node, ast.JoinedStr):
        fail(tr.at(node), f"an f-string: {BUILT}", "JoinedStr")
    if isinstance(node, ast.Name) and node.id not in tr.locals and \
            type(tr._lookup_quiet(node.id)) is str:
        return ("cap", tr.prefix + node.id)
    return None


def _param(tr, kind: str, column: str, arg: tuple) -> Scalar:
    return Scalar(tr.new_param(("str", kind, column, arg), CODE))


def _is_string_set(tr, node: ast.AST) -> bool:
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts)
    if isinstance(node, ast.Name) and node.id not in tr.locals:
        obj = tr._lookup_quiet(node.id)
        return type(obj) is Members and obj.dtype == "str"
    return False


def compare(tr, node: ast.Compare):
    """A comparison chain that involves strings, as code comparisons; None when none does
    (translate goes on with numbers)."""
    nodes = [node.left] + node.comparators
    texts = [_text(tr, n) for n in nodes]
    string_set = any(isinstance(op, (ast.In, ast.NotIn)) and _is_string_set(tr, n)
                     for op, n in zip(node.ops, node.comparators))
    if all(t is None for t in texts) and not string_set:
        sets = {i + 1 for i, op in enumerate(node.ops) if isinstance(op, (ast.In, ast.NotIn))}
        if not any(type(tr.value(n)) is StrCodes for i, n in enumerate(nodes) if i not in sets):
            return None
    at = tr.at(node)
    values = texts
    parts = []
    for i, op in enumerate(node.ops):
        a = values[i] if values[i] is not None else tr.value(nodes[i])
        right = nodes[i + 1]
        if isinstance(op, (ast.In, ast.NotIn)):
            part = _member(tr, a, nodes[i], right, at)
            parts.append(logical_not(part) if isinstance(op, ast.NotIn) else part)
            continue
        b = values[i + 1] if values[i + 1] is not None else tr.value(right)
        parts.append(_compare(tr, _CMP[type(op)], a, b, nodes[i], right, at))
    return parts[0] if len(parts) == 1 else logical("and", parts, at)


def _compare(tr, op: str, a, b, na: ast.AST, nb: ast.AST, at: str) -> Scalar:
    if type(a) is not StrCodes and type(b) is StrCodes:
        a, b, na, nb, op = b, a, nb, na, FLIP[op]
    if type(a) is not StrCodes:
        fail(at, "this compares two strings of no column (literals or captured str); compare a "
                 "string column with a string", "string")
    if type(b) is StrCodes:
        if b.column != a.column:
            fail(at, f"string columns {a.column!r} and {b.column!r} have dictionaries of their "
                     f"own, so their codes do not compare; compare each with a string", "string")
        return binary(op, codes(a), codes(b), at)
    if type(b) is not tuple:
        fail(tr.at(nb), f"string column {a.column!r} compared with {ast.unparse(nb)}, which is "
                        f"not a string; supported {SUPPORTED}", "string")
    x = codes(a)
    if op in ("eq", "ne"):
        return binary(op, x, _param(tr, "code", a.column, b), at)
    if op in ("lt", "ge"):
        return binary(op, x, _param(tr, "lo", a.column, b), at)
    return binary("lt" if op == "le" else "ge", x, _param(tr, "hi", a.column, b), at)


def _member(tr, a, na: ast.AST, right: ast.AST, at: str) -> Scalar:
    if type(a) is tuple:                              # "special" in r.comment
        b = tr.value(right)
        if type(b) is StrCodes:
            fail(at, f"a substring test `in` {NOT_YET}", "In")
        fail(at, f"a string in {ast.unparse(right)}: the right of `in` must be a string column "
                 f"or, for a string column on the left, a set of strings", "In")
    if type(a) is not StrCodes:                       # a number in a set of strings
        if isinstance(right, ast.Name):
            members = tr._lookup_quiet(right.id)
            fail(tr.at(right), f"captured {right.id!r} ({members.kind}) holds "
                               f"{tr._lookup_quiet(right.id + '[0]')!r}: membership of "
                               f"{ast.unparse(na)} is tested on numbers; strings are tested "
                               f"against a string column only", "In")
        e = next(e for e in right.elts if isinstance(e, ast.Constant) and isinstance(e.value, str))
        fail(tr.at(e), f"{e.value!r} is a string: membership of {ast.unparse(na)} is tested on "
                       f"numbers (bool, int, float); strings are not supported in a value set "
                       f"of numbers (only against a string column)", "In")
    if isinstance(right, (ast.Tuple, ast.List, ast.Set)):
        args = []
        for e in right.elts:
            t = _text(tr, e)
            if t is None:
                fail(tr.at(e), f"{ast.unparse(e)} is not a string; a set tested against string "
                               f"column {a.column!r} holds strings", "In")
            args.append(t)
    elif isinstance(right, ast.Name) and right.id not in tr.locals and \
            type(tr._lookup_quiet(right.id)) is Members:
        members = tr._lookup_quiet(right.id)
        if members.size == 0 and not members.refused:
            return const(False, at)                   # `in ()`: False, as in Python
        if members.refused or members.dtype != "str":
            why = members.refused or "holds numbers"
            fail(tr.at(right), f"captured {right.id!r} ({members.kind}) {why}; a set tested "
                               f"against string column {a.column!r} holds strings", "In")
        args = [("cap", tr.prefix + f"{right.id}[{i}]") for i in range(members.bucket)]
    else:
        fail(tr.at(right), f"the right of `in` is `{ast.unparse(right)}`; for string column "
                           f"{a.column!r} it must be a tuple, list or set of strings (literal "
                           f"or captured)", "In")
    if not args:
        return const(False, at)
    x = codes(a)
    return logical("or", [binary("eq", x, _param(tr, "code", a.column, t), at) for t in args], at)


_METHODS_NOT_YET = ("endswith", "find", "count", "index", "rfind", "isdigit", "isalpha",
                    "isspace", "islower", "isupper")


def call(tr, node: ast.Call):
    """s.startswith(...) and len(s) / a str method on a string column; None when the call
    is not on a string column."""
    f = node.func
    if isinstance(f, ast.Name) and f.id == "len" and f.id not in tr.locals and len(node.args) == 1 \
            and tr._lookup_quiet("len") is len:
        v = tr.value(node.args[0])
        if type(v) is StrCodes:
            fail(tr.at(node), f"len() {NOT_YET}", "string")
        return None
    if not isinstance(f, ast.Attribute):
        return None
    if _text(tr, f.value) is not None:
        fail(tr.at(node), f"a method of a string value (.{f.attr}): {BUILT}", "string")
    root = f.value
    while isinstance(root, (ast.Attribute, ast.Subscript)):
        root = root.value
    if not (isinstance(root, ast.Name) and root.id in tr.locals):
        return None                     # a module's function (np.sqrt), not a column's method
    base = tr.value(f.value)
    if type(base) is not StrCodes:
        return None
    at = tr.at(node)
    if f.attr in _METHODS_NOT_YET:
        fail(at, f".{f.attr}() {NOT_YET}", "string")
    if f.attr != "startswith":
        fail(at, f".{f.attr}() on string column {base.column!r}: {BUILT}", "string")
    if node.keywords or len(node.args) != 1:
        fail(at, "startswith takes one prefix here (no start / end positions)", "string")
    arg = node.args[0]
    prefixes = arg.elts if isinstance(arg, ast.Tuple) else [arg]
    x = codes(base)
    parts = []
    for p in prefixes:
        t = _text(tr, p)
        if t is None:
            fail(tr.at(p), f"startswith's prefix {ast.unparse(p)} is not a string (a literal "
                           f"or a captured str)", "string")
        parts.append(logical("and", [binary("ge", x, _param(tr, "plo", base.column, t), at),
                                     binary("lt", x, _param(tr, "phi", base.column, t), at)], at))
    return parts[0] if len(parts) == 1 else logical("or", parts, at)


def binop(tr, node: ast.BinOp) -> None:
    """Refuse `+` / `%` / `*` building a string from a string literal, a captured str or a
    string column."""
    for side in (node.left, node.right):
        if _text(tr, side) is not None:
            fail(tr.at(node), f"`{ast.unparse(node)}` builds a string: {BUILT}", "string")


def pick(cond: Scalar, a, b, at: str) -> Scalar:
    """`a if cond else b` with a string column in a branch: both the same column."""
    if type(a) is not StrCodes or type(b) is not StrCodes or a.column != b.column:
        fail(at, "a conditional expression picks between a string column and something else "
                 "(another column, a literal); both branches must be the same string column",
             "string")
    out = select(cond, codes(a), codes(b), at)
    return StrCodes(out.expr, column=a.column)
