"""How a Query shows itself: `repr(q)` in a console and `q._repr_html_()` in a notebook.

Both say what the query reads (the source kind, each column's name and dtype, n) and what it
does (each operator with its lambda's text, as written), and which backend it is pinned to.
Nothing runs and nothing compiles; a lambda whose source can't be read shows as `<lambda>`.
"""
from __future__ import annotations

from ..graph.graph import Count, JoinArg


def _fn_text(fn) -> str:
    if fn is None:
        return ""
    if isinstance(fn, Count):
        return str(fn.value)
    if isinstance(fn, JoinArg):
        return "<other query>, " + _fn_text(fn.key)
    from ..plan.plan import slot_info
    try:
        return slot_info(fn)[0].text
    except Exception:                 # no source to read (a lambda typed in the REPL)
        return getattr(fn, "__name__", type(fn).__name__)


def steps(q) -> list[str]:
    """'select(lambda v: v * 2)', ... one per operator of the chain."""
    out = []
    for node, fn in zip(q.nodes(), q._ops):
        arg = getattr(fn, "fn", fn)             # a scan's function inside its ScanArg
        text = _fn_text(arg)
        if hasattr(fn, "seed"):
            text = f"{text}, seed={fn.seed!r}"
        out.append(f"{node.kind}({text})")
    return out


def columns(q) -> tuple[list[tuple[str, str]], str]:
    """([(name, dtype)], n as text) of the query's source, without running anything."""
    src = q._source
    try:
        cols = src.columns()
        n = str(src.length(cols))
    except Exception as exc:                     # an input that fails only when it is read
        return [], f"? ({type(exc).__name__})"
    if src.kind == "range":
        return [("range" + repr(tuple(src.range_args)), "int64")], n
    names = src.fields or (("x",) if len(cols) == 1 else tuple(f"x{i}" for i in range(len(cols))))
    strings = src._table.strings if src._table is not None else ()
    return [(name, "str (int32 codes)" if name in strings else d)   # string_columns.py
            for name, d in zip(names, src.dtypes(cols))], n


def text(q) -> str:
    cols, n = columns(q)
    what = ", ".join(f"{name}: {dt}" for name, dt in cols)
    chain = "".join(f".{s}" for s in steps(q))
    return f"<Query {q._source.kind}({what}; n={n}){chain} on {q._backend}>"


def html_table(q) -> str:
    import html         # (only for a notebook's view: not on a compile's imports, registry.py)
    cols, n = columns(q)
    esc = html.escape
    rows = "".join(f"<tr><td><code>{esc(name)}</code></td><td>{esc(dt)}</td></tr>" for name, dt in cols)
    ops = "".join(f"<li><code>.{esc(s)}</code></li>" for s in steps(q)) or "<li>(no operator yet)</li>"
    return (f"<div><b>querycompute Query</b> over {esc(q._source.kind)}, n={esc(n)}, backend "
            f"<code>{esc(q._backend)}</code>"
            f"<table><tr><th>column</th><th>dtype</th></tr>{rows}</table>"
            f"<ol>{ops}</ol></div>")
