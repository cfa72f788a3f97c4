"""What a Dask chunk task carries of the user's functions: their SOURCE TEXT and captured
values, never their code (DESIGN.md section 5c: "nothing pickled but the plan/source").

A Python lambda pickles as a code object that refers to its file and module: a worker that
cannot import the user's module (a script, a notebook cell, a file since deleted) could not
rebuild it. The frontend never runs a lambda anyway; it reads its text. So the client turns
every function of the chain and of the terminal into a `Shipped`:

    text   "lambda v: v * k" (the parameters and the body the frontend parsed, unparsed
           again, so a `def f(v): return ...` ships as the same lambda)
    env    {"k": 3.0}: the captured values as the client saw them (closure cells, globals,
           builtins; modules such as np travel by reference, their names)

On the worker `slot_info` (plan/plan.py) asks a Shipped (frontend/shipped.py) for its
LambdaSource, parsed once per process per text (so every chunk of the query finds the same
plan in the worker's memo), and for `env` as the captured values. The kernel text is the same as the client's (same body,
same capture types): the worker loads it from the disk cache the client's meta run filled.

Text lambdas, parsed text lambdas and known callables (np.sqrt, abs) already are text or a
name: they travel as they are.
"""
from __future__ import annotations

import ast
import types

from ..frontend.capture import capture_values, lambda_source
from ..frontend.shipped import Shipped
from ..graph.graph import JoinArg, ScanArg, Terminal
from ..graph import terminals as T

def ship(fn):
    """One chain operator's argument or terminal function, ready to travel."""
    if type(fn) is types.FunctionType:
        src = lambda_source(fn)
        env = capture_values(fn, src)
        text = f"lambda {', '.join(src.params)}: {ast.unparse(src.body)}"
        return Shipped(text, env)
    if type(fn) is ScanArg:
        return ScanArg(ship(fn.fn), fn.seed, fn.associative)
    if type(fn) is JoinArg:
        return JoinArg(fn.other, ship(fn.key))
    return fn                       # None, Count, text, LambdaSource, a known callable


def code_of(fn, code):
    """The `_codes` entry of a shipped operator (what a text lambda uses: its LambdaSource)."""
    if type(fn) is Shipped:
        return fn.source
    if type(fn) is ScanArg and type(fn.fn) is Shipped:
        return (fn.fn.source,) + tuple(code[1:])
    return code


def ship_chain(ops: tuple, codes: tuple) -> tuple:
    """(ops, codes) of a chain with every function shipped."""
    shipped = tuple(ship(f) for f in ops)
    return shipped, tuple(code_of(f, c) for f, c in zip(shipped, codes))


def ship_terminal(term):
    """The terminal with its specs' functions shipped (None stays None)."""
    if term is None:
        return None
    specs = tuple((key, T.AggSpec(s.kind, ship(s.fn), s.default, s.seed)) for key, s in term.specs)
    return Terminal(term.name, specs, standalone=term.standalone)


__all__ = ["Shipped", "ship", "ship_chain", "ship_terminal"]
