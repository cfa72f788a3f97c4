"""The 22 TPC-H queries: Q1, Q6, Q12, the joins Q3, Q5, Q17, the dated joins Q7, Q8, Q9, and
Q2, Q4, Q10, Q11, Q13, Q14, Q15, Q16, Q18, Q19, Q20, Q21, Q22 (written over real strings only),
for each engine benchmarks/tpch.py compares.

Every implementation is a *setup* function: setup(tables[, backend]) -> a callable with no
arguments that computes the query (what is timed). Setup does what a user does once: build
the polars frame, register the Arrow tables with DuckDB, define the querycompute query.
Every callable returns the result in one shape, so results compare directly:
- Q6: a float (the revenue),
- Q17: a float (avg_yearly),
- Q1, Q12, Q3, Q5, Q7, Q8 and Q9: a dict of equal-length NumPy arrays, one row per group in
  the query's ORDER BY (Q1, Q12: the group key; Q3: revenue descending, then o_orderdate,
  first 10; Q5: revenue descending; Q7: the nations then the year; Q8: the year; Q9: nation,
  then year descending); key columns hold the uint8 codes of tpch_data (sorted code tables:
  code order = string order).

The queries are the TPC-H texts with their default substitution parameters, on the columns of
tpch_data (decimals as float64, dates as int32 days, strings as codes): DuckDB runs that SQL
with the codes and days as literals. Q6's `discount between 0.06 - 0.01 and 0.06 + 0.01`
is written with the literals 0.05 and 0.07 everywhere, because in float64 0.06 + 0.01 is
0.06999999999999999 and would drop every row whose discount is 0.07.

Q7, Q8 and Q9 take the year of a date: over int32 days the querycompute lambdas call the
helper `year_of` (inlined into the kernel), DuckDB says `year(date '1970-01-01' + d)`, polars
casts to Date. Q9's `p_name like '%green%'` is evaluated once per distinct name on the host
(p_name is an int32 code) and its codes kept by a semi-join (until issue 29 item 4).

Q2, Q4, Q10, Q11, Q13, Q14, Q15, Q16, Q18, Q19, Q20, Q21 and Q22 are written over the parquet
files' real string columns only (`t.texted`: `o.o_orderpriority` as a group key,
`p.p_type.startswith("PROMO")` in a join's result, `r.box in c1` over a joined part's
containers; Q2's LIKE '%BRASS' as `p.p_type.endswith("BRASS")`, Q13's and Q16's LIKE
'%a%b%' as `re.search("a.*b", ...)`: string functions, evaluated once per distinct string);
their string results are mapped back to codes (`t.coded`) to compare. DuckDB and polars run
those over the same strings (`<table>_text` tables, LIKE / str.contains). Q1, Q12, Q3, Q5,
Q17, Q7, Q8 and Q9 run both ways (TEXTED).

Q3, Q5 and Q17 are "shaped" on querycompute: strings as codes (until issue 29 item 4), and
what the library has no operator for yet done on the host, on the small grouped result: the
ORDER BY / LIMIT after a group_by (Q3, Q5: `_ordered` sorts the grouped dict), and Q17's
correlated subquery decorrelated into a group_by whose per-part limits a second join reads.
Hand-written NumPy versions exist for Q1, Q6 and Q12 only (PEERS lists who has which).

The querycompute lambdas live in this file because querycompute reads them from source.
"""
from __future__ import annotations

import re

import numpy as np

import querycompute as qc
from tpch_data import TABLES, day

Q1_SHIPDATE = day("1998-12-01") - 90            # l_shipdate <= date '1998-12-01' - 90 days
Q6_FROM, Q6_TO = day("1994-01-01"), day("1995-01-01")
Q12_FROM, Q12_TO = day("1994-01-01"), day("1995-01-01")
Q12_MODES = ("MAIL", "SHIP")
Q12_HIGH = ("1-URGENT", "2-HIGH")
Q3_SEGMENT, Q3_DATE = "BUILDING", day("1995-03-15")
Q5_REGION, Q5_FROM, Q5_TO = "ASIA", day("1994-01-01"), day("1995-01-01")
Q17_BRAND, Q17_CONTAINER = "Brand#23", "MED BOX"
Q7_NATIONS, Q7_DATES = ("FRANCE", "GERMANY"), ("1995-01-01", "1996-12-31")
Q7_FROM, Q7_TO = (day(d) for d in Q7_DATES)
Q8_NATION, Q8_REGION, Q8_TYPE = "BRAZIL", "AMERICA", "ECONOMY ANODIZED STEEL"
Q8_DATES = ("1995-01-01", "1996-12-31")
Q8_FROM, Q8_TO = (day(d) for d in Q8_DATES)
Q9_COLOR = "green"
Q4_FROM, Q4_TO = day("1993-07-01"), day("1993-10-01")
Q14_FROM, Q14_TO = day("1995-09-01"), day("1995-10-01")
Q19_PARTS = (("Brand#12", ("SM CASE", "SM BOX", "SM PACK", "SM PKG"), 1, 11, 5),    # brand,
             ("Brand#23", ("MED BAG", "MED BOX", "MED PKG", "MED PACK"), 10, 20, 10),  # containers,
             ("Brand#34", ("LG CASE", "LG BOX", "LG PACK", "LG PKG"), 20, 30, 15))     # qty, size
Q19_MODES, Q19_INSTRUCT = ("AIR", "AIR REG"), "DELIVER IN PERSON"
Q18_QUANTITY = 300
Q10_FROM, Q10_TO = day("1993-10-01"), day("1994-01-01")
Q20_COLOR, Q20_NATION, Q20_FROM, Q20_TO = "forest", "CANADA", day("1994-01-01"), day("1995-01-01")
Q15_FROM, Q15_TO = day("1996-01-01"), day("1996-04-01")
Q11_NATION, Q11_FRACTION = "GERMANY", 0.0001          # the fraction is 0.0001 / SF (the spec)
Q21_NATION = "SAUDI ARABIA"
Q22_CODES = ("13", "17", "18", "23", "29", "30", "31")    # (sorted: a group's index is its order)
Q13_WORD1, Q13_WORD2 = "special", "requests"              # o_comment not like '%special%requests%'
Q16_BRAND, Q16_TYPE = "Brand#45", "MEDIUM POLISHED"
Q16_SIZES = (49, 14, 23, 45, 19, 3, 36, 9)
Q2_SIZE, Q2_TYPE, Q2_REGION = 15, "BRASS", "EUROPE"

Q1_COLUMNS = ("l_returnflag", "l_linestatus", "sum_qty", "sum_base_price", "sum_disc_price",
              "sum_charge", "avg_qty", "avg_price", "avg_disc", "count_order")
Q12_COLUMNS = ("l_shipmode", "high_line_count", "low_line_count")
Q3_COLUMNS = ("l_orderkey", "revenue", "o_orderdate", "o_shippriority")
Q5_COLUMNS = ("n_name", "revenue")
Q7_COLUMNS = ("supp_nation", "cust_nation", "l_year", "revenue")
Q8_COLUMNS = ("o_year", "mkt_share")
Q9_COLUMNS = ("nation", "o_year", "sum_profit")
Q4_COLUMNS = ("o_orderpriority", "order_count")
Q10_COLUMNS = ("c_custkey", "c_name", "revenue", "c_acctbal", "n_name", "c_address", "c_phone",
               "c_comment")
Q20_COLUMNS = ("s_name", "s_address")
Q15_COLUMNS = ("s_suppkey", "s_name", "s_address", "s_phone", "total_revenue")
Q11_COLUMNS = ("ps_partkey", "value")
Q21_COLUMNS = ("s_name", "numwait")
Q22_COLUMNS = ("cntrycode", "numcust", "totacctbal")
Q18_COLUMNS = ("c_name", "c_custkey", "o_orderkey", "o_orderdate", "o_totalprice", "sum_qty")
Q13_COLUMNS = ("c_count", "custdist")
Q16_COLUMNS = ("p_brand", "p_type", "p_size", "supplier_cnt")
Q2_COLUMNS = ("s_acctbal", "s_name", "n_name", "p_partkey", "p_mfgr", "s_address", "s_phone",
              "s_comment")
# Columns each query reads (the bytes behind a GB/s figure)
READS = {"Q6": ("l_shipdate", "l_discount", "l_quantity", "l_extendedprice"),
         "Q1": ("l_shipdate", "l_returnflag", "l_linestatus", "l_quantity", "l_extendedprice",
                "l_discount", "l_tax"),
         "Q12": ("l_orderkey", "l_shipmode", "l_shipdate", "l_commitdate", "l_receiptdate")}


class NotBuilt(Exception):
    """querycompute lacks an operator this query needs (reported as n/a, never timed)."""


def _columns(names, arrays) -> dict:
    """The result's columns as NumPy arrays (CuPy columns, from a query over device arrays,
    copied to the host)."""
    return {n: np.asarray(a.get() if hasattr(a, "__cuda_array_interface__") and hasattr(a, "get") else a)
            for n, a in zip(names, arrays)}


def _ordered(columns: dict, by, limit=None) -> dict:
    """ORDER BY ... LIMIT on the host, for querycompute's small grouped result (no sort or
    take after a group_by yet): `by` = ((column, descending), ...), numeric columns."""
    keys = [-columns[c] if desc else columns[c] for c, desc in reversed(by)]
    rows = np.lexsort(keys)[:limit]
    return {n: np.asarray(a)[rows] for n, a in columns.items()}


def _texted(t, texted: bool):
    """What a query variant reads: (table getter, the spelling of a string constant of a
    column, the codes of a result's string column): over the uint8 / int32 codes of
    tpch_data, or, `texted`, over the real string columns read from the parquet files
    (pyarrow strings, compared with str constants; results mapped back to codes so they
    compare with the other engines')."""
    if texted:
        return t.texted, (lambda column, value: value), t.coded
    return (lambda name: getattr(t, name)), t.code, (lambda column, codes: codes)


# ---- DuckDB: SQL over the registered Arrow tables (zero-copy views of the NumPy columns) ------
def _duckdb(t):
    import duckdb
    con = duckdb.connect()
    for table in TABLES:
        con.register(table, t.arrow(table))
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


