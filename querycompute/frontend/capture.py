"""Find the source AST of a lambda (or single-`return` def) from its function object.

Python keeps no AST at run time, so we re-parse the defining file (through `linecache`, which
also knows IPython cells) and pin the exact node with the code object's `co_positions()`:
every instruction carries the (line, column) span of the source it came from, so the
innermost lambda whose *body* contains all those spans is the one that was compiled into this
code object. That works for several lambdas on one line, nested lambdas, multi-line chains and
backslash continuations; columns are UTF-8 byte offsets both in `ast` and in `co_positions`.

The pinned node is then compiled again and compared with the code object (source_check):
if the file was edited after import, Python runs the old code while the text says something
else, and the query is refused rather than computing the new text.

Results are cached per code object (every call of `lambda v: ...` inside a loop shares one
code object), so a warm query never re-parses or re-checks.

Helper functions (plain functions a lambda calls, found the same way by `helper_source`; their
bodies may hold straight-line assignments) are inlined by the translator. Their captured
values join the lambda's env under "<callee>.<name>" (capture_values), so they are kernel
parameters read on every call, and capture_key holds each helper's code object: an edited and
re-imported helper is a new signature.
"""
from __future__ import annotations

import ast
import builtins
import datetime as _dt
import linecache
import math
import re
import types
from dataclasses import dataclass
from functools import lru_cache
from typing import Optional

import numpy as np

from ..errors import QueryError, UnsupportedLambdaError
from .datetimes import time_of_value
from .members import Members, expand, member_names
from .source_check import mismatch, module_imports

ACCEPTED = ("a lambda (lambda v: v * 2) or a def function whose body is a single "
            "`return expr`")
CHANGED = ("the source file changed since the function was defined; re-import the module "
           "or restart")
NO_SOURCE_HINT = ("pass the lambda as text instead, e.g. select(\"lambda v: v * 2\") (parsed, "
                  "never executed), or define the function in a .py file or in IPython/Jupyter "
                  "(whose cells linecache can read)")
# Names a text chain (CLI query) may use without a value: the modules a lambda calls into.
TEXT_MODULES = {"np": np, "numpy": np, "math": math}
# Nested scopes have their own parameters: their free names are not the lambda's captures
# (translate rejects these constructs with a precise message anyway).
_SCOPES = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


@dataclass(frozen=True)
class LambdaSource:
    """A lambda's parsed form: parameter names, body expression and the free names it reads."""
    params: tuple[str, ...]
    body: ast.expr
    filename: str
    captures: tuple[str, ...]
    code: Optional[types.CodeType]
    text: str
    # A helper function's straight-line assignments before its `return` (helper_source):
    # ast.Assign / AnnAssign / AugAssign, run in order by the translator.
    stmts: tuple = ()

    def where(self, node: ast.AST) -> str:
        """'file:line:col' of a node of this lambda (col 1-based, UTF-8 bytes as in ast)."""
        return f"{self.filename}:{node.lineno}:{node.col_offset + 1}"


# id(code) -> (code, LambdaSource, capture plan, module calls). The code object is kept so its id stays
# unique; code objects are compared by identity because equal-looking lambdas at the same
# line/column of two different files compare equal as code objects.
_by_code: dict[int, tuple[types.CodeType, LambdaSource, tuple, tuple]] = {}
# filename -> (source text, [(kind, name, body_start, body_end, node, enclosing class)],
#              names the module scope imports)
_by_file: dict[str, tuple[str, list]] = {}
# The same for helper functions (helper_source), whose bodies may hold assignments.
_helpers: dict[int, tuple[types.CodeType, LambdaSource, tuple, tuple]] = {}
# A helper's captures enter its caller's env as "<callee>.<name>" (_add_helper): never a
# Python identifier, so never one of the caller's own names.
HELPER_SEP = "."


def lambda_source(fn) -> LambdaSource:
    """The LambdaSource of a Python function; raises UnsupportedLambdaError if it has none."""
    # Checked before the cache: a bound method forwards __code__ to its function.
    if not isinstance(fn, types.FunctionType):
        raise UnsupportedLambdaError(
            f"expected {ACCEPTED}; got {_describe_callable(fn)}. Wrap it in a lambda, "
            f"e.g. lambda v: f(v) with f one of the supported math/numpy functions",
            construct=type(fn).__name__)
    code = fn.__code__
    hit = _by_code.get(id(code))
    if hit is not None and hit[0] is code:
        return hit[1]
    src, cls = _find(fn, code)
    _by_code[id(code)] = (code, src, _plan(src, code, cls), _module_calls(src))
    return src


