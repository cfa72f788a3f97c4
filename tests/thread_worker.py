"""A separate process that runs queries from many threads at once, for tests/test_threads.py.

    python tests/thread_worker.py chains BACKEND THREADS ROUNDS
    python tests/thread_worker.py repeat BACKEND THREADS CALLS

`chains`: every thread runs all 16 distinct chains below (each thread in its own order, all
threads released together) ROUNDS times and checks each result against plain NumPy.
`repeat`: every thread calls one shared Query CALLS times. Prints one JSON line: the number
of checked results, the errors seen (type and message), and the backends that answered.
"""
from __future__ import annotations

import json
import sys
import threading

import numpy as np

import querycompute as qc

X = (np.arange(1, 5001, dtype=np.float64) % 97) - 40.0
I = np.arange(-2500, 2500, dtype=np.int32)

# 16 distinct chains (distinct code objects), each with its NumPy answer.
CHAINS = [
    (lambda: qc.query(X).select(lambda v: v * 2).sum(), lambda: (X * 2).sum()),
    (lambda: qc.query(X).where(lambda v: v > 3).sum(), lambda: X[X > 3].sum()),
    (lambda: qc.query(X).select(lambda v: v + 1).where(lambda v: v < 0).count(),
     lambda: int(((X + 1) < 0).sum())),
    (lambda: qc.query(X).max(), lambda: X.max()),
    (lambda: qc.query(X).min(lambda v: v * v), lambda: (X * X).min()),
    (lambda: qc.query(X).where(lambda v: v > 10).to_array(), lambda: X[X > 10]),
    (lambda: qc.query(X).select(lambda v: v - 5).to_array(), lambda: X - 5),
    (lambda: qc.query(I).where(lambda v: v % 3 == 0).sum(), lambda: I[I % 3 == 0].sum(dtype=np.int64)),
    (lambda: qc.query(I).count(lambda v: v > 7), lambda: int((I > 7).sum())),
    (lambda: qc.query(I).select(lambda v: v * 3).max(), lambda: (I * 3).max()),
    (lambda: qc.query(I).any(lambda v: v == 17), lambda: True),
    (lambda: qc.query(I).all(lambda v: v > -3000), lambda: True),
    (lambda: qc.query(I).first(lambda v: v > 100), lambda: np.int32(101)),
    (lambda: qc.query(X, X).select(lambda a, b: a * b + 1).sum(), lambda: (X * X + 1).sum()),
    (lambda: qc.query(X).mean(lambda v: v / 2), lambda: (X / 2).mean()),
    (lambda: qc.query(I).where(lambda v: v < -5).select(lambda v: v // 2).to_array(),
     lambda: I[I < -5] // 2),
]


def same(got, want) -> bool:
    return np.array_equal(np.asarray(got), np.asarray(want)) or bool(
        np.allclose(np.asarray(got, dtype=float), np.asarray(want, dtype=float), rtol=1e-12))


def main() -> None:
    mode, backend, threads, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    go = threading.Barrier(threads)
    errors, checked, seen = [], [0], set()
    lock = threading.Lock()
    shared = qc.query(I).on(backend).where(lambda v: v > 0)

    def note_error(exc):
        with lock:
            errors.append(f"{type(exc).__name__}: {exc}"[:300])

    def run_chains(t: int) -> None:
        order = CHAINS[t:] + CHAINS[:t]
        go.wait()
        for _ in range(rounds):
            for make, want in order:
                try:
                    got = make()
                    ok = same(got, want())
                    trace = qc.last_trace()
                except Exception as exc:     # noqa: BLE001  (reported to the test)
                    note_error(exc)
                    continue
                with lock:
                    checked[0] += ok
                    seen.add(trace.backend)
                    if not ok:
                        errors.append(f"wrong result: {got!r} != {want()!r}")

    def run_repeat(t: int) -> None:
        want = int(I[I > 0].sum())
        go.wait()
        for _ in range(rounds):
            try:
                got = int(shared.sum())
            except Exception as exc:         # noqa: BLE001
                note_error(exc)
                continue
            with lock:
                checked[0] += got == want
                if got != want:
                    errors.append(f"wrong result: {got} != {want}")

    target = run_chains if mode == "chains" else run_repeat
    workers = [threading.Thread(target=target, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    print(json.dumps({"checked": checked[0], "errors": errors[:20], "backends": sorted(seen)}))


if __name__ == "__main__":
    backend = sys.argv[2]
    _orig_query = qc.query

    def pinned(*a, **k):
        return _orig_query(*a, **k).on(backend)
    qc.query = pinned          # the chains above call qc.query: each runs on `backend`
    main()
