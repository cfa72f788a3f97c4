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
when they are the same column (one dictionary).

What is no code range is a *string function*: a Python expression of one string column and
constants / captured values, bool or int valued (s.endswith("x"), "special" in s, len(s),
s.lower() == "x", s[:2] == "13", int(s[:2]), re.search(p, s), s.count("a") > 1). The host
evaluates it with Python itself, once per distinct string of this call's dictionary, into a
*table* parameter (("str", "table", column, (text, dtype, captures, where)): one value per
code, a bool or int64 array; cached while the dictionary lives), and the kernel reads the
row's entry, table[code] (expr.Lookup). So its semantics are Python's str methods exactly, its
cost is one evaluation per distinct value plus a gather per row, and only the host backends
(numpy, cpu: BackendCaps.lookup_tables) run it; `auto` runs such a plan on cpu. A left join's
unmatched (None) string gets False / 0.

Everything else that would read the codes as numbers (arithmetic, numeric functions,
aggregates, truthiness) is refused, and so are strings built inside a lambda as values
(concatenation, f-strings, str methods that make strings) outside such a function.
"""
from __future__ import annotations

import ast
import builtins
import copy
import re
from bisect import bisect_left, bisect_right

import numpy as np

from querycompute._codegen.ir import expr as E

from ..artifacts import ArtifactCache
from ..errors import QueryError
from .members import Members
from .translate_ops import FLIP, binary, const, fail, logical, logical_not, select
from .values import Scalar, StrCodes

CODE = "int32"
SUPPORTED = ("on a string column: == and != against a string constant or a captured str, "
             "< <= > >=, `in` a tuple of strings (or a captured tuple/list/set of str), "
             ".startswith(prefix); string functions with a bool or int value (s.endswith(x), "
             "\"x\" in s, len(s), s.lower() == x, s[:2] == x, re.search(p, s), ...: evaluated "
             "once per distinct string); passing the column on (a field, a key of group_by / "
             "order_by / distinct)")
BUILT = ("strings built inside a lambda (concatenation, formatting, str methods that make a "
         "string) are not supported: kernels see a string column as integer codes; build the "
         "strings before querying (a new column in the DataFrame) and compare the column")
_CMP = {ast.Eq: "eq", ast.NotEq: "ne", ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge"}


def codes(s: StrCodes) -> Scalar:
    """The code as a plain int32 value (for the comparisons this module builds)."""
    return Scalar(s.expr)


def is_string_param(name) -> bool:
    return type(name) is tuple and len(name) == 4 and name[0] == "str"


def is_table_param(name) -> bool:
    """A string function's table parameter (ParamSpec.table)."""
    return is_string_param(name) and name[1] == "table"


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
    if kind == "table":
        return _table(d, column, arg, env)
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
    if kind == "table":
        return f"`{arg[0].replace(HOST_VAR, column)}` per distinct string of {column} ({arg[1]} table)"
    return _ORIGIN[kind].format(t=repr(arg[1]) if arg[0] == "const" else arg[1], c=column)


# --- string functions: per distinct value, on the host -------------------------------------
HOST_VAR = "_qc_s"              # the string's name in a string function's text
BOOL_METHODS = ("startswith", "endswith", "isalnum", "isalpha", "isascii", "isdecimal",
                "isdigit", "isidentifier", "islower", "isnumeric", "isprintable", "isspace",
                "istitle", "isupper")
INT_METHODS = ("count", "find", "rfind", "index", "rindex")
STR_METHODS = ("lower", "upper", "casefold", "strip", "lstrip", "rstrip", "title",
               "capitalize", "swapcase", "replace", "removeprefix", "removesuffix", "zfill",
               "center", "ljust", "rjust", "split", "rsplit", "partition", "rpartition")
_RE_BOOL = ("search", "match", "fullmatch")
_BUILTINS = {"len": "int64", "int": "int64", "ord": "int64", "bool": "bool"}
_ALLOWED_BUILTINS = frozenset(_BUILTINS) | {"str", "min", "max", "abs"}
_TABLES = ArtifactCache("string function tables", 64)


def _scan(tr, node: ast.AST):
    """(string column references: [(ast node, StrCodes)], other per-row values: [ast node],
    free names, constructs no string function holds: [ast node]) of an expression: what a
    string function reads."""
    refs, others, names, bad = [], [], set(), []

    def rooted(n) -> bool:
        while isinstance(n, (ast.Attribute, ast.Subscript)):
            n = n.value
        return isinstance(n, ast.Name) and n.id in tr.locals

    def visit(n):
        if isinstance(n, (ast.Name, ast.Attribute, ast.Subscript)) and rooted(n):
            try:
                v = tr.value(n)
            except QueryError:          # s[:2], s.lower: an operation on the string
                v = None
            if type(v) is StrCodes:
                refs.append((n, v))
                return
            if v is not None:
                others.append(n)
                return
        elif isinstance(n, ast.Name):
            names.add(n.id)
            return
        elif isinstance(n, (ast.Lambda, ast.GeneratorExp, ast.ListComp, ast.SetComp,
                            ast.DictComp, ast.NamedExpr, ast.Await, ast.Yield)):
            bad.append(n)
        for c in ast.iter_child_nodes(n):
            visit(c)
    visit(node)
    return refs, others, names, bad