def helper_source(fn) -> LambdaSource:
    """The LambdaSource of a helper function a lambda calls: a lambda, or a def of straight-line
    assignments then one `return expr` (src.stmts holds the assignments). Cached per code
    object like lambda_source; raises UnsupportedLambdaError at the helper's own file:line:col."""
    code = fn.__code__
    hit = _helpers.get(id(code))
    if hit is not None and hit[0] is code:
        return hit[1]
    src, cls = _find(fn, code, helper=True)
    _helpers[id(code)] = (code, src, _plan(src, code, cls), _module_calls(src))
    return src


def helper_function(obj) -> Optional[types.FunctionType]:
    """The Python function a captured object stands for when a lambda may call it as a
    helper: a plain function (not one of NumPy's own: the callables the translator knows are
    never plain functions), or the `py_func` of a numba @njit dispatcher; else None."""
    if type(obj) is not types.FunctionType:
        py_func = getattr(obj, "py_func", None)
        if type(py_func) is not types.FunctionType or \
                not type(obj).__module__.startswith("numba"):
            return None
        obj = py_func
    return None if (obj.__module__ or "").startswith("numpy") else obj


def _module_calls(src: LambdaSource) -> tuple[tuple[str, str], ...]:
    """(name, attr) of the calls `name.attr(...)` on captured names: a helper may be called
    through its module (pricing.tax(v))."""
    seen: dict[tuple[str, str], None] = {}
    for part in (*src.stmts, src.body):
        for n in ast.walk(part):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                    isinstance(n.func.value, ast.Name) and n.func.value.id in src.captures:
                seen.setdefault((n.func.value.id, n.func.attr), None)
    return tuple(seen)


def _add_helpers(out: dict, prefix: str, env: dict, calls: tuple, outer: tuple) -> None:
    """The captures of the helpers that `env`'s function (whose code objects are `outer`)
    may call: those in env itself, and those called through a module (calls)."""
    for name, obj in env.items():
        fn = helper_function(obj) if type(obj) is not types.ModuleType else None
        if fn is not None:
            _add_helper(out, prefix + name + HELPER_SEP, fn, outer)
    for name, attr in calls:
        obj = env.get(name)
        if type(obj) is types.ModuleType:
            fn = helper_function(getattr(obj, attr, None))
            if fn is not None:
                key = prefix + name + HELPER_SEP + attr
                out[key] = fn        # its identity and code enter the signature (capture_key)
                _add_helper(out, key + HELPER_SEP, fn, outer)


def _plan(src: LambdaSource, code, cls) -> tuple:
    plan = []
    members = member_names(src.body, src.stmts)
    for name in src.captures:       # private names in a class body are stored mangled
        stored = _mangle(name, cls)
        cell = code.co_freevars.index(stored) if stored in code.co_freevars else None
        plan.append((name, cell, stored, name in members))
    return tuple(plan)


def capture_values(fn, src: LambdaSource) -> dict[str, object]:
    """Current values of src.captures: closure cells first, then globals, then builtins.

    For a text chain (src.code is None, pass fn=None) the only names are numpy/math/builtins.
    """
    if src.code is None:
        return {name: _text_value(name, src) for name in src.captures}
    hit = _by_code.get(id(fn.__code__))
    if hit is None or hit[0] is not fn.__code__:
        lambda_source(fn)
        hit = _by_code[id(fn.__code__)]
    out = _values(fn, src, hit[2])
    if hit[3] or _has_function(out):
        _add_helpers(out, "", dict(out), hit[3], (fn.__code__,))
    return out


def _has_function(env: dict) -> bool:
    for obj in env.values():          # (a loop: this runs on every warm call)
        if type(obj) is types.FunctionType:
            return True
        if not isinstance(obj, _NOT_HELPERS) and hasattr(obj, "py_func"):    # numba @njit
            return True
    return False


_NOT_HELPERS = (int, float, np.generic, types.ModuleType)


def _add_helper(out: dict, prefix: str, fn, outer: tuple) -> None:
    """Put the captures of helper `fn` (and of the helpers it calls) into `out` as
    "<prefix><name>": they are the kernel parameters of the inlined helper (translate reads
    them there). A helper without usable source, or calling itself, is left out: the
    translator raises the located error when it inlines the call."""
    code = fn.__code__
    if any(c is code for c in outer):
        return
    hit = _helpers.get(id(code))
    if hit is None or hit[0] is not code:
        try:
            helper_source(fn)
        except UnsupportedLambdaError:
            return
        hit = _helpers[id(code)]
    try:
        env = _values(fn, hit[1], hit[2])
    except UnsupportedLambdaError:
        return
    for name, obj in env.items():
        out[prefix + name] = obj
    _add_helpers(out, prefix, env, hit[3], outer + (code,))


