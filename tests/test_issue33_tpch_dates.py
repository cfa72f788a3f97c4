"""Issue 33: TPC-H Q7, Q8 and Q9 (the queries that take the year of a date) written with the
library and checked against DuckDB's answer to the official SQL, as benchmarks/tpch.py runs
them, at scale factor 0.01 on the cpu and numpy backends: over int32 day numbers (`year_of`)
and again over real datetime64[D] date columns (`qc-<backend>-dates`: `d.year`, captured
np.datetime64 bounds). No timing is asserted."""
from __future__ import annotations

import numpy as np
import pytest

from test_issue27_tpch_joins import run_checked


@pytest.mark.parametrize("query", ["Q7", "Q8", "Q9"])
def test_date_queries_agree_with_duckdb(tpch_tables, query):
    rows = run_checked(query, tpch_tables)
    assert {"qc-cpu-dates", "qc-numpy-dates"} <= set(rows)


def test_date_queries_have_rows(tpch_tables, monkeypatch):
    """The agreement above is over real rows: Q7's (nation pair, year) groups, Q8's two years
    (at this scale BRAZIL's share is 0: the shares of all 25 nations sum to 1 each year),
    Q9's nations."""
    import tpch_queries as Q
    q7 = Q.qc_q7(tpch_tables, "cpu")()
    assert set(q7["l_year"].tolist()) == {1995, 1996} and len(q7["revenue"]) == 4
    shares = []
    for nation in tpch_tables.codes["n_name"]:
        monkeypatch.setattr(Q, "Q8_NATION", nation)
        q8 = Q.qc_q8(tpch_tables, "cpu")()
        assert q8["o_year"].tolist() == [1995, 1996]
        shares.append(q8["mkt_share"])
    assert np.allclose(np.sum(shares, axis=0), 1.0)
    q9 = Q.qc_q9(tpch_tables, "cpu")()
    assert len(set(q9["nation"].tolist())) == 25


def test_year_of_matches_numpy_over_the_tpch_range():
    import tpch_queries as Q
    days = np.arange(-25567, 47482, dtype=np.int32)          # 1900-01-01 .. 2099-12-31
    years = days.astype("datetime64[D]").astype("datetime64[Y]").astype(np.int64) + 1970
    assert np.array_equal(Q.year_of(days[days >= -24837].astype(np.int64)),
                          years[days >= -24837])              # from 1902 (1900 is no leap year)
