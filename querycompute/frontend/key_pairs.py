"""One function of an element from two: `(key(e), f(e))`, the distinct key that a per-group
distinct count needs (`group_by(key).agg(n=qc.count_distinct(f))` is distinct on the pair,
then a count per key: api/count_distinct.py).

Python functions are composed by calling them as helpers (capture.py inlines them: their
captured values stay kernel parameters, read on every call, and the pair's code object is
one per arity, so composing never recompiles). Lambdas given as text (or a known callable
such as np.sqrt) are composed as text: both bodies in one parsed lambda. A Python function
with a text lambda can't be composed (the text has no function to call, and a Python
function has no text to paste): that is a QueryError saying to give both the same way.
`f` None means the element itself.
"""
from __future__ import annotations

import ast
import types

from ..errors import QueryError
from .capture import LambdaSource
from .chain_text import parse_lambda
from .known_callables import function_source


# One composing lambda per arity (a key of k parameters takes a k-tuple's items): their code
# objects are fixed, so the signature of a composed pair is that of its two functions.
def _pair1(key, f):
    return lambda v: (key(v), f(v))


def _pair2(key, f):
    return lambda a, b: (key(a, b), f(a, b))


def _pair3(key, f):
    return lambda a, b, c: (key(a, b, c), f(a, b, c))


def _own1(key):
    return lambda v: (key(v), v)


def _own2(key):
    return lambda a, b: (key(a, b), a, b)


def _own3(key):
    return lambda a, b, c: (key(a, b, c), a, b, c)


_PAIRS = {1: _pair1, 2: _pair2, 3: _pair3}
_OWN = {1: _own1, 2: _own2, 3: _own3}


def key_and_value(key, f, what: str = "count_distinct"):
    """The function e -> (key(e), f(e)) (f None: (key(e), e)), as a Python function when
    both are Python functions, else as a parsed text lambda."""
    if type(key) is types.FunctionType and (f is None or type(f) is types.FunctionType):
        k = _arity(key)
        if f is not None and _arity(f) != k:
            raise QueryError(f"{what}: the group key takes {k} parameter(s) and the function "
                             f"{_arity(f)}; give both the same parameters (one per item of "
                             f"the element, or one for the whole element)")
        table = _OWN if f is None else _PAIRS
        if k not in table:
            raise QueryError(f"{what}: a group key of {k} parameters is not supported here; "
                             f"take the element as one parameter (lambda r: ...)")
        return table[k](key) if f is None else table[k](key, f)
    if type(key) is types.FunctionType or type(f) is types.FunctionType:
        raise QueryError(f"{what}: the group key and the function must both be Python "
                         f"functions or both lambdas as text (one can't be pasted into the "
                         f"other); got {_kind(key)} and {_kind(f)}")
    ks = function_source(key)
    fs = None if f is None else function_source(f)
    if fs is not None and len(fs.params) != len(ks.params):
        raise QueryError(f"{what}: the group key ({ks.text}) and the function ({fs.text}) "
                         f"take different numbers of parameters; give both the same")
    names = tuple(f"_qc_p{i}" for i in range(len(ks.params)))
    body = [_renamed(ks, names)]
    body.append(_renamed(fs, names) if fs is not None else ", ".join(names))
    return parse_lambda(f"lambda {', '.join(names)}: ({body[0]}, {body[1]})")


def _renamed(src: LambdaSource, names: tuple) -> str:
    """The text of src's body with its parameters renamed to `names`."""
    rename = dict(zip(src.params, names))

    class _Rename(ast.NodeTransformer):
        def visit_Name(self, node):
            if node.id in rename:
                return ast.copy_location(ast.Name(rename[node.id], node.ctx), node)
            return node
    return f"({ast.unparse(_Rename().visit(_copy(src.body)))})"


def _copy(node: ast.AST) -> ast.AST:
    return ast.parse(ast.unparse(node), mode="eval").body


def _arity(fn) -> int:
    code = fn.__code__
    return code.co_argcount


def _kind(fn) -> str:
    if fn is None:
        return "the element itself"
    return "a Python function" if type(fn) is types.FunctionType else "a lambda as text"
