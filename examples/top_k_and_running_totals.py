"""Top-k, running totals, distinct values and paging: the pipeline operators.

    python examples/top_k_and_running_totals.py [backend]

A day of trades (price, quantity, account). Each query below is planned as fused passes with
column operations between them (sorts, scans, first-occurrence flags); `explain()` shows the
stages. The output is checked by tests/test_issue13_example.py.
"""
import sys

import numpy as np

import querycompute as qc

backend = sys.argv[1] if len(sys.argv) > 1 else "cpu"
rng = np.random.default_rng(2026)
n = 100_000
trades = {"price": np.round(rng.random(n, dtype=np.float32) * 100, 2).astype(np.float32),
          "qty": rng.integers(1, 50, n).astype(np.int32),
          "account": rng.integers(0, 500, n).astype(np.int32)}
q = qc.query(trades).on(backend)

# The 5 largest trades by value among those of more than 10 units: a top-k, not a full sort.
top = q.where(lambda t: t.qty > 10).order_by_descending(lambda t: t.price * t.qty).take(5) \
       .select(lambda t: (t.account, t.price * t.qty)).to_list()
print("top 5 trades (account, value):", [(int(a), round(float(v), 2)) for a, v in top])

# Running total of quantities, and the first trade where it passes 1,000,000 units.
running = q.select(lambda t: t.qty).scan(lambda total, v: total + v, 0)
print("running total after 5 trades:", running.take(5).to_list())
print("trades until 1,000,000 units:", running.take_while(lambda total: total < 1_000_000).count())

# Accounts in order of their first trade, and page 3 (10 per page) of them.
first_seen = q.select(lambda t: t.account).distinct()
print("distinct accounts:", first_seen.count())
print("page 3 of accounts:", first_seen.skip(20).take(10).to_list())

# The cheapest trade (a min-by) and the median price.
cheapest = q.order_by(lambda t: t.price).first()
print("cheapest trade:", {k: v.item() for k, v in cheapest.items()})
print("median price:", round(float(q.select(lambda t: t.price).order_by().element_at(n // 2)), 2))

print()
print(q.where(lambda t: t.qty > 10).order_by_descending(lambda t: t.price * t.qty).take(5)
       .select(lambda t: t.price * t.qty).explain())
