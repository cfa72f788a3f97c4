"""The kernel compiler (querycompute._codegen) never imports the query layer: every import in
it is the standard library, NumPy, or another module of _codegen itself."""
import ast
from pathlib import Path

import querycompute._codegen as codegen

ROOT = Path(codegen.__file__).parent


def _imports(path: Path):
    depth = len(path.relative_to(ROOT).parts) - 1     # folders below _codegen
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield node.lineno, a.name, 0
        elif isinstance(node, ast.ImportFrom):
            yield node.lineno, node.module or "", node.level - depth


def test_codegen_imports_nothing_from_the_query_layer():
    bad = []
    for path in sorted(ROOT.rglob("*.py")):
        for line, module, escape in _imports(path):
            # a relative import may climb at most to _codegen itself (escape <= 1)
            if escape > 1 or (module.startswith("querycompute") and
                              not module.startswith("querycompute._codegen")):
                bad.append(f"{path.relative_to(ROOT)}:{line}: {module or '.'}")
    assert not bad, "the kernel compiler imports the query layer:\n" + "\n".join(bad)