def duckdb_q3(t):
    con = _duckdb(t)
    sql = f"""select l_orderkey, sum(l_extendedprice * (1 - l_discount)) as revenue,
                 o_orderdate, o_shippriority
              from customer, orders, lineitem
              where c_mktsegment = {t.code("c_mktsegment", Q3_SEGMENT)}
                and c_custkey = o_custkey and l_orderkey = o_orderkey
                and o_orderdate < {Q3_DATE} and l_shipdate > {Q3_DATE}
              group by l_orderkey, o_orderdate, o_shippriority
              order by revenue desc, o_orderdate limit 10"""
    return lambda: _columns(Q3_COLUMNS, zip(*con.execute(sql).fetchall()))


def duckdb_q5(t):
    con = _duckdb(t)
    sql = f"""select n_name, sum(l_extendedprice * (1 - l_discount)) as revenue
              from customer, orders, lineitem, supplier, nation, region
              where c_custkey = o_custkey and l_orderkey = o_orderkey and l_suppkey = s_suppkey
                and c_nationkey = s_nationkey and s_nationkey = n_nationkey
                and n_regionkey = r_regionkey and r_name = {t.code("r_name", Q5_REGION)}
                and o_orderdate >= {Q5_FROM} and o_orderdate < {Q5_TO}
              group by n_name order by revenue desc"""
    return lambda: _columns(Q5_COLUMNS, zip(*con.execute(sql).fetchall()))


def duckdb_q4(t):
    con = _duckdb(t)
    sql = f"""select o_orderpriority, count(*) as order_count from orders
              where o_orderdate >= {Q4_FROM} and o_orderdate < {Q4_TO}
                and exists (select * from lineitem where l_orderkey = o_orderkey
                            and l_commitdate < l_receiptdate)
              group by o_orderpriority order by o_orderpriority"""
    return lambda: _columns(Q4_COLUMNS, zip(*con.execute(sql).fetchall()))


def _code(t, column: str, value: str) -> int:
    """The code of a string constant, -1 for one the data does not hold (Q19's 'AIR REG' is
    no TPC-H ship mode: the official query's typo matches nothing)."""
    return t.code(column, value) if value in t.codes[column] else -1


def _codes_where(t, column: str, test) -> str:
    """A SQL list of the codes of `column` whose string passes `test` (LIKE over codes)."""
    return ", ".join(str(i) for i, v in enumerate(t.codes[column]) if test(v)) or "-1"


def duckdb_q14(t):
    con = _duckdb(t)
    promo = _codes_where(t, "p_type", lambda v: v.startswith("PROMO"))
    sql = f"""select 100.00 * sum(case when p_type in ({promo})
                                       then l_extendedprice * (1 - l_discount) else 0 end)
                     / sum(l_extendedprice * (1 - l_discount)) as promo_revenue
              from lineitem, part
              where l_partkey = p_partkey and l_shipdate >= {Q14_FROM} and l_shipdate < {Q14_TO}"""
    return lambda: float(con.execute(sql).fetchone()[0])


def duckdb_q19(t):
    con = _duckdb(t)
    modes = ", ".join(str(_code(t, "l_shipmode", m)) for m in Q19_MODES)
    parts = []
    for brand, boxes, lo, hi, size in Q19_PARTS:
        boxes = ", ".join(str(t.code("p_container", b)) for b in boxes)
        parts.append(f"""(p_partkey = l_partkey and p_brand = {t.code("p_brand", brand)}
                           and p_container in ({boxes}) and l_quantity >= {lo}
                           and l_quantity <= {hi} and p_size between 1 and {size}
                           and l_shipmode in ({modes})
                           and l_shipinstruct = {t.code("l_shipinstruct", Q19_INSTRUCT)})""")
    sql = f"""select sum(l_extendedprice * (1 - l_discount)) as revenue from lineitem, part
              where {" or ".join(parts)}"""
    return lambda: float(con.execute(sql).fetchone()[0] or 0.0)


def duckdb_q10(t):
    con = _duckdb(t)
    sql = f"""select c_custkey, c_name, sum(l_extendedprice * (1 - l_discount)) as revenue,
                 c_acctbal, n_name, c_address, c_phone, c_comment
              from customer, orders, lineitem, nation
              where c_custkey = o_custkey and l_orderkey = o_orderkey
                and o_orderdate >= {Q10_FROM} and o_orderdate < {Q10_TO}
                and l_returnflag = {t.code("l_returnflag", "R")} and c_nationkey = n_nationkey
              group by c_custkey, c_name, c_acctbal, c_phone, n_name, c_address, c_comment
              order by revenue desc limit 20"""
    return lambda: _columns(Q10_COLUMNS, _rows(con.execute(sql).fetchall(), len(Q10_COLUMNS)))


def duckdb_q20(t):
    con = _duckdb(t)
    forest = _codes_where(t, "p_name", lambda v: v.startswith(Q20_COLOR))
    sql = f"""select s_name, s_address from supplier, nation
              where s_suppkey in (
                  select ps_suppkey from partsupp
                  where ps_partkey in (select p_partkey from part where p_name in ({forest}))
                    and ps_availqty > (select 0.5 * sum(l_quantity) from lineitem
                                       where l_partkey = ps_partkey and l_suppkey = ps_suppkey
                                         and l_shipdate >= {Q20_FROM} and l_shipdate < {Q20_TO}))
                and s_nationkey = n_nationkey and n_name = {_code(t, "n_name", Q20_NATION)}
              order by s_name"""
    return lambda: _columns(Q20_COLUMNS, _rows(con.execute(sql).fetchall(), len(Q20_COLUMNS)))


def duckdb_q15(t):
    con = _duckdb(t)
    sql = f"""with revenue as (
                  select l_suppkey as supplier_no, sum(l_extendedprice * (1 - l_discount)) as total
                  from lineitem where l_shipdate >= {Q15_FROM} and l_shipdate < {Q15_TO}
                  group by l_suppkey)
              select s_suppkey, s_name, s_address, s_phone, total from supplier, revenue
              where s_suppkey = supplier_no and total = (select max(total) from revenue)
              order by s_suppkey"""
    return lambda: _columns(Q15_COLUMNS, _rows(con.execute(sql).fetchall(), len(Q15_COLUMNS)))


def duckdb_q11(t):
    con = _duckdb(t)
    german = f"""from partsupp, supplier, nation where ps_suppkey = s_suppkey
                 and s_nationkey = n_nationkey and n_name = {_code(t, "n_name", Q11_NATION)}"""
    sql = f"""select ps_partkey, sum(ps_supplycost * ps_availqty) as value {german}
              group by ps_partkey having sum(ps_supplycost * ps_availqty) >
                  (select sum(ps_supplycost * ps_availqty) * {Q11_FRACTION / t.sf!r} {german})
              order by value desc"""
    return lambda: _columns(Q11_COLUMNS, _rows(con.execute(sql).fetchall(), len(Q11_COLUMNS)))


def duckdb_q21(t):
    con = _duckdb(t)
    sql = f"""select s_name, count(*) as numwait from supplier, lineitem l1, orders, nation
              where s_suppkey = l1.l_suppkey and o_orderkey = l1.l_orderkey
                and o_orderstatus = {_code(t, "o_orderstatus", "F")}
                and l1.l_receiptdate > l1.l_commitdate
                and exists (select * from lineitem l2 where l2.l_orderkey = l1.l_orderkey
                            and l2.l_suppkey <> l1.l_suppkey)
                and not exists (select * from lineitem l3 where l3.l_orderkey = l1.l_orderkey
                                and l3.l_suppkey <> l1.l_suppkey
                                and l3.l_receiptdate > l3.l_commitdate)
                and s_nationkey = n_nationkey and n_name = {_code(t, "n_name", Q21_NATION)}
              group by s_name order by numwait desc, s_name limit 100"""
    return lambda: _columns(Q21_COLUMNS, _rows(con.execute(sql).fetchall(), len(Q21_COLUMNS)))


def duckdb_q22(t):
    """Over the real c_phone strings (SQL's substring needs them: a customer table of its own)."""
    import pyarrow as pa
    con = _duckdb(t)
    con.register("customer_text", pa.table(t.texted("customer")))
    codes = ", ".join(f"'{c}'" for c in Q22_CODES)
    sql = f"""select cntrycode, count(*) as numcust, sum(c_acctbal) as totacctbal
              from (select substring(c_phone from 1 for 2) as cntrycode, c_acctbal
                    from customer_text
                    where substring(c_phone from 1 for 2) in ({codes})
                      and c_acctbal > (select avg(c_acctbal) from customer_text where c_acctbal > 0.00
                                       and substring(c_phone from 1 for 2) in ({codes}))
                      and not exists (select * from orders where o_custkey = c_custkey)) as custsale
              group by cntrycode order by cntrycode"""
    return lambda: _columns(Q22_COLUMNS, _rows(con.execute(sql).fetchall(), len(Q22_COLUMNS)))


def duckdb_q18(t):
    con = _duckdb(t)
    sql = f"""select c_name, c_custkey, o_orderkey, o_orderdate, o_totalprice, sum(l_quantity)
              from customer, orders, lineitem
              where o_orderkey in (select l_orderkey from lineitem group by l_orderkey
                                   having sum(l_quantity) > {Q18_QUANTITY})
                and c_custkey = o_custkey and o_orderkey = l_orderkey
              group by c_name, c_custkey, o_orderkey, o_orderdate, o_totalprice
              order by o_totalprice desc, o_orderdate limit 100"""
    return lambda: _columns(Q18_COLUMNS, _rows(con.execute(sql).fetchall(), len(Q18_COLUMNS)))


def _text_tables(con, t, *tables):
    """Register `<table>_text`: the table with its real strings (SQL's LIKE reads them)."""
    import pyarrow as pa
    for table in tables:
        con.register(f"{table}_text", pa.table(t.texted(table)))


def _coded(t, cols, columns: tuple, strings: dict) -> dict:
    """A SQL / polars result over real strings (its columns) with its string columns
    (`strings`: result column -> tpch column) mapped to the codes the other engines' hold."""
    return _columns(columns, [t.coded(strings[n], c) if n in strings and len(c) else c
                              for n, c in zip(columns, cols)])


def duckdb_q13(t):
    con = _duckdb(t)
    _text_tables(con, t, "orders")
    sql = f"""select c_count, count(*) as custdist
              from (select c_custkey, count(o_orderkey) as c_count
                    from customer left outer join orders_text
                      on c_custkey = o_custkey and o_comment not like '%{Q13_WORD1}%{Q13_WORD2}%'
                    group by c_custkey) as c_orders
              group by c_count order by custdist desc, c_count desc"""
    return lambda: _columns(Q13_COLUMNS, _rows(con.execute(sql).fetchall(), len(Q13_COLUMNS)))