def _values(fn, src: LambdaSource, plan: tuple) -> dict[str, object]:
    closure = fn.__closure__
    glob = fn.__globals__
    bins = fn.__builtins__
    if not isinstance(bins, dict):
        bins = vars(bins)
    out = {}
    for name, cell, stored, member in plan:
        if cell is not None:
            try:
                out[name] = closure[cell].cell_contents
            except ValueError:
                raise _unbound(src, name, "it is a closure variable not assigned yet") from None
        elif stored in glob:
            out[name] = glob[stored]
        elif stored in bins:
            out[name] = bins[stored]
        else:
            raise _unbound(src, name, "it is neither a local of an enclosing function, "
                                      "a global nor a builtin")
        if member:                  # a value set: a Members record and its elements (members.py)
            expand(out, name, out[name])
    return out


def capture_key(env: dict[str, object]) -> tuple:
    """What translate's IR depends on in `env` (from capture_values): the *types* of
    captured scalars, never their values, and the identity of modules/functions. Equal keys
    (for the same LambdaSource and argument types) give equal IR, so a caller can key its
    IR/kernel cache on this without re-translating."""
    key = []
    for name, obj in env.items():
        if type(obj) is Members:      # a value set: its size bucket and types, not its values
            key.append((name,) + obj.key())
        elif isinstance(obj, np.generic):
            key.append((name, obj.dtype.name))
        elif isinstance(obj, (_dt.date, _dt.timedelta)):
            # a date's time type (pd.Timestamp: its unit), never its value: a new date
            # reuses the kernel (datetimes.captured)
            try:
                key.append((name, "time", time_of_value(obj)))
            except QueryError:
                key.append((name, "time", "tz"))
        elif type(obj) is types.FunctionType:
            # a helper: its code (a new code object after an edit and a reload), not the
            # function object; its captures' types follow in env as "<name>.<capture>"
            key.append((name, "helper", obj.__code__))
        elif type(obj) is str:        # compared with a string column: a code parameter
            key.append((name, "str"))
        elif isinstance(obj, (bool, int, float)):
            # an int from 2**63 up is a uint64 parameter (translate._Name), not an int64 one
            # (and one below -2**63 fits no parameter: a value set's member, members.py)
            big = type(obj) is int and not -2 ** 63 <= obj < 2 ** 63
            key.append((name, ("int>=2**63" if obj > 0 else "int<-2**63") if big
                        else type(obj).__name__))
        else:
            try:
                hash(obj)
                key.append((name, obj))
            except TypeError:       # unhashable captures are rejected by translate anyway
                key.append((name, type(obj), id(obj)))
    return tuple(key)


def free_names(params, body: ast.expr) -> tuple[str, ...]:
    """Names read in `body` that are not parameters, in first-appearance order."""
    seen: dict[str, None] = {}
    stack = [body]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Name) and node.id not in params:
            seen.setdefault(node.id, None)
        if isinstance(node, _SCOPES):
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))
    return tuple(seen)


def _text_value(name: str, src: LambdaSource):
    if name in TEXT_MODULES:
        return TEXT_MODULES[name]
    if hasattr(builtins, name):
        return getattr(builtins, name)
    raise _unbound(src, name, "a query text has no variables")


def _unbound(src: LambdaSource, name: str, why: str) -> UnsupportedLambdaError:
    node = next((n for n in ast.walk(src.body) if isinstance(n, ast.Name) and n.id == name),
                src.body)
    return UnsupportedLambdaError(f"name {name!r} has no value: {why}", src.where(node),
                                  construct="name")


def _describe_callable(fn) -> str:
    if isinstance(fn, np.ufunc):
        return f"the numpy ufunc {fn.__name__!r}"
    if isinstance(fn, (types.BuiltinFunctionType, types.BuiltinMethodType)):
        return f"the builtin function {getattr(fn, '__name__', fn)!r}"
    if isinstance(fn, types.MethodType):
        return f"the bound method {fn.__qualname__!r} (methods are not supported)"
    if isinstance(fn, type):
        return f"the class {fn.__name__!r}"
    return f"a {type(fn).__module__}.{type(fn).__qualname__} object"


