"""TPC-H Q1, Q6 and Q12 written for each engine benchmarks/tpch.py compares.

Every implementation is a *setup* function: setup(tables[, backend]) -> a callable with no
arguments that computes the query (what is timed). Setup does what a user does once: build
the polars frame, register the Arrow tables with DuckDB, define the querycompute query.
Every callable returns the result in one shape, so results compare directly:
- Q6: a float (the revenue),
- Q1 and Q12: a dict of equal-length NumPy arrays, one row per group, sorted by the group key;
  key columns hold the uint8 codes of tpch_data (sorted code tables: code order = string order).

The queries are the TPC-H texts with their default substitution parameters, on the columns of
tpch_data (decimals as float64, dates as int32 days, strings as codes): DuckDB runs that SQL
with the codes and days as literals. Q6's `discount between 0.06 - 0.01 and 0.06 + 0.01`
is written with the literals 0.05 and 0.07 everywhere, because in float64 0.06 + 0.01 is
0.06999999999999999 and would drop every row whose discount is 0.07.

The querycompute lambdas live in this file because querycompute reads them from source.
"""
from __future__ import annotations

import numpy as np

import querycompute as qc
from tpch_data import day

Q1_SHIPDATE = day("1998-12-01") - 90            # l_shipdate <= date '1998-12-01' - 90 days
Q6_FROM, Q6_TO = day("1994-01-01"), day("1995-01-01")
Q12_FROM, Q12_TO = day("1994-01-01"), day("1995-01-01")
Q12_MODES = ("MAIL", "SHIP")
Q12_HIGH = ("1-URGENT", "2-HIGH")

Q1_COLUMNS = ("l_returnflag", "l_linestatus", "sum_qty", "sum_base_price", "sum_disc_price",
              "sum_charge", "avg_qty", "avg_price", "avg_disc", "count_order")
Q12_COLUMNS = ("l_shipmode", "high_line_count", "low_line_count")
# Columns each query reads (the bytes behind a GB/s figure)
READS = {"Q6": ("l_shipdate", "l_discount", "l_quantity", "l_extendedprice"),
         "Q1": ("l_shipdate", "l_returnflag", "l_linestatus", "l_quantity", "l_extendedprice",
                "l_discount", "l_tax"),
         "Q12": ("l_orderkey", "l_shipmode", "l_shipdate", "l_commitdate", "l_receiptdate")}


class NotBuilt(Exception):
    """querycompute lacks an operator this query needs (reported as n/a, never timed)."""


def _columns(names, arrays) -> dict:
    return {n: np.asarray(a) for n, a in zip(names, arrays)}


# ---- DuckDB: SQL over the registered Arrow tables (zero-copy views of the NumPy columns) ------
def _duckdb(t):
    import duckdb
    con = duckdb.connect()
    con.register("lineitem", t.arrow("lineitem"))
    con.register("orders", t.arrow("orders"))
    return con


def duckdb_q6(t):
    con = _duckdb(t)
    sql = f"""select sum(l_extendedprice * l_discount) from lineitem
              where l_shipdate >= {Q6_FROM} and l_shipdate < {Q6_TO}
                and l_discount between 0.05 and 0.07 and l_quantity < 24"""
    return lambda: float(con.execute(sql).fetchone()[0])


def duckdb_q1(t):
    con = _duckdb(t)
    sql = f"""select l_returnflag, l_linestatus, sum(l_quantity), sum(l_extendedprice),
                 sum(l_extendedprice * (1 - l_discount)),
                 sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)),
                 avg(l_quantity), avg(l_extendedprice), avg(l_discount), count(*)
              from lineitem where l_shipdate <= {Q1_SHIPDATE}
              group by l_returnflag, l_linestatus order by l_returnflag, l_linestatus"""
    return lambda: _columns(Q1_COLUMNS, zip(*con.execute(sql).fetchall()))


def duckdb_q12(t):
    con = _duckdb(t)
    modes = ", ".join(str(t.code("l_shipmode", m)) for m in Q12_MODES)
    high = ", ".join(str(t.code("o_orderpriority", p)) for p in Q12_HIGH)
    sql = f"""select l_shipmode,
                 sum(case when o_orderpriority in ({high}) then 1 else 0 end)::bigint,
                 sum(case when o_orderpriority not in ({high}) then 1 else 0 end)::bigint
              from orders, lineitem
              where o_orderkey = l_orderkey and l_shipmode in ({modes})
                and l_commitdate < l_receiptdate and l_shipdate < l_commitdate
                and l_receiptdate >= {Q12_FROM} and l_receiptdate < {Q12_TO}
              group by l_shipmode order by l_shipmode"""
    return lambda: _columns(Q12_COLUMNS, zip(*con.execute(sql).fetchall()))


