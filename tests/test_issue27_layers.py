"""Issue 27 item 1 (DESIGN.md section 2): layers are folders and imports point down.

Walks every import of the package, at module level and inside functions, resolves it to the
module it names, and checks it against the layer table below. An import from a layer to one
it may not use fails with its file:line. The imports that still point up are listed in
KNOWN_UPWARD, each with what removes it; the list only shrinks: an entry that no longer occurs
fails too, so that it is deleted when its import goes. Function-local imports of this
package's own modules are counted per layer (KNOWN_LOCAL, upper bounds): a new one fails (the
rule allows them only for heavy optional dependencies: numba, pyopencl, cupy, wgpu, dask).
"""
from __future__ import annotations

import ast
import collections
import os

import querycompute

ROOT = os.path.dirname(os.path.abspath(querycompute.__file__))
PKG = "querycompute"

# layer -> the layers it may import. "base" is the package's top-level modules (errors,
# config, log, locks, sizes, after_fork); the package's __init__ is the API facade.
_DOWN = ["_codegen", "base", "cache", "backends", "frontend", "sources", "graph", "plan",
         "run", "dask", "api", "cli"]
MAY_IMPORT = {
    "_codegen": set(),
    "base": {"_codegen"},
    "cache": {"base", "_codegen"},
    "backends": {"base", "cache", "_codegen"},
    "frontend": {"base", "_codegen"},
    "sources": {"base", "frontend", "_codegen"},
    "graph": {"base", "sources", "frontend", "_codegen"},
    "plan": {"base", "graph", "sources", "frontend", "backends", "cache", "_codegen"},
    "run": {"base", "plan", "graph", "sources", "frontend", "backends", "cache", "_codegen"},
    "dask": {"base", "run", "plan", "graph", "sources", "frontend", "backends", "cache", "_codegen"},
    "api": {"base", "dask", "run", "plan", "graph", "sources", "frontend", "backends", "cache",
            "_codegen"},
    "cli": set(_DOWN) - {"cli"},
}

# Imports that still point up (importer -> imported), each with what removes it: none left
# (the last twenty went in session 13: dtype rules to _codegen/dtypes.py, the join and
# long-row references to backends/reference/, component_view to _codegen/elements.py, the
# stage runtimes' explain lines as describe_<op> methods the stage kinds call). A new one
# fails test_imports_point_down: move the code down instead of listing it here.
KNOWN_UPWARD: set = set()

# Function-local imports of the package's own modules, per importing layer: at most these
# (lower them as imports move to module level). plan's include the GPU kernel generators its
# stage kinds import only to explain a GPU plan (_codegen/ops: ~0.6 s to import, never needed
# to run on the cpu or numpy backends).
KNOWN_LOCAL = {"backends": 54, "plan": 48, "api": 20, "dask": 18, "run": 17, "_codegen": 10,
               "sources": 3, "frontend": 9, "cache": 7, "cli": 8, "graph": 0}


def _modules() -> dict:
    out = {}
    for d, _, files in os.walk(ROOT):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(d, f)
                rel = os.path.relpath(path, os.path.dirname(ROOT))[:-3].replace(os.sep, ".")
                out[rel[:-len(".__init__")] if rel.endswith(".__init__") else rel] = path
    return out


def _imports():
    """(importer, imported module, line, inside a function?) for every import of the package."""
    mods = _modules()
    for mod, path in sorted(mods.items()):
        tree = ast.parse(open(path).read(), path)
        is_pkg = path.endswith("__init__.py")
        in_function = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                in_function.update(id(n) for n in ast.walk(node) if n is not node)
        for node in ast.walk(tree):
            local = id(node) in in_function
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
                    base = base[:len(base) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                if target != PKG and not target.startswith(PKG + "."):
                    continue
                for alias in node.names:
                    sub = f"{target}.{alias.name}"
                    yield mod, sub if sub in mods else target, path, node.lineno, local
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith(PKG + "."):
                        yield mod, alias.name, path, node.lineno, local


def layer(mod: str) -> str:
    parts = mod.split(".")
    if len(parts) == 1:
        return "api"                      # querycompute/__init__.py: the public facade
    if parts[1] == "__main__":
        return "cli"
    return parts[1] if parts[1] in MAY_IMPORT else "base"


def _short(mod: str) -> str:
    return mod[len(PKG) + 1:] if mod.startswith(PKG + ".") else mod


def test_every_module_is_in_a_layer_folder_or_the_base():
    base = sorted(m for m in _modules() if layer(m) == "base")
    assert base == [f"{PKG}.{m}" for m in ("after_fork", "artifacts", "config", "errors", "locks", "log", "sizes")]


def test_imports_point_down():
    found, new = set(), []
    for mod, target, path, line, _ in _imports():
        a, b = layer(mod), layer(target)
        if a == b or b in MAY_IMPORT[a]:
            continue
        edge = f"{_short(mod)} -> {_short(target)}"
        found.add(edge)
        if edge not in KNOWN_UPWARD:
            new.append(f"{os.path.relpath(path, os.path.dirname(ROOT))}:{line}: {a} imports {b} "
                       f"({edge}); {a} may import only {', '.join(sorted(MAY_IMPORT[a]))}")
    assert not new, "imports that point up (DESIGN.md section 2):\n" + "\n".join(new)
    gone = sorted(KNOWN_UPWARD - found)
    assert not gone, f"these upward imports are gone: delete them from KNOWN_UPWARD: {gone}"


def test_no_cycle_between_layer_folders_outside_the_known_upward_imports():
    graph = collections.defaultdict(set)
    for mod, target, *_ in _imports():
        a, b = layer(mod), layer(target)
        if a != b and f"{_short(mod)} -> {_short(target)}" not in KNOWN_UPWARD:
            graph[a].add(b)
    order = []                             # a topological order exists iff there is no cycle
    state = {}

    def visit(n, path):
        if state.get(n) == 1:
            raise AssertionError(f"a circle between layers: {' -> '.join(path + [n])}")
        if state.get(n) == 2:
            return
        state[n] = 1
        for m in sorted(graph[n]):
            visit(m, path + [n])
        state[n] = 2
        order.append(n)
    for n in sorted(MAY_IMPORT):
        visit(n, [])
    assert set(order) == set(MAY_IMPORT)


def test_function_local_imports_of_the_package_do_not_grow():
    count = collections.Counter(layer(mod) for mod, _, _, _, local in _imports() if local)
    grown = {k: (v, KNOWN_LOCAL.get(k, 0)) for k, v in count.items() if v > KNOWN_LOCAL.get(k, 0)}
    assert not grown, ("new function-local imports of querycompute's own modules (layer: "
                       f"(now, allowed)): {grown}; import at module level, from a lower layer")