def _spans(fn, code) -> list[tuple[int, int, int, int]]:
    positions = list(code.co_positions())
    spans = [p for p in positions if None not in p and (p[0], p[2]) != (p[1], p[3])]
    if not spans and any(p[0] is not None and p[2] is None for p in positions):
        raise UnsupportedLambdaError(
            f"the source of {fn.__qualname__} can't be located: Python runs without column "
            f"positions (-X no_debug_ranges or PYTHONNODEBUGRANGES); run without it",
            f"{code.co_filename}:{code.co_firstlineno}", construct="source")
    return spans


def _find(fn, code, retried: bool = False,
          helper: bool = False) -> tuple[LambdaSource, Optional[str]]:
    """(LambdaSource, innermost enclosing class name) of fn, checked against its code."""
    filename = code.co_filename
    lines = linecache.getlines(filename, fn.__globals__)
    if not lines:
        raise UnsupportedLambdaError(
            f"no source for {fn.__qualname__} (defined in {filename!r}); {NO_SOURCE_HINT}",
            f"{filename}:{code.co_firstlineno}", construct="source")
    text, index, imported = _file_index(filename, "".join(lines))
    is_lambda = code.co_name == "<lambda>"
    kinds = (ast.Lambda,) if is_lambda else (ast.FunctionDef, ast.AsyncFunctionDef)
    cands = [c for c in index if isinstance(c[4], kinds) and (is_lambda or c[1] == code.co_name)]
    spans = _spans(fn, code)
    if spans:
        first = min((s[0], s[2]) for s in spans)
        last = max((s[1], s[3]) for s in spans)
        inside = [c for c in cands if c[2] <= first and last <= c[3]]
    else:   # a body with no located instruction: fall back to the definition's line
        inside = [c for c in cands if c[4].lineno == code.co_firstlineno]
    best = max(inside, key=lambda c: (c[2], (-c[3][0], -c[3][1]))) if inside else None
    differs = "no function there" if best is None else mismatch(best[4], code, best[5], imported)
    if differs is None:
        return _make(best[4], code, filename, text, helper), best[5]
    if not retried and _refreshed(filename, text, fn):
        return _find(fn, code, True, helper)   # linecache held an older text than the code's
    if best is None:
        raise UnsupportedLambdaError(
            f"{fn.__qualname__}: {CHANGED} (no function is at its recorded position any more)",
            f"{filename}:{code.co_firstlineno}", construct="source")
    node = best[4]
    raise UnsupportedLambdaError(
        f"{fn.__qualname__}: {CHANGED} (its source text now compiles to different "
        f"{differs})", f"{filename}:{node.lineno}:{node.col_offset + 1}",
        construct="source")


def _refreshed(filename: str, text: str, fn) -> bool:
    """Drop linecache's copy of `filename` if the file on disk changed; True when the text
    read again differs from `text` (worth another try)."""
    linecache.checkcache(filename)
    return "".join(linecache.getlines(filename, fn.__globals__)) != text


def _mangle(name: str, cls: Optional[str]) -> str:
    """The name Python stores for `name` read inside class `cls` (private-name mangling)."""
    if cls is None or not name.startswith("__") or name.endswith("__") or "." in name:
        return name
    stripped = cls.lstrip("_")
    return f"_{stripped}{name}" if stripped else name


def _file_index(filename: str, text: str):
    hit = _by_file.get(filename)
    if hit is not None and hit[0] == text:
        return hit
    try:
        tree = ast.parse(text, filename)
    except SyntaxError as e:
        raise UnsupportedLambdaError(f"can't parse the source file: {e}", filename,
                                     construct="source") from None
    index = []
    stack = [(tree, None)]          # (node, innermost enclosing class name)
    while stack:
        node, cls = stack.pop()
        if isinstance(node, ast.Lambda):
            b = node.body
            index.append(("lambda", "<lambda>", (b.lineno, b.col_offset),
                          (b.end_lineno, b.end_col_offset), node, cls))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first, last = node.body[0], node.body[-1]
            index.append(("def", node.name, (first.lineno, first.col_offset),
                          (last.end_lineno, last.end_col_offset), node, cls))
        inner = node.name if isinstance(node, ast.ClassDef) else cls
        stack.extend((child, inner) for child in ast.iter_child_nodes(node))
    hit = _by_file[filename] = (text, index, module_imports(tree))
    return hit


