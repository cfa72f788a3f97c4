"""Warm-path entries: what lets a repeated terminal call skip parsing, lowering and compiling.

Two levels, both holding the same (Lowered, Prepared) pair the engine's memo holds:

* `FastEntry`, in a process-wide dict keyed by the chain's code objects, dtypes and terminal
  (engine.run builds that key). Lambdas are new objects on every call, their code objects are
  not; only lambdas that capture values have their captures read, to check their types.
* `Hot`, kept on one Query object (`Query._hot`) for the terminal it ran last. A query built
  once and run in a loop is then checked without building or hashing a key: the same terminal
  request object, the same column objects with the same dtypes, the same code objects for the
  per-call lambdas. This is the budget that decides small-n speed against NumPy (about a
  microsecond), so it is written for speed: attributes read once, no per-call allocation
  beyond the result.
"""
from __future__ import annotations

import numpy as np

from .frontend import capture_key


def slot_sig(src, env) -> tuple:
    """What a lambda's IR depends on: its code and the types (not values) of its captures."""
    if src.code is None:
        return (src,)
    return (src.code,) + capture_key(env)


class FastEntry:
    """A warm entry found by signature: the compiled pass plus what its captures looked like."""
    __slots__ = ("hit", "capture_slots", "capture_sig", "captured")

    def __init__(self, hit, infos):
        self.hit = hit
        self.capture_slots = tuple(i for i, (src, _) in enumerate(infos) if src.captures)
        self.capture_sig = tuple(slot_sig(*infos[i]) for i in self.capture_slots)
        # The captured objects themselves: when every one is still the very same object
        # (a module like np, a function, an unchanged value), the types are too.
        self.captured = tuple(tuple(infos[i][1].values()) for i in self.capture_slots)

    def still_matches(self, infos) -> bool:
        for k, i in enumerate(self.capture_slots):
            now = tuple(infos[i][1].values())
            if any(a is not b for a, b in zip(now, self.captured[k])) and \
                    slot_sig(*infos[i]) != self.capture_sig[k]:
                return False
        return True


class Hot:
    """The last terminal a Query ran, ready to run again (see the module docstring)."""
    __slots__ = ("term", "name", "pinned", "items", "dtypes", "fn_codes", "fast", "lowered",
                 "prepared")

    def __init__(self, term, name: str, pinned: bool, items: tuple, fn_codes: tuple,
                 fast: FastEntry):
        self.term = term
        self.name = name              # the backend that ran
        self.pinned = pinned          # .on(name): no auto choice to repeat
        self.items = items            # the plain numpy columns (empty for a range)
        self.dtypes = tuple([c.dtype for c in items])
        self.fn_codes = fn_codes      # code objects of the terminal's per-call lambdas
        self.fast = fast
        self.lowered, self.prepared = fast.hit

    def length(self, fns, source) -> int:
        """n if this entry still applies to a call with terminal lambdas `fns`, else -1.
        A column's dtype or number of dimensions can change in place (a.dtype = ...,
        a.shape = ...), so both are checked; the columns themselves are fixed by the Query."""
        items = self.items
        if items:
            n = len(items[0])
            for c, dt in zip(items, self.dtypes):
                if c.dtype is not dt or c.ndim != 1 or len(c) != n:
                    return -1
        else:
            n = source.length(())
        codes = self.fn_codes
        if codes:
            if len(fns) != len(codes):
                return -1
            for f, code in zip(fns, codes):
                if getattr(f, "__code__", f) is not code:
                    return -1
        return n


def plain_items(source, cols: tuple) -> tuple | None:
    """The columns a Hot entry may hold for `source`: its own items when they are the 1-D
    numpy arrays the kernel reads (not a DataFrame's converted columns, not a copy made to
    fix byte order), () for a range; None when every call must read the columns anew."""
    if source.kind == "range":
        return ()
    items = source._items
    if len(items) != len(cols) or any(a is not b or type(a) is not np.ndarray
                                      for a, b in zip(items, cols)):
        return None
    return items
