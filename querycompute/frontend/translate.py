"""Lambda AST -> typed expression IR (codegen.expr), following NumPy 2 semantics.

`translate` walks the lambda body once per (lambda, argument types) and returns a Value: a
Scalar expression tree, or a tuple/record of them for a select that builds several columns.
Captured scalars become kernel parameters (through the caller's `new_param`), never pasted
constants, so a new value of a captured variable reuses the compiled kernel.
Operators live in translate_ops.py, function calls in translate_calls.py.
"""
from __future__ import annotations

import ast
import types
from typing import Callable, Mapping

import numpy as np

from querycompute._codegen import dtypes
from querycompute._codegen.ir.expr import Const, Param
from ..errors import UnsupportedLambdaError, UnsupportedTypeError
from .capture import HELPER_SEP, LambdaSource, helper_function, helper_source
from .members import CONTAINERS, MAX_MEMBERS, Members
from .translate_calls import MODULE_CONSTANTS, SUPPORTED, call_handler, real_imag
from .promotion import UFUNC, ufunc_loop
from .translate_ops import binary, const, fail, logical, logical_not, select, to_dtype, truthy, unary
from .values import Exact, OuterSide, RecordVal, Scalar, StrCodes, TupleVal, Value, matched
from . import datetimes
from . import shaped as S
from . import strings

BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "truediv",
          ast.FloorDiv: "floordiv", ast.Mod: "mod", ast.Pow: "pow", ast.BitAnd: "bitand",
          ast.BitOr: "bitor", ast.BitXor: "bitxor", ast.LShift: "lshift", ast.RShift: "rshift"}
UNARYOPS = {ast.USub: "neg", ast.UAdd: "pos", ast.Invert: "invert"}
CMPOPS = {ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.Eq: "eq", ast.NotEq: "ne"}
# Human names of constructs we reject, for error messages.
CONSTRUCTS = {"ListComp": "a list comprehension", "SetComp": "a set comprehension",
              "DictComp": "a dict comprehension", "GeneratorExp": "a generator expression",
              "Lambda": "a lambda inside a lambda", "JoinedStr": "an f-string",
              "NamedExpr": "an assignment expression (:=)", "List": "a list literal",
              "Set": "a set literal", "Starred": "* unpacking", "Await": "await",
              "Yield": "yield", "YieldFrom": "yield from", "Slice": "a slice",
              "MatMult": "the @ operator", "Is": "`is`", "IsNot": "`is not`"}
LANGUAGE = ("supported: arithmetic + - * / // % **, unary - + ~ not, comparisons, and/or on "
            "bools, & | ^ << >> on integers, `a if c else b`, calls of " + SUPPORTED +
            ", membership `v in (1, 5)` / `v not in codes` / np.isin(v, codes) in a tuple, list "
            "or set of numbers (literal or captured), record fields r.name / r['name'], tuple[i] "
            "with a constant i, and tuple or dict literals as the result")
# What may stand right of `in` (and as np.isin's second argument).
VALUE_SETS = (f"a tuple, list or set literal of numbers, or a captured tuple, list, set, frozenset "
              f"or 1-D NumPy array of at most {MAX_MEMBERS} numbers")


def translate(src: LambdaSource, args: tuple[Value, ...], env: Mapping[str, object],
              new_param: Callable[[str, str], Param]) -> Value:
    """The value of src's body with src.params bound to `args` (in order).

    env maps src.captures to their current objects (capture_values); every captured scalar
    becomes `new_param(name, dtype)`.
    """
    if len(args) != len(src.params):
        fail(src.where(src.body),
             f"the lambda takes {len(src.params)} parameter(s) {src.params} but each element "
             f"here has {len(args)} value(s); write a lambda with {len(args)} parameter(s)",
             "parameters")
    outer = (src.code,) if src.code is not None else ()
    return _settle(_Translator(src, args, env, new_param, "", outer).run())