def duckdb_q16(t):
    con = _duckdb(t)
    _text_tables(con, t, "part", "supplier")
    sizes = ", ".join(map(str, Q16_SIZES))
    sql = f"""select p_brand, p_type, p_size, count(distinct ps_suppkey) as supplier_cnt
              from partsupp, part_text
              where p_partkey = ps_partkey and p_brand <> '{Q16_BRAND}'
                and p_type not like '{Q16_TYPE}%' and p_size in ({sizes})
                and ps_suppkey not in (select s_suppkey from supplier_text
                                       where s_comment like '%Customer%Complaints%')
              group by p_brand, p_type, p_size
              order by supplier_cnt desc, p_brand, p_type, p_size"""
    strings = {"p_brand": "p_brand", "p_type": "p_type"}
    return lambda: _coded(t, _rows(con.execute(sql).fetchall(), 4), Q16_COLUMNS, strings)


Q2_STRINGS = {"s_name": "s_name", "n_name": "n_name", "p_mfgr": "p_mfgr", "s_address": "s_address",
              "s_phone": "s_phone", "s_comment": "s_comment"}


def duckdb_q2(t):
    con = _duckdb(t)
    _text_tables(con, t, "part", "supplier", "nation", "region")
    sql = f"""select s_acctbal, s_name, n_name, p_partkey, p_mfgr, s_address, s_phone, s_comment
              from part_text, supplier_text, partsupp, nation_text, region_text
              where p_partkey = ps_partkey and s_suppkey = ps_suppkey and p_size = {Q2_SIZE}
                and p_type like '%{Q2_TYPE}' and s_nationkey = n_nationkey
                and n_regionkey = r_regionkey and r_name = '{Q2_REGION}'
                and ps_supplycost = (select min(ps_supplycost)
                                     from partsupp, supplier_text, nation_text, region_text
                                     where p_partkey = ps_partkey and s_suppkey = ps_suppkey
                                       and s_nationkey = n_nationkey and n_regionkey = r_regionkey
                                       and r_name = '{Q2_REGION}')
              order by s_acctbal desc, n_name, s_name, p_partkey limit 100"""
    return lambda: _coded(t, _rows(con.execute(sql).fetchall(), 8), Q2_COLUMNS, Q2_STRINGS)


def _rows(rows: list, width: int):
    """A SQL result's columns (empty columns for no rows)."""
    return list(zip(*rows)) if rows else [()] * width


def duckdb_q17(t):
    con = _duckdb(t)
    sql = f"""select sum(l_extendedprice) / 7.0 as avg_yearly from lineitem, part
              where p_partkey = l_partkey and p_brand = {t.code("p_brand", Q17_BRAND)}
                and p_container = {t.code("p_container", Q17_CONTAINER)}
                and l_quantity < (select 0.2 * avg(l_quantity) from lineitem
                                  where l_partkey = p_partkey)"""
    # SQL's sum over no rows is NULL; the other engines' (and this file's) is 0.0
    return lambda: float(con.execute(sql).fetchone()[0] or 0.0)


def _year(days: str) -> str:
    """SQL's extract(year from d) of an int32 day number (tpch_data's dates)."""
    return f"year(date '1970-01-01' + {days})"


def duckdb_q7(t):
    con = _duckdb(t)
    a, b = (t.code("n_name", n) for n in Q7_NATIONS)
    sql = f"""select supp_nation, cust_nation, l_year, sum(volume) as revenue from (
                select n1.n_name as supp_nation, n2.n_name as cust_nation,
                       {_year("l_shipdate")} as l_year,
                       l_extendedprice * (1 - l_discount) as volume
                from supplier, lineitem, orders, customer, nation n1, nation n2
                where s_suppkey = l_suppkey and o_orderkey = l_orderkey and c_custkey = o_custkey
                  and s_nationkey = n1.n_nationkey and c_nationkey = n2.n_nationkey
                  and ((n1.n_name = {a} and n2.n_name = {b}) or (n1.n_name = {b} and n2.n_name = {a}))
                  and l_shipdate between {Q7_FROM} and {Q7_TO}) as shipping
              group by supp_nation, cust_nation, l_year
              order by supp_nation, cust_nation, l_year"""
    return lambda: _columns(Q7_COLUMNS, zip(*con.execute(sql).fetchall()))


def duckdb_q8(t):
    con = _duckdb(t)
    sql = f"""select o_year, sum(case when nation = {t.code("n_name", Q8_NATION)} then volume
                                      else 0 end) / sum(volume) as mkt_share from (
                select {_year("o_orderdate")} as o_year,
                       l_extendedprice * (1 - l_discount) as volume, n2.n_name as nation
                from part, supplier, lineitem, orders, customer, nation n1, nation n2, region
                where p_partkey = l_partkey and s_suppkey = l_suppkey and l_orderkey = o_orderkey
                  and o_custkey = c_custkey and c_nationkey = n1.n_nationkey
                  and n1.n_regionkey = r_regionkey and r_name = {t.code("r_name", Q8_REGION)}
                  and s_nationkey = n2.n_nationkey
                  and o_orderdate between {Q8_FROM} and {Q8_TO}
                  and p_type = {t.code("p_type", Q8_TYPE)}) as all_nations
              group by o_year order by o_year"""
    return lambda: _columns(Q8_COLUMNS, zip(*con.execute(sql).fetchall()))


def duckdb_q9(t):
    import pyarrow as pa
    con = _duckdb(t)
    names = t.codes["p_name"]             # p_name is an int32 code: its strings, for LIKE
    con.register("p_names", pa.table({"code": np.arange(len(names), dtype=np.int32),
                                      "name": pa.array(names, pa.string())}))
    sql = f"""select nation, o_year, sum(amount) as sum_profit from (
                select n_name as nation, {_year("o_orderdate")} as o_year,
                       l_extendedprice * (1 - l_discount) - ps_supplycost * l_quantity as amount
                from part, supplier, lineitem, partsupp, orders, nation
                where s_suppkey = l_suppkey and ps_suppkey = l_suppkey and ps_partkey = l_partkey
                  and p_partkey = l_partkey and o_orderkey = l_orderkey
                  and s_nationkey = n_nationkey
                  and p_name in (select code from p_names
                                 where name like '%{Q9_COLOR}%')) as profit
              group by nation, o_year order by nation, o_year desc"""
    return lambda: _columns(Q9_COLUMNS, zip(*con.execute(sql).fetchall()))


# ---- polars: lazy queries on frames over the same Arrow buffers ------------------------------
def _frame(t, table):
    import polars as pl
    return pl.from_arrow(t.arrow(table)).lazy()


def _text_frame(t, table):
    import polars as pl
    import pyarrow as pa
    return pl.from_arrow(pa.table(t.texted(table))).lazy()


def polars_q13(t):
    import polars as pl
    c = pl.col
    orders = _text_frame(t, "orders").filter(~c("o_comment").str.contains(f"{Q13_WORD1}.*{Q13_WORD2}"))
    q = (_frame(t, "customer").join(orders, left_on="c_custkey", right_on="o_custkey", how="left")
         .group_by("c_custkey").agg(c("o_orderkey").count().alias("c_count"))
         .group_by("c_count").agg(pl.len().alias("custdist"))
         .sort(["custdist", "c_count"], descending=[True, True]))
    return lambda: _columns(Q13_COLUMNS, q.collect().get_columns())


def polars_q16(t):
    import polars as pl
    c = pl.col
    parts = _text_frame(t, "part").filter((c("p_brand") != Q16_BRAND) & ~c("p_type").str.starts_with(Q16_TYPE)
                                          & c("p_size").is_in(list(Q16_SIZES)))
    complaints = _text_frame(t, "supplier").filter(c("s_comment").str.contains("Customer.*Complaints"))
    q = (_frame(t, "partsupp").join(complaints, left_on="ps_suppkey", right_on="s_suppkey", how="anti")
         .join(parts, left_on="ps_partkey", right_on="p_partkey")
         .group_by("p_brand", "p_type", "p_size").agg(c("ps_suppkey").n_unique().alias("supplier_cnt"))
         .sort(["supplier_cnt", "p_brand", "p_type", "p_size"], descending=[True, False, False, False]))
    strings = {"p_brand": "p_brand", "p_type": "p_type"}
    return lambda: _coded(t, q.collect().get_columns(), Q16_COLUMNS, strings)


def polars_q2(t):
    import polars as pl
    c = pl.col
    parts = _text_frame(t, "part").filter((c("p_size") == Q2_SIZE) & c("p_type").str.ends_with(Q2_TYPE))
    europe = _text_frame(t, "nation").join(_text_frame(t, "region").filter(c("r_name") == Q2_REGION),
                                           left_on="n_regionkey", right_on="r_regionkey", how="semi")
    offers = (_frame(t, "partsupp").join(parts, left_on="ps_partkey", right_on="p_partkey")
              .join(_text_frame(t, "supplier").join(europe, left_on="s_nationkey", right_on="n_nationkey"),
                    left_on="ps_suppkey", right_on="s_suppkey"))
    cheapest = offers.group_by("ps_partkey").agg(c("ps_supplycost").min().alias("least"))
    q = (offers.join(cheapest, on="ps_partkey").filter(c("ps_supplycost") == c("least"))
         .sort(["s_acctbal", "n_name", "s_name", "ps_partkey"], descending=[True, False, False, False])
         .head(100).select("s_acctbal", "s_name", "n_name", c("ps_partkey").alias("p_partkey"), "p_mfgr",
                           "s_address", "s_phone", "s_comment"))
    return lambda: _coded(t, q.collect().get_columns(), Q2_COLUMNS, Q2_STRINGS)


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


def polars_q3(t):
    import polars as pl
    c = pl.col
    q = (_frame(t, "customer").filter(c("c_mktsegment") == t.code("c_mktsegment", Q3_SEGMENT))
         .join(_frame(t, "orders").filter(c("o_orderdate") < Q3_DATE),
               left_on="c_custkey", right_on="o_custkey")
         .join(_frame(t, "lineitem").filter(c("l_shipdate") > Q3_DATE),
               left_on="o_orderkey", right_on="l_orderkey")
         .group_by(c("o_orderkey").alias("l_orderkey"), "o_orderdate", "o_shippriority")
         .agg((c("l_extendedprice") * (1 - c("l_discount"))).sum().alias("revenue"))
         .sort(["revenue", "o_orderdate"], descending=[True, False]).head(10)
         .select("l_orderkey", "revenue", "o_orderdate", "o_shippriority"))
    return lambda: _columns(Q3_COLUMNS, q.collect().get_columns())


