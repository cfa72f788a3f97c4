"""The `querycompute` command (also `python -m querycompute`).

  querycompute demo                       example queries on this machine's default backend
  querycompute backends [--json]          which backends run here, and why not
  querycompute source  CHAIN [--dtype D | --input a:D ... | --field f:D ...] [--backend B]
  querycompute explain CHAIN [same options] [--n N]
  querycompute cache list|show|stats|clear|prune ...
The CHAIN text is parsed, never executed.
"""
from __future__ import annotations

import argparse
import json
import sys

from .errors import QueryError


def _chain_args(p: argparse.ArgumentParser, default_backend: str) -> None:
    p.add_argument("chain", help="e.g. 'select(lambda v: v*2).where(lambda v: v > 1000).sum()'")
    p.add_argument("--dtype", default="float32", help="element dtype of a single input (default float32)")
    p.add_argument("--input", action="append", default=[], metavar="NAME:DTYPE",
                   help="one input of a zip; repeat for each")
    p.add_argument("--field", action="append", default=[], metavar="NAME:DTYPE",
                   help="one column of a table; repeat for each")
    p.add_argument("--backend", default=default_backend)
    p.add_argument("--n", type=int, default=1_000_000, help="sequence length assumed for launch shapes")


def _build(args):
    from .cli_chain import chain_to_query, placeholder_source
    src = placeholder_source(args.dtype, args.input, args.field, args.n)
    return chain_to_query(args.chain, src)


def cmd_source(args) -> int:
    q, terminal = _build(args)
    print(q.source(args.backend, terminal=terminal))
    return 0


def cmd_explain(args) -> int:
    q, terminal = _build(args)
    print(q.explain(args.backend if args.backend != "auto" else None, terminal=terminal))
    return 0


def cmd_backends(args) -> int:
    from .backends.registry import backends
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
    p = argparse.ArgumentParser(prog="querycompute", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("demo", help="run example queries here and show results, timings and source")
    d.add_argument("--n", type=int, default=5_000_000, help="elements per example (default 5e6)")
    d.set_defaults(func=cmd_demo)
    b = sub.add_parser("backends", help="which backends can run here, and why not")
    b.add_argument("--json", action="store_true")
    b.set_defaults(func=cmd_backends)
    s = sub.add_parser("source", help="print the generated kernel source of a query chain")
    _chain_args(s, "cuda")
    s.set_defaults(func=cmd_source)
    e = sub.add_parser("explain", help="print the operation graph, fused plan and launch shapes")
    _chain_args(e, "auto")
    e.set_defaults(func=cmd_explain)
    try:
        from .cli_cache import add_cache_commands
    except ImportError:
        pass
    else:
        add_cache_commands(sub)
    return p


def main(argv=None) -> int:
    args = make_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (QueryError, TypeError, ValueError) as exc:
        print(f"querycompute: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:          # `querycompute cache list | head`
        sys.stderr.close()
        return 0
