"""Issue 14 "done when": Q1, Q6 and Q12 run correctly through the CPU harness for cuda and
metal on small data. Their whole staged plans (the fused passes, the GPU group_by kernels,
the device hash join, the gathers) run in CUDA C and MSL on CPU threads
(test_issue13_harness.run_staged: the executor the backends use) and must equal the numpy
backend's results on the same columns.

The data is TPC-H shaped (lineitem / orders columns as tpch_data loads them: uint8 codes,
int32 days) but synthetic and small. Metal has no float64, so its decimals are float32;
the cuda run uses float64 as the benchmark does. The query texts are benchmarks/
tpch_queries.py's.
"""
from __future__ import annotations

import numpy as np
import pytest

import querycompute as qc

harness = pytest.importorskip("harness.plans")
from expr_backends import harness_run                  # noqa: E402  (a single fused pass)
from test_issue13_harness import run_staged            # noqa: E402  (a staged plan)

N_LINES, N_ORDERS = 3000, 700                  # several tiles of every kernel, fast on the harness


def tables(decimal: str) -> tuple[dict, dict]:
    rng = np.random.default_rng(14)
    orderkey = rng.integers(1, 4 * N_ORDERS, N_LINES).astype(np.int64)
    ship = rng.integers(8000, 10500, N_LINES).astype(np.int32)
    commit = (ship + rng.integers(-30, 60, N_LINES)).astype(np.int32)
    lineitem = {
        "l_orderkey": orderkey,
        "l_quantity": rng.integers(1, 51, N_LINES).astype(decimal),
        "l_extendedprice": (rng.integers(90000, 10000000, N_LINES) / 100).astype(decimal),
        "l_discount": (rng.integers(0, 11, N_LINES) / 100).astype(decimal),
        "l_tax": (rng.integers(0, 9, N_LINES) / 100).astype(decimal),
        "l_returnflag": rng.integers(0, 3, N_LINES).astype(np.uint8),
        "l_linestatus": rng.integers(0, 2, N_LINES).astype(np.uint8),
        "l_shipmode": rng.integers(0, 7, N_LINES).astype(np.uint8),
        "l_shipdate": ship,
        "l_commitdate": commit,
        "l_receiptdate": (commit + rng.integers(-20, 40, N_LINES)).astype(np.int32),
    }
    orders = {"o_orderkey": rng.permutation(np.arange(1, 4 * N_ORDERS, 4))[:N_ORDERS].astype(np.int64),
              "o_orderpriority": rng.integers(0, 5, N_ORDERS).astype(np.uint8)}
    return lineitem, orders


def q1(lineitem):
    cutoff = 10400
    g = (qc.query(lineitem).where(lambda r: r.l_shipdate <= cutoff)
         .group_by(lambda r: (r.l_returnflag, r.l_linestatus)))
    return g._query, dict(
        sum_qty=qc.sum(lambda r: r.l_quantity), sum_base_price=qc.sum(lambda r: r.l_extendedprice),
        sum_disc_price=qc.sum(lambda r: r.l_extendedprice * (1 - r.l_discount)),
        sum_charge=qc.sum(lambda r: r.l_extendedprice * (1 - r.l_discount) * (1 + r.l_tax)),
        avg_qty=qc.mean(lambda r: r.l_quantity), avg_price=qc.mean(lambda r: r.l_extendedprice),
        avg_disc=qc.mean(lambda r: r.l_discount), count_order=qc.count)


def q6(lineitem):
    lo, hi = 8766, 9131
    return qc.query(lineitem).where(
        lambda r: r.l_shipdate >= lo and r.l_shipdate < hi and r.l_discount >= 0.05
        and r.l_discount <= 0.07 and r.l_quantity < 24).select(lambda r: r.l_extendedprice * r.l_discount)


def q12(lineitem, orders):
    mail, ship, urgent, high = 2, 5, 0, 1
    lo, hi = 8766, 9500
    lines = qc.query(lineitem).where(
        lambda r: (r.l_shipmode == mail or r.l_shipmode == ship) and r.l_commitdate < r.l_receiptdate
        and r.l_shipdate < r.l_commitdate and r.l_receiptdate >= lo and r.l_receiptdate < hi)
    g = (lines.join(qc.query(orders), lambda r: r.l_orderkey, lambda o: o.o_orderkey,
                    lambda r, o: {"mode": r.l_shipmode, "prio": o.o_orderpriority}).group_by(lambda r: r.mode))
    return g._query, dict(high_line_count=qc.sum(lambda r: int(r.prio == urgent or r.prio == high)),
                          low_line_count=qc.sum(lambda r: int(r.prio != urgent and r.prio != high)))


def grouped(query, named, dialect):
    got = run_staged(query, qc.agg(**named), dialect)
    want = qc.Grouped(query.on("numpy")).agg(**named)
    return got, want


def assert_groups(got: dict, want: dict, rtol: float):
    assert list(got) == list(want)
    for k in want:
        if np.asarray(want[k]).dtype.kind == "f":
            np.testing.assert_allclose(got[k], want[k], rtol=rtol)
        else:
            np.testing.assert_array_equal(got[k], want[k])


@pytest.fixture(params=["cuda", "metal"])
def dialect(request):
    ok, why = harness.runner.available()
    if not ok:
        pytest.skip(why)
    return request.param


def test_done_when_q1_q6_q12_through_the_harness(dialect):
    decimal = np.float64 if dialect == "cuda" else np.float32
    rtol = 1e-12 if dialect == "cuda" else 1e-5
    lineitem, orders = tables(decimal)
    got, want = grouped(*q1(lineitem), dialect)
    assert len(want["count_order"]) == 6 and want["count_order"].sum() > N_LINES // 2
    assert_groups(got, want, rtol)
    q = q6(lineitem)
    assert q.on("numpy").count() > 10
    np.testing.assert_allclose(harness_run(q, "sum", dialect), q.on("numpy").sum(), rtol=rtol)
    got, want = grouped(*q12(lineitem, orders), dialect)
    assert want["high_line_count"].sum() + want["low_line_count"].sum() > 0
    assert_groups(got, want, 0)
