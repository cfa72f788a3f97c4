"""A table query (workload W6): revenue of category 3 orders with more than two items."""
import numpy as np

import querycompute as qc

rng = np.random.default_rng(1)
n = 1_000_000
orders = {
    "price": (rng.random(n, dtype=np.float32) * 100).astype(np.float32),
    "qty": rng.integers(0, 10, n, dtype=np.int32),
    "cat": rng.integers(0, 8, n, dtype=np.int32),
}

revenue = (qc.query(orders)
           .where(lambda r: r.cat == 3 and r.qty > 2)
           .sum(lambda r: r.price * r.qty))
mask = (orders["cat"] == 3) & (orders["qty"] > 2)
print("revenue:", revenue, "numpy:", (orders["price"][mask] * orders["qty"][mask]).sum())

# Records can be built in select and read by field later.
top = (qc.query(orders)
       .select(lambda r: {"value": r.price * r.qty, "cat": r.cat})
       .where(lambda r: r.value > 900)
       .to_array())
print("orders over 900:", len(top["value"]), "categories:", np.bincount(top["cat"], minlength=8))
