"""querycompute's logger and warnings: one home for how the library talks to its user.

- `logger` (`logging.getLogger("querycompute")`): compile start (DEBUG) and end with its
  duration and where the kernel came from (INFO: "compiled", "disk"; a memo hit is DEBUG),
  the tier a new signature starts on and the switch to the kernel, backend fallbacks. The
  library adds only a NullHandler: nothing is printed until the application configures
  logging (`logging.basicConfig(level=logging.INFO)`).
- `compiling(what)` (and compiling_begin / compiling_end): a compile in flight; one running
  longer than PROGRESS_AFTER seconds is logged at INFO by a watcher thread (one, a daemon),
  with how long so far (again every PROGRESS_EVERY seconds), and with its total when it ends,
  so a long first call says what it waits for. Only a compile enters it (engine._prepare,
  numba compiling one of our entry points, DiskCache.obtain's compile_fn): a warm call never.
- `querycompute.source`: the kernel sources QUERYCOMPUTE_DUMP_SOURCE=1 asks for. When the
  application has configured no handler, one printing to stderr is attached, so the switch
  works on its own.
- `native_stderr(what)`: what a driver's native code (or a library's last-resort logging)
  writes to file descriptor 2 while a device is probed or a program built goes to `logger`
  at DEBUG instead of the user's stderr (wgpu-native's "Forcing backend: Vulkan", Mesa's
  "XDG_RUNTIME_DIR is invalid"); `captured_fd2` is the redirection under it.
- `warn(message, category)`: every warning the library raises goes through it, with the
  stacklevel of the first frame outside the querycompute package, so the warning names the
  user's line, not a line of the library (however deep the call that warned).
- FallbackWarning (a backend or tier was given up for another) and ConfigWarning (an
  environment variable's value was refused) subclass UserWarning (FallbackWarning also
  RuntimeWarning, its class before), so `-W error::UserWarning`
  and filters on these classes both work.
"""
from __future__ import annotations

import logging
import os
import sys
import tempfile
import threading
import time
import warnings
from contextlib import contextmanager

from . import after_fork

logger = logging.getLogger("querycompute")
logger.addHandler(logging.NullHandler())      # a library never prints logs on its own
source_logger = logging.getLogger("querycompute.source")

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


class FallbackWarning(UserWarning, RuntimeWarning):
    """querycompute gave up a backend or a kernel tier for another: the result is still
    right, but computed elsewhere than asked (e.g. a GPU that failed at run time -> cpu, a
    background compile that failed -> the numpy tier). `qc.last_trace()` says why.
    (Also a RuntimeWarning, what these warnings were before the class existed.)"""


class ConfigWarning(UserWarning):
    """An environment variable (docs/configuration.md) holds a value that is not accepted;
    its default is used instead."""


def user_stacklevel() -> int:
    """The `stacklevel` that makes warnings.warn, called by this function's caller's caller
    (warn below), name the first frame outside the querycompute package (a background
    thread with no such frame: its outermost frame)."""
    frame = sys._getframe(2)          # 0: here, 1: warn(), 2: the library code that warned
    level = 2
    while frame.f_back is not None and _library_frame(frame.f_code.co_filename):
        frame = frame.f_back
        if not _import_frame(frame.f_code.co_filename):
            level += 1            # (warnings.warn does not count the import machinery's)
    return level


def _import_frame(filename: str) -> bool:
    return "importlib" in filename and "_bootstrap" in filename       # as warnings.py tells


def _library_frame(filename: str) -> bool:
    """The package's own frames, and the import machinery's (a warning raised while
    `import querycompute` runs belongs to the user's import line)."""
    return filename.startswith(_PACKAGE_DIR) or _import_frame(filename)


def warn(message: str, category: type[Warning] = UserWarning) -> None:
    """warnings.warn pointing at the user's line (see user_stacklevel)."""
    warnings.warn(message, category, stacklevel=user_stacklevel())


def _has_real_handler(log: logging.Logger) -> bool:
    """Does a record of `log` reach a handler other than a NullHandler?"""
    current: logging.Logger | None = log
    while current is not None:
        if any(not isinstance(h, logging.NullHandler) for h in current.handlers):
            return True
        current = current.parent if current.propagate else None
    return False


def emit_source(text: str) -> None:
    """Log a kernel source dump (QUERYCOMPUTE_DUMP_SOURCE=1) on querycompute.source at INFO;
    without a handler configured by the application, print it to stderr."""
    if not _has_real_handler(source_logger):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        source_logger.addHandler(handler)
    if source_logger.level == logging.NOTSET or source_logger.level > logging.INFO:
        source_logger.setLevel(logging.INFO)
    source_logger.info("%s", text)