# ---- polars: lazy queries on frames over the same Arrow buffers ------------------------------
def _frame(t, table):
    import polars as pl
    return pl.from_arrow(t.arrow(table)).lazy()


def polars_q6(t):
    import polars as pl
    c = pl.col
    q = (_frame(t, "lineitem")
         .filter((c("l_shipdate") >= Q6_FROM) & (c("l_shipdate") < Q6_TO)
                 & c("l_discount").is_between(0.05, 0.07) & (c("l_quantity") < 24))
         .select((c("l_extendedprice") * c("l_discount")).sum()))
    return lambda: float(q.collect().item())


def polars_q1(t):
    import polars as pl
    c = pl.col
    disc_price = c("l_extendedprice") * (1 - c("l_discount"))
    q = (_frame(t, "lineitem").filter(c("l_shipdate") <= Q1_SHIPDATE)
         .group_by("l_returnflag", "l_linestatus")
         .agg(c("l_quantity").sum(), c("l_extendedprice").sum(), disc_price.sum().alias("dp"),
              (disc_price * (1 + c("l_tax"))).sum().alias("ch"), c("l_quantity").mean().alias("aq"),
              c("l_extendedprice").mean().alias("ap"), c("l_discount").mean().alias("ad"),
              pl.len().alias("n"))
         .sort("l_returnflag", "l_linestatus"))
    return lambda: _columns(Q1_COLUMNS, q.collect().get_columns())


def polars_q12(t):
    import polars as pl
    c = pl.col
    modes = [t.code("l_shipmode", m) for m in Q12_MODES]
    high = [t.code("o_orderpriority", p) for p in Q12_HIGH]
    is_high = c("o_orderpriority").is_in(high)
    q = (_frame(t, "lineitem")
         .filter(c("l_shipmode").is_in(modes) & (c("l_commitdate") < c("l_receiptdate"))
                 & (c("l_shipdate") < c("l_commitdate")) & (c("l_receiptdate") >= Q12_FROM)
                 & (c("l_receiptdate") < Q12_TO))
         .join(_frame(t, "orders"), left_on="l_orderkey", right_on="o_orderkey")
         .group_by("l_shipmode")
         .agg(is_high.sum().cast(pl.Int64).alias("hi"), (~is_high).sum().cast(pl.Int64).alias("lo"))
         .sort("l_shipmode"))
    return lambda: _columns(Q12_COLUMNS, q.collect().get_columns())


# ---- NumPy, hand-written and vectorised ------------------------------------------------------
def numpy_q6(t):
    li = t.lineitem
    sd, disc, qty, price = (li[n] for n in READS["Q6"])

    def run():
        m = (sd >= Q6_FROM) & (sd < Q6_TO) & (disc >= 0.05) & (disc <= 0.07) & (qty < 24)
        return float(np.dot(price[m], disc[m]))
    return run


def numpy_q1(t):
    li = t.lineitem
    sd, rf, ls, qty, price, disc, tax = (li[n] for n in READS["Q1"])
    n_ls = len(t.codes["l_linestatus"])
    n_groups = len(t.codes["l_returnflag"]) * n_ls

    def run():
        m = sd <= Q1_SHIPDATE
        g = rf[m].astype(np.intp) * n_ls + ls[m]            # one group id per (flag, status)
        q, p, d = qty[m], price[m], disc[m]
        dp = p * (1 - d)
        sums = [np.bincount(g, w, n_groups) for w in (q, p, dp, dp * (1 + tax[m]), d)]
        n = np.bincount(g, minlength=n_groups)
        keep = np.flatnonzero(n)                            # groups sorted by id = by key
        s = [x[keep] for x in sums]
        nk = n[keep]
        return _columns(Q1_COLUMNS, (keep // n_ls, keep % n_ls, s[0], s[1], s[2], s[3],
                                     s[0] / nk, s[1] / nk, s[4] / nk, nk))
    return run