def _free_value(tr, name: str, at: str):
    """What a free name of a string function stands for, checked: a captured constant, the
    re module, an allowed builtin."""
    if name in _ALLOWED_BUILTINS and tr._lookup_quiet(name) in (None, getattr(builtins, name)):
        return None                     # the builtin itself (no capture)
    v = tr._lookup_quiet(name)
    if v is re:
        return v
    if isinstance(v, Members):
        fail(at, f"captured {name!r} is tested for membership elsewhere in this lambda; "
                 f"a string function reads a captured set that is used only inside it", "string")
    ok = (str, int, float, bool, type(None))
    if isinstance(v, ok) or (isinstance(v, (tuple, frozenset)) and all(isinstance(x, ok) for x in v)):
        return v
    fail(at, f"{name!r} ({type(v).__name__}) in a string function: it may read the string, "
             f"constants, captured str / int / float / bool values or tuples of them, the re "
             f"module and {', '.join(sorted(_ALLOWED_BUILTINS))}", "string")


def host(tr, node: ast.AST, dtype: str, at: str):
    """`node` as a string function of one string column (module docstring): the kernel reads
    table[code]. None when the node reads no string column; a located error when it reads two
    columns or a per-row value besides the string (those are split: compute the string
    function alone, e.g. `len(s) > r.n` reads len(s) as one)."""
    refs, others, names, bad = _scan(tr, node)
    if not refs:
        return None
    columns = sorted({v.column for _, v in refs})
    if len(columns) > 1:
        fail(at, f"`{ast.unparse(node)}` reads string columns {columns[0]!r} and {columns[1]!r}: "
                 f"a string function reads one column (it is evaluated per distinct string of "
                 f"that column's dictionary)", "string")
    if bad:
        fail(at, f"`{ast.unparse(bad[0])}` in a string function: only expressions (calls, "
                 f"comparisons, slices, operators) are evaluated per string", "string")
    if others:
        fail(at, f"`{ast.unparse(node)}` mixes string column {columns[0]!r} with "
                 f"`{ast.unparse(others[0])}`, a value per row: a string function reads one "
                 f"string column and constants only; compute it alone and combine the results "
                 f"(e.g. `len(r.name) > r.n`)", "string")
    captured = []
    for name in sorted(names):
        if name == HOST_VAR:
            fail(at, f"the name {HOST_VAR!r} is reserved in string functions", "string")
        if _free_value(tr, name, at) is not None:
            captured.append((name, tr.prefix + name))
    memo: dict = {}
    body = copy.deepcopy(node, memo)     # memo: id(original node) -> its copy
    ids = {id(memo[id(n)]) for n, _ in refs}

    class Put(ast.NodeTransformer):
        def visit(self, n):
            if id(n) in ids:
                return ast.copy_location(ast.Name(HOST_VAR, ast.Load()), n)
            return self.generic_visit(n)
    text = ast.unparse(Put().visit(body))
    table = tr.new_param(("str", "table", columns[0], (text, dtype, tuple(captured), at)), dtype)
    return Scalar(E.Lookup(table.name, codes(refs[0][1]).expr, dtype))


def _table(d: np.ndarray, column: str, arg: tuple, env) -> np.ndarray:
    """The table of a string function (module docstring) for this call's dictionary `d` of
    `column`: its value per distinct string, by Python. Kept while `d` lives (a table's
    dictionary, an Arrow column's cached encoding), for the same captured values."""
    text, dtype, captured, at = arg
    values = {name: env[key] for name, key in captured}
    key = (id(d), len(d), text, dtype, tuple((k, type(v), v) for k, v in values.items()))
    hit = _TABLES.get(key)
    if hit is not None and hit[0] is d:
        return hit[1]
    fn = eval(compile(f"lambda {HOST_VAR}: {text}", at, "eval"), {"__builtins__": builtins, **values})
    none_first = len(d) > 0 and d[0] is None          # a left join's unmatched: False / 0
    out = np.zeros(len(d), dtype)
    s = None
    try:
        if dtype == "bool":
            for k in range(int(none_first), len(d)):
                s = d[k]
                out[k] = bool(fn(s))
        else:
            for k in range(int(none_first), len(d)):
                s = d[k]
                v = fn(s)
                if type(v) is not int:
                    raise TypeError(f"its value is {type(v).__name__} {v!r}, not an int")
                out[k] = v
    except Exception as exc:
        shown = text.replace(HOST_VAR, column)
        raise QueryError(f"{at}: the string function `{shown}` raised {type(exc).__name__}: {exc} "
                         f"for the string {s!r} of column {column!r} (string functions run in "
                         f"Python, once per distinct string)") from None
    _TABLES.put(key, (d, out))
    return out