_fd2_lock = threading.RLock()      # one redirection of fd 2 at a time (nested: same thread)


@contextmanager
def captured_fd2():
    """Point file descriptor 2 at a temporary file for the block; the yielded list then holds
    the bytes written meanwhile (by native code, and by sys.stderr, flushed before the fd is
    restored). Anything another thread wrote to fd 2 in the window is among them. Where fd 2
    is closed, nothing is redirected (and nothing caught)."""
    caught: list[bytes] = []
    with _fd2_lock:
        _flush_stderr()
        try:
            saved = os.dup(2)
        except OSError:                    # no fd 2 (a daemon's): nothing to keep off it
            yield caught
            return
        with tempfile.TemporaryFile() as tmp:
            os.dup2(tmp.fileno(), 2)
            try:
                yield caught
            finally:
                _flush_stderr()
                os.dup2(saved, 2)
                os.close(saved)
                tmp.seek(0)
                caught.append(tmp.read())


def _flush_stderr() -> None:
    try:
        if sys.stderr is not None:
            sys.stderr.flush()
    except (OSError, ValueError):           # closed (`querycompute cache list | head`)
        pass


@contextmanager
def native_stderr(what: str):
    """Run the block (a device probe: wgpu's adapter request, OpenCL's platform query) with
    fd 2 captured (captured_fd2); the lines caught go to `logger` at DEBUG, naming `what`."""
    caught: list[bytes] = []
    try:
        with captured_fd2() as caught:
            yield
    finally:                               # (an error raised in the block keeps its lines too)
        text = b"".join(caught).decode(errors="replace").strip()
        if text:
            logger.debug("%s wrote to stderr:\n%s", what, text)


PROGRESS_AFTER = 1.0          # seconds a compile runs before its progress is logged
PROGRESS_EVERY = 2.0          # and then how often
_inflight: dict[int, list] = {}      # thread id -> stack of [what or None, start, next log]
_watch = {"cond": threading.Condition(), "thread": None}


def compiling_begin(what: str | None) -> None:
    """This thread starts compiling `what` (None: not ours to report; kept for the pairing
    with compiling_end). Nothing is tracked unless INFO records of `logger` go somewhere."""
    if what is not None and not logger.isEnabledFor(logging.INFO):
        what = None
    now = time.monotonic()
    cond = _watch["cond"]
    with cond:
        _inflight.setdefault(threading.get_ident(), []).append([what, now, now + PROGRESS_AFTER])
        if what is not None:
            if _watch["thread"] is None:
                _watch["thread"] = threading.Thread(target=_watcher, name="querycompute-compile-progress",
                                                    daemon=True)
                _watch["thread"].start()
            cond.notify()


def compiling_end() -> None:
    """This thread's innermost compile ended; one that ran PROGRESS_AFTER seconds or more
    logs its total at INFO ("compiled <what> in X s")."""
    entry = None
    with _watch["cond"]:
        stack = _inflight.get(threading.get_ident())
        if stack:
            entry = stack.pop()
            if not stack:
                del _inflight[threading.get_ident()]
    if entry is not None and entry[0] is not None:
        seconds = time.monotonic() - entry[1]
        if seconds >= PROGRESS_AFTER:
            logger.info("compiled %s in %.1f s", entry[0], seconds)


@contextmanager
def compiling(what: str):
    """`with compiling("the cpu kernel for ..."):` around a compile (see compiling_begin)."""
    compiling_begin(what)
    try:
        yield
    finally:
        compiling_end()


def _watcher() -> None:
    """Log each thread's outermost compile (and the innermost step, when another) once it ran
    PROGRESS_AFTER seconds, then every PROGRESS_EVERY seconds, until it ends."""
    cond = _watch["cond"]
    while True:
        lines = []
        with cond:
            while not any(e[0] is not None for stack in _inflight.values() for e in stack):
                cond.wait()
            cond.wait(0.25)
            now = time.monotonic()
            for stack in _inflight.values():
                shown = [e for e in stack if e[0] is not None]
                if shown and now >= shown[0][2]:
                    outer = shown[0]
                    outer[2] = now + PROGRESS_EVERY
                    inner = f" (now: {shown[-1][0]})" if len(shown) > 1 else ""
                    lines.append((outer[0], now - outer[1], inner))
        for what, seconds, inner in lines:
            logger.info("still compiling %s: %.1f s so far%s", what, seconds, inner)


def _after_fork() -> None:
    """In a forked child the watcher thread is gone and its lock (or fd 2's) may be held."""
    global _fd2_lock
    _inflight.clear()
    _watch["cond"], _watch["thread"] = threading.Condition(), None
    _fd2_lock = threading.RLock()        # (a thread that held it is gone)


after_fork.register(_after_fork)
