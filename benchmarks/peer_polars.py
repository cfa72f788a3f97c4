"""polars versions of W1-W6 as a polars user writes them: expressions on a DataFrame.
The frame is built in setup (once, outside the timing), as a polars user's data already is."""
from __future__ import annotations

import polars as pl

v = pl.col("v")


def _frame(d):
    return pl.DataFrame(d)


def w1(d):
    df = _frame({"v": d["x"]})
    y = v * 2
    return lambda: df.select((y.filter(y > 1000) + 100).sum()).item()


def w2(d):
    df = _frame({"v": d["x"]})
    return lambda: df.select(v.filter(v % 3 < 1) * 2 + 1).to_series().to_numpy()


def w3(d):
    df = _frame({"v": d["x"]})
    return lambda: df.select(((v > 500) & (v < 1500)).sum()).item()


def w4(d):
    df = _frame(d)
    return lambda: df.select((pl.col("a") * pl.col("b") + 1).sum()).item()


def w5(d):
    df = _frame({"v": d["x"]})
    y = v.filter(v > 10).sqrt() + 1

    def run():
        row = df.select(y.mean().alias("mean"), y.max().alias("peak")).row(0)
        return row
    return run


def w6(d):
    df = _frame(d)
    keep = (pl.col("cat") == 3) & (pl.col("qty") > 2)
    return lambda: df.filter(keep).select((pl.col("price") * pl.col("qty")).sum()).item()


SETUPS = {"W1": w1, "W2": w2, "W3": w3, "W4": w4, "W5": w5, "W6": w6}
