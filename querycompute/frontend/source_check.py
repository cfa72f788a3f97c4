"""Does a function's source text still compile to the code object Python runs?

capture.py re-reads the defining file to get a lambda's AST, but Python runs the code compiled
at import. If the file was edited since (or linecache holds a different version), the kernel
would compute the new text while plain Python computes the old one. So the pinned AST node is
compiled again and compared with the function's code object: bytecode, constants (recursively
through nested code objects), names, locals, free and cell variables, argument counts.
Positions, flags and line tables are not compared: they move with harmless edits elsewhere in
the file and with tools that rewrite other statements (pytest's assert rewriting).

The node is compiled inside a synthetic scope that reproduces what shapes its bytecode: an
enclosing `def` that assigns the code's free variables (so they compile to cell loads, as in
the original closure), when the node sits in a class a class of the same name (so private
`__names` are mangled the same way), and the file's module-level imports (CPython compiles
`np.sqrt(v)` differently when `np` is a name the module imported). Anything that can't be
reproduced reads as "unknown", never as a mismatch: only a positive difference is reported.
"""
from __future__ import annotations

import ast
import copy
import types
from typing import Optional

_OUTER = "__querycompute_source_check__"
_SCOPE_TEMPLATE = ast.parse(f"def {_OUTER}():\n    pass\n").body[0]
_CLASS_TEMPLATE = ast.parse("class C:\n    pass\n").body[0]


def mismatch(node: ast.AST, code: types.CodeType, cls: Optional[str],
             imported: frozenset[str] = frozenset()) -> Optional[str]:
    """None when `node` (an ast.Lambda or a def) compiles to `code`; else what differs
    ("constants", "bytecode", ...). `cls`: the innermost enclosing class's name;
    `imported`: the names the file's module scope binds by import (module_imports)."""
    # With the whole file's imports, then with none: IPython compiles each top-level statement
    # of a cell on its own, so there a name imported by another statement does not count.
    first = None
    for names in ((imported, frozenset()) if imported else (imported,)):
        fresh = _compile(node, code, cls, names)
        if fresh is None:
            return None
        differs = _difference(code, fresh)
        if differs is None:
            return None
        first = first or differs
    return first


def module_imports(tree: ast.Module) -> frozenset[str]:
    """Names bound by import statements in the module scope (not inside defs or classes)."""
    names, stack = set(), list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names if a.name != "*")
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                                   ast.Lambda, ast.expr)):
            stack.extend(ast.iter_child_nodes(node))    # if / try / with / for / match bodies
    return frozenset(names)


def _compile(node, code: types.CodeType, cls: Optional[str],
             imported: frozenset[str]) -> Optional[types.CodeType]:
    # compile() reads the AST without changing it and fix_missing_locations only fills the
    # new wrapper nodes, so the cached node is used as it is (a def: a shallow copy).
    target = node if isinstance(node, ast.Lambda) else copy.copy(node)
    body: list[ast.stmt] = [ast.Assign(targets=[ast.Name(name, ast.Store())],
                                       value=ast.Constant(None))
                            for name in code.co_freevars]
    if isinstance(target, ast.Lambda):
        body.append(ast.Return(target))
    else:                    # a def: decorators are evaluated outside its code object
        target.decorator_list = []
        if target.name not in code.co_freevars:    # its own name, read inside, stays global
            body.insert(0, ast.Global(names=[target.name]))
        body += [target, ast.Return(ast.Constant(None))]
    scope = copy.copy(_SCOPE_TEMPLATE)
    scope.body = body
    top = scope
    if cls is not None:
        top = copy.copy(_CLASS_TEMPLATE)
        top.name, top.body = cls, [scope]
    imports = [ast.Import(names=[ast.alias(name=n)]) for n in sorted(imported)]
    module = ast.fix_missing_locations(ast.Module(body=[*imports, top], type_ignores=[]))
    try:
        compiled = compile(module, code.co_filename, "exec", dont_inherit=True)
    except (SyntaxError, ValueError, TypeError):    # a context we don't reproduce: unknown
        return None
    outer = _child(compiled, _OUTER) if cls is None else _child(_child(compiled, cls), _OUTER)
    return _child(outer, code.co_name) if outer is not None else None


def _child(code: Optional[types.CodeType], name: str) -> Optional[types.CodeType]:
    if code is None:
        return None
    return next((c for c in code.co_consts
                 if isinstance(c, types.CodeType) and c.co_name == name), None)


_FIELDS = (("co_argcount", "parameters"), ("co_posonlyargcount", "parameters"),
           ("co_kwonlyargcount", "parameters"), ("co_varnames", "local names"),
           ("co_freevars", "captured names"), ("co_cellvars", "local names"),
           ("co_names", "global names"), ("co_code", "bytecode"))


def _difference(old: types.CodeType, new: types.CodeType) -> Optional[str]:
    for field, what in _FIELDS:
        if getattr(old, field) != getattr(new, field):
            return what
    if len(old.co_consts) != len(new.co_consts):
        return "constants"
    for a, b in zip(old.co_consts, new.co_consts):
        if isinstance(a, types.CodeType) and isinstance(b, types.CodeType):
            inner = _difference(a, b)
            if inner is not None:
                return inner
        elif _const_key(a) != _const_key(b):
            return "constants"
    return None


def _const_key(value):
    """Equality that tells 1 from 1.0 from True, and 0.0 from -0.0 (== does not)."""
    if isinstance(value, (float, complex)):
        return type(value), repr(value)
    if isinstance(value, (tuple, frozenset)):
        items = [_const_key(v) for v in value]
        return type(value), tuple(sorted(items, key=repr) if isinstance(value, frozenset) else items)
    return type(value), value
