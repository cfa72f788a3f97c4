"""Issue 13 item 6: examples/top_k_and_running_totals.py prints what NumPy computes."""
import ast
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

SCRIPT = pathlib.Path(__file__).parent.parent / "examples" / "top_k_and_running_totals.py"
BACKENDS = ["numpy", "cpu"]      # (opencl runs the same operators in test_issue13_operators.py)


def expected() -> dict:
    rng = np.random.default_rng(2026)
    n = 100_000
    price = np.round(rng.random(n, dtype=np.float32) * 100, 2).astype(np.float32)
    qty = rng.integers(1, 50, n).astype(np.int32)
    account = rng.integers(0, 500, n).astype(np.int32)
    keep = np.flatnonzero(qty > 10)
    value = price[keep].astype(np.float64) * qty[keep]
    top = keep[np.argsort(-value, kind="stable")[:5]]
    running = np.cumsum(qty.astype(np.int64))
    _, first = np.unique(account, return_index=True)
    accounts = account[np.sort(first)]
    cheapest = int(np.argmin(price))
    return {
        "top 5 trades (account, value)": [(int(account[i]), round(float(price[i]) * float(qty[i]), 2)) for i in top],
        "running total after 5 trades": running[:5].tolist(),
        "trades until 1,000,000 units": int(np.argmax(running >= 1_000_000)),
        "distinct accounts": len(accounts),
        "page 3 of accounts": accounts[20:30].tolist(),
        "cheapest trade": {"price": float(price[cheapest]), "qty": int(qty[cheapest]),
                           "account": int(account[cheapest])},
        "median price": round(float(np.sort(price, kind="stable")[n // 2]), 2),
    }


@pytest.mark.parametrize("backend", BACKENDS)
def test_item6_example_output_matches_numpy(backend, tmp_path):
    env = {**os.environ, "QUERYCOMPUTE_CACHE_DIR": str(tmp_path / "cache")}
    r = subprocess.run([sys.executable, str(SCRIPT), backend], capture_output=True, text=True,
                       env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    got = {}
    for line in r.stdout.splitlines():
        key, sep, value = line.partition(": ")
        if sep and key in WANT:
            got[key] = ast.literal_eval(value)
    for key, want in WANT.items():
        assert got[key] == want, key
    assert "top-k (no full sort)" in r.stdout


WANT = expected()
