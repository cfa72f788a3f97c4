"""`querycompute cache list|show|stats|clear|prune`: look into and tidy the kernel cache.

querycompute/cli/main.py calls `add_cache_commands(subparsers)`; each command stores its handler
as `args.func`, which takes the parsed args and returns the exit code. Output is for people
by default; `--json` prints one stable JSON document (sorted keys) on stdout.
"""
from __future__ import annotations

import argparse
import json
import sys

from ..backends.registry import NAMES
from ..cache import cache, format_size, parse_size
from ..errors import QueryError


def entries_text(n: int) -> str:
    """'1 entry', '2 entries'."""
    return f"{n} entry" if n == 1 else f"{n} entries"


def _checked(handler):
    """Run a cache command only when the cache root can be one: a QUERYCOMPUTE_CACHE_DIR
    that names a file is an error (exit 1), not an empty cache."""
    def run(args) -> int:
        root = cache.path
        if root.exists() and not root.is_dir():
            raise QueryError(f"the cache directory {root} is a file, not a directory; point "
                             f"QUERYCOMPUTE_CACHE_DIR at a directory (or unset it)")
        return handler(args)
    return run


def add_cache_commands(subparsers) -> argparse.ArgumentParser:
    """Register `cache` and its subcommands on an argparse subparsers object."""
    parser = subparsers.add_parser(
        "cache", help="inspect or tidy the compiled-kernel cache",
        description=f"Inspect or tidy the compiled-kernel cache (QUERYCOMPUTE_CACHE_DIR, "
                    f"now {cache.path}).")
    commands = parser.add_subparsers(dest="cache_command", metavar="COMMAND", required=True)

    def command(name: str, summary: str, description: str):
        return commands.add_parser(name, help=summary, description=description)

    p = command("list", "list entries, most recently used first",
                "List the cache's entries, most recently used first: key, backend, size, "
                "hits, last use and the query each was compiled for.")
    p.add_argument("--backend", choices=NAMES, help="only this backend's entries")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_checked(_list))

    p = command("show", "show one entry's metadata and source",
                "Show one entry's metadata and kernel source, found by a prefix of its key.")
    p.add_argument("key", metavar="KEY_PREFIX", help="the first digits of the entry's key")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_checked(_show))

    p = command("stats", "entries, bytes and hits",
                "Entries and bytes per backend, and the disk hits of all processes.")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_checked(_stats))

    p = command("clear", "remove entries",
                "Remove every entry (or one backend's); --dry-run lists what would go.")
    p.add_argument("--backend", choices=NAMES, help="only this backend's entries")
    p.add_argument("--dry-run", action="store_true", help="say what would be removed; remove nothing")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_checked(_clear))

    p = command("prune", "remove least recently used entries down to a size",
                "Remove the least recently used entries until the cache holds at most SIZE.")
    p.add_argument("--max-size", required=True, type=_size_argument, metavar="SIZE",
                   help="keep at most this much, e.g. 500MB, 2GB, 512MiB")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_checked(_prune))
    return parser


def _size_argument(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _print_json(document) -> None:
    print(json.dumps(document, sort_keys=True, indent=2))


def printable(text: str, keep: str = "") -> str:
    """`text` (taken from a cache entry's files, which anyone who wrote them chose) safe to
    print on a terminal: control characters (escape sequences, carriage returns, bidi
    overrides) are shown as Python escapes (\\x1b, \\u202e) instead of being sent; the
    characters in `keep` (e.g. newlines of a source) pass."""
    return "".join(c if c in keep or c.isprintable() else ascii(c)[1:-1] for c in str(text))


def _short(text: str, width: int) -> str:
    text = printable(" ".join(text.split()))
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
        print(f"{e.key[:16]}  {printable(e.backend):8} {format_size(e.size_bytes):>9} "
              f"{e.hit_count:>5}  {printable(e.last_used[:19].replace('T', ' ')):19}  "
              f"{_short(what, 60)}")
    total = sum(e.size_bytes for e in found)
    print(f"{entries_text(len(found))}, {format_size(total)} in {cache.path}")
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
        print(f"{name + ':':11}{printable(value)}")
    print(f"--- source: {entry.source_path} ---")
    source = printable(source, keep="\n\t")
    print(source, end="" if source.endswith("\n") else "\n")
    return 0


def _stats(args) -> int:
    s = cache.stats()
    if args.json:
        _print_json(s.as_dict())
        return 0
    untrusted = cache.disk.untrusted_reason
    state = ("on" if s.disk_enabled else f"off: {printable(untrusted)}" if untrusted
             else "off (QUERYCOMPUTE_CACHE=0)")
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
    """What was removed; entries that could not be (a read-only cache) are an error: exit 1."""
    if args.json:
        _print_json({"path": str(cache.path), "removed_entries": removal.entries,
                     "removed_bytes": removal.bytes, "failed_entries": removal.failed,
                     "error": removal.error})
    else:
        print(f"{verb} {entries_text(removal.entries)} ({format_size(removal.bytes)}) "
              f"from {cache.path}")
    if removal.failed:
        print(f"querycompute cache: could not remove {entries_text(removal.failed)}: "
              f"{removal.error}", file=sys.stderr)
        return 1
    return 0


def _clear(args) -> int:
    if args.dry_run:
        found = cache.entries(backend=args.backend)
        total = sum(e.size_bytes for e in found)
        if args.json:
            _print_json({"path": str(cache.path), "dry_run": True, "would_remove_entries": len(found),
                         "would_remove_bytes": total, "keys": [e.key for e in found]})
            return 0
        for e in found:
            print(f"would remove {e.key[:16]}  {printable(e.backend):8} "
                  f"{format_size(e.size_bytes):>9}  "
                  f"{_short(e.query or ', '.join(e.kernel_names) or '-', 60)}")
        print(f"would remove {entries_text(len(found))} ({format_size(total)}) from {cache.path} "
              f"(dry run: nothing removed)")
        return 0
    return _removal_report(args, "removed", cache.clear(backend=args.backend))


def _prune(args) -> int:
    return _removal_report(args, "pruned", cache.prune(args.max_size))
