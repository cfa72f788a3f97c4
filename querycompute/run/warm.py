"""Warm-path entries: what lets a repeated terminal call skip parsing, lowering and compiling.

Two levels, both leading to the Compiled entry (compiled.py) the engine's memo holds:

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

from ..frontend.capture import capture_key


def slot_sig(src, env) -> tuple:
    """What a lambda's IR depends on: its code and the types (not values) of its captures."""
    if src.code is None:
        return (src,)
    return (src.code,) + capture_key(env)


class FastEntry:
    """A warm entry found by signature: the Compiled entry plus what its captures looked like."""
    __slots__ = ("compiled", "capture_slots", "capture_sig", "captured", "finish_term", "finish",
                 "used")

    def __init__(self, compiled, infos, term, finish):
        self.compiled = compiled
        # raw results -> the user's value, for the request `term` only: requests with one
        # signature can differ in defaults and agg() result names
        self.finish_term, self.finish = term, finish
        self.capture_slots = tuple(i for i, (src, _) in enumerate(infos) if src.captures)
        self.capture_sig = tuple(slot_sig(*infos[i]) for i in self.capture_slots)
        # The captured objects themselves: when every one is still the very same object
        # (a module like np, a function, an unchanged value), the types are too.
        self.captured = tuple(tuple(infos[i][1].values()) for i in self.capture_slots)
        self.used = False             # memo.Memo's second-chance mark

    def still_matches(self, infos) -> bool:
        for k, i in enumerate(self.capture_slots):
            now = tuple(infos[i][1].values())
            if any(a is not b for a, b in zip(now, self.captured[k])) and \
                    slot_sig(*infos[i]) != self.capture_sig[k]:
                return False
        return True


class Hot:
    """The last terminal a Query ran, ready to run again (see the module docstring)."""
    __slots__ = ("term", "name", "items", "fast", "finish", "length", "same_fns")

    def __init__(self, term, name: str, items: tuple, fn_codes: tuple,
                 fast: FastEntry, finish, range_length):
        self.term = term
        self.name = name              # the backend that ran
        self.items = items            # the plain numpy columns (empty for a range)
        self.fast = fast              # .compiled launches (its tier may change between calls)
        self.finish = finish          # raw results -> the user's value
        self.length = _length_check(items, range_length)     # () -> n, or -1
        self.same_fns = _fns_check(fn_codes)                   # (fns) -> bool


# The checks are closures over exactly what they compare, unrolled for the common shapes:
# on this path every attribute load and loop iteration shows in small-n timings.
def _length_check(items: tuple, range_length):
    """() -> n when every column still has its dtype and one dimension (both can change in
    place: a.dtype = ..., a.shape = ...), all of one length; else -1. The columns themselves
    are fixed by the Query."""
    dtypes = tuple([c.dtype for c in items])
    if not items:
        return range_length
    if len(items) == 1:
        (c,), (dt,) = items, dtypes

        def one() -> int:
            return len(c) if c.dtype is dt and c.ndim == 1 else -1
        return one
    if len(items) == 2:
        (c, d), (dc, dd) = items, dtypes

        def two() -> int:
            if c.dtype is dc and d.dtype is dd and c.ndim == 1 and d.ndim == 1 and len(c) == len(d):
                return len(c)
            return -1
        return two

    def many() -> int:
        n = len(items[0])
        for c, dt in zip(items, dtypes):
            if c.dtype is not dt or c.ndim != 1 or len(c) != n:
                return -1
        return n
    return many


def _fns_check(codes: tuple):
    """(fns) -> whether this call's terminal lambdas have the code objects the entry has."""
    if not codes:
        return _no_fns
    if len(codes) == 1:
        (code,) = codes
        return lambda fns: len(fns) == 1 and getattr(fns[0], "__code__", fns[0]) is code
    return lambda fns: len(fns) == len(codes) and all(
        getattr(f, "__code__", f) is c for f, c in zip(fns, codes))


def _no_fns(fns) -> bool:
    return not fns


def plain_items(source, cols: tuple) -> tuple | None:
    """The columns a Hot entry may hold for `source`: its own items when `columns()` handed
    them over as they are (1-D native numpy arrays: not a DataFrame's converted columns, not
    a copy made to fix byte order), () for a range; None when every call must read the
    columns anew."""
    if source.kind == "range":
        return ()
    return cols if cols is source._items else None
