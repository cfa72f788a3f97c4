"""TPC-H tables for benchmarks/tpch.py: generated once, cached, loaded as columns.

The tables (TABLES): lineitem and orders (Q1, Q6, Q12), customer, supplier, nation, region,
part and partsupp (the joins of Q3, Q5, Q7, Q8, Q9 and Q17).

Generation: `tpchgen-cli parquet -s SF --tables=lineitem,orders,...` (PyPI package tpchgen-cli, in
the `bench` extra; nothing here installs it) into a cache directory, by default
~/.cache/querycompute-tpch/sf<SF>. It writes into a temporary sibling directory and renames each
file into place, so two processes generating the same scale factor never see half a file.

Loading (pyarrow; only the columns the queries read), in the types DESIGN.md section 8 names:
- decimal(15,2) -> float64 (pyarrow divides the exact integer by 100: correctly rounded),
- date32 -> int32 days since 1970-01-01 (the query constants below are such days too),
- int64 keys stay int64; other integers (o_shippriority) keep their parquet type,
- short strings (flags, ship modes, order priorities, market segments, nation and region names,
  brands, containers, part types) -> uint8 codes into a *sorted* code table, so ordering by the
  code is ordering by the string (Q1, Q5 and Q12 sort their groups by them) and
  `Tables.codes[column][code]` maps a result back to the string; part names ("dict": too many
  distinct values for a byte) -> int32 codes into their sorted table the same way.
- `Tables.dated(table)`: the table with its date columns as datetime64[D] (the same days), for
  the queries written over real date columns (Q7, Q8, Q9's date variants).
- `Tables.texted(table)`: the table with its string columns as the pyarrow string arrays read
  from the parquet file, for the queries written over real strings (tpch_queries.TEXTED).
Every engine (DuckDB, polars, NumPy, querycompute) then reads these same in-memory columns:
DuckDB and polars through zero-copy Arrow tables over the NumPy buffers.
"""
from __future__ import annotations

import datetime
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

TABLES = ("lineitem", "orders", "customer", "supplier", "nation", "region", "part", "partsupp")
# column -> kind ("float", "date", "code", "dict" or "int") for the columns the queries read
COLUMNS = {
    "lineitem": {"l_orderkey": "int", "l_partkey": "int", "l_suppkey": "int",
                 "l_quantity": "float", "l_extendedprice": "float",
                 "l_discount": "float", "l_tax": "float", "l_returnflag": "code",
                 "l_linestatus": "code", "l_shipmode": "code", "l_shipdate": "date",
                 "l_commitdate": "date", "l_receiptdate": "date", "l_shipinstruct": "code"},
    "orders": {"o_orderkey": "int", "o_custkey": "int", "o_orderdate": "date",
               "o_orderpriority": "code", "o_shippriority": "int", "o_totalprice": "float",
               "o_orderstatus": "code", "o_comment": "dict"},
    "customer": {"c_custkey": "int", "c_nationkey": "int", "c_mktsegment": "code",
                 "c_name": "dict", "c_address": "dict", "c_phone": "dict", "c_comment": "dict",
                 "c_acctbal": "float"},
    "supplier": {"s_suppkey": "int", "s_nationkey": "int", "s_name": "dict", "s_address": "dict",
                 "s_phone": "dict", "s_comment": "dict", "s_acctbal": "float"},
    "nation": {"n_nationkey": "int", "n_name": "code", "n_regionkey": "int"},
    "region": {"r_regionkey": "int", "r_name": "code"},
    "part": {"p_partkey": "int", "p_brand": "code", "p_container": "code", "p_type": "code",
             "p_name": "dict", "p_size": "int", "p_mfgr": "code"},
    "partsupp": {"ps_partkey": "int", "ps_suppkey": "int", "ps_supplycost": "float",
                 "ps_availqty": "int"},
}


def day(iso: str) -> int:
    """'1994-01-01' -> days since 1970-01-01 (how dates are stored here)."""
    return (datetime.date.fromisoformat(iso) - datetime.date(1970, 1, 1)).days


def default_dir(sf: float) -> Path:
    return Path.home() / ".cache" / "querycompute-tpch" / f"sf{sf:g}"


def generator() -> str | None:
    """Path of tpchgen-cli: on PATH, or beside this Python (a venv that is not activated)."""
    found = shutil.which("tpchgen-cli")
    if found:
        return found
    beside = Path(sys.executable).parent / "tpchgen-cli"
    return str(beside) if beside.exists() else None