def _make(node, code, filename: str, text: str, helper: bool = False) -> LambdaSource:
    where = f"{filename}:{node.lineno}:{node.col_offset + 1}"
    params = positional_params(node.args, where, helper)
    stmts: tuple = ()
    if isinstance(node, ast.Lambda):
        body = node.body
    elif helper:
        stmts, body = _helper_body(node, where, filename)
    else:
        body = _def_body(node, where, filename)
    if code is not None and tuple(code.co_varnames[:code.co_argcount]) != params:
        raise UnsupportedLambdaError(
            f"the source found for this function declares parameters {params} but the code "
            f"has {code.co_varnames[:code.co_argcount]} (was the file edited after import?)",
            where, construct="source")
    walrus = next((n for part in (*stmts, body) for n in ast.walk(part)
                   if isinstance(n, ast.NamedExpr)), None)
    if walrus is not None:         # its target would otherwise read as an unbound name
        raise UnsupportedLambdaError(
            "assignment expressions (:=) are not supported; write a helper value as a "
            "separate select, e.g. .select(lambda v: v * 2).select(lambda w: w + w)",
            f"{filename}:{walrus.lineno}:{walrus.col_offset + 1}", construct="NamedExpr")
    captures = _statement_names(params, stmts, body, filename) if stmts else free_names(params, body)
    return LambdaSource(params=params, body=body, filename=filename, captures=captures,
                        code=code, text=source_segment(text, node), stmts=stmts)


_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


@lru_cache(maxsize=16)
def _source_lines(text: str) -> tuple[str, ...]:
    """text's lines as the parser splits them (\r\n, \r, \n; ends kept): ast's own split,
    done once per file text rather than once per lambda (a long file's split costs
    milliseconds, and a query's first call finds every lambda)."""
    return tuple(_LINE.findall(text))


def source_segment(text: str, node) -> str:
    """ast.get_source_segment(text, node) or "" (its slicing by UTF-8 columns), over the
    file's lines split once (_source_lines)."""
    if getattr(node, "end_lineno", None) is None or getattr(node, "end_col_offset", None) is None:
        return ""
    lines = _source_lines(text)
    a, b = node.lineno - 1, node.end_lineno - 1
    if a == b:
        return lines[a].encode()[node.col_offset:node.end_col_offset].decode()
    return "".join([lines[a].encode()[node.col_offset:].decode(), *lines[a + 1:b],
                    lines[b].encode()[:node.end_col_offset].decode()])


def positional_params(args: ast.arguments, where: str, helper: bool = False) -> tuple[str, ...]:
    problems = []
    if args.defaults or any(d is not None for d in args.kw_defaults):
        problems.append("default values")
    if args.vararg:
        problems.append(f"*{args.vararg.arg}")
    if args.kwarg:
        problems.append(f"**{args.kwarg.arg}")
    if args.kwonlyargs:
        problems.append("keyword-only parameters")
    if problems:
        use = "every argument passed positionally" if helper else "one per element value"
        raise UnsupportedLambdaError(
            f"parameters with {', '.join(problems)} are not supported; use plain positional "
            f"parameters, {use}", where, construct="parameters")
    return tuple(a.arg for a in args.posonlyargs + args.args)


def _def_body(node, where: str, filename: str) -> ast.expr:
    if isinstance(node, ast.AsyncFunctionDef):
        raise UnsupportedLambdaError(
            f"async def {node.name} returns a coroutine, not a value; use a plain def or a "
            f"lambda", where, construct="async def")
    stmts = node.body
    if (len(stmts) > 1 and isinstance(stmts[0], ast.Expr)
            and isinstance(stmts[0].value, ast.Constant) and isinstance(stmts[0].value.value, str)):
        stmts = stmts[1:]       # a docstring
    if len(stmts) != 1 or not isinstance(stmts[0], ast.Return) or stmts[0].value is None:
        bad = next((s for s in stmts if not isinstance(s, ast.Return)), stmts[0])
        raise UnsupportedLambdaError(
            f"def {node.name}: the body must be a single `return expr` (optionally after a "
            f"docstring); found {type(bad).__name__} at line {bad.lineno}. A def of "
            f"assignments then a return can be called as a helper: "
            f"select(lambda v: {node.name}(v))",
            f"{filename}:{bad.lineno}:{bad.col_offset + 1}", construct=type(bad).__name__)
    return stmts[0].value


# What a helper's body may not hold, by statement type: (construct, why and what to do).
_STRAIGHT = ("a helper's body is straight-line assignments (t = v * 2) then one `return expr`, "
             "inlined into the kernel")
