"""Timing: one first call (compile + run, reported apart), then the median of warm runs.

Small inputs finish in microseconds, below the timer's useful resolution and at the mercy of
one scheduler hiccup, so each warm *sample* repeats the call enough times to last about
MIN_SAMPLE_S and reports the per-call mean; the figure is the median of the samples."""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any, Callable

MIN_SAMPLE_S = 2e-3


@dataclass
class Timing:
    median_ms: float
    min_ms: float
    samples: int
    calls_per_sample: int


def first_call(run: Callable[[], Any]) -> tuple[Any, float]:
    """(result, wall ms) of the first call, which includes any JIT compile."""
    t0 = time.perf_counter()
    result = run()
    return result, (time.perf_counter() - t0) * 1e3


def warm(run: Callable[[], Any], samples: int) -> Timing:
    """Median over `samples` samples of the per-call time of `run` (already warmed up)."""
    t0 = time.perf_counter()
    run()
    once = time.perf_counter() - t0
    calls = max(1, min(10_000, int(MIN_SAMPLE_S / max(once, 1e-9))))
    per_call = []
    for _ in range(samples):
        t0 = time.perf_counter()
        for _ in range(calls):
            run()
        per_call.append((time.perf_counter() - t0) / calls * 1e3)
    per_call.sort()
    return Timing(per_call[len(per_call) // 2], per_call[0], samples, calls)


def load_average() -> float:
    """1-minute load average: other jobs on the machine skew every figure, so record it."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")
