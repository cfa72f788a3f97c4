"""numexpr versions of W1-W6, written the way a numexpr user writes them: one evaluate() per
expression, filters as where(mask, value, identity) because numexpr cannot compact.
Arrays are passed by name in local_dict: evaluate() otherwise looks them up in the calling
frame, where a closure's variables are invisible unless its own code mentions them.
numexpr keeps float32 arithmetic (and float32 * int32) in float32 and sums sequentially; the
checker in workloads.py decides whether that is still the right answer."""
from __future__ import annotations

import numexpr as ne
import numpy as np


def w1(d):
    x = d["x"]
    return lambda: ne.evaluate("sum(where(x * 2 > 1000, x * 2 + 100, 0))", local_dict={"x": x})[()]


def w2(d):
    x = d["x"]

    def run():
        kept = x[ne.evaluate("x % 3 < 1", local_dict={"x": x})]
        return ne.evaluate("kept * 2 + 1", local_dict={"kept": kept})
    return run


def w3(d):
    x = d["x"]
    return lambda: int(ne.evaluate("sum(where((x > 500) & (x < 1500), 1, 0))", local_dict={"x": x}))


def w4(d):
    a, b = d["a"], d["b"]
    return lambda: ne.evaluate("sum(a * b + 1)", local_dict={"a": a, "b": b})[()]


def w5(d):
    x = d["x"]
    lowest = np.float32(-np.inf)

    def run():
        names = {"x": x, "lowest": lowest, "kept": ne.evaluate("x > 10", local_dict={"x": x})}
        total = ne.evaluate("sum(where(kept, sqrt(x) + 1, 0))", local_dict=names)[()]
        peak = ne.evaluate("max(where(kept, sqrt(x) + 1, lowest))", local_dict=names)[()]
        return (total / np.count_nonzero(names["kept"]), peak)
    return run


def w6(d):
    price, qty, cat = d["price"], d["qty"], d["cat"]
    return lambda: ne.evaluate("sum(where((cat == 3) & (qty > 2), price * qty, 0))",
                                    local_dict={"price": price, "qty": qty, "cat": cat})[()]


SETUPS = {"W1": w1, "W2": w2, "W3": w3, "W4": w4, "W5": w5, "W6": w6}