def polars_q5(t):
    import polars as pl
    c = pl.col
    q = (_frame(t, "region").filter(c("r_name") == t.code("r_name", Q5_REGION))
         .join(_frame(t, "nation"), left_on="r_regionkey", right_on="n_regionkey")
         .join(_frame(t, "customer"), left_on="n_nationkey", right_on="c_nationkey")
         .join(_frame(t, "orders").filter((c("o_orderdate") >= Q5_FROM) & (c("o_orderdate") < Q5_TO)),
               left_on="c_custkey", right_on="o_custkey")
         .join(_frame(t, "lineitem"), left_on="o_orderkey", right_on="l_orderkey")
         .join(_frame(t, "supplier"), left_on=["l_suppkey", "n_nationkey"],
               right_on=["s_suppkey", "s_nationkey"])
         .group_by("n_name")
         .agg((c("l_extendedprice") * (1 - c("l_discount"))).sum().alias("revenue"))
         .sort("revenue", descending=True))
    return lambda: _columns(Q5_COLUMNS, q.collect().get_columns())


def polars_q4(t):
    import polars as pl
    c = pl.col
    late = _frame(t, "lineitem").filter(c("l_commitdate") < c("l_receiptdate"))
    q = (_frame(t, "orders").filter((c("o_orderdate") >= Q4_FROM) & (c("o_orderdate") < Q4_TO))
         .join(late, left_on="o_orderkey", right_on="l_orderkey", how="semi")
         .group_by("o_orderpriority").agg(pl.len().alias("order_count")).sort("o_orderpriority"))
    return lambda: _columns(Q4_COLUMNS, q.collect().get_columns())


def polars_q14(t):
    import polars as pl
    c = pl.col
    promo = [i for i, v in enumerate(t.codes["p_type"]) if v.startswith("PROMO")]
    rev = c("l_extendedprice") * (1 - c("l_discount"))
    q = (_frame(t, "lineitem").filter((c("l_shipdate") >= Q14_FROM) & (c("l_shipdate") < Q14_TO))
         .join(_frame(t, "part"), left_on="l_partkey", right_on="p_partkey")
         .select(100.0 * pl.when(c("p_type").is_in(promo)).then(rev).otherwise(0.0).sum() / rev.sum()))
    return lambda: float(q.collect().item())


def polars_q19(t):
    import polars as pl
    c = pl.col
    modes = [_code(t, "l_shipmode", m) for m in Q19_MODES]
    cond = None
    for brand, boxes, lo, hi, size in Q19_PARTS:
        one = ((c("p_brand") == t.code("p_brand", brand))
               & c("p_container").is_in([t.code("p_container", b) for b in boxes])
               & (c("l_quantity") >= lo) & (c("l_quantity") <= hi) & c("p_size").is_between(1, size))
        cond = one if cond is None else cond | one
    q = (_frame(t, "lineitem").filter(c("l_shipmode").is_in(modes)
                                      & (c("l_shipinstruct") == t.code("l_shipinstruct", Q19_INSTRUCT)))
         .join(_frame(t, "part"), left_on="l_partkey", right_on="p_partkey").filter(cond)
         .select((c("l_extendedprice") * (1 - c("l_discount"))).sum()))
    return lambda: float(q.collect().item() or 0.0)


def polars_q10(t):
    import polars as pl
    c = pl.col
    q = (_frame(t, "lineitem").filter(c("l_returnflag") == t.code("l_returnflag", "R"))
         .join(_frame(t, "orders").filter((c("o_orderdate") >= Q10_FROM) & (c("o_orderdate") < Q10_TO)),
               left_on="l_orderkey", right_on="o_orderkey")
         .join(_frame(t, "customer"), left_on="o_custkey", right_on="c_custkey")
         .join(_frame(t, "nation"), left_on="c_nationkey", right_on="n_nationkey")
         .group_by(c("o_custkey").alias("c_custkey"), "c_name", "c_acctbal", "c_phone", "n_name",
                   "c_address", "c_comment")
         .agg((c("l_extendedprice") * (1 - c("l_discount"))).sum().alias("revenue"))
         .sort("revenue", descending=True).head(20).select(*Q10_COLUMNS))
    return lambda: _columns(Q10_COLUMNS, q.collect().get_columns())


def polars_q20(t):
    import polars as pl
    c = pl.col
    forest = [i for i, v in enumerate(t.codes["p_name"]) if v.startswith(Q20_COLOR)]
    shipped = (_frame(t, "lineitem").filter((c("l_shipdate") >= Q20_FROM) & (c("l_shipdate") < Q20_TO))
               .group_by("l_partkey", "l_suppkey").agg(c("l_quantity").sum().alias("q")))
    keep = (_frame(t, "partsupp").join(_frame(t, "part").filter(c("p_name").is_in(forest)),
                                       left_on="ps_partkey", right_on="p_partkey", how="semi")
            .join(shipped, left_on=["ps_partkey", "ps_suppkey"], right_on=["l_partkey", "l_suppkey"])
            .filter(c("ps_availqty") > 0.5 * c("q")).select("ps_suppkey"))
    q = (_frame(t, "supplier").join(keep, left_on="s_suppkey", right_on="ps_suppkey", how="semi")
         .join(_frame(t, "nation").filter(c("n_name") == _code(t, "n_name", Q20_NATION)),
               left_on="s_nationkey", right_on="n_nationkey", how="semi")
         .sort("s_name").select(*Q20_COLUMNS))
    return lambda: _columns(Q20_COLUMNS, q.collect().get_columns())


def polars_q15(t):
    import polars as pl
    c = pl.col
    rev = (_frame(t, "lineitem").filter((c("l_shipdate") >= Q15_FROM) & (c("l_shipdate") < Q15_TO))
           .group_by("l_suppkey").agg((c("l_extendedprice") * (1 - c("l_discount"))).sum().alias("total_revenue")))
    q = (_frame(t, "supplier").join(rev.filter(c("total_revenue") == c("total_revenue").max()),
                                    left_on="s_suppkey", right_on="l_suppkey")
         .sort("s_suppkey").select(*Q15_COLUMNS))
    return lambda: _columns(Q15_COLUMNS, q.collect().get_columns())


def polars_q11(t):
    import polars as pl
    c = pl.col
    value = c("ps_supplycost") * c("ps_availqty")
    german = (_frame(t, "partsupp").join(_frame(t, "supplier"), left_on="ps_suppkey", right_on="s_suppkey")
              .join(_frame(t, "nation").filter(c("n_name") == _code(t, "n_name", Q11_NATION)),
                    left_on="s_nationkey", right_on="n_nationkey", how="semi"))
    q = (german.group_by("ps_partkey").agg(value.sum().alias("value"))
         .filter(c("value") > german.select(value.sum() * (Q11_FRACTION / t.sf)).collect().item())
         .sort("value", descending=True))
    return lambda: _columns(Q11_COLUMNS, q.collect().get_columns())


def polars_q21(t):
    import polars as pl
    c = pl.col
    lines = _frame(t, "lineitem")
    late = lines.filter(c("l_receiptdate") > c("l_commitdate"))
    many = lines.group_by("l_orderkey").agg(c("l_suppkey").n_unique().alias("n")).filter(c("n") > 1)
    alone = late.group_by("l_orderkey").agg(c("l_suppkey").n_unique().alias("n")).filter(c("n") == 1)
    q = (late.join(_frame(t, "orders").filter(c("o_orderstatus") == _code(t, "o_orderstatus", "F")),
                   left_on="l_orderkey", right_on="o_orderkey", how="semi")
         .join(many, on="l_orderkey", how="semi").join(alone, on="l_orderkey", how="semi")
         .join(_frame(t, "supplier"), left_on="l_suppkey", right_on="s_suppkey")
         .join(_frame(t, "nation").filter(c("n_name") == _code(t, "n_name", Q21_NATION)),
               left_on="s_nationkey", right_on="n_nationkey", how="semi")
         .group_by("s_name").agg(pl.len().alias("numwait"))
         .sort(["numwait", "s_name"], descending=[True, False]).head(100))
    return lambda: _columns(Q21_COLUMNS, q.collect().get_columns())


def polars_q22(t):
    import polars as pl
    import pyarrow as pa
    c = pl.col
    cust = (pl.from_arrow(pa.table(t.texted("customer"))).lazy()
            .with_columns(c("c_phone").str.slice(0, 2).alias("cntrycode"))
            .filter(c("cntrycode").is_in(list(Q22_CODES))))
    avg = cust.filter(c("c_acctbal") > 0.0).select(c("c_acctbal").mean())
    q = (cust.join(_frame(t, "orders"), left_on="c_custkey", right_on="o_custkey", how="anti")
         .filter(c("c_acctbal") > avg.collect().item())
         .group_by("cntrycode").agg(pl.len().alias("numcust"), c("c_acctbal").sum().alias("totacctbal"))
         .sort("cntrycode"))
    return lambda: _columns(Q22_COLUMNS, q.collect().get_columns())


def polars_q18(t):
    import polars as pl
    c = pl.col
    lines = _frame(t, "lineitem")
    big = lines.group_by("l_orderkey").agg(c("l_quantity").sum().alias("q")).filter(c("q") > Q18_QUANTITY)
    q = (_frame(t, "orders").join(big.select("l_orderkey"), left_on="o_orderkey", right_on="l_orderkey", how="semi")
         .join(_frame(t, "customer"), left_on="o_custkey", right_on="c_custkey")
         .join(lines, left_on="o_orderkey", right_on="l_orderkey")
         .group_by("c_name", c("o_custkey").alias("c_custkey"), "o_orderkey", "o_orderdate", "o_totalprice")
         .agg(c("l_quantity").sum().alias("sum_qty"))
         .sort(["o_totalprice", "o_orderdate"], descending=[True, False]).head(100)
         .select(*Q18_COLUMNS))
    return lambda: _columns(Q18_COLUMNS, q.collect().get_columns())


def polars_q17(t):
    import polars as pl
    c = pl.col
    lines = (_frame(t, "part").filter((c("p_brand") == t.code("p_brand", Q17_BRAND))
                                      & (c("p_container") == t.code("p_container", Q17_CONTAINER)))
             .join(_frame(t, "lineitem"), left_on="p_partkey", right_on="l_partkey"))
    limits = lines.group_by("p_partkey").agg((0.2 * c("l_quantity").mean()).alias("limit"))
    q = (lines.join(limits, on="p_partkey").filter(c("l_quantity") < c("limit"))
         .select(c("l_extendedprice").sum() / 7.0))
    return lambda: float(q.collect().item())