_REFUSED = {
    ast.For: ("loop", "loops are not supported in a helper function"),
    ast.AsyncFor: ("loop", "loops are not supported in a helper function"),
    ast.While: ("loop", "loops are not supported in a helper function"),
    ast.If: ("If", "if statements are not supported in a helper function; use a conditional "
                   "expression: t = a if cond else b"),
    ast.Global: ("Global", "global declarations are not supported in a helper function: "
                           "assigning a global is a side effect; a helper only reads captured "
                           "values"),
    ast.Nonlocal: ("Nonlocal", "nonlocal declarations are not supported in a helper function: "
                               "assigning an enclosing variable is a side effect"),
    ast.Expr: ("side effect", "a statement that only evaluates an expression (a call, a "
                              "yield) runs for its side effect, which a kernel can't have"),
    ast.Return: ("Return", "a helper returns once, at its end"),
}


def _helper_body(node, where: str, filename: str) -> tuple[tuple, ast.expr]:
    """(assignments, returned expression) of a helper def, or the located refusal."""
    if isinstance(node, ast.AsyncFunctionDef):
        _def_body(node, where, filename)            # raises: async def
    stmts = node.body
    if (len(stmts) > 1 and isinstance(stmts[0], ast.Expr)
            and isinstance(stmts[0].value, ast.Constant) and isinstance(stmts[0].value.value, str)):
        stmts = stmts[1:]       # a docstring
    for s in stmts[:-1]:
        if isinstance(s, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for target in s.targets if isinstance(s, ast.Assign) else [s.target]:
                _check_target(target, s, filename)
            if s.value is None:                     # `t: int` alone declares nothing
                _refuse_statement(s, "AnnAssign", "an annotation without a value assigns "
                                                  "nothing", filename)
            continue
        construct, why = _REFUSED.get(type(s), (type(s).__name__, f"`{type(s).__name__}` "
                                                "statements are not supported in a helper "
                                                "function"))
        _refuse_statement(s, construct, why, filename)
    last = stmts[-1]
    if not isinstance(last, ast.Return) or last.value is None:
        construct, why = _REFUSED.get(type(last), (type(last).__name__, ""))
        _refuse_statement(last, construct, f"{why + '; ' if why else ''}a helper must end with "
                                           f"`return expr`", filename)
    return tuple(stmts[:-1]), last.value


def _check_target(target: ast.expr, stmt, filename: str) -> None:
    if isinstance(target, ast.Name):
        return
    if isinstance(target, ast.Tuple) and isinstance(stmt, ast.Assign) and \
            all(isinstance(t, ast.Name) for t in target.elts):
        return
    what = {ast.Attribute: "an attribute", ast.Subscript: "an item"}.get(type(target))
    if what is not None:
        _refuse_statement(stmt, "side effect", f"assigning to {what} ({ast.unparse(target)}) is "
                                               f"a side effect, which a kernel can't have; "
                                               f"assign a local name instead", filename)
    _refuse_statement(stmt, "Assign", f"assigning to {ast.unparse(target)} is not supported; "
                                      f"assign plain names (t = ..., or a, b = ...)", filename)


def _refuse_statement(s: ast.stmt, construct: str, why: str, filename: str):
    raise UnsupportedLambdaError(f"{why}; {_STRAIGHT}", f"{filename}:{s.lineno}:{s.col_offset + 1}",
                                 construct=construct)


def _statement_names(params, stmts: tuple, body: ast.expr, filename: str) -> tuple[str, ...]:
    """The free names of a helper's assignments and return, in first-appearance order.
    A local read before its assignment (Python's UnboundLocalError) is refused."""
    assigned = {n.id for s in stmts for n in ast.walk(s)
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    bound = set(params)
    seen: dict[str, None] = {}
    for part in (*stmts, body):
        value = part.value if isinstance(part, ast.stmt) else part
        reads = list(free_names(bound, value))
        if isinstance(part, ast.AugAssign) and part.target.id not in bound:
            reads.insert(0, part.target.id)
        for name in reads:
            if name in assigned:
                node = next(n for n in ast.walk(part) if isinstance(n, ast.Name) and n.id == name)
                raise UnsupportedLambdaError(
                    f"local {name!r} is read before it is assigned (Python raises "
                    f"UnboundLocalError)", f"{filename}:{node.lineno}:{node.col_offset + 1}",
                    construct="name")
            seen.setdefault(name, None)
        if isinstance(part, ast.stmt):
            bound |= {n.id for n in ast.walk(part)
                      if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return tuple(seen)
