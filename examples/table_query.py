"""A table query (workload W6): revenue of category 3 orders with more than two items, then
records built in `select` and read by field in a later `where`."""
import numpy as np

import querycompute as qc

rng = np.random.default_rng(1)
n = 1_000_000
orders = {
    "price": (rng.random(n, dtype=np.float32) * 100).astype(np.float32),   # [0, 100)
    "qty": rng.integers(1, 20, n, dtype=np.int32),                          # 1 .. 19 items
    "cat": rng.integers(0, 8, n, dtype=np.int32),
}

revenue = (qc.query(orders)
           .where(lambda r: r.cat == 3 and r.qty > 2)
           .sum(lambda r: r.price * r.qty))
mask = (orders["cat"] == 3) & (orders["qty"] > 2)
print("revenue:", revenue, "numpy:", (orders["price"][mask] * orders["qty"][mask]).sum())

# Records can be built in select and read by field later: orders worth more than 900
# (price * qty is a float64: a float32 times an int32 column, NumPy's promotion).
top = (qc.query(orders)
       .select(lambda r: {"value": r.price * r.qty, "cat": r.cat})
       .where(lambda r: r.value > 900)
       .to_array())
print("orders over 900:", len(top["value"]))
print("their categories:", np.bincount(top["cat"], minlength=8).tolist())
print("largest order value:", round(float(top["value"].max()), 2))