def _pl_year(column: str):
    import polars as pl
    return pl.col(column).cast(pl.Date).dt.year().cast(pl.Int64)


def polars_q7(t):
    import polars as pl
    c = pl.col
    a, b = (t.code("n_name", n) for n in Q7_NATIONS)
    nations = _frame(t, "nation").filter(c("n_name").is_in([a, b]))
    supp = (_frame(t, "supplier").join(nations, left_on="s_nationkey", right_on="n_nationkey")
            .select("s_suppkey", c("n_name").alias("supp_nation")))
    cust = (_frame(t, "customer").join(nations, left_on="c_nationkey", right_on="n_nationkey")
            .select("c_custkey", c("n_name").alias("cust_nation")))
    q = (_frame(t, "lineitem").filter(c("l_shipdate").is_between(Q7_FROM, Q7_TO))
         .join(supp, left_on="l_suppkey", right_on="s_suppkey")
         .join(_frame(t, "orders"), left_on="l_orderkey", right_on="o_orderkey")
         .join(cust, left_on="o_custkey", right_on="c_custkey")
         .filter(c("supp_nation") != c("cust_nation"))
         .group_by("supp_nation", "cust_nation", _pl_year("l_shipdate").alias("l_year"))
         .agg((c("l_extendedprice") * (1 - c("l_discount"))).sum().alias("revenue"))
         .sort("supp_nation", "cust_nation", "l_year"))
    return lambda: _columns(Q7_COLUMNS, q.collect().get_columns())


def polars_q8(t):
    import polars as pl
    c = pl.col
    brazil = t.code("n_name", Q8_NATION)
    cust = (_frame(t, "region").filter(c("r_name") == t.code("r_name", Q8_REGION))
            .join(_frame(t, "nation"), left_on="r_regionkey", right_on="n_regionkey")
            .join(_frame(t, "customer"), left_on="n_nationkey", right_on="c_nationkey")
            .select("c_custkey"))
    q = (_frame(t, "part").filter(c("p_type") == t.code("p_type", Q8_TYPE))
         .join(_frame(t, "lineitem"), left_on="p_partkey", right_on="l_partkey")
         .join(_frame(t, "orders").filter(c("o_orderdate").is_between(Q8_FROM, Q8_TO)),
               left_on="l_orderkey", right_on="o_orderkey")
         .join(cust, left_on="o_custkey", right_on="c_custkey")
         .join(_frame(t, "supplier"), left_on="l_suppkey", right_on="s_suppkey")
         .join(_frame(t, "nation"), left_on="s_nationkey", right_on="n_nationkey")
         .with_columns((c("l_extendedprice") * (1 - c("l_discount"))).alias("volume"),
                       _pl_year("o_orderdate").alias("o_year"))
         .group_by("o_year")
         .agg((pl.when(c("n_name") == brazil).then(c("volume")).otherwise(0.0).sum()
               / c("volume").sum()).alias("mkt_share"))
         .sort("o_year"))
    return lambda: _columns(Q8_COLUMNS, q.collect().get_columns())


def polars_q9(t):
    import polars as pl
    c = pl.col
    green = [i for i, name in enumerate(t.codes["p_name"]) if Q9_COLOR in name]
    q = (_frame(t, "part").filter(c("p_name").is_in(green))
         .join(_frame(t, "lineitem"), left_on="p_partkey", right_on="l_partkey")
         .join(_frame(t, "partsupp"), left_on=["p_partkey", "l_suppkey"],
               right_on=["ps_partkey", "ps_suppkey"])
         .join(_frame(t, "supplier"), left_on="l_suppkey", right_on="s_suppkey")
         .join(_frame(t, "orders"), left_on="l_orderkey", right_on="o_orderkey")
         .join(_frame(t, "nation"), left_on="s_nationkey", right_on="n_nationkey")
         .group_by(c("n_name").alias("nation"), _pl_year("o_orderdate").alias("o_year"))
         .agg((c("l_extendedprice") * (1 - c("l_discount"))
               - c("ps_supplycost") * c("l_quantity")).sum().alias("sum_profit"))
         .sort(["nation", "o_year"], descending=[False, True]))
    return lambda: _columns(Q9_COLUMNS, q.collect().get_columns())


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