def _settle(v: Value) -> Value:
    """A lambda's result: a weak sub-expression of captured ints is its exact value, as the
    Python int (int64) or bool it is (frontend/exact.py), not the kernel's stand-in."""
    if isinstance(v, Scalar):
        if v.exact is None or v.exact.tree[0] == "cap":
            return v
        return Scalar(to_dtype(v, v.dtype, ""), v.weak)
    if isinstance(v, TupleVal):
        return TupleVal(tuple(_settle(i) for i in v.items))
    if isinstance(v, RecordVal):
        return RecordVal(tuple((k, _settle(i)) for k, i in v.fields), v.skipped)
    return v


def _construct(node: ast.AST) -> str:
    name = type(node).__name__
    return CONSTRUCTS.get(name, name)


class _Translator:
    def __init__(self, src, args, env, new_param, prefix: str, outer: tuple):
        self.src = src
        self.env = env
        self.new_param = new_param
        self.locals = dict(zip(src.params, args))
        self.made: dict[str, Scalar] = {}   # capture name -> its Param, once per lambda
        # Inside an inlined helper: its captures are env["<prefix><name>"] (capture.py's
        # helper captures), and `outer` holds the code objects of the callers (recursion).
        self.prefix = prefix
        self.outer = outer

    def run(self) -> Value:
        """The body's value, after a helper's straight-line assignments (src.stmts)."""
        for stmt in self.src.stmts:
            if isinstance(stmt, ast.AugAssign):
                left = ast.copy_location(ast.Name(stmt.target.id, ast.Load()), stmt.target)
                value = self.value(ast.copy_location(ast.BinOp(left, stmt.op, stmt.value), stmt))
                self.locals[stmt.target.id] = value
                continue
            value = self.value(stmt.value)
            for target in stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]:
                self._assign(target, value, stmt)
        return self.value(self.src.body)

    def _assign(self, target: ast.expr, value: Value, stmt: ast.stmt) -> None:
        if isinstance(target, ast.Name):
            self.locals[target.id] = value
            return
        if not isinstance(value, TupleVal) or len(value.items) != len(target.elts):
            got = f"a tuple of {len(value.items)}" if isinstance(value, TupleVal) else f"a {_kind(value)}"
            fail(self.at(stmt), f"unpacking into {len(target.elts)} names needs a tuple of "
                                f"{len(target.elts)} values; this is {got}", "Assign")
        for t, v in zip(target.elts, value.items):
            self.locals[t.id] = v

    def at(self, node: ast.AST) -> str:
        return self.src.where(node)

    def value(self, node: ast.AST) -> Value:
        method = getattr(self, "_" + type(node).__name__, None)
        if method is None:
            fail(self.at(node), f"{_construct(node)} is not supported in a query lambda; "
                                f"{LANGUAGE}", type(node).__name__)
        v = method(node)
        return v.value if isinstance(v, OuterSide) else v   # b's fields: its value

    def _outer(self, node: ast.AST, what: str) -> Scalar:
        """The matched flag of a left join's other side named by `node` (`b is None`,
        qc.matched(b)); anything else is refused, saying what the test reads."""
        v = self.locals.get(node.id) if isinstance(node, ast.Name) else None
        if not isinstance(v, OuterSide):
            fail(self.at(node), f"{what} tests whether a left join's row matched: it takes the other "
                                f"side's parameter b of left_join(..., result=lambda a, b: ...) itself, "
                                f"got {ast.unparse(node)}; elements and fields are never None", what)
        return v.matched

    def scalar(self, node: ast.AST, what: str) -> Scalar:
        return self.check_scalar(self.value(node), node, what)

    def check_scalar(self, v: Value, node: ast.AST, what: str) -> Scalar:
        if not isinstance(v, Scalar):
            if isinstance(v, S.ShapedVal):
                S.refuse_truth(self.at(node), what) if what in ("a condition", "`and`", "`or`") else \
                    fail(self.at(node), f"{what} needs a scalar but this is a shaped element of "
                                        f"shape {v.shape}", what)
            kind = "tuple" if isinstance(v, TupleVal) else "record"
            fail(self.at(node), f"{what} needs a scalar but this is a {kind}; pick one value "
                                f"with t[i] or r.field", what)
        if what != "a branch":
            strings.refuse_numeric(v, self.at(node), what)
        return v

    # --- leaves -------------------------------------------------------------------------
    def _Constant(self, node: ast.Constant) -> Value:
        if isinstance(node.value, (bool, int, float)):
            return const(node.value, self.at(node))
        fail(self.at(node), f"the constant {node.value!r} ({type(node.value).__name__}) is not "
                            f"supported: kernels compute with bool, int and float (strings "
                            f"only name fields: r['price'], {{'price': ...}})", "constant")

    def _Name(self, node: ast.Name) -> Value:
        if node.id in self.locals:
            return self.locals[node.id]
        if node.id in self.made:
            return self.made[node.id]
        s = self._captured(node.id, self._lookup(node.id, node), node)
        self.made[node.id] = s
        return s

    def _captured(self, name: str, obj, node: ast.AST) -> Scalar:
        """The kernel parameter of captured scalar `obj` (env[prefix + name])."""
        key = self.prefix + name     # a helper's captures are named "<helper>.<name>"
        if datetimes.time_of_value(obj) is not None:
            s = datetimes.captured(obj, key, self.new_param)
        elif isinstance(obj, np.generic) and obj.dtype.name in dtypes.ALL:
            s = Scalar(self.new_param(key, obj.dtype.name))
        elif isinstance(obj, (bool, int, float)) and not isinstance(obj, np.generic):
            kind = "bool" if isinstance(obj, bool) else "int" if isinstance(obj, int) else "float"
            if kind == "int" and not -2 ** 63 <= obj < 2 ** 64:
                fail(self.at(node), f"captured int {name!r} = {obj} does not fit in 64 "
                                    f"bits; kernel parameters are int64 (uint64 from 2**63 up)",
                     "capture")
            # Still a weak Python int, held as uint64 from 2**63 up (NumPy 2 accepts
            # uint64_array * 0x9E3779B97F4A7C15); capture_key makes that a type of its own.
            s = Scalar(self.new_param(key, {"bool": "bool", "float": "float64",
                                            "int": "int64" if obj < 2 ** 63 else "uint64"}[kind]),
                       kind, None if kind == "float" else Exact(("cap", key), self.new_param))
        else:
            if type(obj) is Members or isinstance(obj, CONTAINERS):
                kind = obj.kind if type(obj) is Members else type(obj).__name__
                fail(self.at(node), f"captured {name!r} is a {kind}: a value set can only be "
                                    f"tested for membership (v in {name}, np.isin(v, {name})); "
                                    f"otherwise only scalars (bool, int, float, numpy scalars) "
                                    f"can be captured", "capture")
            fail(self.at(node), f"captured {name!r} is {_describe(obj)}; only scalars "
                                f"(bool, int, float, numpy scalars of {', '.join(dtypes.ALL)}) "
                                f"can be captured. Arrays belong in qc.query(...) as inputs; "
                                f"functions must be math/numpy ones, called", "capture")
        return s

    def _lookup_quiet(self, name: str):
        return self.env.get(self.prefix + name)

    def _lookup(self, name: str, node: ast.AST):
        key = self.prefix + name
        if key not in self.env:
            fail(self.at(node), f"name {name!r} has no value (not a parameter and not "
                                f"captured)", "name")
        return self.env[key]

    # --- structure ----------------------------------------------------------------------
    def _Attribute(self, node: ast.Attribute) -> Value:
        base = node.value
        if isinstance(base, ast.Name) and base.id not in self.locals:
            obj = self._lookup(base.id, base)
            if isinstance(obj, types.ModuleType):
                value = getattr(obj, node.attr, None)
                if node.attr in MODULE_CONSTANTS and isinstance(value, float):
                    return const(value, self.at(node))
                fail(self.at(node), f"{base.id}.{node.attr} is not a value a kernel can use; "
                                    f"module constants supported: {', '.join(sorted(MODULE_CONSTANTS))}"
                                    f"; functions must be called", "attribute")
            if not isinstance(obj, (bool, int, float, np.generic)):
                fail(self.at(node), f"attribute access {base.id}.{node.attr} on captured "
                                    f"{_describe(obj)} is not supported; copy the value into "
                                    f"a local scalar first ({node.attr} = {base.id}.{node.attr})",
                     "attribute")
        v = self.value(base)
        if isinstance(v, RecordVal):
            return self._field(v, node.attr, node)
        if isinstance(v, S.ShapedVal):
            return S.attribute(v, node.attr, self.at(node))
        if isinstance(v, Scalar) and v.time is not None:
            return datetimes.field(v, node.attr, self.at(node))
        if isinstance(v, Scalar) and node.attr in ("real", "imag"):
            return real_imag(node.attr, v, self.at(node))
        fail(self.at(node), f"attribute .{node.attr} is only supported on records (r.price); "
                            f"this is a {_kind(v)}", "attribute")

    def _field(self, rec: RecordVal, name: str, node) -> Value:
        v = rec.get(name)
        if v is None and name in dict(rec.skipped):
            raise UnsupportedTypeError(
                f"{self.at(node)}: column {name!r} can't be read by a kernel: it "
                f"{dict(rec.skipped)[name]}")
        if v is None:
            fail(self.at(node), f"the record has no field {name!r}; fields: "
                                f"{', '.join(rec.names)}", "field")
        return v

    def _Subscript(self, node: ast.Subscript) -> Value:
        v = self.value(node.value)
        key = node.slice
        if isinstance(v, S.ShapedVal):
            return S.index(v, S.index_key(self, key), self.at(node))
        if isinstance(v, RecordVal):
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                return self._field(v, key.value, node)
            fail(self.at(key), "a record is indexed by a constant field name: r['price']", "index")
        if isinstance(v, TupleVal):
            if not isinstance(key, ast.Slice):
                k = self.value(key)
                if (isinstance(k, Scalar) and k.weak == "int" and isinstance(k.expr, Const)):
                    if -len(v.items) <= k.expr.value < len(v.items):
                        return v.items[k.expr.value]
                    fail(self.at(key), f"index {k.expr.value} is out of range for a tuple of "
                                       f"{len(v.items)}", "index")
            fail(self.at(key), "a tuple is indexed by a constant int: t[0], t[-1]", "index")
        fail(self.at(node), "indexing a scalar is not supported (only tuples t[0] and "
                            "records r['name'])", "index")

    def _Tuple(self, node: ast.Tuple) -> Value:
        return TupleVal(tuple(self.value(e) for e in node.elts))

    def _Dict(self, node: ast.Dict) -> Value:
        fields = {}
        for k, v in zip(node.keys, node.values):
            if not (isinstance(k, ast.Constant) and isinstance(k.value, str)):
                fail(self.at(k or v), "dict literals need constant string keys: "
                                      "{'price': r.price * 2}", "dict")
            if k.value in fields:
                fail(self.at(k), f"field {k.value!r} appears twice", "dict")
            fields[k.value] = self.value(v)
        return RecordVal(tuple(fields.items()))

    # --- operators ----------------------------------------------------------------------
    def _BinOp(self, node: ast.BinOp) -> Value:
        strings.binop(self, node)       # "a" + r.name: strings are not built in kernels
        op = BINOPS.get(type(node.op))
        left, right = self.value(node.left), self.value(node.right)
        if isinstance(node.op, ast.MatMult) or isinstance(left, S.ShapedVal) or isinstance(right, S.ShapedVal):
            return S.operator(op, left, right, self.at(node))       # shaped elements (4b)
        if op is None:
            fail(self.at(node), f"{_construct(node.op)} is not supported; {LANGUAGE}",
                 type(node.op).__name__)
        return binary(op, self.check_scalar(left, node.left, "an operator"),
                      self.check_scalar(right, node.right, "an operator"), self.at(node))

    def _UnaryOp(self, node: ast.UnaryOp) -> Value:
        v = self.value(node.operand)
        if isinstance(v, S.ShapedVal) and not isinstance(node.op, ast.Not):
            return S.unop(UNARYOPS[type(node.op)], v, self.at(node))
        x = self.check_scalar(v, node.operand, "an operator")
        if isinstance(node.op, ast.Not):
            return logical_not(x)
        return unary(UNARYOPS[type(node.op)], x, self.at(node))

    def _Compare(self, node: ast.Compare) -> Value:
        out = strings.host_compare(self, node)   # "x" in s, s.lower() == "x": per distinct string
        if out is not None:
            return out
        if len(node.ops) == 1 and type(node.ops[0]) in (ast.Is, ast.IsNot) \
                and isinstance(node.comparators[0], ast.Constant) and node.comparators[0].value is None:
            m = self._outer(node.left, f"`{ast.unparse(node)}`")         # a left join's b
            return m if isinstance(node.ops[0], ast.IsNot) else logical_not(m)
        for cmp in node.ops:
            if type(cmp) not in CMPOPS and not isinstance(cmp, (ast.In, ast.NotIn)):
                fail(self.at(node), f"{_construct(cmp)} is not supported; compare with "
                                    f"< <= > >= == != or test membership with in / not in",
                     type(cmp).__name__)
        out = strings.compare(self, node)        # a string column's codes (strings.py)
        if out is not None:
            return out
        if any(isinstance(cmp, (ast.In, ast.NotIn)) for cmp in node.ops):
            return self._compare_in(node)
        values = [self.value(n) for n in [node.left] + node.comparators]
        if len(values) == 2 and any(isinstance(v, S.ShapedVal) for v in values):
            return S.binop(CMPOPS[type(node.ops[0])], values[0], values[1], self.at(node))
        operands = [self.check_scalar(v, n, "a comparison")
                    for v, n in zip(values, [node.left] + node.comparators)]
        parts = [binary(CMPOPS[type(cmp)], operands[i], operands[i + 1], self.at(node))
                 for i, cmp in enumerate(node.ops)]
        return parts[0] if len(parts) == 1 else logical("and", parts, self.at(node))

    # --- membership (frontend/members.py) ------------------------------------------------
    def _compare_in(self, node: ast.Compare) -> Scalar:
        """A comparison chain with `in` / `not in`: `a < b in s` is (a < b) and (b in s)."""
        at = self.at(node)
        left = self.scalar(node.left, "a comparison")
        parts = []
        for i, (cmp, right) in enumerate(zip(node.ops, node.comparators)):
            if isinstance(cmp, (ast.In, ast.NotIn)):
                if i + 1 < len(node.ops):
                    fail(at, "a value set can't be compared further in a chain; write "
                             "`x in s and ...`", "In")
                part = self.member_test(left, right, False, at)
                parts.append(logical_not(part) if isinstance(cmp, ast.NotIn) else part)
            else:
                value = self.scalar(right, "a comparison")
                parts.append(binary(CMPOPS[type(cmp)], left, value, at))
                left = value
        return parts[0] if len(parts) == 1 else logical("and", parts, at)

    def membership(self, x: Scalar, items: list, at: str) -> Scalar:
        """`x in items`: x == t0 or x == t1 or ... (NumPy's ==, so NaN is in no set)."""
        if not items:
            return const(False, at)                    # `in ()`: False, as in Python
        return logical("or", [binary("eq", x, t, at) for t in items], at)

    def member_test(self, x: Scalar, node: ast.AST, isin: bool, at: str) -> Scalar:
        """`x in <node>`, node a literal value set or a captured one (Members): weak Python
        numbers for `in`; for np.isin every item as np.asarray(set).dtype."""
        what = "np.isin's second argument" if isin else "the right of `in`"
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            for e in node.elts:
                if isinstance(e, ast.Constant) and isinstance(e.value, (str, bytes)):
                    fail(self.at(e), f"{e.value!r} is a string: membership is tested on numbers "
                                     f"(bool, int, float); strings are not supported in a "
                                     f"value set", "In")
            if isin:
                return self.membership(x, self._isin_literal(node), at)
            return self.membership(x, [self.scalar(e, "a value in a set") for e in node.elts], at)
        if isinstance(node, ast.Name) and node.id in self.locals and not isin:
            v = self.locals[node.id]
            if isinstance(v, TupleVal):
                return self.membership(x, [self.check_scalar(i, node, "a value in a set")
                                           for i in v.items], at)
        if isinstance(node, ast.Name) and node.id not in self.locals:
            obj = self._lookup(node.id, node)
            if type(obj) is Members:
                return self._captured_set(x, node, obj, isin, at)
            fail(self.at(node), f"{what} is captured {node.id!r}, {_describe(obj)}; it must be "
                                f"{VALUE_SETS}", "In")
        fail(self.at(node), f"{what} is `{ast.unparse(node)}`; it must be {VALUE_SETS}", "In")

    def _captured_set(self, x: Scalar, node: ast.Name, members: Members, isin: bool,
                      at: str) -> Scalar:
        if members.refused:
            fail(self.at(node), f"captured {node.id!r} ({members.kind}) {members.refused}", "In")
        names = [f"{node.id}[{i}]" for i in range(members.bucket)]
        if isin:      # np.asarray(set).dtype for every item, as np.isin converts
            if members.dtype is None:
                fail(self.at(node), f"np.isin: captured {node.id!r} holds numbers that share "
                                    f"no NumPy type (np.asarray makes an object array)", "isin")
            return self.membership(x, [self._typed_item(n, members.dtype, node) for n in names], at)
        objs = [self._lookup(n, node) for n in names]
        ints = [n for n, o in zip(names, objs) if type(o) is int]
        loop = None
        if ints and x.weak is None:     # the dtype `x == <Python int>` compares in
            loop = ufunc_loop(UFUNC["eq"], ((x.dtype, None), ("int64", "int")))[0]
        if loop is None or not dtypes.is_int(loop):
            return self.membership(x, [self._captured(n, o, node) for n, o in zip(names, objs)], at)
        # A Python int compares exactly (NumPy 2): one that fits no `loop` value (300 for
        # uint8) never matches. Each int is a `loop` parameter, one that doesn't fit standing
        # in as a member that does; `fits` says whether any does (frontend/exact.py).
        keys = tuple(self.prefix + n for n in ints)
        if loop == "int64" and all(-2 ** 63 <= o < 2 ** 63 for o in objs if type(o) is int):
            # every int of the set is an int64 (capture_key tells 2**63 and up apart)
            test = self.membership(x, [Scalar(self.new_param(self.prefix + n, loop))
                                       for n in ints], at)
        else:
            test = self.membership(x, [Scalar(self.new_param(
                ("exact", "member", ("cap", self.prefix + n), loop, keys), loop)) for n in ints], at)
            fits = self.new_param(("exact", "anyfits", ("cap", keys[0]), loop, keys), "bool")
            test = logical("and", [Scalar(fits), test], at)
        rest = [self._captured(n, o, node) for n, o in zip(names, objs) if type(o) is not int]
        return logical("or", [test, self.membership(x, rest, at)], at) if rest else test

    def _typed_item(self, name: str, dtype: str, node: ast.AST) -> Scalar:
        obj = self._lookup(name, node)
        if isinstance(obj, np.generic) and obj.dtype.name == dtype:
            return self._captured(name, obj, node)
        key = self.prefix + name        # the item converted to dtype at launch (exact.py)
        return Scalar(self.new_param(("exact", "value", ("cap", key), dtype), dtype))

    def _isin_literal(self, node) -> list:
        values = []
        for e in node.elts:
            v = self.value(e)
            if not (isinstance(v, Scalar) and isinstance(v.expr, Const) and v.weak):
                fail(self.at(e), "np.isin's values written in the call must be number constants; "
                                 "capture variables as one value set (codes = (a, b); "
                                 "np.isin(v, codes))", "isin")
            values.append(v.expr.value)
        dtype = np.asarray(values).dtype if values else np.dtype("float64")
        if dtype.kind not in "biuf":
            fail(self.at(node), "np.isin: these numbers share no NumPy type (np.asarray makes an "
                                "object array)", "isin")
        return [Scalar(Const(dtype.type(v).item(), dtype.name)) for v in values]

    def _isin(self, node: ast.Call, name: str) -> Scalar:
        """np.isin(x, values, invert=False): NumPy converts `values` with np.asarray first."""
        at = self.at(node)
        if len(node.args) != 2:
            fail(at, f"{name}(element, values) takes two arguments here; got {len(node.args)}",
                 "isin")
        invert = False
        for kw in node.keywords:
            if kw.arg not in ("invert", "assume_unique", "kind"):
                fail(at, f"{name}: the keyword {kw.arg!r} is not supported; supported: invert, "
                         f"assume_unique, kind (the last two change no answer)", "isin")
            if kw.arg == "invert":
                if not (isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, bool)):
                    fail(self.at(kw.value), f"{name}: invert must be the constant True or False",
                         "isin")
                invert = kw.value.value
        x = self.scalar(node.args[0], f"{name}'s first argument")
        out = self.member_test(x, node.args[1], True, at)
        return logical_not(out) if invert else out

    def _BoolOp(self, node: ast.BoolOp) -> Value:
        op = "and" if isinstance(node.op, ast.And) else "or"
        return logical(op, [self.scalar(n, f"`{op}`") for n in node.values], self.at(node))

    def _IfExp(self, node: ast.IfExp) -> Value:
        cond = self.scalar(node.test, "a condition")
        if isinstance(cond.expr, Const) and cond.weak:    # decided now (len(r) > 1): Python
            return self.value(node.body if truthy(cond).value else node.orelse)  # runs one branch
        body, orelse = self.value(node.body), self.value(node.orelse)
        if type(body) is StrCodes or type(orelse) is StrCodes:
            return strings.pick(cond, body, orelse, self.at(node))
        if isinstance(body, S.ShapedVal) or isinstance(orelse, S.ShapedVal):
            return S.where(cond, body, orelse, self.at(node))
        return select(cond, self.check_scalar(body, node.body, "a branch"),
                      self.check_scalar(orelse, node.orelse, "a branch"), self.at(node))

    def _Call(self, node: ast.Call) -> Value:
        if isinstance(node.func, (ast.Name, ast.Attribute)) and not node.keywords and len(node.args) == 1 \
                and self._names(node.func, matched):
            return self._outer(node.args[0], "qc.matched(b)")
        out = strings.call(self, node)           # s.startswith(p) on a string column
        if out is not None:
            return out
        for kind, ctor in (("M", np.datetime64), ("m", np.timedelta64)):
            if self._names(node.func, ctor):
                return datetimes.construct(kind, node, self.at(node))
        from .shaped_calls import NOT_SHAPED, call
        f = node.func
        if (isinstance(f, ast.Attribute) and f.attr == "isin" and isinstance(f.value, ast.Name)
                and f.value.id not in self.locals) or \
                (isinstance(f, ast.Name) and f.id == "isin" and f.id not in self.locals):
            if self._callee(f) is np.isin:
                return self._isin(node, ast.unparse(f))
        out = call(self, node)        # supported callees, and everything on shaped elements
        if out is not NOT_SHAPED:
            return out
        at = self.at(node)
        if node.keywords:
            fail(at, "keyword arguments are not supported in calls inside a lambda", "call")
        obj = self._callee(node.func)
        handler = call_handler(obj)
        helper = helper_function(obj) if handler is None else None
        if helper is not None:
            return self._inline(node, helper, at)
        if handler is None:
            fail(at, f"calling {ast.unparse(node.func)} ({_describe(obj)}) is not supported; "
                     f"supported calls: {SUPPORTED}", "call")
        return handler([self.scalar(a, "a function argument") for a in node.args], at)

    def _inline(self, node: ast.Call, fn, at: str) -> Value:
        """A helper function's value: its body translated with its parameters bound to the
        call's arguments (each translated once) and its captures read from env under
        "<prefix><callee>." (capture.py put them there; they become kernel parameters)."""
        name = ast.unparse(node.func)
        func = node.func
        if not (isinstance(func, ast.Name) or (isinstance(func, ast.Attribute)
                                               and isinstance(func.value, ast.Name))):
            fail(at, f"calling {name} ({_describe(fn)}) is not supported: call a helper function "
                     f"by its name (tax(v)) or through its module (pricing.tax(v))", "call")
        # where capture.py put its captures: "<prefix>tax." or "<prefix>pricing.tax."
        key = func.id if isinstance(func, ast.Name) else f"{func.value.id}{HELPER_SEP}{func.attr}"
        code = fn.__code__
        if any(c is code for c in self.outer):
            fail(at, f"{name}() calls {fn.__qualname__} recursively; helpers are inlined into "
                     f"the kernel, so recursion is not supported: compute the value without "
                     f"it", "recursion")
        try:
            src = helper_source(fn)
        except UnsupportedLambdaError as e:
            raise _called_from(e, name, at) from None
        if len(node.args) != len(src.params):
            fail(at, f"{name}() takes {len(src.params)} argument(s) {src.params} but this call "
                     f"passes {len(node.args)}", "call")
        args = tuple(self.value(a) for a in node.args)
        inner = _Translator(src, args, self.env, self.new_param,
                            self.prefix + key + HELPER_SEP, self.outer + (code,))
        try:
            return inner.run()
        except UnsupportedLambdaError as e:
            raise _called_from(e, name, at) from None

    def _names(self, node: ast.AST, fn) -> bool:
        """Whether the callee `node` (a name or a module attribute) is `fn`, looked up
        without failing."""
        if isinstance(node, ast.Name):
            return node.id not in self.locals and self._lookup_quiet(node.id) is fn
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id not in self.locals:
            base = self._lookup_quiet(node.value.id)
            return isinstance(base, types.ModuleType) and getattr(base, node.attr, None) is fn
        return False

    def _callee(self, node: ast.AST):
        if isinstance(node, ast.Name):
            if node.id in self.locals:
                fail(self.at(node), f"calling the parameter {node.id!r} is not supported",
                     "call")
            return self._lookup(node.id, node)
        if isinstance(node, ast.Attribute) and not (isinstance(node.value, ast.Name)
                                                    and node.value.id in self.locals):
            base = self._callee(node.value)
            if isinstance(base, types.ModuleType):
                if not hasattr(base, node.attr):
                    fail(self.at(node), f"module {base.__name__} has no attribute "
                                        f"{node.attr!r}", "call")
                return getattr(base, node.attr)
        fail(self.at(node), f"method calls and calls of computed functions "
                            f"({ast.unparse(node)}) are not supported; supported calls: "
                            f"{SUPPORTED}", "call")


def _called_from(e: UnsupportedLambdaError, name: str, at: str) -> UnsupportedLambdaError:
    """e (located in a helper's own file) with the call site that inlined the helper."""
    text = str(e)[len(f"{e.where}: "):] if e.where else str(e)
    return UnsupportedLambdaError(f"{text} (in helper {name}() called at {at})", e.where,
                                  e.construct)


def _kind(v: Value) -> str:
    return "tuple" if isinstance(v, TupleVal) else "record" if isinstance(v, RecordVal) else "scalar"


def _describe(obj) -> str:
    if isinstance(obj, types.ModuleType):
        return f"the module {obj.__name__}"
    if callable(obj):
        return f"the function/callable {getattr(obj, '__qualname__', type(obj).__name__)}"
    return f"a {type(obj).__module__}.{type(obj).__qualname__}".replace("builtins.", "")
