"""querycompute's logger and warnings: one home for how the library talks to its user.

- `logger` (`logging.getLogger("querycompute")`): compile start (DEBUG) and end with its
  duration and where the kernel came from (INFO: "compiled", "disk"; a memo hit is DEBUG),
  the tier a new signature starts on and the switch to the kernel, backend fallbacks. The
  library adds only a NullHandler: nothing is printed until the application configures
  logging (`logging.basicConfig(level=logging.INFO)`).
- `querycompute.source`: the kernel sources QUERYCOMPUTE_DUMP_SOURCE=1 asks for. When the
  application has configured no handler, one printing to stderr is attached, so the switch
  works on its own.
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
import warnings

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
