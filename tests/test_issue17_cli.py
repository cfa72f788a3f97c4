"""Issue 17 item 8: the CLI's conventions (version, backend choices, exit codes, --n parsing,
--json, descriptions, cache clear --dry-run, "1 entry"). In-process through cli.main (no
kernel is compiled: source/explain need no device)."""
import json
import subprocess
import sys

import numpy as np
import pytest

import querycompute as qc
from querycompute.cli.main import main

from cache_worker import child_env, run_worker


def _exit_code(argv) -> int:
    try:
        return main(argv)
    except SystemExit as stop:           # argparse: usage errors, --version, --help
        return stop.code


def test_item8_version(capsys):
    assert _exit_code(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"querycompute {qc.__version__}"


@pytest.mark.parametrize("argv", [
    ["source", "sum()", "--backend", "banana"],
    ["source", "sum()", "--backend", "auto"],          # source shows one dialect: no auto
    ["explain", "sum()", "--n", "-5"],
    ["explain", "sum()", "--n", "abc"],
    ["cache", "prune", "--max-size=-1MB"],
    ["cache", "list", "--backend", "banana"],
])
def test_item8_usage_errors_exit_2(argv, capsys):
    assert _exit_code(argv) == 2
    err = capsys.readouterr().err
    assert "usage:" in err and "error:" in err and "Traceback" not in err


def test_item8_query_errors_exit_1_without_traceback(capsys):
    assert _exit_code(["explain", "frob()"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("querycompute: error:") and "unknown operator" in err
    # more than this machine's memory: a clear message, not a MemoryError traceback
    assert _exit_code(["explain", "sum()", "--n", "1e18"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("querycompute: error: --n 1000000000000000000") and "smaller --n" in err


def test_item8_n_accepts_scientific_notation(capsys):
    assert _exit_code(["explain", "select(lambda v: v * 2).sum()", "--n", "1e6", "--backend",
                       "numpy", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["n"] == 1_000_000 and "n=1000000" in doc["explain"] and doc["backend"] == "numpy"


def test_item8_source_json(capsys):
    assert _exit_code(["source", "where(lambda v: v > 1).count()", "--backend", "opencl",
                       "--dtype", "int32", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    q = qc.query(np.zeros(3, np.int32)).where(lambda v: v > 1)
    assert doc["source"].strip() == q.source("opencl", terminal="count").strip()
    assert doc["dtypes"] == ["int32"] and doc["backend"] == "opencl"


def test_item8_explain_auto_names_the_backend_it_shows(capsys):
    assert _exit_code(["explain", "sum()", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["backend"] in qc.backends() and doc["backend"] != "auto"


def test_item8_help_shows_usage_lines_and_descriptions(capsys):
    assert _exit_code(["--help"]) == 0
    out = capsys.readouterr().out
    assert "querycompute source  CHAIN" in out and "querycompute cache list|show" in out
    assert _exit_code(["explain", "--help"]) == 0
    assert "operation graph" in capsys.readouterr().out
    assert _exit_code(["cache", "clear", "--help"]) == 0
    assert "--dry-run" in capsys.readouterr().out


def _cli(cache_dir, *argv):
    """`python -m querycompute ARGV...` in a fresh process (the cache root follows the
    environment of a process's first use)."""
    return subprocess.run([sys.executable, "-m", "querycompute", *argv], text=True,
                          capture_output=True, env=child_env(cache_dir), timeout=300)


def test_item8_cache_clear_dry_run_and_entry_counts(tmp_path):
    root = tmp_path / "cache"
    run_worker(root, {"action": "binary", "backend": "opencl", "compiler": "fakecc 1.0",
                      "source": "__kernel void a() {}\n", "query": "query a"})
    done = _cli(root, "cache", "clear", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert "would remove 1 entry (" in done.stdout and "nothing removed" in done.stdout
    assert "query a" in done.stdout
    listed = _cli(root, "cache", "list").stdout
    assert "1 entry," in listed                      # the dry run removed nothing
    assert "removed 1 entry (" in _cli(root, "cache", "clear").stdout
    assert "0 entries" in _cli(root, "cache", "stats").stdout or \
        "no cache entries" in _cli(root, "cache", "list").stdout


def test_item8_cache_dir_that_is_a_file_is_an_error(tmp_path):
    path = tmp_path / "not-a-dir"
    path.write_text("x")
    done = _cli(path, "cache", "list")
    assert done.returncode == 1
    assert done.stderr.startswith("querycompute: error:") and "is a file, not a directory" in done.stderr
