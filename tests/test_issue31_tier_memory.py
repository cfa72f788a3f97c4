"""Issue 31 item 10: a first call answered by the numpy tier must not need several times the
memory of the compiled path. Peak RSS growth per element of order_by().take, group_by and
distinct on int8, measured in fresh processes: tiered with a cold cache (the default first
call) against the compiled path (QUERYCOMPUTE_TIERED=0, the kernels then in the disk cache).
A memory assertion, not a timing one: numbers are bytes (docs/performance.md has the table).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from querycompute.backends import registry

N = 30_000_000                 # int8 elements: 30 MB of input
CONSTANT = 200e6               # bytes: a compile's own (LLVM) memory in the first call

SCRIPT = """
    import json, os, sys, time
    import numpy as np
    import querycompute as qc

    OPS = {"order_by_take": lambda q: q.order_by(lambda v: v).take(10).to_array(),
           "group_by_count": lambda q: q.group_by(lambda v: v).count(),
           "distinct": lambda q: q.distinct().to_array()}

    def peak():
        with open("/proc/self/status") as f:
            return next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmHWM:"))

    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    n = int(sys.argv[1])
    for op in OPS.values():        # the compiler warmed on another dtype (its heap grown)
        deadline = time.monotonic() + 300
        while True:                # until the kernel answers: no warm-up compile still
            op(qc.query(np.arange(1000, dtype=np.int16)).on("cpu"))   # runs while we measure
            if qc.last_trace().tier == "kernel" or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    x = np.resize(np.arange(100, dtype=np.int8), n)
    out = {}
    for name, op in OPS.items():   # each the first call of its signature
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")           # peak RSS := RSS now
        before = rss()
        op(qc.query(x).on("cpu"))
        out[name] = (peak() - before) / n
    print(json.dumps(out))
"""


def _measure(tmp_path, tiered: str) -> dict:
    script = tmp_path / "measure.py"
    script.write_text(textwrap.dedent(SCRIPT))
    env = dict(os.environ, QUERYCOMPUTE_TIERED=tiered, QUERYCOMPUTE_CACHE_DIR=str(tmp_path / "cache"))
    try:
        out = subprocess.run([sys.executable, str(script), str(N)], capture_output=True,
                             text=True, timeout=600, env=env, check=True)
    except subprocess.CalledProcessError as exc:
        pytest.fail(exc.stdout + exc.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not os.access("/proc/self/clear_refs", os.W_OK)
                    or not registry.availability("cpu")[0],
                    reason="needs Linux's peak-RSS reset and the cpu backend")
def test_first_call_memory_per_element_stays_near_the_compiled_path(tmp_path):
    tier = _measure(tmp_path, "1")           # cold cache: the default first call
    compiled = _measure(tmp_path, "0")       # the same kernels, from the disk cache
    for op, bpe in tier.items():
        assert bpe <= 1.5 * compiled[op] + CONSTANT / N, (op, tier, compiled)
