"""Every script under examples/ runs to completion (in a fresh process, as a user runs it)."""
import pathlib
import subprocess
import sys

import pytest

EXAMPLES = sorted((pathlib.Path(__file__).parent.parent / "examples").glob("*.py"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_runs(path, tmp_path):
    env = {**__import__("os").environ, "QUERYCOMPUTE_CACHE_DIR": str(tmp_path / "cache")}
    r = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip()
