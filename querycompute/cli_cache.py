"""`querycompute cache list|show|stats|clear|prune`: look into and tidy the kernel cache.

querycompute/cli.py calls `add_cache_commands(subparsers)`; each command stores its handler
as `args.func`, which takes the parsed args and returns the exit code. Output is for people
by default; `--json` prints one stable JSON document (sorted keys) on stdout.
"""
from __future__ import annotations

import argparse
import json
import sys

from .cache import cache, format_size, parse_size


def add_cache_commands(subparsers) -> argparse.ArgumentParser:
    """Register `cache` and its subcommands on an argparse subparsers object."""
    parser = subparsers.add_parser(
        "cache", help="inspect or tidy the compiled-kernel cache",
        description=f"Inspect or tidy the compiled-kernel cache (QUERYCOMPUTE_CACHE_DIR, "
                    f"now {cache.path}).")
    commands = parser.add_subparsers(dest="cache_command", metavar="COMMAND", required=True)

    p = commands.add_parser("list", help="list entries, most recently used first")
    p.add_argument("--backend", help="only this backend's entries (cpu, cuda, opencl, ...)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_list)

    p = commands.add_parser("show", help="show one entry's metadata and source")
    p.add_argument("key", metavar="KEY_PREFIX", help="the first digits of the entry's key")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_show)

    p = commands.add_parser("stats", help="entries, bytes and hits")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_stats)

    p = commands.add_parser("clear", help="remove entries")
    p.add_argument("--backend", help="only this backend's entries")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_clear)

    p = commands.add_parser("prune", help="remove least recently used entries down to a size")
    p.add_argument("--max-size", required=True, type=_size_argument, metavar="SIZE",
                   help="keep at most this much, e.g. 500MB, 2GB, 512MiB")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_prune)
    return parser


def _size_argument(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _print_json(document) -> None:
    print(json.dumps(document, sort_keys=True, indent=2))


def _short(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[:width - 3] + "..."


def _list(args) -> int:
    found = cache.entries(backend=args.backend)
    if args.json:
        _print_json({"path": str(cache.path), "entries": [e.as_dict() for e in found]})
        return 0
    if not found:
        which = f" for backend {args.backend}" if args.backend else ""
        print(f"no cache entries{which} in {cache.path}")
        return 0
    print(f"{'KEY':16}  {'BACKEND':8} {'SIZE':>9} {'HITS':>5}  {'LAST USED':19}  KERNELS / QUERY")
    for e in found:
        what = ", ".join(e.kernel_names) or "-"
        if e.query:
            what += f"  {e.query}"
        print(f"{e.key[:16]}  {e.backend:8} {format_size(e.size_bytes):>9} {e.hit_count:>5}  "
              f"{e.last_used[:19].replace('T', ' '):19}  {_short(what, 60)}")
    total = sum(e.size_bytes for e in found)
    print(f"{len(found)} entries, {format_size(total)} in {cache.path}")
    return 0


def _show(args) -> int:
    try:
        entry = cache.find(args.key)
    except KeyError as exc:
        print(f"querycompute cache show: {exc.args[0]}", file=sys.stderr)
        return 1
    source = entry.source()
    if args.json:
        _print_json(dict(entry.as_dict(), source=source))
        return 0
    rows = [("key", entry.key), ("backend", entry.backend), ("kind", entry.kind),
            ("kernels", ", ".join(entry.kernel_names) or "-"), ("query", entry.query or "-"),
            ("dtypes", ", ".join(entry.dtypes) or "-"), ("compiler", entry.compiler),
            ("device", entry.device), ("options", " ".join(entry.options) or "-"),
            ("created", entry.created), ("last used", entry.last_used),
            ("compile", f"{entry.compile_ms:.1f} ms"), ("hits", str(entry.hit_count)),
            ("size", format_size(entry.size_bytes)), ("path", str(entry.path))]
    rows += [(name, json.dumps(value)) for name, value in sorted(entry.extra.items())]
    for name, value in rows:
        print(f"{name + ':':11}{value}")
    print(f"--- source: {entry.source_path} ---")
    print(source, end="" if source.endswith("\n") else "\n")
    return 0


def _stats(args) -> int:
    s = cache.stats()
    if args.json:
        _print_json(s.as_dict())
        return 0
    state = "on" if s.disk_enabled else "off (QUERYCOMPUTE_CACHE=0)"
    print(f"path:      {s.path}")
    print(f"disk:      {state}")
    print(f"entries:   {s.entries} ({format_size(s.bytes)})")
    for backend, n in s.entries_by_backend.items():
        print(f"  {backend}: {n}")
    if s.incomplete:
        print(f"incomplete or damaged: {s.incomplete} (removed by clear or prune)")
    print(f"disk hits (all processes, all time): {s.disk_hits_all_time}")
    return 0


def _removal_report(args, verb: str, removal) -> int:
    if args.json:
        _print_json({"path": str(cache.path), "removed_entries": removal.entries,
                     "removed_bytes": removal.bytes})
    else:
        print(f"{verb} {removal.entries} entries ({format_size(removal.bytes)}) "
              f"from {cache.path}")
    return 0


def _clear(args) -> int:
    return _removal_report(args, "removed", cache.clear(backend=args.backend))


def _prune(args) -> int:
    return _removal_report(args, "pruned", cache.prune(args.max_size))
