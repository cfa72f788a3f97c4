"""Issue 17 item 10: the docs site builds strictly, and the documentation's code runs.

- `mkdocs build --strict` in a subprocess (what CI checks; skipped only without mkdocs).
- Every ```python block of the README and the guide (and the site's home page, the backends
  and cache pages) runs, in order, one namespace per page, so a later block may use what an
  earlier one defined. The namespace starts with `np`, `qc` and a small float32 array `x` (as
  the prose assumes). Each block is written to a file of its own before it runs: the frontend
  reads lambdas from their source file, as it does for a user's script.
- A block that cannot run by itself is marked in the page, visibly: ```python title="pseudo..."
  (the site shows the title over the block), or an HTML comment `<!-- norun: why -->` on the line before it.
  The markers are counted, so they stay rare.
- No page cites a file outside the repository.
"""
from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
RUN_PAGES = ["README.md", "docs/index.md", "docs/guide.md", "docs/backends.md", "docs/cache.md"]
FENCE = re.compile(r"^```(\S*)(.*)$")


def code_blocks(path: Path) -> list[tuple[int, str, str, bool]]:
    """(line, language, code, runnable) for every fenced block of a Markdown file."""
    lines = path.read_text().splitlines()
    blocks, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start, lang, attrs = i, m.group(1), m.group(2)
        before = next((lines[j].strip() for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        body, i = [], i + 1
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        i += 1
        runnable = 'title="pseudo' not in attrs and not before.startswith("<!-- norun")
        blocks.append((start + 1, lang, "\n".join(body) + "\n", runnable))
    return blocks


def build_api_page(tmp_path) -> str:
    """`mkdocs build --strict` into tmp_path (skips without mkdocs): the API page's HTML."""
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("mkdocstrings") is None:
        pytest.skip("mkdocs / mkdocstrings not installed (pip install -e '.[docs]')")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
                       cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
    return (tmp_path / "site" / "api" / "index.html").read_text()


def test_item10_mkdocs_build_strict(tmp_path):
    api = build_api_page(tmp_path)
    for name in ("Query", "order_by", "group_by", "CompiledQuery", "EmptySequenceError", "CacheAPI"):
        assert name in api, f"the API reference lacks {name}"
    # every page of the nav was built (a page the nav names that is missing fails --strict)
    # pages other work adds later (configuration, distributed) are in the nav once they exist
    optional = [p.stem for p in (ROOT / "docs").glob("*.md") if p.stem in ("configuration", "distributed")]
    for page in ("guide", "backends", "cache", "performance", "architecture", *optional):
        assert (tmp_path / "site" / page / "index.html").exists()
        assert f'href="{page}/"' in (tmp_path / "site" / "index.html").read_text(), f"{page} is not in the nav"
    assert not (tmp_path / "site" / "hooks.py").exists()


@pytest.mark.parametrize("page", RUN_PAGES)
def test_item10_code_blocks_run(page, tmp_path, request):
    import querycompute as qc
    if page == "docs/cache.md":       # its blocks prune and clear: a cache of their own
        request.getfixturevalue("private_cache")
    blocks = [b for b in code_blocks(ROOT / page) if b[1] == "python"]
    assert blocks, f"{page} has no python block"
    ns = {"__name__": "docs_" + Path(page).stem, "np": np, "qc": qc,
          "x": np.random.default_rng(0).random(1000, dtype=np.float32) * 2000}
    ran = 0
    for line, _, code, runnable in blocks:
        if not runnable:
            continue
        f = tmp_path / f"{Path(page).stem}_line{line}.py"
        f.write_text(code)
        try:
            exec(compile(code, str(f), "exec"), ns)       # noqa: S102  (the page's own code)
        except Exception as exc:
            raise AssertionError(f"{page} line {line}: the block raised {exc!r}\n{code}") from exc
        ran += 1
    assert ran, f"{page}: every block is marked as not runnable"


def test_item10_norun_markers_are_rare():
    skipped = {page: sum(not b[3] for b in code_blocks(ROOT / page) if b[1] == "python")
               for page in RUN_PAGES}
    # cache.md: the backend author's protocol, which needs a device's compiler (two blocks)
    assert skipped == {**dict.fromkeys(RUN_PAGES, 0), "docs/cache.md": 2}, skipped


def _pages():
    return [ROOT / "README.md", ROOT / "benchmarks" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_item10_no_page_references_files_outside_the_repo():
    for page in _pages():
        text = page.read_text()
        assert "DESIGN.md" not in text, f"{page.name} cites DESIGN.md, which is not in the repository"
        for target in re.findall(r"\]\(([^)#\s]+)", text):
            if re.match(r"[a-z]+://", target):
                continue
            assert (page.parent / target).resolve().is_relative_to(ROOT), (page.name, target)
            assert (page.parent / target).exists(), f"{page.name} links to missing {target}"
