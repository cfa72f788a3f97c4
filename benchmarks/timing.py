"""Timing: one first call (compile + run, reported apart), then the median of warm samples.

Small inputs finish in microseconds, below the timer's useful resolution and at the mercy of
one scheduler hiccup, so each warm *sample* repeats the call enough times to last about
MIN_SAMPLE_S and reports the per-call mean; the figure is the median of the samples.
`interleaved` takes the samples of several implementations round-robin, so a burst of load
from other processes lands on all of them alike and their ratios stay comparable. The order
changes every round (a rotation) and each sample starts with one untimed call: whoever ran
right after an implementation that sweeps the caches (numpy's temporaries) paid for refilling
them while the next one found its input warm (this machine's 32 MB L3 holds most of a 40 MB
input), so a fixed order decided ratios by up to 25%."""
from __future__ import annotations

import atexit
import os
import subprocess
import sys
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


def _calls_per_sample(run: Callable[[], Any]) -> int:
    t0 = time.perf_counter()
    run()
    once = time.perf_counter() - t0
    return max(1, min(10_000, int(MIN_SAMPLE_S / max(once, 1e-9))))


def _sample_ms(run: Callable[[], Any], calls: int) -> float:
    t0 = time.perf_counter()
    for _ in range(calls):
        run()
    return (time.perf_counter() - t0) / calls * 1e3


def _summary(per_call: list[float], calls: int) -> Timing:
    per_call = sorted(per_call)
    return Timing(per_call[len(per_call) // 2], per_call[0], len(per_call), calls)


def warm(run: Callable[[], Any], samples: int) -> Timing:
    """Median over `samples` samples of the per-call time of `run` (already warmed up)."""
    calls = _calls_per_sample(run)
    return _summary([_sample_ms(run, calls) for _ in range(samples)], calls)


def interleaved(runs: dict[str, Callable[[], Any]], samples: int) -> dict[str, Timing]:
    """Like `warm` for each entry of `runs`, taking their samples round-robin."""
    calls = {k: _calls_per_sample(r) for k, r in runs.items()}
    per_call: dict[str, list[float]] = {k: [] for k in runs}
    names = list(runs)
    for i in range(samples):
        for k in names[i % len(names):] + names[:i % len(names)]:     # rotated (docstring)
            runs[k]()
            per_call[k].append(_sample_ms(runs[k], calls[k]))
    return {k: _summary(v, calls[k]) for k, v in per_call.items()}


def load_average() -> float:
    """1-minute load average: other jobs on the machine skew every figure, so record it."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


_BURN = "while True: pass"


def busy() -> subprocess.Popen:
    """Start one CPU-burning process beside the benchmark (`--busy`: the issue 28 figures
    "with one core busy"), stopped when this process exits. Returns the process."""
    burner = subprocess.Popen([sys.executable, "-c", _BURN], stdin=subprocess.DEVNULL)

    def stop() -> None:
        burner.kill()
        burner.wait()
    atexit.register(stop)
    time.sleep(0.2)                   # let it start burning before the first sample
    return burner


def busy_arg(ap) -> None:
    """Add the `--busy` switch to a benchmark's argparse parser (start it with `busy()`)."""
    ap.add_argument("--busy", action="store_true",
                    help="run with one CPU-burning process beside the benchmark (timing.busy)")


def profile(run: Callable[[], Any], calls: int = 20000, top: int = 15) -> None:
    """Print a cProfile of `calls` calls of `run` (after one untimed call), by own time."""
    import cProfile
    import pstats
    run()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        run()
    prof.disable()
    print(f"\ncProfile of {calls} calls (tottime; per call = / {calls}):")
    pstats.Stats(prof).sort_stats("tottime").print_stats(top)
