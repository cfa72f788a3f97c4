"""The `querycompute` command (also `python -m querycompute`).

  querycompute demo                       example queries on this machine's default backend
  querycompute backends [--json]          which backends run here, and why not
  querycompute source  CHAIN [--dtype D | --input a:D ... | --field f:D ...] [--backend B]
  querycompute explain CHAIN [same options] [--n N]
  querycompute cache list|show|stats|clear|prune ...
The CHAIN text is parsed, never executed.

Exit status: 0 done, 1 the query or the cache could not be handled ("querycompute: error:
..." on stderr, no traceback), 2 a usage error (argparse's message).
"""
from __future__ import annotations

import argparse
import json
import sys

from ..backends.registry import NAMES
from ..errors import QueryError

USAGE_LINES = __doc__.split("\n\n")[1]


def count_argument(text: str) -> int:
    """--n: a non-negative integer, written 1000000, 1_000_000 or 1e6."""
    from ..config import parse_count
    try:
        return parse_count(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a count of elements: give an integer >= 0, e.g. 1000000 or 1e6") from None


def dtype_argument(text: str) -> str:
    """--dtype: a name NumPy knows (whether a kernel can hold it is the query's error)."""
    import numpy as np
    try:
        np.dtype(text)
    except TypeError:
        raise argparse.ArgumentTypeError(
            f"unknown dtype {text!r}; use e.g. float32, float64, int32, int64, bool") from None
    return text


def pair_argument(text: str) -> str:
    """--input / --field: NAME:DTYPE."""
    name, sep, dt = text.partition(":")
    if not sep or not name.isidentifier():
        raise argparse.ArgumentTypeError(f"{text!r} must look like name:dtype, e.g. price:float32")
    dtype_argument(dt)
    return text


def _chain_args(p: argparse.ArgumentParser, default_backend: str) -> None:
    p.add_argument("chain", help="e.g. 'select(lambda v: v*2).where(lambda v: v > 1000).sum()'")
    inputs = p.add_mutually_exclusive_group()      # one input, a zip or a table: usage error (2)
    inputs.add_argument("--dtype", type=dtype_argument, default=None,
                        help="element dtype of a single input (default float32)")
    inputs.add_argument("--input", action="append", default=[], metavar="NAME:DTYPE",
                        type=pair_argument, help="one input of a zip; repeat for each")
    inputs.add_argument("--field", action="append", default=[], metavar="NAME:DTYPE",
                        type=pair_argument, help="one column of a table; repeat for each")
    choices = NAMES if default_backend != "auto" else ("auto",) + NAMES
    p.add_argument("--backend", default=default_backend, choices=choices,
                   type=lambda b: "webgpu" if b == "wgsl" else b,     # the dialect's name
                   help=f"the backend to show; wgsl names webgpu (default {default_backend})")
    p.add_argument("--n", type=count_argument, default=1_000_000,
                   help="sequence length assumed for launch shapes (default 1e6)")
    p.add_argument("--json", action="store_true", help="print one JSON document")


def _build(args):
    from .chain import chain_to_query, placeholder_source
    src = placeholder_source(args.dtype or "float32", args.input, args.field, args.n)
    return chain_to_query(args.chain, src)


def _document(args, backend: str, key: str, text: str) -> dict:
    return {"chain": args.chain, "backend": backend, "n": args.n,
            "dtypes": [str(c.dtype) for c in args.query_columns], key: text}


def cmd_source(args) -> int:
    q, terminal = _build(args)
    text = q.source(args.backend, terminal=terminal)
    if args.json:
        args.query_columns = q._source.columns()
        print(json.dumps(_document(args, args.backend, "source", text), indent=2, sort_keys=True))
    else:
        print(text)
    return 0


def cmd_explain(args) -> int:
    q, terminal = _build(args)
    backend = args.backend
    if backend == "auto":
        from ..backends.registry import choose_auto
        backend = choose_auto(args.n, False)
    text = q.explain(backend, terminal=terminal)
    if args.json:
        args.query_columns = q._source.columns()
        print(json.dumps(_document(args, backend, "explain", text), indent=2, sort_keys=True))
    else:
        print(text)
    return 0


def cmd_backends(args) -> int:
    from ..backends.registry import backends
    info = backends()
    if args.json:
        print(json.dumps(info, indent=2, sort_keys=True))
        return 0
    for name, row in info.items():
        mark = "yes" if row["available"] else "no "
        print(f"{name:<7} {mark}  {row['reason']}")
    return 0


def cmd_demo(args) -> int:
    from .demo import run_demo
    return run_demo(n=args.n)


def make_parser() -> argparse.ArgumentParser:
    from .. import __version__
    p = argparse.ArgumentParser(prog="querycompute", description=__doc__.split("\n\n")[0],
                                epilog="commands:\n" + USAGE_LINES,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"querycompute {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, summary: str, description: str):
        return sub.add_parser(name, help=summary, description=description)

    d = command("demo", "run example queries here and show results, timings and source",
                "Run a few example queries on this machine's default backend and show their "
                "results (checked against NumPy), timings and generated source.")
    d.add_argument("--n", type=count_argument, default=5_000_000,
                   help="elements per example (default 5e6)")
    d.set_defaults(func=cmd_demo)
    b = command("backends", "which backends can run here, and why not",
                "List every backend, whether it can run on this machine, and the reason "
                "(what to install) when it can't.")
    b.add_argument("--json", action="store_true", help="print one JSON document")
    b.set_defaults(func=cmd_backends)
    s = command("source", "print the generated kernel source of a query chain",
                "Print the kernel source the chain compiles to in one backend's dialect. "
                "Needs no device; the chain text is parsed, never executed.")
    _chain_args(s, "cuda")
    s.set_defaults(func=cmd_source)
    e = command("explain", "print the operation graph, fused plan and launch shapes",
                "Print the chain's operation graph, the fused plan, launch shapes and bytes "
                "moved per element for --n elements (auto: the backend auto would pick).")
    _chain_args(e, "auto")
    e.set_defaults(func=cmd_explain)
    try:
        from .cache_commands import add_cache_commands
    except ImportError:
        pass
    else:
        add_cache_commands(sub)
    return p


def main(argv=None) -> int:
    args = make_parser().parse_args(argv)          # usage errors: exit 2 (argparse)
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:          # `querycompute cache list | head`
        sys.stderr.close()
        return 0
    except (QueryError, TypeError, ValueError, OSError) as exc:
        print(f"querycompute: error: {exc}", file=sys.stderr)
        return 1
    except MemoryError as exc:
        print(f"querycompute: error: out of memory ({exc or 'the inputs do not fit'}); "
              f"use a smaller --n", file=sys.stderr)
        return 1
