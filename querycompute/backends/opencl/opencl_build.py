"""Build an OpenCL program from source without the driver's chatter reaching the user.

pocl's clang writes its diagnostics summary ("2 warnings generated.") straight to file
descriptor 2, and PyOpenCL's `Program.build` turns a non-empty build log into a
CompilerWarning. Neither helps a querycompute user: the kernels are generated, and a real
error becomes a CompileError carrying the log. So:

- the build runs through PyOpenCL's unwrapped `_Program._build` (no CompilerWarning); the
  build log goes to the `querycompute` logger at DEBUG;
- file descriptor 2 is pointed at a temporary file for the build (log.captured_fd2: one
  redirection at a time, under its lock); afterwards the captured bytes are written back to
  the real stderr, less the lines that are the compiler's (the build log's lines and "N
  warning(s) generated."). Whatever else another thread wrote to stderr meanwhile still
  reaches it, only later.
- a failed build raises CompileError with the build log and whatever the compiler printed.
"""
from __future__ import annotations

import os
import re
import sys

from ...errors import CompileError
from ...log import captured_fd2, logger

_SUMMARY = re.compile(rb"^\d+ (warning|error)s? generated\.$")


def build_quietly(cl, ctx, device, source: str, options) -> object:
    """cl.Program built from `source` for `device` (no binary cache of PyOpenCL's)."""
    raw_program = getattr(cl._cl, "_Program", None)
    if raw_program is None or not hasattr(raw_program, "_build"):
        # A PyOpenCL without the unwrapped class: its public build (CompilerWarning and all).
        return cl.Program(ctx, source).build(options=list(options), devices=[device])
    raw = raw_program(ctx, source)
    printed, error = _captured_fd2(lambda: raw._build(options=" ".join(options).encode(),
                                                  devices=[device]))
    log = raw.get_build_info(device, cl.program_build_info.LOG) or ""
    _pass_through(printed, log)
    if error is not None:
        text = "\n".join(part for part in (log.strip(), printed.decode(errors="replace").strip(),
                                           str(error)) if part)
        raise CompileError("opencl", text, source, options) from None
    if log.strip():
        logger.debug("OpenCL build log:\n%s", log.strip())
    return cl.Program(raw)


def _captured_fd2(build) -> tuple[bytes, BaseException | None]:
    """Run build() with fd 2 redirected (log.captured_fd2): (bytes written, its error)."""
    error = None
    with captured_fd2() as caught:
        try:
            build()
        except Exception as exc:          # cl.Error, cl.RuntimeError: reported by the caller
            error = exc
    return b"".join(caught), error


def _pass_through(printed: bytes, log: str) -> None:
    """Write back to stderr what the build window caught that is not the compiler's."""
    ours = {line.strip() for line in log.encode(errors="replace").splitlines() if line.strip()}
    rest = [line for line in printed.splitlines(keepends=True)
            if line.strip() and line.strip() not in ours and not _SUMMARY.match(line.strip())]
    if rest:
        sys.stderr.flush()
        os.write(2, b"".join(rest))