def host_compare(tr, node: ast.Compare):
    """A comparison that needs the host as a whole (a substring `in`, `is` / `is not`, an
    operand that computes on the string: s.lower() == x, s[:2] == x, len(s) == 3): its
    string function, bool; None when the code ranges answer it or it reads per-row values
    besides one string column (then its operands are string functions on their own)."""
    refs, others, _, bad = _scan(tr, node)
    if not refs or others or bad:
        return None
    direct = {id(n) for n, _ in refs}
    nodes = [node.left] + node.comparators
    computed = any(id(n) not in direct and not _plain_set(tr, n) and _reads_string(tr, n) for n in nodes)
    substring = any(isinstance(op, (ast.In, ast.NotIn)) and id(right) in direct
                    for op, right in zip(node.ops, node.comparators))
    identity = any(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops)
    if not (computed or substring or identity):
        return None
    return host(tr, node, "bool", tr.at(node))


def _plain_set(tr, node: ast.AST) -> bool:
    """A tuple / list / set of string literals or a captured set: what `s in ...` tests by codes."""
    if isinstance(node, ast.Name) and node.id not in tr.locals:
        return type(tr._lookup_quiet(node.id)) is Members
    return isinstance(node, (ast.Tuple, ast.List, ast.Set)) and all(isinstance(e, ast.Constant) for e in node.elts)


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


def call(tr, node: ast.Call):
    """A call on a string column: s.startswith(literal prefixes) as code ranges; a method,
    len() / int() / ord() / bool() or re.search / match / fullmatch of it as a string function
    (host); None when the call reads no string column."""
    f = node.func
    at = tr.at(node)
    if isinstance(f, ast.Name) and f.id in _BUILTINS and f.id not in tr.locals \
            and tr._lookup_quiet(f.id) in (None, getattr(builtins, f.id)):
        if len(node.args) != 1 or not _reads_string(tr, node):
            return None
        if f.id in ("int", "bool") and isinstance(node.args[0], (ast.Compare, ast.BoolOp, ast.UnaryOp)):
            return None                 # int(s == "x" or ...): code compares, a number after
        return host(tr, node, _BUILTINS[f.id], at)
    if not isinstance(f, ast.Attribute):
        return None
    if _text(tr, f.value) is not None:
        fail(at, f"a method of a string value (.{f.attr}): {BUILT}", "string")
    root = f.value
    while isinstance(root, (ast.Attribute, ast.Subscript, ast.Call)):
        root = root.func if isinstance(root, ast.Call) else root.value
    if not isinstance(root, ast.Name):
        return None
    if root.id not in tr.locals:        # a module's function: np.sqrt, or re.search(p, s)
        if tr._lookup_quiet(root.id) is re and f.attr in _RE_BOOL and _reads_string(tr, node):
            return host(tr, node, "bool", at)
        return None
    if not _reads_string(tr, f.value):
        return None
    base = _direct(tr, f.value)
    if f.attr == "startswith" and base is not None and not node.keywords and len(node.args) == 1:
        prefixes = node.args[0].elts if isinstance(node.args[0], ast.Tuple) else [node.args[0]]
        texts = [_text(tr, p) for p in prefixes]
        if all(t is not None for t in texts):      # code ranges of the sorted dictionary
            x = codes(base)
            parts = [logical("and", [binary("ge", x, _param(tr, "plo", base.column, t), at),
                                     binary("lt", x, _param(tr, "phi", base.column, t), at)], at)
                     for t in texts]
            return parts[0] if len(parts) == 1 else logical("or", parts, at)
    if f.attr in BOOL_METHODS:
        return host(tr, node, "bool", at)
    if f.attr in INT_METHODS:
        return host(tr, node, "int64", at)
    if f.attr in STR_METHODS:
        fail(at, f".{f.attr}() makes a string, which a kernel can't hold: compare it "
                 f"(`{ast.unparse(node)} == \"x\"`) or test it (.endswith(...), len(...)), which "
                 f"is evaluated once per distinct string", "string")
    fail(at, f".{f.attr}() on a string column is not supported; supported {SUPPORTED}", "string")


def _reads_string(tr, node: ast.AST) -> bool:
    return bool(_scan(tr, node)[0])


def _direct(tr, node: ast.AST):
    """The StrCodes `node` is when it is a string column itself (not an operation on one)."""
    try:
        v = tr.value(node)
    except QueryError:
        return None
    return v if type(v) is StrCodes else None


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