def qc_q1(t, backend, texted=False):
    if not hasattr(qc.Query, "group_by"):
        raise NotBuilt("needs group_by (not built yet)")
    cutoff = Q1_SHIPDATE
    table, _, back = _texted(t, texted)
    g = (qc.query(table("lineitem")).where(lambda r: r.l_shipdate <= cutoff).on(backend)
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
        return _columns(Q1_COLUMNS, [back("l_returnflag", r["key_0"]), back("l_linestatus", r["key_1"])]
                        + [r[c] for c in Q1_COLUMNS[2:]])
    return run


def qc_q12(t, backend, texted=False):
    if not hasattr(qc.Query, "join"):
        raise NotBuilt("needs join (not built yet)")
    table, lit, back = _texted(t, texted)
    mail, ship = (lit("l_shipmode", m) for m in Q12_MODES)
    urgent, high = (lit("o_orderpriority", p) for p in Q12_HIGH)
    lo, hi = Q12_FROM, Q12_TO
    lines = qc.query(table("lineitem")).where(
        lambda r: (r.l_shipmode == mail or r.l_shipmode == ship) and r.l_commitdate < r.l_receiptdate
        and r.l_shipdate < r.l_commitdate and r.l_receiptdate >= lo and r.l_receiptdate < hi)
    g = (lines.join(qc.query(table("orders")), lambda r: r.l_orderkey, lambda o: o.o_orderkey,
                    lambda r, o: {"mode": r.l_shipmode, "prio": o.o_orderpriority})
         .on(backend).group_by(lambda r: r.mode))

    def run():
        r = g.agg(high_line_count=qc.sum(lambda r: int(r.prio == urgent or r.prio == high)),
                  low_line_count=qc.sum(lambda r: int(r.prio != urgent and r.prio != high)))
        return _columns(Q12_COLUMNS, (back("l_shipmode", r["key"]), r["high_line_count"],
                                      r["low_line_count"]))
    return run


def qc_q3(t, backend, texted=False):
    """Q3-shaped (strings as codes, or `texted` real strings); ORDER BY revenue desc,
    o_orderdate LIMIT 10 on the host over the grouped dict. The customer -> orders join is
    the other side of the lineitem join."""
    table, lit, _ = _texted(t, texted)
    segment, cutoff = lit("c_mktsegment", Q3_SEGMENT), Q3_DATE
    customers = qc.query(table("customer")).where(lambda c: c.c_mktsegment == segment)
    orders = qc.query(t.orders).where(lambda o: o.o_orderdate < cutoff).join(
        customers, lambda o: o.o_custkey, lambda c: c.c_custkey,
        lambda o, c: {"orderkey": o.o_orderkey, "date": o.o_orderdate, "prio": o.o_shippriority})
    g = (qc.query(t.lineitem).where(lambda li: li.l_shipdate > cutoff)
         .join(orders, lambda li: li.l_orderkey, lambda o: o.orderkey,
               lambda li, o: {"orderkey": li.l_orderkey, "date": o.date, "prio": o.prio,
                             "rev": li.l_extendedprice * (1 - li.l_discount)})
         .on(backend).group_by(lambda r: (r.orderkey, r.date, r.prio)))

    def run():
        r = g.agg(revenue=qc.sum(lambda r: r.rev))
        top = _ordered(r, (("revenue", True), ("key_1", False)), 10)
        return _columns(Q3_COLUMNS, (top["key_0"], top["revenue"], top["key_1"], top["key_2"]))
    return run


def qc_q5(t, backend, texted=False):
    """Q5-shaped (strings as codes, or `texted` real strings: the nation's name comes from a
    joined side); ORDER BY revenue desc on the host. (l_suppkey, c_nationkey) =
    (s_suppkey, s_nationkey) is a two-field join key."""
    table, lit, back = _texted(t, texted)
    asia, lo, hi = lit("r_name", Q5_REGION), Q5_FROM, Q5_TO
    nations = qc.query(table("nation")).join(
        qc.query(table("region")).where(lambda r: r.r_name == asia),
        lambda n: n.n_regionkey, lambda r: r.r_regionkey,
        lambda n, r: {"nationkey": n.n_nationkey, "name": n.n_name})
    orders = qc.query(t.orders).where(lambda o: o.o_orderdate >= lo and o.o_orderdate < hi)
    g = (qc.query(t.lineitem)
         .join(orders, lambda li: li.l_orderkey, lambda o: o.o_orderkey,
               lambda li, o: {"suppkey": li.l_suppkey, "custkey": o.o_custkey,
                             "rev": li.l_extendedprice * (1 - li.l_discount)})
         .join(qc.query(t.customer), lambda r: r.custkey, lambda c: c.c_custkey,
               lambda r, c: {"suppkey": r.suppkey, "nationkey": c.c_nationkey, "rev": r.rev})
         .join(qc.query(t.supplier), lambda r: (r.suppkey, r.nationkey),
               lambda s: (s.s_suppkey, s.s_nationkey),
               lambda r, s: {"nationkey": s.s_nationkey, "rev": r.rev})
         .join(nations, lambda r: r.nationkey, lambda n: n.nationkey,
               lambda r, n: {"name": n.name, "rev": r.rev})
         .on(backend).group_by(lambda r: r.name))

    def run():
        o = _ordered(g.agg(revenue=qc.sum(lambda r: r.rev)), (("revenue", True),))
        return _columns(Q5_COLUMNS, (back("n_name", o["key"]), o["revenue"]))
    return run


def qc_q17(t, backend, texted=False):
    """Q17-shaped (strings as codes, or `texted` real strings); the correlated subquery
    (0.2 * avg(l_quantity) of the part's lines) decorrelated: a group_by of the joined lines
    gives each part's limit, a second join of the same lines with those limits keeps the
    lines under it (two calls: a Grouped is not a Query to join with yet)."""
    table, lit, _ = _texted(t, texted)
    brand, box = lit("p_brand", Q17_BRAND), lit("p_container", Q17_CONTAINER)
    parts = qc.query(table("part")).where(lambda p: p.p_brand == brand and p.p_container == box)
    lines = (qc.query(t.lineitem)
             .join(parts, lambda li: li.l_partkey, lambda p: p.p_partkey,
                   lambda li, p: {"partkey": li.l_partkey, "qty": li.l_quantity,
                                 "price": li.l_extendedprice})
             .on(backend))
    per_part = lines.group_by(lambda r: r.partkey)

    def run():
        avg = per_part.agg(avg_qty=qc.mean(lambda r: r.qty))
        limits = qc.query(partkey=avg["key"], limit=0.2 * avg["avg_qty"]).on(backend)
        small = (lines.join(limits, lambda r: r.partkey, lambda a: a.partkey,
                            lambda r, a: {"price": r.price, "under": r.qty < a.limit})
                 .where(lambda r: r.under))
        return float(small.sum(lambda r: r.price)) / 7.0
    return run


def year_of(days):
    """The calendar year of an int32 day number since 1970-01-01 (exact for 1901-2099): how a
    query over int32 days spells SQL's extract(year ...)."""
    return 1968 + (4 * (days + 731)) // 1461


def year_of_date(d):
    """The calendar year of a datetime64 value: the date variants' extract(year ...)."""
    return d.year


def _dated(t, dated: bool, *iso_days):
    """What a query variant reads: (table getter, year helper, its date constants), over
    int32 days or, `dated`, real datetime64[D] columns and np.datetime64 constants."""
    if dated:
        return t.dated, year_of_date, [np.datetime64(d, "D") for d in iso_days]
    return (lambda name: getattr(t, name)), year_of, [day(d) for d in iso_days]


def qc_q7(t, backend, dated=False, texted=False):
    """Q7 (the nation names as codes, or `texted` real strings): suppliers and customers of
    the two nations as joined sides, the pair of different nations (compared by nation key:
    the two names come from two joins, each with a dictionary of its own) as a where after
    the joins, extract(year) by the helper `year` (over int32 days, or `dated` over date
    columns)."""
    text, lit, back = _texted(t, texted)
    a, b = (lit("n_name", n) for n in Q7_NATIONS)
    table, year, (lo, hi) = _dated(t, dated, *Q7_DATES)
    nations = qc.query(text("nation")).where(lambda n: n.n_name == a or n.n_name == b)
    suppliers = qc.query(t.supplier).join(nations, lambda s: s.s_nationkey, lambda n: n.n_nationkey,
                                          lambda s, n: {"suppkey": s.s_suppkey, "nation": n.n_name,
                                                        "nk": s.s_nationkey})
    customers = qc.query(t.customer).join(nations, lambda c: c.c_nationkey, lambda n: n.n_nationkey,
                                          lambda c, n: {"custkey": c.c_custkey, "nation": n.n_name,
                                                        "nk": c.c_nationkey})
    orders = qc.query(t.orders).join(customers, lambda o: o.o_custkey, lambda c: c.custkey,
                                     lambda o, c: {"orderkey": o.o_orderkey, "nation": c.nation,
                                                   "nk": c.nk})
    g = (qc.query(table("lineitem")).where(lambda li: li.l_shipdate >= lo and li.l_shipdate <= hi)
         .join(suppliers, lambda li: li.l_suppkey, lambda s: s.suppkey,
               lambda li, s: {"orderkey": li.l_orderkey, "supp": s.nation, "snk": s.nk,
                             "year": year(li.l_shipdate),
                             "volume": li.l_extendedprice * (1 - li.l_discount)})
         .join(orders, lambda r: r.orderkey, lambda o: o.orderkey,
               lambda r, o: {"supp": r.supp, "cust": o.nation, "ours": r.snk != o.nk,
                             "year": r.year, "volume": r.volume})
         .where(lambda r: r.ours)
         .on(backend).group_by(lambda r: (r.supp, r.cust, r.year)))

    def run():
        r = g.agg(revenue=qc.sum(lambda r: r.volume))
        return _columns(Q7_COLUMNS, (back("n_name", r["key_0"]), back("n_name", r["key_1"]),
                                     r["key_2"], r["revenue"]))
    return run


def qc_q8(t, backend, dated=False, texted=False):
    """Q8 (names and the part type as codes, or `texted` real strings): the American customers
    and the steel parts as semi-joins (intersect_by), Brazil's share as a conditional sum over
    the total per year (over int32 days, or `dated` over date columns); whether a nation is
    BRAZIL is computed in the nation query, before the join."""
    text, lit, _ = _texted(t, texted)
    america, brazil = lit("r_name", Q8_REGION), lit("n_name", Q8_NATION)
    steel = lit("p_type", Q8_TYPE)
    table, year, (lo, hi) = _dated(t, dated, *Q8_DATES)
    american = qc.query(text("nation")).intersect_by(
        qc.query(text("region")).where(lambda r: r.r_name == america),
        lambda n: n.n_regionkey, lambda r: r.r_regionkey)
    customers = qc.query(t.customer).intersect_by(american, lambda c: c.c_nationkey,
                                                  lambda n: n.n_nationkey)
    orders = (qc.query(table("orders")).where(lambda o: o.o_orderdate >= lo and o.o_orderdate <= hi)
              .intersect_by(customers, lambda o: o.o_custkey, lambda c: c.c_custkey))
    g = (qc.query(t.lineitem)
         .intersect_by(qc.query(text("part")).where(lambda p: p.p_type == steel),
                       lambda li: li.l_partkey, lambda p: p.p_partkey)
         .join(orders, lambda li: li.l_orderkey, lambda o: o.o_orderkey,
               lambda li, o: {"suppkey": li.l_suppkey, "year": year(o.o_orderdate),
                             "volume": li.l_extendedprice * (1 - li.l_discount)})
         .join(qc.query(t.supplier), lambda r: r.suppkey, lambda s: s.s_suppkey,
               lambda r, s: {"nationkey": s.s_nationkey, "year": r.year, "volume": r.volume})
         .join(qc.query(text("nation")).select(lambda n: {"key": n.n_nationkey, "ours": n.n_name == brazil}),
               lambda r: r.nationkey, lambda n: n.key,
               lambda r, n: {"ours": n.ours, "year": r.year, "volume": r.volume})
         .on(backend).group_by(lambda r: r.year))

    def run():
        r = g.agg(ours=qc.sum(lambda r: r.volume if r.ours else 0.0),
                  total=qc.sum(lambda r: r.volume))
        return _columns(Q8_COLUMNS, (r["key"], r["ours"] / r["total"]))
    return run


def qc_q9(t, backend, dated=False, texted=False):
    """Q9: `p_name like '%green%'` evaluated once per distinct name on the host, the parts kept
    by a semi-join on those codes (or, `texted`, over the real names: `color in p.p_name`, a
    string function, and the nation's name from a joined side, ORDER BY over the groups as a
    query); (l_partkey, l_suppkey) = (ps_partkey, ps_suppkey) is a two-field join key; ORDER BY
    nation, o_year desc on the host over the grouped dict (over int32 days, or `dated` over
    date columns)."""
    table, year, _ = _dated(t, dated)
    color = Q9_COLOR
    if texted:
        parts = qc.query(t.texted("part")).where(lambda p: color in p.p_name)
    else:
        green = np.array([i for i, name in enumerate(t.codes["p_name"]) if color in name], np.int32)
        parts = qc.query(t.part).intersect_by(qc.query(green), lambda p: p.p_name, lambda c: c)
    nation = t.texted("nation") if texted else t.nation
    g = (qc.query(t.lineitem)
         .intersect_by(parts, lambda li: li.l_partkey, lambda p: p.p_partkey)
         .join(qc.query(t.partsupp), lambda li: (li.l_partkey, li.l_suppkey),
               lambda ps: (ps.ps_partkey, ps.ps_suppkey),
               lambda li, ps: {"orderkey": li.l_orderkey, "suppkey": li.l_suppkey,
                              "amount": li.l_extendedprice * (1 - li.l_discount)
                              - ps.ps_supplycost * li.l_quantity})
         .join(qc.query(t.supplier), lambda r: r.suppkey, lambda s: s.s_suppkey,
               lambda r, s: {"orderkey": r.orderkey, "nationkey": s.s_nationkey,
                             "amount": r.amount})
         .join(qc.query(table("orders")), lambda r: r.orderkey, lambda o: o.o_orderkey,
               lambda r, o: {"nationkey": r.nationkey, "year": year(o.o_orderdate),
                             "amount": r.amount})
         .join(qc.query(nation), lambda r: r.nationkey, lambda n: n.n_nationkey,
               lambda r, n: {"nation": n.n_name, "year": r.year, "amount": r.amount})
         .on(backend).group_by(lambda r: (r.nation, r.year)))

    def run():
        if texted:
            r = (g.agg(sum_profit=qc.sum(lambda r: r.amount)).order_by(lambda g: g.key_0)
                 .then_by_descending(lambda g: g.key_1).to_array())
            return _columns(Q9_COLUMNS, (t.coded("n_name", r["key_0"]), r["key_1"], r["sum_profit"]))
        r = _ordered(g.agg(sum_profit=qc.sum(lambda r: r.amount)),
                     (("key_0", False), ("key_1", True)))
        return _columns(Q9_COLUMNS, (r["key_0"], r["key_1"], r["sum_profit"]))
    return run


def qc_q4(t, backend):
    """Q4 over real strings: EXISTS as a semi-join (intersect_by) with the late lines, the
    count per priority (a string key; results mapped back to codes to compare)."""
    lo, hi = Q4_FROM, Q4_TO
    late = qc.query(t.lineitem).where(lambda li: li.l_commitdate < li.l_receiptdate)
    g = (qc.query(t.texted("orders")).where(lambda o: o.o_orderdate >= lo and o.o_orderdate < hi)
         .intersect_by(late, lambda o: o.o_orderkey, lambda li: li.l_orderkey)
         .on(backend).group_by(lambda o: o.o_orderpriority))

    def run():
        r = g.count()
        return _columns(Q4_COLUMNS, (t.coded("o_orderpriority", r["key"]), r["count"]))
    return run


def qc_q14(t, backend):
    """Q14 over real strings: the part's type tested in the join's result
    (`p.p_type.startswith("PROMO")`: a joined string column, compared once the join has
    encoded it)."""
    lo, hi = Q14_FROM, Q14_TO
    lines = (qc.query(t.lineitem).where(lambda li: li.l_shipdate >= lo and li.l_shipdate < hi)
             .join(qc.query(t.texted("part")), lambda li: li.l_partkey, lambda p: p.p_partkey,
                   lambda li, p: {"rev": li.l_extendedprice * (1 - li.l_discount),
                                  "promo": p.p_type.startswith("PROMO")})
             .on(backend))

    def run():
        r = lines.agg(promo=qc.sum(lambda r: r.rev if r.promo else 0.0), total=qc.sum(lambda r: r.rev))
        return 100.0 * float(r["promo"]) / float(r["total"])
    return run


def qc_q19(t, backend):
    """Q19 over real strings: the line conditions before the join, the three (brand,
    containers, quantity, size) alternatives over the joined part's strings after it."""
    (b1, c1, lo1, hi1, s1), (b2, c2, lo2, hi2, s2), (b3, c3, lo3, hi3, s3) = Q19_PARTS
    modes, instruct = Q19_MODES, Q19_INSTRUCT
    q = (qc.query(t.texted("lineitem"))
         .where(lambda li: li.l_shipmode in modes and li.l_shipinstruct == instruct)
         .join(qc.query(t.texted("part")), lambda li: li.l_partkey, lambda p: p.p_partkey,
               lambda li, p: {"rev": li.l_extendedprice * (1 - li.l_discount), "qty": li.l_quantity,
                              "brand": p.p_brand, "box": p.p_container, "size": p.p_size})
         .where(lambda r: (r.brand == b1 and r.box in c1 and lo1 <= r.qty <= hi1 and 1 <= r.size <= s1)
                or (r.brand == b2 and r.box in c2 and lo2 <= r.qty <= hi2 and 1 <= r.size <= s2)
                or (r.brand == b3 and r.box in c3 and lo3 <= r.qty <= hi3 and 1 <= r.size <= s3))
         .on(backend))
    return lambda: float(q.sum(lambda r: r.rev))


def qc_q18(t, backend):
    """Q18 over real strings: the big orders as a group_by of the lines with a HAVING
    (GroupedResult.where: a second plan over the groups), joined with their orders and
    customers (the customer's name from the joined side), ORDER BY / LIMIT as order_by /
    then_by / take."""
    lines = qc.query(t.lineitem).on(backend)
    limit = Q18_QUANTITY

    def run():
        big = (lines.group_by(lambda li: li.l_orderkey).agg(qty=qc.sum(lambda li: li.l_quantity))
               .where(lambda g: g.qty > limit))
        r = (qc.query(t.orders).on(backend)
             .join(big, lambda o: o.o_orderkey, lambda g: g.key,
                   lambda o, g: {"custkey": o.o_custkey, "orderkey": o.o_orderkey,
                                 "date": o.o_orderdate, "price": o.o_totalprice, "qty": g.qty})
             .join(qc.query(t.texted("customer")), lambda r: r.custkey, lambda c: c.c_custkey,
                   lambda r, c: {"name": c.c_name, "custkey": r.custkey, "orderkey": r.orderkey,
                                 "date": r.date, "price": r.price, "qty": r.qty})
             .order_by_descending(lambda r: r.price).then_by(lambda r: r.date).take(100)
             .to_array())
        return _columns(Q18_COLUMNS, (t.coded("c_name", r["name"]), r["custkey"], r["orderkey"],
                                      r["date"], r["price"], r["qty"]))
    return run


def qc_q10(t, backend):
    """Q10 over real strings: the returned lines' revenue per customer (a group_by), its top
    20 (a query over the groups: order_by_descending, take), joined with the customers and
    their nations (six string columns from a joined side, the customer's own and the
    nation's)."""
    lo, hi = Q10_FROM, Q10_TO
    orders = qc.query(t.orders).where(lambda o: o.o_orderdate >= lo and o.o_orderdate < hi)
    per_customer = (qc.query(t.texted("lineitem")).where(lambda li: li.l_returnflag == "R")
                    .join(orders, lambda li: li.l_orderkey, lambda o: o.o_orderkey,
                          lambda li, o: {"custkey": o.o_custkey,
                                         "rev": li.l_extendedprice * (1 - li.l_discount)})
                    .on(backend).group_by(lambda r: r.custkey))
    customers = qc.query(t.texted("customer")).join(
        qc.query(t.texted("nation")), lambda c: c.c_nationkey, lambda n: n.n_nationkey,
        lambda c, n: {"custkey": c.c_custkey, "name": c.c_name, "acctbal": c.c_acctbal,
                      "nation": n.n_name, "address": c.c_address, "phone": c.c_phone,
                      "comment": c.c_comment})

    def run():
        top = per_customer.agg(revenue=qc.sum(lambda r: r.rev)) \
            .order_by_descending(lambda g: g.revenue).take(20)
        r = top.join(customers, lambda g: g.key, lambda c: c.custkey,
                     lambda g, c: {"custkey": g.key, "name": c.name, "revenue": g.revenue,
                                   "acctbal": c.acctbal, "nation": c.nation, "address": c.address,
                                   "phone": c.phone, "comment": c.comment}).to_array()
        return _columns(Q10_COLUMNS, (r["custkey"], t.coded("c_name", r["name"]), r["revenue"],
                                      r["acctbal"], t.coded("n_name", r["nation"]),
                                      t.coded("c_address", r["address"]), t.coded("c_phone", r["phone"]),
                                      t.coded("c_comment", r["comment"])))
    return run


def qc_q20(t, backend):
    """Q20 over real strings: `p.p_name.startswith("forest")`, the correlated sum as a group_by
    on the two-field key (l_partkey, l_suppkey) joined with partsupp, IN as intersect_by,
    ORDER BY s_name on a string."""
    lo, hi, color, nation = Q20_FROM, Q20_TO, Q20_COLOR, Q20_NATION
    forest = qc.query(t.texted("part")).where(lambda p: p.p_name.startswith(color))
    shipped = (qc.query(t.lineitem).where(lambda li: li.l_shipdate >= lo and li.l_shipdate < hi)
               .on(backend).group_by(lambda li: (li.l_partkey, li.l_suppkey)))
    canada = qc.query(t.texted("nation")).where(lambda n: n.n_name == nation)

    def run():
        per_pair = shipped.agg(qty=qc.sum(lambda li: li.l_quantity)).query()
        keep = (qc.query(t.partsupp).intersect_by(forest, lambda ps: ps.ps_partkey, lambda p: p.p_partkey)
                .join(per_pair, lambda ps: (ps.ps_partkey, ps.ps_suppkey), lambda g: (g.key_0, g.key_1),
                      lambda ps, g: {"suppkey": ps.ps_suppkey, "excess": ps.ps_availqty > 0.5 * g.qty})
                .where(lambda r: r.excess))
        r = (qc.query(t.texted("supplier")).on(backend)
             .intersect_by(keep, lambda s: s.s_suppkey, lambda r: r.suppkey)
             .intersect_by(canada, lambda s: s.s_nationkey, lambda n: n.n_nationkey)
             .order_by(lambda s: s.s_name)
             .select(lambda s: {"name": s.s_name, "address": s.s_address}).to_array())
        return _columns(Q20_COLUMNS, (t.coded("s_name", r["name"]), t.coded("s_address", r["address"])))
    return run


def qc_q15(t, backend):
    """Q15 over real strings: the revenue per supplier (a group_by), the top revenue (max over
    the groups), the suppliers that have it joined with their names, addresses, phones."""
    lo, hi = Q15_FROM, Q15_TO
    per_supplier = (qc.query(t.lineitem).where(lambda li: li.l_shipdate >= lo and li.l_shipdate < hi)
                    .on(backend).group_by(lambda li: li.l_suppkey))

    def run():
        rev = per_supplier.agg(total=qc.sum(lambda li: li.l_extendedprice * (1 - li.l_discount)))
        top = rev.query().max(lambda g: g.total)
        r = (rev.where(lambda g: g.total == top)
             .join(qc.query(t.texted("supplier")), lambda g: g.key, lambda s: s.s_suppkey,
                   lambda g, s: {"key": g.key, "name": s.s_name, "address": s.s_address,
                                 "phone": s.s_phone, "total": g.total})
             .order_by(lambda r: r.key).to_array())
        return _columns(Q15_COLUMNS, (r["key"], t.coded("s_name", r["name"]),
                                      t.coded("s_address", r["address"]), t.coded("s_phone", r["phone"]),
                                      r["total"]))
    return run


def qc_q11(t, backend):
    """Q11 over real strings: the German stock as semi-joins, its total (a sum), the per-part
    values over the threshold (group_by, then HAVING / ORDER BY over the groups)."""
    nation, fraction = Q11_NATION, Q11_FRACTION / t.sf
    german = qc.query(t.supplier).intersect_by(
        qc.query(t.texted("nation")).where(lambda n: n.n_name == nation),
        lambda s: s.s_nationkey, lambda n: n.n_nationkey)
    stock = (qc.query(t.partsupp).intersect_by(german, lambda ps: ps.ps_suppkey, lambda s: s.s_suppkey)
             .on(backend))

    def run():
        limit = stock.sum(lambda ps: ps.ps_supplycost * ps.ps_availqty) * fraction
        r = (stock.group_by(lambda ps: ps.ps_partkey)
             .agg(value=qc.sum(lambda ps: ps.ps_supplycost * ps.ps_availqty))
             .where(lambda g: g.value > limit).order_by_descending(lambda g: g.value).to_array())
        return _columns(Q11_COLUMNS, (r["key"], r["value"]))
    return run


def qc_q21(t, backend):
    """Q21 over real strings: EXISTS / NOT EXISTS with `l_suppkey <>` decorrelated into per-order
    distinct supplier counts (qc.count_distinct in a group_by's agg: more than one supplier;
    exactly one late supplier, this line's), semi-joins, the supplier's name from a joined
    side as the group key, ORDER BY numwait desc, s_name over the groups."""
    nation = Q21_NATION
    lines = qc.query(t.lineitem).on(backend)
    late = lines.where(lambda li: li.l_receiptdate > li.l_commitdate)
    saudi = qc.query(t.texted("supplier")).intersect_by(
        qc.query(t.texted("nation")).where(lambda n: n.n_name == nation),
        lambda s: s.s_nationkey, lambda n: n.n_nationkey)
    failed = qc.query(t.texted("orders")).where(lambda o: o.o_orderstatus == "F")

    def run():
        many = lines.group_by(lambda li: li.l_orderkey) \
            .agg(n=qc.count_distinct(lambda li: li.l_suppkey)).where(lambda g: g.n > 1)
        alone = late.group_by(lambda li: li.l_orderkey) \
            .agg(n=qc.count_distinct(lambda li: li.l_suppkey)).where(lambda g: g.n == 1)
        g = (late.intersect_by(failed, lambda li: li.l_orderkey, lambda o: o.o_orderkey)
             .intersect_by(many, lambda li: li.l_orderkey, lambda g: g.key)
             .intersect_by(alone, lambda li: li.l_orderkey, lambda g: g.key)
             .join(saudi, lambda li: li.l_suppkey, lambda s: s.s_suppkey, lambda li, s: {"name": s.s_name})
             .group_by(lambda r: r.name).count())
        r = g.order_by_descending(lambda g: g.count).then_by(lambda g: g.key).take(100).to_array()
        return _columns(Q21_COLUMNS, (t.coded("s_name", r["key"]), r["count"]))
    return run


def qc_q22(t, backend):
    """Q22 over real strings: the country codes as `c_phone.startswith((...))`; NOT EXISTS as
    except_by; the country code itself (a string built from the phone: refused in lambdas)
    as the index of the prefix a phone starts with, mapped back to the prefix on the host."""
    cust = (qc.query(t.texted("customer")).on(backend)
            .where(lambda c: c.c_phone.startswith(("13", "17", "18", "23", "29", "30", "31"))))

    def country(c):
        p = c.c_phone
        return (0 if p.startswith("13") else 1 if p.startswith("17") else 2 if p.startswith("18")
                else 3 if p.startswith("23") else 4 if p.startswith("29") else 5 if p.startswith("30")
                else 6)

    def run():
        avg = cust.where(lambda c: c.c_acctbal > 0.0).mean(lambda c: c.c_acctbal)
        g = (cust.where(lambda c: c.c_acctbal > avg)
             .except_by(qc.query(t.orders), lambda c: c.c_custkey, lambda o: o.o_custkey)
             .group_by(lambda c: country(c))
             .agg(numcust=qc.count, totacctbal=qc.sum(lambda c: c.c_acctbal)))
        return _columns(Q22_COLUMNS, (np.array(Q22_CODES)[g["key"]].astype(np.int64), g["numcust"],
                                      g["totacctbal"]))
    return run


def qc_q13(t, backend):
    """Q13 over real strings: LIKE '%special%requests%' as a string function (`re.search`,
    evaluated once per distinct comment), count(o_orderkey) of a left join as a count of its
    matched rows per customer (qc.matched), then a group_by of those counts (a query over the
    groups), ORDER BY custdist desc, c_count desc."""
    pattern = f"{Q13_WORD1}.*{Q13_WORD2}"
    orders = qc.query(t.texted("orders")).where(lambda o: re.search(pattern, o.o_comment) is None)
    customers = qc.query(t.customer).on(backend)

    def run():
        per_customer = (customers.left_join(orders, lambda c: c.c_custkey, lambda o: o.o_custkey,
                                            lambda c, o: {"cust": c.c_custkey, "has": qc.matched(o)})
                        .group_by(lambda r: r.cust).agg(n=qc.count(lambda r: r.has)).query())
        r = (per_customer.group_by(lambda g: g.n).count()
             .order_by_descending(lambda g: g.count).then_by_descending(lambda g: g.key).to_array())
        return _columns(Q13_COLUMNS, (r["key"], r["count"]))
    return run


def qc_q16(t, backend):
    """Q16 over real strings: `<>` a brand, NOT LIKE 'MEDIUM POLISHED%' as `not startswith`, IN a
    captured tuple of sizes, NOT IN a subquery as except_by over suppliers whose comment
    matches '%Customer%Complaints%' (a string function), COUNT(DISTINCT) per (brand, type,
    size) of a joined part's strings, ORDER BY a count then strings."""
    brand, kind, sizes = Q16_BRAND, Q16_TYPE, Q16_SIZES
    parts = qc.query(t.texted("part")).where(
        lambda p: p.p_brand != brand and not p.p_type.startswith(kind) and p.p_size in sizes)
    complaints = qc.query(t.texted("supplier")).where(
        lambda s: re.search("Customer.*Complaints", s.s_comment) is not None)
    partsupp = qc.query(t.partsupp).on(backend)

    def run():
        g = (partsupp.except_by(complaints, lambda ps: ps.ps_suppkey, lambda s: s.s_suppkey)
             .join(parts, lambda ps: ps.ps_partkey, lambda p: p.p_partkey,
                   lambda ps, p: {"brand": p.p_brand, "type": p.p_type, "size": p.p_size,
                                  "supp": ps.ps_suppkey})
             .group_by(lambda r: (r.brand, r.type, r.size)).agg(cnt=qc.count_distinct(lambda r: r.supp)))
        r = (g.order_by_descending(lambda g: g.cnt).then_by(lambda g: g.key_0)
             .then_by(lambda g: g.key_1).then_by(lambda g: g.key_2).to_array())
        return _columns(Q16_COLUMNS, (t.coded("p_brand", r["key_0"]), t.coded("p_type", r["key_1"]),
                                      r["key_2"], r["cnt"]))
    return run


def qc_q2(t, backend):
    """Q2 over real strings: LIKE '%BRASS' as `p_type.endswith(...)` (a string function), the
    suppliers of a region (a semi-join, then a join carrying five of their string columns),
    the correlated min(ps_supplycost) as a group_by per part joined back on (part, cost),
    ORDER BY s_acctbal desc, then two joined strings, LIMIT 100."""
    size, suffix, region = Q2_SIZE, Q2_TYPE, Q2_REGION
    brass = qc.query(t.texted("part")).where(lambda p: p.p_size == size and p.p_type.endswith(suffix))
    europe = qc.query(t.texted("nation")).intersect_by(
        qc.query(t.texted("region")).where(lambda r: r.r_name == region),
        lambda n: n.n_regionkey, lambda r: r.r_regionkey)
    suppliers = qc.query(t.texted("supplier")).join(
        europe, lambda s: s.s_nationkey, lambda n: n.n_nationkey,
        lambda s, n: {"suppkey": s.s_suppkey, "acctbal": s.s_acctbal, "name": s.s_name,
                      "nation": n.n_name, "address": s.s_address, "phone": s.s_phone,
                      "comment": s.s_comment})
    offers = (qc.query(t.partsupp).on(backend)
              .join(brass, lambda ps: ps.ps_partkey, lambda p: p.p_partkey,
                    lambda ps, p: {"partkey": ps.ps_partkey, "suppkey": ps.ps_suppkey,
                                   "cost": ps.ps_supplycost, "mfgr": p.p_mfgr})
              .join(suppliers, lambda o: o.suppkey, lambda s: s.suppkey,
                    lambda o, s: {"partkey": o.partkey, "cost": o.cost, "mfgr": o.mfgr,
                                  "acctbal": s.acctbal, "name": s.name, "nation": s.nation,
                                  "address": s.address, "phone": s.phone, "comment": s.comment}))

    def run():
        cheapest = offers.group_by(lambda o: o.partkey).agg(least=qc.min(lambda o: o.cost)).query()
        r = (offers.join(cheapest, lambda o: (o.partkey, o.cost), lambda g: (g.key, g.least),
                         lambda o, g: {"acctbal": o.acctbal, "name": o.name, "nation": o.nation,
                                       "partkey": o.partkey, "mfgr": o.mfgr, "address": o.address,
                                       "phone": o.phone, "comment": o.comment})
             .order_by_descending(lambda r: r.acctbal).then_by(lambda r: r.nation)
             .then_by(lambda r: r.name).then_by(lambda r: r.partkey).take(100).to_array())
        return _columns(Q2_COLUMNS, (r["acctbal"], t.coded("s_name", r["name"]),
                                     t.coded("n_name", r["nation"]), r["partkey"],
                                     t.coded("p_mfgr", r["mfgr"]), t.coded("s_address", r["address"]),
                                     t.coded("s_phone", r["phone"]), t.coded("s_comment", r["comment"])))
    return run


QUERIES = ("Q1", "Q6", "Q12", "Q3", "Q5", "Q17", "Q7", "Q8", "Q9", "Q4", "Q14", "Q19", "Q18", "Q10",
           "Q20", "Q15", "Q11", "Q21", "Q22", "Q13", "Q16", "Q2")
PEERS = {"duckdb": {"Q1": duckdb_q1, "Q6": duckdb_q6, "Q12": duckdb_q12, "Q3": duckdb_q3,
                    "Q5": duckdb_q5, "Q17": duckdb_q17, "Q7": duckdb_q7, "Q8": duckdb_q8,
                    "Q9": duckdb_q9, "Q4": duckdb_q4, "Q14": duckdb_q14, "Q19": duckdb_q19,
                    "Q18": duckdb_q18, "Q10": duckdb_q10, "Q20": duckdb_q20, "Q15": duckdb_q15,
                    "Q11": duckdb_q11, "Q21": duckdb_q21, "Q22": duckdb_q22, "Q13": duckdb_q13,
                    "Q16": duckdb_q16, "Q2": duckdb_q2},
         "polars": {"Q1": polars_q1, "Q6": polars_q6, "Q12": polars_q12, "Q3": polars_q3,
                    "Q5": polars_q5, "Q17": polars_q17, "Q7": polars_q7, "Q8": polars_q8,
                    "Q9": polars_q9, "Q4": polars_q4, "Q14": polars_q14, "Q19": polars_q19,
                    "Q18": polars_q18, "Q10": polars_q10, "Q20": polars_q20, "Q15": polars_q15,
                    "Q11": polars_q11, "Q21": polars_q21, "Q22": polars_q22, "Q13": polars_q13,
                    "Q16": polars_q16, "Q2": polars_q2},
         "numpy": {"Q1": numpy_q1, "Q6": numpy_q6, "Q12": numpy_q12}}
# The queries that also run over real date columns: tpch.py's `qc-<backend>-dates` rows
DATED = ("Q7", "Q8", "Q9")
# ... and over the real string columns of the parquet files: `qc-<backend>-strings` rows
TEXTED = ("Q1", "Q12", "Q3", "Q5", "Q17", "Q7", "Q8", "Q9")
QC = {"Q1": qc_q1, "Q6": qc_q6, "Q12": qc_q12, "Q3": qc_q3, "Q5": qc_q5, "Q17": qc_q17,
      "Q7": qc_q7, "Q8": qc_q8, "Q9": qc_q9, "Q4": qc_q4, "Q14": qc_q14, "Q19": qc_q19,
      "Q18": qc_q18, "Q10": qc_q10, "Q20": qc_q20, "Q15": qc_q15, "Q11": qc_q11,
      "Q21": qc_q21, "Q22": qc_q22, "Q13": qc_q13, "Q16": qc_q16, "Q2": qc_q2}
