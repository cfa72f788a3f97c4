"""Parse the CLI's query text ("select(lambda v: v*2).where(lambda v: v > 1000).sum()")
into a list of method calls, WITHOUT executing any of it.

Lambdas become LambdaSources (filename "<query>", no code object) read straight from the
parsed text; constants stay Python constants; `qc.sum` / `qc.max(lambda v: ...)` become
("agg_spec", name, LambdaSource | None). A text has no variables, so the only free names a
lambda may use are np / numpy / math and builtins.
"""
from __future__ import annotations

import ast
import builtins
from functools import lru_cache
from typing import NamedTuple

from ..errors import UnsupportedLambdaError
from .capture import TEXT_MODULES, LambdaSource, free_names, positional_params, source_segment

FILENAME = "<query>"
TEXT_FILENAME = "<text>"        # a lambda given as text to an operator: select("lambda v: ...")
AGG_NAMES = ("sum", "min", "max", "mean", "count", "any", "all", "first")


class ChainOp(NamedTuple):
    method: str
    args: tuple
    kwargs: dict


def parse_chain(text: str) -> list[ChainOp]:
    """The chain's method calls in order. An optional leading `query(...)`, `qc.query(...)`
    or `q.` is ignored."""
    stripped = text.strip().lstrip(".")
    try:
        tree = ast.parse(stripped, FILENAME, mode="eval")
    except SyntaxError as e:
        raise UnsupportedLambdaError(f"the query text is not a valid expression: {e.msg}",
                                     f"{FILENAME}:{e.lineno}:{e.offset}", "syntax") from None
    ops = []
    node = tree.body
    while not _is_qc_query(node):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            ops.append(_op(node.func.attr, node, stripped))
            node = node.func.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id != "query":
                ops.append(_op(node.func.id, node, stripped))
            break
        elif isinstance(node, ast.Name):
            break
        else:
            raise UnsupportedLambdaError(
                "expected a chain of method calls such as "
                "select(lambda v: v * 2).where(lambda v: v > 1000).sum()",
                _where(node), "syntax")
    return ops[::-1]


def _is_qc_query(node) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "query" and isinstance(node.func.value, ast.Name))


def _where(node, filename: str = FILENAME) -> str:
    return f"{filename}:{getattr(node, 'lineno', 1)}:{getattr(node, 'col_offset', 0) + 1}"


def _op(method: str, call: ast.Call, text: str) -> ChainOp:
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        raise UnsupportedLambdaError("* and ** unpacking are not supported in query text",
                                     _where(call), "unpacking")
    return ChainOp(method, tuple(_arg(a, text) for a in call.args),
                   {k.arg: _arg(k.value, text) for k in call.keywords})


def _arg(node: ast.expr, text: str):
    if isinstance(node, ast.Lambda):
        return _lambda(node, text)
    spec = _agg_spec(node, text)
    if spec is not None:
        return spec
    known = _known_function(node)
    if known is not None:              # select(np.sqrt), sum(np.square), select(abs)
        from .known_callables import function_source
        return function_source(known)
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise UnsupportedLambdaError(
            f"{ast.unparse(node)} is not a lambda, an aggregate (qc.sum, qc.max(lambda v: ...)) "
            f"or a constant; query text is never executed", _where(node), "argument") from None


def _known_function(node: ast.expr):
    """The function a name in query text refers to: np.* / numpy.* / math.* or a builtin
    (looked up by name, nothing evaluated); known_callables decides whether it is supported."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
            and node.value.id in TEXT_MODULES:
        return getattr(TEXT_MODULES[node.value.id], node.attr, None)
    if isinstance(node, ast.Name) and node.id not in ("True", "False", "None"):
        return getattr(builtins, node.id, None)
    return None


def _agg_spec(node: ast.expr, text: str):
    call = node if isinstance(node, ast.Call) else None
    ref = call.func if call else node
    if not (isinstance(ref, ast.Attribute) and isinstance(ref.value, ast.Name)
            and ref.value.id in ("qc", "querycompute")):
        return None
    if ref.attr == "aggregate" and call is not None:    # qc.aggregate(lambda a, v: ..., seed)
        kw = [k for k in call.keywords if k.arg == "associative"]
        if (len(kw) != len(call.keywords) or len(call.args) != 2
                or not isinstance(call.args[0], ast.Lambda)):
            raise UnsupportedLambdaError("qc.aggregate(...) takes a lambda, a seed and optionally "
                                         "associative=True, e.g. qc.aggregate(lambda a, v: a + v, 0)",
                                         _where(call), "aggregate")
        associative = _arg(kw[0].value, text) if kw else False
        return ("agg_spec", "fold", (_lambda(call.args[0], text), _arg(call.args[1], text), associative))
    if ref.attr not in AGG_NAMES:
        raise UnsupportedLambdaError(f"qc.{ref.attr} is not an aggregate; use one of "
                                     f"{', '.join('qc.' + n for n in AGG_NAMES)}, "
                                     f"qc.aggregate(func, seed)", _where(ref),
                                     "aggregate")
    if call is None:
        return ("agg_spec", ref.attr, None)
    if call.keywords or len(call.args) != 1 or not isinstance(call.args[0], ast.Lambda):
        raise UnsupportedLambdaError(f"qc.{ref.attr}(...) takes one lambda, e.g. "
                                     f"qc.{ref.attr}(lambda v: v * v)", _where(call), "aggregate")
    return ("agg_spec", ref.attr, _lambda(call.args[0], text))


def _lambda(node: ast.Lambda, text: str, filename: str = FILENAME) -> LambdaSource:
    params = positional_params(node.args, _where(node, filename))
    captures = free_names(params, node.body)
    for name in captures:
        if name not in TEXT_MODULES and not hasattr(builtins, name):
            use = next(n for n in ast.walk(node.body) if isinstance(n, ast.Name) and n.id == name)
            raise UnsupportedLambdaError(
                f"name {name!r} has no value: a lambda given as text has no variables (it is "
                f"parsed, never executed); use a constant instead (np, numpy, math and builtins "
                f"are available)", _where(use, filename), "name")
    return LambdaSource(params=params, body=node.body, filename=filename, captures=captures,
                        code=None, text=source_segment(text, node))


@lru_cache(maxsize=4096)
def parse_lambda(text: str) -> LambdaSource:
    """A lambda given as text (`select("lambda v: v * 2")`): parsed, never executed. One
    LambdaSource per distinct text (cached), so a text stands for its own signature."""
    return text_lambda(text, TEXT_FILENAME)


def text_lambda(text: str, filename: str) -> LambdaSource:
    """parse_lambda with error locations in `filename` ("<text>", or "<np.sqrt>" for the
    lambda a known callable stands for: known_callables.py)."""
    try:
        tree = ast.parse(text.strip(), filename, mode="eval")
    except SyntaxError as exc:
        raise UnsupportedLambdaError(f"not a lambda: {exc.msg}", f"{filename}:{exc.lineno}:{exc.offset}",
                                     "syntax") from None
    if not isinstance(tree.body, ast.Lambda):
        raise UnsupportedLambdaError("a function given as text must be one lambda, e.g. "
                                     "\"lambda v: v * 2\"", _where(tree.body, filename), "text")
    return _lambda(tree.body, text.strip(), filename)
