"""Issue 26 item 9: the guide's snippets run alone; the API reference shows qc.query() and the terminals.

- Every runnable ```python block of docs/guide.md runs by itself in a fresh namespace (a reader
  copies one block, not the page), written to a file of its own first since the frontend reads
  lambdas from their source file. Blocks are selected and skipped exactly as
  tests/test_issue17_docs.py does (its `code_blocks`: `title="pseudo..."` or `<!-- norun -->`).
- docs/api.md names the function `querycompute.api.query.query` (`::: querycompute.query` is the
  module, which rendered Query a second time) and renders Query with the members it inherits
  from QueryTerminals, where every terminal lives.
- With mkdocs installed, the built API page has query(), Query once, and the terminals
  (about 5 s; skipped without mkdocs / mkdocstrings).
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from test_issue17_docs import build_api_page, code_blocks

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "guide.md"
TERMINALS = ("to_array", "sum", "count", "first", "agg", "aggregate", "compile", "explain")


def _runnable_guide_blocks():
    return [pytest.param(line, code, id=f"line{line}")
            for line, lang, code, runnable in code_blocks(GUIDE) if lang == "python" and runnable]


@pytest.mark.parametrize("line,code", _runnable_guide_blocks())
def test_guide_block_runs_alone(line, code, tmp_path):
    f = tmp_path / f"guide_line{line}.py"
    f.write_text(code)
    ns = {"__name__": f"guide_line{line}"}          # nothing given: no qc, np, x, lo
    try:
        exec(compile(code, str(f), "exec"), ns)       # noqa: S102  (the page's own code)
    except Exception as exc:
        raise AssertionError(f"docs/guide.md line {line}: the block does not run alone: {exc!r}\n{code}") from exc


def _directives() -> dict[str, list[str]]:
    """`::: target` of docs/api.md -> the indented option lines under it."""
    out, cur = {}, None
    for ln in (ROOT / "docs" / "api.md").read_text().splitlines():
        m = re.match(r":::\s+(\S+)\s*$", ln)
        if m:
            cur = m.group(1)
            assert cur not in out, f"docs/api.md renders {cur} twice"
            out[cur] = []
        elif cur and ln.startswith((" ", "\t")) and ln.strip():
            out[cur].append(ln.strip())
        elif ln.strip():
            cur = None
    return out


def test_api_md_names_the_query_function_and_renders_the_terminals():
    import querycompute as qc
    d = _directives()
    assert "querycompute.query" not in d, "`::: querycompute.query` renders the module, not qc.query()"
    assert "querycompute.api.query.query" in d
    mod = sys.modules["querycompute.api.query"]     # the module, as griffe sees the path
    assert mod.query is qc.query and mod.range is qc.range
    # Query once; the terminals are QueryTerminals' members: inherited, or rendered themselves
    queries = [t for t in d if t.split(".")[-1] == "Query"]
    assert queries == ["querycompute.Query"], queries
    inherits = "inherited_members: true" in d["querycompute.Query"]
    assert inherits or any(t.endswith("QueryTerminals") for t in d), \
        "Query's terminals live on QueryTerminals, which the API reference does not render"
    for name in TERMINALS:
        assert name not in vars(qc.Query) and hasattr(qc.Query, name), name


def test_built_api_page_lists_query_and_terminals(tmp_path):
    ids = re.findall(r'\bid="([^"]+)"', build_api_page(tmp_path))
    assert "querycompute.api.query.query" in ids, "the API page lacks the query() function"
    assert "querycompute.query" not in ids, "the API page renders the querycompute.query module"
    assert [i for i in ids if i.endswith(".Query")] == ["querycompute.Query"], "Query is not rendered once"
    for name in TERMINALS:
        assert f"querycompute.Query.{name}" in ids, f"the API page lacks the terminal Query.{name}"
