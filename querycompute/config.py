"""Every environment variable querycompute reads, parsed and validated in one place.

docs/configuration.md lists them (tests/test_issue17_conventions.py checks the page names
each one in VARIABLES). Rules:

- A variable is read when first needed, never at `import querycompute`: a bad value can't
  break the import, and a process may set a variable before its first query.
- An empty value means "unset" (the default).
- A value that is not accepted gives one ConfigWarning naming the variable, the value, what
  is accepted and the default used instead (then the default). Numbers accept what people
  write for them: "1000000", "1_000_000", "1e6" (an exact integer), not "abc" or "1.5".
- NUMBA_DISABLE_JIT belongs to numba; `numba_jit_disabled()` reads it the way numba does, so
  the cpu backend can say it is unavailable (and `auto` picks numpy) instead of failing.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

from .sizes import parse_size
from .log import ConfigWarning, warn

ON_WORDS = ("1", "true", "yes", "on")
OFF_WORDS = ("0", "false", "no", "off")


@dataclass(frozen=True)
class Variable:
    name: str
    default: object           # what an unset (or refused) variable means
    accepted: str             # for the docs page and the warning
    meaning: str
    parse: Callable[[str], object] | None = None     # text -> value; ValueError if refused


def parse_switch(text: str) -> bool:
    word = text.strip().lower()
    if word in ON_WORDS:
        return True
    if word in OFF_WORDS:
        return False
    raise ValueError(text)


def parse_count(text: str, minimum: int = 0) -> int:
    """An integer >= minimum, written as 1000000, 1_000_000 or 1e6 (exactly integral)."""
    word = text.strip().replace("_", "")
    try:
        value = int(word)
    except ValueError:
        number = float(word)                     # ValueError for "abc"
        if not number.is_integer():
            raise ValueError(text) from None
        value = int(number)
    if value < minimum:
        raise ValueError(text)
    return value


VARIABLES = {v.name: v for v in (
    Variable("QUERYCOMPUTE_CACHE", True, "1/0, true/false, yes/no, on/off",
             "0 keeps compiled kernels in memory only (nothing read from or written to disk)",
             parse_switch),
    Variable("QUERYCOMPUTE_CACHE_DIR", None, "a directory path (created when missing)",
             "where the kernel cache lives (default: the platform's user cache directory + "
             "/querycompute)"),
    Variable("QUERYCOMPUTE_CACHE_MAX_SIZE", None, "a size: bytes, or with a unit (500MB, 2GB, "
             "512MiB)", "the disk cache's cap: after a save that takes it over, the least "
             "recently used entries are removed (default: no cap)", parse_size),
    Variable("QUERYCOMPUTE_CACHE_LOCK_STALL", 60, "an integer >= 1: seconds",
             "how long a process waiting for another's compile lock lets the holder use no CPU "
             "(stopped, hung) before compiling without the lock", lambda t: parse_count(t, 1)),
    Variable("QUERYCOMPUTE_DUMP_SOURCE", False, "1/0, true/false, yes/no, on/off",
             "1 logs each kernel's source when it is compiled (logger querycompute.source; "
             "printed on stderr when logging is not configured)", parse_switch),
    Variable("QUERYCOMPUTE_TIERED", True, "1/0, true/false, yes/no, on/off",
             "0 turns tiered execution off: the first call waits for the kernel compile and "
             "raises its CompileError", parse_switch),
    Variable("QUERYCOMPUTE_CPU_LLVM", True, "1/0, true/false, yes/no, on/off",
             "0 makes the cpu backend compile every fused pass with numba; on (the default) a "
             "pass the llvm dialect prints is compiled from LLVM IR with llvmlite (same results, "
             "a far shorter first call)", parse_switch),
    Variable("QUERYCOMPUTE_MEMO_SIZE", 2048, "an integer >= 1 (e.g. 4096, 4e3)",
             "how many compiled queries the in-memory memo keeps", lambda t: parse_count(t, 1)),
    Variable("QUERYCOMPUTE_GPU_MIN_ELEMENTS", 1 << 18, "an integer >= 0 (e.g. 1000000, 1e6)",
             "the smallest input (elements) `auto` sends to a GPU", parse_count),
    Variable("QUERYCOMPUTE_DEVICE_MEMORY", None, "an integer >= 1: bytes (e.g. 8000000000, 8e9)",
             "device memory a query may use for its inputs (cuda, opencl): host columns larger "
             "than that run chunk by chunk (querycompute/run/streaming.py); default: unlimited",
             lambda t: parse_count(t, 1)),
    Variable("QUERYCOMPUTE_KERNEL_TIMES", False, "1/0, true/false, yes/no, on/off",
             "1 times every cuda launch (two events each) so qc.last_trace() has its run time; "
             "off: cuda trace rows say run=nan (opencl's profiling events are free: always timed)",
             parse_switch),
    Variable("QUERYCOMPUTE_WEBGPU_MAX_GROUPS", None, "an integer >= 1",
             "lowers the webgpu backend's workgroups per dimension (default: the adapter's "
             "limit); for tests of the 2-D launch path", lambda t: parse_count(t, 1)),
    Variable("QUERYCOMPUTE_CUDA_ARCH", None, "sm_NN, compute_NN or NN (e.g. sm_90)",
             "the CUDA architecture to compile for (default: the device's); compute_NN "
             "loads PTX"),
    Variable("NUMBA_DISABLE_JIT", False, "numba's: 1 turns numba's compiler off",
             "numba's own switch; with it on the cpu backend is unavailable (the reason says "
             "so) and `auto` picks numpy", None),
)}

_refused: set[tuple[str, str]] = set()      # (name, value) already warned about
_parsed: dict = {}                           # (name, raw value) -> its parsed value


def get(name: str):
    """The value of variable `name` (VARIABLES), parsed; the default when unset, empty or
    refused (then warned once per value)."""
    var = VARIABLES[name]
    raw = os.environ.get(name)
    if raw is None:
        return var.default
    hit = _parsed.get((name, raw), _parsed)          # read on every launch: parse once per value
    if hit is not _parsed:
        return hit
    if not raw.strip():
        return var.default
    if var.parse is None:
        return raw.strip()
    try:
        value = _parsed[(name, raw)] = var.parse(raw)
        return value
    except ValueError:
        if (name, raw) not in _refused:
            _refused.add((name, raw))
            warn(f"querycompute: {name}={raw!r} is not accepted ({var.accepted}); using the "
                 f"default ({_shown(var.default)}). See docs/configuration.md.", ConfigWarning)
        return var.default


_checked = False


def check_all() -> None:
    """Read every variable once, in the caller's thread (the engine calls this before its
    first compile): a refused value is warned about at the user's line, not from inside a
    background compile thread that reads it later."""
    global _checked
    if not _checked:
        _checked = True
        for name in VARIABLES:
            get(name)


def _shown(value) -> str:
    if value is True:
        return "on"
    if value is False:
        return "off"
    return "unset" if value is None else str(value)


def numba_jit_disabled() -> bool:
    """NUMBA_DISABLE_JIT as numba reads it (an integer, non-zero: on), or numba's own
    config once numba is imported (it may have been set in code)."""
    import sys
    numba_config = sys.modules.get("numba.core.config")
    if numba_config is not None:
        return bool(getattr(numba_config, "DISABLE_JIT", False))
    raw = os.environ.get("NUMBA_DISABLE_JIT", "").strip()
    try:
        return bool(int(raw)) if raw else False
    except ValueError:
        return False
