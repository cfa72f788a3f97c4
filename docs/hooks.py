"""MkDocs hook: pages other work adds later may be missing from a checkout.

mkdocs.yml lists them under `extra.optional_pages`; a nav entry naming one of those that does
not exist (yet) is dropped instead of failing the strict build. Any other missing page still
fails it, so a typo in the nav is never hidden.
"""
from __future__ import annotations

from pathlib import Path


def _keep(entry, docs: Path, optional: set) -> bool:
    target = next(iter(entry.values())) if isinstance(entry, dict) else entry
    return not (isinstance(target, str) and target in optional and not (docs / target).exists())


def _prune(nav, docs: Path, optional: set):
    out = []
    for entry in nav:
        if isinstance(entry, dict):
            title, target = next(iter(entry.items()))
            if isinstance(target, list):
                entry = {title: _prune(target, docs, optional)}
        if _keep(entry, docs, optional):
            out.append(entry)
    return out


def on_config(config):
    optional = set(config.extra.get("optional_pages", ()))
    if config.nav and optional:
        config.nav = _prune(config.nav, Path(config.docs_dir), optional)
    return config
