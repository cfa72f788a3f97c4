"""A user function as text plus its captured values: what travels to another process in place
of a function's code (dask/ship.py makes them; DESIGN.md section 5c: "nothing pickled but the
plan/source"). `source` parses the text once per process, so every chunk of a query finds the
same plan in a worker's memo.
"""
from __future__ import annotations

import ast

from .capture import LambdaSource, free_names

SHIPPED_FILENAME = "<shipped>"
_PARSED: dict[str, LambdaSource] = {}     # text -> LambdaSource, one per worker process


class Shipped:
    """A user function as text plus its captured values (see the module docstring)."""
    __slots__ = ("text", "env")

    def __init__(self, text: str, env: dict):
        self.text, self.env = text, env

    def __getstate__(self):
        return (self.text, self.env)

    def __setstate__(self, state):
        self.text, self.env = state

    @property
    def source(self) -> LambdaSource:
        src = _PARSED.get(self.text)
        if src is None:
            node = ast.parse(self.text, SHIPPED_FILENAME, mode="eval").body
            params = tuple(a.arg for a in node.args.args)
            src = LambdaSource(params=params, body=node.body, filename=SHIPPED_FILENAME,
                               captures=free_names(params, node.body), code=None, text=self.text)
            _PARSED[self.text] = src
        return src

    def __repr__(self) -> str:
        return f"Shipped({self.text!r})"