def numpy_q12(t):
    li, od = t.lineitem, t.orders
    key, mode, sd, cd, rd = (li[n] for n in READS["Q12"])
    okey, prio = od["o_orderkey"], od["o_orderpriority"]
    modes = [t.code("l_shipmode", m) for m in Q12_MODES]
    high = np.zeros(256, bool)
    high[[t.code("o_orderpriority", p) for p in Q12_HIGH]] = True
    n_modes = len(t.codes["l_shipmode"])

    def run():
        m = (np.isin(mode, modes) & (cd < rd) & (sd < cd) & (rd >= Q12_FROM) & (rd < Q12_TO))
        # the join: orders' keys are dense small ints, so a lookup table is the hash table
        lut = np.full(int(okey.max()) + 2, 255, np.uint8)
        lut[okey] = prio
        k = np.minimum(key[m], len(lut) - 1)                  # keys past the table: no order
        p = lut[k]
        found = p != 255
        g, h = mode[m][found], high[p[found]]
        n = np.bincount(g, minlength=n_modes)
        hi = np.bincount(g, h, n_modes).astype(np.int64)
        keep = np.flatnonzero(n)
        return _columns(Q12_COLUMNS, (keep, hi[keep], n[keep] - hi[keep]))
    return run


# ---- querycompute, through the public API ----------------------------------------------------
def qc_q6(t, backend):
    lo, hi = Q6_FROM, Q6_TO
    q = (qc.query(t.lineitem).where(lambda r: r.l_shipdate >= lo and r.l_shipdate < hi
                                    and r.l_discount >= 0.05 and r.l_discount <= 0.07
                                    and r.l_quantity < 24).on(backend))
    return lambda: float(q.sum(lambda r: r.l_extendedprice * r.l_discount))


def qc_q1(t, backend):
    if not hasattr(qc.Query, "group_by"):
        raise NotBuilt("needs group_by (not built yet)")
    cutoff = Q1_SHIPDATE
    g = (qc.query(t.lineitem).where(lambda r: r.l_shipdate <= cutoff).on(backend)
         .group_by(lambda r: (r.l_returnflag, r.l_linestatus)))

    def run():
        r = g.agg(sum_qty=qc.sum(lambda r: r.l_quantity),
                  sum_base_price=qc.sum(lambda r: r.l_extendedprice),
                  sum_disc_price=qc.sum(lambda r: r.l_extendedprice * (1 - r.l_discount)),
                  sum_charge=qc.sum(lambda r: r.l_extendedprice * (1 - r.l_discount) * (1 + r.l_tax)),
                  avg_qty=qc.mean(lambda r: r.l_quantity),
                  avg_price=qc.mean(lambda r: r.l_extendedprice),
                  avg_disc=qc.mean(lambda r: r.l_discount),
                  count_order=qc.count)
        return _columns(Q1_COLUMNS, [r["key_0"], r["key_1"]] + [r[c] for c in Q1_COLUMNS[2:]])
    return run


def qc_q12(t, backend):
    if not hasattr(qc.Query, "join"):
        raise NotBuilt("needs join (not built yet)")
    mail, ship = (t.code("l_shipmode", m) for m in Q12_MODES)
    urgent, high = (t.code("o_orderpriority", p) for p in Q12_HIGH)
    lo, hi = Q12_FROM, Q12_TO
    lines = qc.query(t.lineitem).where(
        lambda r: (r.l_shipmode == mail or r.l_shipmode == ship) and r.l_commitdate < r.l_receiptdate
        and r.l_shipdate < r.l_commitdate and r.l_receiptdate >= lo and r.l_receiptdate < hi)
    g = (lines.join(qc.query(t.orders), lambda r: r.l_orderkey, lambda o: o.o_orderkey,
                    lambda r, o: {"mode": r.l_shipmode, "prio": o.o_orderpriority})
         .on(backend).group_by(lambda r: r.mode))

    def run():
        r = g.agg(high_line_count=qc.sum(lambda r: int(r.prio == urgent or r.prio == high)),
                  low_line_count=qc.sum(lambda r: int(r.prio != urgent and r.prio != high)))
        return _columns(Q12_COLUMNS, (r["key"], r["high_line_count"], r["low_line_count"]))
    return run


QUERIES = ("Q1", "Q6", "Q12")
PEERS = {"duckdb": {"Q1": duckdb_q1, "Q6": duckdb_q6, "Q12": duckdb_q12},
         "polars": {"Q1": polars_q1, "Q6": polars_q6, "Q12": polars_q12},
         "numpy": {"Q1": numpy_q1, "Q6": numpy_q6, "Q12": numpy_q12}}
QC = {"Q1": qc_q1, "Q6": qc_q6, "Q12": qc_q12}
