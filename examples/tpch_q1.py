"""TPC-H Q1, the pricing summary report: a filter, a group_by on two flag columns and eight
aggregates, as one querycompute query.

    python examples/tpch_q1.py [scale factor, default 0.01] [data directory]

The SQL it answers:

    select l_returnflag, l_linestatus, sum(l_quantity), sum(l_extendedprice),
           sum(l_extendedprice * (1 - l_discount)),
           sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)),
           avg(l_quantity), avg(l_extendedprice), avg(l_discount), count(*)
    from lineitem where l_shipdate <= date '1998-12-01' - interval '90' day
    group by l_returnflag, l_linestatus order by l_returnflag, l_linestatus

The lineitem table comes from `tpchgen-cli` (pip install tpchgen-cli pyarrow), generated once
into ~/.cache/querycompute-tpch/sf<SF>. Query lambdas read numbers, so the columns are loaded
as numbers: prices as float64, dates as int32 days since 1970, and the one-letter flags as
uint8 codes into a sorted table of their letters (sorting groups by code is sorting by letter;
the table maps the result back). benchmarks/tpch.py times the same query against DuckDB and
polars; tests/test_issue14_tpch_smoke.py checks this script's output against DuckDB.
"""
import datetime
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import querycompute as qc

sf = float(sys.argv[1]) if len(sys.argv) > 1 else 0.01
data = Path(sys.argv[2]) if len(sys.argv) > 2 else Path.home() / ".cache" / "querycompute-tpch" / f"sf{sf:g}"

# -- the data: generate once, then load the columns Q1 reads ---------------------------------
parquet = data / "lineitem.parquet"
if not parquet.exists():
    data.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=data) as tmp:   # the file appears whole, or not at all
        exe = shutil.which("tpchgen-cli") or shutil.which("tpchgen-cli", path=Path(sys.executable).parent)
        if exe is None:
            sys.exit("this example needs the TPC-H generator: pip install tpchgen-cli")
        subprocess.run([exe, "parquet", "-s", f"{sf:g}", "--tables=lineitem", "-o", tmp], check=True)
        os.replace(Path(tmp) / "lineitem.parquet", parquet)
arrow = pq.read_table(parquet, columns=["l_quantity", "l_extendedprice", "l_discount", "l_tax",
                                        "l_returnflag", "l_linestatus", "l_shipdate"])
lineitem, letters = {}, {}
for name in ("l_quantity", "l_extendedprice", "l_discount", "l_tax"):
    lineitem[name] = arrow[name].cast(pa.float64()).to_numpy()         # decimal(15,2)
lineitem["l_shipdate"] = arrow["l_shipdate"].cast(pa.int32()).to_numpy()
for name in ("l_returnflag", "l_linestatus"):
    column = arrow[name].cast(pa.string())
    table = pc.unique(column).sort()
    lineitem[name] = pc.index_in(column, value_set=table).cast(pa.uint8()).to_numpy()
    letters[name] = table.to_pylist()

# -- the query ---------------------------------------------------------------------------------
cutoff = (datetime.date(1998, 12, 1) - datetime.timedelta(days=90) - datetime.date(1970, 1, 1)).days
report = (qc.query(lineitem)
          .where(lambda r: r.l_shipdate <= cutoff)
          .group_by(lambda r: (r.l_returnflag, r.l_linestatus))
          .agg(sum_qty=qc.sum(lambda r: r.l_quantity),
               sum_base_price=qc.sum(lambda r: r.l_extendedprice),
               sum_disc_price=qc.sum(lambda r: r.l_extendedprice * (1 - r.l_discount)),
               sum_charge=qc.sum(lambda r: r.l_extendedprice * (1 - r.l_discount) * (1 + r.l_tax)),
               avg_qty=qc.mean(lambda r: r.l_quantity),
               avg_price=qc.mean(lambda r: r.l_extendedprice),
               avg_disc=qc.mean(lambda r: r.l_discount),
               count_order=qc.count))
# One row per (returnflag, linestatus) group, sorted by key: key_0 and key_1 are the codes.

# -- the result, flags mapped back to their letters --------------------------------------------
print(f"TPC-H Q1 at scale factor {sf:g} ({len(lineitem['l_shipdate']):,} lineitems)")
print(f"{'flag':>4s} {'status':>6s} {'sum_qty':>12s} {'sum_base_price':>16s} {'sum_disc_price':>18s} "
      f"{'sum_charge':>20s} {'avg_qty':>10s} {'avg_price':>12s} {'avg_disc':>9s} {'count_order':>11s}")
for i in range(len(report["count_order"])):
    flag = letters["l_returnflag"][int(report["key_0"][i])]
    status = letters["l_linestatus"][int(report["key_1"][i])]
    print(f"{flag:>4} {status:>6} {report['sum_qty'][i]:12.2f} {report['sum_base_price'][i]:16.2f} "
          f"{report['sum_disc_price'][i]:18.4f} {report['sum_charge'][i]:20.6f} "
          f"{report['avg_qty'][i]:10.6f} {report['avg_price'][i]:12.6f} {report['avg_disc'][i]:9.6f} "
          f"{int(report['count_order'][i]):11d}")
assert np.all(np.diff(report["key_0"].astype(int) * 256 + report["key_1"]) > 0)   # sorted by key