def ensure_generated(sf: float, data_dir: Path | None = None) -> Path:
    """The directory holding the TABLES' parquet files at scale factor `sf` (a directory
    missing one of them is generated again, whole)."""
    data_dir = Path(data_dir) if data_dir else default_dir(sf)
    if all((data_dir / f"{t}.parquet").exists() for t in TABLES):
        return data_dir
    exe = generator()
    if exe is None:
        raise RuntimeError("tpchgen-cli is not installed: pip install tpchgen-cli "
                           "(or pip install -e '.[bench]')")
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=data_dir.name + ".", dir=data_dir.parent))
    try:
        subprocess.run([exe, "parquet", "-s", f"{sf:g}", f"--tables={','.join(TABLES)}",
                        "-o", str(tmp)], check=True, capture_output=True, text=True)
        data_dir.mkdir(exist_ok=True)
        for t in TABLES:                     # each file appears whole (a rename is atomic)
            os.replace(tmp / f"{t}.parquet", data_dir / f"{t}.parquet")
    except subprocess.CalledProcessError as exc:
        raise RuntimeError(f"tpchgen-cli failed: {exc.stderr[-2000:]}") from exc
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return data_dir


@dataclass
class Tables:
    """The TABLES as dicts of 1-D NumPy arrays, plus the code tables of the string columns."""
    sf: float
    lineitem: dict
    orders: dict
    customer: dict = field(default_factory=dict)
    supplier: dict = field(default_factory=dict)
    nation: dict = field(default_factory=dict)
    region: dict = field(default_factory=dict)
    part: dict = field(default_factory=dict)
    partsupp: dict = field(default_factory=dict)
    codes: dict = field(default_factory=dict)      # column -> sorted list of its strings
    texts: dict = field(default_factory=dict)      # column -> its strings as read (Arrow)
    _inverse: dict = field(default_factory=dict, repr=False)   # column -> {string: code}

    def code(self, column: str, value: str) -> int:
        """The uint8 code of a string value (a query constant)."""
        return self.codes[column].index(value)

    def dated(self, table: str) -> dict:
        """`table`'s columns with the date columns as datetime64[D] (same days; a copy of
        those columns only): what a user's date columns look like."""
        kinds = COLUMNS[table]
        return {name: col.astype("datetime64[D]") if kinds[name] == "date" else col
                for name, col in getattr(self, table).items()}

    def texted(self, table: str) -> dict:
        """`table`'s columns with the string columns as the pyarrow string arrays read from
        the parquet file (no codes): what a user's string columns look like."""
        return {name: self.texts.get(name, col) for name, col in getattr(self, table).items()}

    def coded(self, column: str, strings) -> np.ndarray:
        """The codes of `strings` (a result's string column) in `column`'s code table, so a
        result over real strings compares with the coded engines' results (the inverse table
        is made once per column: it is not the query's work)."""
        table = self._inverse.get(column)
        if table is None:
            table = self._inverse[column] = {v: i for i, v in enumerate(self.codes[column])}
        return np.array([table[v] for v in strings])

    def arrow(self, table: str):
        """A zero-copy pyarrow Table over the NumPy columns (what DuckDB and polars read)."""
        import pyarrow as pa
        return pa.table(getattr(self, table))


def _column(col, kind: str, name: str, codes: dict, texts: dict) -> np.ndarray:
    import pyarrow as pa
    import pyarrow.compute as pc
    col = col.combine_chunks()
    if kind == "float":
        return col.cast(pa.float64()).to_numpy()
    if kind == "date":
        return col.cast(pa.int32()).to_numpy()
    if kind == "int":
        return col.to_numpy()
    col = col.cast(pa.string())                   # string_view -> string (what pc.* accept)
    texts[name] = col
    table = pc.unique(col).sort()
    if kind == "dict":
        codes[name] = table.to_pylist()
        return pc.index_in(col, value_set=table).cast(pa.int32()).to_numpy()
    if len(table) > 256:
        raise ValueError(f"{name} has {len(table)} distinct values: too many for a uint8 code")
    codes[name] = table.to_pylist()
    return pc.index_in(col, value_set=table).cast(pa.uint8()).to_numpy()


def load(sf: float, data_dir: Path | None = None) -> Tables:
    """Generate (if not cached) and load the TABLES at scale factor `sf`."""
    import pyarrow.parquet as pq
    where = ensure_generated(sf, data_dir)
    codes: dict = {}
    texts: dict = {}
    out = {}
    for table, columns in COLUMNS.items():
        arrow = pq.read_table(where / f"{table}.parquet", columns=list(columns))
        out[table] = {name: _column(arrow.column(name), kind, name, codes, texts)
                      for name, kind in columns.items()}
    return Tables(sf, codes=codes, texts=texts, **out)


def column_bytes(table: dict, names) -> int:
    """Bytes of the named columns: what a query reading them must move at least once."""
    return sum(table[n].nbytes for n in names)
